//===- GpuPipeline.cpp - xfmr IR to host code and NVPTX kernels -*- C++ -*-===//

#include "xfmr/Pipelines/Pipelines.h"

#include "xfmr/Conversion/Passes.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// The PTX ISA version the NVVM target asks for: 8.0 runs on CUDA 12 and
/// later drivers and covers sm_80 and sm_90 (the default 6.0 cannot target
/// sm_90).
static constexpr const char *kPtxFeatures = "+ptx80";

bool xfmr::hasWarpgroupMma(StringRef chip) { return chip == "sm_90a"; }

void xfmr::buildGpuPipeline(OpPassManager &pm, const GpuPipelineOptions &options) {
  // One function per distinct layer first: everything below runs once per
  // body, however deep the model.
  pm.addPass(createXfmrOutlineLayers({/*copies=*/!options.layerBodies}));
  buildXfmrFusionPipeline(pm, options.fusion());
  pm.addPass(createXfmrComputeInF32());
  ConvertXfmrToGpuKernelsOptions kernelOptions;
  kernelOptions.warpgroupMma = hasWarpgroupMma(options.chip);
  pm.addPass(createConvertXfmrToGpuKernels(kernelOptions));
  buildLinalgBufferizationPipeline(pm, options.fuseElementwise, /*distribute=*/false);

  // Fused attention is one hand-built kernel; every other op is one kernel
  // per linalg op: parallel dimensions become blocks and threads, reduction
  // loops inside the thread.
  pm.addPass(createXfmrGpuManagedBuffers());
  OpPassManager &funcs = pm.nest<func::FuncOp>();
  funcs.addPass(createXfmrGpuReductionsInnermost());
  funcs.addPass(createConvertLinalgToParallelLoopsPass());
  funcs.addPass(createForallToForLoopPass());
  funcs.addPass(createCanonicalizerPass());
  funcs.addPass(createXfmrGpuHoistParallelLoops());
  XfmrGpuMapParallelLoopsOptions mapping;
  mapping.blockSize = options.blockSize;
  funcs.addPass(createXfmrGpuMapParallelLoops(mapping));
  funcs.addPass(createConvertParallelLoopToGpuPass());
  funcs.addPass(createCanonicalizerPass());

  // Kernels: outlined into one module, self-contained math, NVVM. Constants
  // the canonicalizer hoisted out of the launches go back in first: as kernel
  // parameters they would hide constant indices (private arrays could not
  // live in registers) and trip counts from the kernel's optimizer.
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  // The shared-memory globals the kernels referenced now live in their
  // modules.
  pm.addPass(createSymbolDCEPass());
  pm.addPass(createXfmrGpuMergeKernelModules());
  // Launches, copies and buffer lifetimes in one stream order: the host
  // waits only where host code reads GPU results, and at the end.
  OpPassManager &hostFuncs = pm.nest<func::FuncOp>();
  hostFuncs.addPass(createGpuAsyncRegionPass());
  hostFuncs.addPass(createXfmrGpuDeviceBuffers());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = kPtxFeatures;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createXfmrGpuKernelMath());
  kernels.addPass(createLowerAffinePass());
  kernels.addPass(createConvertNVGPUToNVVMPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());

  buildHostToLLVMPipeline(pm, /*gpu=*/true);
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  binary.toolkitPath = options.toolkit;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}
