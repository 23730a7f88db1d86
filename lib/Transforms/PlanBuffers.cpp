//===- PlanBuffers.cpp - temporaries on stacks and in one arena -*- C++ -*-===//

#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-plan-buffers"

namespace xfmr {
#define GEN_PASS_DEF_XFMRPLANBUFFERS
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

constexpr int64_t kAlignment = 64;

/// Bytes of a static, identity-layout memref of ints or floats in the default
/// memory space (i1 takes a byte, as LLVM stores it); nullopt for any other.
std::optional<int64_t> staticBytes(MemRefType type) {
  if (!type.hasStaticShape() || !type.getLayout().isIdentity() || type.getMemorySpace() ||
      !type.getElementType().isIntOrFloat())
    return std::nullopt;
  return type.getNumElements() * llvm::divideCeil(type.getElementTypeBitWidth(), 8);
}

/// The one `memref.dealloc` of `alloc`, if it frees it in the alloc's block.
memref::DeallocOp deallocInSameBlock(memref::AllocOp alloc) {
  memref::DeallocOp found;
  for (Operation *user : alloc->getUsers()) {
    auto dealloc = dyn_cast<memref::DeallocOp>(user);
    if (!dealloc)
      continue;
    if (found || dealloc->getBlock() != alloc->getBlock())
      return nullptr;
    found = dealloc;
  }
  return found;
}

//===----------------------------------------------------------------------===//
// Parallel-loop temporaries to the stack
//===----------------------------------------------------------------------===//

/// Allocations of at most `maxBytes` in all, directly in an scf.forall body
/// and freed there, become stack allocations. That body must become an
/// allocation scope downstream (scf-to-openmp makes each OpenMP loop body
/// one), so that an iteration's allocations are freed at its end.
void promoteParallelLoopTemporaries(func::FuncOp func, int64_t maxBytes) {
  func.walk([&](scf::ForallOp loop) {
    int64_t bytesInAll = 0;
    unsigned promoted = 0;
    for (auto alloc : llvm::to_vector(loop.getBody()->getOps<memref::AllocOp>())) {
      std::optional<int64_t> bytes = staticBytes(alloc.getType());
      memref::DeallocOp dealloc = deallocInSameBlock(alloc);
      if (!bytes || !dealloc || bytesInAll + *bytes > maxBytes)
        continue;
      bytesInAll += *bytes;
      ++promoted;
      OpBuilder builder(alloc);
      auto alloca = memref::AllocaOp::create(builder, alloc.getLoc(), alloc.getType(),
                                             alloc.getAlignmentAttr());
      alloc.replaceAllUsesWith(alloca.getResult());
      dealloc.erase();
      alloc.erase();
    }
    LLVM_DEBUG(if (promoted) llvm::dbgs() << "[" DEBUG_TYPE "] " << promoted << " temporaries, "
                                          << bytesInAll << " bytes, on a parallel loop's stack\n");
  });
}

//===----------------------------------------------------------------------===//
// Body temporaries in one arena
//===----------------------------------------------------------------------===//

struct Temporary {
  memref::AllocOp alloc;
  memref::DeallocOp dealloc;
  int64_t bytes;
  /// Positions in the body of the allocation and of its last use (not its
  /// dealloc).
  unsigned first, last;
  int64_t offset = 0;
};

/// The last call that `address` reaches as an argument (directly or as an
/// i64), or nullopt if the address goes anywhere else: compared with another
/// temporary's, it could now be equal. The buffer is free once that call
/// returns (the runtime's all-reduce of a gradient, or the wait of one
/// started earlier).
std::optional<Operation *> lastCallTaking(memref::ExtractAlignedPointerAsIndexOp address) {
  Operation *last = nullptr;
  auto consider = [&](Operation *call) {
    if (!last || last->isBeforeInBlock(call))
      last = call;
  };
  for (Operation *user : address->getUsers()) {
    if (isa<func::CallOp>(user) && user->getBlock() == address->getBlock()) {
      consider(user);
      continue;
    }
    if (!isa<arith::IndexCastOp>(user))
      return std::nullopt;
    for (Operation *castUser : user->getUsers()) {
      if (!isa<func::CallOp>(castUser) || castUser->getBlock() != address->getBlock())
        return std::nullopt;
      consider(castUser);
    }
  }
  return last;
}

/// The live range of the body-level `alloc` through all its aliases, or
/// nullopt if a use is not one the plan can follow: the buffer returned,
/// passed to a call as a memref, freed through an alias, carried into a
/// region, or its address taken for anything but a call.
std::optional<Temporary> liveRange(memref::AllocOp alloc, memref::DeallocOp dealloc,
                                   const llvm::DenseMap<Operation *, unsigned> &position) {
  Block *body = alloc->getBlock();
  Temporary temporary{alloc, dealloc, 0, position.lookup(alloc), position.lookup(alloc)};
  SmallVector<Value> worklist{alloc.getResult()};
  llvm::SmallPtrSet<Value, 8> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      // Deallocation frees at the block's end, after the last use: the range
      // ends at that use.
      if (user == dealloc)
        continue;
      if (isa<func::ReturnOp, func::CallOp, memref::DeallocOp>(user))
        return std::nullopt;
      if (auto address = dyn_cast<memref::ExtractAlignedPointerAsIndexOp>(user)) {
        std::optional<Operation *> lastCall = lastCallTaking(address);
        if (!lastCall)
          return std::nullopt;
        if (*lastCall)
          temporary.last =
              std::max(temporary.last, position.lookup(body->findAncestorOpInBlock(**lastCall)));
      }
      for (Region &region : user->getRegions())
        for (Block &block : region)
          if (llvm::any_of(block.getArgumentTypes(), llvm::IsaPred<BaseMemRefType>))
            return std::nullopt;
      for (Value result : user->getResults())
        if (isa<BaseMemRefType>(result.getType()))
          worklist.push_back(result);
      // A region's terminator may yield the buffer as its parent's result.
      if (user->hasTrait<OpTrait::IsTerminator>() && user->getBlock() != body)
        for (Value result : user->getParentOp()->getResults())
          if (isa<BaseMemRefType>(result.getType()))
            worklist.push_back(result);
      Operation *inBody = body->findAncestorOpInBlock(*user);
      temporary.last = std::max(temporary.last, position.lookup(inBody));
    }
  }
  return temporary;
}

