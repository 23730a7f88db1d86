//===- FuseSoftmax.cpp - max/sub/exp/sum/div chains to softmax --*- C++ -*-===//

#include "FusionMatchers.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-fuse-softmax"

namespace xfmr {
#define GEN_PASS_DEF_XFMRFUSESOFTMAX
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

struct FuseSoftmaxChain : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp div, PatternRewriter &rewriter) const override {
    std::optional<fusion::SoftmaxChain> chain = fusion::matchSoftmaxChain(div);
    if (!chain)
      return rewriter.notifyMatchFailure(div, "not a softmax chain");
    if (!fusion::isSelfContained(chain->ops))
      return rewriter.notifyMatchFailure(div, "an intermediate of the chain has other uses");
    rewriter.replaceOpWithNewOp<SoftmaxOp>(div, chain->input, chain->axis);
    return success();
  }
};

struct FuseSoftmaxPass : xfmr::impl::XfmrFuseSoftmaxBase<FuseSoftmaxPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseSoftmaxChain>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
