//===- BytePair.cpp - the BPE model ---------------------------------------===//
//
// A piece starts as its characters (the first without, the others with
// continuing_subword_prefix; the last with end_of_word_suffix), each its
// token, else its bytes' <0xAB> tokens (byte_fallback), else the unknown
// token (consecutive ones fused with fuse_unk). Then the pair with the
// lowest merge rank, leftmost first, is merged until no pair has a merge,
// as tokenizers' Word::merge_all does. Results are cached per piece. Also
// the slow tokenizer's vocab.json + merges.txt (GPT-2's byte-level BPE).
//
//===----------------------------------------------------------------------===//

#include "Tokenizers/TokenizerPipeline.h"

#include "CommandLine.h"
#include "Tokenizers/TokenizerModels.h"
#include "Tokenizers/Unicode.h"

#include <mutex>
#include <queue>
#include <sstream>

using namespace xfmr::rt;

namespace {

class BytePairModel : public TokenizerModel {
public:
  Vocabulary vocab;
  std::string unknown, prefix, suffix;
  bool byteFallback = false, fuseUnknown = false, ignoreMerges = false;

  /// Merge `rank` of tokens `left` and `right`.
  void addMerge(const std::string &left, const std::string &right, int32_t rank,
                const std::string &where) {
    int32_t a = vocab.find(left), b = vocab.find(right);
    // The merged token drops the right side's continuation prefix.
    std::string rightPart = right.compare(0, prefix.size(), prefix) == 0 && !prefix.empty()
                                ? right.substr(prefix.size())
                                : right;
    int32_t merged = vocab.find(left + rightPart);
    if (a < 0 || b < 0 || merged < 0)
      fail(where + ": merge " + std::to_string(rank + 1) + " ('" + left + "', '" + right +
           "') has a token the vocabulary lacks");
    merges.emplace(pairKey(a, b), MergeResult{rank, merged});
  }

