//===- GpuMmaGemmKernel.h - bf16/f16 GEMM on tensor cores -------*- C++ -*-===//
//
// The tensor-core GEMM kernel (GpuMmaGemmKernel.cpp says how it tiles and
// pipelines) and its operations that depend on the hardware,
// GemmTensorCoreOps: one implementation a file, beside the attention
// kernels' TensorCoreOps - mma.sync (GpuMmaSyncOps.cpp), warpgroup MMAs
// (GpuWarpgroupMmaOps.cpp) and the CPU's emulation of either
// (GpuEmulatedMmaOps.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMAGEMMKERNEL_H
#define XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMAGEMMKERNEL_H

#include "AsyncOrderChecker.h"
#include "GpuKernels.h"
#include "GpuMma.h"
#include "ThreadBlockBuilder.h"

#include <memory>

namespace xfmr::gpu {

class GemmTensorCoreOps;

class MmaGemmKernel {
public:
  MmaGemmKernel(kernels::KernelBuilder &kb, Emulation emulate, const GemmProblem &p,
                bool warpgroupMma);
  ~MmaGemmKernel();

  mlir::Value emit();

  /// K of a stage.
  static constexpr int64_t kDepth = 32;
  /// Shared buffers of each factor: copies run kStages - 1 stages ahead
  /// (kStages - 2 with warpgroup MMAs, which read a buffer a stage longer).
  static constexpr int64_t kStages = 4;
  static constexpr int64_t kPadding = 8;
  static constexpr int64_t kVector = MmaBuilder::kVector;
  static constexpr int64_t kWarpSize = MmaBuilder::kWarpSize;
  static constexpr int64_t kMmaM = MmaBuilder::kM, kMmaN = MmaBuilder::kN, kMmaK = MmaBuilder::kK;
  static constexpr int64_t kAccumulators = MmaBuilder::kAccumulators;
  /// Warps along each of M and N.
  static constexpr int64_t kWarps = 2;
  static constexpr int64_t kWarpgroupRows = MmaBuilder::kWarpgroupRows;

  /// One factor as a block stages it: rows of `cols` elements of its
  /// contiguous (last) dimension, the rows along K (`kRows`) or along M (A)
  /// or N (B).
  struct Factor {
    Factor(mlir::Value matrix, bool kRows, int64_t tile, bool coreMatrices);

    llvm::SmallVector<int64_t> sharedShape() const;
    /// Tile indices of element (row, col) of buffer `buffer`.
    llvm::SmallVector<mlir::Value> at(MmaBuilder &mma, mlir::Value buffer, mlir::Value row,
                                      mlir::Value col) const;
    /// ... of element (mn, k).
    llvm::SmallVector<mlir::Value> atMnK(MmaBuilder &mma, mlir::Value buffer, mlir::Value mn,
                                         mlir::Value k) const {
      return kRows ? at(mma, buffer, k, mn) : at(mma, buffer, mn, k);
    }
    /// A warpgroup MMA's operand of the 16 of K from k0 and the MN from mn0
    /// of buffer `buffer`: K-major (K along the columns) or MN-major.
    MmaBuilder::SharedOperand operand(kernels::KernelBuilder &kb, MmaBuilder &mma,
                                      mlir::Value tiles, mlir::Value buffer, int64_t mn0,
                                      int64_t k0) const;

    mlir::Value matrix;
    bool kRows, coreMatrices;
    int64_t rows, cols, outerExtent, innerExtent;
  };

  /// Thread t's place: the first row and column of its warp's part of the
  /// block tile (with warpgroup MMAs: of each half), its lane, and the
  /// lane's group g and index q in the group.
  struct Lane {
    mlir::Value warpRow, warpCol, lane, group, inGroup;
  };

  /// One stage of a block's products, as the hardware's operations
  /// (GemmTensorCoreOps) are given it.
  struct Stage {
    const Factor &lhs, &rhs;
    /// The shared tiles of A and B, and the buffer of them the stage is in.
    mlir::Value aTiles, bTiles, buffer;
    /// The thread's place.
    const Lane &lane;
    /// The block tile's rows (and columns) and a warp's MMA tiles along M
    /// and N: the thread's sums are its accumulators r of MMA tiles
    /// (mi, ni), in forEachAccumulator's order.
    int64_t tile, tilesM, tilesN;
    /// Row and column of the block tile of accumulator r of MMA tile mi
    /// (ni).
    llvm::function_ref<mlir::Value(int64_t mi, int64_t r)> accumulatorRow;
    llvm::function_ref<mlir::Value(int64_t ni, int64_t r)> accumulatorCol;
  };

  /// Calls body(mi, ni, r) for a thread's accumulators r of MMA tiles
  /// (mi, ni), in the order of its sums.
  static void forEachAccumulator(int64_t tilesM, int64_t tilesN,
                                 llvm::function_ref<void(int64_t, int64_t, int64_t)> body);

private:
  int64_t slots(const Factor &f) const { return f.rows * f.cols / kVector / threads; }
  Lane laneOf(mlir::Value t);
  /// Row and column of the block tile of accumulator r of MMA tile (mi, ni).
  mlir::Value accumulatorRow(const Lane &lane, int64_t mi, int64_t r);
  mlir::Value accumulatorCol(const Lane &lane, int64_t ni, int64_t r);
  /// The indices of thread t's accumulator r of MMA tile (mi, ni).
  llvm::SmallVector<mlir::Value> accumulatorAt(mlir::Value t, int64_t mi, int64_t ni, int64_t r);
  /// Thread t's accumulators, in forEachAccumulator's order.
  llvm::SmallVector<mlir::Value> loadSums(mlir::Value t);
  void storeSums(mlir::Value t, llvm::ArrayRef<mlir::Value> sums);

