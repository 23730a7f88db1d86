//===- TokensFuzzer.cpp - token files -------------------------------------===//
//
// The runner's and trainer's token files: id lines, '|' segments, comments.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "../lib/Runtime/CommandLine.h"
#include "../lib/Runtime/TokenFiles.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = xfmr::fuzz::writeScratchFile("tokens.txt", xfmr::fuzz::asText(data, size));
  try {
    xfmr::rt::readSequences(path, "tokens.txt");
  } catch (const xfmr::rt::Failure &) {
  }
  return 0;
}
