//===- CpuKernels.cpp - fused xfmr ops to vectorized CPU kernels -*- C++ -*-===//

#include "Kernels.h"

#include "../LoweringUtils.h"
#include "xfmr/Conversion/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace xfmr {
#define GEN_PASS_DEF_CONVERTXFMRTOCPUKERNELS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;

namespace {

bool isF32(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType().isF32();
}

/// [..., d] as [rows, d].
Value asMatrix(OpBuilder &b, Location loc, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t cols = type.getShape().back();
  return lowering::reshapeTensor(
      b, loc, x, RankedTensorType::get({type.getNumElements() / cols, cols}, type.getElementType()));
}

template <typename OpTy>
struct CpuKernelPattern : OpRewritePattern<OpTy> {
  CpuKernelPattern(MLIRContext *context, const CpuTarget &target)
      : OpRewritePattern<OpTy>(context), target(target) {}
  const CpuTarget &target;
};

struct FusedLinearKernel : CpuKernelPattern<FusedLinearOp> {
  using CpuKernelPattern::CpuKernelPattern;
  LogicalResult matchAndRewrite(FusedLinearOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getInput()))
      return rewriter.notifyMatchFailure(op, "the GEMM kernel is f32");
    Location loc = op.getLoc();
    KernelBuilder kb(rewriter, loc, target);
    Value residual = op.getResidual() ? asMatrix(rewriter, loc, op.getResidual()) : Value();
    Value c = emitGemm(kb, asMatrix(rewriter, loc, op.getInput()), /*transposeA=*/false,
                       op.getWeight(), op.getTransposeWeight(), op.getBias(), residual, op.getActivation());
    rewriter.replaceOp(op, lowering::reshapeTensor(rewriter, loc, c, op.getType()));
    return success();
  }
};

struct MatmulKernel : CpuKernelPattern<MatmulOp> {
  using CpuKernelPattern::CpuKernelPattern;
  LogicalResult matchAndRewrite(MatmulOp op, PatternRewriter &rewriter) const override {
    bool transposeA = op.getTransposeLhs();
    if (cast<RankedTensorType>(op.getRhs().getType()).getRank() != 2 || !isF32(op.getLhs()) ||
        (transposeA && cast<RankedTensorType>(op.getLhs().getType()).getRank() != 2))
      return rewriter.notifyMatchFailure(op, "not an f32 product of matrices or with a 2-D weight");
    Location loc = op.getLoc();
    KernelBuilder kb(rewriter, loc, target);
    Value a = transposeA ? op.getLhs() : asMatrix(rewriter, loc, op.getLhs());
    Value c = emitGemm(kb, a, transposeA, op.getRhs(), op.getTransposeRhs(), Value(), Value(),
                       Activation::none);
    rewriter.replaceOp(op, lowering::reshapeTensor(rewriter, loc, c, op.getType()));
    return success();
  }
};

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

struct FusedAttentionKernel : CpuKernelPattern<FusedAttentionOp> {
  using CpuKernelPattern::CpuKernelPattern;
  LogicalResult matchAndRewrite(FusedAttentionOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getQuery()))
      return rewriter.notifyMatchFailure(op, "the attention kernel is f32");
    KernelBuilder kb(rewriter, op.getLoc(), target);
    AttentionOperands in = attentionOperands(kb, op);
    Type f32 = rewriter.getF32Type();
    in.out = kb.allocate(shapeOf(op.getResult()), f32);
    SmallVector<Value> results = {in.out};
    if (Value lse = op.getLogsumexp())
      results.push_back(in.lse = kb.allocate(shapeOf(lse), f32));
    emitAttention(kb, in);
    rewriter.replaceOp(op, llvm::map_to_vector(results, [&](Value buffer) { return kb.asTensor(buffer); }));
    return success();
  }
};

