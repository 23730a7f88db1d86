//===- TokenizerModels.h - the tokenizer models' loaders --------*- C++ -*-===//
//
// Internal to the runtime: the loaders of each file layout and the file
// helpers they share.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_TOKENIZERMODELS_H
#define XFMR_LIB_RUNTIME_TOKENIZERMODELS_H

#include "Json.h"
#include "Tokenizers/Tokenizer.h"

namespace xfmr::rt {

/// The largest token id a tokenizer file may give (real vocabularies hold up
/// to a few hundred thousand): ids index dense tables.
constexpr int64_t kMaxTokenId = (int64_t(1) << 22) - 1;

std::string readTokenizerFile(const std::string &path);
bool isRegularFile(const std::string &path);
Json parseTokenizerJson(const std::string &path);
/// "tokenizer file 'PATH'", how errors name a file.
std::string tokenizerFileName(const std::string &path);

/// From tokenizer.json: any model with its components (TokenizerJson.cpp).
std::unique_ptr<Tokenizer> loadTokenizerJson(const std::string &path);
/// From tokenizer.json's contents; `where` names them in errors, `path` is
/// the tokenizer's source.
std::unique_ptr<Tokenizer> loadTokenizerJson(const Json &json, const std::string &where,
                                             const std::string &path);
/// Whether `path` names a llama.cpp .gguf file.
bool isGgufFile(const std::string &path);
/// The tokenizer.json or tokenizer_config.json (`config`) of the GGUF file at
/// `path`, parsed.
Json ggufTokenizerFile(const std::string &path, bool config);
/// From the slow tokenizer's vocab.json + merges.txt and, if it exists,
/// tokenizer_config.json's special tokens: GPT-2's byte-level BPE.
std::unique_ptr<Tokenizer> loadBytePairFiles(const std::string &vocabPath,
                                             const std::string &mergesPath,
                                             const std::string &configPath);
/// From BERT's vocab.txt and, if it exists, tokenizer_config.json.
std::unique_ptr<Tokenizer> loadWordPieceVocab(const std::string &vocabPath,
                                              const std::string &configPath);
/// SentencePiece files in `directory` (Marian's source.spm + vocab.json, or
/// spiece.model), or null if there are none. Set by
/// xfmr_tokenizer_enable_sentencepiece(); null without
/// libxfmr_sentencepiece.a.
using SentencePieceLoader = std::unique_ptr<Tokenizer> (*)(const std::string &directory);
extern SentencePieceLoader sentencePieceLoader;
/// Whether `directory` holds SentencePiece files (to say that reading them
/// needs libxfmr_sentencepiece.a).
bool hasSentencePieceFiles(const std::string &directory);

/// tokenizer_config.json's `added_tokens_decoder` and the slow tokenizer
/// class's sequence template.
void readSpecialTokenConfig(Tokenizer &tokenizer, const std::string &configPath);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_TOKENIZERMODELS_H
