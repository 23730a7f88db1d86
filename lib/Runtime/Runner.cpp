//===- Runner.cpp - the command line of compiled model executables --------===//
//
// `xfmrc model.json -o model` links a model object with this runner. The
// object carries a JSON manifest (argument order, names, shapes, the
// vocabulary size behind each token input) and a packed entry point; the
// runner loads the weights by name, reads token sequences, runs them in
// batches of the compiled batch size (padding as needed) and writes logits.
//
//===----------------------------------------------------------------------===//

#include "xfmr-rt/xfmr_runtime.h"

#include "CommandLine.h"
#include "Embedder.h"
#include "ModelWeights.h"
#include "RuntimeSupport.h"
#include "Server/Server.h"
#include "TokenFiles.h"
#include "TokenizerCommand.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace xfmr::rt;

namespace {

constexpr size_t kErrorSize = 512;

struct Options {
  std::string weights, input = "-", output = "-", format;
  /// Tensor mode: every model input read by name from this safetensors file.
  std::string inputs;
  int top = 0;
  int threads = 0;
  /// Tensor mode: time this many calls after a warm-up and report them.
  int benchmark = 0;
  bool info = false;
  /// --serve: /v1/embeddings; --tokenizer: the texts' tokenizer.
  bool serve = false;
  ServerOptions server;
  std::string tokenizer;
  WeightsCache weightsCache = WeightsCache::Auto;
};

void printHelp(const char *argv0, const Manifest &manifest) {
  std::printf(
      "usage: %s --weights=FILE.safetensors [--input=FILE|-] [--output=FILE|-] [options]\n"
      "\n"
      "Runs the compiled %s model on token-id sequences and writes its outputs.\n"
      "\n"
      "  --weights=PATH   the model's tensors (Hugging Face names): a .safetensors file or\n"
      "                   a checkpoint directory (sharded or not); default: the\n"
      "                   checkpoint the model was compiled from, if any\n"
      "  --weights-cache=WHEN  keep the weights as the kernels read them in a file beside\n"
      "                   the checkpoint (.xfmr-weights-*.safetensors), mapped at the next\n"
      "                   start: auto (default: when loading converts 64 MiB or more),\n"
      "                   always or off\n"
      "  --input=FILE     token ids, one sequence per line, separated by spaces; for\n"
      "                   encoder-decoder models 'source ids | target ids'. '-' = stdin\n"
      "                   (default). Blank lines and lines starting with '#' are skipped.\n"
      "  --inputs=FILE    tensor mode: read every model input by name from a\n"
      "                   .safetensors file instead (any model, one call); all outputs\n"
      "                   are written, named, to --output\n"
      "  --output=FILE    '-' = stdout (default). The format follows the extension:\n"
      "                   .npy (one output, float32 [sequences, ...]; padding positions 0),\n"
      "                   .safetensors (every output by name, and 'lengths' int32), else\n"
      "                   text\n"
      "  --format=F       text | npy | safetensors, overriding the extension\n"
      "  --top=K          text: print the K highest values of each position as id:value\n"
      "  --threads=N      OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
      "  --benchmark=N    tensor mode: after one warm-up call, time N calls and print\n"
      "                   'benchmark: min M ms, median M ms, peak extra memory B bytes'\n"
      "  --info           print the model's inputs, outputs and parameters and exit\n"
      "  --tokenizer=DIR  --serve: the tokenizer of the texts (default: the weights')\n"
      "\n%s",
      argv0, manifest.modelType.empty() ? "xfmr" : manifest.modelType.c_str(), kServerHelp);
}

Options parseOptions(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], v;
    auto value = [&](const char *flag) { return flagValue(argc, argv, i, flag, v); };
    auto number = [&](const char *flag) { return static_cast<int>(parseCount(flag, v, 1 << 20)); };
    if (value("--weights"))
      options.weights = v;
    else if (value("--weights-cache"))
      options.weightsCache = parseWeightsCache(v);
    else if (value("--inputs"))
      options.inputs = v;
    else if (value("--input"))
      options.input = v;
    else if (value("--output"))
      options.output = v;
    else if (value("--format")) {
      if (v != "text" && v != "npy" && v != "safetensors")
        fail("--format must be text, npy or safetensors, got '" + v + "'");
      options.format = v;
    } else if (value("--top"))
      options.top = number("--top");
    else if (value("--threads"))
      options.threads = number("--threads");
    else if (value("--benchmark"))
      options.benchmark = number("--benchmark");
    else if (arg == "--info")
      options.info = true;
    else if (value("--tokenizer"))
      options.tokenizer = v;
    else if (!parseServerFlag(argc, argv, i, options.serve, options.server))
      fail("unknown argument '" + arg + "' (see --help)");
  }
  return options;
}

