//===- KernelBuilder.cpp - writing CPU kernels as MLIR ----------*- C++ -*-===//

#include "KernelBuilder.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace xfmr::kernels;

Value KernelBuilder::index(int64_t value) { return arith::ConstantIndexOp::create(b, loc, value); }

Value KernelBuilder::f32(double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(static_cast<float>(value)));
}

VectorType KernelBuilder::vectorType(int64_t lanes) {
  return VectorType::get({lanes ? lanes : target.lanes}, b.getF32Type());
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

Value KernelBuilder::exp2NonPositive(Value x) {
  auto type = cast<VectorType>(x.getType());
  auto intType = VectorType::get(type.getShape(), b.getI32Type());
  auto intSplat = [&](int32_t value) {
    return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(intType, value));
  };
  // 2^x = 2^k 2^f with k = round(x), |f| <= 1/2. Below -127, k = -127 makes
  // the 2^k factor's exponent field 0: the result is 0, as for x = -inf.
  // The operands are in this order so that a NaN x stays NaN.
  x = max(splat(-127.0), x);
  Value k = math::RoundEvenOp::create(b, loc, x);
  Value f = sub(x, k);
  // Minimax polynomial for 2^f on [-1/2, 1/2], relative error 7.5e-8
  // (Lawson-weighted least squares in float64).
  static constexpr double kCoefficients[] = {1.00000007, 0.69314697, 0.2402212,
                                             0.05550713, 0.00967554, 0.00132765};
  Value poly = splat(kCoefficients[5]);
  for (int i = 4; i >= 0; --i)
    poly = fma(poly, f, splat(kCoefficients[i]));
  Value biased =
      arith::AddIOp::create(b, loc, arith::FPToSIOp::create(b, loc, intType, k), intSplat(127));
  Value scale =
      arith::BitcastOp::create(b, loc, type, arith::ShLIOp::create(b, loc, biased, intSplat(23)));
  return mul(poly, scale);
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

SmallVector<Value> KernelBuilder::transpose(ArrayRef<Value> rows) {
  // At each block size s (half the lanes, then a quarter, ..., 1), rows i
  // and i + s (i & s == 0) swap their off-diagonal s-blocks: element j of
  // row i with j & s set trades places with element j - s of row i + s.
  // Transposing 2 x 2 blocks of blocks at every scale transposes the whole.
  int64_t lanes = static_cast<int64_t>(rows.size());
  assert(llvm::isPowerOf2_64(lanes) && "transpose of a power-of-2 square");
  SmallVector<Value> result(rows);
  for (int64_t s = lanes / 2; s >= 1; s /= 2)
    for (int64_t i = 0; i < lanes; ++i) {
      if (i & s)
        continue;
      // Shuffle indices: [0, lanes) from row i, [lanes, 2 lanes) from i + s.
      SmallVector<int64_t> upper, lower;
      for (int64_t j = 0; j < lanes; ++j) {
        upper.push_back(j & s ? lanes + j - s : j);
        lower.push_back(j & s ? lanes + j : j + s);
      }
      Value top = vector::ShuffleOp::create(b, loc, result[i], result[i + s], upper);
      Value bottom = vector::ShuffleOp::create(b, loc, result[i], result[i + s], lower);
      result[i] = top;
      result[i + s] = bottom;
    }
  return result;
}

Value KernelBuilder::reduceMax(Value vector) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXNUMF, vector,
                                     arith::FastMathFlags::nnan);
}

/// A call of the LLVM intrinsic `name` through its declaration, which LLVM
/// IR takes for the intrinsic: unlike llvm.call_intrinsic, a func.call is an
/// op that bufferization and buffer deallocation reason about.
static Value callIntrinsic(OpBuilder &b, Location loc, StringRef name, Type result,
                           ValueRange operands) {
  auto module = b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  auto callee = module.lookupSymbol<func::FuncOp>(name);
  if (!callee) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    callee = func::FuncOp::create(b, loc, name, b.getFunctionType(operands.getTypes(), result));
    callee.setPrivate();
  }
  return func::CallOp::create(b, loc, callee, operands).getResult(0);
}

Value KernelBuilder::dotInt8(Value acc, Value u, Value s, int64_t uBits) {
  return dotInt8(acc, ValueRange{u}, ValueRange{s}, uBits);
}

