//===- Engine.h - generation of many requests over one batch ----*- C++ -*-===//
//
// The engine runs requests (Generation) on a compiled generator whose batch
// rows are slots: between decode steps it admits queued requests into free
// slots and reads their prompts through the prefill entry a chunk at a time
// (a batch of one, a short chunk a token a decode step: decodedPromptLimit),
// interleaved with one decode step of the slots already generating, so that
// a long prompt never stalls the others; a finished or cancelled request
// frees its slot at once. Each row is computed on its own and each request
// samples with its own generator, so a request's tokens do not depend on
// what runs beside it. The command line and the server are layers over it.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_ENGINE_H
#define XFMR_LIB_RUNTIME_ENGINE_H

#include "BeamSearch.h"
#include "Generator.h"
#include "Sampler.h"
#include "Tokenizers/Tokenizer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace xfmr::rt {

/// How one request is generated.
struct GenerationSettings {
  xfmr_sampling sampling = xfmr_sampling_defaults();
  uint64_t seed = 0;
  int64_t maxTokens = 128;
  /// Texts that end the generation where they first appear.
  std::vector<std::string> stops;
  bool ignoreEos = false;
  /// OpenAI's penalties: a token's logit less frequencyPenalty times the
  /// times it was generated, and presencePenalty if it was at all.
  double frequencyPenalty = 0, presencePenalty = 0;
  /// Log-probabilities of this many likeliest tokens at each step (-1:
  /// none; 0: the chosen token's only).
  int64_t topLogprobs = -1;
  /// Keep each step's logits (as the model gave them) in Generation::logits.
  bool keepLogits = false;
  /// Beam search over this many beams, each on a slot of its own, instead
  /// of sampling (with no stop texts, logprobs, OpenAI penalties or kept
  /// logits); its tokens come at its end.
  int64_t beams = 1;
  double lengthPenalty = 1.0;
  EarlyStopping earlyStopping = EarlyStopping::False;
};

/// generate()'s token rules on the next-token scores of a sequence of
/// `length` tokens (an encoder-decoder's counting its start token) that may
/// grow to `maxLength`: suppressed tokens never come; the forced first token
/// follows a sequence of one, the forced last token ends one at the limit
/// (its score 0, every other token's -inf).
template <typename T>
void applyTokenRules(const Manifest &rules, T *scores, int64_t vocab, size_t length,
                     size_t maxLength, bool ignoreEos) {
  constexpr T never = -std::numeric_limits<T>::infinity();
  for (int64_t token : rules.suppressedTokenIds)
    if (token < vocab)
      scores[token] = never;
  int64_t forced = length == 1                             ? rules.forcedBosTokenId
                   : length + 1 == maxLength && !ignoreEos ? rules.forcedEosTokenId
                                                           : -1;
  if (forced < 0 || forced >= vocab)
    return;
  std::fill(scores, scores + vocab, never);
  scores[forced] = 0;
}

/// Why a generation ended (the C API's xfmr_finish, in order); Failed: the
/// model call failed (Engine::abort).
enum class FinishReason { Running, EndToken, Stop, Length, ContextFull, Cancelled, Failed };

/// One generated token.
struct GeneratedToken {
  int32_t id = 0;
  /// The bytes it adds to the text (empty while a character is incomplete).
  std::string text;
  /// Its log-probability under the logits after the token rules and
  /// penalties, before temperature and filtering; and the likeliest tokens'.
  double logprob = 0;
  std::vector<std::pair<int32_t, double>> top;
};

/// A request. The engine calls onToken and onFinish, and writes the
/// results, on the thread that runs Engine::step.
struct Generation {
  /// The tokens the cache of the slot it gets already holds (a
  /// conversation's earlier turns): only the command line's single slot
  /// keeps a cache between requests.
  std::vector<int32_t> context;
  std::vector<int32_t> prompt;
  GenerationSettings settings;
  std::function<void(const GeneratedToken &)> onToken;
  /// `tail`: the text held back at the end (an incomplete character).
  std::function<void(const std::string &tail)> onFinish;
  /// Set by any thread: the engine frees the slot before its next call.
  std::atomic<bool> cancelled{false};

  std::vector<int32_t> generated;
  /// The generated text, and where a stop text first starts in it (npos:
  /// none).
  std::string text;
  size_t stopAt = std::string::npos;
  std::vector<float> logits;
  FinishReason finish = FinishReason::Running;
  std::chrono::steady_clock::time_point submitted, promptRead, finished;
};

class Engine {
public:
  /// `tokenizer` null: texts are the ids, spaced. `slots`: batch rows used
  /// (0: all).
  Engine(xfmr_generator &generator, const Tokenizer *tokenizer, int64_t slots = 0);

  /// Queues a request (any thread). Its prompt must be non-empty and leave
  /// room in the context; a Failure says why not.
  void submit(std::shared_ptr<Generation> generation);
  /// Admits, reads one chunk of the prompts and takes one decode step;
  /// false when there was nothing to do (the engine's thread only).
  bool step();
  /// Steps until no request is queued or running.
  void runUntilIdle();
  /// Waits until a request is queued or running, or `timeout` passes.
  void waitForWork(std::chrono::milliseconds timeout);
  /// Ends every request queued or running as Failed (after a step threw:
  /// the slots' state is then unknown).
  void abort();

  int64_t slots() const { return static_cast<int64_t>(running.size()); }
  size_t queued() const;
  size_t busy() const { return busySlots.load(); }
  const xfmr_generator &model() const { return generator; }

private:
  struct Slot {
    std::shared_ptr<Generation> generation;
    std::optional<Sampler> sampler;
    std::shared_ptr<DecodeStream> stream;
    size_t promptRead = 0;
    /// The token to feed next (decoding), or -1 while the prompt is read.
    int32_t next = -1;
    /// Context, prompt and generated tokens, grown a token at a time; how
    /// often each token was generated (with OpenAI's penalties only).
    std::vector<int32_t> history;
    std::vector<int64_t> counts;
    /// A beam search, on its first slot: the search, its slots (this one
    /// first) and the tokens they take next (none while the prompt is read).
    std::unique_ptr<BeamSearch> beams;
    std::vector<int64_t> beamSlots;
    std::vector<int32_t> beamTokens;
    /// One of another slot's beams.
    bool lent = false;

    bool free() const { return !generation && !lent; }
  };

  void admit();
  /// Ends the queued requests (those cancelled, or all) with `reason`.
  void endQueued(bool cancelledOnly, FinishReason reason);
  /// Picks slot s's next token from its logits; finishes it if that ends it.
  void choose(int64_t s, float *row);
  /// Spreads slot s's prompt to its beams' slots, then steps the search.
  void startBeams(int64_t s);
  /// Steps slot s's beam search on its beams' logits: moves their caches
  /// and sets their next tokens, or ends it.
  void stepBeams(int64_t s);
  void finish(int64_t s, FinishReason reason);

  xfmr_generator &generator;
  const Tokenizer *tokenizer;
  std::vector<Slot> running;
  std::vector<float> logits;
  std::atomic<size_t> busySlots{0};
  mutable std::mutex mutex;
  std::condition_variable work;
  std::deque<std::shared_ptr<Generation>> queue;
};

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_ENGINE_H
