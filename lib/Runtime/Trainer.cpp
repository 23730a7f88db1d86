//===- Trainer.cpp - the command line of compiled training executables ----===//
//
// `xfmrc --train model.json -o train` links two entries with this trainer:
// `train_step` (loss, gradients and one optimizer update, in place) and
// `evaluate` (the loss without dropout). The trainer initialises or loads
// the weights, zeroes the optimizer state, feeds shuffled batches of a
// token file to the step, logs progress, evaluates on held-out data and
// saves the weights for the inference executable, with the optimizer state
// and step counts beside them so that --resume continues the run exactly.
// Under mpirun each process takes its share of every batch; the step
// combines the gradients (xfmr_all_reduce_f32) and rank 0 logs and saves.
//
//===----------------------------------------------------------------------===//

#include "xfmr-rt/xfmr_runtime.h"

#include "CommandLine.h"
#include "ModelWeights.h"
#include "RuntimeSupport.h"
#include "TokenFiles.h"
#include "Trainer.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

using namespace xfmr::rt;

namespace {

constexpr int32_t kIgnoreIndex = -100;
/// The step counts a --save writes beside the weights and optimizer state:
/// steps taken, and updates applied (fewer when loss scaling skipped some).
constexpr const char *kStepsTensor = "trainer.steps";
constexpr const char *kUpdatesTensor = "trainer.updates";

/// One training or evaluation example, as the model inputs see it.
struct Example {
  std::vector<int32_t> sourceIds; // input_ids
  std::vector<int32_t> targetIds; // decoder_input_ids (encoder-decoder models)
  std::vector<int32_t> labels;    // aligned with the positions of the logits
};

struct Options {
  std::string train, eval, weights, save, resume, log;
  int64_t steps = -1;
  int64_t logEvery = 100;
  int64_t evalEvery = 0;
  uint64_t seed = 0;
  int threads = 0;
};

void printHelp(const char *argv0, const Manifest &manifest) {
  std::printf(
      "usage: %s --train=FILE [--eval=FILE] [--weights=FILE] [--save=FILE] [options]\n"
      "\n"
      "Trains the compiled %s model (%s) and evaluates it on held-out data.\n"
      "\n"
      "  --train=FILE     training examples, one per line:\n"
      "                     'ids | labels'   one label per position (-100: no loss there)\n"
      "                     'ids'            causal language modelling: each position\n"
      "                                      predicts the next token\n"
      "                     'source | target' for encoder-decoder models: the decoder reads\n"
      "                                      the target shifted right (starting with the\n"
      "                                      pad token) and predicts it\n"
      "                   Blank lines and lines starting with '#' are skipped.\n"
      "  --eval=FILE      held-out examples (same format): loss, token and sequence\n"
      "                   accuracy every --eval-every steps and at the end\n"
      "  --weights=FILE   start from these weights (.safetensors, Hugging Face names);\n"
      "                   default: a fresh initialisation (N(0, 0.02), biases 0,\n"
      "                   layer-norm scales 1) from --seed\n"
      "  --save=FILE      write the trained weights (.safetensors) for the inference\n"
      "                   executable (xfmrc without --train), and beside them the\n"
      "                   optimizer state and step counts for --resume\n"
      "  --resume=FILE    continue the run a --save wrote: its weights, optimizer\n"
      "                   state, step and data order (same --train file and --seed);\n"
      "                   --steps counts from the start of the run\n"
      "  --log=FILE       write each step's loss, token accuracy, learning rate,\n"
      "                   gradient norm and tokens/s as CSV (appended to when resuming)\n"
      "  --steps=N        training steps (default: xfmrc --steps, here %" PRId64 "); with\n"
      "                   loss scaling, a step skipped for overflowing gradients counts\n"
      "  --log-every=N    print a progress line every N steps (default 100; 0: never)\n"
      "  --eval-every=N   evaluate every N steps (default 0: only at the end)\n"
      "  --seed=N         seed of the initialisation, the shuffling and dropout\n"
      "  --threads=N      OpenMP threads (default: OMP_NUM_THREADS or all cores)\n",
      argv0, manifest.modelType.empty() ? "xfmr" : manifest.modelType.c_str(),
      manifest.optimizer.c_str(),
      static_cast<int64_t>(manifest.training.count("steps") ? manifest.training.at("steps") : 0));
}

Options parseOptions(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    auto value = [&](const char *flag) { return flagValue(argc, argv, i, flag, v); };
    if (value("--train"))
      options.train = v;
    else if (value("--eval"))
      options.eval = v;
    else if (value("--weights"))
      options.weights = v;
    else if (value("--save"))
      options.save = v;
    else if (value("--resume"))
      options.resume = v;
    else if (value("--log"))
      options.log = v;
    else if (value("--steps"))
      options.steps = parseCount("--steps", v);
    else if (value("--log-every"))
      options.logEvery = parseCount("--log-every", v);
    else if (value("--eval-every"))
      options.evalEvery = parseCount("--eval-every", v);
    else if (value("--seed"))
      options.seed = static_cast<uint64_t>(parseCount("--seed", v, INT64_MAX));
    else if (value("--threads"))
      options.threads = static_cast<int>(parseCount("--threads", v, 1 << 20));
    else
      fail("unknown argument '" + std::string(argv[i]) + "' (see --help)");
  }
  if (options.train.empty())
    fail("missing --train=FILE (see --help)");
  if (!options.resume.empty() && !options.weights.empty())
    fail("--resume and --weights exclude each other: --resume loads the weights too");
  return options;
}

