//===- CpuPipeline.cpp - xfmr IR to the LLVM dialect for CPUs ---*- C++ -*-===//

#include "xfmr/Pipelines/Pipelines.h"

#include "xfmr/Conversion/Passes.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
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
  // xfmr level.
  pm.addPass(createXfmrDecompose());
  pm.addPass(createConvertXfmrToLinalg());
  pm.addPass(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Bufferization into caller-owned result buffers.
  pm.addPass(createXfmrDestinationPassingEntry());
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion = bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferDeallocationPipelineOptions deallocation;
  bufferization::buildBufferDeallocationPipeline(pm, deallocation);
  pm.addPass(createConvertBufferizationToMemRefPass());

  // Loops.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  if (options.openmp) {
    pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
    pm.addPass(createConvertSCFToOpenMPPass());
  } else {
    pm.addNestedPass<func::FuncOp>(createForallToForLoopPass());
  }
  pm.addPass(createCanonicalizerPass());

  // LLVM. Math first: math-to-libm declares libm functions as func.func,
  // which func-to-llvm must still see. memref (with OpenMP's alloca_scope)
  // before scf-to-cf.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createSCFToControlFlowPass());
  // Functions before OpenMP: convert-openmp-to-llvm would otherwise convert
  // them with the default (descriptor) memref convention.
  ConvertFuncToLLVMPassOptions funcToLLVM;
  funcToLLVM.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcToLLVM));
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createXfmrEmitPackedEntry());
  pm.addPass(createCanonicalizerPass());
}

void xfmr::registerPipelines() {
  PassPipelineRegistration<CpuPipelineOptions>(
      "xfmr-cpu-pipeline",
      "Lower xfmr IR on tensors to the LLVM dialect for the host CPU",
      buildCpuPipeline);
}
