//===- Trainer.h - the trainer as the training main runs it -----*- C++ -*-===//

#ifndef XFMR_LIB_RUNTIME_TRAINER_H
#define XFMR_LIB_RUNTIME_TRAINER_H

#include "Collectives.h"

namespace xfmr::rt {

/// xfmr_trainer_main as one process of `job` (null: alone): each process
/// trains on its share of every batch, and rank 0 logs and saves.
int runTrainer(int argc, char **argv, const char *trainStepManifest, void (*trainStep)(void **),
               const char *evaluateManifest, void (*evaluate)(void **), Collectives *job);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_TRAINER_H