/// SplitMix64: the dropout seed of each step, from the run's seed.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The model's shape as the trainer needs it, read off the training step.
struct Layout {
  int64_t batch = 0;
  int64_t sourceLength = 0, targetLength = 0; // targetLength: encoder-decoder only
  int64_t sourceVocab = 0, targetVocab = 0;
  int64_t classes = 0; // last dim of the logits
  int64_t labelLength = 0;
  bool causal = false;
  bool dataParallel = false; // the step takes a gradient_weight
};

Layout layoutOf(const Manifest &manifest) {
  Layout layout;
  for (const ArgSpec &arg : manifest.args) {
    if (arg.kind == ArgSpec::Kind::Input) {
      const InputRole *role = roleOf(arg.name);
      if (!role && arg.name != "labels") {
        if ((arg.name == "dropout_seed" || arg.name == "step") && arg.shape.empty() &&
            arg.dtype == XFMR_DTYPE_I64)
          continue;
        if (arg.name == "gradient_weight" && arg.shape.empty() && arg.dtype == XFMR_DTYPE_F32) {
          layout.dataParallel = true;
          continue;
        }
        fail("model input '" + arg.name +
             "' is not one the trainer can fill (input_ids, "
             "attention_mask, token_type_ids, decoder_input_ids, decoder_attention_mask, "
             "labels, dropout_seed, step, gradient_weight)");
      }
      if (arg.shape.size() != 2 || arg.dtype != XFMR_DTYPE_I32)
        fail("model input '" + arg.name + "' must be int32 [batch, seq_len]");
      if (layout.batch && arg.shape[0] != layout.batch)
        fail("model inputs disagree on the batch size");
      layout.batch = arg.shape[0];
      if (!role)
        layout.labelLength = arg.shape[1];
      else
        (role->segment ? layout.targetLength : layout.sourceLength) = arg.shape[1];
      if (arg.name == "input_ids")
        layout.sourceVocab = arg.vocabSize;
      if (arg.name == "decoder_input_ids")
        layout.targetVocab = arg.vocabSize;
    } else if (arg.kind == ArgSpec::Kind::Output && arg.name == "logits") {
      if (arg.shape.size() != 3 || arg.dtype != XFMR_DTYPE_F32)
        fail("model output 'logits' must be float32 [batch, seq_len, classes]");
      layout.classes = arg.shape[2];
    }
  }
  if (!layout.sourceLength || !layout.labelLength || !layout.classes)
    fail("the model is no trainable token model: it needs input_ids and labels inputs and a "
         "logits output (compile a config with xfmrc --train)");
  if (layout.labelLength != (layout.targetLength ? layout.targetLength : layout.sourceLength))
    fail("labels must cover the positions of the (decoder) sequence");
  layout.causal = manifest.causalLanguageModel;
  return layout;
}

