//===- Generator.h - a compiled KV-cache model's entries --------*- C++ -*-===//
//
// `xfmrc --generate` compiles two entries over the same weights and KV cache
// (per layer, [batch, context, heads, head_dim], owned here and updated in
// place by the entries):
//
//   prefill(input_ids [B, C], attention_mask [B, C], positions [B])
//   decode (input_ids [B, 1], attention_mask [B, 1], positions [B])
//
// each writing the new tokens' keys and values at positions[b] .. and
// returning the logits of each sequence's last token. Each row of the batch
// is a sequence of its own: a call appends tokens to some rows and leaves
// the others (masked) as they are. Over a batch, prefill_row and decode_row
// are prefill and decode for one sequence ([1, C], [1, 1]), bound once per
// row (its caches that row of the batch's), and decode_group the decode of
// an aligned group of a few rows ([G, 1]), bound once per group: a few
// prompts read, or the steps of a few sequences generating, cost their own
// work, not the batch's. An encoder-decoder has a third entry,
//
//   encode(input_ids [B, S], attention_mask [B, S]) -> cross.<layer>.key/value
//
// run once per source; the decoder entries then read its keys and values
// (state `cross.*`, [B, S, heads, head_dim]) under `encoder_attention_mask`,
// and decoding starts from the decoder start token.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_GENERATOR_H
#define XFMR_LIB_RUNTIME_GENERATOR_H

#include "Manifest.h"
#include "ModelWeights.h"
#include "RuntimeSupport.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace xfmr::rt {

/// One compiled entry, its arguments and those the generator fills or
/// reads.
struct Entry {
  Manifest manifest;
  void (*function)(void **) = nullptr;
  std::unique_ptr<EntryArgs> args;
  Buffer *ids = nullptr, *mask = nullptr, *positions = nullptr, *logits = nullptr;
  const ArgSpec *logitsSpec = nullptr;
  int64_t tokens = 0; // per sequence and call
  /// An entry bound to some rows of the batch: its views of those rows of
  /// the batch's buffers.
  std::vector<std::unique_ptr<Buffer>> rowViews;

  void call() { function(args->data()); }
};

} // namespace xfmr::rt

struct xfmr_generator {
  using Entry = xfmr::rt::Entry;
  using Buffer = xfmr::rt::Buffer;

  Entry encode, prefill, decode;
  /// The one-sequence prefill (prefill_row) and decode (decode_row) bound to
  /// each row (prefillRows[b]: sequence b), which read a few prompts, or
  /// step a sequence generating alone, where the batch's entry would compute
  /// every row; empty: none was compiled.
  std::vector<Entry> prefillRows, decodeRows;
  /// The decode of a group of a few rows (decode_group) bound to each
  /// aligned group (decodeGroups[g]: sequences g * G .. g * G + G - 1),
  /// which steps the sequences of one group; empty: none was compiled.
  std::vector<Entry> decodeGroups;
  /// Decode calls so far of the batch's entry, of a group's and of a row's.
  struct DecodeCalls {
    int64_t batch = 0, group = 0, row = 0;
  } decodeCalls;
  xfmr::rt::BufferMap weights, caches, cross;
  /// The source's padding mask, which the decoder entries read.
  std::unique_ptr<Buffer> sourceMask;
  int64_t batch = 0, context = 0, vocab = 0, sourceLength = 0;
  size_t cacheBytes = 0;
  /// The compiled entries' arenas of temporaries (activations).
  size_t arenaBytes = 0;
  xfmr::rt::WeightsLoaded weightBytes;
  double loadSeconds = 0;
  /// Tokens in each sequence's cache.
  std::vector<int64_t> lengths;
  /// Prompt tokens read through the decode entry (decodedPromptLimit).
  int64_t promptDecodeSteps = 0;

  xfmr_generator(const char *encodeManifest, void (*encodeEntry)(void **),
                 const char *prefillManifest, void (*prefillEntry)(void **),
                 const char *decodeManifest, void (*decodeEntry)(void **),
                 const std::string &weightsPath, bool mapWeights = true,
                 xfmr::rt::WeightsCache cache = xfmr::rt::WeightsCache::Off);