  void encode(const std::string &piece, std::vector<int32_t> &ids) const override {
    if (ignoreMerges)
      if (int32_t id = vocab.find(piece); id >= 0) {
        ids.push_back(id);
        return;
      }
    {
      std::lock_guard<std::mutex> lock(cacheMutex);
      if (auto it = cache.find(piece); it != cache.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> word = mergeWord(piece);
    ids.insert(ids.end(), word.begin(), word.end());
    if (piece.size() < kMaxCachedPiece) {
      std::lock_guard<std::mutex> lock(cacheMutex);
      if (cache.size() < kCacheCapacity)
        cache.emplace(piece, std::move(word));
    }
  }

  const std::string *token(int32_t id) const override { return vocab.token(id); }
  int32_t id(const std::string &token) const override { return vocab.find(token); }
  int64_t size() const override { return vocab.size(); }

private:
  struct MergeResult {
    int32_t rank, merged;
  };
  static constexpr size_t kMaxCachedPiece = 256, kCacheCapacity = 10000;

  static uint64_t pairKey(int32_t a, int32_t b) {
    return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
  }

  /// The initial symbols of `piece`.
  std::vector<int32_t> symbols(const std::string &piece) const {
    std::vector<int32_t> result;
    int32_t unknownId = -2; // none pending
    auto flushUnknown = [&] {
      if (unknownId != -2)
        result.push_back(unknownId);
      unknownId = -2;
    };
    for (size_t i = 0; i < piece.size();) {
      size_t length = utf8Length(piece, i);
      std::string symbol = piece.substr(i, length);
      if (i > 0)
        symbol.insert(0, prefix);
      i += length;
      if (i == piece.size())
        symbol += suffix;
      if (int32_t id = vocab.find(symbol); id >= 0) {
        flushUnknown();
        result.push_back(id);
        continue;
      }
      if (byteFallback &&
          appendByteFallback(symbol, [&](const std::string &t) { return vocab.find(t); }, result))
        continue;
      if (unknown.empty())
        continue;
      int32_t id = vocab.find(unknown);
      if (id < 0)
        fail("the BPE model's unknown token '" + unknown + "' is not in its vocabulary");
      if (!fuseUnknown || unknownId == -2) {
        flushUnknown();
        unknownId = id;
      }
    }
    flushUnknown();
    return result;
  }

  std::vector<int32_t> mergeWord(const std::string &piece) const {
    std::vector<int32_t> ids = symbols(piece);
    size_t n = ids.size();
    std::vector<int64_t> previous(n), next(n);
    for (size_t i = 0; i < n; ++i) {
      previous[i] = static_cast<int64_t>(i) - 1;
      next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : -1;
    }
    std::vector<bool> removed(n, false);
    // (rank, position, merged id), smallest rank then leftmost first.
    using Candidate = std::tuple<int32_t, int64_t, int32_t>;
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
    auto push = [&](int64_t at) {
      if (at < 0 || next[at] < 0)
        return;
      if (auto it = merges.find(pairKey(ids[at], ids[next[at]])); it != merges.end())
        queue.emplace(it->second.rank, at, it->second.merged);
    };
    for (size_t i = 0; i + 1 < n; ++i)
      push(static_cast<int64_t>(i));
    while (!queue.empty()) {
      auto [rank, at, merged] = queue.top();
      queue.pop();
      if (removed[at] || next[at] < 0)
        continue;
      int64_t right = next[at];
      auto it = merges.find(pairKey(ids[at], ids[right]));
      if (it == merges.end() || it->second.merged != merged)
        continue;
      ids[at] = merged;
      removed[right] = true;
      next[at] = next[right];
      if (next[right] >= 0)
        previous[next[right]] = at;
      push(previous[at]);
      push(at);
    }
    std::vector<int32_t> result;
    for (size_t i = 0; i < n; ++i)
      if (!removed[i])
        result.push_back(ids[i]);
    return result;
  }

  std::unordered_map<uint64_t, MergeResult> merges;
  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;
};

/// "a b" or ["a", "b"].
std::pair<std::string, std::string> readMerge(const Json &merge, size_t index,
                                              const std::string &where) {
  std::string what = where + ": merge " + std::to_string(index + 1);
  if (merge.is_string()) {
    size_t space = textOf(merge).find(' ', 1);
    if (space == std::string::npos || textOf(merge).find(' ', space + 1) != std::string::npos)
      fail(what + " ('" + textOf(merge) + "') is not two tokens separated by a space");
    return {textOf(merge).substr(0, space), textOf(merge).substr(space + 1)};
  }
  if (const Json::array_t &pair = elements(merge);
      pair.size() == 2 && pair[0].is_string() && pair[1].is_string())
    return {textOf(pair[0]), textOf(pair[1])};
  fail(what + " is neither \"a b\" nor [\"a\", \"b\"]");
}

} // namespace

std::unique_ptr<TokenizerModel> xfmr::rt::readBpeModel(const Json &json, const std::string &where) {
  auto model = std::make_unique<BytePairModel>();
  model->vocab = Vocabulary::fromObject(requireKey(json, "vocab", where), where);
  model->unknown = stringKey(json, "unk_token", where, "");
  model->prefix = stringKey(json, "continuing_subword_prefix", where, "");
  model->suffix = stringKey(json, "end_of_word_suffix", where, "");
  model->byteFallback = boolKey(json, "byte_fallback", where, false);
  model->fuseUnknown = boolKey(json, "fuse_unk", where, false);
  model->ignoreMerges = boolKey(json, "ignore_merges", where, false);
  // dropout only matters in training: encoding is deterministic without it.
  const Json &merges = requireKey(json, "merges", where);
  if (!merges.is_array())
    fail(keyName(where, "merges") + ": expected an array");
  for (size_t i = 0; i < merges.size(); ++i) {
    auto [left, right] = readMerge(merges[i], i, where);
    model->addMerge(left, right, static_cast<int32_t>(i), where);
  }
  return model;
}

std::unique_ptr<TokenizerModel>
xfmr::rt::bpeModel(std::vector<std::pair<std::string, int64_t>> vocab,
                   const std::vector<std::pair<std::string, std::string>> &merges,
                   const std::string &where) {
  auto model = std::make_unique<BytePairModel>();
  for (const auto &[token, id] : vocab)
    model->vocab.add(token, id, where);
  for (size_t i = 0; i < merges.size(); ++i)
    model->addMerge(merges[i].first, merges[i].second, static_cast<int32_t>(i), where);
  return model;
}

std::unique_ptr<Tokenizer> xfmr::rt::loadBytePairFiles(const std::string &vocabPath,
                                                       const std::string &mergesPath,
                                                       const std::string &configPath) {
  std::string where = tokenizerFileName(vocabPath);
  Json vocabJson = parseTokenizerJson(vocabPath);
  if (!vocabJson.is_object())
    fail(where + ": expected an object of token: id");
  std::vector<std::pair<std::string, int64_t>> vocab;
  for (const auto &[token, id] : members(vocabJson)) {
    std::optional<int64_t> value = asInt(id);
    if (!value)
      fail(where + ": token '" + token + "' has no integer id");
    vocab.emplace_back(token, *value);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  std::string mergesText = readTokenizerFile(mergesPath);
  if (!isValidUtf8(mergesText))
    fail(tokenizerFileName(mergesPath) + ": not valid UTF-8");
  std::istringstream lines(mergesText);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty() || (number == 1 && line.rfind("#version", 0) == 0))
      continue;
    size_t space = line.find(' ', 1);
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      fail(tokenizerFileName(mergesPath) + ":" + std::to_string(number) +
           ": expected two symbols separated by a space");
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  auto tokenizer = makePipelineTokenizer(nullptr, byteLevelPreTokenizer(/*addPrefixSpace=*/false),
                                         bpeModel(std::move(vocab), merges, where),
                                         byteLevelDecoder(), vocabPath);
  readSpecialTokenConfig(*tokenizer, configPath);
  return tokenizer;
}
