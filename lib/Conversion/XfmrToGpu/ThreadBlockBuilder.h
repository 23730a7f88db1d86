//===- ThreadBlockBuilder.h - GPU kernels that also run on a CPU -*- C++ -*-===//
//
// The GPU kernels of convert-xfmr-to-gpu-kernels are written once, as the
// code of one thread (a function of its thread id) split into phases that
// end at a barrier. ThreadBlockBuilder places that code either inside a
// gpu.launch (threads are GPU threads, phases end with gpu.barrier) or, when
// emulating, inside loops on the CPU: a loop over blocks and, per phase, a
// loop over the block's threads, with per-thread state in arrays indexed by
// thread. A phase's threads then run one after the other, which is a valid
// schedule of the GPU code as long as threads communicate only through
// shared memory across barriers - what the kernels do, and what running the
// threads in both orders (Emulation) checks.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOGPU_THREADBLOCKBUILDER_H
#define XFMR_LIB_CONVERSION_XFMRTOGPU_THREADBLOCKBUILDER_H

#include "../Kernels/KernelBuilder.h"

#include <array>
#include <functional>

namespace xfmr::gpu {

/// Where the threads of a kernel run.
enum class Emulation {
  /// On a GPU, inside a gpu.launch.
  None,
  /// On the CPU, each phase's threads first to last,
  InOrder,
  /// or last to first. A thread that reads what another thread of its block
  /// writes in the same phase (a missing barrier) sees the write in one of
  /// the two orders and not in the other, so the results differ.
  Reversed,
};

class ThreadBlockBuilder {
public:
  ThreadBlockBuilder(kernels::KernelBuilder &kb, Emulation emulate, int64_t threads)
      : kb(kb), b(kb.builder()), loc(kb.location()), emulate(emulate), threads(threads) {}

  int64_t threadCount() const { return threads; }

  /// Static shared memory a block may have (more is dynamic), and the
  /// alignment of its arrays.
  static constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;
  static constexpr int64_t kSharedAlignment = 16;

  /// Builds `body(blockIds, shared)` for each block of `grid` (x, y, z);
  /// `shared` holds one shared-memory array per shape of `sharedShapes`,
  /// of the matching type of `sharedTypes` (f32 where that is shorter):
  /// static shared memory up to kMaxStaticSharedBytes, else dynamic.
  void forEachBlock(
      std::array<int64_t, 3> grid, llvm::ArrayRef<llvm::SmallVector<int64_t>> sharedShapes,
      llvm::function_ref<void(std::array<mlir::Value, 3>, llvm::ArrayRef<mlir::Value>)> body,
      llvm::ArrayRef<mlir::Type> sharedTypes = {});

  /// Code run by every thread of the block, followed by a barrier unless
  /// `barrier` is false (the last phase, or one whose writes no other
  /// thread reads).
  void phase(llvm::function_ref<void(mlir::Value thread)> body, bool barrier = true);
  /// Emulated, code that each thread runs at each barrier, after its phase
  /// (bookkeeping of the emulation's checks); none on a GPU.
  void setBarrierHook(std::function<void(mlir::Value thread)> hook) {
    barrierHook = std::move(hook);
  }

  /// Combines the `threadCount()` entries of the shared arrays `values`
  /// (entry i of each array is thread i's) into entry 0 by a tree of
  /// log2(threads) phases; `combine` takes the values of two entries and
  /// returns those of their combination. The thread count is a power of 2.
  void reduce(llvm::ArrayRef<mlir::Value> values,
              llvm::function_ref<llvm::SmallVector<mlir::Value>(llvm::ArrayRef<mlir::Value>,
                                                                llvm::ArrayRef<mlir::Value>)>
                  combine);

  /// Combines each entry of the private arrays `arrays` of `size` entries
  /// over the threads of a warp whose lane numbers differ only in the bits
  /// of `laneBits`, leaving the result in every one of them: warp shuffles
  /// on a GPU (the warp's threads must all get here), a phase per bit when
  /// emulated.
  void allReduceLanes(llvm::ArrayRef<mlir::Value> arrays, int64_t size, int64_t laneBits,
                      llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)> combine);

  /// `value` (an index the same in every lane of a warp) as lane 0's, by a
  /// shuffle on a GPU - so that ptxas knows it uniform and keeps what is
  /// computed from it in uniform registers (as CUTLASS's
  /// canonical_warp_group_idx) - unchanged when emulated.
  mlir::Value warpUniform(mlir::Value value);

  /// An array of `shape` (f32 unless `elementType` says otherwise) that
  /// each thread has its own copy of. Emulated, every thread's copy is
  /// readable by the others (`at` with their thread id); a GPU thread reads
  /// only its own.
  mlir::Value privateArray(llvm::ArrayRef<int64_t> shape, mlir::Type elementType = {});

  /// Indices of a private array for `thread`.
  llvm::SmallVector<mlir::Value> at(mlir::Value thread, mlir::ValueRange indices);

private:
  kernels::KernelBuilder &kb;
  mlir::OpBuilder &b;
  mlir::Location loc;
  Emulation emulate;
  int64_t threads;
  mlir::Value threadId;
  std::function<void(mlir::Value)> barrierHook;
  /// The entry block of the kernel being built (on a GPU), and its last
  /// private array there (they are kept in the order asked for).
  mlir::Block *kernelEntry = nullptr;
  mlir::Operation *lastPrivateArray = nullptr;
};

} // namespace xfmr::gpu

#endif // XFMR_LIB_CONVERSION_XFMRTOGPU_THREADBLOCKBUILDER_H
