//===- GpuMma.h - tensor-core products of bf16/f16 factors ------*- C++ -*-===//
//
// The warp-wide `mma.sync.m16n8k16` of sm_80 and later: a 16 x 16 bf16 or
// f16 A times a 16 x 8 B, accumulated into 16 x 8 f32. Its operands are
// 32-bit words holding two consecutive K elements (the lower K in bits
// 0-15), and each lane holds fixed parts of A, B and the accumulators (PTX
// ISA, mma.m16n8k16 with .bf16/.f16 operands): lane l has group g = l / 4
// and q = l % 4; A registers 0-3 hold rows g, g+8, g, g+8 at K words q, q,
// q+4, q+4; B registers 0-1 hold column g at K words q, q+4; accumulators
// 0-3 are (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1).
//
// The accumulators of two 16 x 8 tiles side by side are, rounded and
// packed in pairs, the A registers of their 16 x 16 block: products of
// products need no trip through shared memory.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMA_H
#define XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMA_H

#include "../Kernels/KernelBuilder.h"

namespace xfmr::gpu {

class MmaBuilder {
public:
  static constexpr int64_t kM = 16, kN = 8, kK = 16;
  static constexpr int64_t kWords = kK / 2;
  static constexpr int64_t kAccumulators = 4;
  static constexpr int64_t kWarpSize = 32;
  /// The rows and threads of a warpgroup (4 warps) MMA.
  static constexpr int64_t kWarpgroupRows = 64, kWarpgroupThreads = 4 * kWarpSize;
  /// Elements of a 16-byte vector.
  static constexpr int64_t kVector = 8;

  /// `narrow`: bf16 or f16. `emulated`: the kernel runs on the CPU, where
  /// only matrixDescriptor, describedTile and describedElement of the warpgroup MMAs' members
  /// apply.
  MmaBuilder(kernels::KernelBuilder &kb, mlir::Type narrow, bool emulated = false);

  mlir::Type narrowType() const { return narrow; }

  /// A lane's group g and index q in the group.
  std::pair<mlir::Value, mlir::Value> laneCoordinates(mlir::Value lane);
  /// Row and column, in its 16 x 8 tile, of accumulator r of lane (g, q).
  mlir::Value accumulatorRow(mlir::Value group, int64_t r);
  mlir::Value accumulatorCol(mlir::Value inGroup, int64_t r);

  /// The 16 bits of a narrow value.
  mlir::Value bits(mlir::Value narrowValue);
  /// The word holding `lowBits` in bits 0-15 and `highBits` in bits 16-31.
  mlir::Value pack(mlir::Value lowBits, mlir::Value highBits);
  /// The word of f32 `low` and `high` rounded to narrow (low in bits
  /// 0-15), in one conversion of the pair (cvt.rn.bf16x2.f32 or .f16x2 on
  /// a GPU).
  mlir::Value packRounded(mlir::Value low, mlir::Value high);
  /// The two elements of a word, widened to f32.
  std::pair<mlir::Value, mlir::Value> unpack(mlir::Value word);

  /// `acc` (4 accumulators) + A B, A as its 4 words and B as its 2.
  llvm::SmallVector<mlir::Value> multiply(llvm::ArrayRef<mlir::Value> a,
                                          llvm::ArrayRef<mlir::Value> b,
                                          llvm::ArrayRef<mlir::Value> acc);

  /// The words of `count` 8 x 8 matrices of 16-bit elements in the shared
  /// array `tile` (ldmatrix, transposed when `transposed`), the lane giving
  /// the address `indices` of its row (lane l: row l % 8 of matrix l / 8).
  /// Lane l receives row l / 4, elements 2 (l % 4) and + 1, of each
  /// (transposed) matrix.
  llvm::SmallVector<mlir::Value> loadMatrices(mlir::Value tile, mlir::ValueRange indices,
                                              int64_t count, bool transposed);

