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
using namespace xfmr;

/// The CPU pipeline, whose fused ops are rewritten into kernels by
/// `addKernels`.
static void buildHostPipeline(OpPassManager &pm, const CpuPipelineOptions &options,
                              llvm::function_ref<void(OpPassManager &)> addKernels) {
  // One function per distinct layer first: everything below runs once per
  // body, however deep the model.
  pm.addPass(createXfmrOutlineLayers({/*copies=*/!options.layerBodies}));
  buildXfmrFusionPipeline(pm, options.fusion());
  pm.addPass(createXfmrComputeInF32());
  addKernels(pm);
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

static void addCpuKernels(OpPassManager &pm, const CpuPipelineOptions &options) {
  ConvertXfmrToCpuKernelsOptions kernels;
  kernels.lanes = options.vectorLanes;
  kernels.registers = options.vectorRegisters;
  kernels.int8Dot = options.int8Dot;
  kernels.bf16Dot = options.bf16Dot;
  pm.addPass(createConvertXfmrToCpuKernels(kernels));
}

void xfmr::buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options) {
  buildHostPipeline(pm, options, [&](OpPassManager &pm) { addCpuKernels(pm, options); });
}

void xfmr::buildGpuEmulationPipeline(OpPassManager &pm,
                                     const GpuEmulationPipelineOptions &options) {
  buildHostPipeline(pm, options, [&](OpPassManager &pm) {
    ConvertXfmrToGpuKernelsOptions emulation;
    emulation.emulateThreads = true;
    emulation.reverseThreads = options.reverseThreads;
    emulation.warpgroupMma = hasWarpgroupMma(options.chip);
    pm.addPass(createConvertXfmrToGpuKernels(emulation));
    // The CPU's kernels for the ops the GPU has none of.
    addCpuKernels(pm, options);
  });
}
