//===- MergeParallelRegions.cpp - one team for consecutive loops -*- C++ -*-===//

#include "xfmr/Transforms/Passes.h"

#include "xfmr/Dialect/XfmrOps.h"

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

/// Whether `call` calls a function declared `xfmr.main_thread_only`: one
/// that uses no OpenMP and may run inside a team if the master thread (the
/// one that started it, which alone may call MPI) calls it.
bool callsMainThreadOnly(CallOpInterface call) {
  auto callee = dyn_cast_or_null<FunctionOpInterface>(call.resolveCallable());
  return callee && callee->hasAttr(xfmr::kMainThreadOnlyAttrName);
}

/// Whether `op` may sit between two regions of a run: not a terminator, and
/// no OpenMP ops (which would nest teams) or calls (which may reach MPI or
/// the OpenMP runtime) in it but of `xfmr.main_thread_only` functions.
bool mayRunBetween(Operation &op) {
  if (op.hasTrait<OpTrait::IsTerminator>())
    return false;
  return !op.walk([](Operation *nested) {
              auto call = dyn_cast<CallOpInterface>(nested);
              return (call && !callsMainThreadOnly(call)) ||
                             isa_and_nonnull<omp::OpenMPDialect>(nested->getDialect())
                         ? WalkResult::interrupt()
                         : WalkResult::advance();
            }).wasInterrupted();
}

/// Whether `op` holds a call: it must run on the master thread.
bool holdsCall(Operation *op) {
  return op->walk([](CallOpInterface) { return WalkResult::interrupt(); }).wasInterrupted();
}

/// Whether `op` or an op nested in it reads a result of an op in `ops`.
bool readsResultOf(Operation &op, const llvm::SetVector<Operation *> &ops) {
  return op
      .walk([&](Operation *nested) {
        return llvm::any_of(nested->getOperands(),
                            [&](Value v) { return ops.contains(v.getDefiningOp()); })
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// The ops between two regions of a run: those free of memory effects and
/// of the others' results, hoisted before the run, and the rest, run by one
/// thread in an omp.single (whose implicit barrier orders them like a
/// loop's). None if a value of the single part is used outside it: the
/// other threads would not have it.
std::optional<std::pair<SmallVector<Operation *>, SmallVector<Operation *>>>
splitBetween(ArrayRef<Operation *> ops) {
  SmallVector<Operation *> hoisted;
  llvm::SetVector<Operation *> single;
  for (Operation *op : ops) {
    if (isMemoryEffectFree(op) && !readsResultOf(*op, single))
      hoisted.push_back(op);
    else
      single.insert(op);
  }
  for (Operation *op : single)
    for (Operation *user : op->getUsers())
      if (!single.contains(op->getBlock()->findAncestorOpInBlock(*user)))
        return std::nullopt;
  return std::make_pair(std::move(hoisted), single.takeVector());
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
  SmallVector<Operation *> between;
  for (Operation *op = first->getNextNode(); op; op = op->getNextNode()) {
    auto region = dyn_cast<omp::ParallelOp>(op);
    if (!region || !isMergeable(region)) {
      if (!mayRunBetween(*op))
        break;
      between.push_back(op);
      continue;
    }
    auto split = splitBetween(between);
    if (!split)
      break;
    run.regions.push_back(region);
    run.hoisted.append(split->first);
    run.singleBefore.push_back(std::move(split->second));
    between.clear();
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
      // One thread runs them, then a barrier: omp.single's implicit one, or
      // after omp.master where a call must come from the master thread.
      Location loc = serial.front()->getLoc();
      bool onMaster = llvm::any_of(serial, holdsCall);
      Operation *oneThread = onMaster ? omp::MasterOp::create(b, loc).getOperation()
                                      : omp::SingleOp::create(b, loc, omp::SingleOperands{});
      Block *oneThreadBody = b.createBlock(&oneThread->getRegion(0));
      for (Operation *op : serial)
        op->moveBefore(oneThreadBody, oneThreadBody->end());
      b.setInsertionPointToEnd(oneThreadBody);
      omp::TerminatorOp::create(b, loc);
      b.setInsertionPoint(terminator);
      if (onMaster)
        omp::BarrierOp::create(b, loc);
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
