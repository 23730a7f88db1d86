//===- Sampler.cpp - the next token from logits ---------------------------===//
//
// The filters are those of transformers' RepetitionPenaltyLogitsProcessor,
// TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper, applied in
// generate()'s order; test/e2e_lib/sampling.py checks the probabilities
// against them.
//
//===----------------------------------------------------------------------===//

#include "Sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

using namespace xfmr::rt;

void xfmr::rt::penalizeRepeats(double *scores, int64_t vocab, const xfmr_sampling &s,
                               const int32_t *history, size_t historyLength) {
  if (s.repeat_penalty == 1.0)
    return;
  // Each token seen in the last repeat_last_n (0: all) is penalised once.
  size_t first = s.repeat_last_n > 0 && historyLength > static_cast<size_t>(s.repeat_last_n)
                     ? historyLength - s.repeat_last_n
                     : 0;
  std::vector<bool> seen(vocab, false);
  for (size_t i = first; i < historyLength; ++i)
    if (history[i] >= 0 && history[i] < vocab)
      seen[history[i]] = true;
  for (int64_t v = 0; v < vocab; ++v)
    if (seen[v])
      scores[v] = scores[v] < 0 ? scores[v] * s.repeat_penalty : scores[v] / s.repeat_penalty;
}

std::vector<float> xfmr::rt::sampledProbabilities(const float *logits, int64_t vocab,
                                                  const xfmr_sampling &s, const int32_t *history,
                                                  size_t historyLength) {
  std::vector<double> scores(logits, logits + vocab);
  penalizeRepeats(scores.data(), vocab, s, history, historyLength);
  std::vector<float> probabilities(vocab, 0.0f);
  if (vocab == 0)
    return probabilities;
  if (s.temperature <= 0) {
    probabilities[std::max_element(scores.begin(), scores.end()) - scores.begin()] = 1.0f;
    return probabilities;
  }
  for (double &score : scores)
    score /= s.temperature;
  auto higher = [&](int64_t a, int64_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  };
  double maximum = *std::max_element(scores.begin(), scores.end());
  // The kept tokens, highest first, equal scores in token order. Only they
  // are sorted: sorting a vocabulary of 50k took as long as a decode step.
  std::vector<int64_t> order;
  // The probability mass (unnormalized) of the tokens top-p drops for sure:
  // those outside `order` when only top-p filters.
  double outside = 0;
  if (s.top_k > 0 && s.top_k < vocab) {
    // The k highest scores, from one pass that mostly compares with the
    // least of them (a heap); the k-th is the threshold. Ties with it stay,
    // as torch.topk's threshold keeps them.
    std::vector<double> highest(s.top_k);
    std::partial_sort_copy(scores.begin(), scores.end(), highest.begin(), highest.end(),
                           std::greater<>());
    double threshold = highest.back();
    for (int64_t token = 0; token < vocab; ++token)
      if (scores[token] >= threshold)
        order.push_back(token);
    std::sort(order.begin(), order.end(), higher);
  } else {
    order.resize(vocab);
    std::iota(order.begin(), order.end(), 0);
    // Top-p alone: the fewest highest tokens (256, 2048, ...) outside which
    // lies at most 1 - top_p of the mass, which top-p then drops whole.
    std::vector<double> mass(s.top_p < 1.0 ? vocab : 0);
    double total = 0;
    for (size_t token = 0; token < mass.size(); ++token)
      total += mass[token] = std::exp(scores[token] - maximum);
    int64_t candidates = vocab;
    for (int64_t m = 256; s.top_p < 1.0 && m < vocab; m *= 8) {
      std::nth_element(order.begin(), order.begin() + m, order.end(), higher);
      double inside = 0;
      for (int64_t i = 0; i < m; ++i)
        inside += mass[order[i]];
      if (total - inside <= (1.0 - s.top_p) * total) {
        candidates = m;
        outside = total - inside;
        break;
      }
    }
    std::sort(order.begin(), order.begin() + candidates, higher);
    order.resize(candidates);
  }
  int64_t kept = static_cast<int64_t>(order.size());
  std::vector<double> weights(kept);
  double sum = outside;
  for (int64_t i = 0; i < kept; ++i)
    sum += weights[i] = std::exp(scores[order[i]] - maximum);
  if (s.top_p < 1.0) {
    // Drop the least likely tokens whose probabilities add up to at most
    // 1 - top_p (ascending order), keeping at least one.
    double dropped = outside / sum;
    int64_t keep = kept;
    for (int64_t i = kept - 1; i > 0; --i) {
      dropped += weights[i] / sum;
      if (dropped > 1.0 - s.top_p)
        break;
      keep = i;
    }
    kept = keep;
    sum = std::accumulate(weights.begin(), weights.begin() + kept, 0.0);
  }
  for (int64_t i = 0; i < kept; ++i)
    probabilities[order[i]] = static_cast<float>(weights[i] / sum);
  return probabilities;
}

double xfmr::rt::logSumExp(const float *logits, int64_t vocab) {
  double maximum = *std::max_element(logits, logits + vocab), sum = 0;
  for (int64_t v = 0; v < vocab; ++v)
    sum += std::exp(static_cast<double>(logits[v]) - maximum);
  return maximum + std::log(sum);
}

int32_t Sampler::sample(const float *logits, int64_t vocab, const std::vector<int32_t> &history) {
  std::vector<float> probabilities =
      sampledProbabilities(logits, vocab, settings, history.data(), history.size());
  if (settings.temperature <= 0)
    return static_cast<int32_t>(std::max_element(probabilities.begin(), probabilities.end()) -
                                probabilities.begin());
  double draw = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  double cumulative = 0;
  int32_t last = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    if (probabilities[v] <= 0)
      continue;
    cumulative += probabilities[v];
    last = static_cast<int32_t>(v);
    if (draw < cumulative)
      return last;
  }
  return last;
}
