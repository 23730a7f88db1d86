//===- KernelPatterns.cpp - fused xfmr ops to a target's kernels -*- C++ -*-===//
//
// The rewrites are the same for every target: match an f32 op of a shape a
// kernel handles, view its operands as matrices or attention operands, let
// the target's KernelSet build the kernel, and reshape the results back.
//
//===----------------------------------------------------------------------===//

#include "KernelSet.h"

#include "../LoweringUtils.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;

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
    return KernelBuilder(rewriter, op->getLoc());
  }

  /// The factors of an f32 product (or q, k and v of an attention) as the
  /// kernels take them: the bf16 or f16 values all were widened from (all
  /// of one type), when the kernels multiply those directly (the product is
  /// the same: each f32 product of two widened values is exact).
  SmallVector<Value> factors(ValueRange values) const {
    SmallVector<Value> narrow =
        llvm::map_to_vector(values, [&](Value x) { return narrowOperand(x); });
    Type type = getElementTypeOrSelf(narrow.front());
    if (type.isF32() ||
        llvm::any_of(narrow, [&](Value x) { return getElementTypeOrSelf(x) != type; }))
      return llvm::to_vector(values);
    return narrow;
  }

  /// factors(), except that for kernels that widen narrow inputs the
  /// operands after the first that are widened from bf16 or f16 are given
  /// narrow beside an f32 first one (narrow weights, a narrow KV cache).
  SmallVector<Value> mixedFactors(ValueRange values) const {
    SmallVector<Value> result = factors(values);
    if (!kernels.widensNarrowInputs() || !getElementTypeOrSelf(result[0]).isF32())
      return result;
    for (Value &operand : llvm::drop_begin(result))
      if (auto widen = operand.getDefiningOp<arith::ExtFOp>()) {
        Type type = getElementTypeOrSelf(widen.getIn());
        if (type.isBF16() || type.isF16())
          operand = widen.getIn();
      }
    return result;
  }

  /// mixedFactors() of a product's lhs and its weights, except that for
  /// kernels that take bf16 products, where all were widened from bf16, the
  /// lhs too is given narrow (the GEMM kernel widens it where it takes no dot
  /// product).
  SmallVector<Value> productFactors(ValueRange values) const {
    SmallVector<Value> result = mixedFactors(values);
    auto widen = result[0].getDefiningOp<arith::ExtFOp>();
    if (kernels.takesBf16Products() && widen && getElementTypeOrSelf(widen.getIn()).isBF16() &&
        llvm::all_of(llvm::drop_begin(result),
                     [](Value x) { return getElementTypeOrSelf(x).isBF16(); }))
      result[0] = widen.getIn();
    return result;
  }

  /// A product's weight as the kernels read it: the matrix whose 2-D
  /// `xfmr.transpose` it is (an int8 weight kept [out, in]), read the other
  /// way round, or itself. Returns the matrix and whether it is transposed.
  static std::pair<Value, bool> storedWeight(Value weight, bool transposed) {
    auto transpose = weight.getDefiningOp<TransposeOp>();
    if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>{1, 0})
      return {weight, transposed};
    return {transpose.getInput(), !transposed};
  }

  /// An operand the kernels read on its own (a bias, a residual, a row
  /// kernel's input): the bf16 or f16 value it widens, when the kernels
  /// take those. Null stays null.
  Value narrowOperand(Value x) const {
    if (!x || !kernels.handlesNarrowFloats())
      return x;
    auto widen = x.getDefiningOp<arith::ExtFOp>();
    if (!widen)
      return x;
    Type type = getElementTypeOrSelf(widen.getIn());
    return type.isBF16() || type.isF16() ? widen.getIn() : x;
  }

  /// The arith.truncf to bf16 or f16 that is the one use of an f32
  /// `result`, when the kernels write narrow results: the kernel then
  /// writes its values so rounded (the same values) in place of both.
  arith::TruncFOp roundingUse(Value result) const {
    if (!kernels.handlesNarrowFloats() || !result.hasOneUse())
      return {};
    auto round = dyn_cast<arith::TruncFOp>(*result.getUsers().begin());
    if (!round || round.getRoundingmodeAttr())
      return {};
    Type type = getElementTypeOrSelf(round.getType());
    return type.isBF16() || type.isF16() ? round : arith::TruncFOp();
  }

  /// Replaces the uses of `result` (of the op being rewritten) by the
  /// kernel's `value` or, when `round` (its rounding use) is given, those of
  /// `round`, which it erases.
  void replaceResult(PatternRewriter &rewriter, Value result, arith::TruncFOp round,
                     Value value) const {
    if (round)
      result = round.getResult();
    value = lowering::reshapeTensor(rewriter, result.getLoc(), value,
                                    cast<RankedTensorType>(result.getType()));
    rewriter.replaceAllUsesWith(result, value);
    if (round)
      rewriter.eraseOp(round);
  }

  /// The element type of a kernel result for an f32 `result`.
  static Type resultType(Value result, arith::TruncFOp round) {
    return getElementTypeOrSelf(round ? round.getType() : result.getType());
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
    Value residual = narrowOperand(op.getResidual());
    if (residual)
      residual = asMatrix(rewriter, loc, residual);
    SmallVector<Value> narrow = productFactors({op.getInput(), op.getWeight()});
    auto [weight, transposeWeight] = storedWeight(narrow[1], op.getTransposeWeight());
    arith::TruncFOp round = roundingUse(op.getResult());
    Value c = kernels.gemm(kb, asMatrix(rewriter, loc, narrow[0]), /*transposeA=*/false, weight,
                           transposeWeight, narrowOperand(op.getBias()), residual,
                           op.getActivation(), resultType(op.getResult(), round));
    replaceResult(rewriter, op.getResult(), round, c);
    rewriter.eraseOp(op);
    return success();
  }
};

