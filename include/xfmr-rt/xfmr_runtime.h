/*===- xfmr_runtime.h - the xfmr runtime C API ---------------------------===*
 *
 * The runtime is plain C++ with a C interface and no MLIR or LLVM dependency:
 * a program that embeds a compiled model (the object + header that
 * `xfmrc --emit=obj` and `--emit=header` write) links only this library
 * (libxfmr_runtime.a) and, for OpenMP-parallel models, libomp.
 *
 * Errors: functions that can fail return NULL or a non-zero value and write a
 * one-line message (naming the file and tensor at fault) into `err`.
 *
 *===----------------------------------------------------------------------===*/

#ifndef XFMR_RT_XFMR_RUNTIME_H
#define XFMR_RT_XFMR_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xfmr_dtype {
  XFMR_DTYPE_F32 = 0,
  XFMR_DTYPE_F64,
  XFMR_DTYPE_F16,
  XFMR_DTYPE_BF16,
  XFMR_DTYPE_I64,
  XFMR_DTYPE_I32,
  XFMR_DTYPE_I16,
  XFMR_DTYPE_I8,
  XFMR_DTYPE_U8,
  XFMR_DTYPE_BOOL,
  /* ggml's block formats, as GGUF files hold them (no size per element:
   * blocks of 32 or 256 values). */
  XFMR_DTYPE_Q4_0,
  XFMR_DTYPE_Q4_1,
  XFMR_DTYPE_Q5_0,
  XFMR_DTYPE_Q5_1,
  XFMR_DTYPE_Q8_0,
  XFMR_DTYPE_Q4_K,
  XFMR_DTYPE_Q5_K,
  XFMR_DTYPE_Q6_K,
} xfmr_dtype;

/* Bytes per element of `dtype` (0 for block formats). */
size_t xfmr_dtype_size(xfmr_dtype dtype);
/* The safetensors spelling ("F32", "BF16", ...; ggml's for blocks, "Q4_K"). */
const char *xfmr_dtype_name(xfmr_dtype dtype);
/* For a ggml block dtype, the integer groups its values form (value = level *
 * scale, or level * scale + min with `mins`; levels of `bits`, 4 or 8, groups
 * of `group` values; scales and mins exact in `scales`, F16 or F32): 0, or
 * non-zero for other dtypes. */
int xfmr_dtype_integer_groups(xfmr_dtype dtype, int64_t *group, int *mins, int *bits,
                              xfmr_dtype *scales);

typedef struct xfmr_tensor_info {
  const char *name;
  xfmr_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  const void *data; /* may be unaligned: use xfmr_safetensors_read */
  uint64_t num_bytes;
} xfmr_tensor_info;

/*===--- Reading safetensors ---------------------------------------------===*/

typedef struct xfmr_safetensors xfmr_safetensors;

/* Opens `path` read-only (memory-mapped) and validates its header: the JSON
 * parses, every entry has a known dtype, a non-negative shape and
 * data_offsets inside the file that match the shape, and no two tensors
 * overlap. Returns NULL on failure. */
xfmr_safetensors *xfmr_safetensors_open(const char *path, char *err, size_t err_size);
void xfmr_safetensors_close(xfmr_safetensors *file);
size_t xfmr_safetensors_count(const xfmr_safetensors *file);
/* Fills `info` for the index-th tensor (header order); 0 on success. */
int xfmr_safetensors_get(const xfmr_safetensors *file, size_t index, xfmr_tensor_info *info);
/* Fills `info` for the tensor called `name`; 0 on success, non-zero if absent. */
int xfmr_safetensors_find(const xfmr_safetensors *file, const char *name,
                          xfmr_tensor_info *info);
/* Copies `name` into `dst` as `dtype`, checking that it has exactly the
 * `rank` dims in `shape`. Converts F64/F16/BF16 to F32, any integer type to
 * I32 (values must fit) and U8 to BOOL; other dtypes must match. 0 on
 * success. */
