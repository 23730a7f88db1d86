//===- DistributeLinalg.cpp - linalg ops on the CPU's threads ----*- C++ -*-===//

#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-distribute-linalg"

namespace xfmr {
#define GEN_PASS_DEF_XFMRDISTRIBUTELINALG
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// The loop of `op` to distribute: its outermost parallel loop of two or
/// more iterations, if the op has static loop ranges of at least
/// `minPoints` iterations in all.
std::optional<unsigned> distributedLoop(linalg::LinalgOp op, int64_t minPoints) {
  if (!op.hasPureTensorSemantics() || op->getParentOfType<scf::ForallOp>())
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t points = 1;
  for (int64_t range : ranges) {
    if (ShapedType::isDynamic(range))
      return std::nullopt;
    points *= range;
  }
  if (points < minPoints)
    return std::nullopt;
  for (auto [loop, iterator] : llvm::enumerate(op.getIteratorTypesArray()))
    if (iterator == utils::IteratorType::parallel && ranges[loop] >= 2)
      return loop;
  return std::nullopt;
}

struct DistributeLinalgPass
    : xfmr::impl::XfmrDistributeLinalgBase<DistributeLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    if (tiles < 1 || minPoints < 1) {
      getOperation()->emitError("xfmr-distribute-linalg: tiles and min-points must be positive");
      return signalPassFailure();
    }
    SmallVector<std::pair<linalg::LinalgOp, unsigned>> candidates;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (std::optional<unsigned> loop = distributedLoop(op, minPoints))
        candidates.push_back({op, *loop});
    });
    IRRewriter rewriter(&getContext());
    for (auto [op, loop] : candidates) {
      int64_t range = op.getStaticLoopRanges()[loop];
      int64_t tileSize = llvm::divideCeil(range, std::min<int64_t>(tiles, range));
      SmallVector<OpFoldResult> tileSizes(op.getNumLoops(), rewriter.getIndexAttr(0));
      tileSizes[loop] = rewriter.getIndexAttr(tileSize);
      scf::SCFTilingOptions options;
      options.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp).setTileSizes(tileSizes);
      rewriter.setInsertionPoint(op);
      FailureOr<scf::SCFTilingResult> tiled =
          scf::tileUsingSCF(rewriter, cast<TilingInterface>(op.getOperation()), options);
      if (failed(tiled)) {
        op->emitError("xfmr-distribute-linalg: cannot tile this op into an scf.forall");
        return signalPassFailure();
      }
      rewriter.replaceOp(op, tiled->replacements);
      LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] loop " << loop << " of " << range
                              << " in tiles of " << tileSize << "\n");
    }
  }
};

} // namespace