struct GatedLinearKernel : KernelPattern<GatedLinearOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(GatedLinearOp op, PatternRewriter &rewriter) const override {
    if (!isF32(op.getInput()))
      return rewriter.notifyMatchFailure(op, "the GEMM kernel is f32");
    Location loc = op.getLoc();
    KernelBuilder kb = builder(rewriter, op);
    SmallVector<Value> narrow = productFactors({op.getInput(), op.getGate(), op.getUp()});
    auto [gate, transposeGate] = storedWeight(narrow[1], op.getTransposeWeight());
    auto [up, transposeUp] = storedWeight(narrow[2], op.getTransposeWeight());
    arith::TruncFOp round = roundingUse(op.getResult());
    Value c = kernels.gatedGemm(kb, asMatrix(rewriter, loc, narrow[0]), gate, transposeGate, up,
                                transposeUp, narrowOperand(op.getGateBias()),
                                narrowOperand(op.getUpBias()), op.getActivation(),
                                resultType(op.getResult(), round));
    replaceResult(rewriter, op.getResult(), round, c);
    rewriter.eraseOp(op);
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
    SmallVector<Value> narrow = productFactors({op.getLhs(), op.getRhs()});
    Value lhs = narrow[0];
    auto [rhs, transposeB] = storedWeight(narrow[1], op.getTransposeRhs());
    Value a = transposeA ? lhs : asMatrix(rewriter, loc, lhs);
    arith::TruncFOp round = roundingUse(op.getResult());
    Value c = kernels.gemm(kb, a, transposeA, rhs, transposeB, Value(), Value(), Activation::none,
                           resultType(op.getResult(), round));
    replaceResult(rewriter, op.getResult(), round, c);
    rewriter.eraseOp(op);
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
        attentionOperands(kb, op, mixedFactors({op.getQuery(), op.getKey(), op.getValue()}));
    arith::TruncFOp round = roundingUse(op.getResult());
    in.out = kb.allocate(shapeOf(op.getResult()), resultType(op.getResult(), round));
    if (Value lse = op.getLogsumexp())
      in.lse = kb.allocate(shapeOf(lse), rewriter.getF32Type());
    kernels.attention(kb, in);
    replaceResult(rewriter, op.getResult(), round, kb.asTensor(in.out));
    if (Value lse = op.getLogsumexp())
      rewriter.replaceAllUsesWith(lse, kb.asTensor(in.lse));
    rewriter.eraseOp(op);
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
    in.out = kb.readBuffer(alsoNarrow(op.getOutput()));
    in.lse = kb.readBuffer(op.getLogsumexp());
    in.gradOut = kb.readBuffer(alsoNarrow(op.getGradOutput()));
    SmallVector<Value> results = {op.getGradQuery(), op.getGradKey(), op.getGradValue()};
    SmallVector<arith::TruncFOp> rounds =
        llvm::map_to_vector(results, [&](Value x) { return roundingUse(x); });
    SmallVector<Value> buffers;
    for (auto [result, round] : llvm::zip_equal(results, rounds))
      buffers.push_back(kb.allocate(shapeOf(result), resultType(result, round)));
    in.gradQ = buffers[0];
    in.gradK = buffers[1];
    in.gradV = buffers[2];
    kernels.attentionBackward(kb, in);
    for (auto [result, round, buffer] : llvm::zip_equal(results, rounds, buffers))
      replaceResult(rewriter, result, round, kb.asTensor(buffer));
    rewriter.eraseOp(op);
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
    arith::TruncFOp round = roundingUse(op.getResult());
    Value y = kernels.softmaxRows(kb, asMatrix(rewriter, loc, narrowOperand(op.getInput())),
                                  resultType(op.getResult(), round));
    replaceResult(rewriter, op.getResult(), round, y);
    rewriter.eraseOp(op);
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
    arith::TruncFOp round = roundingUse(op.getResult());
    auto [sum, y] =
        kernels.layerNormRows(kb, asMatrix(rewriter, loc, narrowOperand(op.getInput())), Value(),
                              narrowOperand(op.getGamma()), narrowOperand(op.getBeta()),
                              op.getEpsilon().convertToDouble(), rewriter.getF32Type(),
                              resultType(op.getResult(), round));
    replaceResult(rewriter, op.getResult(), round, y);
    rewriter.eraseOp(op);
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
    arith::TruncFOp roundSum = roundingUse(op.getSum()), round = roundingUse(op.getResult());
    auto [sum, y] = kernels.layerNormRows(
        kb, asMatrix(rewriter, loc, narrowOperand(op.getInput())),
        asMatrix(rewriter, loc, narrowOperand(op.getResidual())), narrowOperand(op.getGamma()),
        narrowOperand(op.getBeta()), op.getEpsilon().convertToDouble(),
        resultType(op.getSum(), roundSum), resultType(op.getResult(), round));
    replaceResult(rewriter, op.getSum(), roundSum, sum);
    replaceResult(rewriter, op.getResult(), round, y);
    rewriter.eraseOp(op);
    return success();
  }
};

