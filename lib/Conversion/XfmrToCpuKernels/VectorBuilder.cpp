//===- VectorBuilder.cpp - the CPU kernels' vector code ---------*- C++ -*-===//

#include "VectorBuilder.h"
#include "X86Instructions.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace xfmr::cpu;

VectorType VectorBuilder::vectorType(int64_t lanes) {
  return KernelBuilder::vectorType(lanes ? lanes : target.lanes);
}

Value VectorBuilder::splat(Value value, int64_t lanes) {
  return KernelBuilder::splat(value, lanes ? lanes : target.lanes);
}

Value VectorBuilder::splat(double value, int64_t lanes) {
  return KernelBuilder::splat(value, lanes ? lanes : target.lanes);
}

Value VectorBuilder::exp2NonPositive(Value x) {
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
SmallVector<Value> VectorBuilder::transpose(ArrayRef<Value> rows) {
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

Value VectorBuilder::reduceMax(Value vector) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXNUMF, vector,
                                     arith::FastMathFlags::nnan);
}

Value VectorBuilder::dotInt8(Value acc, Value u, Value s, int64_t uBits) {
  return dotInt8(acc, ValueRange{u}, ValueRange{s}, uBits);
}

Value VectorBuilder::dotInt8(Value acc, ValueRange u, ValueRange s, int64_t uBits) {
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
      acc = x86::vpdpbusd(b, loc, acc, unsignedBytes, signedBytes);
    return acc;
  }

  // vpmaddubsw sums pairs of products of unsigned and signed bytes to i16
  // with saturation, each pair sum then widened and summed in pairs by
  // vpmaddwd. Unsigned u below 2^uBits < 128 is exact (2 x 127 x -128 at
  // least); 8-bit u is signed (int8Offset() is 0) and multiplies as |u|
  // times s with u's sign, exact as s > -128 (2 x 128 x 127 < 2^15). Sums of
  // 4-bit u's pair sums stay exact in i16 for up to 8 of them
  // (8 x 2 x 15 x 128 < 2^15).
  auto pairSums = [&](Value unsignedBytes, Value signedBytes) {
    return x86::vpmaddubsw(b, loc, unsignedBytes, signedBytes);
  };
  auto widenAdd = [&](Value sums) {
    acc = arith::AddIOp::create(b, loc, acc, x86::vpmaddwdOnes(b, loc, sums, acc.getType()));
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
      return x86::vpsignb(b, loc, signedBytes, x);
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

Value VectorBuilder::dotBf16(Value acc, Value x, Value y) {
  assert(target.bf16Dot && target.lanes == 16 && "vdpbf16ps is AVX-512 BF16's");
  return x86::vdpbf16ps(b, loc, acc, x, y);
}

Value VectorBuilder::reduceAdd(Value vector) {
  // A tree of adds rather than a chain through each lane in order.
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, vector,
                                     arith::FastMathFlags::reassoc);
}

Value VectorBuilder::loadVector(Value buffer, ValueRange indices, int64_t valid, double padding,
                                int64_t lanes) {
  VectorType type = vectorType(lanes);
  if (valid < 0 || valid >= type.getNumElements())
    return vector::LoadOp::create(b, loc, type, buffer, indices);
  return loadVector(buffer, indices, valid, splat(padding, type.getNumElements()));
}

Value VectorBuilder::loadVector(Value buffer, ValueRange indices, int64_t valid,
                                Value passThrough) {
  auto type = cast<VectorType>(passThrough.getType());
  if (valid < 0 || valid >= type.getNumElements())
    return vector::LoadOp::create(b, loc, type, buffer, indices);
  auto maskType = VectorType::get(type.getShape(), b.getI1Type());
  Value mask = vector::ConstantMaskOp::create(b, loc, maskType, ArrayRef<int64_t>{valid});
  return vector::MaskedLoadOp::create(b, loc, type, buffer, indices, mask, passThrough);
}

Value VectorBuilder::loadVectorWidened(Value buffer, ValueRange indices, int64_t valid) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  if (element.isF32())
    return loadVector(buffer, indices, valid);
  VectorType wide = vectorType();
  auto narrow = VectorType::get(wide.getShape(), element);
  Value zeros = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(narrow, b.getFloatAttr(element, 0.0)));
  return arith::ExtFOp::create(b, loc, wide, loadVector(buffer, indices, valid, zeros));
}

void VectorBuilder::storeVector(Value vector, Value buffer, ValueRange indices, int64_t valid) {
  auto type = cast<VectorType>(vector.getType());
  if (valid < 0 || valid >= type.getNumElements()) {
    vector::StoreOp::create(b, loc, vector, buffer, indices);
    return;
  }
  auto maskType = VectorType::get(type.getShape(), b.getI1Type());
  Value mask = vector::ConstantMaskOp::create(b, loc, maskType, ArrayRef<int64_t>{valid});
  vector::MaskedStoreOp::create(b, loc, buffer, indices, mask, vector);
}

Value VectorBuilder::loadVectorClipped(Value buffer, ValueRange indices, double padding) {
  return vector::TransferReadOp::create(b, loc, vectorType(), buffer, indices,
                                        std::optional<Value>(f32(padding)), ArrayRef<bool>{false});
}

Tile xfmr::cpu::emitTileUpdate(VectorBuilder &kb, Tile tile, Value kBegin, Value kEnd,
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
