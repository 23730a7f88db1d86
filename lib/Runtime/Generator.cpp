//===- Generator.cpp - text generation over a compiled KV-cache model ----===//
//
// The generator's entries and caches (Generator.h), and the command line of
// compiled generators over the engine (Engine.h): prompts, conversations and
// beam search.
//
//===----------------------------------------------------------------------===//

#include "xfmr-rt/xfmr_runtime.h"

#include "Chat.h"
#include "CommandLine.h"
#include "Engine.h"
#include "Generator.h"
#include "ModelWeights.h"
#include "RuntimeSupport.h"
#include "Sampler.h"
#include "Server/Server.h"
#include "TokenizerCommand.h"
#include "Tokenizers/Tokenizer.h"
#include "Tokenizers/Unicode.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace xfmr::rt;

xfmr_generator::xfmr_generator(const char *encodeManifest, void (*encodeEntry)(void **),
                               const char *prefillManifest, void (*prefillEntry)(void **),
                               const char *decodeManifest, void (*decodeEntry)(void **),
                               const std::string &weightsPath, bool mapWeights,
                               WeightsCache cache) {
  prefill.manifest = parseManifest(prefillManifest);
  prefill.function = prefillEntry;
  decode.manifest = parseManifest(decodeManifest);
  decode.function = decodeEntry;
  std::string path = weightsPath.empty() ? prefill.manifest.defaultWeights : weightsPath;
  if (path.empty())
    fail("missing --weights=PATH (the model was not compiled from a checkpoint)");
  if (encodeEntry)
    encode.manifest = parseManifest(encodeManifest);
  std::vector<const Manifest *> manifests = entryManifests();
  checkFitsInMemory(manifests);
  arenaBytes = activationBytes(manifests);
  auto loadStart = std::chrono::steady_clock::now();
  // The encoder's weights, then the decoder's (the decode entry's are the
  // prefill entry's).
  std::vector<const Manifest *> weighted = {&prefill.manifest};
  if (encodeEntry)
    weighted.insert(weighted.begin(), &encode.manifest);
  weights = loadModelWeights(weighted, path, mapWeights, cache, weightBytes);
  loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loadStart).count();
  if (encodeEntry) {
    encode.function = encodeEntry;
    bind(encode);
  }
  bind(prefill);
  bind(decode);
  for (const BufferMap *states : {&caches, &cross})
    for (const auto &[name, buffer] : *states)
      cacheBytes += buffer->size;
  if (decode.tokens != 1)
    fail("corrupt model: the decode entry takes " + std::to_string(decode.tokens) +
         " tokens a call");
  lengths.assign(batch, 0);
}

void xfmr_generator::addRowPrefill(const char *manifest, void (*function)(void **)) {
  // A batch of one reads its prompts through the prefill entry itself.
  if (batch == 1)
    return;
  prefillRows = bindRows(prefill, "prefill", manifest, function);
  if (prefillRows.size() != static_cast<size_t>(batch))
    fail("corrupt model: the prefill_row entry reads more than one sequence");
  arenaBytes = activationBytes(entryManifests());
}

void xfmr_generator::addRowDecode(const char *manifest, void (*function)(void **)) {
  if (batch == 1)
    return;
  std::vector<Entry> rows = bindRows(decode, "decode", manifest, function);
  if (rows.size() == static_cast<size_t>(batch))
    decodeRows = std::move(rows);
  else
    decodeGroups = std::move(rows);
  arenaBytes = activationBytes(entryManifests());
}

int64_t xfmr_generator::decodeGroupRows() const {
  return decodeGroups.empty() ? 0 : batch / static_cast<int64_t>(decodeGroups.size());
}

std::vector<const xfmr::rt::Manifest *> xfmr_generator::entryManifests() const {
  std::vector<const Manifest *> manifests = {&prefill.manifest, &decode.manifest};
  for (const std::vector<Entry> *rows : {&prefillRows, &decodeRows, &decodeGroups})
    if (!rows->empty())
      manifests.push_back(&rows->front().manifest);
  if (!encode.manifest.args.empty())
    manifests.push_back(&encode.manifest);
  return manifests;
}

std::vector<xfmr::rt::Entry> xfmr_generator::bindRows(const Entry &whole, const std::string &name,
                                                      const char *manifest,
                                                      void (*function)(void **)) {
  Manifest parsed = parseManifest(manifest);
  // The entry's sequences: the first dimension of its token ids.
  auto ids = std::find_if(parsed.args.begin(), parsed.args.end(), [](const ArgSpec &arg) {
    return arg.kind == ArgSpec::Kind::Input && !arg.shape.empty() &&
           (arg.name == "input_ids" || arg.name == "decoder_input_ids");
  });
  if (ids == parsed.args.end())
    fail("corrupt model: the " + name + " entry of fewer sequences has no input_ids");
  int64_t count = ids->shape[0];
  if (count <= 0 || count >= batch || batch % count)
    fail("corrupt model: the " + name + " entry of " + std::to_string(count) +
         " sequences does not divide a batch of " + std::to_string(batch));
  std::vector<Entry> groups(batch / count);
  for (size_t g = 0; g < groups.size(); ++g) {
    Entry &entry = groups[g];
    entry.manifest = parsed;
    entry.function = function;
    bind(entry, RowRange{static_cast<int64_t>(g) * count, count});
    if (entry.tokens != whole.tokens)
      fail("corrupt model: an entry of " + std::to_string(count) + " sequences takes " +
           std::to_string(entry.tokens) + " tokens a call, the " + name + " entry " +
           std::to_string(whole.tokens));
  }
  return groups;
}

/// The encoder's keys and values for the decoder's cross-attention.
static bool isCrossAttention(const ArgSpec &arg) { return arg.name.rfind("cross.", 0) == 0; }

