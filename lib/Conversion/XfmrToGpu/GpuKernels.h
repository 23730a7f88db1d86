//===- GpuKernels.h - the GPU kernels of the fused xfmr ops -----*- C++ -*-===//
//
// Each builds a gpu.launch (or, when `emulate` says so, the same per-thread
// code as CPU loops; see ThreadBlockBuilder.h). Operands and results are those of
// the CPU kernels of the same name (XfmrToCpuKernels/Kernels.h).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOGPU_GPUKERNELS_H
#define XFMR_LIB_CONVERSION_XFMRTOGPU_GPUKERNELS_H

#include "ThreadBlockBuilder.h"

#include "../Kernels/KernelSet.h"
#include "xfmr/Conversion/KernelLimits.h"

namespace xfmr::gpu {

/// FlashAttention-style: bf16/f16 q, k and v on tensor cores when
/// fitsMmaAttention says so (emitMmaAttention), else a block per (query
/// tile, head, batch), a thread per query row (widening bf16/f16 loads),
/// key/value tiles through shared memory.
void emitAttention(kernels::KernelBuilder &kb, const kernels::AttentionOperands &operands,
                   Emulation emulate, bool warpgroupMma);

/// Whether q, k and v are bf16 or f16 and the tensor-core attention's
/// shared memory holds tiles of their head dim (forward and backward: the
/// backward's tiles are no larger; registers bound both).
bool fitsMmaAttention(const kernels::AttentionOperands &operands);

/// FlashAttention-2 forward on tensor cores: a block per (128 query rows,
/// head, batch), 4 warps of 32 rows up to head dim 128 (8 of 16 above),
/// both products by mma.sync; with `warpgroupMma` (sm_90a), two
/// warpgroups of 64 rows, both products by wgmma.mma_async.
void emitMmaAttention(kernels::KernelBuilder &kb, const kernels::AttentionOperands &operands,
                      Emulation emulate, bool warpgroupMma);

/// FlashAttention-2 backward as two kernels: on tensor cores when
/// fitsMmaAttention says so (emitMmaAttentionBackward), else dK and
/// dV with a thread per key row streaming query tiles, then dQ with a thread
/// per query row streaming key tiles; the probabilities recomputed from the
/// lse.
void emitAttentionBackward(kernels::KernelBuilder &kb, const kernels::AttentionOperands &operands,
                           Emulation emulate, bool warpgroupMma);

/// FlashAttention-2 backward on tensor cores: dQ (and D = rowsum(dO * O))
/// with a block per 64 query rows, then dK and dV with a block per 64 key
/// rows, 4 warps of 16 rows, every product by mma.sync; with
/// `warpgroupMma` (sm_90a), the 4 warps are a warpgroup, every product a
/// wgmma.mma_async.
void emitMmaAttentionBackward(kernels::KernelBuilder &kb,
                              const kernels::AttentionOperands &operands, Emulation emulate,
                              bool warpgroupMma);

/// Whether (i, j) lies inside a rows x cols matrix.
mlir::Value insideMatrix(kernels::KernelBuilder &kb, mlir::Value i, mlir::Value j, int64_t rows,
                         int64_t cols);

/// C = activation(A B + bias) + residual as a GEMM kernel sees it: A
/// [m, k] (or [k, m] transposed), B [k, n] (or [n, k]) as buffers, and the
/// result buffer C of `resultType` (f32, bf16 or f16).
struct GemmProblem {
  GemmProblem(kernels::KernelBuilder &kb, mlir::Value a, bool transposeA, mlir::Value b,
              bool transposeB, mlir::Value bias, mlir::Value residual, Activation activation,
              mlir::Type resultType);

  /// C[row][col] = activation(sum + bias[col]) + residual[row][col], for
  /// (row, col) inside C, computed in f32 and rounded to C's type.
  void store(kernels::KernelBuilder &kb, mlir::Value sum, mlir::Value row, mlir::Value col) const;
  /// The same for C[row][col] and C[row][col + 1], col even, as one store
  /// of both where C has an even number of columns (then both lie inside C
  /// or neither does, and the pair is aligned).
  void storePair(kernels::KernelBuilder &kb, mlir::Value sum, mlir::Value nextSum, mlir::Value row,
                 mlir::Value col) const;