class Runner {
public:
  Runner(const char *argv0, const Manifest &manifest, void (*entry)(void **))
      : argv0(argv0), manifest(manifest), entry(entry) {}

  int run(int argc, char **argv) {
    if (wantsTokenizerCommand(argc, argv))
      return runTokenizerCommand(argc, argv, manifest.defaultWeights);
    if (wantsHelp(argc, argv)) {
      printHelp(argv0, manifest);
      return 0;
    }
    options = parseOptions(argc, argv);
    if (options.info) {
      printInfo();
      return 0;
    }
    if (options.serve)
      blockTerminationSignals();
    bool tensorMode = !options.inputs.empty();
    if (!tensorMode && !options.serve)
      checkTokenInputs();
    bool hasParams = std::any_of(manifest.args.begin(), manifest.args.end(),
                                 [](const ArgSpec &a) { return a.kind == ArgSpec::Kind::Param; });
    if (options.weights.empty())
      options.weights = manifest.defaultWeights;
    if (options.weights.empty() && hasParams)
      fail("missing --weights=FILE.safetensors (see --help)");
    setThreads(options.threads);
    checkFitsInMemory({&manifest});
    if (hasParams) {
      WeightsLoaded loaded;
      params = loadModelWeights({&manifest}, options.weights, /*mapInPlace=*/true,
                                options.weightsCache, loaded);
      reportWeightsCache(loaded);
    }
    if (options.serve)
      return serve();
    if (tensorMode) {
      runTensors();
      return 0;
    }
    std::string inputName = options.input == "-" ? "<stdin>" : options.input;
    std::vector<Sequence> sequences = readSequences(options.input, inputName);
    validate(sequences, inputName);
    computeAndWrite(sequences);
    return 0;
  }

private:
  /// --serve: /v1/embeddings of a sentence-transformers encoder.
  int serve() {
    Embedder embedder(manifest, entry, params);
    std::unique_ptr<Tokenizer> tokenizer = findTokenizer(
        options.tokenizer, options.weights, manifest.defaultWeights, ", for the texts embedded");
    ServedModel model{servedModelName(options.weights, manifest, argv0), *tokenizer, nullptr,
                      nullptr, &embedder};
    options.server.threads = options.threads;
    return runServer(model, options.server);
  }

  /// Token mode fills inputs by role from the token file.
  void checkTokenInputs() {
    for (const ArgSpec &arg : manifest.args) {
      if (arg.kind == ArgSpec::Kind::State)
        fail("model argument '" + arg.name + "' is optimizer state: pass it with the inputs "
             "by name (--inputs=FILE.safetensors), or build a trainer with xfmrc --train");
      if (arg.kind == ArgSpec::Kind::Input) {
        if (!roleOf(arg.name))
          fail("model input '" + arg.name + "' is not one the token reader can fill (input_ids, "
               "attention_mask, token_type_ids, decoder_input_ids, decoder_attention_mask); "
               "pass every input by name with --inputs=FILE.safetensors");
        if (arg.shape.size() != 2 || arg.dtype != XFMR_DTYPE_I32)
          fail("model input '" + arg.name + "' must be int32 [batch, seq_len]");
        if (batch && arg.shape[0] != batch)
          fail("model inputs disagree on the batch size");
        batch = arg.shape[0];
        segmentLength[roleOf(arg.name)->segment] = arg.shape[1];
      }
    }
    if (batch == 0)
      fail("the model has no token inputs; pass its inputs with --inputs=FILE.safetensors");
    for (const ArgSpec &arg : manifest.args) {
      if (arg.kind != ArgSpec::Kind::Output)
        continue;
      bool isFloat = arg.dtype == XFMR_DTYPE_F32 || arg.dtype == XFMR_DTYPE_BF16 ||
                     arg.dtype == XFMR_DTYPE_F16;
      if (!isFloat || arg.shape.size() < 2 || arg.shape[0] != batch)
        fail("model output '" + arg.name + "' must be float32, bfloat16 or float16 [batch, ...]");
    }
  }

