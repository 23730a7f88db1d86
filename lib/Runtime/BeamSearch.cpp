//===- BeamSearch.cpp - generate()'s beam search --------------------------===//

#include "BeamSearch.h"

#include "Engine.h"
#include "Sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace xfmr::rt;

BeamSearch::BeamSearch(const Settings &settings, const Manifest &rules, std::vector<int32_t> prompt,
                       int64_t maxLength, int64_t context, int64_t vocab)
    : settings(settings), rules(rules), promptLength(static_cast<int64_t>(prompt.size())),
      maxLength(maxLength), limit(std::min(maxLength, context)), vocab(vocab),
      length(promptLength) {
  // Every beam starts from the prompt; all but the first out of the running
  // until the first step has spread them.
  running.assign(settings.beams, {prompt, 0.0, false});
  for (int64_t b = 1; b < settings.beams; ++b)
    running[b].score = -1e9;
  finished.assign(settings.beams, {std::move(prompt), -1e9, false});
}

bool BeamSearch::isEnd(int32_t token) const {
  const std::vector<int64_t> &ends = rules.eosTokenIds;
  return !settings.ignoreEos && std::find(ends.begin(), ends.end(), token) != ends.end();
}

bool BeamSearch::step(const std::vector<const float *> &rows) {
  int64_t beams = settings.beams;
  // The 2K best continuations of all beams.
  struct Candidate {
    double score;
    int64_t beam;
    int32_t token;
    bool hits;
  };
  std::vector<Candidate> candidates;
  std::vector<double> scores(vocab);
  for (int64_t b = 0; b < beams; ++b) {
    const float *row = rows[b];
    double shift = logSumExp(row, vocab);
    for (int64_t v = 0; v < vocab; ++v)
      scores[v] = row[v] - shift;
    const std::vector<int32_t> &history = running[b].tokens;
    penalizeRepeats(scores.data(), vocab, settings.sampling, history.data(), history.size());
    applyTokenRules(rules, scores.data(), vocab, history.size(), maxLength, settings.ignoreEos);
    for (int64_t v = 0; v < vocab; ++v)
      candidates.push_back({scores[v] + running[b].score, b, static_cast<int32_t>(v), false});
  }
  size_t keep = std::min<size_t>(2 * beams, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + keep, candidates.end(),
                    [](const Candidate &x, const Candidate &y) {
                      return x.score != y.score ? x.score > y.score
                             : x.beam != y.beam ? x.beam < y.beam
                                                : x.token < y.token;
                    });
  candidates.resize(keep);
  for (Candidate &c : candidates)
    c.hits = isEnd(c.token) || length + 1 >= limit;
  // The K best unfinished continuations go on.
  std::vector<size_t> order(keep);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    double sx = candidates[x].score - (candidates[x].hits ? 1e9 : 0);
    double sy = candidates[y].score - (candidates[y].hits ? 1e9 : 0);
    return sx != sy ? sx > sy : x < y;
  });
  std::vector<Hypothesis> next;
  nextParents.clear();
  nextTokens.clear();
  for (int64_t b = 0; b < beams; ++b) {
    const Candidate &c = candidates[order[b]];
    Hypothesis h = running[c.beam];
    h.tokens.push_back(c.token);
    h.score = c.score - (c.hits ? 1e9 : 0);
    next.push_back(std::move(h));
    nextParents.push_back(c.beam);
    nextTokens.push_back(c.token);
  }
  // The K best finished hypotheses so far.
  bool full = std::all_of(finished.begin(), finished.end(),
                          [](const Hypothesis &h) { return h.finished; }) &&
              settings.earlyStopping == EarlyStopping::True;
  std::vector<Hypothesis> merged = finished;
  for (size_t i = 0; i < keep; ++i) {
    const Candidate &c = candidates[i];
    bool justFinished = c.hits && static_cast<int64_t>(i) < beams;
    double score =
        c.score / std::pow(static_cast<double>(length + 1 - promptLength), settings.lengthPenalty);
    score += (full ? -1e9 : 0) + (improvable ? 0 : -1e9) + (justFinished ? 0 : -1e9);
    Hypothesis h = running[c.beam];
    h.tokens.push_back(c.token);
    h.score = score;
    h.finished = justFinished;
    merged.push_back(std::move(h));
  }
  std::vector<size_t> ranks(merged.size());
  std::iota(ranks.begin(), ranks.end(), 0);
  std::sort(ranks.begin(), ranks.end(), [&](size_t x, size_t y) {
    return merged[x].score != merged[y].score ? merged[x].score > merged[y].score : x < y;
  });
  for (int64_t b = 0; b < beams; ++b)
    finished[b] = std::move(merged[ranks[b]]);
  running = std::move(next);
  // Can a running beam still beat the worst finished one?
  double bestLength = settings.earlyStopping == EarlyStopping::Never && settings.lengthPenalty > 0
                          ? static_cast<double>(limit - promptLength)
                          : static_cast<double>(length + 1 - promptLength);
  double best = running[0].score / std::pow(bestLength, settings.lengthPenalty);
  double worstFinished = 1e300;
  for (const Hypothesis &h : finished)
    worstFinished = std::min(worstFinished, h.score);
  improvable = improvable && std::any_of(finished.begin(), finished.end(), [&](auto &h) {
                 return best > (h.finished ? worstFinished : -1e9);
               });
  bool allFinished =
      std::all_of(finished.begin(), finished.end(), [](const Hypothesis &h) { return h.finished; });
  bool allHit =
      std::all_of(candidates.begin(), candidates.end(), [](const Candidate &c) { return c.hits; });
  ++length;
  return improvable && !(allFinished && settings.earlyStopping == EarlyStopping::True) && !allHit;
}