void xfmr_generator::bind(Entry &entry, std::optional<RowRange> rows) {
  bool encoder = &entry == &encode;
  // The sequences a call of the entry holds: the batch, or some rows of it.
  auto setRows = [&](int64_t value, const std::string &name) {
    if (!rows)
      setShape(batch, value, name);
    else if (value != rows->count)
      fail("corrupt generator manifest: '" + name + "' of an entry of " +
           std::to_string(rows->count) + " sequences holds " + std::to_string(value));
  };
  for (const ArgSpec &arg : entry.manifest.args) {
    auto corrupt = [&](const std::string &why) {
      fail("corrupt generator manifest: argument '" + arg.name + "' " + why);
    };
    bool crossAttention = isCrossAttention(arg);
    switch (arg.kind) {
    case ArgSpec::Kind::Param:
      break;
    case ArgSpec::Kind::State:
      if (arg.shape.size() < 2)
        corrupt("must be a [batch, context, ...] cache");
      if (crossAttention) {
        if (!cross.count(arg.name))
          corrupt("is no [batch, source, ...] output of the encode entry");
        setRows(arg.shape[0], arg.name);
        break;
      }
      if (rows && !caches.count(arg.name))
        corrupt("is a cache the batch's entries do not have");
      setRows(arg.shape[0], arg.name);
      setShape(context, arg.shape[1], arg.name);
      break;
    case ArgSpec::Kind::Input: {
      bool tokens = arg.name == "input_ids" || arg.name == "decoder_input_ids";
      if (arg.dtype != XFMR_DTYPE_I32)
        corrupt("is not an int32 input the generator fills");
      setRows(arg.shape[0], arg.name);
      if (tokens)
        entry.tokens = arg.shape[1];
      else if (arg.name == "encoder_attention_mask")
        setShape(sourceLength, arg.shape[1], arg.name);
      else if (arg.name != "attention_mask" && arg.name != "decoder_attention_mask" &&
               arg.name != "positions")
        corrupt("is not an input the generator fills");
      break;
    }
    case ArgSpec::Kind::Output:
      if (rows && !arg.updates.empty() && !caches.count(arg.updates))
        corrupt("updates '" + arg.updates + "', which is no cache of the batch's entries");
      if (!arg.updates.empty()) {
        if (arg.shape.empty())
          corrupt("must be a [batch, context, ...] cache");
        setRows(arg.shape[0], arg.name);
      }
      if (!arg.updates.empty() || (crossAttention && encoder))
        break;
      if (arg.name != "logits" || arg.shape.size() != 2)
        corrupt("is not an output the generator reads");
      entry.logitsSpec = &arg;
      setRows(arg.shape[0], arg.name);
      setShape(vocab, arg.shape[1], arg.name);
      break;
    }
  }
  // The encoder's cross-attention keys and values, and the source's mask,
  // are the decoder entries' too. The caches (and the outputs updating them
  // in place), sources and masks of an entry of some rows are views of them.
  auto rowsOf = [&](Buffer &whole) {
    size_t bytes = whole.size / batch;
    entry.rowViews.push_back(
        std::make_unique<Buffer>(std::shared_ptr<const void>(whole.data, [](const void *) {}),
                                 whole.data + rows->first * bytes, rows->count * bytes));
    return entry.rowViews.back().get();
  };
  entry.args = std::make_unique<EntryArgs>(
      entry.manifest, weights, caches, [&](const ArgSpec &arg) -> Buffer * {
        std::unique_ptr<Buffer> *shared = isCrossAttention(arg)                  ? &cross[arg.name]
                                          : arg.name == "encoder_attention_mask" ? &sourceMask
                                                                                 : nullptr;
        if (rows && !shared) {
          bool state = arg.kind == ArgSpec::Kind::State;
          if (state || (arg.kind == ArgSpec::Kind::Output && !arg.updates.empty()))
            shared = &caches.find(state ? arg.name : arg.updates)->second;
        }
        if (!shared)
          return nullptr;
        if (rows) {
          if (!*shared)
            fail("corrupt generator manifest: an entry of some rows reads '" + arg.name +
                 "', which the batch's entries do not");
          return rowsOf(**shared);
        }
        if (!*shared)
          *shared = allocate(arg);
        return shared->get();
      });
  auto either = [&](const char *name, const char *other) {
    Buffer *buffer = entry.args->find(name);
    return buffer ? buffer : entry.args->find(other);
  };
  entry.ids = either("input_ids", "decoder_input_ids");
  entry.mask = either("attention_mask", "decoder_attention_mask");
  entry.positions = entry.args->find("positions");
  entry.logits = entry.args->find("logits");
  bool complete = encoder ? entry.ids && entry.mask && !cross.empty()
                          : entry.ids && entry.mask && entry.positions && entry.logits;
  if (!complete)
    fail("corrupt generator manifest: an entry lacks input_ids, attention_mask, positions, "
         "logits or (encode) the cross-attention's keys and values");
}

void xfmr_generator::warmUp() {
  auto first = [](std::vector<Entry> &rows) { return rows.empty() ? nullptr : &rows.front(); };
  for (Entry *entry :
       {&encode, &prefill, &decode, first(prefillRows), first(decodeRows), first(decodeGroups)}) {
    if (!entry || !entry->function)
      continue;
    for (Buffer *input : {entry->ids, entry->mask, entry->positions})
      if (input)
        std::memset(input->data, 0, input->size);
    entry->call();
  }
}

void xfmr_generator::encodeSources(const std::vector<std::vector<int32_t>> &sources) {
  auto *ids = encode.ids->as<int32_t>();
  auto *mask = encode.mask->as<int32_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<int32_t> &source = sources[b];
    if (static_cast<int64_t>(source.size()) > encode.tokens)
      fail("source " + std::to_string(b + 1) + " has " + std::to_string(source.size()) +
           " tokens, more than the " + std::to_string(encode.tokens) +
           " the encoder was compiled for (xfmrc --seq-len)");
    for (int64_t t = 0; t < encode.tokens; ++t) {
      bool real = static_cast<size_t>(t) < source.size();
      if (real && (source[t] < 0 || source[t] >= vocab))
        fail("token id " + std::to_string(source[t]) + " is outside the vocabulary [0, " +
             std::to_string(vocab) + ")");
      ids[b * encode.tokens + t] = real ? source[t] : 0;
      mask[b * encode.tokens + t] = real;
    }
    lengths[b] = 0;
  }
  encode.call();
  std::copy_n(encode.mask->data, encode.mask->size, sourceMask->data);
}

void xfmr_generator::copyRows(const std::vector<int64_t> &targets,
                              const std::vector<int64_t> &sources, bool withSource) {
  std::vector<int64_t> old = lengths;
  // `rowBytes(source)`: the bytes of a buffer's row `source` to copy.
  auto copy = [&](Buffer &buffer, const std::function<size_t(int64_t)> &rowBytes) {
    size_t sequenceBytes = buffer.size / batch;
    // Each source's bytes, saved before any target is written.
    std::map<int64_t, std::vector<uint8_t>> saved;
    for (size_t i = 0; i < targets.size(); ++i)
      if (targets[i] != sources[i] && !saved.count(sources[i])) {
        const uint8_t *row = buffer.data + sources[i] * sequenceBytes;
        saved[sources[i]].assign(row, row + rowBytes(sources[i]));
      }
    for (size_t i = 0; i < targets.size(); ++i)
      if (targets[i] != sources[i])
        std::copy(saved[sources[i]].begin(), saved[sources[i]].end(),
                  buffer.data + targets[i] * sequenceBytes);
  };
  for (auto &[name, cache] : caches) {
    size_t positionBytes = cache->size / batch / context;
    copy(*cache, [&](int64_t source) { return old[source] * positionBytes; });
  }
  if (withSource) {
    for (auto &entry : cross) {
      Buffer &rows = *entry.second;
      copy(rows, [&](int64_t) { return rows.size / batch; });
    }
    if (sourceMask)
      copy(*sourceMask, [&](int64_t) { return sourceMask->size / batch; });
  }
  for (size_t i = 0; i < targets.size(); ++i)
    lengths[targets[i]] = old[sources[i]];
}

