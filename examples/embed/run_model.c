/* Embedding a compiled model in a C program.
 *
 *   xfmrc config.json --emit=obj --name=model -o model.o
 *   xfmrc config.json --emit=header --name=model -o model.h
 *   cc -I. -I<xfmr>/include run_model.c model.o <xfmr>/build/lib/libxfmr_runtime.a \
 *      -lstdc++ -lm -L/usr/lib/llvm-22/lib -lomp -o run_model
 *   ./run_model path/to/checkpoint 12 7 99 3
 *
 * Loads the weights from a .safetensors file or checkpoint directory as the
 * compiled executable does (names resolved, types converted), runs one
 * batch of token ids (the first input row; the others stay padding) and
 * prints the five highest logits of each position as `id:logit`. */

#include "model.h"
#include "xfmr-rt/xfmr_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t element_count(int i) {
  size_t count = 1;
  for (int d = 0; d < model_arg_ranks[i]; ++d)
    count *= (size_t)model_arg_shapes[i][d];
  return count;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s weights token-id...\n", argv[0]);
    return 2;
  }
  void *args[MODEL_NUM_ARGS];
  int ids = -1, mask = -1, logits = -1;
  for (int i = 0; i < MODEL_NUM_ARGS; ++i) {
    size_t bytes = element_count(i) * xfmr_dtype_size((xfmr_dtype)model_arg_dtypes[i]);
    args[i] = model_arg_kinds[i] == MODEL_WEIGHT ? NULL : calloc(1, bytes);
    if (!strcmp(model_arg_names[i], "input_ids"))
      ids = i;
    else if (!strcmp(model_arg_names[i], "attention_mask"))
      mask = i;
    else if (model_arg_kinds[i] == MODEL_OUTPUT)
      logits = i;
  }
  char err[512];
  xfmr_model_weights *weights =
      xfmr_model_weights_load(model_manifest, argv[1], args, err, sizeof(err));
  if (!weights) {
    fprintf(stderr, "error: %s\n", err);
    return 1;
  }
  if (ids < 0 || mask < 0 || logits < 0) {
    fprintf(stderr, "error: expected a decoder-only model (input_ids, attention_mask -> logits)\n");
    return 1;
  }

  int64_t seq_len = model_arg_shapes[ids][1];
  int length = argc - 2;
  if (length > seq_len) {
    fprintf(stderr, "error: %d tokens, the model takes at most %lld\n", length, (long long)seq_len);
    return 1;
  }
  for (int t = 0; t < length; ++t) {
    ((int32_t *)args[ids])[t] = atoi(argv[2 + t]);
    ((int32_t *)args[mask])[t] = 1;
  }
  /* Padding rows of the batch attend to one token each. */
  for (int64_t row = 1; row < model_arg_shapes[ids][0]; ++row)
    ((int32_t *)args[mask])[row * seq_len] = 1;

  model_forward_packed(args);

  int64_t vocab = model_arg_shapes[logits][2];
  char *taken = malloc((size_t)vocab);
  printf("# sequence 0: %d positions x %lld logits\n", length, (long long)vocab);
  for (int t = 0; t < length; ++t) {
    const float *row = (const float *)args[logits] + t * vocab;
    memset(taken, 0, (size_t)vocab);
    for (int k = 0; k < 5 && k < vocab; ++k) {
      int64_t best = -1;
      for (int64_t v = 0; v < vocab; ++v)
        if (!taken[v] && (best < 0 || row[v] > row[best]))
          best = v;
      taken[best] = 1;
      printf("%s%lld:%.4f", k ? " " : "", (long long)best, row[best]);
    }
    printf("\n");
  }
  free(taken);
  for (int i = 0; i < MODEL_NUM_ARGS; ++i)
    if (model_arg_kinds[i] != MODEL_WEIGHT)
      free(args[i]);
  xfmr_model_weights_free(weights);
  return 0;
}
