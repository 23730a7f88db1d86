//===- CpuPipeline.cpp - xfmr IR to the LLVM dialect for CPUs ---*- C++ -*-===//

#include "xfmr/Pipelines/Pipelines.h"

#include "xfmr/Conversion/Passes.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void xfmr::buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options) {
  buildXfmrFusionPipeline(pm, options.fusion());
  ConvertXfmrToCpuKernelsOptions kernels;
  kernels.lanes = options.vectorLanes;
  kernels.registers = options.vectorRegisters;
  pm.addPass(createConvertXfmrToCpuKernels(kernels));
  pm.addPass(createConvertXfmrToLinalg());
  pm.addPass(createConvertElementwiseToLinalgPass());
  pm.addPass(createXfmrCollapseLinalgDims());
  // No CSE from here to bufferization: the kernels read tensors through
  // `bufferization.to_buffer` right where they run, and CSE would merge a
  // late read into an earlier identical one, hiding it from the
  // bufferization analysis (which then lets a later op overwrite the
  // buffer before the kernel reads it).
  pm.addPass(createCanonicalizerPass());

  buildBufferizationPipeline(pm);
  pm.addPass(createXfmrExpandStridedCopies());

  // Loops.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  if (options.openmp) {
    pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
    pm.addPass(createConvertSCFToOpenMPPass());
  } else {
    pm.addNestedPass<func::FuncOp>(createForallToForLoopPass());
  }
  pm.addPass(createCanonicalizerPass());

  buildHostToLLVMPipeline(pm, /*gpu=*/false);
}

