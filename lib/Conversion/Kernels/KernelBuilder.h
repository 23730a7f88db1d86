//===- KernelBuilder.h - writing kernels as MLIR ----------------*- C++ -*-===//
//
// The kernels (the CPU's, and the GPU's thread blocks) are loop nests over
// memrefs, with vector arithmetic on the CPU, built inside tensor programs:
// inputs enter through `bufferization.to_buffer read_only` (strided views,
// so slices and head splits are read in place), results leave through a
// fresh buffer and `bufferization.to_tensor`.
// KernelBuilder wraps the OpBuilder calls such code needs; emitTileUpdate is
// the register-tiled multiply-accumulate all matrix products share.
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

/// How the target sums products of bytes into i32 lanes (dotInt8).
enum class IntegerDot {
  /// None: integer weights are widened to f32.
  None,
  /// vpmaddubsw then vpmaddwd (AVX2, AVX-512BW).
  MultiplyAdd,
  /// vpdpbusd (AVX-VNNI, AVX-512 VNNI).
  Vnni,
  /// vpdpbusd's arithmetic in plain vector ops, on any target and lane
  /// count: runs the integer kernels where the host lacks the instructions
  /// (tests).
  Portable,
};

/// What the generated code may assume about the vector unit.
struct CpuTarget {
  /// f32 lanes per vector register: 8 (AVX2) or 16 (AVX-512).
  int64_t lanes = 8;
  /// Vector registers: 16 (AVX2) or 32 (AVX-512).
  int64_t registers = 16;
  /// The instructions of the integer dot products, if any.
  IntegerDot integerDot = IntegerDot::None;
  /// Whether 16-lane vectors have a bf16 dot product (AVX-512 BF16).
  bool bf16Dot = false;

  /// The offset dotInt8 takes int8 weights with: 128 where it multiplies
  /// unsigned bytes by signed ones (vpdpbusd and its portable form), which
  /// the callers undo with 128 times A's sums; 0 where it multiplies signed
  /// bytes (vpmaddubsw, as |b| times a with b's sign).
  int64_t int8Offset() const { return integerDot == IntegerDot::MultiplyAdd ? 0 : 128; }

  /// Rows of a register tile of 2 vectors per row, leaving registers for the
  /// two B vectors and the broadcast A value.
  int64_t tileRows() const { return (registers - 3) / 2; }
};

class KernelBuilder {
public:
  KernelBuilder(mlir::OpBuilder &b, mlir::Location loc, const CpuTarget &target)
      : b(b), loc(loc), target(target) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }
  const CpuTarget &cpu() const { return target; }

  mlir::Value index(int64_t value);
  mlir::Value f32(double value);
  mlir::VectorType vectorType(int64_t lanes = 0);
  /// A splat vector of `value` (a scalar Value).
  mlir::Value splat(mlir::Value value, int64_t lanes = 0);
  mlir::Value splat(double value, int64_t lanes = 0);

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
  /// 2^x of an f32 vector with x <= 0, in 12 instructions (a relative error
  /// of 1.5e-7; results under about 2^-126 flush to 0). For softmax, whose
  /// shifted logits are never positive, in base 2.
  mlir::Value exp2NonPositive(mlir::Value x);
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
  /// The transpose of the square matrix whose rows are the vectors `rows`
  /// (as many as they have lanes, a power of 2): lanes * log2(lanes)
  /// two-source shuffles.
  llvm::SmallVector<mlir::Value> transpose(llvm::ArrayRef<mlir::Value> rows);
  /// acc + the sums of each lane's 4 products of B's bytes `u` and signed
  /// bytes `s` above -128 (vector<lanes x i32>, vector<4 lanes x i8> twice),
  /// exactly, for targets with an `integerDot`. With `uBits` < 8, u holds
  /// unsigned values below 2^uBits; with 8, int8 weights plus the target's
  /// int8Offset() (as bytes).
  mlir::Value dotInt8(mlir::Value acc, mlir::Value u, mlir::Value s, int64_t uBits = 8);
  /// acc + the dot products of each pair (u[i], s[i]) as dotInt8's; with
  /// vpmaddubsw and u of at most 4 bits, the pairs' 16-bit sums are summed
  /// before they are widened (exact for up to 8 pairs).
  mlir::Value dotInt8(mlir::Value acc, mlir::ValueRange u, mlir::ValueRange s, int64_t uBits);
  /// acc + the sums of each lane's 2 products of bf16 values of `x` and `y`
  /// (vector<16xf32>, vector<32xbf16> twice): AVX-512 BF16's vdpbf16ps,
  /// which treats denormal inputs and results as zeros; for targets with
  /// `bf16Dot`.
  mlir::Value dotBf16(mlir::Value acc, mlir::Value x, mlir::Value y);
  /// Horizontal reductions of a vector (the max of non-NaNs).
  mlir::Value reduceMax(mlir::Value vector);
  mlir::Value reduceAdd(mlir::Value vector);

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
  /// A vector of `lanes` from `buffer` at `indices` along the last dim;
  /// `valid` < lanes loads only the first `valid` lanes (others `padding`).
  mlir::Value loadVector(mlir::Value buffer, mlir::ValueRange indices, int64_t valid = -1,
                         double padding = 0.0, int64_t lanes = 0);
  /// As loadVector, with the lanes past `valid` taken from `passThrough`.
  mlir::Value loadVector(mlir::Value buffer, mlir::ValueRange indices, int64_t valid,
                         mlir::Value passThrough);
  /// loadVector as f32: a bf16 or f16 buffer's lanes widened in registers.
  mlir::Value loadVectorWidened(mlir::Value buffer, mlir::ValueRange indices, int64_t valid = -1);
  void storeVector(mlir::Value vector, mlir::Value buffer, mlir::ValueRange indices,
                   int64_t valid = -1);
  /// A vector along the last dim that may run past the buffer's end; lanes
  /// outside read `padding`.
  mlir::Value loadVectorClipped(mlir::Value buffer, mlir::ValueRange indices, double padding);

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

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
  const CpuTarget &target;
};

/// A register tile of `rows` x `vectors` vectors, row-major.
struct Tile {
  int64_t rows;
  int64_t vectors;
  llvm::SmallVector<mlir::Value> values;
  mlir::Value &at(int64_t row, int64_t vector) { return values[row * vectors + vector]; }
};

/// tile[i][j] += sum over k in [kBegin, kEnd) of a(i, k) * b(k, j), where
/// `loadA` gives the scalar a(i, k) and `loadB` the j-th vector of row k.
/// The loop body loads the B vectors once and broadcasts each A value once.
Tile emitTileUpdate(KernelBuilder &kb, Tile tile, mlir::Value kBegin, mlir::Value kEnd,
                    llvm::function_ref<mlir::Value(int64_t row, mlir::Value k)> loadA,
                    llvm::function_ref<mlir::Value(int64_t vector, mlir::Value k)> loadB);

} // namespace xfmr::kernels

#endif // XFMR_LIB_CONVERSION_KERNELS_KERNELBUILDER_H
