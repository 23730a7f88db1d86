//===- Manifest.h - reading a compiled entry's manifest ---------*- C++ -*-===//

#ifndef XFMR_LIB_RUNTIME_MANIFEST_H
#define XFMR_LIB_RUNTIME_MANIFEST_H

#include "xfmr-rt/manifest.h"

namespace xfmr::rt {

/// readManifest, or a Failure "corrupt model manifest: <what>".
Manifest parseManifest(const char *text);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_MANIFEST_H
