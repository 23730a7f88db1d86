/* The machine's fp32 FMA peak: every OpenMP thread runs independent
 * dependency chains of vector FMAs (AVX-512 where the compiler targets it,
 * else AVX2/FMA) long enough to hide the FMA latency. Prints GFLOP/s. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define STORE _mm512_storeu_ps
#else
typedef __m256 vec;
#define LANES 8
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
#define STORE _mm256_storeu_ps
#endif
/* Enough independent chains to cover FMA latency x ports, few enough to stay
 * in registers with the two operands (AVX2 has 16 vector registers). */
#if defined(__AVX512F__)
#define CHAINS 16
#else
#define CHAINS 12
#endif

int main(int argc, char **argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 200000000L;
  double start = omp_get_wtime();
  float sink = 0;
  int threads = 1;
#pragma omp parallel reduction(+ : sink)
  {
#pragma omp single
    threads = omp_get_num_threads();
    vec a = SET1(0.999999f), b = SET1(1e-7f);
    vec acc[CHAINS];
    for (int c = 0; c < CHAINS; ++c)
      acc[c] = SET1((float)c);
    for (long i = 0; i < iterations / CHAINS; ++i)
      for (int c = 0; c < CHAINS; ++c)
        acc[c] = FMA(acc[c], a, b);
    vec total = acc[0];
    for (int c = 1; c < CHAINS; ++c)
      total = ADD(total, acc[c]);
    float lanes[LANES];
    STORE(lanes, total);
    sink += lanes[0];
  }
  double seconds = omp_get_wtime() - start;
  double flops = 2.0 * LANES * (double)(iterations / CHAINS) * CHAINS * threads;
  printf("%.1f GFLOP/s (%d threads, %d-lane FMA, checksum %g)\n", flops / seconds * 1e-9, threads,
         LANES, sink);
  return 0;
}
