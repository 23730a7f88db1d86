//===- Unigram.cpp - the Unigram model ------------------------------------===//
//
// SentencePiece's unigram language model as tokenizers runs it: the best
// segmentation of a piece by the sum of its tokens' scores (Viterbi over
// the tokens that start at each character, from a byte trie), a character
// no token starts with scored as unknown (the lowest score less 10), runs
// of unknown characters fused into one, then unknown strings as their
// bytes' <0xAB> tokens (byte_fallback) or the unknown id.
//
//===----------------------------------------------------------------------===//

#include "Tokenizers/TokenizerPipeline.h"

#include "CommandLine.h"
#include "Tokenizers/TokenizerModels.h"
#include "Tokenizers/Unicode.h"

#include <cmath>
#include <limits>
#include <mutex>

using namespace xfmr::rt;

namespace {

class UnigramModel : public TokenizerModel {
public:
  std::vector<std::string> pieces;
  std::vector<double> scores;
  std::unordered_map<std::string, int32_t> ids;
  int32_t unknownId = -1;
  bool byteFallback = false;
  double unknownScore = 0;

  void build() {
    double lowest = std::numeric_limits<double>::infinity();
    for (size_t id = 0; id < pieces.size(); ++id) {
      insert(pieces[id], static_cast<int32_t>(id));
      lowest = std::min(lowest, scores[id]);
    }
    unknownScore = lowest - 10.0;
  }

  void encode(const std::string &piece, std::vector<int32_t> &out) const override {
    {
      std::lock_guard<std::mutex> lock(cacheMutex);
      if (auto it = cache.find(piece); it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> result;
    for (const std::string &token : segment(piece)) {
      if (auto it = ids.find(token); it != ids.end()) {
        result.push_back(it->second);
        continue;
      }
      if (byteFallback && appendByteFallback(token, [&](const std::string &t) { return id(t); }, result))
        continue;
      if (unknownId < 0)
        fail("the Unigram model has no token for '" + token + "' and no unk_id");
      result.push_back(unknownId);
    }
    out.insert(out.end(), result.begin(), result.end());
    if (piece.size() < kMaxCachedPiece) {
      std::lock_guard<std::mutex> lock(cacheMutex);
      if (cache.size() < kCacheCapacity)
        cache.emplace(piece, std::move(result));
    }
  }

  const std::string *token(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < pieces.size() ? &pieces[id] : nullptr;
  }
  int32_t id(const std::string &token) const override {
    auto it = ids.find(token);
    return it == ids.end() ? -1 : it->second;
  }
  int64_t size() const override { return static_cast<int64_t>(pieces.size()); }

private:
  static constexpr size_t kMaxCachedPiece = 256, kCacheCapacity = 10000;

  void insert(const std::string &token, int32_t id) {
    int32_t node = 0;
    for (char c : token) {
      uint64_t key = edgeKey(node, c);
      auto it = edges.find(key);
      if (it == edges.end()) {
        it = edges.emplace(key, static_cast<int32_t>(tokenAt.size())).first;
        tokenAt.push_back(-1);
      }
      node = it->second;
    }
    // The last of equal pieces is the one found, as in tokenizers.
    tokenAt[node] = id;
  }

  static uint64_t edgeKey(int32_t node, char c) {
    return static_cast<uint64_t>(node) << 8 | static_cast<uint8_t>(c);
  }

  /// The best path's token strings, unknown runs fused.
  std::vector<std::string> segment(const std::string &text) const {
    struct Node {
      int32_t id = -1;
      double score = 0;
      int64_t start = -1;
    };
    size_t size = text.size();
    std::vector<Node> best(size + 1);
    for (size_t start = 0; start < size;) {
      double before = best[start].score;
      size_t length = utf8Length(text, start);
      bool single = false;
      int32_t node = 0;
      for (size_t end = start; end < size; ++end) {
        auto it = edges.find(edgeKey(node, text[end]));
        if (it == edges.end())
          break;
        node = it->second;
        int32_t id = tokenAt[node];
        if (id < 0)
          continue;
        Node &target = best[end + 1];
        double score = before + scores[id];
        if (target.start < 0 || score > target.score)
          target = {id, score, static_cast<int64_t>(start)};
        single |= end + 1 - start == length;
      }
      if (!single) {
        Node &target = best[start + length];
        double score = before + unknownScore;
        if (target.start < 0 || score > target.score)
          target = {unknownId, score, static_cast<int64_t>(start)};
      }
      start += length;
    }
    std::vector<std::string> tokens;
    std::string unknownRun;
    for (size_t end = size; end > 0;) {
      const Node &node = best[end];
      auto start = static_cast<size_t>(node.start);
      std::string token = text.substr(start, end - start);
      if (node.id == unknownId) {
        unknownRun.insert(0, token);
      } else {
        if (!unknownRun.empty())
          tokens.push_back(std::move(unknownRun));
        unknownRun.clear();
        tokens.push_back(std::move(token));
      }
      end = start;
    }
    if (!unknownRun.empty())
      tokens.push_back(std::move(unknownRun));
    std::reverse(tokens.begin(), tokens.end());
    return tokens;
  }

  std::unordered_map<uint64_t, int32_t> edges;
  std::vector<int32_t> tokenAt{-1}; // the root
  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;
};

} // namespace

std::unique_ptr<TokenizerModel> xfmr::rt::readUnigramModel(const Json &json,
                                                           const std::string &where) {
  auto model = std::make_unique<UnigramModel>();
  const Json &vocab = requireKey(json, "vocab", where);
  if (!vocab.is_array())
    fail(keyName(where, "vocab") + ": expected an array of [piece, score]");
  for (const Json &entry : elements(vocab)) {
    std::string what = where + ": vocab entry " + std::to_string(model->pieces.size());
    std::optional<double> score;
    const Json::array_t &pair = elements(entry);
    if (pair.size() == 2 && pair[0].is_string())
      score = asDouble(pair[1]);
    if (!score || !std::isfinite(*score) || textOf(pair[0]).empty())
      fail(what + " is not [piece, score]");
    if (static_cast<int64_t>(model->pieces.size()) > kMaxTokenId)
      fail(where + ": more than " + std::to_string(kMaxTokenId + 1) + " pieces");
    model->ids[textOf(pair[0])] = static_cast<int32_t>(model->pieces.size());
    model->pieces.push_back(textOf(pair[0]));
    model->scores.push_back(*score);
  }
  if (model->pieces.empty())
    fail(keyName(where, "vocab") + ": no pieces");
  if (const Json *unknown = field(json, "unk_id"); unknown && !unknown->is_null()) {
    std::optional<int64_t> id = asInt(*unknown);
    if (!id || *id < 0 || *id >= model->size())
      fail(keyName(where, "unk_id") + ": expected an id below " + std::to_string(model->size()));
    model->unknownId = static_cast<int32_t>(*id);
  }
  model->byteFallback = boolKey(json, "byte_fallback", where, false);
  model->build();
  return model;
}
