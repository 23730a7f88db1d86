//===- CollapseLinalgDims.cpp - merge contiguous linalg loop dims -*- C++ -*-===//

#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-collapse-linalg-dims"

namespace xfmr {
#define GEN_PASS_DEF_XFMRCOLLAPSELINALGDIMS
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// Maximal runs of adjacent loop dims of one iterator type that stay
/// contiguous in all indexing maps; empty if no run has two dims.
SmallVector<ReassociationIndices> collapsibleDims(linalg::LinalgOp op) {
  if (!isa<linalg::GenericOp>(op) || !op.hasPureTensorSemantics() || op.hasIndexSemantics() ||
      op.getNumLoops() < 2)
    return {};
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  // Broadcasts through unit dims index with constants, which collapsing
  // would have to rewrite; such ops stay as they are.
  if (!llvm::all_of(maps, [](AffineMap map) { return map.isProjectedPermutation(); }))
    return {};
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<ReassociationIndices> runs = {{0}};
  bool merged = false;
  for (int64_t dim = 1, e = op.getNumLoops(); dim < e; ++dim) {
    ReassociationIndices extended = runs.back();
    extended.push_back(dim);
    if (iterators[dim] == iterators[dim - 1] &&
        linalg::areDimSequencesPreserved(maps, {extended})) {
      runs.back() = extended;
      merged = true;
    } else {
      runs.push_back({dim});
    }
  }
  return merged ? runs : SmallVector<ReassociationIndices>{};
}

struct CollapseLinalgDimsPass
    : xfmr::impl::XfmrCollapseLinalgDimsBase<CollapseLinalgDimsPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    RewritePatternSet patterns(&getContext());
    linalg::populateCollapseDimensions(patterns, collapsibleDims);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
