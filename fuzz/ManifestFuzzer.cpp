//===- ManifestFuzzer.cpp - the manifest of a compiled entry --------------===//
//
// The JSON manifest the runtime reads beside every compiled entry (from an
// object file a user may have edited or corrupted).
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "../lib/Runtime/CommandLine.h"
#include "../lib/Runtime/Manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(xfmr::fuzz::asText(data, size));
  try {
    xfmr::rt::Manifest manifest = xfmr::rt::parseManifest(text.c_str());
    for (const xfmr::rt::ArgSpec &arg : manifest.args)
      manifest.find(arg.name, arg.kind);
  } catch (const xfmr::rt::Failure &) {
  }
  return 0;
}
