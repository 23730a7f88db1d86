//===- TrainMain.cpp - main() of compiled training executables ------------===//
//
// `xfmrc --train` links this (libxfmr_train_main.a) with a model object that
// defines the training step and evaluation entries under the symbol prefix
// `xfmr_model`. Started by mpirun, the process joins the MPI job and trains
// on its share of every batch.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"
#include "MpiJob.h"
#include "Trainer.h"

#include <cstdio>

using namespace xfmr::rt;

extern "C" const char xfmr_model_train_step_manifest[];
extern "C" void xfmr_model_train_step_packed(void **args);
extern "C" const char xfmr_model_evaluate_manifest[];
extern "C" void xfmr_model_evaluate_packed(void **args);

int main(int argc, char **argv) {
  // Line-buffered: a failed check in the generated code (cf.assert) prints
  // its message with puts, then aborts, which flushes nothing.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char *argv0 = argc > 0 ? argv[0] : "train";
  std::unique_ptr<Collectives> job;
  int status = runCommandLine(argv0, [&] {
    job = joinMpiJob(&argc, &argv);
    return 0;
  });
  if (status == 0)
    status = runTrainer(argc, argv, xfmr_model_train_step_manifest, xfmr_model_train_step_packed,
                        xfmr_model_evaluate_manifest, xfmr_model_evaluate_packed, job.get());
  leaveMpiJob(std::move(job), status);
  return status;
}
