//===- TokenizerModels.h - the tokenizer models' loaders --------*- C++ -*-===//
//
// Internal to the runtime: each model's loaders (BytePair.cpp,
// WordPiece.cpp, SentencePiece.cpp) and the file helpers they share.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_TOKENIZERMODELS_H
#define XFMR_LIB_RUNTIME_TOKENIZERMODELS_H

#include "Json.h"
#include "Tokenizer.h"

namespace xfmr::rt {

/// The largest token id a tokenizer file may give (real vocabularies hold up
/// to a few hundred thousand): ids index dense tables.
constexpr int64_t kMaxTokenId = (int64_t(1) << 22) - 1;

std::string readTokenizerFile(const std::string &path);
bool isRegularFile(const std::string &path);
JsonValue parseTokenizerJson(const std::string &path);
/// "tokenizer file 'PATH'", how errors name a file.
std::string tokenizerFileName(const std::string &path);

/// From tokenizer.json with a BPE model (its parsed `json`).
std::unique_ptr<Tokenizer> loadBytePair(const JsonValue &json, const std::string &path);
/// From the slow tokenizer's vocab.json + merges.txt and, if it exists,
/// tokenizer_config.json's special tokens.
std::unique_ptr<Tokenizer> loadBytePairFiles(const std::string &vocabPath,
                                             const std::string &mergesPath,
                                             const std::string &configPath);
/// From tokenizer.json with a WordPiece model.
std::unique_ptr<Tokenizer> loadWordPiece(const JsonValue &json, const std::string &path);
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

/// Added tokens of tokenizer.json's `added_tokens` or tokenizer_config.json's
/// `added_tokens_decoder`, and its sequence template.
void readAddedTokens(Tokenizer &tokenizer, const JsonValue &json, const std::string &where);
void readSpecialTokenConfig(Tokenizer &tokenizer, const std::string &configPath);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_TOKENIZERMODELS_H
