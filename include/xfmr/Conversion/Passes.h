//===- Passes.h - xfmr conversion passes ------------------------*- C++ -*-===//

#ifndef XFMR_CONVERSION_PASSES_H
#define XFMR_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace xfmr {

#define GEN_PASS_DECL
#include "xfmr/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "xfmr/Conversion/Passes.h.inc"

/// Declares the memory effects of the GPU ops inside the kernels of
/// convert-xfmr-to-gpu-kernels, which upstream gives no memory-effect
/// interface: gpu.barrier reads and writes memory, nvvm.ldmatrix reads it,
/// nvvm.mma.sync (registers only) has no effect. The buffer deallocation pipeline rejects ops of
/// unknown effects, and the kernels are built before bufferization.
void registerGpuKernelMemoryEffects(mlir::DialectRegistry &registry);

} // namespace xfmr

#endif // XFMR_CONVERSION_PASSES_H
