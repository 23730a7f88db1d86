//===- MergeParallelRegions.cpp - one team for consecutive loops -*- C++ -*-===//

#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-merge-parallel-regions"

namespace xfmr {
#define GEN_PASS_DEF_XFMRMERGEPARALLELREGIONS
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// Whether `region` can take in the regions after it: no clauses, and its
/// body ends in a worksharing loop with the implicit barrier, which then
/// orders the loop before whatever the merge puts after it.
bool isMergeable(omp::ParallelOp region) {
  if (region->getNumOperands() != 0 || region.getProcBindKind() ||
      !region.getRegion().hasOneBlock())
    return false;
  Operation *terminator = region.getRegion().front().getTerminator();
  auto loop = dyn_cast_or_null<omp::WsloopOp>(terminator->getPrevNode());
  return loop && !loop.getNowait();
}

/// What an op between two parallel regions of a run becomes.
enum class Between {
  /// Free of memory effects: hoisted before the run.
  Hoisted,
  /// Effects but no results: run by one thread in an omp.single.
  Single,
  /// Anything else ends the run.
  EndsRun,
};

Between classify(Operation &op) {
  if (op.hasTrait<OpTrait::IsTerminator>())
    return Between::EndsRun;
  // Calls may reach MPI or the OpenMP runtime, which the master thread
  // alone must call; nested OpenMP ops would nest teams.
  auto callsOrForks = [](Operation *nested) {
    return isa<CallOpInterface>(nested) ||
           isa_and_nonnull<omp::OpenMPDialect>(nested->getDialect());
  };
  if (op.walk([&](Operation *nested) {
          return callsOrForks(nested) ? WalkResult::interrupt() : WalkResult::advance();
        }).wasInterrupted())
    return Between::EndsRun;
  if (isMemoryEffectFree(&op))
    return Between::Hoisted;
  return op.getNumResults() == 0 ? Between::Single : Between::EndsRun;
}

/// A run of mergeable parallel regions of one block, the ops between them
/// to hoist, and per region after the first the ops to run in an
/// omp.single before it.
struct Run {
  SmallVector<omp::ParallelOp> regions;
  SmallVector<Operation *> hoisted;
  SmallVector<SmallVector<Operation *>> singleBefore;
};

/// The run starting at `first`; the op after its last region is returned
/// in `next`.
Run collectRun(omp::ParallelOp first, Operation *&next) {
  Run run;
  run.regions.push_back(first);
  SmallVector<Operation *> hoisted, single;
  Operation *op = first->getNextNode();
  while (op) {
    auto region = dyn_cast<omp::ParallelOp>(op);
    if (region && isMergeable(region)) {
      run.regions.push_back(region);
      run.hoisted.append(hoisted);
      run.singleBefore.push_back(std::move(single));
      hoisted.clear();
      single.clear();
    } else {
      Between between = classify(*op);
      if (between == Between::EndsRun)
        break;
      (between == Between::Hoisted ? hoisted : single).push_back(op);
    }
    op = op->getNextNode();
  }
  next = run.regions.back()->getNextNode();
  return run;
}

/// Moves the bodies of the run's later regions, each after its omp.single
/// of the ops before it, into the first region.
void merge(Run &run) {
  omp::ParallelOp first = run.regions.front();
  for (Operation *op : run.hoisted)
    op->moveBefore(first);
  Block &body = first.getRegion().front();
  Operation *terminator = body.getTerminator();
  OpBuilder b(terminator);
  for (auto [region, serial] : llvm::zip(llvm::drop_begin(run.regions), run.singleBefore)) {
    if (!serial.empty()) {
      auto single = omp::SingleOp::create(b, serial.front()->getLoc(), omp::SingleOperands{});
      Block *singleBody = b.createBlock(&single.getRegion());
      for (Operation *op : serial)
        op->moveBefore(singleBody, singleBody->end());
      b.setInsertionPointToEnd(singleBody);
      omp::TerminatorOp::create(b, single.getLoc());
      b.setInsertionPoint(terminator);
    }
    Block &merged = region.getRegion().front();
    merged.getTerminator()->erase();
    body.getOperations().splice(terminator->getIterator(), merged.getOperations());
    region.erase();
  }
}

struct MergeParallelRegionsPass
    : xfmr::impl::XfmrMergeParallelRegionsBase<MergeParallelRegionsPass> {
  void runOnOperation() override {
    llvm::SetVector<Block *> blocks;
    getOperation()->walk([&](omp::ParallelOp region) { blocks.insert(region->getBlock()); });
    for (Block *block : blocks) {
      Operation *op = &block->front();
      while (op) {
        auto first = dyn_cast<omp::ParallelOp>(op);
        if (!first || !isMergeable(first)) {
          op = op->getNextNode();
          continue;
        }
        Run run = collectRun(first, op);
        if (run.regions.size() < 2)
          continue;
        LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] merging " << run.regions.size()
                                << " regions at " << first.getLoc() << "\n");
        merge(run);
      }
    }
  }
};

} // namespace
