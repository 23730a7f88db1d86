//===- Generator.cpp - text generation over a compiled KV-cache model ----===//
//
// `xfmrc --generate` compiles two entries over the same weights and KV cache
// (per layer, [batch, context, heads, head_dim], owned here and updated in
// place by the entries):
//
//   prefill(input_ids [B, C], attention_mask [B, C], positions [B])
//   decode (input_ids [B, 1], attention_mask [B, 1], positions [B])
//
// each writing the new tokens' keys and values at positions[b] .. and
// returning the logits of each sequence's last token. A prompt goes through
// prefill in chunks of C tokens, then each generated token through decode;
// the sampler (Sampler.cpp) picks tokens, the checkpoint's tokenizer
// (Tokenizer.cpp) turns text into ids and back.
//
//===----------------------------------------------------------------------===//

#include "xfmr-rt/xfmr_runtime.h"

#include "Manifest.h"
#include "RuntimeSupport.h"
#include "Sampler.h"
#include "Tokenizer.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/stat.h>

using namespace xfmr::rt;

namespace {

/// One compiled entry and its argument buffers.
struct Entry {
  Manifest manifest;
  void (*function)(void **) = nullptr;
  std::unique_ptr<Buffer> ids, mask, positions, logits;
  const ArgSpec *logitsSpec = nullptr;
  int64_t tokens = 0; // per sequence and call
  std::vector<void *> args;
};

} // namespace

struct xfmr_generator {
  Entry prefill, decode;
  std::map<std::string, std::unique_ptr<Buffer>> weights, caches;
  int64_t batch = 0, context = 0, vocab = 0;
  size_t cacheBytes = 0;
  std::vector<int64_t> lengths;

  xfmr_generator(const char *prefillManifest, void (*prefillEntry)(void **),
                 const char *decodeManifest, void (*decodeEntry)(void **),
                 const std::string &weightsPath) {
    prefill.manifest = parseManifest(prefillManifest);
    prefill.function = prefillEntry;
    decode.manifest = parseManifest(decodeManifest);
    decode.function = decodeEntry;
    std::string path = weightsPath.empty() ? prefill.manifest.defaultWeights : weightsPath;
    if (path.empty())
      fail("missing --weights=PATH (the model was not compiled from a checkpoint)");
    weights = loadWeights(prefill.manifest, path);
    bind(prefill);
    bind(decode);
    if (decode.tokens != 1)
      fail("corrupt model: the decode entry takes " + std::to_string(decode.tokens) +
           " tokens a call");
    lengths.assign(batch, 0);
  }

  /// Checks an entry's arguments and points them at the shared weights and
  /// caches and at its own inputs and logits.
  void bind(Entry &entry) {
    for (const ArgSpec &arg : entry.manifest.args) {
      auto corrupt = [&](const std::string &why) {
        fail("corrupt generator manifest: argument '" + arg.name + "' " + why);
      };
      switch (arg.kind) {
      case ArgSpec::Kind::Param: {
        auto it = weights.find(arg.name);
        if (it == weights.end())
          corrupt("is a weight the prefill entry does not have");
        entry.args.push_back(it->second->data);
        break;
      }
      case ArgSpec::Kind::State: {
        if (arg.shape.size() < 2)
          corrupt("must be a [batch, context, ...] cache");
        std::unique_ptr<Buffer> &cache = caches[arg.name];
        if (!cache) {
          cache = allocate(arg);
          cacheBytes += cache->size;
        }
        if (cache->size != elementCount(arg.shape) * xfmr_dtype_size(arg.dtype))
          corrupt("has two shapes");
        setShape(batch, arg.shape[0], arg.name);
        setShape(context, arg.shape[1], arg.name);
        entry.args.push_back(cache->data);
        break;
      }
      case ArgSpec::Kind::Input: {
        std::unique_ptr<Buffer> *slot = arg.name == "input_ids"        ? &entry.ids
                                        : arg.name == "attention_mask" ? &entry.mask
                                        : arg.name == "positions"      ? &entry.positions
                                                                       : nullptr;
        if (!slot || arg.dtype != XFMR_DTYPE_I32)
          corrupt("is not an int32 input the generator fills");
        *slot = allocate(arg);
        setShape(batch, arg.shape[0], arg.name);
        if (arg.name != "positions")
          entry.tokens = arg.shape[1];
        entry.args.push_back((*slot)->data);
        break;
      }
      case ArgSpec::Kind::Output: {
        if (!arg.updates.empty()) {
          auto it = caches.find(arg.updates);
          if (it == caches.end())
            corrupt("updates unknown '" + arg.updates + "'");
          entry.args.push_back(it->second->data); // in place
        } else if (arg.name == "logits" && arg.shape.size() == 2) {
          entry.logits = allocate(arg);
          entry.logitsSpec = &arg;
          setShape(batch, arg.shape[0], arg.name);
          setShape(vocab, arg.shape[1], arg.name);
          entry.args.push_back(entry.logits->data);
        } else {
          corrupt("is not an output the generator reads");
        }
        break;
      }
      }
    }
    if (!entry.ids || !entry.mask || !entry.positions || !entry.logits)
      fail("corrupt generator manifest: an entry lacks input_ids, attention_mask, positions "
           "or logits");
  }

