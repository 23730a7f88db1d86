//===- X86Instructions.h - x86 vector instructions as MLIR ------*- C++ -*-===//
//
// The x86 instructions the CPU kernels call by name, as LLVM intrinsics:
// those of the dot products of bytes and of bf16 values, which no target-
// neutral vector op expresses. The width is the operands': 256-bit vectors
// take the AVX2 (or AVX-VNNI) form, 512-bit ones the AVX-512 form.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_X86INSTRUCTIONS_H
#define XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_X86INSTRUCTIONS_H

#include "mlir/IR/Builders.h"

namespace xfmr::cpu::x86 {

/// vpdpbusd: acc (i32 lanes) + each lane's 4 products of unsigned bytes `u`
/// and signed bytes `s`.
mlir::Value vpdpbusd(mlir::OpBuilder &b, mlir::Location loc, mlir::Value acc, mlir::Value u,
                     mlir::Value s);
/// vpmaddubsw: the sums of pairs of products of unsigned bytes `u` and
/// signed bytes `s`, as i16 lanes with signed saturation.
mlir::Value vpmaddubsw(mlir::OpBuilder &b, mlir::Location loc, mlir::Value u, mlir::Value s);
/// vpmaddwd by ones: the i16 lanes of `pairs` summed in pairs into i32
/// lanes of `resultType`.
mlir::Value vpmaddwdOnes(mlir::OpBuilder &b, mlir::Location loc, mlir::Value pairs,
                         mlir::Type resultType);
/// vpsignb (AVX2 only): the bytes of `s` negated where `x` is negative,
/// zeroed where it is zero.
mlir::Value vpsignb(mlir::OpBuilder &b, mlir::Location loc, mlir::Value s, mlir::Value x);
/// vdpbf16ps (AVX-512 BF16): acc (16 f32 lanes) + each lane's 2 products
/// of the bf16 values of `x` and `y`.
mlir::Value vdpbf16ps(mlir::OpBuilder &b, mlir::Location loc, mlir::Value acc, mlir::Value x,
                      mlir::Value y);

} // namespace xfmr::cpu::x86

#endif // XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_X86INSTRUCTIONS_H
