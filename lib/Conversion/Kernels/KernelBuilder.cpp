//===- KernelBuilder.cpp - writing kernels as MLIR --------------*- C++ -*-===//

#include "KernelBuilder.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace xfmr::kernels;

Value KernelBuilder::index(int64_t value) { return arith::ConstantIndexOp::create(b, loc, value); }

Value KernelBuilder::f32(double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(static_cast<float>(value)));
}

VectorType KernelBuilder::vectorType(int64_t lanes) {
  return VectorType::get({lanes}, b.getF32Type());
}

Value KernelBuilder::splat(Value value, int64_t lanes) {
  return vector::BroadcastOp::create(b, loc, vectorType(lanes), value);
}

Value KernelBuilder::splat(double value, int64_t lanes) {
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(vectorType(lanes), b.getF32FloatAttr(static_cast<float>(value))));
}

Value KernelBuilder::add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
Value KernelBuilder::sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
Value KernelBuilder::mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
Value KernelBuilder::div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
Value KernelBuilder::max(Value x, Value y) {
  // x86's maxps is exactly `x > y ? x : y`; arith.maxnumf would be expanded
  // (arith-expand) into a compare, an unordered check and two selects.
  Value greater = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, y);
  return select(greater, x, y);
}
Value KernelBuilder::fma(Value a, Value x, Value c) {
  if (isa<VectorType>(a.getType()))
    return vector::FMAOp::create(b, loc, a, x, c);
  return math::FmaOp::create(b, loc, a, x, c);
}
Value KernelBuilder::exp(Value x) { return math::ExpOp::create(b, loc, x); }
Value KernelBuilder::expShifted(Value x, Value shift) {
  auto vector = dyn_cast<VectorType>(x.getType());
  Value zero = vector ? splat(0.0, vector.getNumElements()) : f32(0.0);
  return select(equals(x, kNegInf), zero, exp(sub(x, shift)));
}

Value KernelBuilder::rsqrt(Value x) { return math::RsqrtOp::create(b, loc, x); }
Value KernelBuilder::log(Value x) { return math::LogOp::create(b, loc, x); }
Value KernelBuilder::equals(Value x, double value) {
  Value constant = isa<VectorType>(x.getType())
                       ? splat(value, cast<VectorType>(x.getType()).getNumElements())
                       : f32(value);
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, constant);
}
Value KernelBuilder::addi(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
Value KernelBuilder::muli(Value x, int64_t y) { return arith::MulIOp::create(b, loc, x, index(y)); }
Value KernelBuilder::mini(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
Value KernelBuilder::divui(Value x, int64_t y) {
  return arith::DivUIOp::create(b, loc, x, index(y));
}
Value KernelBuilder::remui(Value x, int64_t y) {
  return arith::RemUIOp::create(b, loc, x, index(y));
}
Value KernelBuilder::below(Value x, Value bound) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x, bound);
}
Value KernelBuilder::below(Value x, int64_t bound) { return below(x, index(bound)); }
Value KernelBuilder::select(Value condition, Value x, Value y) {
  return arith::SelectOp::create(b, loc, condition, x, y);
}

Value KernelBuilder::readBuffer(Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<int64_t> strides(type.getRank(), ShapedType::kDynamic);
  if (!strides.empty())
    strides.back() = 1;
  auto layout = StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides);
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType(), layout);
  return bufferization::ToBufferOp::create(b, loc, memrefType, tensor, b.getUnitAttr());
}

Value KernelBuilder::allocate(ArrayRef<int64_t> shape, Type elementType) {
  // 64-byte alignment: whole cache lines, aligned vector stores.
  return memref::AllocOp::create(b, loc, MemRefType::get(shape, elementType),
                                 b.getI64IntegerAttr(64));
}

Value KernelBuilder::asTensor(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  // A kernel's own allocation may be written in place by the tensor ops
  // that consume its result (as an all-reduce of a gradient is), instead
  // of through a copy; a view of another tensor's buffer may not.
  bool writable = isa_and_nonnull<memref::AllocOp>(buffer.getDefiningOp());
  return bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get(type.getShape(), type.getElementType()), buffer,
      /*restrict=*/true, writable);
}

Value KernelBuilder::load(Value buffer, ValueRange indices) {
  return memref::LoadOp::create(b, loc, buffer, indices);
}

void KernelBuilder::store(Value value, Value buffer, ValueRange indices) {
  memref::StoreOp::create(b, loc, value, buffer, indices);
}

void KernelBuilder::prefetch(Value buffer, ValueRange indices) {
  memref::PrefetchOp::create(b, loc, buffer, indices, /*isWrite=*/false, /*localityHint=*/2,
                             /*isDataCache=*/true);
}

Value KernelBuilder::loadWidened(Value buffer, ValueRange indices) {
  Value value = load(buffer, indices);
  if (value.getType().isF32())
    return value;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), value);
}

void KernelBuilder::storeRounded(Value value, Value buffer, ValueRange indices) {
  Type type = cast<MemRefType>(buffer.getType()).getElementType();
  if (type != value.getType())
    value = arith::TruncFOp::create(b, loc, type, value);
  store(value, buffer, indices);
}

ValueRange KernelBuilder::forLoop(Value lower, Value upper, int64_t step, ValueRange init,
                                  function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, loc, lower, upper, index(step), init);
  OpBuilder::InsertionGuard guard(b);
  Block *block = loop.getBody();
  if (block->mightHaveTerminator())
    block->getTerminator()->erase();
  b.setInsertionPointToEnd(block);
  SmallVector<Value> results = body(loop.getInductionVar(), loop.getRegionIterArgs());
  scf::YieldOp::create(b, loc, results);
  return loop.getResults();
}

void KernelBuilder::forLoop(Value lower, Value upper, int64_t step,
                            function_ref<void(Value)> body) {
  auto loop = scf::ForOp::create(b, loc, lower, upper, index(step));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  body(loop.getInductionVar());
}

void KernelBuilder::parallelFor(int64_t count, function_ref<void(Value)> body) {
  SmallVector<OpFoldResult> upper = {b.getIndexAttr(count)};
  auto forall = scf::ForallOp::create(b, loc, upper, ValueRange{}, std::nullopt, nullptr);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(forall.getTerminator());
  body(forall.getInductionVar(0));
}

void KernelBuilder::ifThen(Value condition, function_ref<void()> body) {
  auto branch = scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(branch.thenBlock()->getTerminator());
  body();
}

void KernelBuilder::ifThenElse(Value condition, function_ref<void()> thenBody,
                               function_ref<void()> elseBody) {
  auto branch = scf::IfOp::create(b, loc, condition, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(branch.thenBlock()->getTerminator());
  thenBody();
  b.setInsertionPoint(branch.elseBlock()->getTerminator());
  elseBody();
}

void KernelBuilder::forRowTiles(Value begin, int64_t count, int64_t tile,
                                function_ref<void(Value, int64_t)> body) {
  int64_t full = count / tile * tile;
  if (full > 0)
    forLoop(begin, addi(begin, index(full)), tile, [&](Value row) { body(row, tile); });
  if (count % tile)
    body(addi(begin, index(full)), count % tile);
}
