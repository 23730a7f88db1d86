//===- KernelSet.h - what every target's kernels share ----------*- C++ -*-===//
//
// The kernel layer of the fused xfmr ops that the CPU (XfmrToCpuKernels)
// and GPU (XfmrToGpu) targets share: the attention operands, the interface
// a target's kernels implement, and the rewrite patterns (KernelPatterns.cpp)
// that build whichever target's KernelSet they are given.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_KERNELS_KERNELSET_H
#define XFMR_LIB_CONVERSION_KERNELS_KERNELSET_H

#include "../LoweringUtils.h"
#include "AttentionLimits.h"
#include "KernelBuilder.h"
#include "xfmr/Dialect/XfmrOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

namespace xfmr::kernels {

/// Buffers and attributes of one fused attention or its backward.
struct AttentionOperands {
  /// Rank-4 q, k, v buffers (strided views) and the output buffer, all in
  /// the dimension order `dims` gives. Results (out, and the gradients
  /// below) are f32, or bf16 / f16 for kernels that handlesNarrowFloats().
  mlir::Value q, k, v, out;
  /// [batch, heads, seq_q] row log-sum-exp of the scores: written by the
  /// forward when non-null, read by the backward.
  mlir::Value lse;
  /// Backward only: the output gradient (rank 4, like out) and the gradient
  /// buffers to write.
  mlir::Value gradOut, gradQ, gradK, gradV;
  /// [batch, seq_k] additive 0 / -inf from the padding mask, or null.
  mlir::Value keyBias;
  /// Rank-4 additive bias with broadcast dims of size 1, or null.
  mlir::Value bias;
  /// [batch] i32: the position of each sequence's query 0 among the keys,
  /// and how many keys it has (a KV cache filled so far); null when static.
  mlir::Value queryOffset, keyLength;
  AttentionDims dims;
  double scale;
  bool causal;
  /// Query heads per key/value head (grouped-query attention; 1 without).
  int64_t groups = 1;
  /// The sliding window (0: none) and the scores' soft cap (0: none).
  int64_t window = 0;
  double softcap = 0;

  /// The key/value head that query head `h` reads.
  mlir::Value keyHead(mlir::OpBuilder &b, mlir::Location loc, mlir::Value h) const {
    if (groups == 1)
      return h;
    return mlir::arith::DivUIOp::create(b, loc, h,
                                        mlir::arith::ConstantIndexOp::create(b, loc, groups));
  }

  /// The masks that limit the key range.
  AttentionMasks masks() const {
    auto seqOf = [&](mlir::Value operand) {
      return llvm::cast<mlir::MemRefType>(operand.getType()).getDimSize(dims.seq);
    };
    return {seqOf(q), seqOf(k), causal, window, queryOffset, keyLength};
  }

  /// Indices of element (b, s, h, c) of a q/k/v/out operand in its layout.
  llvm::SmallVector<mlir::Value> at(mlir::Value b, mlir::Value s, mlir::Value h,
                                    mlir::Value c) const {
    llvm::SmallVector<mlir::Value> indices(4);
    indices[dims.batch] = b;
    indices[dims.seq] = s;
    indices[dims.heads] = h;
    indices[dims.headDim] = c;
    return indices;
  }