  bool encoderDecoder() const { return encode.function != nullptr; }

  /// Binds `function`, the one-sequence prefill entry of the same model
  /// (`xfmrc --generate --batch` N > 1 compiles it as `prefill_row`), to
  /// each row.
  void addRowPrefill(const char *manifest, void (*function)(void **));
  /// The same for a decode entry of fewer rows than the batch, a divisor of
  /// it: `decode_row` (one) or `decode_group` (bound to each aligned group).
  void addRowDecode(const char *manifest, void (*function)(void **));
  /// Rows of the decode_group entry (0 without it).
  int64_t decodeGroupRows() const;
  /// The most prompts read at once through the one-sequence prefill, a call
  /// each (more: a call of the batch's prefill); 0 without it.
  int64_t rowPrefillLimit() const;
  /// The most sequences stepped at once through the one-sequence decode, a
  /// call each (more: a call of the batch's decode); 0 without it.
  int64_t rowDecodeLimit() const;
  /// The most tokens of a prompt (or of a prompt's last chunk) read through
  /// the decode entry, a token a call, where a prefill chunk would cost more.
  int64_t decodedPromptLimit() const;

  /// Runs each entry once on no tokens (all masked, which writes no cache
  /// row): what a first call costs beyond the next ones (its temporaries'
  /// first touch, the threads' start) is then paid here, as in llama.cpp's
  /// warm-up run, not by the prompt.
  void warmUp();

  /// Runs the encoder on sources[b] (none: an empty source), keeping their
  /// cross-attention keys and values and padding mask for the decoder, and
  /// empties every sequence's cache.
  void encodeSources(const std::vector<std::vector<int32_t>> &sources);

  /// Sequence targets[i] becomes a copy of sequence sources[i], all read
  /// before any is written (beam search keeps the beams it continues): the
  /// positions in use of its cache, its length and, `withSource`, an
  /// encoder-decoder's cross-attention rows.
  void copyRows(const std::vector<int64_t> &targets, const std::vector<int64_t> &sources,
                bool withSource = false);

  /// One call of `entry` (a prefill of at most decodedPromptLimit() tokens
  /// a sequence: decode steps): appends tokens[b] (at most entry.tokens of
  /// them; none: the sequence is left as it is) to sequence b and writes
  /// each such sequence's next-token logits to logits[b * vocab ...].
  void call(Entry &entry, const std::vector<std::vector<int32_t>> &tokens, float *logits);

  /// Appends tokens[b] to sequence b (none: inactive) through `entry`, as
  /// many calls as the longest needs, and writes each active sequence's
  /// next-token logits to logits[b * vocab ...].
  void append(Entry &entry, const std::vector<std::vector<int32_t>> &tokens, float *logits);

private:
  /// The manifests of the entries bound so far (their activations share an
  /// arena).
  std::vector<const xfmr::rt::Manifest *> entryManifests() const;
  /// `function`, an entry of `whole`'s kind over fewer sequences than the
  /// batch, a divisor of it (`name`: its name, for errors), bound to each
  /// aligned group of that many rows.
  std::vector<Entry> bindRows(const Entry &whole, const std::string &name, const char *manifest,
                              void (*function)(void **));
  /// Sequences `count` from `first`.
  struct RowRange {
    int64_t first, count;
  };
  /// Binds `entry`'s arguments; with `rows`, those of an entry of fewer
  /// sequences to those rows of the batch's caches and sources.
  void bind(Entry &entry, std::optional<RowRange> rows = std::nullopt);
  /// One call of `entry`, whose rows are the sequences `first` ..
  /// `first + rows - 1`, appending tokens[0 .. rows) (see call()).
  void run(Entry &entry, int64_t first, int64_t rows, const std::vector<int32_t> *tokens,
           float *logits);
  void setShape(int64_t &slot, int64_t value, const std::string &name);
  void checkTokens(const std::vector<std::vector<int32_t>> &tokens) const;
};

#endif // XFMR_LIB_RUNTIME_GENERATOR_H