void xfmr_generator::setShape(int64_t &slot, int64_t value, const std::string &name) {
  if (slot && slot != value)
    fail("corrupt generator manifest: '" + name + "' disagrees on a dimension");
  slot = value;
}

void xfmr_generator::checkTokens(const std::vector<std::vector<int32_t>> &tokens) const {
  for (int64_t b = 0; b < batch; ++b) {
    for (int32_t id : tokens[b])
      if (id < 0 || id >= vocab)
        fail("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
             std::to_string(vocab) + ")");
    if (lengths[b] + static_cast<int64_t>(tokens[b].size()) > context)
      fail("sequence " + std::to_string(b) + " would hold " +
           std::to_string(lengths[b] + tokens[b].size()) + " tokens, past the context of " +
           std::to_string(context) + " (xfmrc --max-context)");
  }
}

int64_t xfmr_generator::rowPrefillLimit() const {
  // A one-sequence call read GPT-2 small's 32-token chunk at 0.62 times the
  // tokens a second of a call of sixteen such chunks (46 ms against 459 ms):
  // up to 9 prompts of 16, one-sequence calls cost less.
  return prefillRows.empty() ? 0 : std::max<int64_t>(1, batch * 3 / 5);
}

int64_t xfmr_generator::rowDecodeLimit() const {
  // A step streams every weight whatever its rows: a one-sequence step of
  // GPT-2 small (f32, 2 threads) cost 17-18 ms, a step of sixteen 28-30 ms,
  // so only a sequence alone is cheaper a row at a time.
  return decodeRows.empty() ? 0 : 1;
}

int64_t xfmr_generator::decodedPromptLimit() const {
  // A prefill chunk costs what it costs however few of its tokens are used.
  // On the CPU, chunks of 128 cost 9 (GPT-2 small, f32) to 24 (Llama-3.2-1B,
  // int4) decode steps in docs/benchmarks.md, so up to a sixteenth of a
  // chunk, and at most 8 tokens (what was measured), read faster a token a
  // step. Over a batch, decode steps cost more (each computes every row),
  // and prefill_row reads a few prompts cheaply.
  return batch == 1 ? std::min<int64_t>(prefill.tokens / 16, 8) : 0;
}

void xfmr_generator::call(Entry &entry, const std::vector<std::vector<int32_t>> &tokens,
                          float *logits) {
  checkTokens(tokens);
  size_t longest = 0;
  for (const std::vector<int32_t> &row : tokens)
    longest = std::max(longest, row.size());
  if (&entry == &prefill && static_cast<int64_t>(longest) <= decodedPromptLimit()) {
    promptDecodeSteps += static_cast<int64_t>(longest);
    return append(decode, tokens, logits);
  }
  int64_t reading = 0;
  for (const std::vector<int32_t> &row : tokens)
    reading += !row.empty();
  // A row's logits are the same through either entry (the batch's rows are
  // computed apart), so the cheaper serves: the one-sequence entry for a
  // few sequences, the batch's for many (its products are larger, and run
  // nearer the machine's peak).
  std::vector<Entry> *rows = &entry == &prefill  ? &prefillRows
                             : &entry == &decode ? &decodeRows
                                                 : nullptr;
  int64_t limit = &entry == &prefill ? rowPrefillLimit() : rowDecodeLimit();
  bool decoding = &entry == &decode;
  if (rows && reading <= limit) {
    for (int64_t b = 0; b < batch; ++b)
      if (!tokens[b].empty())
        run((*rows)[b], b, 1, &tokens[b], logits);
    decodeCalls.row += decoding ? reading : 0;
    return;
  }
  // Steps of sequences that all lie in one group of rows take that group's
  // entry: it streams the weights as the batch's does, but multiplies them
  // with a few rows instead of all.
  if (int64_t size = decoding ? decodeGroupRows() : 0) {
    int64_t first = batch, last = -1;
    for (int64_t b = 0; b < batch; ++b)
      if (!tokens[b].empty()) {
        first = std::min(first, b);
        last = b;
      }
    if (last >= 0 && first / size == last / size) {
      int64_t group = first / size;
      ++decodeCalls.group;
      return run(decodeGroups[group], group * size, size, &tokens[group * size], logits);
    }
  }
  decodeCalls.batch += decoding;
  run(entry, 0, batch, tokens.data(), logits);
}

void xfmr_generator::run(Entry &entry, int64_t first, int64_t rows,
                         const std::vector<int32_t> *tokens, float *logits) {
  auto *ids = entry.ids->as<int32_t>();
  auto *mask = entry.mask->as<int32_t>();
  auto *positions = entry.positions->as<int32_t>();
  bool any = false;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t take = static_cast<int64_t>(tokens[r].size());
    if (take > entry.tokens)
      fail("internal error: " + std::to_string(take) + " tokens for an entry of " +
           std::to_string(entry.tokens));
    any |= take > 0;
    positions[r] = static_cast<int32_t>(lengths[first + r]);
    for (int64_t t = 0; t < entry.tokens; ++t) {
      ids[r * entry.tokens + t] = t < take ? tokens[r][t] : 0;
      mask[r * entry.tokens + t] = t < take;
    }
  }
  if (!any)
    return;
  entry.call();
  size_t logitsBytes = vocab * xfmr_dtype_size(entry.logitsSpec->dtype);
  for (int64_t r = 0; r < rows; ++r) {
    if (tokens[r].empty())
      continue;
    lengths[first + r] += static_cast<int64_t>(tokens[r].size());
    convertElements(entry.logitsSpec->dtype, entry.logits->data + r * logitsBytes, vocab,
                    XFMR_DTYPE_F32, logits + (first + r) * vocab);
  }
}

void xfmr_generator::append(Entry &entry, const std::vector<std::vector<int32_t>> &tokens,
                            float *logits) {
  checkTokens(tokens);
  std::vector<size_t> done(batch, 0);
  while (true) {
    std::vector<std::vector<int32_t>> chunk(batch);
    bool any = false;
    for (int64_t b = 0; b < batch; ++b) {
      size_t take = std::min<size_t>(entry.tokens, tokens[b].size() - done[b]);
      chunk[b].assign(tokens[b].begin() + done[b], tokens[b].begin() + done[b] + take);
      done[b] += take;
      any |= take > 0;
    }
    if (!any)
      return;
    call(entry, chunk, logits);
  }
}