int xfmr_safetensors_read(const xfmr_safetensors *file, const char *name, xfmr_dtype dtype,
                          int32_t rank, const int64_t *shape, void *dst, char *err,
                          size_t err_size);

/*===--- Reading a model's weights --------------------------------------===*/

/* The tensors of a checkpoint, which may span several safetensors files. */
typedef struct xfmr_weights xfmr_weights;

/* Opens `path`: a .safetensors file, a Hugging Face checkpoint directory
 * (its model.safetensors, or the shards its model.safetensors.index.json
 * lists), such an index file, or a llama.cpp .gguf file (its tensors under
 * transformers' names, quantized ones in ggml's block dtypes, which
 * xfmr_weights_read decodes). Every file is validated as
 * xfmr_safetensors_open does. Returns NULL on failure. */
xfmr_weights *xfmr_weights_open(const char *path, char *err, size_t err_size);
void xfmr_weights_close(xfmr_weights *weights);
size_t xfmr_weights_count(const xfmr_weights *weights);
/* As xfmr_safetensors_get, _find and _read, over all files. */
int xfmr_weights_get(const xfmr_weights *weights, size_t index, xfmr_tensor_info *info);
int xfmr_weights_find(const xfmr_weights *weights, const char *name, xfmr_tensor_info *info);
int xfmr_weights_read(const xfmr_weights *weights, const char *name, xfmr_dtype dtype, int32_t rank,
                      const int64_t *shape, void *dst, char *err, size_t err_size);
/* Drops the pages of tensor `name`, read, from the process's resident memory
 * where it lies in a mapped file (they stay in the page cache): a model
 * converted as it loads is then not held twice. */
void xfmr_weights_release(const xfmr_weights *weights, const char *name);
/* The config.json of a model opened from a .gguf file (transformers' keys,
 * from the file's metadata); NULL for safetensors. */
const char *xfmr_weights_config_json(const xfmr_weights *weights);

/* A compiled model's weights as its executable loads them. */
typedef struct xfmr_model_weights xfmr_model_weights;

/* Loads the weights of a compiled model, given its manifest (the object's
 * `<name>_manifest`), from `path` (a .safetensors file, a checkpoint
 * directory or a .gguf file; NULL: the checkpoint it was compiled from) as
 * its executable does: checkpoint names resolved (`transformer.wte.weight`
 * for `wte.weight`, tied heads), converted to the model's types, quantized
 * as it was compiled, used in place where the file is mapped; and points
 * args[i] of each weight argument i at its buffer (read-only). NULL with a
 * message on failure. */
xfmr_model_weights *xfmr_model_weights_load(const char *manifest, const char *path, void **args,
                                            char *err, size_t err_size);
void xfmr_model_weights_free(xfmr_model_weights *weights);

/*===--- Writing tensors -------------------------------------------------===*/

typedef struct xfmr_tensor_ref {
  const char *name;
  xfmr_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  const void *data;
} xfmr_tensor_ref;

/* Writes `count` tensors to a .safetensors file. 0 on success. */
int xfmr_safetensors_write(const char *path, const xfmr_tensor_ref *tensors, size_t count,
                           char *err, size_t err_size);

/* Reads the weights that executables with the given manifests load from the
 * checkpoint `source` (a .safetensors file or checkpoint directory),
 * narrowed as the manifests say (int8 values and scales, bf16), and writes
 * them to the .safetensors file `path`, which those executables then load
 * without converting (`xfmrc --quantize`; docs/quantization.md has the
 * format). 0 on success. */
int xfmr_write_model_weights(const char *const *manifests_json, size_t count, const char *source,
                             const char *path, char *err, size_t err_size);
/* Writes one tensor as a NumPy .npy file (format 1.0, little-endian, C order). */
int xfmr_npy_write(const char *path, const xfmr_tensor_ref *tensor, char *err,
                   size_t err_size);

/*===--- The model runner ------------------------------------------------===*/

/* The command line of compiled model executables (see `--help`): loads the
 * weights named in `manifest_json`, reads token sequences, calls `entry` (a
 * model's `<name>_packed` function) per batch and writes the logits. Returns
 * the process exit code. */