  void printInfo() {
    std::printf("model: %s\n", manifest.modelType.empty() ? "(xfmr IR)" : manifest.modelType.c_str());
    size_t parameters = 0;
    for (const ArgSpec &arg : manifest.args) {
      if (arg.kind == ArgSpec::Kind::Param) {
        parameters += elementCount(arg.shape);
        continue;
      }
      static constexpr const char *kinds[] = {"input ", "param ", "output", "state "};
      std::printf("%s %s %s %s", kinds[static_cast<int>(arg.kind)],
                  arg.name.c_str(), xfmr_dtype_name(arg.dtype), shapeToString(arg.shape).c_str());
      if (arg.vocabSize)
        std::printf(" (ids < %" PRId64 ")", arg.vocabSize);
      std::printf("\n");
    }
    std::printf("parameters: %zu in %zu tensors\n", parameters,
                static_cast<size_t>(std::count_if(manifest.args.begin(), manifest.args.end(),
                                                  [](const ArgSpec &a) {
                                                    return a.kind == ArgSpec::Kind::Param;
                                                  })));
  }

  /// Runs the model once on inputs read by name and writes every output.
  void runTensors() {
    char err[kErrorSize];
    xfmr_safetensors *file = xfmr_safetensors_open(options.inputs.c_str(), err, sizeof(err));
    if (!file)
      fail(std::string("inputs ") + err);
    std::unique_ptr<xfmr_safetensors, void (*)(xfmr_safetensors *)> guard(
        file, xfmr_safetensors_close);
    EntryArgs args(manifest, params, states, nullptr, /*updateInPlace=*/false);
    for (size_t i = 0; i < manifest.args.size(); ++i) {
      const ArgSpec &arg = manifest.args[i];
      if (arg.kind == ArgSpec::Kind::Param || arg.kind == ArgSpec::Kind::Output)
        continue;
      if (xfmr_safetensors_read(file, arg.name.c_str(), arg.dtype,
                                static_cast<int32_t>(arg.shape.size()), arg.shape.data(), args[i],
                                err, sizeof(err)))
        fail(std::string("inputs ") + err);
      if (arg.vocabSize)
        for (int32_t id :
             std::vector<int32_t>(static_cast<int32_t *>(args[i]),
                                  static_cast<int32_t *>(args[i]) + elementCount(arg.shape)))
          if (id < 0 || id >= arg.vocabSize)
            fail("inputs '" + options.inputs + "': tensor '" + arg.name + "' holds token id " +
                 std::to_string(id) + ", outside the vocabulary [0, " +
                 std::to_string(arg.vocabSize) + ")");
    }
    if (options.benchmark > 0)
      benchmarkCalls(args);
    else
      entry(args.data());

    std::vector<xfmr_tensor_ref> refs;
    for (size_t i = 0; i < manifest.args.size(); ++i) {
      const ArgSpec &arg = manifest.args[i];
      if (arg.kind == ArgSpec::Kind::Output)
        refs.push_back({arg.name.c_str(), arg.dtype, static_cast<int32_t>(arg.shape.size()),
                        arg.shape.data(), args[i]});
    }
    std::string format = outputFormat();
    if (format == "safetensors") {
      if (xfmr_safetensors_write(options.output.c_str(), refs.data(), refs.size(), err,
                                 sizeof(err)))
        fail(err);
    } else if (format == "npy") {
      if (refs.size() != 1)
        fail(".npy holds one tensor but the model has " + std::to_string(refs.size()) +
             " outputs: write .safetensors");
      if (xfmr_npy_write(options.output.c_str(), &refs[0], err, sizeof(err)))
        fail(err);
    } else {
      OutputFile out(options.output.c_str());
      if (!out)
        fail("cannot write '" + options.output + "': " + std::strerror(errno));
      for (const xfmr_tensor_ref &ref : refs) {
        std::vector<int64_t> shape(ref.shape, ref.shape + ref.rank);
        out.print("# " + std::string(ref.name) + " " + xfmr_dtype_name(ref.dtype) + " " +
                  shapeToString(shape) + "\n");
        int64_t row = ref.rank && shape.back() ? shape.back() : 1;
        uint64_t count = elementCount(shape);
        // Print every dtype through float32 or int32.
        std::vector<float> floats(count);
        std::vector<int32_t> ints(count);
        bool asFloat = convertElements(ref.dtype, ref.data, count, XFMR_DTYPE_F32,
                                       floats.data()).empty();
        if (!asFloat)
          convertElements(ref.dtype == XFMR_DTYPE_BOOL ? XFMR_DTYPE_U8 : ref.dtype, ref.data,
                          count, XFMR_DTYPE_I32, ints.data());
        std::string line;
        char number[64];
        for (uint64_t e = 0; e < count; ++e) {
          double value = asFloat ? floats[e] : ints[e];
          std::snprintf(number, sizeof(number), "%s%.7g", line.empty() ? "" : " ", value);
          line += number;
          if ((e + 1) % row == 0) {
            out.print(line + "\n");
            line.clear();
          }
        }
      }
      if (!out.close())
        fail("error writing '" + options.output + "'");
    }
  }

