//===- WordPiece.cpp - the WordPiece and WordLevel models -----------------===//
//
// WordPiece (BERT): greedy longest match from the left, "##" before all but
// the first piece, the unknown token for the whole word if a piece has no
// match or the word is too long. WordLevel: each piece is a token or the
// unknown one. Also BERT's slow files (vocab.txt + tokenizer_config.json)
// as BertNormalizer, BertPreTokenizer, WordPiece and its decoder.
//
//===----------------------------------------------------------------------===//

#include "Tokenizers/TokenizerPipeline.h"

#include "CommandLine.h"
#include "Tokenizers/TokenizerModels.h"
#include "Tokenizers/Unicode.h"

#include <sstream>

using namespace xfmr::rt;

namespace {

class WordPieceModel : public TokenizerModel {
public:
  Vocabulary vocab;
  std::string prefix = "##";
  int32_t unknownId = -1;
  size_t maxCharacters = 100;

  void encode(const std::string &piece, std::vector<int32_t> &ids) const override {
    std::vector<size_t> starts; // of each character, and the end
    for (size_t i = 0; i < piece.size(); i += utf8Length(piece, i))
      starts.push_back(i);
    if (starts.size() > maxCharacters)
      return ids.push_back(unknownId);
    starts.push_back(piece.size());
    size_t first = ids.size();
    for (size_t start = 0; start + 1 < starts.size();) {
      int32_t found = -1;
      size_t end = starts.size() - 1;
      for (; end > start; --end) {
        std::string candidate = piece.substr(starts[start], starts[end] - starts[start]);
        if (start > 0)
          candidate.insert(0, prefix);
        if ((found = vocab.find(candidate)) >= 0)
          break;
      }
      if (found < 0) {
        ids.resize(first);
        return ids.push_back(unknownId);
      }
      ids.push_back(found);
      start = end;
    }
  }

  const std::string *token(int32_t id) const override { return vocab.token(id); }
  int32_t id(const std::string &token) const override { return vocab.find(token); }
  int64_t size() const override { return vocab.size(); }
};

class WordLevelModel : public TokenizerModel {
public:
  Vocabulary vocab;
  int32_t unknownId = -1;
  std::string unknown;

  void encode(const std::string &piece, std::vector<int32_t> &ids) const override {
    int32_t found = vocab.find(piece);
    if (found < 0 && unknownId < 0)
      fail("the WordLevel model has no token for '" + piece + "' and no unknown token");
    ids.push_back(found >= 0 ? found : unknownId);
  }

  const std::string *token(int32_t id) const override { return vocab.token(id); }
  int32_t id(const std::string &token) const override { return vocab.find(token); }
  int64_t size() const override { return vocab.size(); }
};

int32_t unknownTokenId(const Vocabulary &vocab, const std::string &unknown,
                       const std::string &where) {
  int32_t id = vocab.find(unknown);
  if (id < 0)
    fail(keyName(where, "unk_token") + ": the unknown token '" + unknown +
         "' is not in the vocabulary");
  return id;
}

} // namespace

std::unique_ptr<TokenizerModel> xfmr::rt::readWordPieceModel(const Json &json,
                                                             const std::string &where) {
  auto model = std::make_unique<WordPieceModel>();
  model->vocab = Vocabulary::fromObject(requireKey(json, "vocab", where), where);
  model->prefix = stringKey(json, "continuing_subword_prefix", where, "##");
  model->unknownId =
      unknownTokenId(model->vocab, stringKey(json, "unk_token", where, "[UNK]"), where);
  if (const Json *limit = field(json, "max_input_chars_per_word")) {
    std::optional<int64_t> value = asInt(*limit);
    if (!value || *value < 0)
      fail(keyName(where, "max_input_chars_per_word") + ": expected a count");
    model->maxCharacters = static_cast<size_t>(*value);
  }
  return model;
}

std::unique_ptr<TokenizerModel> xfmr::rt::readWordLevelModel(const Json &json,
                                                             const std::string &where) {
  auto model = std::make_unique<WordLevelModel>();
  model->vocab = Vocabulary::fromObject(requireKey(json, "vocab", where), where);
  std::string unknown = stringKey(json, "unk_token", where, "");
  model->unknownId = model->vocab.find(unknown);
  return model;
}

std::unique_ptr<TokenizerModel> xfmr::rt::wordPieceModel(const std::vector<std::string> &vocab,
                                                         const std::string &where) {
  auto model = std::make_unique<WordPieceModel>();
  // Like BertTokenizer, a later line with the same token wins.
  std::unordered_map<std::string, int64_t> ids;
  for (size_t id = 0; id < vocab.size(); ++id)
    ids[vocab[id]] = static_cast<int64_t>(id);
  for (size_t id = 0; id < vocab.size(); ++id)
    if (ids[vocab[id]] == static_cast<int64_t>(id))
      model->vocab.add(vocab[id], static_cast<int64_t>(id), where);
  model->unknownId = unknownTokenId(model->vocab, "[UNK]", where);
  return model;
}

std::unique_ptr<Tokenizer> xfmr::rt::loadWordPieceVocab(const std::string &vocabPath,
                                                        const std::string &configPath) {
  std::string where = tokenizerFileName(vocabPath);
  std::vector<std::string> vocab;
  std::string vocabText = readTokenizerFile(vocabPath);
  if (!isValidUtf8(vocabText))
    fail(where + ": not valid UTF-8");
  std::istringstream lines(vocabText);
  std::string line;
  while (std::getline(lines, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.pop_back();
    vocab.push_back(line);
  }
  // BertTokenizer's settings; its template is [CLS] A [SEP] unless the
  // config names another class.
  bool lowercase = true, chinese = true, stripAccents = true;
  if (isRegularFile(configPath)) {
    std::string configWhere = tokenizerFileName(configPath);
    Json config = parseTokenizerJson(configPath);
    lowercase = boolKey(config, "do_lower_case", configWhere, true);
    chinese = boolKey(config, "tokenize_chinese_chars", configWhere, true);
    stripAccents = boolKey(config, "strip_accents", configWhere, lowercase);
  }
  auto tokenizer = makePipelineTokenizer(bertNormalizer(lowercase, stripAccents, chinese, true),
                                         bertPreTokenizer(), wordPieceModel(vocab, where),
                                         wordPieceDecoder("##", true), vocabPath);
  for (const char *special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
    if (int32_t id = tokenizer->tokenId(special); id >= 0)
      tokenizer->addSpecialToken(special, id);
  readSpecialTokenConfig(*tokenizer, configPath);
  if (tokenizer->prefix.empty() && tokenizer->suffix.empty()) {
    tokenizer->prefix = {tokenizer->specialId("[CLS]", where)};
    tokenizer->suffix = {tokenizer->specialId("[SEP]", where)};
  }
  return tokenizer;
}
