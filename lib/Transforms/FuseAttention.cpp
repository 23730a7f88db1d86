//===- FuseAttention.cpp - scaled dot-product attention to one op -*- C++ -*-===//
//
// Walks back from `matmul(p, v)` through the softmax to the scores and peels
// the masks, biases and scales applied to them until it reaches
// `matmul(q, k^T)`. What it peels becomes attributes and operands of one
// xfmr.fused_attention.
//
//===----------------------------------------------------------------------===//

#include "FusionMatchers.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"
#include <limits>

#define DEBUG_TYPE "xfmr-fuse-attention"

namespace xfmr {
#define GEN_PASS_DEF_XFMRFUSEATTENTION
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

RankedTensorType typeOf(Value value) { return cast<RankedTensorType>(value.getType()); }

/// A boolean mask on the scores and whether true means "attend".
struct Mask {
  Value condition;
  bool keepWhenTrue;
};

struct AttentionMatch {
  Value q, k, v;
  double scale = 1.0;
  bool causal = false;
  std::optional<Mask> padding; // [B, 1, 1, Sk] or [B, Sk]
  std::optional<Mask> dense;   // any other mask: becomes an additive bias
  Value bias;
  SmallVector<Operation *> ops; // root first
};

bool isPermutation(Value value, ArrayRef<int64_t> permutation, Value &input) {
  auto transpose = value.getDefiningOp<TransposeOp>();
  if (!transpose || transpose.getPermutation() != permutation)
    return false;
  input = transpose.getInput();
  return true;
}

/// The [Sq, Sk] causal mask behind `value`, looking through a reshape that
/// only adds leading unit dims.
CausalMaskOp causalMaskOf(Value value) {
  if (auto reshape = value.getDefiningOp<ReshapeOp>())
    if (llvm::all_of(typeOf(value).getShape().drop_back(2), [](int64_t d) { return d == 1; }))
      value = reshape.getInput();
  return value.getDefiningOp<CausalMaskOp>();
}

/// Sorts one mask into causal / padding / dense.
LogicalResult classifyMask(const Mask &mask, ArrayRef<int64_t> scores, AttentionMatch &match) {
  ArrayRef<int64_t> shape = typeOf(mask.condition).getShape();
  if (auto causal = causalMaskOf(mask.condition); causal && mask.keepWhenTrue) {
    if (typeOf(causal).getShape() != scores.take_back(2))
      return failure();
    match.causal = true;
    return success();
  }
  bool padding = (shape.size() == 4 && shape[0] == scores[0] && shape[1] == 1 && shape[2] == 1 &&
                  shape[3] == scores[3]);
  std::optional<Mask> &slot = padding ? match.padding : match.dense;
  if (slot)
    return failure();
  slot = mask;
  return success();
}

/// Peels masks, biases and scales off the scores back to matmul(q, k^T).
LogicalResult matchScores(Value scores, AttentionMatch &match) {
  ArrayRef<int64_t> shape = typeOf(scores).getShape();
  // Walking backwards, a bias met after a scale was added before the scale
  // and would be scaled too: not expressible, not fused.
  bool sawScale = false;
  while (true) {
    Operation *op = scores.getDefiningOp();
    if (!op || op->getNumResults() != 1)
      return failure();
    if (auto select = dyn_cast<SelectOp>(op)) {
      Value next;
      bool keepWhenTrue;
      if (fusion::isMaskingConstant(select.getFalseValue())) {
        next = select.getTrueValue();
        keepWhenTrue = true;
      } else if (fusion::isMaskingConstant(select.getTrueValue())) {
        next = select.getFalseValue();
        keepWhenTrue = false;
      } else {
        return failure();
      }
      if (next.getType() != scores.getType() ||
          failed(classifyMask({select.getCondition(), keepWhenTrue}, shape, match)))
        return failure();
      match.ops.push_back(op);
      scores = next;
      continue;
    }
    if (auto add = dyn_cast<AddOp>(op)) {
      Value other = add.getRhs(), next = add.getLhs();
      if (next.getType() != scores.getType())
        std::swap(other, next);
      if (next.getType() != scores.getType() || match.bias || sawScale)
        return failure();
      match.bias = other;
      match.ops.push_back(op);
      scores = next;
      continue;
    }
    if (isa<MulOp, DivOp>(op)) {
      Value lhs = op->getOperand(0), rhs = op->getOperand(1);
      std::optional<double> factor = fusion::splatValue(rhs);
      if (!factor && isa<MulOp>(op)) {
        factor = fusion::splatValue(lhs);
        std::swap(lhs, rhs);
      }
      if (!factor || !(*factor > 0) || lhs.getType() != scores.getType())
        return failure();
      match.scale *= isa<MulOp>(op) ? *factor : 1.0 / *factor;
      sawScale = true;
      match.ops.push_back(op);
      scores = lhs;
      continue;
    }
    if (auto matmul = dyn_cast<MatmulOp>(op)) {
      if (matmul.getTransposeLhs())
        return failure();
      match.q = matmul.getLhs();
      Value keysT;
      if (matmul.getTransposeRhs())
        match.k = matmul.getRhs();
      else if (isPermutation(matmul.getRhs(), {0, 1, 3, 2}, keysT))
        match.k = keysT;
      else
        return failure();
      match.ops.push_back(op);
      if (!matmul.getTransposeRhs())
        match.ops.push_back(matmul.getRhs().getDefiningOp());
      // A scale folded into the queries.
      if (auto mul = match.q.getDefiningOp<MulOp>()) {
        std::optional<double> factor = fusion::splatValue(mul.getRhs());
        if (factor && *factor > 0 && mul.getLhs().getType() == mul.getType()) {
          match.scale *= *factor;
          match.q = mul.getLhs();
          match.ops.push_back(mul);
        }
      }
      return success();
    }
    return failure();
  }
}

/// A rank-4 boolean value for `mask`, negated if it masks when true.
Value keepCondition(PatternRewriter &rewriter, Location loc, const Mask &mask) {
  if (mask.keepWhenTrue)
    return mask.condition;
  auto type = typeOf(mask.condition);
  Value ones = arith::ConstantOp::create(
      rewriter, loc, DenseElementsAttr::get(type, rewriter.getBoolAttr(true)));
  return arith::XOrIOp::create(rewriter, loc, mask.condition, ones);
}

Value scalarTensor(PatternRewriter &rewriter, Location loc, Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  return arith::ConstantOp::create(
      rewriter, loc, DenseElementsAttr::get(type, rewriter.getFloatAttr(elementType, value)));
}

struct FuseScaledDotProductAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp pv, PatternRewriter &rewriter) const override {
    if (pv.getTransposeRhs() || pv.getTransposeLhs() || typeOf(pv.getLhs()).getRank() != 4 ||
        typeOf(pv.getRhs()).getRank() != 4)
      return rewriter.notifyMatchFailure(pv, "not a rank-4 probabilities x values product");
    AttentionMatch match;
    match.ops.push_back(pv);
    match.v = pv.getRhs();
    Value scores;
    if (auto softmax = pv.getLhs().getDefiningOp<SoftmaxOp>();
        softmax && softmax.getNormalizedAxis() == 3) {
      scores = softmax.getInput();
      match.ops.push_back(softmax);
    } else if (auto chain = fusion::matchSoftmaxChain(pv.getLhs()); chain && chain->axis == 3) {
      scores = chain->input;
      match.ops.append(chain->ops);
    } else {
      return rewriter.notifyMatchFailure(pv, "left operand is not a softmax over the keys");
    }
    if (failed(matchScores(scores, match)))
      return rewriter.notifyMatchFailure(pv, "scores are not scale/mask/bias of q k^T");
    if (!fusion::isSelfContained(match.ops))
      return rewriter.notifyMatchFailure(pv, "an intermediate has other uses");

