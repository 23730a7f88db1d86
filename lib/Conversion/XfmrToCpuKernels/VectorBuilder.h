//===- VectorBuilder.h - the CPU kernels' vector code -----------*- C++ -*-===//
//
// The CPU kernels compute in vectors of the target's register width.
// VectorBuilder is KernelBuilder with the target's vector unit: vectors of
// its lanes by default, masked loads and stores along a row, shuffles,
// horizontal reductions and the dot products of bytes and of bf16 values
// (whose x86 instructions are X86Instructions.h's); emitTileUpdate is the
// register-tiled multiply-accumulate all matrix products share.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_VECTORBUILDER_H
#define XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_VECTORBUILDER_H

#include "../Kernels/KernelBuilder.h"

namespace xfmr::cpu {

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

class VectorBuilder : public kernels::KernelBuilder {
public:
  VectorBuilder(const KernelBuilder &kb, const CpuTarget &target)
      : KernelBuilder(kb), target(target) {}

  const CpuTarget &cpu() const { return target; }

  /// As KernelBuilder's, `lanes` 0 meaning the target's.
  mlir::VectorType vectorType(int64_t lanes = 0);
  mlir::Value splat(mlir::Value value, int64_t lanes = 0);
  mlir::Value splat(double value, int64_t lanes = 0);

  /// 2^x of an f32 vector with x <= 0, in 12 instructions (a relative error
  /// of 1.5e-7; results under about 2^-126 flush to 0). For softmax, whose
  /// shifted logits are never positive, in base 2.
  mlir::Value exp2NonPositive(mlir::Value x);
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

private:
  CpuTarget target;
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
Tile emitTileUpdate(VectorBuilder &kb, Tile tile, mlir::Value kBegin, mlir::Value kEnd,
                    llvm::function_ref<mlir::Value(int64_t row, mlir::Value k)> loadA,
                    llvm::function_ref<mlir::Value(int64_t vector, mlir::Value k)> loadB);

} // namespace xfmr::cpu

#endif // XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_VECTORBUILDER_H
