//===- CpuPipeline.cpp - xfmr IR to the LLVM dialect for CPUs ---*- C++ -*-===//

#include "xfmr/Pipelines/Pipelines.h"

#include "xfmr/Conversion/Passes.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void xfmr::buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options) {
  // One function per distinct layer first: everything below runs once per
  // body, however deep the model.
  pm.addPass(createXfmrOutlineLayers({/*copies=*/!options.layerBodies}));
  buildXfmrFusionPipeline(pm, options.fusion());
  pm.addPass(createXfmrComputeInF32());
  if (options.emulateGpuKernels) {
    ConvertXfmrToGpuKernelsOptions emulation;
    emulation.emulateThreads = true;
    emulation.reverseThreads = options.reverseGpuThreads;
    emulation.warpgroupMma = hasWarpgroupMma(options.emulatedChip);
    pm.addPass(createConvertXfmrToGpuKernels(emulation));
  }
  ConvertXfmrToCpuKernelsOptions kernels;
  kernels.lanes = options.vectorLanes;
  kernels.registers = options.vectorRegisters;
  kernels.int8Dot = options.int8Dot;
  kernels.bf16Dot = options.bf16Dot;
  pm.addPass(createConvertXfmrToCpuKernels(kernels));
  if (options.overlapAllReduce)
    pm.addPass(createXfmrOverlapAllReduce());
  buildLinalgBufferizationPipeline(pm, options.fuseElementwise, /*distribute=*/options.openmp);
  pm.addPass(createXfmrExpandStridedCopies());
  XfmrPlanBuffersOptions buffers;
  buffers.globalArena = options.globalArena;
  buffers.parallelLoopScopes = options.openmp;
  pm.addPass(createXfmrPlanBuffers(buffers));

  // Loops.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  if (options.openmp) {
    pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
    pm.addPass(createConvertSCFToOpenMPPass());
    pm.addPass(createXfmrMergeParallelRegions());
  } else {
    pm.addNestedPass<func::FuncOp>(createForallToForLoopPass());
  }
  pm.addPass(createCanonicalizerPass());

  buildHostToLLVMPipeline(pm, /*gpu=*/false);
}