/// First fit, largest first: each temporary at the lowest aligned offset
/// that no temporary live at the same time occupies. Returns the arena's
/// size.
int64_t assignOffsets(MutableArrayRef<Temporary> temporaries) {
  SmallVector<Temporary *> order;
  for (Temporary &temporary : temporaries)
    order.push_back(&temporary);
  llvm::sort(order, [](Temporary *a, Temporary *b) {
    return std::make_pair(-a->bytes, a->first) < std::make_pair(-b->bytes, b->first);
  });
  int64_t arenaBytes = 0;
  SmallVector<Temporary *> placed;
  for (Temporary *temporary : order) {
    SmallVector<std::pair<int64_t, int64_t>> taken;
    for (Temporary *other : placed)
      if (other->first <= temporary->last && temporary->first <= other->last)
        taken.push_back({other->offset, other->offset + other->bytes});
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + temporary->bytes <= begin)
        break;
      offset = std::max<int64_t>(offset, llvm::alignTo(end, kAlignment));
    }
    temporary->offset = offset;
    arenaBytes = std::max(arenaBytes, offset + temporary->bytes);
    placed.push_back(temporary);
  }
  return llvm::alignTo(arenaBytes, kAlignment);
}

/// Replaces the body-level temporaries of `func` by views of one arena.
void planBodyTemporaries(func::FuncOp func, bool globalArena, SymbolTable &symbols) {
  if (!func.getBody().hasOneBlock())
    return;
  Block &body = func.getBody().front();
  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [index, op] : llvm::enumerate(body))
    position[&op] = index;
  SmallVector<Temporary> temporaries;
  for (auto alloc : body.getOps<memref::AllocOp>()) {
    std::optional<int64_t> bytes = staticBytes(alloc.getType());
    memref::DeallocOp dealloc = deallocInSameBlock(alloc);
    if (!bytes || !dealloc)
      continue;
    if (std::optional<Temporary> temporary = liveRange(alloc, dealloc, position)) {
      temporary->bytes = *bytes;
      temporaries.push_back(*temporary);
    }
  }
  if (temporaries.empty())
    return;
  int64_t arenaBytes = assignOffsets(temporaries);
  func->setAttr(xfmr::kArenaBytesAttr,
                IntegerAttr::get(IntegerType::get(func.getContext(), 64), arenaBytes));

  Location loc = func.getLoc();
  MLIRContext *context = func.getContext();
  auto arenaType = MemRefType::get({arenaBytes}, IntegerType::get(context, 8));
  OpBuilder builder = OpBuilder::atBlockBegin(&body);
  Value arena;
  if (globalArena) {
    OpBuilder moduleBuilder(func);
    auto global =
        memref::GlobalOp::create(moduleBuilder, loc, ("__xfmr_arena_" + func.getSymName()).str(),
                                 builder.getStringAttr("private"), arenaType, builder.getUnitAttr(),
                                 /*constant=*/false, builder.getI64IntegerAttr(kAlignment));
    symbols.insert(global);
    arena = memref::GetGlobalOp::create(builder, loc, arenaType, global.getSymName());
  } else {
    arena = memref::AllocOp::create(builder, loc, arenaType, builder.getI64IntegerAttr(kAlignment));
    OpBuilder atEnd(body.getTerminator());
    memref::DeallocOp::create(atEnd, loc, arena);
  }
  [[maybe_unused]] int64_t summed = 0;
  for (Temporary &temporary : temporaries) {
    OpBuilder at(temporary.alloc);
    Value offset = arith::ConstantIndexOp::create(at, loc, temporary.offset);
    auto view = memref::ViewOp::create(at, temporary.alloc.getLoc(), temporary.alloc.getType(),
                                       arena, offset, ValueRange{});
    temporary.alloc.replaceAllUsesWith(view.getResult());
    temporary.dealloc.erase();
    temporary.alloc.erase();
    summed += temporary.bytes;
  }
  LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] @" << func.getSymName() << ": " << temporaries.size()
                          << " temporaries of " << summed << " bytes in an arena of " << arenaBytes
                          << "\n");
}

struct PlanBuffersPass : xfmr::impl::XfmrPlanBuffersBase<PlanBuffersPass> {
  using Base::Base;

  void runOnOperation() override {
    if (maxStackBytes < 0) {
      getOperation()->emitError("xfmr-plan-buffers: max-stack-bytes must not be negative");
      return signalPassFailure();
    }
    SymbolTable symbols(getOperation());
    for (auto func : llvm::to_vector(getOperation().getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      if (parallelLoopScopes)
        promoteParallelLoopTemporaries(func, maxStackBytes);
      planBodyTemporaries(func, globalArena, symbols);
    }
  }
};

} // namespace