int xfmr_runner_main(int argc, char **argv, const char *manifest_json,
                     void (*entry)(void **args));

/* The command line of compiled training executables (see `--help`):
 * initialises or loads the weights, runs `train_step` (a model's
 * `<prefix>_train_step_packed`) on shuffled batches of a token file,
 * evaluates with `evaluate` and saves the weights. Returns the process exit
 * code. */
int xfmr_trainer_main(int argc, char **argv, const char *train_step_manifest,
                      void (*train_step)(void **args), const char *evaluate_manifest,
                      void (*evaluate)(void **args));

/* Called by a training step compiled for data-parallel jobs
 * (`xfmr.all_reduce`): replaces the `count` floats at `data` by the sum
 * over the job's processes of `weight` times each one's values. The
 * trainer's main backs it with MPI under mpirun; linked into a program of
 * one process, it multiplies by `weight`. */
void xfmr_all_reduce_f32(uintptr_t data, int64_t count, float weight);

/* The same reduction split in two (`xfmr.all_reduce_start` and
 * `xfmr.all_reduce_wait`), so that it travels while the step computes:
 * the data are the job's until the wait for the same address returns. */
void xfmr_all_reduce_start_f32(uintptr_t data, int64_t count, float weight);
void xfmr_all_reduce_wait_f32(uintptr_t data);

/*===--- Generation ------------------------------------------------------===*/

/* How the next token is chosen, in Hugging Face generate()'s order:
 * repetition penalty, temperature, top-k, top-p, then a draw (the argmax at
 * temperature 0). */
typedef struct xfmr_sampling {
  double temperature;    /* 0: greedy */
  int64_t top_k;         /* 0: off */
  double top_p;          /* 1: off */
  double repeat_penalty; /* 1: off; logits of tokens already seen are divided
                            by it (multiplied where negative) */
  int64_t repeat_last_n; /* tokens of the history it looks at; 0: all */
} xfmr_sampling;

/* The defaults of the generator's command line (temperature 0.8, top-k 40,
 * top-p 0.95, no repetition penalty over the last 64 tokens). */
xfmr_sampling xfmr_sampling_defaults(void);

/* Writes to `probabilities` (vocab floats) the distribution the next token
 * is drawn from after `settings` are applied to `logits` given the tokens
 * so far (`history`). */
void xfmr_sampling_probabilities(const float *logits, int64_t vocab, const xfmr_sampling *settings,
                                 const int32_t *history, size_t history_length,
                                 float *probabilities);

/* Draws tokens with `settings` from a generator seeded with `seed`. */
typedef struct xfmr_sampler xfmr_sampler;
xfmr_sampler *xfmr_sampler_create(const xfmr_sampling *settings, uint64_t seed);
void xfmr_sampler_free(xfmr_sampler *sampler);
int32_t xfmr_sampler_sample(xfmr_sampler *sampler, const float *logits, int64_t vocab,
                            const int32_t *history, size_t history_length);

/* A checkpoint's tokenizer: byte-level BPE (tokenizer.json, or vocab.json +
 * merges.txt), WordPiece (tokenizer.json, or vocab.txt) or SentencePiece
 * (Marian's source.spm + vocab.json, or spiece.model). */
typedef struct xfmr_tokenizer xfmr_tokenizer;
/* Lets xfmr_tokenizer_load read SentencePiece files; defined in
 * libxfmr_sentencepiece.a, which needs -lsentencepiece. */
void xfmr_tokenizer_enable_sentencepiece(void);
/* Reads the tokenizer in checkpoint directory `directory`; NULL (with a
 * message) when it holds none or a file is corrupt or unsupported. */
xfmr_tokenizer *xfmr_tokenizer_load(const char *directory, char *err, size_t err_size);
void xfmr_tokenizer_free(xfmr_tokenizer *tokenizer);
/* Writes up to `capacity` ids of the UTF-8 `text` to `ids` and returns how
 * many there are (call again with more room if that exceeds `capacity`), or
 * -1 with a message (invalid UTF-8). The ids include the special tokens the
 * tokenizer adds around a sequence, as Hugging Face's encode() does. */
