//===- SentencePiece.cpp - SentencePiece models through libsentencepiece -===//
//
// Marian's tokenizer (transformers' MarianTokenizer): the source model
// (source.spm) splits text into pieces, vocab.json gives their ids (unknown
// pieces get <unk>'s), a leading language code such as >>fr<< is a token of
// its own, and </s> ends the sequence; decoding joins the pieces with the
// source model (the target's, target.spm, with separate vocabularies).
// spiece.model alone (T5's file) gives its own ids, </s> appended, and
// decodes as SentencePiece does. Kept out
// of libxfmr_runtime.a: embedders that read these link
// libxfmr_sentencepiece.a and -lsentencepiece and call
// xfmr_tokenizer_enable_sentencepiece().
//
//===----------------------------------------------------------------------===//

#include "xfmr-rt/xfmr_runtime.h"

#include "CommandLine.h"
#include "Tokenizers/TokenizerModels.h"
#include "Tokenizers/Unicode.h"

#include <sentencepiece_processor.h>

#include <unordered_map>

using namespace xfmr::rt;

namespace {

constexpr std::string_view kWordBoundary = "\xE2\x96\x81"; // U+2581, SentencePiece's space

std::unique_ptr<sentencepiece::SentencePieceProcessor> loadModel(const std::string &path) {
  auto model = std::make_unique<sentencepiece::SentencePieceProcessor>();
  // Some corrupt models make the library throw (its trie builder rejects
  // empty pieces) rather than return a status.
  sentencepiece::util::Status status;
  try {
    status = model->Load(path);
  } catch (const std::exception &error) {
    fail(tokenizerFileName(path) + ": corrupt model: " + error.what());
  }
  if (!status.ok())
    fail(tokenizerFileName(path) + ": " + status.ToString());
  return model;
}

std::string spaced(std::string piece) {
  for (size_t at; (at = piece.find(kWordBoundary)) != std::string::npos;)
    piece.replace(at, kWordBoundary.size(), " ");
  return piece;
}

class SentencePiece : public Tokenizer {
public:
  /// With a vocabulary (Marian), ids come from it; without, from the model.
  std::unique_ptr<sentencepiece::SentencePieceProcessor> encoder, decoder;
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> pieces;
  int32_t unknown = 0;

  int32_t id(const std::string &piece) const {
    if (vocab.empty())
      return encoder->PieceToId(piece);
    auto it = vocab.find(piece);
    return it == vocab.end() ? unknown : it->second;
  }

  std::string piece(int32_t id) const {
    if (!vocab.empty())
      return id >= 0 && static_cast<size_t>(id) < pieces.size() ? pieces[id] : "";
    return id >= 0 && id < decoder->GetPieceSize() ? decoder->IdToPiece(id) : "";
  }

  int64_t size() const override {
    return vocab.empty() ? decoder->GetPieceSize() : static_cast<int64_t>(pieces.size());
  }