  /// Indices of the bias at (b, h, query, key), broadcast dims read at `zero`.
  llvm::SmallVector<mlir::Value> biasAt(mlir::Value zero, mlir::Value b, mlir::Value h,
                                        mlir::Value query, mlir::Value key) const {
    auto shape = llvm::cast<mlir::MemRefType>(bias.getType()).getShape();
    llvm::SmallVector<mlir::Value> indices = {b, h, query, key};
    for (auto [index, size] : llvm::zip(indices, shape))
      if (size == 1)
        index = zero;
    return indices;
  }
};

/// The rank-4 bias that `band` (a fused attention's position_bias, [1 |
/// batch, heads, seq_q + seq_k - 1] f32) holds per diagonal: a view whose
/// query stride is -1, so that (b, h, i, j) reads band[b, h, j - i + seq_q -
/// 1] and every kernel reads it as any other bias.
inline mlir::Value diagonalBiasView(KernelBuilder &kb, mlir::Value band, int64_t seqQ,
                                    int64_t seqK) {
  using namespace mlir;
  OpBuilder &b = kb.builder();
  auto type = cast<RankedTensorType>(band.getType());
  int64_t batch = type.getDimSize(0), heads = type.getDimSize(1), width = type.getDimSize(2);
  Value buffer = bufferization::ToBufferOp::create(
      b, kb.location(), MemRefType::get(type.getShape(), type.getElementType()), band,
      b.getUnitAttr());
  SmallVector<int64_t> sizes = {batch, heads, seqQ, seqK};
  SmallVector<int64_t> strides = {heads * width, width, -1, 1};
  auto viewType = MemRefType::get(sizes, type.getElementType(),
                                  StridedLayoutAttr::get(b.getContext(), seqQ - 1, strides));
  return memref::ReinterpretCastOp::create(b, kb.location(), viewType, buffer, seqQ - 1, sizes,
                                           strides);
}

/// The operands every attention kernel reads (forward or backward, CPU or
/// GPU): `qkv` (the op's q, k and v or the narrow values they widen), masks
/// and attributes.
template <typename OpTy>
AttentionOperands attentionOperands(KernelBuilder &kb, OpTy op, mlir::ValueRange qkv) {
  using namespace mlir;
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  Type f32 = b.getF32Type();
  AttentionOperands in;
  in.q = kb.readBuffer(qkv[0]);
  in.k = kb.readBuffer(qkv[1]);
  in.v = kb.readBuffer(qkv[2]);
  in.dims = op.getDims();
  in.scale = op.getScale().convertToDouble();
  in.causal = op.getCausal();
  in.window = static_cast<int64_t>(op.getWindow().value_or(0));
  if (std::optional<llvm::APFloat> cap = op.getSoftcap())
    in.softcap = cap->convertToDouble();
  if (Value padding = op.getPaddingMask()) {
    auto scalar = [&](double value) -> Value {
      auto scalarType = RankedTensorType::get({}, f32);
      return arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(scalarType, b.getFloatAttr(f32, value)));
    };
    Value keyBias = SelectOp::create(b, loc, padding, scalar(0.0),
                                     scalar(-std::numeric_limits<double>::infinity()));
    in.keyBias = kb.readBuffer(keyBias);
  }
  if constexpr (std::is_same_v<OpTy, FusedAttentionOp>) {
    in.groups = op.getQueryHeadsPerKeyHead();
    if (Value offset = op.getQueryOffset())
      in.queryOffset = kb.readBuffer(offset);
    if (Value length = op.getKeyLength())
      in.keyLength = kb.readBuffer(length);
    if (Value band = op.getPositionBias())
      in.bias = diagonalBiasView(kb, band, in.masks().seqQ, in.masks().seqK);
  }
  if (Value bias = op.getAttnBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    SmallVector<int64_t> shape(4 - biasType.getRank(), 1);
    llvm::append_range(shape, biasType.getShape());
    in.bias =
        kb.readBuffer(lowering::reshapeTensor(b, loc, bias, RankedTensorType::get(shape, f32)));
  }
  return in;
}

/// A layer norm's input gradient and, for an affine norm, gamma's and
/// beta's (null otherwise).
struct LayerNormGradients {
  mlir::Value input, gamma, beta;
};

/// The kernels of one target, which the rewrite patterns of the fused ops
/// (populateKernelPatterns) build: the CPU's vector kernels above, or the
/// GPU's thread-block kernels (XfmrToGpu). The operands and results are as
/// for the CPU kernels of the same name.
class KernelSet {
public:
  virtual ~KernelSet() = default;