int64_t xfmr_tokenizer_encode(const xfmr_tokenizer *tokenizer, const char *text, size_t length,
                              int32_t *ids, size_t capacity, char *err, size_t err_size);
/* Writes up to `capacity` bytes of the text of `ids` and returns its
 * length; bytes that are not valid UTF-8 become U+FFFD, as in Hugging
 * Face's decode(). */
size_t xfmr_tokenizer_decode(const xfmr_tokenizer *tokenizer, const int32_t *ids, size_t count,
                             char *text, size_t capacity);

/* A chat template (tokenizer_config.json's "chat_template"), rendered exactly
 * as transformers' apply_chat_template renders it: jinja2's sandbox with
 * trim_blocks and lstrip_blocks, break/continue, raise_exception,
 * strftime_now and transformers' tojson. Templates are untrusted: nesting,
 * recursion, loop iterations and the text built are bounded. */
typedef struct xfmr_chat_template xfmr_chat_template;
/* The chat template of the checkpoint or tokenizer directory `directory`
 * (chat_template.jinja, or tokenizer_config.json's "chat_template"), whose
 * renderings also see its special tokens (bos_token, eos_token, ...); NULL
 * with a message if it has none or it does not parse. */
xfmr_chat_template *xfmr_chat_template_load(const char *directory, char *err, size_t err_size);
/* Parses the `length` bytes of template source; NULL (with a message naming
 * the line) on a syntax error. */
xfmr_chat_template *xfmr_chat_template_parse(const char *source, size_t length, char *err,
                                             size_t err_size);
void xfmr_chat_template_free(xfmr_chat_template *chat_template);
/* Renders with the variables of `context_json`, a JSON object (messages,
 * tools, add_generation_prompt, bos_token, eos_token, ...; every key is a
 * variable): writes up to `capacity` bytes of the text to `text` and returns
 * its length (call again with more room if that exceeds `capacity`: it
 * renders again), or -1 with a message naming the line (invalid JSON,
 * raise_exception, a run-time error or a limit of the template). */
int64_t xfmr_chat_template_render(const xfmr_chat_template *chat_template, const char *context_json,
                                  size_t json_length, char *text, size_t capacity, char *err,
                                  size_t err_size);

/* A compiled generator's entries (`xfmrc --generate --emit=obj`: the
 * `<name>_prefill` and `<name>_decode` packed functions and manifests) with
 * their weights and KV cache. */
typedef struct xfmr_generator xfmr_generator;

/* Loads the weights (a .safetensors file or checkpoint directory; NULL: the
 * checkpoint the model was compiled from) and allocates the KV cache. */
xfmr_generator *xfmr_generator_create(const char *prefill_manifest, void (*prefill)(void **args),
                                      const char *decode_manifest, void (*decode)(void **args),
                                      const char *weights, char *err, size_t err_size);
/* The same for an encoder-decoder (`xfmrc --generate` of marian, bart,
 * transformer), whose `<name>_encode` entry reads the sources. */
xfmr_generator *
xfmr_seq2seq_generator_create(const char *encode_manifest, void (*encode)(void **args),
                              const char *prefill_manifest, void (*prefill)(void **args),
                              const char *decode_manifest, void (*decode)(void **args),
                              const char *weights, char *err, size_t err_size);
/* Over a batch of N > 1 sequences, `xfmrc --generate` also compiles
 * `<name>_prefill_row`, the prefill of one sequence. Given it, a generator
 * reads a few prompts at once through it, a call per prompt, rather than
 * through a call of the batch's prefill, which computes every row (a
 * prompt's logits are the same either way). 0 on success. */
int xfmr_generator_set_row_prefill(xfmr_generator *generator, const char *prefill_row_manifest,
                                   void (*prefill_row)(void **args), char *err, size_t err_size);
