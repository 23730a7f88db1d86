//===- SanitizerOptions.cpp - AddressSanitizer defaults for the tools -----===//
//
// Linked into xfmrc, xfmr-opt and the fuzz targets. In sanitized builds
// (XFMR_SANITIZE, XFMR_FUZZ) only xfmr is instrumented, not Debian's
// libLLVM/libMLIR: LLVM's BumpPtrAllocator, inlined into instrumented code,
// poisons the free part of a slab that uninstrumented code then allocates
// from without unpoisoning, which AddressSanitizer would report as a use
// after poison. Manual poisoning is therefore off; every other check stays.
//
//===----------------------------------------------------------------------===//

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
extern "C" const char *__asan_default_options() { return "allow_user_poisoning=0"; }
#endif
#endif