namespace {

struct Options {
  std::string weights, tokenizer, saveLogits, system, chatTemplate;
  bool chat = false, useChatTemplate = true;
  std::vector<std::string> prompts;
  std::vector<std::string> stops;
  bool ids = false, ignoreEos = false, echo = true, warmUp = true, mapWeights = true;
  WeightsCache weightsCache = WeightsCache::Auto;
  int64_t predict = 128;
  int threads = 0;
  uint64_t seed = 0;
  bool seeded = false;
  xfmr_sampling sampling = xfmr_sampling_defaults();
  int64_t beams = 1;
  double lengthPenalty = 1.0;
  EarlyStopping earlyStopping = EarlyStopping::False;
  bool serve = false;
  ServerOptions server;
};

void printHelp(const char *argv0) {
  std::printf("usage: %s -p PROMPT [options]\n"
              "\n"
              "Generates text from a prompt with the compiled model, token by token over its KV\n"
              "cache, streaming it as it comes, then prints the prompt and generation speed.\n"
              "\n"
              "  -p, --prompt TEXT     the prompt; several -p generate for several sequences at\n"
              "                        once (up to the compiled --batch)\n"
              "  -f, --file FILE       read a prompt from FILE\n"
              "  --ids                 prompts are token ids (spaces between), output is ids\n"
              "  --chat                a conversation: each line of standard input (and -p\n"
              "                        first) is a user's turn, answered in turn; the KV cache\n"
              "                        is kept, so a turn prefills only its own tokens\n"
              "  --system TEXT         the conversation's system message\n"
              "  --chat-template FILE  the Jinja chat template (default: the checkpoint's)\n"
              "  --no-chat-template    pass -p to a chat checkpoint as it is, not as a user's\n"
              "                        message in its chat template\n"
              "  --tokenize, --detokenize  run the tokenizer alone (see --tokenize --help)\n"
              "  -n, --n-predict N     tokens to generate (default 128)\n"
              "  --temp T              temperature (default 0.8; 0: greedy)\n"
              "  --top-k K             keep the K likeliest tokens (default 40; 0: all)\n"
              "  --top-p P             keep the likeliest tokens whose probabilities reach P\n"
              "                        (default 0.95; 1: all)\n"
              "  --repeat-penalty R    divide the logits of tokens seen before by R (default 1)\n"
              "  --repeat-last-n N     tokens the penalty looks back at (default 64; 0: all)\n"
              "  -s, --seed N          seed of the sampler (default: random, printed)\n"
              "  --stop TEXT           stop when the generated text ends with TEXT (repeatable)\n"
              "  --ignore-eos          go on past the end-of-sequence token\n"
              "  --num-beams K         beam search over K beams (K up to the compiled --batch;\n"
              "                        an encoder-decoder's: one prompt), as generate() does\n"
              "                        it: no sampling; the repeat penalty applies to the\n"
              "                        log-probabilities\n"
              "  --length-penalty L    divide finished beams' log-probabilities by length^L\n"
              "                        (default 1)\n"
              "  --early-stopping E    true, false (default) or never, as generate()'s\n"
              "  --no-echo             do not print the prompt before the generated text\n"
              "  --no-warmup           skip the run of each entry on no tokens at start-up\n"
              "  --no-mmap             copy the weights into memory (on huge pages) rather than\n"
              "                        use those stored as the kernels read them where the file\n"
              "                        is mapped\n"
              "  --weights-cache WHEN  keep the weights as the kernels read them in a file beside\n"
              "                        the checkpoint (.xfmr-weights-*.safetensors), mapped at\n"
              "                        the next start: auto (default: when loading converts 64\n"
              "                        MiB or more: quantizing, rounding), always or off\n"
              "  -m, --weights PATH    the model's tensors: .safetensors file or checkpoint\n"
              "                        directory (default: the checkpoint compiled from)\n"
              "  --tokenizer DIR       the tokenizer's directory (default: the weights', or the\n"
              "                        checkpoint's the model was compiled from)\n"
              "  -t, --threads N       OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
              "  --save-logits FILE    write each sequence's generated tokens and the logits\n"
              "                        they were drawn from (.safetensors)\n"
              "\n%s",
              argv0, kServerHelp);
}

double parseNumber(const char *flag, const std::string &text, double low, double high) {
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || errno == ERANGE || !(value >= low && value <= high)) {
    char range[64];
    std::snprintf(range, sizeof(range), "[%g, %g]", low, high);
    fail(std::string("flag ") + flag + " needs a number in " + range + ", got '" + text + "'");
  }
  return value;
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], v;
    auto value = [&](const char *longFlag, const char *shortFlag = nullptr) {
      return flagValue(argc, argv, i, longFlag, v) ||
             (shortFlag && flagValue(argc, argv, i, shortFlag, v));
    };
    if (value("--prompt", "-p"))
      o.prompts.push_back(v);
    else if (value("--file", "-f"))
      o.prompts.push_back(readFileText(v, "prompt file"));
    else if (arg == "--ids")
      o.ids = true;
    else if (arg == "--chat")
      o.chat = true;
    else if (value("--system"))
      o.system = v;
    else if (value("--chat-template"))
      o.chatTemplate = v;
    else if (arg == "--no-chat-template")
      o.useChatTemplate = false;
    else if (value("--n-predict", "-n")) {
      o.predict = parseCount("--n-predict", v, int64_t(1) << 30);
      if (o.predict < 1)
        fail("flag --n-predict needs at least 1 token, got " + v);
    } else if (value("--temp"))
      o.sampling.temperature = parseNumber("--temp", v, 0.0, 1e6);
    else if (value("--top-k"))
      o.sampling.top_k = parseCount("--top-k", v, int64_t(1) << 31);
    else if (value("--top-p")) {
      o.sampling.top_p = parseNumber("--top-p", v, 0.0, 1.0);
      if (o.sampling.top_p <= 0)
        fail("flag --top-p needs a number in (0, 1], got '" + v + "'");
    } else if (value("--repeat-penalty")) {
      o.sampling.repeat_penalty = parseNumber("--repeat-penalty", v, 0.0, 1e6);
      if (o.sampling.repeat_penalty <= 0)
        fail("flag --repeat-penalty needs a positive number, got '" + v + "'");
    } else if (value("--repeat-last-n"))
      o.sampling.repeat_last_n = parseCount("--repeat-last-n", v, int64_t(1) << 31);
    else if (value("--seed", "-s")) {
      o.seed = static_cast<uint64_t>(parseCount("--seed", v, INT64_MAX));
      o.seeded = true;
    } else if (value("--stop")) {
      if (v.empty())
        fail("flag --stop needs a non-empty text");
      o.stops.push_back(v);
    } else if (arg == "--ignore-eos")
      o.ignoreEos = true;
    else if (arg == "--no-warmup")
      o.warmUp = false;
    else if (arg == "--no-mmap")
      o.mapWeights = false;
    else if (value("--weights-cache"))
      o.weightsCache = parseWeightsCache(v);
    else if (arg == "--no-echo")
      o.echo = false;
    else if (value("--weights", "-m"))
      o.weights = v;
    else if (value("--tokenizer"))
      o.tokenizer = v;
    else if (value("--threads", "-t"))
      o.threads = static_cast<int>(parseCount("--threads", v, 1 << 16));
    else if (value("--save-logits"))
      o.saveLogits = v;
    else if (value("--num-beams")) {
      o.beams = parseCount("--num-beams", v, 1 << 16);
      if (o.beams < 1)
        fail("flag --num-beams needs at least 1 beam, got " + v);
    } else if (value("--length-penalty"))
      o.lengthPenalty = parseNumber("--length-penalty", v, -1e6, 1e6);
    else if (value("--early-stopping")) {
      if (v == "true")
        o.earlyStopping = EarlyStopping::True;
      else if (v == "false")
        o.earlyStopping = EarlyStopping::False;
      else if (v == "never")
        o.earlyStopping = EarlyStopping::Never;
      else
        fail("flag --early-stopping needs true, false or never, got '" + v + "'");
    } else if (!parseServerFlag(argc, argv, i, o.serve, o.server))
      fail("unknown argument '" + arg + "' (see --help)");
  }
  if (o.serve) {
    if (!o.prompts.empty() || o.chat || o.ids || o.beams > 1)
      fail("--serve takes its prompts over HTTP: it does not take -p, -f, --chat, --ids or "
           "--num-beams");
    return o;
  }
  if (o.prompts.empty() && !o.chat)
    fail("no prompt: give one with -p TEXT or -f FILE, or --chat (see --help)");
  if (o.chat && o.ids)
    fail("--chat talks in text: it does not take --ids");
  if (o.chat && o.beams > 1)
    fail("--chat samples or chooses greedily: it does not take --num-beams");
  if (o.beams > 1 && (!o.stops.empty() || !o.saveLogits.empty()))
    fail("--num-beams does not take --stop or --save-logits");
  if (!o.useChatTemplate && (o.chat || !o.chatTemplate.empty() || !o.system.empty()))
    fail("--no-chat-template cannot go with --chat, --chat-template or --system");
  return o;
}

