//===- GpuHoistParallelLoops.cpp - scf.parallel out of scf.for ------------===//
//
// A loop over rows whose body updates one row in parallel (the embedding
// gradient adds each token's row into its table row, tokens in order since
// two may share a row) becomes a host loop launching one kernel per row.
// When every parallel iteration owns its own columns of every buffer it
// touches, the loops interchange: one kernel, each thread walking the rows
// for its columns in the same order as before.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-gpu-hoist-parallel-loops"

namespace xfmr {
#define GEN_PASS_DEF_XFMRGPUHOISTPARALLELLOOPS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// The buffer a view is taken of, through view-like ops.
Value rootOf(Value memref) {
  while (auto view = memref.getDefiningOp<ViewLikeOpInterface>())
    memref = view.getViewSource();
  return memref;
}

/// Whether `memref`, indexed by the parallel loop's induction variables,
/// reaches the same elements of the buffer defined outside `rowLoop` (returned
/// in `outer`) for every row: either that buffer itself, or a subview of it
/// taken in the row loop that keeps whole trailing dimensions and drops
/// leading unit ones (a row), so iteration `i` always touches column `i`.
bool ownsColumns(Value memref, scf::ForOp rowLoop, unsigned rank, Value &outer) {
  if (!rowLoop->isAncestor(memref.getParentRegion()->getParentOp())) {
    outer = memref;
    return cast<MemRefType>(memref.getType()).getRank() == rank;
  }
  auto subview = memref.getDefiningOp<memref::SubViewOp>();
  if (!subview || subview->getParentOp() != rowLoop.getOperation() ||
      rowLoop->isAncestor(subview.getSource().getParentRegion()->getParentOp()))
    return false;
  MemRefType sourceType = subview.getSourceType();
  if (!sourceType.getLayout().isIdentity() || cast<MemRefType>(memref.getType()).getRank() != rank)
    return false;
  int64_t leading = sourceType.getRank() - rank;
  for (int64_t dim = 0; dim < sourceType.getRank(); ++dim) {
    if (subview.isDynamicSize(dim) || subview.isDynamicStride(dim) ||
        subview.getStaticStride(dim) != 1)
      return false;
    int64_t size = subview.getStaticSize(dim);
    if (dim < leading ? size != 1
                      : subview.isDynamicOffset(dim) || subview.getStaticOffset(dim) != 0 ||
                            size != sourceType.getDimSize(dim))
      return false;
  }
  outer = subview.getSource();
  return true;
}

struct HoistParallelLoop : OpRewritePattern<scf::ForOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(scf::ForOp rowLoop, PatternRewriter &rewriter) const override {
    if (rowLoop.getNumResults() != 0)
      return rewriter.notifyMatchFailure(rowLoop, "carries values");
    Block *body = rowLoop.getBody();
    auto parallel = dyn_cast<scf::ParallelOp>(body->getTerminator()->getPrevNode());
    if (!parallel || parallel.getNumReductions() != 0)
      return rewriter.notifyMatchFailure(rowLoop, "does not end in a plain scf.parallel");
    for (Value bound : llvm::concat<Value>(parallel.getLowerBound(), parallel.getUpperBound(),
                                           parallel.getStep()))
      if (rowLoop->isAncestor(bound.getParentRegion()->getParentOp()))
        return rewriter.notifyMatchFailure(rowLoop, "parallel bounds vary by row");

    // The row loop's own ops only compute: pure ops and reads of buffers
    // nothing here writes.
    SmallVector<Value> rowReads;
    for (Operation &op : body->without_terminator()) {
      if (&op == parallel.getOperation() || isMemoryEffectFree(&op))
        continue;
      auto load = dyn_cast<memref::LoadOp>(op);
      if (!load)
        return rewriter.notifyMatchFailure(&op, "row loop has side effects");
      rowReads.push_back(load.getMemRef());
    }
    // The parallel body: pure ops, and loads and stores at exactly the
    // induction variables of buffers whose columns it owns.
    unsigned rank = parallel.getNumLoops();
    SmallVector<Value> ivs(parallel.getInductionVars());
    DenseMap<Value, Value> storedRoots;            // root -> the outer buffer written
    SmallVector<std::pair<Value, Value>> accesses; // (root, outer buffer)
    for (Operation &op : parallel.getBody()->without_terminator()) {
      if (isMemoryEffectFree(&op) && op.getNumRegions() == 0)
        continue;
      Value memref;
      ValueRange indices;
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        memref = load.getMemRef();
        indices = load.getIndices();
      } else if (auto store = dyn_cast<memref::StoreOp>(op)) {
        memref = store.getMemRef();
        indices = store.getIndices();
      } else {
        return rewriter.notifyMatchFailure(&op, "not a load or store");
      }
      Value outer;
      if (!llvm::equal(indices, ivs) || !ownsColumns(memref, rowLoop, rank, outer))
        return rewriter.notifyMatchFailure(&op, "columns not owned by one iteration");
      Value root = rootOf(outer);
      accesses.push_back({root, outer});
      if (isa<memref::StoreOp>(op))
        storedRoots[root] = outer;
    }
    // A written buffer is reached through one view only, and never read by
    // the row loop itself.
    for (auto [root, outer] : accesses) {
      auto stored = storedRoots.find(root);
      if (stored != storedRoots.end() && stored->second != outer)
        return rewriter.notifyMatchFailure(rowLoop, "written buffer seen through two views");
    }
    for (Value read : rowReads)
      if (storedRoots.contains(rootOf(read)))
        return rewriter.notifyMatchFailure(rowLoop, "row loop reads a written buffer");

    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] hoisting the parallel loop out of "
                            << rowLoop.getLoc() << "\n");
    Location loc = rowLoop.getLoc();
    auto hoisted = scf::ParallelOp::create(rewriter, loc, parallel.getLowerBound(),
                                           parallel.getUpperBound(), parallel.getStep());
    rewriter.setInsertionPointToStart(hoisted.getBody());
    auto rows = scf::ForOp::create(rewriter, loc, rowLoop.getLowerBound(), rowLoop.getUpperBound(),
                                   rowLoop.getStep());
    IRMapping mapping;
    mapping.map(rowLoop.getInductionVar(), rows.getInductionVar());
    mapping.map(ivs, hoisted.getInductionVars());
    rewriter.setInsertionPointToStart(rows.getBody());
    for (Operation &op : body->without_terminator())
      if (&op != parallel.getOperation())
        rewriter.clone(op, mapping);
    for (Operation &op : parallel.getBody()->without_terminator())
      rewriter.clone(op, mapping);
    rewriter.eraseOp(rowLoop);
    return success();
  }
};

struct GpuHoistParallelLoopsPass
    : xfmr::impl::XfmrGpuHoistParallelLoopsBase<GpuHoistParallelLoopsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<HoistParallelLoop>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