  /// With a vocabulary, MarianTokenizer.convert_tokens_to_string: runs of
  /// pieces decoded by the model, special tokens as they are followed by a
  /// space, U+2581 as a space, the whole stripped.
  std::string decode(const std::vector<int32_t> &ids) const override {
    std::string text;
    if (vocab.empty()) {
      // SentencePiece's own: control tokens dropped, unknown ones as " ⁇ ".
      std::vector<int> valid;
      for (int32_t id : ids)
        if (id >= 0 && id < decoder->GetPieceSize())
          valid.push_back(id);
      if (!decoder->Decode(valid, &text).ok())
        text.clear();
      return text;
    }
    std::vector<std::string> run;
    auto flush = [&] {
      std::string decoded;
      if (!run.empty() && !decoder->Decode(run, &decoded).ok())
        decoded.clear();
      text += decoded;
      run.clear();
    };
    for (int32_t token : ids) {
      if (const AddedToken *special = addedToken(token)) {
        flush();
        text += special->content + " ";
      } else {
        run.push_back(piece(token));
      }
    }
    flush();
    text = spaced(text);
    size_t first = text.find_first_not_of(" \t\n\r\f\v");
    size_t last = text.find_last_not_of(" \t\n\r\f\v");
    return first == std::string::npos ? "" : text.substr(first, last - first + 1);
  }

protected:
  void encodeSegment(std::string_view text, bool /*atStart*/,
                     std::vector<int32_t> &ids) const override {
    // A leading language code (>>fr<<) is one token.
    if (!vocab.empty() && text.rfind(">>", 0) == 0)
      if (size_t end = text.find("<<"); end != std::string_view::npos) {
        ids.push_back(id(std::string(text.substr(0, end + 2))));
        text.remove_prefix(end + 2);
      }
    std::vector<std::string> encoded;
    if (sentencepiece::util::Status status = encoder->Encode(text, &encoded); !status.ok())
      fail("SentencePiece: " + status.ToString());
    for (const std::string &each : encoded)
      ids.push_back(id(each));
  }
};

std::unique_ptr<Tokenizer> loadMarian(const std::string &directory) {
  auto tokenizer = std::make_unique<SentencePiece>();
  std::string vocabPath = directory + "/vocab.json";
  std::string configPath = directory + "/tokenizer_config.json";
  tokenizer->source = directory + "/source.spm";
  tokenizer->encoder = loadModel(directory + "/source.spm");
  bool separate = false;
  if (isRegularFile(configPath)) {
    Json config = parseTokenizerJson(configPath);
    const Json *value = field(config, "separate_vocabs");
    separate = value && isTrue(*value);
  }
  if (separate)
    fail(tokenizerFileName(configPath) + ": key 'separate_vocabs': Marian tokenizers with "
                                         "separate vocabularies are not supported");
  tokenizer->decoder = loadModel(directory + "/source.spm");
  if (!isRegularFile(vocabPath))
    fail("'" + directory + "' has source.spm but no vocab.json (Marian's piece ids)");
  std::string where = tokenizerFileName(vocabPath);
  Json vocab = parseTokenizerJson(vocabPath);
  if (!vocab.is_object())
    fail(where + ": expected an object of piece: id");
  for (const auto &[piece, id] : members(vocab)) {
    std::optional<int64_t> value = asInt(id);
    if (!value || *value < 0 || *value > kMaxTokenId)
      fail(where + ": piece '" + piece + "' has no id from 0 to " + std::to_string(kMaxTokenId));
    tokenizer->vocab[piece] = static_cast<int32_t>(*value);
    if (static_cast<size_t>(*value) >= tokenizer->pieces.size())
      tokenizer->pieces.resize(*value + 1);
    tokenizer->pieces[*value] = piece;
  }
  for (const char *special : {"</s>", "<unk>", "<pad>"}) {
    auto it = tokenizer->vocab.find(special);
    if (it == tokenizer->vocab.end())
      fail(where + ": no '" + special + "' piece");
    tokenizer->addSpecialToken(special, it->second);
  }
  tokenizer->unknown = tokenizer->vocab["<unk>"];
  tokenizer->suffix = {tokenizer->vocab["</s>"]};
  return tokenizer;
}

std::unique_ptr<Tokenizer> loadSpieceModel(const std::string &path) {
  auto tokenizer = std::make_unique<SentencePiece>();
  tokenizer->source = path;
  tokenizer->encoder = loadModel(path);
  tokenizer->decoder = loadModel(path);
  if (int eos = tokenizer->encoder->eos_id(); eos >= 0)
    tokenizer->suffix = {eos};
  return tokenizer;
}

std::unique_ptr<Tokenizer> loadSentencePieceFiles(const std::string &directory) {
  if (isRegularFile(directory + "/source.spm"))
    return loadMarian(directory);
  return loadSpieceModel(directory + "/spiece.model");
}

} // namespace

void xfmr_tokenizer_enable_sentencepiece(void) { sentencePieceLoader = loadSentencePieceFiles; }