/// Generation of one sequence: its tokens and text.
struct Sequence {
  /// The tokens already in the cache before the prompt (a conversation's
  /// earlier turns), what the prompt adds, and what was generated.
  std::vector<int32_t> context, prompt, generated;
  /// The prompt's and the generated tokens' bytes; how many of them were
  /// printed (a stream holds an incomplete character back).
  std::string promptBytes, bytes;
  size_t printed = 0;
  /// The generated tokens' text, in the context of those before them.
  std::shared_ptr<DecodeStream> stream;
  std::vector<float> logits; // of each generated token, when saved
};

class GeneratorCommand {
public:
  struct Entries {
    const char *encodeManifest = nullptr;
    void (*encode)(void **) = nullptr;
    const char *prefillManifest;
    void (*prefill)(void **);
    const char *decodeManifest;
    void (*decode)(void **);
    const char *prefillRowManifest;
    void (*prefillRow)(void **);
    const char *decodeRowManifest;
    void (*decodeRow)(void **);
    const char *decodeGroupManifest;
    void (*decodeGroup)(void **);
  };

  GeneratorCommand(const char *argv0, const Entries &entries) : argv0(argv0), entries(entries) {}

  int run(int argc, char **argv) {
    if (wantsTokenizerCommand(argc, argv))
      return runTokenizerCommand(argc, argv, parseManifest(entries.prefillManifest).defaultWeights);
    if (wantsHelp(argc, argv)) {
      printHelp(argv0);
      return 0;
    }
    options = parseOptions(argc, argv);
    if (options.serve)
      blockTerminationSignals();
    setThreads(options.threads);
    xfmr_generator generator(entries.encodeManifest, entries.encode, entries.prefillManifest,
                             entries.prefill, entries.decodeManifest, entries.decode,
                             options.weights, options.mapWeights, options.weightsCache);
    if (entries.prefillRow)
      generator.addRowPrefill(entries.prefillRowManifest, entries.prefillRow);
    if (entries.decodeRow)
      generator.addRowDecode(entries.decodeRowManifest, entries.decodeRow);
    if (entries.decodeGroup)
      generator.addRowDecode(entries.decodeGroupManifest, entries.decodeGroup);
    if (static_cast<int64_t>(options.prompts.size()) > generator.batch)
      fail(std::to_string(options.prompts.size()) + " prompts, but the model generates " +
           std::to_string(generator.batch) + " sequences at once (xfmrc --batch)");
    // An encoder-decoder's beams all read the cross-attention rows of its
    // one source.
    if (options.beams > 1 && options.prompts.size() > 1 && generator.encoderDecoder())
      fail("beam search (--num-beams) of an encoder-decoder takes one prompt");
    if (options.beams > generator.batch)
      fail("--num-beams=" + std::to_string(options.beams) +
           " needs a model compiled for as "
           "many sequences (xfmrc --batch), this one has " +
           std::to_string(generator.batch));
    const Manifest &manifest = generator.prefill.manifest;
    loadTokenizerFor(manifest, generator.vocab);
    if (options.chat && generator.encoderDecoder())
      fail("--chat needs a decoder-only model");
    // An encoder-decoder's source is not a conversation.
    if (generator.encoderDecoder())
      chatFormat.reset();
    if (options.warmUp)
      generator.warmUp();
    std::fprintf(stderr,
                 "weights: %zu tensors, %.1f MiB used where the file maps them, %.1f MiB "
                 "converted in %.2f s\n",
                 generator.weights.size(), generator.weightBytes.mapped / 1048576.0,
                 generator.weightBytes.converted / 1048576.0, generator.loadSeconds);
    reportWeightsCache(generator.weightBytes);
    std::fprintf(stderr,
                 "KV cache: %zu tensors of %" PRId64 " sequences x %" PRId64
                 " positions, %.1f MiB\n",
                 generator.caches.size() + generator.cross.size(), generator.batch,
                 generator.context, generator.cacheBytes / 1048576.0);
    std::fprintf(stderr, "prefill: chunks of %" PRId64 " tokens", generator.prefill.tokens);
    if (int64_t limit = generator.rowPrefillLimit())
      std::fprintf(stderr, "; up to %" PRId64 " prompts at once one by one", limit);
    if (int64_t limit = generator.decodedPromptLimit())
      std::fprintf(stderr, "; up to %" PRId64 " tokens a decode step each", limit);
    if (generator.rowDecodeLimit())
      std::fprintf(stderr, "; a sequence decoding alone takes steps of its own");
    if (int64_t rows = generator.decodeGroupRows())
      std::fprintf(stderr, "; sequences of one group of %" PRId64 " rows take steps of the group's",
                   rows);
    std::fprintf(stderr, "\n");
    if (tokenizer && !manifest.eosTokenIds.empty()) {
      std::string ends;
      for (int64_t id : manifest.eosTokenIds)
        ends += (ends.empty() ? "" : ", ") + std::to_string(id) + " '" +
                replaceInvalidUtf8(tokenizer->decode({static_cast<int32_t>(id)})) + "'";
      std::fprintf(stderr, "generation ends at: %s\n", ends.c_str());
    }
    // GPU executables keep their temporaries on the device, unplanned.
    if (generator.arenaBytes)
      std::fprintf(stderr, "activations: %.1f MiB (the compiled entries' temporaries)\n",
                   generator.arenaBytes / 1048576.0);
    if (!options.seeded && !options.serve && options.beams == 1 &&
        options.sampling.temperature > 0) {
      options.seed = std::random_device{}();
      std::fprintf(stderr, "seed: %" PRIu64 "\n", options.seed);
    }

    if (options.serve)
      return serve(generator);
    if (options.chat)
      return chat(generator);

    // The prompts, and what the decoder starts from: the prompt itself, or
    // an encoder-decoder's start token after the prompt is encoded.
    std::vector<Sequence> sequences(options.prompts.size());
    std::vector<std::vector<int32_t>> sources(generator.batch);
    for (size_t i = 0; i < sequences.size(); ++i) {
      std::string what = "prompt " + std::to_string(i + 1);
      Sequence &s = sequences[i];
      if (options.ids)
        s.prompt = parseTokenIds(options.prompts[i], what);
      else if (chatFormat)
        s.prompt = tokenizer->encode(chatFormat->render(conversation(options.prompts[i]), true),
                                     what, /*addSpecialTokens=*/false);
      else
        s.prompt = tokenizer->encode(options.prompts[i], what);
      if (s.prompt.empty())
        fail(what + " is empty");
      // A chat prompt is the user's message: the template around it is not
      // echoed.
      if (options.echo && !generator.encoderDecoder() && !chatFormat)
        s.promptBytes = options.ids ? idsText(s.prompt) : tokenizer->decode(s.prompt);
    }
    auto start = std::chrono::steady_clock::now();
    size_t promptTokens = 0;
    for (const Sequence &s : sequences)
      promptTokens += s.prompt.size();
    if (generator.encoderDecoder()) {
      if (manifest.decoderStartTokenId < 0)
        fail("the model's config names no decoder_start_token_id to start decoding from");
      for (int64_t b = 0; b < generator.batch; ++b)
        sources[b] = sequences[std::min<size_t>(b, sequences.size() - 1)].prompt;
      generator.encodeSources(sources);
      for (Sequence &s : sequences)
        s.prompt = {static_cast<int32_t>(manifest.decoderStartTokenId)};
    }
    int status = sample(generator, sequences, start, promptTokens);
    if (!options.saveLogits.empty())
      saveLogits(options.saveLogits, sequences, generator.vocab);
    return status;
  }

private:
  void loadTokenizerFor(const Manifest &manifest, int64_t vocab) {
    if (options.ids)
      return;
    std::string directory;
    tokenizer = findTokenizer(options.tokenizer, options.weights, manifest.defaultWeights,
                              ", or token ids with --ids", &directory);
    if (options.useChatTemplate)
      chatFormat = ChatFormat::load(directory, options.chatTemplate);
    if (!chatFormat && (options.chat || !options.system.empty()))
      fail("the checkpoint has no chat template (tokenizer_config.json's chat_template or "
           "chat_template.jinja in '" +
           directory + "'): pass --chat-template FILE");
    if (tokenizer->size() > vocab)
      fail("the tokenizer '" + tokenizer->source + "' has " + std::to_string(tokenizer->size()) +
           " tokens, more than the model's " + std::to_string(vocab));
  }