/* And, over a batch of at most 16 sequences on the CPU,
 * `<name>_decode_row`, the decode step of one sequence: given it, a step of
 * a sequence generating alone takes a call of it rather than of the batch's
 * decode (its logits are the same either way). Over a batch of 8, 12 or 16,
 * also `<name>_decode_group`, the decode step of 4 sequences, bound to each
 * aligned group of 4 rows: a step of sequences that all lie in one group
 * takes a call of it. Call once per entry. 0 on success. */
int xfmr_generator_set_row_decode(xfmr_generator *generator, const char *decode_row_manifest,
                                  void (*decode_row)(void **args), char *err, size_t err_size);
void xfmr_generator_free(xfmr_generator *generator);
/* An encoder-decoder's sources, sources[b] of lengths[b] tokens for each of
 * the batch's sequences (a NULL or empty one: none), encoded at once; every
 * sequence's cache is emptied, the decoder then starts from the
 * "decoder_start_token_id". 0 on success. */
int xfmr_generator_encode(xfmr_generator *generator, const int32_t *const *sources,
                          const size_t *lengths, char *err, size_t err_size);
/* The model's config's token id `key` ("eos_token_id": the first of the
 * end tokens, "bos_token_id", "pad_token_id", "decoder_start_token_id"), or
 * -1 if it names none. */
int64_t xfmr_generator_token_id(const xfmr_generator *generator, const char *key);
/* Whether `token` ends a sequence (one of the model's end tokens: Llama 3
 * has several). */
int xfmr_generator_is_end_token(const xfmr_generator *generator, int64_t token);
/* Sequences per call, cache positions, vocabulary size. */
int64_t xfmr_generator_batch(const xfmr_generator *generator);
int64_t xfmr_generator_context(const xfmr_generator *generator);
int64_t xfmr_generator_vocab(const xfmr_generator *generator);
/* Empties sequence `sequence`'s cache. */
void xfmr_generator_reset(xfmr_generator *generator, int64_t sequence);
/* Appends `count` tokens to sequence `sequence` (through the prefill entry,
 * in chunks) and writes the logits of the next token (vocab floats). 0 on
 * success; past the context, an error. */
int xfmr_generator_append(xfmr_generator *generator, int64_t sequence, const int32_t *tokens,
                          size_t count, float *logits, char *err, size_t err_size);
/* One decode step of every sequence: tokens[b] is appended to sequence b
 * where active[b] (a NULL `active`: all), and the next logits of each
 * active sequence written to logits[b * vocab ...]. 0 on success. */
int xfmr_generator_step(xfmr_generator *generator, const int32_t *tokens, const uint8_t *active,
                        float *logits, char *err, size_t err_size);
/* Tokens in sequence `sequence`'s cache. */
int64_t xfmr_generator_length(const xfmr_generator *generator, int64_t sequence);

/* The engine: requests generated together over a generator's batch rows
 * (slots), each admitted into a free slot, its prompt read a chunk at a time
 * beside the others' decode steps; a request's tokens do not depend on what
 * runs beside it. The command line and the server (--serve) run on it. */
typedef struct xfmr_engine xfmr_engine;
typedef struct xfmr_generation xfmr_generation;

/* When a beam search ends, as generate()'s early_stopping (false, true,
 * "never"). */
typedef enum xfmr_early_stopping {
  XFMR_EARLY_STOPPING_HEURISTIC = 0,
  XFMR_EARLY_STOPPING_ALL_FINISHED = 1,
  XFMR_EARLY_STOPPING_NEVER = 2,
} xfmr_early_stopping;

typedef struct xfmr_generation_settings {
  xfmr_sampling sampling;
  uint64_t seed;
  int64_t max_tokens;
  const char *const *stops; /* texts that end the generation where they appear */
  size_t stop_count;
  int ignore_eos;
  /* Beam search over num_beams > 1 beams, each on a slot of its own, instead
   * of sampling (only the repetition penalty applies; no stops): its tokens
   * come at its end. */
  int64_t num_beams;
  double length_penalty;
  xfmr_early_stopping early_stopping;
} xfmr_generation_settings;

