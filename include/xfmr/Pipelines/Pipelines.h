//===- Pipelines.h - the named xfmr compilation pipelines -------*- C++ -*-===//

#ifndef XFMR_PIPELINES_PIPELINES_H
#define XFMR_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace xfmr {

struct CpuPipelineOptions : mlir::PassPipelineOptions<CpuPipelineOptions> {
  Option<bool> openmp{*this, "openmp",
                      llvm::cl::desc("Run parallel loops on OpenMP threads"),
                      llvm::cl::init(true)};
  Option<int64_t> vectorLanes{*this, "lanes",
                              llvm::cl::desc("f32 lanes per vector register (8: AVX2, 16: AVX-512)"),
                              llvm::cl::init(8)};
  Option<int64_t> vectorRegisters{*this, "registers",
                                  llvm::cl::desc("Vector registers (16: AVX2, 32: AVX-512)"),
                                  llvm::cl::init(16)};
  Option<bool> fuseAttention{*this, "fuse-attention",
                             llvm::cl::desc("Run xfmr-fuse-attention"), llvm::cl::init(true)};
  Option<bool> fuseSoftmax{*this, "fuse-softmax", llvm::cl::desc("Run xfmr-fuse-softmax"),
                           llvm::cl::init(true)};
  Option<bool> fuseLayerNorm{*this, "fuse-layer-norm",
                             llvm::cl::desc("Run xfmr-fuse-layer-norm"), llvm::cl::init(true)};
  Option<bool> fuseEpilogues{*this, "fuse-epilogues",
                             llvm::cl::desc("Run xfmr-fuse-epilogues"), llvm::cl::init(true)};
};

/// The xfmr-level part shared by every target: decomposition, then each
/// fusion the options enable (softmax before attention, which consumes it).
void buildXfmrFusionPipeline(mlir::OpPassManager &pm, const CpuPipelineOptions &options);

/// Adds `<function>_grad` (xfmr-autodiff) after the fusions that change what
/// the backward computes: attention (so its backward is FlashAttention-2's,
/// from the saved log-sum-exp), softmax and layer norm. Matmul epilogues are
/// fused later, over forward and backward together: fused into its GEMM, an
/// activation's input would have to be recomputed for the backward.
void buildGradientPipeline(mlir::OpPassManager &pm, const CpuPipelineOptions &options,
                           llvm::StringRef function, llvm::ArrayRef<std::string> wrtInputs);

/// xfmr IR on tensors -> the LLVM dialect for the host CPU: decomposition,
/// fusion, lowering to linalg, bufferization into caller-owned outputs,
/// loops (OpenMP-parallel), LLVM. Entry functions use the bare-pointer
/// convention and get `<name>_packed(void **)` wrappers.
void buildCpuPipeline(mlir::OpPassManager &pm, const CpuPipelineOptions &options);

/// Registers `xfmr-cpu-pipeline` for xfmr-opt.
void registerPipelines();

} // namespace xfmr

#endif // XFMR_PIPELINES_PIPELINES_H
