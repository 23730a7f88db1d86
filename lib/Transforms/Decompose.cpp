//===- Decompose.cpp - high-level xfmr ops into primitives ------*- C++ -*-===//
//
// The primitive form written here is the "unfused" graph the fusion passes
// recognise; keep the two in step (test/Transforms/decompose.mlir and the
// fusion tests pin the shapes of these chains). Softmax and layer norm are
// kept as ops: each already lowers to one kernel, and their guarded
// semantics (a fully masked row gives 0) must survive the expansion.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"
#include <limits>

#define DEBUG_TYPE "xfmr-decompose"

namespace xfmr {
#define GEN_PASS_DEF_XFMRDECOMPOSE
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

RankedTensorType tensorTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// A rank-0 tensor constant, which broadcasts against anything.
Value scalarConstant(OpBuilder &b, Location loc, Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(elementType, value)));
}

struct DecomposeLinear : OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearOp op, PatternRewriter &rewriter) const override {
    Value result = MatmulOp::create(rewriter, op.getLoc(), op.getInput(), op.getWeight(),
                                    op.getTransposeWeight());
    if (Value bias = op.getBias())
      result = AddOp::create(rewriter, op.getLoc(), result, bias);
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// [batch, seq, heads*head_dim] -> [batch, heads, seq, head_dim].
Value splitHeads(OpBuilder &b, Location loc, Value x, int64_t heads) {
  auto type = tensorTypeOf(x);
  int64_t batch = type.getDimSize(0), seq = type.getDimSize(1);
  int64_t headDim = type.getDimSize(2) / heads;
  Value split = ReshapeOp::create(
      b, loc, RankedTensorType::get({batch, seq, heads, headDim}, type.getElementType()), x);
  return TransposeOp::create(b, loc, split, ArrayRef<int64_t>{0, 2, 1, 3});
}

/// [batch, heads, seq, head_dim] -> [batch, seq, heads*head_dim].
Value mergeHeads(OpBuilder &b, Location loc, Value x) {
  auto type = tensorTypeOf(x);
  Value transposed = TransposeOp::create(b, loc, x, ArrayRef<int64_t>{0, 2, 1, 3});
  return ReshapeOp::create(
      b, loc,
      RankedTensorType::get({type.getDimSize(0), type.getDimSize(2),
                             type.getDimSize(1) * type.getDimSize(3)},
                            type.getElementType()),
      transposed);
}

struct DecomposeMultiHeadAttention : OpRewritePattern<MultiHeadAttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MultiHeadAttentionOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto queryType = tensorTypeOf(op.getQuery());
    Type elementType = queryType.getElementType();
    int64_t inner = op.getInnerDim();
    bool transposed = op.getTransposeWeights();
    auto bias = [&](int i) -> Value {
      return op.getInBiases().empty() ? Value() : op.getInBiases()[i];
    };
    auto project = [&](Value input, Value weight, Value b) -> Value {
      return LinearOp::create(rewriter, loc, input, weight, b, transposed);
    };

    Value q, k, v;
    if (op.hasFusedInProjection()) {
      Value qkv = project(op.getQuery(), op.getInWeights()[0], bias(0));
      auto sliceType = RankedTensorType::get(
          {queryType.getDimSize(0), queryType.getDimSize(1), inner}, elementType);
      auto slice = [&](int64_t part) -> Value {
        SmallVector<OpFoldResult> offsets = {rewriter.getIndexAttr(0), rewriter.getIndexAttr(0),
                                             rewriter.getIndexAttr(part * inner)};
        SmallVector<OpFoldResult> sizes = {rewriter.getIndexAttr(queryType.getDimSize(0)),
                                           rewriter.getIndexAttr(queryType.getDimSize(1)),
                                           rewriter.getIndexAttr(inner)};
        SmallVector<OpFoldResult> strides(3, rewriter.getIndexAttr(1));
        return tensor::ExtractSliceOp::create(rewriter, loc, sliceType, qkv, offsets, sizes,
                                              strides);
      };
      q = slice(0), k = slice(1), v = slice(2);
    } else {
      Value memory = op.getKeyValue() ? op.getKeyValue() : op.getQuery();
      q = project(op.getQuery(), op.getInWeights()[0], bias(0));
      k = project(memory, op.getInWeights()[1], bias(1));
      v = project(memory, op.getInWeights()[2], bias(2));
    }

    int64_t heads = op.getNumHeads();
    q = splitHeads(rewriter, loc, q, heads);
    k = splitHeads(rewriter, loc, k, heads);
    v = splitHeads(rewriter, loc, v, heads);

    Value scores = MatmulOp::create(rewriter, loc, q, k, /*transpose_rhs=*/true);
    scores = MulOp::create(rewriter, loc, scores,
                           scalarConstant(rewriter, loc, elementType, op.getScaleOrDefault()));
    auto scoresType = tensorTypeOf(scores);
    Value negInf =
        scalarConstant(rewriter, loc, elementType, -std::numeric_limits<double>::infinity());
    if (op.getCausal()) {
      Value mask = CausalMaskOp::create(
          rewriter, loc,
          RankedTensorType::get(scoresType.getShape().take_back(2), rewriter.getI1Type()));
      scores = SelectOp::create(rewriter, loc, mask, scores, negInf);
    }
    if (Value padding = op.getPaddingMask()) {
      auto paddingType = tensorTypeOf(padding);
      Value keys = ReshapeOp::create(
          rewriter, loc,
          RankedTensorType::get({paddingType.getDimSize(0), 1, 1, paddingType.getDimSize(1)},
                                paddingType.getElementType()),
          padding);
      scores = SelectOp::create(rewriter, loc, keys, scores, negInf);
    }
    if (Value attnBias = op.getAttnBias())
      scores = AddOp::create(rewriter, loc, scores, attnBias);

    Value probabilities = SoftmaxOp::create(rewriter, loc, scores, /*axis=*/3);
    Value context = MatmulOp::create(rewriter, loc, probabilities, v, false);
    Value merged = mergeHeads(rewriter, loc, context);
    Value result = project(merged, op.getOutWeight(), op.getOutBias());
    if (op.getProbabilities())
      rewriter.replaceOp(op, {result, probabilities});
    else
      rewriter.replaceOp(op, result);
    return success();
  }
};

struct XfmrDecomposePass : xfmr::impl::XfmrDecomposeBase<XfmrDecomposePass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    RewritePatternSet patterns(&getContext());
    populateDecompositionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void xfmr::populateDecompositionPatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeLinear, DecomposeMultiHeadAttention>(patterns.getContext());
}
