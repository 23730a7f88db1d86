//===- OverlapAllReduce.cpp - reduce gradients during the backward -*- C++ -*-===//
//
// The train step reduces every gradient after the whole backward. Split into
// a start where the gradient is final and a wait where the step first needs
// the sum, the reductions of the last layers' gradients travel while the
// backward computes those of the first, as PyTorch DDP's buckets do.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Transforms/Passes.h"

#include "xfmr/Dialect/XfmrOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-overlap-all-reduce"

namespace xfmr {
#define GEN_PASS_DEF_XFMROVERLAPALLREDUCE
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

/// The last op of `op`'s block before `op` that the reduction must follow:
/// the definitions of its operands and the other readers of the gradient
/// (a start before them would make bufferization copy the gradient for
/// them). Null if none is in the block.
Operation *lastNeededBefore(AllReduceOp op) {
  Block *block = op->getBlock();
  Operation *last = nullptr;
  auto consider = [&](Operation *candidate) {
    candidate = candidate ? block->findAncestorOpInBlock(*candidate) : nullptr;
    if (candidate && candidate != op && candidate->isBeforeInBlock(op) &&
        (!last || last->isBeforeInBlock(candidate)))
      last = candidate;
  };
  consider(op.getInput().getDefiningOp());
  consider(op.getWeight().getDefiningOp());
  for (Operation *user : op.getInput().getUsers())
    consider(user);
  return last;
}

/// `xfmr.all_reduce` -> `xfmr.all_reduce_start` right after the last op its
/// operands need, `xfmr.all_reduce_wait` where the reduction was.
struct SplitAllReduce : OpRewritePattern<AllReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AllReduceOp op, PatternRewriter &rewriter) const override {
    Operation *after = lastNeededBefore(op);
    Block *block = op->getBlock();
    if (after ? after->getNextNode() == op : &block->front() == op)
      return rewriter.notifyMatchFailure(op, "nothing to overlap with");
    OpBuilder::InsertionGuard guard(rewriter);
    if (after)
      rewriter.setInsertionPointAfter(after);
    else
      rewriter.setInsertionPointToStart(block);
    auto start = AllReduceStartOp::create(rewriter, op.getLoc(), op.getInput(), op.getWeight());
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << op.getType() << " started after "
                            << (after ? after->getName().getStringRef() : "the block's start")
                            << "\n");
    rewriter.setInsertionPoint(op);
    rewriter.replaceOpWithNewOp<AllReduceWaitOp>(op, start.getResult());
    return success();
  }
};

struct XfmrOverlapAllReduce : public xfmr::impl::XfmrOverlapAllReduceBase<XfmrOverlapAllReduce> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitAllReduce>(&getContext());
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
