/* Prints the next-token distribution xfmr_sampling_probabilities gives for
 * logits and a history read from stdin:
 *   sampling TEMPERATURE TOP_K TOP_P REPEAT_PENALTY REPEAT_LAST_N < cases
 * where each case is "V v1 ... vV H h1 ... hH"; prints V probabilities. */
#include "xfmr-rt/xfmr_runtime.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 6)
    return 2;
  xfmr_sampling s = {atof(argv[1]), atoll(argv[2]), atof(argv[3]), atof(argv[4]), atoll(argv[5])};
  long vocab, history;
  while (scanf("%ld", &vocab) == 1) {
    float *logits = malloc(vocab * sizeof(float)), *probs = malloc(vocab * sizeof(float));
    for (long v = 0; v < vocab; ++v)
      if (scanf("%f", &logits[v]) != 1)
        return 1;
    if (scanf("%ld", &history) != 1)
      return 1;
    int32_t *seen = malloc((history + 1) * sizeof(int32_t));
    for (long h = 0; h < history; ++h)
      if (scanf("%d", &seen[h]) != 1)
        return 1;
    xfmr_sampling_probabilities(logits, vocab, &s, seen, (size_t)history, probs);
    for (long v = 0; v < vocab; ++v)
      printf("%.9g%c", probs[v], v + 1 == vocab ? '\n' : ' ');
    free(logits);
    free(probs);
    free(seen);
  }
  return 0;
}
