//===- FuseLayerNorm.cpp - layer norms from chains, residual adds -*- C++ -*-===//

#include "FusionMatchers.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-fuse-layer-norm"

namespace xfmr {
#define GEN_PASS_DEF_XFMRFUSELAYERNORM
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

int64_t lastAxis(Value value) { return cast<RankedTensorType>(value.getType()).getRank() - 1; }

/// Matches `add(variance, eps)` (either order) with a constant eps.
std::optional<double> matchVariancePlusEps(Value value, Value &variance) {
  auto add = value.getDefiningOp<AddOp>();
  if (!add)
    return std::nullopt;
  for (auto [var, eps] : {std::pair{add.getLhs(), add.getRhs()}, {add.getRhs(), add.getLhs()}})
    if (std::optional<double> epsilon = fusion::splatValue(eps); epsilon && *epsilon > 0) {
      variance = var;
      return epsilon;
    }
  return std::nullopt;
}

/// The normalisation core: (x - mean) * rsqrt(var + eps) or
/// (x - mean) / sqrt(var + eps), var = mean((x - mean)^2), over the last axis.
struct NormCore {
  Value input;
  double epsilon;
  SmallVector<Operation *> ops; // root first
};

std::optional<NormCore> matchNormCore(Operation *root) {
  Value centered, denominator;
  bool reciprocal;
  if (auto mul = dyn_cast<MulOp>(root)) {
    centered = mul.getLhs();
    denominator = mul.getRhs();
    reciprocal = true;
    if (!denominator.getDefiningOp<math::RsqrtOp>())
      std::swap(centered, denominator);
  } else if (auto div = dyn_cast<DivOp>(root)) {
    centered = div.getLhs();
    denominator = div.getRhs();
    reciprocal = false;
  } else {
    return std::nullopt;
  }
  Operation *root2 = denominator.getDefiningOp();
  if (!root2 || (reciprocal ? !isa<math::RsqrtOp>(root2) : !isa<math::SqrtOp>(root2)))
    return std::nullopt;
  Value variance;
  std::optional<double> epsilon = matchVariancePlusEps(root2->getOperand(0), variance);
  if (!epsilon)
    return std::nullopt;
  Value squared;
  std::optional<int64_t> varAxis = fusion::reduceAxis(variance, ReduceKind::mean, squared);
  auto square = squared ? squared.getDefiningOp<MulOp>() : MulOp();
  if (!varAxis || !square || square.getLhs() != centered || square.getRhs() != centered)
    return std::nullopt;
  auto sub = centered.getDefiningOp<SubOp>();
  if (!sub)
    return std::nullopt;
  Value x = sub.getLhs();
  Value meanInput;
  std::optional<int64_t> meanAxis = fusion::reduceAxis(sub.getRhs(), ReduceKind::mean, meanInput);
  if (!meanAxis || meanInput != x || *meanAxis != lastAxis(x) || *varAxis != *meanAxis ||
      root->getResult(0).getType() != x.getType() || sub.getType() != x.getType())
    return std::nullopt;
  return NormCore{x,
                  *epsilon,
                  {root, root2, root2->getOperand(0).getDefiningOp(), variance.getDefiningOp(),
                   square, sub, sub.getRhs().getDefiningOp()}};
}

/// `value` op `vector` (either order) with `vector` of shape [d]; returns it.
template <typename OpTy>
Value affineOperand(Operation *op, Value value, int64_t d) {
  auto binary = dyn_cast_or_null<OpTy>(op);
  if (!binary || binary.getType() != value.getType())
    return Value();
  Value other = binary.getLhs() == value ? binary.getRhs() : binary.getLhs();
  auto type = cast<RankedTensorType>(other.getType());
  return other != value && type.getRank() == 1 && type.getDimSize(0) == d ? other : Value();
}

struct FuseLayerNormChain : RewritePattern {
  FuseLayerNormChain(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}
  LogicalResult matchAndRewrite(Operation *root, PatternRewriter &rewriter) const override {
    if (!isa<MulOp, DivOp>(root))
      return failure();
    std::optional<NormCore> core = matchNormCore(root);
    if (!core || !fusion::isSelfContained(core->ops))
      return rewriter.notifyMatchFailure(root, "not a self-contained layer-norm chain");
    Value normalized = root->getResult(0);
    int64_t d = cast<RankedTensorType>(normalized.getType()).getShape().back();
    Operation *last = root;
    Value gamma, beta;
    if (normalized.hasOneUse()) {
      Operation *scale = *normalized.getUsers().begin();
      if (Value g = affineOperand<MulOp>(scale, normalized, d); g && scale->hasOneUse()) {
        Operation *shift = *scale->getUsers().begin();
        if (Value b = affineOperand<AddOp>(shift, scale->getResult(0), d)) {
          gamma = g;
          beta = b;
          last = shift;
        }
      }
    }
    rewriter.setInsertionPoint(last);
    rewriter.replaceOpWithNewOp<LayerNormOp>(last, normalized.getType(), core->input, gamma, beta,
                                             rewriter.getF64FloatAttr(core->epsilon));
    return success();
  }
};

struct FuseResidualAdd : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp norm, PatternRewriter &rewriter) const override {
    auto add = norm.getInput().getDefiningOp<AddOp>();
    if (!add || add.getLhs().getType() != add.getType() ||
        add.getRhs().getType() != add.getType())
      return rewriter.notifyMatchFailure(norm, "input is not a same-shape add");
    // The fused op must dominate every use of the sum: build it at the norm
    // if the other uses come later, or at the add if gamma and beta are
    // available there.
    Operation *anchor = norm;
    for (Operation *user : add->getUsers())
      if (user != norm && !(user->getBlock() == norm->getBlock() && norm->isBeforeInBlock(user)))
        anchor = add;
    if (anchor == add.getOperation() &&
        !llvm::all_of(ValueRange{norm.getGamma(), norm.getBeta()},
                      [&](Value v) { return !v || fusion::isDefinedBefore(v, add); }))
      return rewriter.notifyMatchFailure(norm, "the sum is used before the norm's parameters");
    rewriter.setInsertionPoint(anchor);
    auto fused = FusedAddLayerNormOp::create(
        rewriter, norm.getLoc(), TypeRange{add.getType(), norm.getType()}, add.getLhs(),
        add.getRhs(), norm.getGamma(), norm.getBeta(), norm.getEpsilonAttr());
    rewriter.replaceOp(norm, fused.getResult());
    rewriter.replaceAllUsesWith(add.getResult(), fused.getSum());
    rewriter.eraseOp(add);
    return success();
  }
};

struct FuseLayerNormPass : xfmr::impl::XfmrFuseLayerNormBase<FuseLayerNormPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseLayerNormChain, FuseResidualAdd>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
