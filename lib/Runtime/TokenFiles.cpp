//===- TokenFiles.cpp - token-id lines and the inputs they fill -----------===//

#include "TokenFiles.h"

#include "CommandLine.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace xfmr::rt;

std::vector<Sequence> xfmr::rt::readSequences(const std::string &path,
                                              const std::string &displayName) {
  std::ifstream file;
  std::istream *in = &std::cin;
  if (path != "-") {
    file.open(path);
    if (!file)
      fail("cannot open input '" + path + "': " + std::strerror(errno));
    in = &file;
  }
  std::vector<Sequence> sequences;
  std::string line;
  for (int lineNumber = 1; std::getline(*in, line); ++lineNumber) {
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#')
      continue;
    Sequence sequence;
    sequence.line = lineNumber;
    int segment = 0;
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
      if (word == "|") {
        if (++segment > 1)
          fail(displayName + ":" + std::to_string(lineNumber) + ": more than one '|'");
        continue;
      }
      char *end = nullptr;
      errno = 0;
      long long id = std::strtoll(word.c_str(), &end, 10);
      if (*end || errno == ERANGE)
        fail(displayName + ":" + std::to_string(lineNumber) + ": '" + word + "' is not a token id");
      sequence.segments[segment].push_back(id);
    }
    sequences.push_back(std::move(sequence));
  }
  if (in->bad())
    fail("error reading input '" + displayName + "'");
  return sequences;
}

const InputRole *xfmr::rt::roleOf(const std::string &name) {
  static constexpr InputRole roles[] = {
      {"input_ids", 0, false, true},
      {"attention_mask", 0, true, false},
      {"token_type_ids", 0, false, false},
      {"decoder_input_ids", 1, false, true},
      {"decoder_attention_mask", 1, true, false},
  };
  for (const InputRole &role : roles)
    if (name == role.name)
      return &role;
  return nullptr;
}
