//===- Passes.h - xfmr conversion passes ------------------------*- C++ -*-===//

#ifndef XFMR_CONVERSION_PASSES_H
#define XFMR_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace xfmr {

#define GEN_PASS_DECL
#include "xfmr/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "xfmr/Conversion/Passes.h.inc"

/// Declares that gpu.barrier reads and writes memory. Upstream gives it no
/// memory-effect interface, and the buffer deallocation pipeline rejects
/// ops of unknown effects; convert-xfmr-to-gpu-kernels builds its kernels
/// (barriers included) before bufferization.
void registerGpuBarrierMemoryEffects(mlir::DialectRegistry &registry);

} // namespace xfmr

#endif // XFMR_CONVERSION_PASSES_H