    auto qType = typeOf(match.q), kType = typeOf(match.k), vType = typeOf(match.v);
    if (qType.getRank() != 4 || kType.getRank() != 4 || kType != vType ||
        qType.getDimSize(3) != kType.getDimSize(3) || qType.getDimSize(0) != kType.getDimSize(0) ||
        qType.getDimSize(1) != kType.getDimSize(1))
      return rewriter.notifyMatchFailure(pv, "q, k, v shapes do not fit one fused attention");
    ArrayRef<int64_t> scoreShape = typeOf(scores).getShape();
    if (match.bias) {
      auto bias = broadcastShapes(typeOf(match.bias).getShape(), scoreShape);
      if (typeOf(match.bias).getRank() > 4 || failed(bias) ||
          ArrayRef<int64_t>(*bias) != scoreShape)
        return rewriter.notifyMatchFailure(pv, "the bias does not broadcast to the scores");
    }

    Location loc = pv.getLoc();
    Type elementType = qType.getElementType();
    Value padding, bias = match.bias;
    if (match.padding) {
      Value keep = keepCondition(rewriter, loc, *match.padding);
      padding = ReshapeOp::create(
          rewriter, loc,
          RankedTensorType::get({scoreShape[0], scoreShape[3]}, rewriter.getI1Type()), keep);
    }
    if (match.dense) {
      Value keep = keepCondition(rewriter, loc, *match.dense);
      Value maskBias =
          SelectOp::create(rewriter, loc, keep, scalarTensor(rewriter, loc, elementType, 0.0),
                           scalarTensor(rewriter, loc, elementType,
                                        -std::numeric_limits<double>::infinity()));
      bias = bias ? AddOp::create(rewriter, loc, bias, maskBias).getResult() : maskBias;
    }

