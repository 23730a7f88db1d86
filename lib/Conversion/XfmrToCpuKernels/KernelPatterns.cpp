//===- KernelPatterns.cpp - fused xfmr ops to a target's kernels -*- C++ -*-===//
//
// The rewrites are the same for every target: match an f32 op of a shape a
// kernel handles, view its operands as matrices or attention operands, let
// the target's KernelSet build the kernel, and reshape the results back.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "../LoweringUtils.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;

namespace {

bool isF32(Value value) { return cast<RankedTensorType>(value.getType()).getElementType().isF32(); }

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// [..., d] as [rows, d].
Value asMatrix(OpBuilder &b, Location loc, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t cols = type.getShape().back();
  return lowering::reshapeTensor(
      b, loc, x,
      RankedTensorType::get({type.getNumElements() / cols, cols}, type.getElementType()));
}

template <typename OpTy> struct KernelPattern : OpRewritePattern<OpTy> {
  KernelPattern(MLIRContext *context, const KernelSet &kernels)
      : OpRewritePattern<OpTy>(context), kernels(kernels) {}
  KernelBuilder builder(PatternRewriter &rewriter, Operation *op) const {
    return KernelBuilder(rewriter, op->getLoc(), kernels.cpu());
  }

  /// The factors of an f32 product (or q, k and v of an attention) as the
  /// kernels take them: the bf16 or f16 values all were widened from, when
  /// the kernels multiply those directly (the product is the same: each f32
  /// product of two widened values is exact).
  SmallVector<Value> factors(ValueRange values) const {
    SmallVector<Value> narrow;
    for (Value x : values) {
      auto widen = x.getDefiningOp<arith::ExtFOp>();
      if (!kernels.multipliesNarrowFloats() || !widen)
        return llvm::to_vector(values);
      Type type = getElementTypeOrSelf(widen.getIn());
      if (!(type.isBF16() || type.isF16()) ||
          (!narrow.empty() && getElementTypeOrSelf(narrow.front()) != type))
        return llvm::to_vector(values);
      narrow.push_back(widen.getIn());
    }
    return narrow;
  }

  const KernelSet &kernels;
};

struct FusedLinearKernel : KernelPattern<FusedLinearOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(FusedLinearOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getInput()))
      return rewriter.notifyMatchFailure(op, "the GEMM kernel is f32");
    Location loc = op.getLoc();
    KernelBuilder kb = builder(rewriter, op);
    Value residual = op.getResidual() ? asMatrix(rewriter, loc, op.getResidual()) : Value();
    SmallVector<Value> narrow = factors({op.getInput(), op.getWeight()});
    Value input = narrow[0], weight = narrow[1];
    Value c = kernels.gemm(kb, asMatrix(rewriter, loc, input), /*transposeA=*/false, weight,
                           op.getTransposeWeight(), op.getBias(), residual, op.getActivation());
    rewriter.replaceOp(op, lowering::reshapeTensor(rewriter, loc, c, op.getType()));
    return success();
  }
};

struct MatmulKernel : KernelPattern<MatmulOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(MatmulOp op, PatternRewriter &rewriter) const override {
    bool transposeA = op.getTransposeLhs();
    if (cast<RankedTensorType>(op.getRhs().getType()).getRank() != 2 || !isF32(op.getLhs()) ||
        (transposeA && cast<RankedTensorType>(op.getLhs().getType()).getRank() != 2))
      return rewriter.notifyMatchFailure(op, "not an f32 product of matrices or with a 2-D weight");
    Location loc = op.getLoc();
    KernelBuilder kb = builder(rewriter, op);
    SmallVector<Value> narrow = factors({op.getLhs(), op.getRhs()});
    Value lhs = narrow[0], rhs = narrow[1];
    Value a = transposeA ? lhs : asMatrix(rewriter, loc, lhs);
    Value c = kernels.gemm(kb, a, transposeA, rhs, op.getTransposeRhs(), Value(), Value(),
                           Activation::none);
    rewriter.replaceOp(op, lowering::reshapeTensor(rewriter, loc, c, op.getType()));
    return success();
  }
};