Value KernelBuilder::dotInt8(Value acc, ValueRange u, ValueRange s, int64_t uBits) {
  int64_t lanes = cast<VectorType>(acc.getType()).getNumElements();
  assert(target.integerDot != IntegerDot::None && lanes == target.lanes && u.size() == s.size() &&
         "integer dot products of the target's width");
  bool wide = lanes == 16;
  if (target.integerDot == IntegerDot::Portable) {
    // Each lane's 4 products, widened to i32, summed a stride at a time.
    auto quads = VectorType::get({4 * lanes}, b.getI32Type());
    for (auto [unsignedBytes, signedBytes] : llvm::zip_equal(u, s)) {
      Value products =
          arith::MulIOp::create(b, loc, arith::ExtUIOp::create(b, loc, quads, unsignedBytes),
                                arith::ExtSIOp::create(b, loc, quads, signedBytes));
      for (int64_t j = 0; j < 4; ++j) {
        SmallVector<int64_t> stride;
        for (int64_t lane = 0; lane < lanes; ++lane)
          stride.push_back(4 * lane + j);
        acc = arith::AddIOp::create(b, loc, acc,
                                    vector::ShuffleOp::create(b, loc, products, products, stride));
      }
    }
    return acc;
  }
  if (target.integerDot == IntegerDot::Vnni) {
    for (auto [unsignedBytes, signedBytes] : llvm::zip_equal(u, s))
      acc = callIntrinsic(b, loc,
                          wide ? "llvm.x86.avx512.vpdpbusd.512" : "llvm.x86.avx512.vpdpbusd.256",
                          acc.getType(), {acc, unsignedBytes, signedBytes});
    return acc;
  }

  // vpmaddubsw sums pairs of products of unsigned and signed bytes to i16
  // with saturation, each pair sum then widened and summed in pairs by
  // vpmaddwd. Unsigned u below 2^uBits < 128 is exact (2 x 127 x -128 at
  // least); 8-bit u is signed (int8Offset() is 0) and multiplies as |u|
  // times s with u's sign, exact as s > -128 (2 x 128 x 127 < 2^15). Sums of
  // 4-bit u's pair sums stay exact in i16 for up to 8 of them
  // (8 x 2 x 15 x 128 < 2^15).
  auto pairs = VectorType::get({2 * lanes}, b.getI16Type());
  auto pairSums = [&](Value unsignedBytes, Value signedBytes) -> Value {
    return callIntrinsic(b, loc,
                         wide ? "llvm.x86.avx512.pmaddubs.w.512" : "llvm.x86.avx2.pmadd.ub.sw",
                         pairs, {unsignedBytes, signedBytes});
  };
  auto widenAdd = [&](Value sums) {
    Value ones = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(pairs, b.getIntegerAttr(b.getI16Type(), 1)));
    Value quads =
        callIntrinsic(b, loc, wide ? "llvm.x86.avx512.pmaddw.d.512" : "llvm.x86.avx2.pmadd.wd",
                      acc.getType(), {sums, ones});
    acc = arith::AddIOp::create(b, loc, acc, quads);
  };
  if (uBits <= 4 && u.size() <= 8) {
    Value sums;
    for (auto [unsignedBytes, signedBytes] : llvm::zip_equal(u, s)) {
      Value next = pairSums(unsignedBytes, signedBytes);
      sums = sums ? arith::AddIOp::create(b, loc, sums, next).getResult() : next;
    }
    widenAdd(sums);
    return acc;
  }
  // s with the sign of x (zero where x is: |x| is too): vpsignb on AVX2,
  // which AVX-512 lacks.
  auto withSignOf = [&](Value x, Value signedBytes) -> Value {
    if (!wide)
      return callIntrinsic(b, loc, "llvm.x86.avx2.psign.b", signedBytes.getType(),
                           {signedBytes, x});
    Value zeros = arith::ConstantOp::create(b, loc, b.getZeroAttr(signedBytes.getType()));
    return arith::SelectOp::create(
        b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, zeros),
        arith::SubIOp::create(b, loc, zeros, signedBytes), signedBytes);
  };
  for (auto [bBytes, signedBytes] : llvm::zip_equal(u, s)) {
    if (uBits < 8) {
      widenAdd(pairSums(bBytes, signedBytes));
      continue;
    }
    Value magnitudes = math::AbsIOp::create(b, loc, bBytes);
    widenAdd(pairSums(magnitudes, withSignOf(bBytes, signedBytes)));
  }
  return acc;
}

