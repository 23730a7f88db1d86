/* Generating text from a C program with a compiled generator.
 *
 *   xfmrc CHECKPOINT --generate --emit=obj --name=model -o model.o
 *   xfmrc CHECKPOINT --generate --emit=header --name=model -o model.h
 *   cc -I. -I<xfmr>/include generate.c model.o <xfmr>/build/lib/libxfmr_runtime.a \
 *      -lstdc++ -lm -L/usr/lib/llvm-22/lib -lomp -o generate
 *   ./generate CHECKPOINT "prompt" 20
 *
 * Tokenizes the prompt with the checkpoint's tokenizer and submits it to the
 * engine (an encoder-decoder encodes it instead and starts the decoder from
 * its start token), which reads it through the prefill entry and decodes
 * greedily up to the end-of-sequence token or N tokens; prints the text as
 * it comes (a decoder's after its prompt), as the generator executable does
 * with --temp 0. */

#include "model.h"
#include "xfmr-rt/xfmr_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *message) {
  fprintf(stderr, "error: %s: %s\n", what, message);
  exit(1);
}

/* Prints each token's text as the engine generates it. */
static void print_token(void *user, int32_t token, const char *text, size_t length) {
  (void)user;
  (void)token;
  fwrite(text, 1, length, stdout);
}

#ifndef MODEL_ENCODE_NUM_ARGS
/* Prints the text of ids[0 .. count). */
static void print_text(const xfmr_tokenizer *tokenizer, const int32_t *ids, size_t count) {
  size_t length = xfmr_tokenizer_decode(tokenizer, ids, count, NULL, 0);
  char *text = malloc(length + 1);
  xfmr_tokenizer_decode(tokenizer, ids, count, text, length + 1);
  fwrite(text, 1, length, stdout);
  free(text);
}
#endif

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s CHECKPOINT PROMPT TOKENS\n", argv[0]);
    return 2;
  }
  const char *checkpoint = argv[1], *prompt = argv[2];
  int steps = atoi(argv[3]);
  char err[512];
  xfmr_tokenizer *tokenizer = xfmr_tokenizer_load(checkpoint, err, sizeof(err));
  if (!tokenizer)
    die(checkpoint, err);
#ifdef MODEL_ENCODE_NUM_ARGS
  xfmr_generator *generator = xfmr_seq2seq_generator_create(
      model_encode_manifest, model_encode_packed, model_prefill_manifest, model_prefill_packed,
      model_decode_manifest, model_decode_packed, checkpoint, err, sizeof(err));
#else
  xfmr_generator *generator =
      xfmr_generator_create(model_prefill_manifest, model_prefill_packed, model_decode_manifest,
                            model_decode_packed, checkpoint, err, sizeof(err));
#endif
  if (!generator)
    die(checkpoint, err);
  int64_t batch = xfmr_generator_batch(generator);

  size_t capacity = (size_t)xfmr_generator_context(generator);
  int32_t *tokens = malloc((capacity + 1) * sizeof(int32_t));
  int64_t count =
      xfmr_tokenizer_encode(tokenizer, prompt, strlen(prompt), tokens, capacity, err, sizeof(err));
  if (count < 0)
    die("prompt", err);
  if ((size_t)count > capacity)
    die("prompt", "longer than the context");
  size_t promptLength = (size_t)count;
#ifdef MODEL_ENCODE_NUM_ARGS
  /* The prompt is the source of sequence 0; the decoder starts from the
   * start token. */
  const int32_t *sources[1] = {tokens};
  size_t lengths[1] = {promptLength};
  if (batch != 1)
    die("model", "this example generates one sequence (compile with --batch=1)");
  if (xfmr_generator_encode(generator, sources, lengths, err, sizeof(err)))
    die("prompt", err);
  tokens[0] = (int32_t)xfmr_generator_token_id(generator, "decoder_start_token_id");
  promptLength = 1;
#else
  if (batch != 1)
    die("model", "this example generates one sequence (compile with --batch=1)");
  print_text(tokenizer, tokens, promptLength);
#endif

  xfmr_engine *engine = xfmr_engine_create(generator, tokenizer, 1);
  xfmr_generation_settings greedy = xfmr_generation_settings_defaults();
  greedy.sampling.temperature = 0;
  greedy.max_tokens = steps;
  xfmr_generation *generation = xfmr_engine_submit(engine, tokens, promptLength, &greedy,
                                                   print_token, NULL, err, sizeof(err));
  if (!generation)
    die("prompt", err);
  int status;
  while ((status = xfmr_engine_step(engine, err, sizeof(err))) > 0) {
  }
  if (status < 0)
    die("generation", err);
  printf("\n");

  xfmr_generation_free(generation);
  xfmr_engine_free(engine);
  xfmr_generator_free(generator);
  xfmr_tokenizer_free(tokenizer);
  free(tokens);
  return 0;
}
