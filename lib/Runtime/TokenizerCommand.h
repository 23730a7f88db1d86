//===- TokenizerCommand.h - --tokenize and --detokenize ---------*- C++ -*-===//
//
// Every generator and inference executable checks its tokenizer alone, as
// llama.cpp's llama-tokenize does: --tokenize prints the ids of a text,
// --detokenize the text of ids.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_TOKENIZERCOMMAND_H
#define XFMR_LIB_RUNTIME_TOKENIZERCOMMAND_H

#include "Tokenizers/Tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace xfmr::rt {

/// The tokenizer of a model: in `directory` (--tokenizer) if given, else in
/// the weights' directory, else in the checkpoint the model was compiled
/// from. A Failure naming the directory if there is none, ending with
/// `otherwise` (what else the user may do). Sets `chosen` to the directory
/// read.
std::unique_ptr<Tokenizer> findTokenizer(const std::string &directory, const std::string &weights,
                                         const std::string &compiledFrom,
                                         const std::string &otherwise,
                                         std::string *chosen = nullptr);

/// The token ids of `text`, separated by whitespace, commas or brackets; a
/// word that is not one is a Failure naming `what`.
std::vector<int32_t> parseTokenIds(const std::string &text, const std::string &what);

/// Whether the command line asks for --tokenize or --detokenize.
bool wantsTokenizerCommand(int argc, char **argv);

/// Runs --tokenize or --detokenize; returns the exit status.
int runTokenizerCommand(int argc, char **argv, const std::string &compiledFrom);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_TOKENIZERCOMMAND_H
