//===- Collectives.h - the processes of a data-parallel job -----*- C++ -*-===//
//
// A training job runs as one process, or under mpirun as several that each
// take a share of every batch and combine their gradients. The trainer and
// the compiled step's xfmr_all_reduce_f32 see the job through this class;
// alone, every operation is the identity, and only the MPI backend
// (MpiJob.cpp, in the trainer's main) needs an MPI library.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_COLLECTIVES_H
#define XFMR_LIB_RUNTIME_COLLECTIVES_H

#include <cstddef>
#include <cstdint>

namespace xfmr::rt {

class Collectives {
public:
  virtual ~Collectives() = default;
  /// This process's number in [0, size()); 0 writes logs and files.
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  /// Processes of the job on this machine (they share its cores).
  virtual int localSize() const { return 1; }
  /// In place, on every process: the sum over the processes.
  virtual void sum(float *, int64_t) {}
  virtual void sum(double *, int64_t) {}
  /// sum() split in two: it may run until finishSum(data) returns, and
  /// reductions start in the same order on every process.
  virtual void startSum(float *data, int64_t count) { sum(data, count); }
  virtual void finishSum(float *) {}
  /// Every process receives rank 0's `bytes` at `data`.
  virtual void broadcast(void *, size_t) {}
};

/// The job that the compiled step's gradients are reduced over: one
/// process unless the trainer's main joined an MPI job.
Collectives &currentJob();
void setCurrentJob(Collectives *job);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_COLLECTIVES_H
