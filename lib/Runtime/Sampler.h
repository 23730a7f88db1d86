//===- Sampler.h - the next token from logits ------------------*- C++ -*-===//
//
// Hugging Face generate()'s order: repetition penalty, temperature, top-k,
// top-p, then a draw from the softmax (or the argmax at temperature 0).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_SAMPLER_H
#define XFMR_LIB_RUNTIME_SAMPLER_H

#include "xfmr-rt/xfmr_runtime.h"

#include <cstdint>
#include <random>
#include <vector>

namespace xfmr::rt {

/// Divides the positive scores of the tokens in the history's last
/// repeat_last_n (0: all) by repeat_penalty and multiplies the negative
/// ones, as RepetitionPenaltyLogitsProcessor.
void penalizeRepeats(double *scores, int64_t vocab, const xfmr_sampling &settings,
                     const int32_t *history, size_t historyLength);

/// The probabilities of the next token after penalty, temperature and
/// filtering (zeros where filtered out; at temperature 0, 1 at the argmax).
std::vector<float> sampledProbabilities(const float *logits, int64_t vocab,
                                        const xfmr_sampling &settings, const int32_t *history,
                                        size_t historyLength);

/// log(sum(exp(logits))), computed stably in double: logits minus it are
/// log-probabilities.
double logSumExp(const float *logits, int64_t vocab);

class Sampler {
public:
  Sampler(const xfmr_sampling &settings, uint64_t seed) : settings(settings), rng(seed) {}
  int32_t sample(const float *logits, int64_t vocab, const std::vector<int32_t> &history);

private:
  xfmr_sampling settings;
  std::mt19937_64 rng;
};

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_SAMPLER_H
