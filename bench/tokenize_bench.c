/* Encoding throughput of a checkpoint's tokenizer through the runtime's C
 * API, one thread: tokenize_bench DIR TEXT REPEATS IDS_OUT prints the best
 * time of REPEATS encodings of the whole file in ms, and writes the ids
 * (one per line) for the caller to compare. */
#include "xfmr-rt/xfmr_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  char err[512];
  if (argc != 5) {
    fprintf(stderr, "usage: tokenize_bench DIR TEXT REPEATS IDS_OUT\n");
    return 2;
  }
  xfmr_tokenizer_enable_sentencepiece();
  xfmr_tokenizer *tokenizer = xfmr_tokenizer_load(argv[1], err, sizeof(err));
  if (!tokenizer) {
    fprintf(stderr, "tokenize_bench: %s\n", err);
    return 1;
  }
  FILE *in = fopen(argv[2], "rb");
  if (!in)
    return 1;
  fseek(in, 0, SEEK_END);
  long size = ftell(in);
  fseek(in, 0, SEEK_SET);
  char *text = malloc(size);
  if (fread(text, 1, size, in) != (size_t)size)
    return 1;
  fclose(in);
  size_t capacity = size + 16;
  int32_t *ids = malloc(capacity * sizeof(int32_t));
  double best = 1e300;
  int64_t count = 0;
  for (int r = 0; r < atoi(argv[3]); ++r) {
    double start = now_ms();
    count = xfmr_tokenizer_encode(tokenizer, text, size, ids, capacity, err, sizeof(err));
    double took = now_ms() - start;
    if (count < 0) {
      fprintf(stderr, "tokenize_bench: %s\n", err);
      return 1;
    }
    if (took < best)
      best = took;
  }
  FILE *out = fopen(argv[4], "w");
  for (int64_t i = 0; i < count; ++i)
    fprintf(out, "%d\n", ids[i]);
  fclose(out);
  printf("%.3f\n", best);
  xfmr_tokenizer_free(tokenizer);
  return 0;
}