/// Turns token-file lines into examples, checking lengths and ranges.
std::vector<Example> readExamples(const std::string &path, const Layout &layout,
                                  int64_t padTokenId) {
  std::vector<Sequence> sequences = readSequences(path, path);
  if (sequences.empty())
    fail("'" + path + "' holds no examples");
  std::vector<Example> examples;
  for (const Sequence &sequence : sequences) {
    std::string where = path + ":" + std::to_string(sequence.line) + ": ";
    const std::vector<int64_t> &first = sequence.segments[0], &second = sequence.segments[1];
    auto check = [&](const std::vector<int64_t> &ids, int64_t length, int64_t vocab,
                     bool labels, const char *what) {
      if (ids.empty())
        fail(where + what + " is empty");
      if (static_cast<int64_t>(ids.size()) > length)
        fail(where + what + " has " + std::to_string(ids.size()) + " tokens, more than the " +
             std::to_string(length) + " positions the model was compiled for (xfmrc --seq-len)");
      for (int64_t id : ids)
        if ((id < 0 || id >= vocab) && !(labels && id == kIgnoreIndex))
          fail(where + std::string(what) + ": id " + std::to_string(id) +
               " is outside [0, " + std::to_string(vocab) + ")" +
               (labels ? " (and is not -100)" : ""));
      return std::vector<int32_t>(ids.begin(), ids.end());
    };
    Example example;
    if (layout.targetLength) {
      if (second.empty())
        fail(where + "expected 'source ids | target ids'");
      example.sourceIds = check(first, layout.sourceLength, layout.sourceVocab, false, "source");
      example.labels = check(second, layout.targetLength, layout.classes, false, "target");
      example.targetIds.push_back(static_cast<int32_t>(padTokenId));
      example.targetIds.insert(example.targetIds.end(), example.labels.begin(),
                               example.labels.end() - 1);
      check(std::vector<int64_t>(example.targetIds.begin(), example.targetIds.end()),
            layout.targetLength, layout.targetVocab, false, "target");
    } else if (!second.empty()) {
      example.sourceIds = check(first, layout.sourceLength, layout.sourceVocab, false, "input");
      example.labels = check(second, layout.labelLength, layout.classes, true, "labels");
      if (example.labels.size() != example.sourceIds.size())
        fail(where + "the input has " + std::to_string(example.sourceIds.size()) +
             " tokens but there are " + std::to_string(example.labels.size()) + " labels");
    } else {
      if (!layout.causal)
        fail(where + "expected 'input ids | labels' (one label per input token)");
      if (first.size() < 2)
        fail(where + "a language-modelling example needs at least 2 tokens");
      example.sourceIds = check(first, layout.sourceLength, layout.sourceVocab, false, "input");
      example.labels.assign(example.sourceIds.begin() + 1, example.sourceIds.end());
      example.labels.push_back(kIgnoreIndex);
    }
    examples.push_back(std::move(example));
  }
  return examples;
}

/// One compiled entry and its arguments. Weights and optimizer states live
/// in `shared` (the trainer's, common to both entries; optimizer state is
/// zero before the first step); an output that `updates` one of them is
/// written into its buffer.
class EntryCall {
public:
  EntryCall(const Manifest &manifest, void (*entry)(void **), BufferMap &shared)
      : manifest(manifest), entry(entry), args(manifest, shared, shared) {}