  /// Whether the kernels also take bf16 or f16 operands (computing in f32;
  /// gemm() accumulating bf16 or f16 products in f32) and write bf16 or f16
  /// results (rounded from f32 as they are stored): an op on widened narrow
  /// values is then given the narrow ones, and an op whose one use rounds
  /// its result writes the rounded values itself.
  virtual bool handlesNarrowFloats() const { return false; }
  /// Whether gemm()'s B and attention()'s keys and values may be bf16 or
  /// f16 beside f32 operands (narrow weights, a narrow KV cache), widened
  /// as the kernels read them: such an operand that is widened is then
  /// given narrow.
  virtual bool widensNarrowInputs() const { return false; }
  /// Whether a product whose factors are both widened from bf16 is given
  /// both narrow (the CPU's bf16 dot product), beside widensNarrowInputs().
  virtual bool takesBf16Products() const { return false; }
  /// C = activation(A B + bias) + residual, C of `resultType` (f32 unless
  /// handlesNarrowFloats()).
  virtual mlir::Value gemm(KernelBuilder &kb, mlir::Value a, bool transposeA, mlir::Value b,
                           bool transposeB, mlir::Value bias, mlir::Value residual,
                           Activation activation, mlir::Type resultType) const = 0;
  /// C = activation(A G + gateBias) * (A U + upBias) of `resultType`, a
  /// gated MLP's products (each weight stored [K, N], or [N, K] when
  /// transposed): by default two gemm()s whose f32 results are multiplied.
  virtual mlir::Value gatedGemm(KernelBuilder &kb, mlir::Value a, mlir::Value gate,
                                bool transposeGate, mlir::Value up, bool transposeUp,
                                mlir::Value gateBias, mlir::Value upBias, Activation activation,
                                mlir::Type resultType) const;
  /// The row kernels: results of `resultType` (and `sumType`), f32 unless
  /// handlesNarrowFloats().
  virtual mlir::Value softmaxRows(KernelBuilder &kb, mlir::Value x,
                                  mlir::Type resultType) const = 0;
  virtual std::pair<mlir::Value, mlir::Value> layerNormRows(KernelBuilder &kb, mlir::Value x,
                                                            mlir::Value residual, mlir::Value gamma,
                                                            mlir::Value beta, double epsilon,
                                                            mlir::Type sumType,
                                                            mlir::Type resultType) const = 0;
  virtual void attention(KernelBuilder &kb, const AttentionOperands &operands) const = 0;
  virtual void attentionBackward(KernelBuilder &kb, const AttentionOperands &operands) const = 0;
  /// Whether the target has the row kernels of training below (f32, rows
  /// of the last axis): the softmax and layer-norm gradients, cross-entropy
  /// and its gradient; without them the ops are left to the linalg lowering.
  virtual bool hasTrainingRowKernels() const { return false; }
  virtual mlir::Value softmaxBackwardRows(KernelBuilder &kb, mlir::Value y,
                                          mlir::Value grad) const {
    llvm_unreachable("no training row kernels");
  }
  virtual LayerNormGradients layerNormBackwardRows(KernelBuilder &kb, mlir::Value x,
                                                   mlir::Value grad, mlir::Value gamma,
                                                   double epsilon) const {
    llvm_unreachable("no training row kernels");
  }
  /// `logits` [rows, vocab], `targets` [rows] (integers), `grad` rank 0.
  virtual mlir::Value crossEntropyRows(KernelBuilder &kb, mlir::Value logits, mlir::Value targets,
                                       int64_t ignoreIndex) const {
    llvm_unreachable("no training row kernels");
  }
  virtual mlir::Value crossEntropyBackwardRows(KernelBuilder &kb, mlir::Value logits,
                                               mlir::Value targets, mlir::Value grad,
                                               int64_t ignoreIndex) const {
    llvm_unreachable("no training row kernels");
  }
};

/// Rewrites each f32 fused_linear, matmul with a 2-D weight, fused_attention
/// (and its backward), softmax over the last axis, layer_norm and
/// fused_add_layer_norm, and where the target has them the gradients of
/// softmax and layer_norm and cross_entropy with its gradient, into the
/// kernel `kernels` builds, under `root`. Ops are rewritten once: nothing
/// the kernels create is matched again.
mlir::LogicalResult applyKernelPatterns(mlir::Operation *root, const KernelSet &kernels);

} // namespace xfmr::kernels

#endif // XFMR_LIB_CONVERSION_KERNELS_KERNELSET_H