  /// Whether elements of `buffer`, of unit stride along `contiguousDim`, may
  /// be read 16 bytes at a time at indices whose `contiguousDim` one is a
  /// multiple of 8: at run time, its address, offset and other strides are
  /// multiples of 16 bytes.
  mlir::Value vectorsAligned(mlir::Value buffer, int64_t contiguousDim);

  /// Copies 8 elements (16 bytes) of `source` at `sourceIndices` into the
  /// shared `tile` at `tileIndices` without passing through registers
  /// (cp.async.cg); only `sourceElements` of them are read where not null,
  /// the rest zero-filled. The thread's copies complete by groups:
  /// commitCopies closes the group of those issued since the last one,
  /// waitForCopies(n) waits until at most n of its groups are in flight.
  void copyAsync(mlir::Value tile, mlir::ValueRange tileIndices, mlir::Value source,
                 mlir::ValueRange sourceIndices, mlir::Value sourceElements);
  void commitCopies();
  void waitForCopies(int64_t pending);
  /// Orders the thread's earlier writes to shared memory (stores and
  /// completed async copies) before the block's later warpgroup MMAs, which
  /// read shared memory through the async proxy (fence.proxy.async).
  void fenceSharedForWarpgroupMma();

  /// Shared tiles that warpgroup MMAs read are 8 x 8 core matrices of
  /// 16-bit elements (8 rows of 16 contiguous bytes, no swizzle): element
  /// (row, col) of a tile of `cols` columns at [row / 8][col / 8][row % 8]
  /// [col % 8], a group of 8 rows cols * 16 bytes long.
  static constexpr int64_t kCoreMatrixBytes = 128;
  /// The indices of element (row, col) in such a tile.
  llvm::SmallVector<mlir::Value> coreMatrixIndices(mlir::Value row, mlir::Value col);
  /// Row and first column of 16-byte vector `i` of such a tile with
  /// `chunks` vectors a row, in core-matrix order: 8 consecutive vectors
  /// fill one core matrix's 128 bytes (copies free of bank conflicts).
  std::pair<mlir::Value, mlir::Value> coreMatrixVector(mlir::Value i, int64_t chunks);
  /// The byte offset of element (row, col), multiples of 8, in such a tile.
  static int64_t coreMatrixOffset(int64_t row, int64_t col, int64_t cols) {
    return (row / kVector * cols + col) / kVector * kCoreMatrixBytes;
  }