  std::string tokenText(Sequence &s, int32_t token) const {
    return s.stream ? s.stream->step(token) : " " + std::to_string(token);
  }

  /// Sampling, greedy or beam-search generation of every sequence at once,
  /// on the engine.
  int sample(xfmr_generator &generator, std::vector<Sequence> &sequences,
             std::chrono::steady_clock::time_point start, size_t promptTokens) {
    bool streaming = sequences.size() == 1;
    if (streaming)
      emit(sequences[0], "", true);
    Engine engine(generator, options.ids ? nullptr : tokenizer.get());
    std::vector<std::shared_ptr<Generation>> generations;
    for (size_t i = 0; i < sequences.size(); ++i) {
      auto g = std::make_shared<Generation>();
      g->context = sequences[i].context;
      g->prompt = sequences[i].prompt;
      g->settings.sampling = options.sampling;
      g->settings.seed = options.seed + i;
      g->settings.maxTokens = options.predict;
      g->settings.stops = options.stops;
      g->settings.ignoreEos = options.ignoreEos;
      g->settings.keepLogits = !options.saveLogits.empty();
      g->settings.beams = options.beams;
      g->settings.lengthPenalty = options.lengthPenalty;
      g->settings.earlyStopping = options.earlyStopping;
      Sequence &s = sequences[i];
      g->onToken = [&s, streaming](const GeneratedToken &token) { emit(s, token.text, streaming); };
      g->onFinish = [&s](const std::string &tail) { emit(s, tail, false); };
      engine.submit(g);
      generations.push_back(std::move(g));
    }
    engine.runUntilIdle();
    auto promptRead = start, end = std::chrono::steady_clock::now();
    size_t generatedTokens = 0;
    bool contextFull = false;
    for (size_t i = 0; i < sequences.size(); ++i) {
      const Generation &g = *generations[i];
      promptRead = std::max(promptRead, g.promptRead);
      sequences[i].generated = g.generated;
      sequences[i].logits = g.logits;
      generatedTokens += g.generated.size();
      contextFull |= g.finish == FinishReason::ContextFull;
    }
    finish(sequences, streaming, contextFull, generator.context);
    report("prompt", promptTokens,
           std::chrono::duration<double, std::milli>(promptRead - start).count());
    if (generator.promptDecodeSteps)
      std::fprintf(stderr, "prompt: %" PRId64 " tokens read a decode step each\n",
                   generator.promptDecodeSteps);
    if (generator.batch > 1) {
      const xfmr_generator::DecodeCalls &calls = generator.decodeCalls;
      std::fprintf(stderr,
                   "decode calls: %" PRId64 " of the batch, %" PRId64 " of a group, %" PRId64
                   " of a sequence\n",
                   calls.batch, calls.group, calls.row);
    }
    report("generation", generatedTokens,
           std::chrono::duration<double, std::milli>(end - promptRead).count());
    return 0;
  }

  /// --serve: the server of libxfmr_server.a.
  int serve(xfmr_generator &generator) {
    if (generator.encoderDecoder())
      fail("--serve needs a decoder-only model");
    if (options.server.parallel > generator.batch)
      fail("--parallel=" + std::to_string(options.server.parallel) +
           " needs a model compiled for as many sequences (xfmrc --batch), this one has " +
           std::to_string(generator.batch));
    ServedModel model{servedModelName(options.weights, generator.prefill.manifest, argv0),
                      *tokenizer, &generator, chatFormat.get()};
    options.server.threads = options.threads;
    return runServer(model, options.server);
  }

  /// The conversation's start: --system's message, if any.
  std::vector<ChatMessage> systemMessages() const {
    if (options.system.empty())
      return {};
    return {{"system", options.system}};
  }

  /// The conversation of --system and one user message.
  std::vector<ChatMessage> conversation(const std::string &user) const {
    std::vector<ChatMessage> messages = systemMessages();
    messages.push_back({"user", user});
    return messages;
  }