struct SoftmaxBackwardKernel : KernelPattern<SoftmaxBackwardOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(SoftmaxBackwardOp op, PatternRewriter &rewriter) const override {
    if (!kernels.hasTrainingRowKernels() || !isF32(op.getOutput()) ||
        op.getNormalizedAxis() != op.getType().getRank() - 1)
      return rewriter.notifyMatchFailure(op, "no f32 row kernel over the last axis");
    Location loc = op.getLoc();
    KernelBuilder kb = builder(rewriter, op);
    Value dx = kernels.softmaxBackwardRows(kb, asMatrix(rewriter, loc, op.getOutput()),
                                           asMatrix(rewriter, loc, op.getGrad()));
    replaceResult(rewriter, op.getResult(), {}, dx);
    rewriter.eraseOp(op);
    return success();
  }
};

struct LayerNormBackwardKernel : KernelPattern<LayerNormBackwardOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(LayerNormBackwardOp op, PatternRewriter &rewriter) const override {
    if (!kernels.hasTrainingRowKernels() || !isF32(op.getInput()))
      return rewriter.notifyMatchFailure(op, "no f32 row kernel");
    Location loc = op.getLoc();
    KernelBuilder kb = builder(rewriter, op);
    LayerNormGradients gradients = kernels.layerNormBackwardRows(
        kb, asMatrix(rewriter, loc, op.getInput()), asMatrix(rewriter, loc, op.getGrad()),
        op.getGamma(), op.getEpsilon().convertToDouble());
    replaceResult(rewriter, op.getGradInput(), {}, gradients.input);
    // A norm without gamma has none to learn: its gradients are 0.
    auto zeros = [&](Value result) {
      return lowering::filledTensor(rewriter, loc, cast<RankedTensorType>(result.getType()), 0.0);
    };
    rewriter.replaceAllUsesWith(op.getGradGamma(),
                                gradients.gamma ? gradients.gamma : zeros(op.getGradGamma()));
    rewriter.replaceAllUsesWith(op.getGradBeta(),
                                gradients.beta ? gradients.beta : zeros(op.getGradBeta()));
    rewriter.eraseOp(op);
    return success();
  }
};

