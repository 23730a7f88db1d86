//===- TrainMain.cpp - main() of compiled training executables ------------===//
//
// `xfmrc --train` links this (libxfmr_train_main.a) with a model object that
// defines the training step and evaluation entries under the symbol prefix
// `xfmr_model`.
//
//===----------------------------------------------------------------------===//

#include "xfmr-rt/xfmr_runtime.h"

#include <cstdio>

extern "C" const char xfmr_model_train_step_manifest[];
extern "C" void xfmr_model_train_step_packed(void **args);
extern "C" const char xfmr_model_evaluate_manifest[];
extern "C" void xfmr_model_evaluate_packed(void **args);

int main(int argc, char **argv) {
  // Line-buffered: a failed check in the generated code (cf.assert) prints
  // its message with puts, then aborts, which flushes nothing.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return xfmr_trainer_main(argc, argv, xfmr_model_train_step_manifest,
                           xfmr_model_train_step_packed, xfmr_model_evaluate_manifest,
                           xfmr_model_evaluate_packed);
}