  /// Times `options.benchmark` calls after a warm-up. Peak extra memory is
  /// what one call adds to the resident set at its peak, beyond inputs,
  /// weights and outputs: measured in a forked child, whose peak starts
  /// from the current resident set rather than from this process's history
  /// (loading the weights file peaked higher than the model ever will).
  void benchmarkCalls(EntryArgs &args) {
    long extra = extraMemoryOfOneCall(args);
    entry(args.data());
    std::vector<double> times;
    for (int i = 0; i < options.benchmark; ++i) {
      auto start = std::chrono::steady_clock::now();
      entry(args.data());
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    std::sort(times.begin(), times.end());
    std::fprintf(stderr, "benchmark: min %.3f ms, median %.3f ms, peak extra memory %ld bytes\n",
                 times.front(), times[times.size() / 2], extra);
  }

  long extraMemoryOfOneCall(EntryArgs &args) {
    int pipe[2];
    if (::pipe(pipe) != 0)
      return -1;
    std::fflush(nullptr);
    pid_t child = fork();
    if (child == 0) {
      ::close(pipe[0]);
      long before = residentBytes();
      entry(args.data());
      struct rusage usage;
      getrusage(RUSAGE_SELF, &usage);
      long extra = usage.ru_maxrss * 1024L - before;
      ssize_t written = ::write(pipe[1], &extra, sizeof(extra));
      _exit(written == sizeof(extra) ? 0 : 1);
    }
    ::close(pipe[1]);
    long extra = -1;
    if (child < 0 || ::read(pipe[0], &extra, sizeof(extra)) != sizeof(extra))
      extra = -1;
    ::close(pipe[0]);
    if (child > 0)
      waitpid(child, nullptr, 0);
    return std::max(extra, -1L);
  }

  static long residentBytes() {
    long pages = 0, resident = 0;
    if (FILE *statm = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(statm, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
      std::fclose(statm);
    }
    return resident * sysconf(_SC_PAGESIZE);
  }

  std::string outputFormat() const {
    if (!options.format.empty())
      return options.format;
    return endsWith(options.output, ".npy")           ? "npy"
           : endsWith(options.output, ".safetensors") ? "safetensors"
                                                      : "text";
  }

  void validate(const std::vector<Sequence> &sequences, const std::string &inputName) {
    if (sequences.empty())
      fail("input '" + inputName + "' holds no token sequences");
    bool twoSegments = segmentLength[1] > 0;
    for (const Sequence &sequence : sequences) {
      std::string where = inputName + ":" + std::to_string(sequence.line) + ": ";
      for (int s = 0; s < 2; ++s) {
        const std::vector<int64_t> &ids = sequence.segments[s];
        bool used = s == 0 || twoSegments;
        if (!used) {
          if (!ids.empty())
            fail(where + "this model takes one sequence per line, found a '|'");
          continue;
        }
        const char *which = s == 0 ? (twoSegments ? "source sequence" : "sequence")
                                   : "target sequence (after '|')";
        if (ids.empty())
          fail(where + which + " is empty");
        if (static_cast<int64_t>(ids.size()) > segmentLength[s])
          fail(where + which + " has " + std::to_string(ids.size()) +
               " tokens, longer than the " + std::to_string(segmentLength[s]) +
               " positions the model was compiled for (xfmrc --seq-len)");
        for (const ArgSpec &arg : manifest.args) {
          const InputRole *role = arg.kind == ArgSpec::Kind::Input ? roleOf(arg.name) : nullptr;
          if (!role || role->segment != s || !role->isTokenIds || !arg.vocabSize)
            continue;
          for (int64_t id : ids)
            if (id < 0 || id >= arg.vocabSize)
              fail(where + "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                   std::to_string(arg.vocabSize) + ")");
        }
      }
    }
  }

  void fillInputs(const std::vector<Sequence> &sequences, size_t first, const EntryArgs &args) {
    for (const ArgSpec &arg : manifest.args) {
      if (arg.kind != ArgSpec::Kind::Input)
        continue;
      const InputRole *role = roleOf(arg.name);
      auto *values = args.find(arg.name)->as<int32_t>();
      int64_t length = arg.shape[1];
      for (int64_t row = 0; row < batch; ++row) {
        // Rows past the last sequence run a one-token dummy that is never
        // written out.
        static const std::vector<int64_t> dummy{0};
        bool real = first + row < sequences.size();
        const std::vector<int64_t> &ids =
            real ? sequences[first + row].segments[role->segment] : dummy;
        for (int64_t t = 0; t < length; ++t) {
          bool valid = t < static_cast<int64_t>(ids.size());
          int64_t value = 0;
          if (role->isMask)
            value = valid;
          else if (role->isTokenIds)
            value = valid && real ? ids[t] : manifest.padTokenId;
          values[row * length + t] = static_cast<int32_t>(value);
        }
      }
    }
  }

  /// One output's values for every sequence: [sequences, ...] in float32.
  struct Collected {
    const ArgSpec *arg;
    /// The token segment whose positions its dim 1 follows, or -1.
    int segment;
    std::vector<int64_t> shape;
    std::vector<float> values;
  };

  /// Positions of an output of rank 3 ([batch, positions, features]) follow
  /// the encoder's tokens if its name says so, else the last segment's.
  int segmentOf(const ArgSpec &arg) const {
    if (arg.shape.size() != 3)
      return -1;
    int segment = segmentLength[1] > 0 && arg.name.rfind("encoder_", 0) != 0 ? 1 : 0;
    return arg.shape[1] == segmentLength[segment] ? segment : -1;
  }

  void computeAndWrite(const std::vector<Sequence> &sequences) {
    EntryArgs args(manifest, params, states, nullptr, /*updateInPlace=*/false);
    std::vector<Collected> collected;
    size_t count = sequences.size();
    for (const ArgSpec &arg : manifest.args) {
      if (arg.kind != ArgSpec::Kind::Output)
        continue;
      std::vector<int64_t> shape = arg.shape;
      shape[0] = static_cast<int64_t>(count);
      collected.push_back(
          {&arg, segmentOf(arg), shape, std::vector<float>(elementCount(shape), 0.0f)});
    }
    for (size_t first = 0; first < count; first += batch) {
      fillInputs(sequences, first, args);
      entry(args.data());
      for (Collected &out : collected) {
        size_t row = elementCount(out.arg->shape) / batch;
        std::vector<float> result(row * batch);
        convertElements(out.arg->dtype, args.find(out.arg->name)->data, result.size(),
                        XFMR_DTYPE_F32, result.data());
        for (int64_t r = 0; r < batch && first + r < count; ++r) {
          size_t n = first + r, kept = row;
          // Padding positions stay 0.
          if (out.segment >= 0)
            kept = sequences[n].segments[out.segment].size() * out.arg->shape[2];
          std::copy_n(result.data() + r * row, kept, out.values.data() + n * row);
        }
      }
    }
    std::vector<int32_t> lengths(count);
    int lastSegment = segmentLength[1] > 0 ? 1 : 0;
    for (size_t n = 0; n < count; ++n)
      lengths[n] = static_cast<int32_t>(sequences[n].segments[lastSegment].size());
    write(collected, sequences, lengths);
  }

  void write(const std::vector<Collected> &collected, const std::vector<Sequence> &sequences,
             const std::vector<int32_t> &lengths) {
    std::string format = outputFormat();
    std::vector<xfmr_tensor_ref> tensors;
    for (const Collected &out : collected)
      tensors.push_back({out.arg->name.c_str(), XFMR_DTYPE_F32,
                         static_cast<int32_t>(out.shape.size()), out.shape.data(),
                         out.values.data()});
    int64_t count = static_cast<int64_t>(lengths.size());
    char err[kErrorSize];
    if (format == "npy") {
      if (tensors.size() != 1)
        fail(".npy holds one tensor but the model has " + std::to_string(tensors.size()) +
             " outputs: write .safetensors");
      if (xfmr_npy_write(options.output.c_str(), &tensors[0], err, sizeof(err)))
        fail(err);
      return;
    }
    if (format == "safetensors") {
      tensors.push_back({"lengths", XFMR_DTYPE_I32, 1, &count, lengths.data()});
      if (xfmr_safetensors_write(options.output.c_str(), tensors.data(), tensors.size(), err,
                                 sizeof(err)))
        fail(err);
      return;
    }
    OutputFile out(options.output.c_str());
    if (!out)
      fail("cannot write '" + options.output + "': " + std::strerror(errno));
    for (int64_t n = 0; n < count; ++n)
      for (const Collected &output : collected)
        writeText(out, output, sequences[n], n);
    if (!out.close())
      fail("error writing '" + options.output + "'");
  }

  /// Sequence n's part of `output`, a row per line: one row per position of
  /// a per-position output, each highest `--top` entries if asked for.
  void writeText(OutputFile &out, const Collected &output, const Sequence &sequence, int64_t n) {
    int64_t width = output.shape.back();
    size_t perSequence = elementCount(output.shape) / output.shape[0];
    const float *values = output.values.data() + n * perSequence;
    int64_t rows = static_cast<int64_t>(perSequence / width);
    std::string header = "# sequence " + std::to_string(n) + ": ";
    if (output.segment >= 0) {
      rows = static_cast<int64_t>(sequence.segments[output.segment].size());
      header += std::to_string(rows) + " positions x " + std::to_string(width);
    } else {
      std::vector<int64_t> shape(output.shape.begin() + 1, output.shape.end());
      header += shapeToString(shape);
    }
    out.print(header + " " + output.arg->name + "\n");
    char number[64];
    for (int64_t t = 0; t < rows; ++t) {
      const float *row = values + t * width;
      std::string line;
      if (options.top > 0 && output.segment >= 0) {
        std::vector<int64_t> order(width);
        for (int64_t v = 0; v < width; ++v)
          order[v] = v;
        int64_t k = std::min<int64_t>(options.top, width);
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int64_t a, int64_t b) { return row[a] > row[b]; });
        for (int64_t i = 0; i < k; ++i) {
          std::snprintf(number, sizeof(number), "%s%" PRId64 ":%.4f", i ? " " : "", order[i],
                        row[order[i]]);
          line += number;
        }
      } else {
        for (int64_t v = 0; v < width; ++v) {
          std::snprintf(number, sizeof(number), "%s%.7g", v ? " " : "", row[v]);
          line += number;
        }
      }
      out.print(line + "\n");
    }
  }

  const char *argv0;
  const Manifest &manifest;
  void (*entry)(void **);
  Options options;
  int64_t batch = 0;
  int64_t segmentLength[2] = {0, 0};
  BufferMap params;
  /// Its state arguments (read with the inputs). Every output has a buffer
  /// of its own, also one that updates an argument (a training step's
  /// weights, which may be a read-only mapping).
  BufferMap states;
};

} // namespace

extern "C" int xfmr_runner_main(int argc, char **argv, const char *manifestJson,
                                void (*entry)(void **)) {
  const char *argv0 = argc > 0 ? argv[0] : "model";
  return runCommandLine(argv0, [&] {
    Manifest manifest = parseManifest(manifestJson);
    return Runner(argv0, manifest, entry).run(argc, argv);
  });
}
