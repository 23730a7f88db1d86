//===- GpuReductionsInnermost.cpp - reduction loops inside parallel ones --===//
//
// `convert-linalg-to-parallel-loops` keeps a linalg op's loop order, so a
// column sum (iterators [reduction, parallel]) becomes an scf.for around an
// scf.parallel, and on the GPU a host loop that launches one kernel per
// reduced row. Interchanging the op so that its parallel loops come first
// gives one kernel whose threads each run the reduction; every output still
// sums its inputs in the same order.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-gpu-reductions-innermost"

namespace xfmr {
#define GEN_PASS_DEF_XFMRGPUREDUCTIONSINNERMOST
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// Rewrites a linalg op with a reduction loop outside a parallel one into a
/// generic whose loops are the parallel ones, then the reductions, each group
/// in its original order.
struct MoveReductionsInnermost : OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp op, PatternRewriter &rewriter) const override {
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    auto firstReduction = llvm::find(iterators, utils::IteratorType::reduction);
    if (std::find(firstReduction, iterators.end(), utils::IteratorType::parallel) ==
        iterators.end())
      return rewriter.notifyMatchFailure(op, "reductions already innermost");
    SmallVector<unsigned> order;
    for (utils::IteratorType kind : {utils::IteratorType::parallel, utils::IteratorType::reduction})
      for (auto [dim, iterator] : llvm::enumerate(iterators))
        if (iterator == kind)
          order.push_back(dim);
    auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
    if (!generic) {
      FailureOr<linalg::GenericOp> generalized = linalg::generalizeNamedOp(rewriter, op);
      if (failed(generalized))
        return rewriter.notifyMatchFailure(op, "cannot be generalized");
      generic = *generalized;
    }
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] interchanging " << op->getName() << " at "
                            << generic.getLoc() << "\n");
    return linalg::interchangeGenericOp(rewriter, generic, order);
  }
};

struct GpuReductionsInnermostPass
    : xfmr::impl::XfmrGpuReductionsInnermostBase<GpuReductionsInnermostPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MoveReductionsInnermost>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
