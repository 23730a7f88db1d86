//===- ManifestFuzzer.cpp - the manifest of a compiled entry --------------===//
//
// The JSON manifest the runtime reads beside every compiled entry (from an
// object file a user may have edited or corrupted). What reads must write
// back to a manifest that reads again as the same.
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
    std::string written = xfmr::rt::writeManifest(manifest);
    std::string error;
    std::optional<xfmr::rt::Manifest> reread = xfmr::rt::readManifest(written, error);
    if (!reread || xfmr::rt::writeManifest(*reread) != written) {
      std::fprintf(stderr, "manifest does not round-trip: %s\n%s\n", error.c_str(),
                   written.c_str());
      std::abort();
    }
  } catch (const xfmr::rt::Failure &) {
  }
  return 0;
}
