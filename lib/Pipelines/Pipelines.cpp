//===- Pipelines.cpp - the stages the CPU and GPU pipelines share ---------===//

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

void xfmr::buildXfmrFusionPipeline(OpPassManager &pm, const FusionOptions &fusion) {
  pm.addPass(createXfmrDecompose());
  pm.addPass(createCanonicalizerPass());
  if (fusion.softmax)
    pm.addPass(createXfmrFuseSoftmax());
  if (fusion.attention)
    pm.addPass(createXfmrFuseAttention());
  if (fusion.layerNorm)
    pm.addPass(createXfmrFuseLayerNorm());
  if (fusion.epilogues)
    pm.addPass(createXfmrFuseEpilogues());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void xfmr::buildGradientPipeline(OpPassManager &pm, const FusionOptions &fusion, StringRef function,
                                 ArrayRef<std::string> wrtInputs, bool lossScale) {
  FusionOptions beforeAutodiff = fusion;
  beforeAutodiff.epilogues = false;
  buildXfmrFusionPipeline(pm, beforeAutodiff);
  XfmrAutodiffOptions autodiff;
  autodiff.function = function.str();
  autodiff.wrtInputs.assign(wrtInputs.begin(), wrtInputs.end());
  autodiff.lossScale = lossScale;
  pm.addPass(createXfmrAutodiff(autodiff));
}

void xfmr::buildTrainStepPipeline(OpPassManager &pm, const FusionOptions &fusion,
                                  const XfmrTrainStepOptions &step,
                                  ArrayRef<std::string> wrtInputs) {
  buildGradientPipeline(pm, fusion, step.function, wrtInputs, step.lossScale > 0);
  pm.addPass(createXfmrTrainStep(step));
}

void xfmr::buildLinalgBufferizationPipeline(OpPassManager &pm, bool fuseElementwise,
                                            bool distribute) {
  pm.addPass(createConvertXfmrToLinalg());
  pm.addPass(createConvertElementwiseToLinalgPass());
  // One loop nest (one kernel on the GPU) per chain of elementwise ops, such
  // as the widening, op and rounding of a bf16 op computed in f32.
  if (fuseElementwise)
    pm.addPass(createLinalgElementwiseOpFusionPass());
  pm.addPass(createXfmrCollapseLinalgDims());
  if (distribute)
    pm.addPass(createXfmrDistributeLinalg());
  // No CSE from here to bufferization: the CPU kernels read tensors through
  // `bufferization.to_buffer` right where they run, and CSE would merge a
  // late read into an earlier identical one, hiding it from the
  // bufferization analysis (which then lets a later op overwrite the
  // buffer before the kernel reads it).
  pm.addPass(createCanonicalizerPass());

  pm.addPass(createXfmrDestinationPassingEntry());
  // No empty-tensor elimination: it would let one function result's producer
  // compute into another result's caller buffer (seen with two results fed
  // by one CSE'd init tensor). The price is one copy per result.
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion = bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // A layer function's results that are its arguments (destinations,
  // updated caches) become no results at all; canonicalization first folds
  // the loops that carry a cache's buffer through unchanged.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  bufferization::BufferDeallocationPipelineOptions deallocation;
  bufferization::buildBufferDeallocationPipeline(pm, deallocation);
  pm.addPass(createConvertBufferizationToMemRefPass());
}

void xfmr::buildHostToLLVMPipeline(OpPassManager &pm, bool gpu) {
  // LLVM. Math first: math-to-libm declares libm functions as func.func,
  // which func-to-llvm must still see. memref (with OpenMP's alloca_scope)
  // before scf-to-cf.
  pm.addPass(createXfmrApproximateVectorMath());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // bf16 arithmetic in f32, and bf16 <-> f32 conversions as integer ops
  // rather than calls of __truncsfbf2 (compiler-rt's, which xfmrc links for
  // what LLVM's code generator itself legalizes that way).
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16"};
  emulate.targetTypeStr = "f32";
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // aligned_alloc rather than malloc plus pointer arithmetic: the result
  // keeps its noalias provenance, so LLVM can vectorize loops that read one
  // buffer and write another.
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useAlignedAlloc = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createSCFToControlFlowPass());
  // Functions before OpenMP: convert-openmp-to-llvm would otherwise convert
  // them with the default (descriptor) memref convention.
  ConvertFuncToLLVMPassOptions funcToLLVM;
  funcToLLVM.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcToLLVM));
  pm.addPass(createConvertOpenMPToLLVMPass());
  if (gpu)
    pm.addPass(createGpuToLLVMConversionPass());
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
      "xfmr-cpu-pipeline", "Lower xfmr IR on tensors to the LLVM dialect for the host CPU",
      buildCpuPipeline);
  PassPipelineRegistration<GpuEmulationPipelineOptions>(
      "xfmr-gpu-emulation-pipeline",
      "Lower xfmr IR on tensors to the LLVM dialect for the host CPU through the GPU's kernels, "
      "their thread blocks run as CPU loops (for testing)",
      buildGpuEmulationPipeline);
  PassPipelineRegistration<GpuPipelineOptions>(
      "xfmr-gpu-pipeline",
      "Lower xfmr IR on tensors to host LLVM dialect code launching NVPTX kernels",
      buildGpuPipeline);
}