  Buffer *get(const std::string &name) const { return args.find(name); }

  /// Fills the token inputs with the examples `rows`; rows past them are
  /// padding without labels. Returns the number of labelled positions.
  int64_t fill(const std::vector<Example> &examples, const std::vector<size_t> &rows,
               const Layout &layout, int64_t padTokenId) {
    int64_t labelled = 0;
    for (const ArgSpec &arg : manifest.args) {
      if (arg.kind != ArgSpec::Kind::Input || arg.shape.size() != 2)
        continue;
      int32_t *values = get(arg.name)->as<int32_t>();
      int64_t length = arg.shape[1];
      const InputRole *role = roleOf(arg.name); // null: the labels
      for (int64_t row = 0; row < layout.batch; ++row) {
        const Example *example =
            row < static_cast<int64_t>(rows.size()) ? &examples[rows[row]] : nullptr;
        const std::vector<int32_t> *ids = !example ? nullptr
                                          : !role  ? &example->labels
                                          : role->segment ? &example->targetIds
                                                          : &example->sourceIds;
        int64_t size = ids ? static_cast<int64_t>(ids->size()) : 0;
        int32_t fill = role ? static_cast<int32_t>(padTokenId) : kIgnoreIndex;
        for (int64_t t = 0; t < length; ++t) {
          int32_t value = 0; // token_type_ids
          if (role && role->isMask)
            value = t < size || (!example && t == 0); // padding rows attend to one token
          else if (!role || role->isTokenIds)
            value = t < size ? (*ids)[t] : fill;
          values[row * length + t] = value;
          if (!role && value != kIgnoreIndex)
            ++labelled;
        }
      }
    }
    return labelled;
  }

  void setScalar(const std::string &name, int64_t value) {
    if (Buffer *buffer = get(name))
      *buffer->as<int64_t>() = value;
  }

  void setScalar(const std::string &name, float value) {
    if (Buffer *buffer = get(name))
      *buffer->as<float>() = value;
  }

  void call() { entry(args.data()); }

private:
  const Manifest &manifest;
  void (*entry)(void **);
  EntryArgs args;
};

/// Correct predictions of the labelled positions of one batch.
struct Accuracy {
  int64_t tokens = 0, correct = 0, sequences = 0, correctSequences = 0;

  void add(const float *logits, const int32_t *labels, int64_t rows, const Layout &layout) {
    int64_t length = layout.labelLength, classes = layout.classes;
    for (int64_t row = 0; row < rows; ++row) {
      bool allRight = true, any = false;
      for (int64_t t = 0; t < length; ++t) {
        int32_t label = labels[row * length + t];
        if (label == kIgnoreIndex)
          continue;
        const float *scores = logits + (row * length + t) * classes;
        bool right = std::max_element(scores, scores + classes) - scores == label;
        correct += right;
        ++tokens;
        allRight &= right;
        any = true;
      }
      sequences += any;
      correctSequences += any && allRight;
    }
  }
  double tokenRate() const { return tokens ? 100.0 * correct / tokens : 0.0; }
  double sequenceRate() const { return sequences ? 100.0 * correctSequences / sequences : 0.0; }
};

class Trainer {
public:
  Trainer(const char *argv0, const Manifest &step, void (*stepEntry)(void **),
          const Manifest &evaluation, void (*evaluateEntry)(void **), Collectives &job)
      : argv0(argv0), step(step), stepEntry(stepEntry), evaluation(evaluation),
        evaluateEntry(evaluateEntry), job(job) {}