  /// --chat: each -p, then each line of standard input, is a user's turn.
  /// The cache holds the conversation so far; a turn prefills the tokens of
  /// the text its rendering adds to what the cache holds (or, if the
  /// template rewrote the earlier turns, the whole conversation again).
  int chat(xfmr_generator &generator) {
    std::vector<ChatMessage> messages = systemMessages();
    std::string cached;           // the text whose tokens the cache holds
    std::vector<int32_t> inCache; // those tokens
    std::vector<float> logits(generator.batch * generator.vocab);
    for (size_t turn = 0;; ++turn) {
      std::string user;
      if (turn < options.prompts.size()) {
        user = options.prompts[turn];
      } else {
        if (isatty(STDIN_FILENO))
          std::fprintf(stderr, "> ");
        if (!std::getline(std::cin, user))
          break;
      }
      messages.push_back({"user", user});
      std::string text = chatFormat->render(messages, /*addGenerationPrompt=*/true);
      std::string what = "turn " + std::to_string(turn + 1);
      Sequence s;
      if (!inCache.empty() && text.compare(0, cached.size(), cached) == 0) {
        s.prompt = tokenizer->encode(std::string_view(text).substr(cached.size()), what, false);
        s.context = inCache;
      } else {
        generator.lengths[0] = 0;
        s.prompt = tokenizer->encode(text, what, false);
      }
      if (s.prompt.empty())
        fail(what + " adds no tokens to the conversation");
      int64_t before = generator.lengths[0];
      std::vector<Sequence> sequences{s};
      sample(generator, sequences, std::chrono::steady_clock::now(), s.prompt.size());
      const Sequence &answered = sequences[0];
      // Sampling does not feed the token it ends on; the next turn needs it.
      if (!answered.generated.empty() &&
          generator.lengths[0] <
              before + static_cast<int64_t>(s.prompt.size() + answered.generated.size())) {
        std::vector<std::vector<int32_t>> last(generator.batch);
        last[0] = {answered.generated.back()};
        generator.append(generator.decode, last, logits.data());
      }
      std::string reply = replaceInvalidUtf8(tokenizer->decode(answered.generated));
      messages.push_back({"assistant", reply});
      cached = text + reply;
      inCache = s.context;
      inCache.insert(inCache.end(), s.prompt.begin(), s.prompt.end());
      inCache.insert(inCache.end(), answered.generated.begin(), answered.generated.end());
    }
    return 0;
  }

  /// Prints what is left of each sequence's text.
  void finish(std::vector<Sequence> sequences, bool streaming, bool contextFull, int64_t context) {
    for (Sequence &s : sequences)
      if (s.stream)
        emit(s, s.stream->finish(), false);
    if (streaming) {
      emit(sequences[0], "", true, /*flush=*/true);
      std::printf("\n");
    } else {
      for (size_t i = 0; i < sequences.size(); ++i) {
        // Written as bytes: a generated NUL must not end the line.
        std::string text = replaceInvalidUtf8(sequences[i].promptBytes + sequences[i].bytes);
        std::printf("[%zu] ", i + 1);
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::printf("\n");
      }
    }
    std::fflush(stdout);
    if (contextFull)
      std::fprintf(stderr,
                   "%s: stopped: the context of %" PRId64
                   " positions is full (xfmrc --max-context)\n",
                   argv0, context);
  }

  static std::string idsText(const std::vector<int32_t> &ids) {
    std::string text;
    for (int32_t id : ids)
      text += (text.empty() ? "" : " ") + std::to_string(id);
    return text;
  }

  /// Adds `bytes` to the sequence's text; when streaming, prints what
  /// forms whole characters (all of it when flushing), invalid UTF-8
  /// replaced as the tokenizers' decoders do.
  static void emit(Sequence &s, const std::string &bytes, bool streaming, bool flush = false) {
    s.bytes += bytes;
    if (!streaming)
      return;
    std::string all = s.promptBytes + s.bytes;
    size_t end = all.size() - (flush ? 0 : incompleteUtf8Tail(all));
    if (end <= s.printed)
      return;
    std::string text = replaceInvalidUtf8(std::string_view(all).substr(s.printed, end - s.printed));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    s.printed = end;
  }

  static void report(const char *what, size_t tokens, double ms) {
    double perToken = tokens ? ms / tokens : 0.0;
    double perSecond = ms > 0 ? tokens * 1000.0 / ms : 0.0;
    std::fprintf(stderr, "%s: %zu tokens in %.2f ms (%.2f ms/token, %.2f tokens/s)\n", what, tokens,
                 ms, perToken, perSecond);
  }

  void saveLogits(const std::string &path, const std::vector<Sequence> &sequences, int64_t vocab) {
    size_t steps = 0, length = 0;
    for (const Sequence &s : sequences) {
      steps = std::max(steps, s.logits.size() / vocab);
      length = std::max(length, s.prompt.size() + s.generated.size());
    }
    int64_t count = static_cast<int64_t>(sequences.size());
    std::vector<float> logits(count * steps * vocab, 0.0f);
    std::vector<int32_t> tokens(count * length, -1), promptLengths(count), generated(count);
    for (int64_t i = 0; i < count; ++i) {
      const Sequence &s = sequences[i];
      std::copy(s.logits.begin(), s.logits.end(), logits.begin() + i * steps * vocab);
      std::copy(s.prompt.begin(), s.prompt.end(), tokens.begin() + i * length);
      std::copy(s.generated.begin(), s.generated.end(),
                tokens.begin() + i * length + s.prompt.size());
      promptLengths[i] = static_cast<int32_t>(s.prompt.size());
      generated[i] = static_cast<int32_t>(s.generated.size());
    }
    int64_t logitsShape[3] = {count, static_cast<int64_t>(steps), vocab};
    int64_t tokensShape[2] = {count, static_cast<int64_t>(length)};
    xfmr_tensor_ref refs[4] = {{"logits", XFMR_DTYPE_F32, 3, logitsShape, logits.data()},
                               {"tokens", XFMR_DTYPE_I32, 2, tokensShape, tokens.data()},
                               {"prompt_lengths", XFMR_DTYPE_I32, 1, &count, promptLengths.data()},
                               {"generated_lengths", XFMR_DTYPE_I32, 1, &count, generated.data()}};
    char err[512];
    if (xfmr_safetensors_write(path.c_str(), refs, 4, err, sizeof(err)))
      fail(err);
  }

  const char *argv0;
  Entries entries;
  Options options;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatFormat> chatFormat;
};

} // namespace

xfmr_sampling xfmr_sampling_defaults(void) {
  xfmr_sampling settings;
  settings.temperature = 0.8;
  settings.top_k = 40;
  settings.top_p = 0.95;
  settings.repeat_penalty = 1.0;
  settings.repeat_last_n = 64;
  return settings;
}

void xfmr_sampling_probabilities(const float *logits, int64_t vocab, const xfmr_sampling *settings,
                                 const int32_t *history, size_t historyLength,
                                 float *probabilities) {
  std::vector<float> result =
      sampledProbabilities(logits, vocab, *settings, history, historyLength);
  std::copy(result.begin(), result.end(), probabilities);
}

struct xfmr_sampler {
  Sampler sampler;
};

xfmr_sampler *xfmr_sampler_create(const xfmr_sampling *settings, uint64_t seed) {
  return new xfmr_sampler{Sampler(*settings, seed)};
}

void xfmr_sampler_free(xfmr_sampler *sampler) { delete sampler; }

