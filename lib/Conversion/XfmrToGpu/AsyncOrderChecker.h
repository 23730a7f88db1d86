//===- AsyncOrderChecker.h - async order of emulated kernels ----*- C++ -*-===//
//
// Emulated, asynchronous copies (cp.async) and warpgroup MMAs complete as
// they are issued, and a phase's threads run one after the other, so a
// kernel that overwrote a shared tile an MMA may still be reading, or let
// an MMA read a tile before the copies into it landed, would still compute
// the right result on the CPU. AsyncOrderChecker keeps, per emulated
// thread, the order a GPU would see - the groups of MMAs and of copies
// committed and waited for, the barriers passed, and per shared tile the
// last group of MMAs that read it, of copies that wrote it and the barrier
// count at its last plain store - and checks (cf.assert: the emulated
// kernel stops with the message) that
//   - an MMA reads a tile only where the copies into it were waited for
//     before the last barrier (every thread's, then, as all run the same
//     code) and a barrier passed since it was last stored to, and
//   - a tile is written (copied or stored) only where the MMAs that read it
//     were waited for before the last barrier: a warpgroup MMA runs on the
//     tensor cores of its four warps, each reading the shared tiles itself,
//     so one warp's wait says nothing of the others'; a warp's mma.sync
//     (with its ldmatrix) is a group waited for as it is issued, which
//     other warps may still be reading until the next barrier.
// Disabled (on a GPU), every call builds nothing.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOGPU_ASYNCORDERCHECKER_H
#define XFMR_LIB_CONVERSION_XFMRTOGPU_ASYNCORDERCHECKER_H

#include "ThreadBlockBuilder.h"

namespace xfmr::gpu {

class AsyncOrderChecker {
public:
  AsyncOrderChecker(kernels::KernelBuilder &kb, ThreadBlockBuilder &block, bool enabled)
      : kb(kb), block(block), enabled(enabled) {}

  /// Starts the bookkeeping of a block whose shared tiles are `arrays`,
  /// each `buffers` tiles along its first dimension (a tile is named by
  /// its array and, with buffers, the index along it); the block's
  /// barriers from here on count.
  void track(llvm::ArrayRef<mlir::Value> arrays, int64_t buffers = 1);

  /// A read of tile (`array`, `buffer`) by the MMAs of the group being
  /// issued, which `commitMmas` closes.
  void noteMmaRead(mlir::Value t, mlir::Value array, mlir::Value buffer = {});
  void commitMmas(mlir::Value t);
  /// Waits for the thread's groups of MMAs but the last `pending`.
  void waitForMmas(mlir::Value t, int64_t pending);

  /// A write of tile (`array`, `buffer`): an asynchronous copy of the
  /// group being issued, which `commitCopies` closes, or a plain store.
  void noteWrite(mlir::Value t, mlir::Value array, bool copy, mlir::Value buffer = {});
  void commitCopies(mlir::Value t);
  void waitForCopies(mlir::Value t, int64_t pending);

private:
  /// Per thread: the counters of Counter, and per tracked tile the last
  /// group of MMAs that read it and of copies that wrote it (-1: none) and
  /// the barriers passed before its last store (-1: none).
  enum Counter : int64_t {
    kMmaIssued,
    kMmaDone,
    kMmaDoneAtBarrier,
    kCopiesIssued,
    kCopiesDone,
    kCopiesDoneAtBarrier,
    kBarriers,
    kCounters
  };
  llvm::SmallVector<mlir::Value> counterAt(mlir::Value t, Counter counter);
  void countIssued(mlir::Value t, Counter issued);
  void countDone(mlir::Value t, Counter issued, Counter done, int64_t pending);
  /// Thread t's indices of the tracked tile (`array`, `buffer`), checked
  /// to be one.
  llvm::SmallVector<mlir::Value> tileAt(mlir::Value t, mlir::Value array, mlir::Value buffer);

  kernels::KernelBuilder &kb;
  ThreadBlockBuilder &block;
  bool enabled;
  int64_t buffers = 1;
  llvm::SmallVector<mlir::Value> trackedArrays;
  mlir::Value counters, lastMmaRead, lastCopy, lastStore;
};

} // namespace xfmr::gpu

#endif // XFMR_LIB_CONVERSION_XFMRTOGPU_ASYNCORDERCHECKER_H