struct FusedAttentionKernel : KernelPattern<FusedAttentionOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(FusedAttentionOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getQuery()))
      return rewriter.notifyMatchFailure(op, "the attention kernel is f32");
    KernelBuilder kb = builder(rewriter, op);
    AttentionOperands in =
        attentionOperands(kb, op, factors({op.getQuery(), op.getKey(), op.getValue()}));
    Type f32 = rewriter.getF32Type();
    in.out = kb.allocate(shapeOf(op.getResult()), f32);
    SmallVector<Value> results = {in.out};
    if (Value lse = op.getLogsumexp())
      results.push_back(in.lse = kb.allocate(shapeOf(lse), f32));
    kernels.attention(kb, in);
    rewriter.replaceOp(
        op, llvm::map_to_vector(results, [&](Value buffer) { return kb.asTensor(buffer); }));
    return success();
  }
};

struct FusedAttentionBackwardKernel : KernelPattern<FusedAttentionBackwardOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(FusedAttentionBackwardOp op,
                                PatternRewriter &rewriter) const override {
    if (!isF32(op.getQuery()))
      return rewriter.notifyMatchFailure(op, "the attention kernel is f32");
    KernelBuilder kb = builder(rewriter, op);
    Value query = op.getQuery();
    SmallVector<Value> qkv = factors({query, op.getKey(), op.getValue()});
    // The output and its gradient too, where they widen values of q's type.
    auto alsoNarrow = [&](Value x) { return qkv[0] == query ? x : factors({query, x})[1]; };
    AttentionOperands in = attentionOperands(kb, op, qkv);
    Type f32 = rewriter.getF32Type();
    in.out = kb.readBuffer(alsoNarrow(op.getOutput()));
    in.lse = kb.readBuffer(op.getLogsumexp());
    in.gradOut = kb.readBuffer(alsoNarrow(op.getGradOutput()));
    in.gradQ = kb.allocate(shapeOf(op.getQuery()), f32);
    in.gradK = kb.allocate(shapeOf(op.getKey()), f32);
    in.gradV = kb.allocate(shapeOf(op.getValue()), f32);
    kernels.attentionBackward(kb, in);
    rewriter.replaceOp(op, {kb.asTensor(in.gradQ), kb.asTensor(in.gradK), kb.asTensor(in.gradV)});
    return success();
  }
};

struct SoftmaxKernel : KernelPattern<SoftmaxOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(SoftmaxOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getInput()) || op.getNormalizedAxis() != op.getType().getRank() - 1)
      return rewriter.notifyMatchFailure(op, "the row kernel is f32 over the last axis");
    Location loc = op.getLoc();
    KernelBuilder kb = builder(rewriter, op);
    Value y = kernels.softmaxRows(kb, asMatrix(rewriter, loc, op.getInput()));
    rewriter.replaceOp(op, lowering::reshapeTensor(rewriter, loc, y, op.getType()));
    return success();
  }
};

struct LayerNormKernel : KernelPattern<LayerNormOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(LayerNormOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getInput()))
      return rewriter.notifyMatchFailure(op, "the row kernel is f32");
    Location loc = op.getLoc();
    KernelBuilder kb = builder(rewriter, op);
    auto [sum, y] =
        kernels.layerNormRows(kb, asMatrix(rewriter, loc, op.getInput()), Value(), op.getGamma(),
                              op.getBeta(), op.getEpsilon().convertToDouble());
    rewriter.replaceOp(op, lowering::reshapeTensor(rewriter, loc, y, op.getType()));
    return success();
  }
};

struct FusedAddLayerNormKernel : KernelPattern<FusedAddLayerNormOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(FusedAddLayerNormOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getInput()))
      return rewriter.notifyMatchFailure(op, "the row kernel is f32");
    Location loc = op.getLoc();
    KernelBuilder kb = builder(rewriter, op);
    auto [sum, y] = kernels.layerNormRows(kb, asMatrix(rewriter, loc, op.getInput()),
                                          asMatrix(rewriter, loc, op.getResidual()), op.getGamma(),
                                          op.getBeta(), op.getEpsilon().convertToDouble());
    auto type = op.getSum().getType();
    rewriter.replaceOp(op, {lowering::reshapeTensor(rewriter, loc, sum, type),
                            lowering::reshapeTensor(rewriter, loc, y, type)});
    return success();
  }
};

} // namespace

void xfmr::cpu::populateKernelPatterns(RewritePatternSet &patterns, const KernelSet &kernels) {
  patterns.add<FusedAttentionKernel, FusedAttentionBackwardKernel, FusedAddLayerNormKernel,
               FusedLinearKernel, LayerNormKernel, MatmulKernel, SoftmaxKernel>(
      patterns.getContext(), kernels);
}