  void emitBlock(mlir::Value row0, mlir::Value col0, mlir::Value aTiles, mlir::Value bTiles);
  /// Whether a factor's rows are whole 16-byte vectors of the MMA's type.
  bool readsVectors(const Factor &f) const;
  void
  forEachVector(mlir::Value t, const Factor &f, mlir::Value mn0, mlir::Value k0,
                llvm::function_ref<void(mlir::Value, mlir::Value, mlir::Value, mlir::Value)> body);
  void copyVectors(mlir::Value t, const Factor &f, mlir::Value mn0, mlir::Value k0,
                   mlir::Value tiles, mlir::Value buffer, bool clamped);
  void copyElements(mlir::Value t, const Factor &f, mlir::Value mn0, mlir::Value k0,
                    mlir::Value tiles, mlir::Value buffer);

  kernels::KernelBuilder &kb;
  mlir::OpBuilder &b;
  mlir::Location loc;
  /// Products by warpgroup MMAs from tiles of core matrices (sm_90a).
  bool warpgroupMma;
  /// The block tile's rows (and columns), a warp's rows and columns (with
  /// warpgroup MMAs: its columns), its MMA tiles along M and N, the rows
  /// between its MMA tiles along M, the block's threads, and the stages
  /// copies run ahead.
  int64_t tile, warpRows, tilesM, tilesN, rowTileStride, threads, lookahead;
  ThreadBlockBuilder block;
  const GemmProblem &p;
  MmaBuilder mma;
  Factor lhs, rhs;
  AsyncOrderChecker asyncOrder;
  std::unique_ptr<GemmTensorCoreOps> tensorCores;
  /// The block's private array of accumulators, [tilesM, tilesN,
  /// kAccumulators] a thread.
  mlir::Value accumulators;
};

/// The operations of MmaGemmKernel that depend on the hardware: a stage's
/// products, the asynchronous copies that stage the factors and their
/// waits, and the shared tiles' element type. The defaults are those of a
/// GPU of either generation.
class GemmTensorCoreOps {
public:
  GemmTensorCoreOps(kernels::KernelBuilder &kb, MmaBuilder &mma) : kb(kb), mma(mma) {}
  virtual ~GemmTensorCoreOps() = default;

  /// The element type of the shared tiles: the MMA's on a GPU, as its
  /// asynchronous copies require.
  virtual mlir::Type tileElementType() { return mma.narrowType(); }
  /// `narrowValue` (a scalar or vector of the MMA's type) as tile elements.
  virtual mlir::Value asTileElements(mlir::Value narrowValue) { return narrowValue; }
  /// Copies the 8 elements of `matrix` at `source` into `tiles` at
  /// `target`, zeros unless `inside` (where given) holds.
  virtual void copyVector(mlir::Value tiles, llvm::ArrayRef<mlir::Value> target, mlir::Value matrix,
                          llvm::ArrayRef<mlir::Value> source, mlir::Value inside);
  /// Ends thread t's group of copies of a stage.
  virtual void commitCopies(mlir::Value t) { mma.commitCopies(); }
  /// Waits for thread t's copies but the last `pending` groups.
  virtual void waitForCopies(mlir::Value t, int64_t pending) { mma.waitForCopies(pending); }
  /// After a barrier, orders the block's writes to shared memory before
  /// the MMAs that read it: needed by warpgroup MMAs (the async proxy).
  virtual void fenceShared() {}
  /// A stage's products added to thread t's `sums`; `copyNext` builds the
  /// copies of a later stage, before the MMAs or while they run. The buffer
  /// of the stage before is free after the next barrier.
  virtual llvm::SmallVector<mlir::Value> multiplyStage(mlir::Value t,
                                                       const MmaGemmKernel::Stage &stage,
                                                       llvm::ArrayRef<mlir::Value> sums,
                                                       llvm::function_ref<void()> copyNext) = 0;
  /// After the last stage: waits for the MMAs still in flight, if any, in
  /// a phase of `block`, whose thread t's sums `loadSums` and `storeSums`
  /// read and write.
  virtual void
  waitForLastStage(ThreadBlockBuilder &block,
                   llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value t)> loadSums,
                   llvm::function_ref<void(mlir::Value t, llvm::ArrayRef<mlir::Value>)> storeSums) {
  }

protected:
  static constexpr int64_t kAccumulators = MmaGemmKernel::kAccumulators;

  kernels::KernelBuilder &kb;
  MmaBuilder &mma;
};

std::unique_ptr<GemmTensorCoreOps> createMmaSyncGemmOps(kernels::KernelBuilder &kb,
                                                        MmaBuilder &mma);
std::unique_ptr<GemmTensorCoreOps> createWarpgroupGemmOps(kernels::KernelBuilder &kb,
                                                          MmaBuilder &mma);
/// The emulation of mma.sync or, with `warpgroupMma`, of warpgroup MMAs,
/// reporting the copies and MMAs to `asyncOrder`.
std::unique_ptr<GemmTensorCoreOps> createEmulatedGemmOps(kernels::KernelBuilder &kb,
                                                         MmaBuilder &mma,
                                                         AsyncOrderChecker &asyncOrder,
                                                         bool warpgroupMma);

} // namespace xfmr::gpu

#endif // XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMAGEMMKERNEL_H