  /// The side of the square tiles of C a block computes: 128 where C has
  /// at least as many such tiles as an H100 has SMs, else 64 (fewer 128 x
  /// 128 tiles would leave SMs idle that 64 x 64 ones occupy).
  int64_t tile() const;
  static constexpr int64_t kLargeTileMinBlocks = 132;

  mlir::Value lhs, rhs, bias, residual, out;
  bool transposeA, transposeB;
  Activation activation;
  int64_t m, n, k;
};

/// Whether `buffer`, of unit stride along `contiguousDim`, may be read
/// `elements` at a time (one vector load) at indices whose `contiguousDim`
/// one is a multiple of `elements`: at run time, its address is a multiple
/// of the vector's bytes and its offset and other strides of `elements`.
mlir::Value vectorsAligned(kernels::KernelBuilder &kb, mlir::Value buffer, int64_t elements,
                           int64_t contiguousDim);

/// matrix[i][j] of a [rows, cols] matrix, `outside` where (i, j) is not in
/// it (the load itself is clamped to the matrix).
mlir::Value loadInside(kernels::KernelBuilder &kb, mlir::Value matrix, mlir::Value i, mlir::Value j,
                       int64_t rows, int64_t cols, mlir::Value outside);

/// f32 A and B: a block of 256 threads per 128 x 128 tile of C (8 x 8
/// outputs a thread) where there are enough such tiles, else per 64 x 64 (4
/// x 4); A and B streamed through double-buffered shared memory, a stage
/// ahead in registers, read 16 bytes at a time; the epilogue applied in
/// registers before the one store. Returns C as a tensor.
mlir::Value emitGemm(kernels::KernelBuilder &kb, const GemmProblem &problem, Emulation emulate);

/// Rows of A up to which a product takes emitSkinnyGemm (decoding: a
/// token per sequence of a small batch).
constexpr int64_t kSkinnyGemmMaxRows = xfmr::kSkinnyProductRows;

/// A of at most kSkinnyGemmMaxRows rows (not transposed), any float type;
/// B f32, bf16, f16 or, given `dequantize`, its int8 values (the problem's
/// B) with its scales. Bandwidth-bound: each element of B read once, 16
/// bytes at a time where aligned, widened and scaled in registers; a warp
/// per column for B [N, K], a block of row slices per few columns for B
/// [K, N].
mlir::Value emitSkinnyGemm(kernels::KernelBuilder &kb, const GemmProblem &problem,
                           DequantizeOp dequantize, Emulation emulate);

/// bf16 or f16 A and B on tensor cores (mma.sync, f32 accumulators): a
/// block per 128 x 128 tile of C (4 warps of 64 x 64) where there are
/// enough such tiles, else per 64 x 64 (4 warps of 32 x 32); A and B
/// streamed 32 deep through four shared buffers, copied three stages ahead
/// (cp.async where aligned), their fragments by ldmatrix. With
/// `warpgroupMma` (sm_90a), the 4 warps are a warpgroup whose wgmma.mma_async
/// multiply A and B from shared memory, staged as core matrices.
mlir::Value emitMmaGemm(kernels::KernelBuilder &kb, const GemmProblem &problem, Emulation emulate,
                        bool warpgroupMma);

/// A block per row: each thread an online max and sum over a strided part
/// of the row, a tree reduction through shared memory, then the output (of
/// `resultType`). Operands f32, bf16 or f16, computed in f32.
mlir::Value emitSoftmaxRows(kernels::KernelBuilder &kb, mlir::Value x, mlir::Type resultType,
                            Emulation emulate);

/// A block per row: the (residual) sum written (as `sumType`) while the
/// mean is reduced, then the centred second moment, then the output (of
/// `resultType`), all from the f32 sum. Operands f32, bf16 or f16.
std::pair<mlir::Value, mlir::Value> emitLayerNormRows(kernels::KernelBuilder &kb, mlir::Value x,
                                                      mlir::Value residual, mlir::Value gamma,
                                                      mlir::Value beta, double epsilon,
                                                      mlir::Type sumType, mlir::Type resultType,
                                                      Emulation emulate);

} // namespace xfmr::gpu

#endif // XFMR_LIB_CONVERSION_XFMRTOGPU_GPUKERNELS_H
