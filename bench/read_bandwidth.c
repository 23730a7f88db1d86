/* The machine's memory read bandwidth, as a decode step meets it: every
 * OpenMP thread sums its contiguous share of a buffer much larger than the
 * caches, as vectors, several times; prints the best GB/s. The buffer lies
 * on 2 MiB pages, as the runtime puts weights (on 4 KiB pages TLB misses
 * halve the bandwidth). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

int main(int argc, char **argv) {
  size_t bytes = (argc > 1 ? (size_t)atol(argv[1]) : 1024) << 20;
  size_t count = bytes / sizeof(float);
  float *data = aligned_alloc(2 << 20, count * sizeof(float));
  madvise(data, count * sizeof(float), MADV_HUGEPAGE);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < count; ++i)
    data[i] = (float)(i & 1023);
  double best = 0;
  float sink = 0;
  for (int repeat = 0; repeat < 20; ++repeat) {
    double start = omp_get_wtime();
    float total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (size_t i = 0; i < count; ++i)
      total += data[i];
    double seconds = omp_get_wtime() - start;
    sink += total;
    if (count * sizeof(float) / seconds / 1e9 > best)
      best = count * sizeof(float) / seconds / 1e9;
  }
  printf("%.2f\n", best + (sink == -1.0f ? 1 : 0));
  free(data);
  return 0;
}