  /// sm_90a's warpgroup MMA (wgmma.mma_async.m64nNk16, PTX ISA 9.7.15): the
  /// 4 warps of a warpgroup multiply 64 rows of A, warp w its rows 16w to
  /// 16w + 15 as the A words of mma.sync (`multiply`), by a K x N B in
  /// shared memory, into N / 2 f32 accumulators a thread: accumulator r of
  /// 8-column tile n is the thread's accumulator 4n + r, laid out as those
  /// of mma.sync's 16 x 8 tiles. A may be in shared memory too.
  ///
  /// An operand in shared memory: its matrix descriptor, and whether it is
  /// MN-major (its rows along M or N contiguous: the MMA's transpose flag)
  /// or K-major.
  struct SharedOperand {
    mlir::Value descriptor;
    bool mnMajor;
  };
  /// The operand in a tile of core matrices with `cols` columns, from
  /// `offsetBytes` past its element `start` (none: the first), K along the
  /// tile's rows where `kAlongRows` (MN-major), else along its columns.
  /// Emulated, the descriptor's address is relative to the tile's first
  /// element.
  SharedOperand matrixDescriptor(mlir::Value tile, mlir::ValueRange start, int64_t offsetBytes,
                                 int64_t cols, bool kAlongRows);
  /// Emulated: `operand` as the tensor cores would find it in `tile` (the
  /// tile flattened; its descriptor's start address, leading and stride
  /// byte offsets decoded), and its element (mn, k) (mn < N or 64, k < 16)
  /// at the address these give by the PTX ISA's canonical layouts without
  /// swizzle - not where the kernel meant to put it.
  struct DescribedTile {
    mlir::Value flat, start, leading, stride;
    bool mnMajor;
  };
  DescribedTile describedTile(mlir::Value tile, SharedOperand operand);
  mlir::Value describedElement(const DescribedTile &tile, mlir::Value mn, mlir::Value k);
  /// The registers `values` (A words and accumulators the next warpgroup
  /// MMAs read) after wgmma.fence: their writes come before the MMAs'
  /// reads, and the MMAs take the values it returns.
  llvm::SmallVector<mlir::Value> fenceForWarpgroupMma(llvm::ArrayRef<mlir::Value> values);
  /// Issues `acc` + A B (A B alone where `acc` is empty) for N = 2 x (the
  /// result's size). The results may be read only after
  /// waitForWarpgroupMma.
  llvm::SmallVector<mlir::Value> warpgroupMultiply(llvm::ArrayRef<mlir::Value> a, SharedOperand b,
                                                   llvm::ArrayRef<mlir::Value> acc, int64_t n);
  /// ... A in shared memory too.
  llvm::SmallVector<mlir::Value> warpgroupMultiply(SharedOperand a, SharedOperand b,
                                                   llvm::ArrayRef<mlir::Value> acc, int64_t n);
  /// Commits the warpgroup MMAs issued so far as a group (before any branch:
  /// ptxas otherwise adds an MMA of its own to close them).
  void commitWarpgroupMma();
  /// Waits until at most `pending` groups of the committed warpgroup MMAs
  /// are in flight: the accumulators `acc` (of earlier groups), readable.
  llvm::SmallVector<mlir::Value> waitForWarpgroupMma(llvm::ArrayRef<mlir::Value> acc,
                                                     int64_t pending = 0);
  /// Waits until at most `pending` groups of them are in flight (their
  /// accumulators stay unreadable; only further MMAs may take them).
  void waitForWarpgroupMma(int64_t pending);

private:
  mlir::Value i32(int64_t value);
  /// An MMA operand register from a word: bf16 pairs are i32, f16 pairs
  /// vector<2xf16>.
  mlir::Value operandRegister(mlir::Value word);
  /// A PTX instruction without operands, as inline assembly with side
  /// effects: the NVVM ops for the async-copy group instructions declare no
  /// memory effects, which the buffer deallocation pipeline (run after the
  /// kernels are built) rejects.
  void ptxInstruction(llvm::StringRef text);
  /// Inline PTX with side effects whose results are those of
  /// `constraints`' outputs (one value each), in order.
  llvm::SmallVector<mlir::Value> ptxWithOperands(llvm::StringRef text, llvm::StringRef constraints,
                                                 mlir::TypeRange results,
                                                 mlir::ValueRange operands);
  /// `text` as inline PTX whose operands are `values`, each tied to a
  /// result: the values it returns, which no code may read before it nor
  /// write after it runs (register fences around warpgroup MMAs).
  llvm::SmallVector<mlir::Value> ptxThrough(llvm::StringRef text,
                                            llvm::ArrayRef<mlir::Value> values);
  /// wgmma.mma_async with A `a`: 4 words, or (with `transposeA`) a
  /// descriptor.
  llvm::SmallVector<mlir::Value> warpgroupMma(mlir::ValueRange a, std::optional<bool> transposeA,
                                              SharedOperand b, llvm::ArrayRef<mlir::Value> acc,
                                              int64_t n);
  /// The shared-window address of element `indices` (none: the first) of
  /// the shared `tile`; emulated, its byte offset in the tile.
  mlir::Value sharedAddress(mlir::Value tile, mlir::ValueRange indices);

  kernels::KernelBuilder &kb;
  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::Type narrow;
  bool emulated;
};

} // namespace xfmr::gpu

#endif // XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMA_H
