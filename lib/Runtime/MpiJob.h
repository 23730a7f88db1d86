//===- MpiJob.h - joining an MPI job from the trainer's main ----*- C++ -*-===//

#ifndef XFMR_LIB_RUNTIME_MPIJOB_H
#define XFMR_LIB_RUNTIME_MPIJOB_H

#include "Collectives.h"

#include <memory>

namespace xfmr::rt {

/// A process started by mpirun joins its job (MPI_Init); one started
/// otherwise gets null and runs alone, without initialising MPI.
std::unique_ptr<Collectives> joinMpiJob(int *argc, char ***argv);

/// Ends the job's part in this process: MPI_Finalize after success; after
/// a failure, MPI_Abort, so that the other processes stop rather than wait
/// for this one in a reduction.
void leaveMpiJob(std::unique_ptr<Collectives> job, int status);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_MPIJOB_H
