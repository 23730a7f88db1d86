//===- FuseEpilogues.cpp - bias, activation, residual into GEMMs -*- C++ -*-===//

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-fuse-epilogues"

namespace xfmr {
#define GEN_PASS_DEF_XFMRFUSEEPILOGUES
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

/// The op that is the only user of `value`, if any.
Operation *soleUser(Value value) {
  return value.hasOneUse() ? *value.getUsers().begin() : nullptr;
}

/// The other operand of an add whose operands are `value` and something of
/// `type` (or, when `type` is null, any rank-1 [n] vector).
Value otherAddend(AddOp add, Value value, Type type, int64_t n) {
  Value other = add.getLhs() == value ? add.getRhs() : add.getLhs();
  if (add.getLhs() == add.getRhs() || add.getType() != value.getType())
    return Value();
  auto otherType = cast<RankedTensorType>(other.getType());
  if (type)
    return otherType == type ? other : Value();
  return otherType.getRank() == 1 && otherType.getDimSize(0) == n ? other : Value();
}

struct FuseMatmulEpilogue : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp matmul, PatternRewriter &rewriter) const override {
    if (cast<RankedTensorType>(matmul.getRhs().getType()).getRank() != 2 ||
        matmul.getTransposeLhs())
      return rewriter.notifyMatchFailure(matmul, "batched matmul");
    auto type = matmul.getType();
    int64_t n = type.getShape().back();
    Value current = matmul.getResult();
    Operation *last = matmul;
    Value bias, residual;
    Activation activation = Activation::none;

    if (auto add = dyn_cast_or_null<AddOp>(soleUser(current)))
      if ((bias = otherAddend(add, current, Type(), n))) {
        current = add.getResult();
        last = add;
      }
    Operation *user = soleUser(current);
    if (auto act = dyn_cast_or_null<ActivationOpInterface>(user)) {
      activation = act.getActivation();
      current = act->getResult(0);
      last = act;
    }
    if (auto add = dyn_cast_or_null<AddOp>(soleUser(current)))
      if ((residual = otherAddend(add, current, type, n))) {
        current = add.getResult();
        last = add;
      }
    if (last == matmul.getOperation())
      return rewriter.notifyMatchFailure(matmul, "no epilogue");

    // Every operand of the epilogue dominates its last op: build there.
    rewriter.setInsertionPoint(last);
    auto fused = FusedLinearOp::create(rewriter, last->getLoc(), matmul.getLhs(),
                                       matmul.getRhs(), bias, residual, activation,
                                       matmul.getTransposeRhs());
    rewriter.replaceOp(last, fused.getResult());
    return success();
  }
};

/// The input, weight, bias and activation of `value` when it is a product
/// of a 2-D weight with at most a bias and an activation after it, used
/// only by `user`.
struct Product {
  Value input, weight, bias;
  bool transposeWeight;
  Activation activation;
};
std::optional<Product> productOnlyFor(Value value, Operation *user) {
  if (soleUser(value) != user)
    return std::nullopt;
  if (auto matmul = value.getDefiningOp<MatmulOp>();
      matmul && !matmul.getTransposeLhs() &&
      cast<RankedTensorType>(matmul.getRhs().getType()).getRank() == 2)
    return Product{matmul.getLhs(), matmul.getRhs(), Value(), matmul.getTransposeRhs(),
                   Activation::none};
  if (auto linear = value.getDefiningOp<FusedLinearOp>(); linear && !linear.getResidual())
    return Product{linear.getInput(), linear.getWeight(), linear.getBias(),
                   linear.getTransposeWeight(), linear.getActivation()};
  return std::nullopt;
}

/// activation(x W_gate + b) * (x W_up + c), both products of one input, into
/// one xfmr.gated_linear (SwiGLU, GeGLU).
struct FuseGatedProducts : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    std::optional<Product> lhs = productOnlyFor(mul.getLhs(), mul);
    std::optional<Product> rhs = productOnlyFor(mul.getRhs(), mul);
    if (!lhs || !rhs)
      return rewriter.notifyMatchFailure(mul, "not a product of two products");
    // The gate is the activated one (the first, when neither is).
    if (lhs->activation == Activation::none && rhs->activation != Activation::none)
      std::swap(lhs, rhs);
    const Product &gate = *lhs, &up = *rhs;
    if (up.activation != Activation::none || gate.input != up.input ||
        gate.transposeWeight != up.transposeWeight ||
        gate.weight.getType() != up.weight.getType() || mul.getLhs().getType() != mul.getType() ||
        mul.getRhs().getType() != mul.getType())
      return rewriter.notifyMatchFailure(mul, "products that differ");
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] gated product at " << mul.getLoc() << "\n");
    rewriter.replaceOpWithNewOp<GatedLinearOp>(mul, gate.input, gate.weight, up.weight, gate.bias,
                                               up.bias, gate.activation, gate.transposeWeight);
    return success();
  }
};

struct FuseEpiloguesPass : xfmr::impl::XfmrFuseEpiloguesBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseMatmulEpilogue, FuseGatedProducts>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