/// [..., vocab] logits and their [...] targets as [rows, vocab] and [rows].
std::pair<Value, Value> logitRows(OpBuilder &b, Location loc, Value logits, Value targets) {
  auto type = cast<RankedTensorType>(targets.getType());
  return {
      asMatrix(b, loc, logits),
      lowering::reshapeTensor(
          b, loc, targets, RankedTensorType::get({type.getNumElements()}, type.getElementType()))};
}

struct CrossEntropyKernel : KernelPattern<CrossEntropyOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(CrossEntropyOp op, PatternRewriter &rewriter) const override {
    if (!kernels.hasTrainingRowKernels() || !isF32(op.getLogits()))
      return rewriter.notifyMatchFailure(op, "no f32 row kernel");
    KernelBuilder kb = builder(rewriter, op);
    auto [logits, targets] = logitRows(rewriter, op.getLoc(), op.getLogits(), op.getTargets());
    rewriter.replaceOp(op, kernels.crossEntropyRows(kb, logits, targets,
                                                    static_cast<int64_t>(op.getIgnoreIndex())));
    return success();
  }
};

struct CrossEntropyBackwardKernel : KernelPattern<CrossEntropyBackwardOp> {
  using KernelPattern::KernelPattern;
  LogicalResult matchAndRewrite(CrossEntropyBackwardOp op,
                                PatternRewriter &rewriter) const override {
    if (!kernels.hasTrainingRowKernels() || !isF32(op.getLogits()))
      return rewriter.notifyMatchFailure(op, "no f32 row kernel");
    KernelBuilder kb = builder(rewriter, op);
    auto [logits, targets] = logitRows(rewriter, op.getLoc(), op.getLogits(), op.getTargets());
    Value dx = kernels.crossEntropyBackwardRows(kb, logits, targets, op.getGrad(),
                                                static_cast<int64_t>(op.getIgnoreIndex()));
    replaceResult(rewriter, op.getResult(), {}, dx);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

Value KernelSet::gatedGemm(KernelBuilder &kb, Value a, Value gate, bool transposeGate, Value up,
                           bool transposeUp, Value gateBias, Value upBias, Activation activation,
                           Type resultType) const {
  Type f32 = kb.builder().getF32Type();
  Value gated =
      gemm(kb, a, /*transposeA=*/false, gate, transposeGate, gateBias, Value(), activation, f32);
  Value product = arith::MulFOp::create(
      kb.builder(), kb.location(), gated,
      gemm(kb, a, /*transposeA=*/false, up, transposeUp, upBias, Value(), Activation::none, f32));
  if (resultType == f32)
    return product;
  auto type = cast<RankedTensorType>(product.getType()).clone(resultType);
  return arith::TruncFOp::create(kb.builder(), kb.location(), type, product);
}

LogicalResult xfmr::kernels::applyKernelPatterns(Operation *root, const KernelSet &kernels) {
  RewritePatternSet patterns(root->getContext());
  patterns.add<CrossEntropyBackwardKernel, CrossEntropyKernel, FusedAttentionKernel,
               FusedAttentionBackwardKernel, FusedAddLayerNormKernel, FusedLinearKernel,
               GatedLinearKernel, LayerNormBackwardKernel, LayerNormKernel, MatmulKernel,
               SoftmaxBackwardKernel, SoftmaxKernel>(patterns.getContext(), kernels);
  // Kernels are built once; nothing they create is rewritten again.
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingOps);
  return applyPatternsGreedily(root, std::move(patterns), config);
}
