//===- BeamSearch.h - generate()'s beam search ------------------*- C++ -*-===//
//
// Beam search as transformers' generate(num_beams=K) does it: each step keeps
// the 2K best continuations of all beams by summed log-probability,
// continues the K best unfinished ones, and keeps the K best finished
// hypotheses, scored by log-probability / length^length_penalty. This is the
// search alone; the engine runs its beams on K slots and moves their caches
// as it says (Engine.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_BEAMSEARCH_H
#define XFMR_LIB_RUNTIME_BEAMSEARCH_H

#include "Manifest.h"

#include "xfmr-rt/xfmr_runtime.h"

#include <cstdint>
#include <vector>

namespace xfmr::rt {

/// When the search ends, as generate()'s early_stopping: when every beam
/// has finished (True), when no running beam can beat the finished ones by
/// a heuristic (False), or at the length limit (Never).
enum class EarlyStopping { True, False, Never };

class BeamSearch {
public:
  struct Settings {
    int64_t beams = 1;
    double lengthPenalty = 1.0;
    EarlyStopping earlyStopping = EarlyStopping::False;
    /// Only the repetition penalty applies.
    xfmr_sampling sampling = xfmr_sampling_defaults();
    bool ignoreEos = false;
  };

  /// A search continuing `prompt` (an encoder-decoder's: its start token)
  /// up to `maxLength` tokens, prompt included, where the token rules apply
  /// (the forced last token), but not past `context` tokens.
  BeamSearch(const Settings &settings, const Manifest &rules, std::vector<int32_t> prompt,
             int64_t maxLength, int64_t context, int64_t vocab);

  /// Scores the next tokens of every beam (`rows[b]`: beam b's logits).
  /// False when the search has ended; otherwise beam b goes on from beam
  /// parents()[b]'s cache with token tokens()[b].
  bool step(const std::vector<const float *> &rows);
  const std::vector<int64_t> &parents() const { return nextParents; }
  const std::vector<int32_t> &tokens() const { return nextTokens; }

  /// The best finished sequence, prompt included.
  const std::vector<int32_t> &best() const { return finished[0].tokens; }
  /// Whether `token` ends a sequence.
  bool isEnd(int32_t token) const;

private:
  struct Hypothesis {
    std::vector<int32_t> tokens;
    double score;
    bool finished;
  };

  Settings settings;
  const Manifest &rules;
  int64_t promptLength, maxLength, limit, vocab, length;
  std::vector<Hypothesis> running, finished;
  bool improvable = true;
  std::vector<int64_t> nextParents;
  std::vector<int32_t> nextTokens;
};

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_BEAMSEARCH_H