  int run(int argc, char **argv) {
    if (wantsHelp(argc, argv)) {
      printHelp(argv0, step);
      return 0;
    }
    options = parseOptions(argc, argv);
    if (options.steps < 0)
      options.steps = static_cast<int64_t>(step.training.count("steps") ? step.training.at("steps")
                                                                        : 1000);
    // The processes of a job on one machine share its cores.
    if (!options.threads && job.localSize() > 1 && !std::getenv("OMP_NUM_THREADS"))
      options.threads =
          std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / job.localSize());
    setThreads(options.threads);
    layout = layoutOf(step);
    if (job.size() > 1 && !layout.dataParallel)
      fail("this training step was compiled without data-parallel support (it takes no "
           "gradient_weight), so it cannot run as one of " +
           std::to_string(job.size()) + " processes");
    Layout evalLayout = layoutOf(evaluation);
    if (evalLayout.batch != layout.batch || evalLayout.labelLength != layout.labelLength)
      fail("corrupt model manifest: the evaluation entry has another shape");

    std::vector<Example> train = readExamples(options.train, layout, step.padTokenId);
    std::vector<Example> eval;
    if (!options.eval.empty())
      eval = readExamples(options.eval, layout, step.padTokenId);
    if (!options.resume.empty())
      resume();
    else if (options.weights.empty())
      initialiseWeights();
    else
      weights = loadWeights(step, options.weights);
    if (!options.resume.empty() && firstStep >= options.steps)
      fail("'" + options.resume + "' has already taken " + std::to_string(firstStep) +
           " steps of --steps=" + std::to_string(options.steps));

    EntryCall stepCall(step, stepEntry, weights);
    EntryCall evalCall(evaluation, evaluateEntry, weights);
    // Every process starts where rank 0 does (the optimizer state included).
    for (auto &entry : weights)
      job.broadcast(entry.second->data, entry.second->size);
    job.broadcast(&firstStep, sizeof firstStep);
    job.broadcast(&firstUpdates, sizeof firstUpdates);
    bool lead = job.rank() == 0;
    if (lead) {
      std::printf("training %zu examples, batch %" PRId64, train.size(), layout.batch * job.size());
      if (job.size() > 1)
        std::printf(" (%d processes of %" PRId64 ")", job.size(), layout.batch);
      std::printf(", %" PRId64 " steps; %zu parameters\n", options.steps, parameterCount());
    }
    if (lead && firstStep)
      std::printf("resuming after step %" PRId64 " from %s\n", firstStep, options.resume.c_str());
    trainLoop(train, eval, stepCall, evalCall);
    if (lead && !eval.empty())
      evaluate(eval, evalCall, options.steps);
    if (lead && !options.save.empty())
      save();
    return 0;
  }

