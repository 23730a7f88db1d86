//===- X86Instructions.cpp - x86 vector instructions as MLIR ----*- C++ -*-===//

#include "X86Instructions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace xfmr::cpu;

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

/// Whether `value` is a 512-bit vector (AVX-512's instructions).
static bool isWide(Value value) {
  return cast<VectorType>(value.getType()).getNumElements() *
             getElementTypeOrSelf(value).getIntOrFloatBitWidth() ==
         512;
}

Value x86::vpdpbusd(OpBuilder &b, Location loc, Value acc, Value u, Value s) {
  return callIntrinsic(
      b, loc, isWide(acc) ? "llvm.x86.avx512.vpdpbusd.512" : "llvm.x86.avx512.vpdpbusd.256",
      acc.getType(), {acc, u, s});
}

Value x86::vpmaddubsw(OpBuilder &b, Location loc, Value u, Value s) {
  auto bytes = cast<VectorType>(u.getType());
  auto pairs = VectorType::get({bytes.getNumElements() / 2}, b.getI16Type());
  return callIntrinsic(b, loc,
                       isWide(u) ? "llvm.x86.avx512.pmaddubs.w.512" : "llvm.x86.avx2.pmadd.ub.sw",
                       pairs, {u, s});
}

Value x86::vpmaddwdOnes(OpBuilder &b, Location loc, Value pairs, Type resultType) {
  Value ones =
      arith::ConstantOp::create(b, loc,
                                DenseElementsAttr::get(cast<VectorType>(pairs.getType()),
                                                       b.getIntegerAttr(b.getI16Type(), 1)));
  return callIntrinsic(b, loc,
                       isWide(pairs) ? "llvm.x86.avx512.pmaddw.d.512" : "llvm.x86.avx2.pmadd.wd",
                       resultType, {pairs, ones});
}

Value x86::vpsignb(OpBuilder &b, Location loc, Value s, Value x) {
  assert(!isWide(s) && "vpsignb is AVX2's: AVX-512 has none");
  return callIntrinsic(b, loc, "llvm.x86.avx2.psign.b", s.getType(), {s, x});
}

Value x86::vdpbf16ps(OpBuilder &b, Location loc, Value acc, Value x, Value y) {
  return callIntrinsic(b, loc, "llvm.x86.avx512bf16.dpbf16ps.512", acc.getType(), {acc, x, y});
}