/* The command line's defaults: its sampling, seed 0, 128 tokens, no stops,
 * no beam search. */
xfmr_generation_settings xfmr_generation_settings_defaults(void);

/* An engine over `generator` (which must outlive it) using `slots` of its
 * batch rows (0: all), decoding text with `tokenizer` (NULL: the text of a
 * token is " <id>"). */
xfmr_engine *xfmr_engine_create(xfmr_generator *generator, const xfmr_tokenizer *tokenizer,
                                int64_t slots);
void xfmr_engine_free(xfmr_engine *engine);
/* Queues a generation after `prompt` (an encoder-decoder's: its decoder
 * start token, after xfmr_generator_encode); `on_token` (may be NULL) is
 * called from xfmr_engine_step with each token and the text it adds, and at
 * the end with token -1 and any text held back (an incomplete character). NULL
 * with a message if the prompt is empty, past the context or outside the
 * vocabulary. */
xfmr_generation *xfmr_engine_submit(xfmr_engine *engine, const int32_t *prompt, size_t length,
                                    const xfmr_generation_settings *settings,
                                    void (*on_token)(void *user, int32_t token, const char *text,
                                                     size_t text_length),
                                    void *user, char *err, size_t err_size);
/* Admits, reads one chunk of the prompts, takes one decode step: 1 if it
 * did work, 0 if nothing is queued or running, -1 with a message if the
 * model failed (every generation then ends as XFMR_FINISH_FAILED). */
int xfmr_engine_step(xfmr_engine *engine, char *err, size_t err_size);

typedef enum xfmr_finish {
  XFMR_FINISH_RUNNING = 0,
  XFMR_FINISH_END_TOKEN = 1,
  XFMR_FINISH_STOP = 2,
  XFMR_FINISH_LENGTH = 3,
  XFMR_FINISH_CONTEXT_FULL = 4,
  XFMR_FINISH_CANCELLED = 5,
  XFMR_FINISH_FAILED = 6,
} xfmr_finish;

/* Ends the generation at the engine's next step. */
void xfmr_generation_cancel(xfmr_generation *generation);
/* Its state, its generated text (through a stop text) and its tokens; read
 * them on the thread that steps the engine. The text and token functions
 * return the full length, writing up to `capacity`. */
xfmr_finish xfmr_generation_finish(const xfmr_generation *generation);
size_t xfmr_generation_text(const xfmr_generation *generation, char *text, size_t capacity);
size_t xfmr_generation_tokens(const xfmr_generation *generation, int32_t *ids, size_t capacity);
/* Frees the handle (a running generation is cancelled). */
void xfmr_generation_free(xfmr_generation *generation);

/* Lets the command lines of generators and encoders serve OpenAI's API
 * (--serve); defined in libxfmr_server.a, which needs -lcpp-httplib. */
void xfmr_enable_server(void);

/* The command line of compiled generators (see `--help`): tokenizes a
 * prompt with the checkpoint's tokenizer, generates and streams the text,
 * and prints the prompt and generation speed. Returns the exit code. */
int xfmr_generator_main(int argc, char **argv, const char *prefill_manifest,
                        void (*prefill)(void **args), const char *decode_manifest,
                        void (*decode)(void **args));
/* The same for an encoder-decoder, whose `encode` entry reads the prompt as
 * the source before the decoder generates, and for a batch's one-sequence
 * prefill and decode and its decode of a group (xfmr_generator_set_row_prefill,
 * _set_row_decode); any of these may be NULL. */
int xfmr_seq2seq_generator_main(int argc, char **argv, const char *encode_manifest,
                                void (*encode)(void **args), const char *prefill_manifest,
                                void (*prefill)(void **args), const char *decode_manifest,
                                void (*decode)(void **args), const char *prefill_row_manifest,
                                void (*prefill_row)(void **args), const char *decode_row_manifest,
                                void (*decode_row)(void **args), const char *decode_group_manifest,
                                void (*decode_group)(void **args));

#ifdef __cplusplus
}
#endif

#endif /* XFMR_RT_XFMR_RUNTIME_H */