  void setShape(int64_t &slot, int64_t value, const std::string &name) {
    if (slot && slot != value)
      fail("corrupt generator manifest: '" + name + "' disagrees on a dimension");
    slot = value;
  }

  /// Appends tokens[b] to sequence b (none: inactive) through `entry`, as
  /// many calls as the longest needs, and writes each active sequence's
  /// next-token logits to logits[b * vocab ...].
  void append(Entry &entry, const std::vector<std::vector<int32_t>> &tokens, float *logits) {
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
    std::vector<size_t> done(batch, 0);
    std::vector<float> converted(batch * vocab);
    while (true) {
      bool any = false;
      auto *ids = entry.ids->as<int32_t>();
      auto *mask = entry.mask->as<int32_t>();
      auto *positions = entry.positions->as<int32_t>();
      std::vector<size_t> taken(batch, 0);
      for (int64_t b = 0; b < batch; ++b) {
        size_t take = std::min<size_t>(entry.tokens, tokens[b].size() - done[b]);
        taken[b] = take;
        any |= take > 0;
        positions[b] = static_cast<int32_t>(lengths[b]);
        for (int64_t t = 0; t < entry.tokens; ++t) {
          bool real = static_cast<size_t>(t) < take;
          ids[b * entry.tokens + t] = real ? tokens[b][done[b] + t] : 0;
          mask[b * entry.tokens + t] = real;
        }
      }
      if (!any)
        return;
      entry.function(entry.args.data());
      convertElements(entry.logitsSpec->dtype, entry.logits->data, converted.size(), XFMR_DTYPE_F32,
                      converted.data());
      for (int64_t b = 0; b < batch; ++b) {
        if (!taken[b])
          continue;
        done[b] += taken[b];
        lengths[b] += static_cast<int64_t>(taken[b]);
        if (done[b] == tokens[b].size())
          std::copy_n(converted.data() + b * vocab, vocab, logits + b * vocab);
      }
    }
  }
};

namespace {

struct Options {
  std::string weights, tokenizer, saveLogits;
  std::vector<std::string> prompts;
  std::vector<std::string> stops;
  bool ids = false, ignoreEos = false, echo = true;
  int64_t predict = 128;
  int threads = 0;
  uint64_t seed = 0;
  bool seeded = false;
  xfmr_sampling sampling = xfmr_sampling_defaults();
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
              "  --no-echo             do not print the prompt before the generated text\n"
              "  -m, --weights PATH    the model's tensors: .safetensors file or checkpoint\n"
              "                        directory (default: the checkpoint compiled from)\n"
              "  --tokenizer DIR       the tokenizer's directory (default: the weights')\n"
              "  -t, --threads N       OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
              "  --save-logits FILE    write each sequence's generated tokens and the logits\n"
              "                        they were drawn from (.safetensors)\n",
              argv0);
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

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot read prompt file '" + path + "': " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
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
      o.prompts.push_back(readText(v));
    else if (arg == "--ids")
      o.ids = true;
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
    else
      fail("unknown argument '" + arg + "' (see --help)");
  }
  if (o.prompts.empty())
    fail("no prompt: give one with -p TEXT or -f FILE (see --help)");
  return o;
}

