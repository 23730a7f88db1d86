//===- AttentionLimits.cpp - which keys an attention query sees -----------===//

#include "AttentionLimits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace xfmr::kernels;

Value AttentionLimits::index(int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value AttentionLimits::clamp(Value value, int64_t limit) {
  value = arith::MinSIOp::create(b, loc, value, index(limit));
  return arith::MaxSIOp::create(b, loc, value, index(0));
}

Value AttentionLimits::perSequence(Value values, Value batch, int64_t limit) {
  Value element = isa<MemRefType>(values.getType())
                      ? memref::LoadOp::create(b, loc, values, ValueRange{batch}).getResult()
                      : tensor::ExtractOp::create(b, loc, values, ValueRange{batch}).getResult();
  return clamp(arith::IndexCastOp::create(b, loc, b.getIndexType(), element), limit);
}

Value AttentionLimits::keyCount(Value batch) {
  return masks.keyLength ? perSequence(masks.keyLength, batch, masks.seqK) : index(masks.seqK);
}

Value AttentionLimits::queryOffset(Value batch) {
  return masks.queryOffset ? perSequence(masks.queryOffset, batch, masks.seqK)
                           : index(masks.seqK - masks.seqQ);
}

Value AttentionLimits::visibleEnd(Value batch, Value query) {
  Value end = keyCount(batch);
  if (!masks.causal)
    return end;
  // Signed: a query before the keys' frame (seq_k < seq_q) sees none.
  Value diagonal = arith::AddIOp::create(
      b, loc, arith::AddIOp::create(b, loc, query, queryOffset(batch)), index(1));
  return arith::MaxSIOp::create(b, loc, arith::MinSIOp::create(b, loc, end, diagonal), index(0));
}

Value AttentionLimits::visibleBegin(Value batch, Value query) {
  if (!masks.window)
    return index(0);
  Value position = arith::AddIOp::create(b, loc, query, queryOffset(batch));
  Value begin = arith::SubIOp::create(b, loc, position, index(masks.window - 1));
  return clamp(begin, masks.seqK);
}

Value AttentionLimits::isVisible(Value batch, Value query, Value key) {
  Value belowEnd =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, key, visibleEnd(batch, query));
  if (!masks.window)
    return belowEnd;
  Value fromBegin =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, key, visibleBegin(batch, query));
  return arith::AndIOp::create(b, loc, belowEnd, fromBegin);
}

Value AttentionLimits::firstKeyTile(Value batch, Value first, int64_t tileKeys) {
  if (!masks.window)
    return index(0);
  return arith::DivSIOp::create(b, loc, visibleBegin(batch, first), index(tileKeys));
}

Value AttentionLimits::keyTiles(Value batch, Value first, int64_t rows, int64_t tileKeys) {
  Value last = arith::AddIOp::create(b, loc, first, index(rows - 1));
  if (masks.causal)
    last = arith::MinSIOp::create(b, loc, last, index(masks.seqQ - 1));
  return arith::CeilDivSIOp::create(b, loc, visibleEnd(batch, last), index(tileKeys));
}

Value AttentionLimits::unmaskedKeyTiles(Value batch, Value first, int64_t tileKeys) {
  if (masks.window)
    return index(0);
  return arith::DivSIOp::create(b, loc, visibleEnd(batch, first), index(tileKeys));
}

Value AttentionLimits::firstQuerySeeing(Value batch, Value key) {
  if (!masks.causal)
    return index(0);
  return clamp(arith::SubIOp::create(b, loc, key, queryOffset(batch)), masks.seqQ);
}

Value AttentionLimits::queryTilesSeeing(Value batch, Value key, int64_t tileRows) {
  if (!masks.window)
    return index(llvm::divideCeilSigned(masks.seqQ, tileRows));
  return arith::CeilDivSIOp::create(b, loc, queriesSeeingEnd(batch, key), index(tileRows));
}

Value AttentionLimits::queriesSeeingEnd(Value batch, Value key) {
  if (!masks.window)
    return index(masks.seqQ);
  // Query i's window reaches down to its position - (window - 1).
  Value last = arith::AddIOp::create(b, loc, arith::SubIOp::create(b, loc, key, queryOffset(batch)),
                                     index(masks.window));
  return clamp(last, masks.seqQ);
}
