//===- KernelBuilder.h - writing kernels as MLIR ----------------*- C++ -*-===//
//
// The kernels (the CPU's, and the GPU's thread blocks) are loop nests over
// memrefs built inside tensor programs: inputs enter through
// `bufferization.to_buffer read_only` (strided views, so slices and head
// splits are read in place), results leave through a fresh buffer and
// `bufferization.to_tensor`. KernelBuilder wraps the OpBuilder calls such
// code needs on any target: scalar and vector arithmetic, memory, loops.
// What a target adds is its own builder's: the CPU's vector unit
// (VectorBuilder), the GPU's threads and barriers (ThreadBlockBuilder).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_KERNELS_KERNELBUILDER_H
#define XFMR_LIB_CONVERSION_KERNELS_KERNELBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

#include <limits>

namespace xfmr::kernels {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

class KernelBuilder {
public:
  KernelBuilder(mlir::OpBuilder &b, mlir::Location loc) : b(b), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }

  mlir::Value index(int64_t value);
  mlir::Value f32(double value);
  /// vector<lanes x f32>.
  mlir::VectorType vectorType(int64_t lanes);
  /// A splat vector of `value` (a scalar Value).
  mlir::Value splat(mlir::Value value, int64_t lanes);
  mlir::Value splat(double value, int64_t lanes);

  mlir::Value add(mlir::Value x, mlir::Value y);
  mlir::Value sub(mlir::Value x, mlir::Value y);
  mlir::Value mul(mlir::Value x, mlir::Value y);
  mlir::Value div(mlir::Value x, mlir::Value y);
  /// x > y ? x : y, one maxps: a NaN y propagates, a NaN x does not. The
  /// kernels take maxima to shift exponentials, through which a NaN input
  /// still reaches the output.
  mlir::Value max(mlir::Value x, mlir::Value y);
  /// a * b + c, rounded once (vectors or scalars).
  mlir::Value fma(mlir::Value a, mlir::Value b, mlir::Value c);
  mlir::Value exp(mlir::Value x);
  /// e^(x - shift) for x <= shift (scalars or vectors), exactly 0 where x
  /// is -inf (a masked entry) whatever the exponential does at -inf.
  mlir::Value expShifted(mlir::Value x, mlir::Value shift);
  mlir::Value rsqrt(mlir::Value x);
  mlir::Value log(mlir::Value x);
  mlir::Value equals(mlir::Value x, double value);
  /// Index arithmetic.
  mlir::Value addi(mlir::Value x, mlir::Value y);
  mlir::Value muli(mlir::Value x, int64_t y);
  mlir::Value mini(mlir::Value x, mlir::Value y);
  /// Unsigned index division, remainder and x < bound.
  mlir::Value divui(mlir::Value x, int64_t y);
  mlir::Value remui(mlir::Value x, int64_t y);
  mlir::Value below(mlir::Value x, mlir::Value bound);
  mlir::Value below(mlir::Value x, int64_t bound);
  mlir::Value select(mlir::Value condition, mlir::Value x, mlir::Value y);

  /// A view of a tensor as a read-only buffer with arbitrary strides but a
  /// contiguous innermost dimension.
  mlir::Value readBuffer(mlir::Value tensor);
  /// A fresh buffer of `type`'s shape, and its tensor value.
  mlir::Value allocate(llvm::ArrayRef<int64_t> shape, mlir::Type elementType);
  /// `buffer` as a tensor; writable in place if the kernel allocated it.
  mlir::Value asTensor(mlir::Value buffer);

  mlir::Value load(mlir::Value buffer, mlir::ValueRange indices);
  void store(mlir::Value value, mlir::Value buffer, mlir::ValueRange indices);
  /// Asks for the cache line of `buffer` at `indices` to be brought into
  /// L2 ahead of its use.
  void prefetch(mlir::Value buffer, mlir::ValueRange indices);
  /// buffer[indices] as f32 (bf16 and f16 values widened), and an f32
  /// value stored rounded to the element type of `buffer` (f32, bf16 or
  /// f16).
  mlir::Value loadWidened(mlir::Value buffer, mlir::ValueRange indices);
  void storeRounded(mlir::Value value, mlir::Value buffer, mlir::ValueRange indices);

  /// scf.for from `lower` to `upper` by `step` with loop-carried `init`;
  /// `body` returns the values to yield.
  mlir::ValueRange
  forLoop(mlir::Value lower, mlir::Value upper, int64_t step, mlir::ValueRange init,
          llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value, mlir::ValueRange)> body);
  void forLoop(mlir::Value lower, mlir::Value upper, int64_t step,
               llvm::function_ref<void(mlir::Value)> body);
  /// An scf.forall over [0, count) whose iterations run on OpenMP threads.
  void parallelFor(int64_t count, llvm::function_ref<void(mlir::Value)> body);
  void ifThen(mlir::Value condition, llvm::function_ref<void()> body);
  void ifThenElse(mlir::Value condition, llvm::function_ref<void()> thenBody,
                  llvm::function_ref<void()> elseBody);

  /// Calls `body(row0, rows)` for the tiles of `tile` rows covering
  /// [begin, begin + count) with a static `count`: a loop over the full tiles
  /// and, if `count` is not a multiple of `tile`, one smaller tile.
  void forRowTiles(mlir::Value begin, int64_t count, int64_t tile,
                   llvm::function_ref<void(mlir::Value, int64_t)> body);

protected:
  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace xfmr::kernels

#endif // XFMR_LIB_CONVERSION_KERNELS_KERNELBUILDER_H
