//===- AsyncOrderChecker.cpp - async order of emulated MMA kernels --------===//

#include "AsyncOrderChecker.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace xfmr::gpu;

void AsyncOrderChecker::track(ArrayRef<Value> arrays, int64_t buffersPerArray) {
  if (!enabled)
    return;
  trackedArrays.assign(arrays.begin(), arrays.end());
  buffers = buffersPerArray;
  int64_t tiles = arrays.size() * buffers;
  Type indexType = kb.builder().getIndexType();
  counters = block.privateArray({kCounters}, indexType);
  lastMmaRead = block.privateArray({tiles}, indexType);
  lastCopy = block.privateArray({tiles}, indexType);
  lastStore = block.privateArray({tiles}, indexType);
  block.phase(
      [&](Value t) {
        for (int64_t i = 0; i < kCounters; ++i)
          kb.store(kb.index(0), counters, counterAt(t, Counter(i)));
        for (int64_t i = 0; i < tiles; ++i)
          for (Value array : {lastMmaRead, lastCopy, lastStore})
            kb.store(kb.index(-1), array, block.at(t, {kb.index(i)}));
      },
      /*barrier=*/false);
  block.setBarrierHook([this](Value t) {
    kb.store(kb.load(counters, counterAt(t, kMmaDone)), counters, counterAt(t, kMmaDoneAtBarrier));
    kb.store(kb.load(counters, counterAt(t, kCopiesDone)), counters,
             counterAt(t, kCopiesDoneAtBarrier));
    countIssued(t, kBarriers);
  });
}

SmallVector<Value> AsyncOrderChecker::counterAt(Value t, Counter counter) {
  return block.at(t, {kb.index(counter)});
}

SmallVector<Value> AsyncOrderChecker::tileAt(Value t, Value array, Value buffer) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  auto address = [&](Value memref) -> Value {
    return memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  };
  Value arrayAddress = address(array);
  Value index = kb.index(trackedArrays.size());
  for (auto [i, tracked] : llvm::enumerate(trackedArrays))
    index = kb.select(
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, arrayAddress, address(tracked)),
        kb.index(i), index);
  cf::AssertOp::create(b, loc, kb.below(index, trackedArrays.size()),
                       "emulated MMA: an operand outside the block's shared tiles");
  Value tile = kb.muli(index, buffers);
  if (buffer)
    tile = kb.addi(tile, buffer);
  return block.at(t, {tile});
}

/// Asserts that `event` (-1: none) is below `bound`.
static void assertBefore(xfmr::kernels::KernelBuilder &kb, Value event, Value bound,
                         StringRef message) {
  OpBuilder &b = kb.builder();
  cf::AssertOp::create(
      b, kb.location(),
      arith::CmpIOp::create(b, kb.location(), arith::CmpIPredicate::slt, event, bound), message);
}

void AsyncOrderChecker::noteMmaRead(Value t, Value array, Value buffer) {
  if (!enabled)
    return;
  SmallVector<Value> tile = tileAt(t, array, buffer);
  assertBefore(kb, kb.load(lastCopy, tile), kb.load(counters, counterAt(t, kCopiesDoneAtBarrier)),
               "emulated MMA: a shared tile read before the copies into it were waited "
               "for and a barrier passed");
  assertBefore(kb, kb.load(lastStore, tile), kb.load(counters, counterAt(t, kBarriers)),
               "emulated MMA: a shared tile read before a barrier after the stores "
               "into it");
  kb.store(kb.load(counters, counterAt(t, kMmaIssued)), lastMmaRead, tile);
}

void AsyncOrderChecker::noteWrite(Value t, Value array, bool copy, Value buffer) {
  if (!enabled)
    return;
  SmallVector<Value> tile = tileAt(t, array, buffer);
  assertBefore(kb, kb.load(lastMmaRead, tile), kb.load(counters, counterAt(t, kMmaDoneAtBarrier)),
               "emulated MMA: a shared tile written before the MMAs reading it were "
               "waited for and a barrier passed");
  if (copy)
    kb.store(kb.load(counters, counterAt(t, kCopiesIssued)), lastCopy, tile);
  else
    kb.store(kb.load(counters, counterAt(t, kBarriers)), lastStore, tile);
}

void AsyncOrderChecker::commitMmas(Value t) { countIssued(t, kMmaIssued); }
void AsyncOrderChecker::commitCopies(Value t) { countIssued(t, kCopiesIssued); }
void AsyncOrderChecker::waitForMmas(Value t, int64_t pending) {
  countDone(t, kMmaIssued, kMmaDone, pending);
}
void AsyncOrderChecker::waitForCopies(Value t, int64_t pending) {
  countDone(t, kCopiesIssued, kCopiesDone, pending);
}

void AsyncOrderChecker::countIssued(Value t, Counter issued) {
  if (!enabled)
    return;
  SmallVector<Value> at = counterAt(t, issued);
  kb.store(kb.addi(kb.load(counters, at), kb.index(1)), counters, at);
}

void AsyncOrderChecker::countDone(Value t, Counter issued, Counter done, int64_t pending) {
  if (!enabled)
    return;
  OpBuilder &b = kb.builder();
  Value waited = arith::SubIOp::create(b, kb.location(), kb.load(counters, counterAt(t, issued)),
                                       kb.index(pending));
  SmallVector<Value> at = counterAt(t, done);
  kb.store(arith::MaxSIOp::create(b, kb.location(), kb.load(counters, at), waited), counters, at);
}