private:
  void initialiseWeights() {
    std::mt19937_64 generator(options.seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (const ArgSpec &arg : step.args) {
      if (arg.kind != ArgSpec::Kind::Param)
        continue;
      std::unique_ptr<Buffer> buffer = allocate(arg);
      float *values = buffer->as<float>();
      for (uint64_t i = 0, e = elementCount(arg.shape); i < e; ++i)
        values[i] = arg.init == "zeros" ? 0.0f : arg.init == "ones" ? 1.0f : normal(generator);
      weights[arg.name] = std::move(buffer);
    }
  }

  size_t parameterCount() const {
    size_t count = 0;
    for (const ArgSpec &arg : step.args)
      if (arg.kind == ArgSpec::Kind::Param)
        count += elementCount(arg.shape);
    return count;
  }

  /// Reads the weights, the optimizer state and the step counts that a
  /// --save of this trainer wrote.
  void resume() {
    char err[512];
    xfmr_weights *file = xfmr_weights_open(options.resume.c_str(), err, sizeof(err));
    if (!file)
      fail(std::string("--resume: ") + err);
    auto read = [&](const char *name, xfmr_dtype dtype, const std::vector<int64_t> &shape,
                    void *data) {
      if (xfmr_weights_read(file, name, dtype, static_cast<int32_t>(shape.size()), shape.data(),
                            data, err, sizeof(err)) != 0) {
        xfmr_weights_close(file);
        fail("--resume: " + std::string(err) + " (resume from what this trainer's --save wrote)");
      }
    };
    for (const ArgSpec &arg : step.args) {
      if (arg.kind != ArgSpec::Kind::Param && arg.kind != ArgSpec::Kind::State)
        continue;
      std::unique_ptr<Buffer> buffer = allocate(arg);
      read(arg.name.c_str(), arg.dtype, arg.shape, buffer->data);
      weights[arg.name] = std::move(buffer);
    }
    read(kStepsTensor, XFMR_DTYPE_I64, {}, &firstStep);
    read(kUpdatesTensor, XFMR_DTYPE_I64, {}, &firstUpdates);
    xfmr_weights_close(file);
    if (firstStep < 0 || firstUpdates < 0 || firstUpdates > firstStep)
      fail("--resume: '" + options.resume + "': corrupt step counts");
  }

  /// The CSV file of --log, or null.
  FILE *openLog() {
    if (options.log.empty() || job.rank() != 0)
      return nullptr;
    FILE *log = std::fopen(options.log.c_str(), firstStep > 0 ? "a" : "w");
    if (!log)
      fail("--log: cannot write '" + options.log + "': " + std::strerror(errno));
    if (std::ftell(log) == 0)
      std::fprintf(log, "step,loss,token_accuracy,lr,grad_norm,tokens_per_second\n");
    return log;
  }

  void trainLoop(const std::vector<Example> &train, const std::vector<Example> &eval,
                 EntryCall &call, EntryCall &evalCall) {
    std::mt19937_64 shuffler(mix(options.seed));
    std::vector<size_t> order(train.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::shuffle(order.begin(), order.end(), shuffler);
    size_t next = 0;
    // The rows of the next batch of the job, reshuffling after each pass
    // over the data, and this process's share of them.
    const int64_t ownRows = layout.batch;
    auto nextRows = [&] {
      std::vector<size_t> rows;
      while (static_cast<int64_t>(rows.size()) < ownRows * job.size()) {
        if (next == order.size()) {
          std::shuffle(order.begin(), order.end(), shuffler);
          next = 0;
        }
        rows.push_back(order[next++]);
      }
      return std::vector<size_t>(rows.begin() + ownRows * job.rank(),
                                 rows.begin() + ownRows * (job.rank() + 1));
    };
    // A resumed run draws the batches the steps before it drew.
    for (int64_t s = 0; s < firstStep; ++s)
      nextRows();
    std::unique_ptr<FILE, int (*)(FILE *)> log(openLog(),
                                               [](FILE *f) { return f ? std::fclose(f) : 0; });
    double windowLoss = 0, windowSeconds = 0;
    int64_t windowTokens = 0, windowSteps = 0;
    Accuracy windowAccuracy;
    const Buffer *loss = call.get("loss"), *logits = call.get("logits"),
                 *labels = call.get("labels"), *lr = call.get("lr"), *norm = call.get("grad_norm"),
                 *lossScale = call.get("loss_scale");
    if (!loss || !logits || !lr)
      fail("corrupt model manifest: the training step lacks loss, logits or lr");
    if (lossScale && !norm)
      fail("corrupt model manifest: a loss-scaled training step lacks grad_norm");
    auto scalar = [](const Buffer *buffer) {
      return *reinterpret_cast<const float *>(buffer->data);
    };
    // With dynamic loss scaling, a step whose gradients overflowed updates
    // nothing; like the Hugging Face trainer, the optimizer's step count and
    // the learning-rate schedule then do not advance.
    int64_t updates = firstUpdates, windowSkipped = 0;
    for (int64_t s = firstStep; s < options.steps; ++s) {
      std::vector<size_t> rows = nextRows();
      auto start = std::chrono::steady_clock::now();
      int64_t labelled = call.fill(train, rows, layout, step.padTokenId);
      // The step's loss is the mean over this process's labelled positions;
      // weighted by their share of the job's, the gradients it combines are
      // those of the mean over the whole batch.
      double jobLabelled = static_cast<double>(labelled);
      job.sum(&jobLabelled, 1);
      float share = jobLabelled > 0 ? static_cast<float>(labelled / jobLabelled)
                                    : 1.0f / static_cast<float>(job.size());
      call.setScalar("gradient_weight", share);
      call.setScalar("step", updates);
      uint64_t dropoutSeed = mix(options.seed ^ mix(s));
      if (job.rank())
        dropoutSeed = mix(dropoutSeed ^ static_cast<uint64_t>(job.rank()));
      call.setScalar("dropout_seed", static_cast<int64_t>(dropoutSeed));
      call.call();
      Accuracy stepAccuracy;
      stepAccuracy.add(reinterpret_cast<const float *>(logits->data),
                       reinterpret_cast<const int32_t *>(labels->data), layout.batch, layout);
      // The job's loss and accuracy, the same on every process.
      double stepTotals[] = {share * scalar(loss), static_cast<double>(stepAccuracy.tokens),
                             static_cast<double>(stepAccuracy.correct)};
      job.sum(stepTotals, 3);
      stepAccuracy.tokens = static_cast<int64_t>(stepTotals[1]);
      stepAccuracy.correct = static_cast<int64_t>(stepTotals[2]);
      labelled = static_cast<int64_t>(jobLabelled);
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      windowSeconds += seconds;
      float value = static_cast<float>(stepTotals[0]);
      if (!std::isfinite(value))
        fail("step " + std::to_string(s + 1) + ": the loss is " + std::to_string(value) +
             " (try a lower --lr or a larger --warmup-steps at compile time)");
      if (lossScale && !std::isfinite(scalar(norm))) {
        // Halving the scale no longer helps: the unscaled gradients overflow.
        if (scalar(lossScale) <= 1.0f)
          fail("step " + std::to_string(s + 1) + ": the gradients overflow even at loss scale " +
               std::to_string(scalar(lossScale)) +
               " (try a lower --lr or a larger --warmup-steps at compile time)");
        ++windowSkipped;
      } else {
        ++updates;
      }
      windowLoss += value;
      windowTokens += labelled;
      ++windowSteps;
      windowAccuracy.tokens += stepAccuracy.tokens;
      windowAccuracy.correct += stepAccuracy.correct;
      if (log) {
        std::fprintf(log.get(), "%" PRId64 ",%.6g,%.4f,%.6g,", s + 1, value,
                     stepAccuracy.tokenRate() / 100.0, scalar(lr));
        if (norm)
          std::fprintf(log.get(), "%.6g", scalar(norm));
        std::fprintf(log.get(), ",%.1f\n", labelled / seconds);
      }
      bool last = s + 1 == options.steps;
      if (options.logEvery && ((s + 1) % options.logEvery == 0 || last) && job.rank() == 0) {
        std::printf("step %6" PRId64 "  loss %.4f  acc %6.2f%%  lr %.3e", s + 1,
                    windowLoss / windowSteps, windowAccuracy.tokenRate(), scalar(lr));
        if (norm)
          std::printf("  |grad| %.3f", scalar(norm));
        if (lossScale)
          std::printf("  scale %g  skipped %" PRId64, scalar(lossScale), windowSkipped);
        std::printf("  %.0f tok/s  %.2f ms/step\n", windowTokens / windowSeconds,
                    1e3 * windowSeconds / windowSteps);
        std::fflush(stdout);
        windowLoss = windowSeconds = 0;
        windowTokens = windowSteps = windowSkipped = 0;
        windowAccuracy = Accuracy();
      }
      if (!eval.empty() && options.evalEvery && (s + 1) % options.evalEvery == 0 && !last &&
          job.rank() == 0)
        evaluate(eval, evalCall, s + 1);
    }
    stepsTaken = options.steps;
    updatesApplied = updates;
  }

  void evaluate(const std::vector<Example> &eval, EntryCall &call, int64_t steps) {
    const Buffer *loss = call.get("loss"), *logits = call.get("logits"),
                 *labels = call.get("labels");
    if (!loss || !logits || !labels)
      fail("corrupt model manifest: the evaluation entry lacks loss, logits or labels");
    double lossSum = 0;
    Accuracy accuracy;
    for (size_t first = 0; first < eval.size(); first += layout.batch) {
      std::vector<size_t> rows;
      for (size_t i = first; i < eval.size() && static_cast<int64_t>(rows.size()) < layout.batch;
           ++i)
        rows.push_back(i);
      int64_t labelled = call.fill(eval, rows, layout, evaluation.padTokenId);
      call.call();
      // The loss is the mean over the batch's labelled positions.
      lossSum += *reinterpret_cast<const float *>(loss->data) * labelled;
      accuracy.add(reinterpret_cast<const float *>(logits->data),
                   reinterpret_cast<const int32_t *>(labels->data),
                   static_cast<int64_t>(rows.size()), layout);
    }
    std::printf("eval after %" PRId64 " steps: loss %.4f  token accuracy %.2f%%  "
                "sequence accuracy %.2f%%  (%zu examples)\n",
                steps, accuracy.tokens ? lossSum / accuracy.tokens : 0.0, accuracy.tokenRate(),
                accuracy.sequenceRate(), eval.size());
    std::fflush(stdout);
  }

  /// Writes the weights, which the inference executable reads by name, and
  /// the optimizer state and step counts, which only --resume reads.
  void save() {
    std::vector<xfmr_tensor_ref> refs;
    size_t params = 0;
    for (const ArgSpec &arg : step.args)
      if (arg.kind == ArgSpec::Kind::Param || arg.kind == ArgSpec::Kind::State) {
        params += arg.kind == ArgSpec::Kind::Param;
        refs.push_back({arg.name.c_str(), arg.dtype, static_cast<int32_t>(arg.shape.size()),
                        arg.shape.data(), weights.at(arg.name)->data});
      }
    refs.push_back({kStepsTensor, XFMR_DTYPE_I64, 0, nullptr, &stepsTaken});
    refs.push_back({kUpdatesTensor, XFMR_DTYPE_I64, 0, nullptr, &updatesApplied});
    char err[512];
    if (xfmr_safetensors_write(options.save.c_str(), refs.data(), refs.size(), err, sizeof(err)))
      fail(err);
    std::printf("saved %zu weights and %zu optimizer tensors (step %" PRId64 ") to %s\n", params,
                refs.size() - 2 - params, stepsTaken, options.save.c_str());
  }

  const char *argv0;
  const Manifest &step;
  void (*stepEntry)(void **);
  const Manifest &evaluation;
  void (*evaluateEntry)(void **);
  Collectives &job;
  Options options;
  Layout layout;
  BufferMap weights;
  /// Where this run starts (a resumed one: where the saved one stopped) and
  /// where it ends.
  int64_t firstStep = 0, firstUpdates = 0, stepsTaken = 0, updatesApplied = 0;
};

} // namespace

int xfmr::rt::runTrainer(int argc, char **argv, const char *trainStepManifest,
                         void (*trainStep)(void **), const char *evaluateManifest,
                         void (*evaluate)(void **), Collectives *job) {
  const char *argv0 = argc > 0 ? argv[0] : "train";
  setCurrentJob(job);
  int status = runCommandLine(argv0, [&] {
    Manifest step = parseManifest(trainStepManifest);
    Manifest evaluation = parseManifest(evaluateManifest);
    return Trainer(argv0, step, trainStep, evaluation, evaluate, currentJob()).run(argc, argv);
  });
  setCurrentJob(nullptr);
  return status;
}

extern "C" int xfmr_trainer_main(int argc, char **argv, const char *trainStepManifest,
                                 void (*trainStep)(void **), const char *evaluateManifest,
                                 void (*evaluate)(void **)) {
  return runTrainer(argc, argv, trainStepManifest, trainStep, evaluateManifest, evaluate, nullptr);
}