bool isDirectory(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::vector<int32_t> parseIds(const std::string &text, const std::string &what) {
  std::vector<int32_t> ids;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    char *end = nullptr;
    errno = 0;
    long long id = std::strtoll(word.c_str(), &end, 10);
    if (*end || errno == ERANGE || id < INT32_MIN || id > INT32_MAX)
      fail(what + ": '" + word + "' is not a token id");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

/// Generation of one sequence: its tokens and text.
struct Sequence {
  std::vector<int32_t> prompt, generated;
  bool done = false;
  /// The prompt's and the generated tokens' bytes; how many of them were
  /// printed (a stream holds an incomplete character back).
  std::string promptBytes, bytes;
  size_t printed = 0;
  std::vector<float> logits; // of each generated token, when saved
};

class GeneratorCommand {
public:
  GeneratorCommand(const char *argv0, const char *prefillManifest, void (*prefill)(void **),
                   const char *decodeManifest, void (*decode)(void **))
      : argv0(argv0), prefillManifest(prefillManifest), prefillEntry(prefill),
        decodeManifest(decodeManifest), decodeEntry(decode) {}

  int run(int argc, char **argv) {
    if (wantsHelp(argc, argv)) {
      printHelp(argv0);
      return 0;
    }
    Options options = parseOptions(argc, argv);
    setThreads(options.threads);
    xfmr_generator generator(prefillManifest, prefillEntry, decodeManifest, decodeEntry,
                             options.weights);
    if (static_cast<int64_t>(options.prompts.size()) > generator.batch)
      fail(std::to_string(options.prompts.size()) + " prompts, but the model generates " +
           std::to_string(generator.batch) + " sequences at once (xfmrc --batch)");
    const Manifest &manifest = generator.prefill.manifest;
    std::unique_ptr<Tokenizer> tokenizer;
    if (!options.ids) {
      std::string weightsPath = options.weights.empty() ? manifest.defaultWeights : options.weights;
      std::string directory = !options.tokenizer.empty() ? options.tokenizer
                              : isDirectory(weightsPath) ? weightsPath
                                                         : "";
      tokenizer = directory.empty() ? nullptr : loadTokenizer(directory);
      if (!tokenizer)
        fail("no tokenizer" + (directory.empty() ? std::string() : " in '" + directory + "'") +
             " (tokenizer.json, or vocab.json and merges.txt): pass --tokenizer=DIR, or "
             "token ids with --ids");
      if (tokenizer->size() > generator.vocab)
        fail("the tokenizer '" + tokenizer->source + "' has " + std::to_string(tokenizer->size()) +
             " tokens, more than the model's " + std::to_string(generator.vocab));
    }
    std::fprintf(stderr,
                 "KV cache: %zu tensors of %" PRId64 " sequences x %" PRId64
                 " positions, %.1f MiB\n",
                 generator.caches.size(), generator.batch, generator.context,
                 generator.cacheBytes / 1048576.0);
    if (!options.seeded) {
      options.seed = std::random_device{}();
      std::fprintf(stderr, "seed: %" PRIu64 "\n", options.seed);
    }

    std::vector<Sequence> sequences(options.prompts.size());
    for (size_t i = 0; i < sequences.size(); ++i) {
      std::string what = "prompt " + std::to_string(i + 1);
      Sequence &s = sequences[i];
      s.prompt = options.ids ? parseIds(options.prompts[i], what)
                             : tokenizer->encode(options.prompts[i], what);
      if (s.prompt.empty())
        fail(what + " is empty");
      if (options.echo)
        s.promptBytes = options.ids ? idsText(s.prompt) : tokenizer->decode(s.prompt);
    }
    bool streaming = sequences.size() == 1;
    int64_t eos = options.ignoreEos ? -1 : manifest.eosTokenId;

    std::vector<float> logits(generator.batch * generator.vocab);
    std::vector<std::vector<int32_t>> chunk(generator.batch);
    for (size_t i = 0; i < sequences.size(); ++i)
      chunk[i] = sequences[i].prompt;
    if (streaming)
      emit(sequences[0], "", true);
    auto start = std::chrono::steady_clock::now();
    generator.append(generator.prefill, chunk, logits.data());
    double promptMs = elapsedMs(start);
    size_t promptTokens = 0;
    for (const Sequence &s : sequences)
      promptTokens += s.prompt.size();

    std::vector<Sampler> samplers;
    for (size_t i = 0; i < sequences.size(); ++i)
      samplers.emplace_back(options.sampling, options.seed + i);
    start = std::chrono::steady_clock::now();
    size_t generatedTokens = 0;
    bool contextFull = false;
    for (int64_t step = 0; step < options.predict; ++step) {
      std::vector<std::vector<int32_t>> next(generator.batch);
      bool any = false;
      for (size_t i = 0; i < sequences.size(); ++i) {
        Sequence &s = sequences[i];
        if (s.done)
          continue;
        const float *row = logits.data() + i * generator.vocab;
        std::vector<int32_t> history = s.prompt;
        history.insert(history.end(), s.generated.begin(), s.generated.end());
        int32_t token = samplers[i].sample(row, generator.vocab, history);
        if (!options.saveLogits.empty())
          s.logits.insert(s.logits.end(), row, row + generator.vocab);
        if (token == eos) {
          s.done = true;
          continue;
        }
        s.generated.push_back(token);
        ++generatedTokens;
        emit(s, options.ids ? " " + std::to_string(token) : tokenizer->tokenBytes(token),
             streaming);
        if (std::any_of(options.stops.begin(), options.stops.end(), [&](const std::string &stop) {
              return s.bytes.size() >= stop.size() &&
                     s.bytes.compare(s.bytes.size() - stop.size(), stop.size(), stop) == 0;
            }))
          s.done = true;
        if (step + 1 == options.predict || s.done)
          continue;
        if (generator.lengths[i] + 1 > generator.context) {
          contextFull = true;
          s.done = true;
          continue;
        }
        next[i] = {token};
        any = true;
      }
      if (!any)
        break;
      generator.append(generator.decode, next, logits.data());
    }
    double generationMs = elapsedMs(start);
    for (Sequence &s : sequences)
      emit(s, "", streaming, /*flush=*/true);
    if (streaming) {
      std::printf("\n");
    } else {
      for (size_t i = 0; i < sequences.size(); ++i)
        std::printf("[%zu] %s\n", i + 1,
                    replaceInvalidUtf8(sequences[i].promptBytes + sequences[i].bytes).c_str());
    }
    std::fflush(stdout);
    if (contextFull)
      std::fprintf(stderr,
                   "%s: stopped: the context of %" PRId64
                   " positions is full (xfmrc --max-context)\n",
                   argv0, generator.context);
    report("prompt", promptTokens, promptMs);
    report("generation", generatedTokens, generationMs);
    if (!options.saveLogits.empty())
      saveLogits(options.saveLogits, sequences, generator.vocab);
    return 0;
  }

private:
  static double elapsedMs(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
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
  const char *prefillManifest;
  void (*prefillEntry)(void **);
  const char *decodeManifest;
  void (*decodeEntry)(void **);
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
    generator = new xfmr_generator(prefillManifest, prefill, decodeManifest, decode,
                                   weights ? weights : "");
  });
  return generator;
}

void xfmr_generator_free(xfmr_generator *generator) { delete generator; }

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
  const char *argv0 = argc > 0 ? argv[0] : "generate";
  return runCommandLine(argv0, [&] {
    return GeneratorCommand(argv0, prefillManifest, prefill, decodeManifest, decode)
        .run(argc, argv);
  });
}