    // [B, S, H, D] sources of all three operands: take them as they are.
    Value qSource, kSource, vSource;
    static constexpr int64_t headSplit[] = {0, 2, 1, 3};
    bool bshd = isPermutation(match.q, headSplit, qSource) &&
                isPermutation(match.k, headSplit, kSource) &&
                isPermutation(match.v, headSplit, vSource);
    auto layout = bshd ? AttentionLayout::bshd : AttentionLayout::bhsd;
    Value q = bshd ? qSource : match.q, k = bshd ? kSource : match.k, v = bshd ? vSource : match.v;
    auto fused = FusedAttentionOp::create(
        rewriter, loc, q.getType(), q, k, v, padding, bias, /*position_bias=*/Value(),
        /*query_offset=*/Value(),
        /*key_length=*/Value(), rewriter.getF64FloatAttr(match.scale),
        match.causal ? rewriter.getUnitAttr() : UnitAttr(),
        AttentionLayoutAttr::get(rewriter.getContext(), layout), /*window=*/IntegerAttr(),
        /*softcap=*/FloatAttr());
    if (!bshd) {
      rewriter.replaceOp(pv, fused.getResult());
      return success();
    }
    // The head merge that usually follows is the bshd result itself.
    if (pv->hasOneUse())
      if (auto merge = dyn_cast<TransposeOp>(*pv->getUsers().begin());
          merge && merge.getPermutation() == ArrayRef<int64_t>(headSplit)) {
        rewriter.replaceOp(merge, fused.getResult());
        rewriter.eraseOp(pv);
        return success();
      }
    rewriter.replaceOpWithNewOp<TransposeOp>(pv, fused.getResult(), headSplit);
    return success();
  }
};

/// A relative-position bias added to the scores of a fused attention
/// becomes its band form (one value per diagonal) read inside the kernel, so
/// the [seq_q, seq_k] bias is never computed.
struct FoldPositionBias : OpRewritePattern<FusedAttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FusedAttentionOp op, PatternRewriter &rewriter) const override {
    auto dense = op.getAttnBias() ? op.getAttnBias().getDefiningOp<RelativePositionBiasOp>()
                                  : RelativePositionBiasOp();
    if (!dense || dense.getSeqQ())
      return rewriter.notifyMatchFailure(op, "no dense relative position bias");
    AttentionDims dims = op.getDims();
    int64_t seqQ = typeOf(op.getQuery()).getDimSize(dims.seq);
    int64_t seqK = typeOf(op.getKey()).getDimSize(dims.seq);
    auto denseType = typeOf(dense.getResult());
    if (denseType.getDimSize(2) != seqQ || denseType.getDimSize(3) != seqK)
      return rewriter.notifyMatchFailure(op, "the bias broadcasts over queries or keys");
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] position bias into " << op.getLoc() << "\n");
    auto bandType =
        RankedTensorType::get({denseType.getDimSize(0), denseType.getDimSize(1), seqQ + seqK - 1},
                              denseType.getElementType());
    Value band = RelativePositionBiasOp::create(
        rewriter, dense.getLoc(), bandType, dense.getTable(), dense.getQueryOffset(),
        dense.getMaxDistanceAttr(), dense.getBidirectionalAttr(), rewriter.getI64IntegerAttr(seqQ));
    rewriter.replaceOpWithNewOp<FusedAttentionOp>(
        op, op->getResultTypes(), op.getQuery(), op.getKey(), op.getValue(), op.getPaddingMask(),
        /*attn_bias=*/Value(), band, op.getQueryOffset(), op.getKeyLength(), op.getScaleAttr(),
        op.getCausalAttr(), op.getLayoutAttr(), op.getWindowAttr(), op.getSoftcapAttr());
    return success();
  }
};

struct FuseAttentionPass : xfmr::impl::XfmrFuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseScaledDotProductAttention, FoldPositionBias>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
