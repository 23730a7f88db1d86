//===- TokenizerCommand.cpp - --tokenize and --detokenize -----------------===//

#include "TokenizerCommand.h"

#include "CommandLine.h"
#include "Tokenizers/TokenizerModels.h"
#include "Tokenizers/Unicode.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

using namespace xfmr::rt;

namespace {

bool isDirectory(const std::string &path) {
  struct stat info;
  return !path.empty() && stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

void printHelp(const char *argv0) {
  std::printf("usage: %s --tokenize|--detokenize (-p TEXT | -f FILE) [options]\n"
              "\n"
              "Runs the model's tokenizer alone.\n"
              "\n"
              "  --tokenize          print the ids of the text, one 'ID -> 'TOKEN'' per line\n"
              "  --detokenize        the text is token ids (spaces, commas or brackets between):\n"
              "                      print the text they decode to\n"
              "  -p, --prompt TEXT   the text\n"
              "  -f, --file FILE     read the text from FILE\n"
              "  --ids               with --tokenize, print only the ids, as [1, 2, 3]\n"
              "  --no-special        without the special tokens the tokenizer puts around a\n"
              "                      sequence (BOS, [CLS] ... [SEP])\n"
              "  --tokenizer DIR     the tokenizer's directory (default: the weights', or the\n"
              "                      checkpoint's the model was compiled from)\n"
              "  -m, --weights PATH  the model's weights (their directory holds the tokenizer)\n",
              argv0);
}

} // namespace

std::vector<int32_t> xfmr::rt::parseTokenIds(const std::string &text, const std::string &what) {
  std::vector<int32_t> ids;
  std::string word;
  auto flush = [&] {
    if (word.empty())
      return;
    char *end = nullptr;
    errno = 0;
    long long id = std::strtoll(word.c_str(), &end, 10);
    if (*end || errno == ERANGE || id < INT32_MIN || id > INT32_MAX)
      fail(what + ": '" + word + "' is not a token id");
    ids.push_back(static_cast<int32_t>(id));
    word.clear();
  };
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == '[' || c == ']')
      flush();
    else
      word += c;
  }
  flush();
  return ids;
}

std::unique_ptr<Tokenizer> xfmr::rt::findTokenizer(const std::string &directory,
                                                   const std::string &weights,
                                                   const std::string &compiledFrom,
                                                   const std::string &otherwise,
                                                   std::string *chosen) {
  // A weights file (xfmrc --quantize's) leaves the tokenizer with the
  // checkpoint the model was compiled from; a GGUF file holds its own.
  auto holdsTokenizer = [](const std::string &path) {
    return isDirectory(path) || isGgufFile(path);
  };
  std::string found = !directory.empty()             ? directory
                      : holdsTokenizer(weights)      ? weights
                      : holdsTokenizer(compiledFrom) ? compiledFrom
                                                     : "";
  std::unique_ptr<Tokenizer> tokenizer = found.empty() ? nullptr : loadTokenizer(found);
  if (!tokenizer)
    fail("no tokenizer" + (found.empty() ? std::string() : " in '" + found + "'") + " (" +
         kTokenizerFiles + "): pass --tokenizer=DIR" + otherwise);
  if (chosen)
    *chosen = found;
  return tokenizer;
}

bool xfmr::rt::wantsTokenizerCommand(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--tokenize") || !std::strcmp(argv[i], "--detokenize"))
      return true;
  return false;
}

int xfmr::rt::runTokenizerCommand(int argc, char **argv, const std::string &compiledFrom) {
  bool tokenize = false, detokenize = false, idsOnly = false, special = true, haveText = false;
  std::string text, directory, weights;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], v;
    auto value = [&](const char *longFlag, const char *shortFlag = nullptr) {
      return flagValue(argc, argv, i, longFlag, v) ||
             (shortFlag && flagValue(argc, argv, i, shortFlag, v));
    };
    if (arg == "--help" || arg == "-h") {
      printHelp(argv[0]);
      return 0;
    }
    if (arg == "--tokenize")
      tokenize = true;
    else if (arg == "--detokenize")
      detokenize = true;
    else if (arg == "--ids")
      idsOnly = true;
    else if (arg == "--no-special")
      special = false;
    else if (value("--prompt", "-p") || value("--file", "-f")) {
      if (haveText)
        fail("--tokenize and --detokenize take one text (-p or -f)");
      text = arg == "-f" || arg.rfind("--file", 0) == 0 ? readFileText(v, "text file") : v;
      haveText = true;
    } else if (value("--tokenizer"))
      directory = v;
    else if (value("--weights", "-m"))
      weights = v;
    else
      fail("unknown argument '" + arg + "' with --tokenize/--detokenize (see --tokenize --help)");
  }
  if (tokenize && detokenize)
    fail("give --tokenize or --detokenize, not both");
  if (!haveText)
    fail(std::string(tokenize ? "--tokenize" : "--detokenize") +
         " needs a text: -p TEXT or -f FILE");
  std::unique_ptr<Tokenizer> tokenizer = findTokenizer(directory, weights, compiledFrom, "");
  if (detokenize) {
    std::vector<int32_t> ids = parseTokenIds(text, "--detokenize");
    for (int32_t id : ids) {
      if (id < 0)
        fail("--detokenize: '" + std::to_string(id) + "' is not a token id");
      if (id >= tokenizer->size())
        fail("--detokenize: token id " + std::to_string(id) + " is past the tokenizer's " +
             std::to_string(tokenizer->size()) + " tokens");
    }
    std::string decoded = replaceInvalidUtf8(tokenizer->decode(ids));
    std::fwrite(decoded.data(), 1, decoded.size(), stdout);
    std::printf("\n");
    return 0;
  }
  std::vector<int32_t> ids = tokenizer->encode(text, "the text", special);
  std::string out;
  if (idsOnly) {
    out = "[";
    for (size_t i = 0; i < ids.size(); ++i)
      out += (i ? ", " : "") + std::to_string(ids[i]);
    out += "]\n";
  } else {
    for (int32_t id : ids) {
      char number[16];
      std::snprintf(number, sizeof(number), "%6d", id);
      out += std::string(number) + " -> '" + replaceInvalidUtf8(tokenizer->decode({id})) + "'\n";
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