int32_t xfmr_sampler_sample(xfmr_sampler *sampler, const float *logits, int64_t vocab,
                            const int32_t *history, size_t historyLength) {
  return sampler->sampler.sample(logits, vocab,
                                 std::vector<int32_t>(history, history + historyLength));
}

/// Runs `body`, turning a Failure into an error message and a non-zero
/// return.
template <typename Body> static int guarded(char *err, size_t errSize, Body body) {
  try {
    body();
    return 0;
  } catch (const Failure &failure) {
    setError(err, errSize, failure.message);
    return 1;
  }
}

xfmr_generator *xfmr_generator_create(const char *prefillManifest, void (*prefill)(void **),
                                      const char *decodeManifest, void (*decode)(void **),
                                      const char *weights, char *err, size_t errSize) {
  xfmr_generator *generator = nullptr;
  guarded(err, errSize, [&] {
    generator = new xfmr_generator(nullptr, nullptr, prefillManifest, prefill, decodeManifest,
                                   decode, weights ? weights : "");
  });
  return generator;
}

xfmr_generator *xfmr_seq2seq_generator_create(const char *encodeManifest, void (*encode)(void **),
                                              const char *prefillManifest, void (*prefill)(void **),
                                              const char *decodeManifest, void (*decode)(void **),
                                              const char *weights, char *err, size_t errSize) {
  xfmr_generator *generator = nullptr;
  guarded(err, errSize, [&] {
    if (!encodeManifest || !encode)
      fail("an encoder-decoder generator needs its encode entry");
    generator = new xfmr_generator(encodeManifest, encode, prefillManifest, prefill, decodeManifest,
                                   decode, weights ? weights : "");
  });
  return generator;
}

int xfmr_generator_set_row_prefill(xfmr_generator *generator, const char *manifest,
                                   void (*prefillRow)(void **), char *err, size_t errSize) {
  return guarded(err, errSize, [&] {
    if (!manifest || !prefillRow)
      fail("no prefill_row entry given");
    generator->addRowPrefill(manifest, prefillRow);
  });
}

int xfmr_generator_set_row_decode(xfmr_generator *generator, const char *manifest,
                                  void (*decodeRow)(void **), char *err, size_t errSize) {
  return guarded(err, errSize, [&] {
    if (!manifest || !decodeRow)
      fail("no decode entry given");
    generator->addRowDecode(manifest, decodeRow);
  });
}

void xfmr_generator_free(xfmr_generator *generator) { delete generator; }

int xfmr_generator_encode(xfmr_generator *generator, const int32_t *const *sources,
                          const size_t *lengths, char *err, size_t errSize) {
  return guarded(err, errSize, [&] {
    if (!generator->encoderDecoder())
      fail("the model has no encoder (xfmr_seq2seq_generator_create)");
    std::vector<std::vector<int32_t>> all(generator->batch);
    for (int64_t b = 0; b < generator->batch; ++b)
      if (sources && sources[b])
        all[b].assign(sources[b], sources[b] + lengths[b]);
    generator->encodeSources(all);
  });
}

int64_t xfmr_generator_token_id(const xfmr_generator *generator, const char *key) {
  const Manifest &manifest = generator->prefill.manifest;
  std::string_view name = key ? key : "";
  return name == "eos_token_id"   ? (manifest.eosTokenIds.empty() ? -1 : manifest.eosTokenIds[0])
         : name == "bos_token_id" ? manifest.bosTokenId
         : name == "pad_token_id" ? manifest.padTokenId
         : name == "decoder_start_token_id" ? manifest.decoderStartTokenId
                                            : -1;
}

int xfmr_generator_is_end_token(const xfmr_generator *generator, int64_t token) {
  const std::vector<int64_t> &ends = generator->prefill.manifest.eosTokenIds;
  return std::find(ends.begin(), ends.end(), token) != ends.end();
}

int64_t xfmr_generator_batch(const xfmr_generator *generator) { return generator->batch; }
int64_t xfmr_generator_context(const xfmr_generator *generator) { return generator->context; }
int64_t xfmr_generator_vocab(const xfmr_generator *generator) { return generator->vocab; }

int64_t xfmr_generator_length(const xfmr_generator *generator, int64_t sequence) {
  return sequence >= 0 && sequence < generator->batch ? generator->lengths[sequence] : -1;
}

void xfmr_generator_reset(xfmr_generator *generator, int64_t sequence) {
  if (sequence >= 0 && sequence < generator->batch)
    generator->lengths[sequence] = 0;
}

int xfmr_generator_append(xfmr_generator *generator, int64_t sequence, const int32_t *tokens,
                          size_t count, float *logits, char *err, size_t errSize) {
  return guarded(err, errSize, [&] {
    if (sequence < 0 || sequence >= generator->batch)
      fail("sequence " + std::to_string(sequence) + " is outside [0, " +
           std::to_string(generator->batch) + ")");
    std::vector<std::vector<int32_t>> chunk(generator->batch);
    chunk[sequence].assign(tokens, tokens + count);
    std::vector<float> all(generator->batch * generator->vocab);
    generator->append(generator->prefill, chunk, all.data());
    std::copy_n(all.data() + sequence * generator->vocab, generator->vocab, logits);
  });
}

int xfmr_generator_step(xfmr_generator *generator, const int32_t *tokens, const uint8_t *active,
                        float *logits, char *err, size_t errSize) {
  return guarded(err, errSize, [&] {
    std::vector<std::vector<int32_t>> next(generator->batch);
    for (int64_t b = 0; b < generator->batch; ++b)
      if (!active || active[b])
        next[b] = {tokens[b]};
    generator->append(generator->decode, next, logits);
  });
}

extern "C" int xfmr_generator_main(int argc, char **argv, const char *prefillManifest,
                                   void (*prefill)(void **), const char *decodeManifest,
                                   void (*decode)(void **)) {
  return xfmr_seq2seq_generator_main(argc, argv, nullptr, nullptr, prefillManifest, prefill,
                                     decodeManifest, decode, nullptr, nullptr, nullptr, nullptr,
                                     nullptr, nullptr);
}

extern "C" int xfmr_seq2seq_generator_main(
    int argc, char **argv, const char *encodeManifest, void (*encode)(void **),
    const char *prefillManifest, void (*prefill)(void **), const char *decodeManifest,
    void (*decode)(void **), const char *prefillRowManifest, void (*prefillRow)(void **),
    const char *decodeRowManifest, void (*decodeRow)(void **), const char *decodeGroupManifest,
    void (*decodeGroup)(void **)) {
  const char *argv0 = argc > 0 ? argv[0] : "generate";
  GeneratorCommand::Entries entries{encodeManifest,    encode,    prefillManifest,     prefill,
                                    decodeManifest,    decode,    prefillRowManifest,  prefillRow,
                                    decodeRowManifest, decodeRow, decodeGroupManifest, decodeGroup};
  return runCommandLine(argv0, [&] { return GeneratorCommand(argv0, entries).run(argc, argv); });
}
