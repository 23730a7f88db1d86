//===- RunnerMain.cpp - main() of compiled model executables --------------===//
//
// Kept in its own library (libxfmr_main.a) so that programs embedding a model
// with their own main() link libxfmr_runtime.a without it. `xfmrc` compiles
// executables with the symbol prefix `xfmr_model`.
//
//===----------------------------------------------------------------------===//

#include "xfmr-rt/xfmr_runtime.h"

#include <cstdio>

extern "C" const char xfmr_model_manifest[];
extern "C" void xfmr_model_forward_packed(void **args);

int main(int argc, char **argv) {
  // Line-buffered: a failed check in the generated code (cf.assert) prints
  // its message with puts, then aborts, which flushes nothing.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  xfmr_tokenizer_enable_sentencepiece();
  xfmr_enable_server();
  return xfmr_runner_main(argc, argv, xfmr_model_manifest, xfmr_model_forward_packed);
}