struct FusedAttentionBackwardKernel : CpuKernelPattern<FusedAttentionBackwardOp> {
  using CpuKernelPattern::CpuKernelPattern;
  LogicalResult matchAndRewrite(FusedAttentionBackwardOp op,
                                PatternRewriter &rewriter) const override {
    if (!isF32(op.getQuery()))
      return rewriter.notifyMatchFailure(op, "the attention kernel is f32");
    KernelBuilder kb(rewriter, op.getLoc(), target);
    AttentionOperands in = attentionOperands(kb, op);
    Type f32 = rewriter.getF32Type();
    in.out = kb.readBuffer(op.getOutput());
    in.lse = kb.readBuffer(op.getLogsumexp());
    in.gradOut = kb.readBuffer(op.getGradOutput());
    in.gradQ = kb.allocate(shapeOf(op.getQuery()), f32);
    in.gradK = kb.allocate(shapeOf(op.getKey()), f32);
    in.gradV = kb.allocate(shapeOf(op.getValue()), f32);
    emitAttentionBackward(kb, in);
    rewriter.replaceOp(op, {kb.asTensor(in.gradQ), kb.asTensor(in.gradK), kb.asTensor(in.gradV)});
    return success();
  }
};

struct SoftmaxKernel : CpuKernelPattern<SoftmaxOp> {
  using CpuKernelPattern::CpuKernelPattern;
  LogicalResult matchAndRewrite(SoftmaxOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getInput()) || op.getNormalizedAxis() != op.getType().getRank() - 1)
      return rewriter.notifyMatchFailure(op, "the row kernel is f32 over the last axis");
    Location loc = op.getLoc();
    KernelBuilder kb(rewriter, loc, target);
    Value y = emitSoftmaxRows(kb, asMatrix(rewriter, loc, op.getInput()));
    rewriter.replaceOp(op, lowering::reshapeTensor(rewriter, loc, y, op.getType()));
    return success();
  }
};

struct LayerNormKernel : CpuKernelPattern<LayerNormOp> {
  using CpuKernelPattern::CpuKernelPattern;
  LogicalResult matchAndRewrite(LayerNormOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getInput()))
      return rewriter.notifyMatchFailure(op, "the row kernel is f32");
    Location loc = op.getLoc();
    KernelBuilder kb(rewriter, loc, target);
    auto [sum, y] = emitLayerNormRows(kb, asMatrix(rewriter, loc, op.getInput()), Value(),
                                      op.getGamma(), op.getBeta(),
                                      op.getEpsilon().convertToDouble());
    rewriter.replaceOp(op, lowering::reshapeTensor(rewriter, loc, y, op.getType()));
    return success();
  }
};

struct FusedAddLayerNormKernel : CpuKernelPattern<FusedAddLayerNormOp> {
  using CpuKernelPattern::CpuKernelPattern;
  LogicalResult matchAndRewrite(FusedAddLayerNormOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getInput()))
      return rewriter.notifyMatchFailure(op, "the row kernel is f32");
    Location loc = op.getLoc();
    KernelBuilder kb(rewriter, loc, target);
    auto [sum, y] = emitLayerNormRows(
        kb, asMatrix(rewriter, loc, op.getInput()), asMatrix(rewriter, loc, op.getResidual()),
        op.getGamma(), op.getBeta(), op.getEpsilon().convertToDouble());
    auto type = op.getSum().getType();
    rewriter.replaceOp(op, {lowering::reshapeTensor(rewriter, loc, sum, type),
                            lowering::reshapeTensor(rewriter, loc, y, type)});
    return success();
  }
};

struct ConvertXfmrToCpuKernelsPass
    : xfmr::impl::ConvertXfmrToCpuKernelsBase<ConvertXfmrToCpuKernelsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (lanes != 8 && lanes != 16) {
      getOperation()->emitError("lanes must be 8 or 16, got ") << lanes;
      return signalPassFailure();
    }
    target = CpuTarget{lanes, registers};
    RewritePatternSet patterns(&getContext());
    patterns.add<FusedAttentionKernel, FusedAttentionBackwardKernel, FusedAddLayerNormKernel, FusedLinearKernel,
                 LayerNormKernel, MatmulKernel, SoftmaxKernel>(&getContext(), target);
    // Kernels are built once; nothing they create is rewritten again.
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
  CpuTarget target;
};

} // namespace