Value KernelBuilder::dotBf16(Value acc, Value x, Value y) {
  assert(target.bf16Dot && target.lanes == 16 && "vdpbf16ps is AVX-512 BF16's");
  return callIntrinsic(b, loc, "llvm.x86.avx512bf16.dpbf16ps.512", acc.getType(), {acc, x, y});
}

Value KernelBuilder::reduceAdd(Value vector) {
  // A tree of adds rather than a chain through each lane in order.
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, vector,
                                     arith::FastMathFlags::reassoc);
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

Value KernelBuilder::loadVector(Value buffer, ValueRange indices, int64_t valid, double padding,
                                int64_t lanes) {
  VectorType type = vectorType(lanes);
  if (valid < 0 || valid >= type.getNumElements())
    return vector::LoadOp::create(b, loc, type, buffer, indices);
  return loadVector(buffer, indices, valid, splat(padding, type.getNumElements()));
}

Value KernelBuilder::loadVector(Value buffer, ValueRange indices, int64_t valid,
                                Value passThrough) {
  auto type = cast<VectorType>(passThrough.getType());
  if (valid < 0 || valid >= type.getNumElements())
    return vector::LoadOp::create(b, loc, type, buffer, indices);
  auto maskType = VectorType::get(type.getShape(), b.getI1Type());
  Value mask = vector::ConstantMaskOp::create(b, loc, maskType, ArrayRef<int64_t>{valid});
  return vector::MaskedLoadOp::create(b, loc, type, buffer, indices, mask, passThrough);
}

Value KernelBuilder::loadVectorWidened(Value buffer, ValueRange indices, int64_t valid) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  if (element.isF32())
    return loadVector(buffer, indices, valid);
  VectorType wide = vectorType();
  auto narrow = VectorType::get(wide.getShape(), element);
  Value zeros = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(narrow, b.getFloatAttr(element, 0.0)));
  return arith::ExtFOp::create(b, loc, wide, loadVector(buffer, indices, valid, zeros));
}

void KernelBuilder::storeVector(Value vector, Value buffer, ValueRange indices, int64_t valid) {
  auto type = cast<VectorType>(vector.getType());
  if (valid < 0 || valid >= type.getNumElements()) {
    vector::StoreOp::create(b, loc, vector, buffer, indices);
    return;
  }
  auto maskType = VectorType::get(type.getShape(), b.getI1Type());
  Value mask = vector::ConstantMaskOp::create(b, loc, maskType, ArrayRef<int64_t>{valid});
  vector::MaskedStoreOp::create(b, loc, buffer, indices, mask, vector);
}

Value KernelBuilder::loadVectorClipped(Value buffer, ValueRange indices, double padding) {
  return vector::TransferReadOp::create(b, loc, vectorType(), buffer, indices,
                                        std::optional<Value>(f32(padding)), ArrayRef<bool>{false});
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

Tile xfmr::kernels::emitTileUpdate(KernelBuilder &kb, Tile tile, Value kBegin, Value kEnd,
                                   function_ref<Value(int64_t, Value)> loadA,
                                   function_ref<Value(int64_t, Value)> loadB) {
  ValueRange results = kb.forLoop(kBegin, kEnd, 1, tile.values, [&](Value k, ValueRange acc) {
    SmallVector<Value> next(acc.begin(), acc.end());
    SmallVector<Value> bVectors;
    for (int64_t j = 0; j < tile.vectors; ++j)
      bVectors.push_back(loadB(j, k));
    for (int64_t i = 0; i < tile.rows; ++i) {
      Value a = kb.splat(loadA(i, k));
      for (int64_t j = 0; j < tile.vectors; ++j)
        next[i * tile.vectors + j] = kb.fma(a, bVectors[j], next[i * tile.vectors + j]);
    }
    return next;
  });
  tile.values.assign(results.begin(), results.end());
  return tile;
}
