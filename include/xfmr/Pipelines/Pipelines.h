//===- Pipelines.h - the named xfmr compilation pipelines -------*- C++ -*-===//

#ifndef XFMR_PIPELINES_PIPELINES_H
#define XFMR_PIPELINES_PIPELINES_H

#include "xfmr/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace xfmr {

/// Which fusion passes run (each has a flag to turn it off): the xfmr ones
/// and, on linalg, upstream's elementwise fusion.
struct FusionOptions {
  bool attention = true, softmax = true, layerNorm = true, epilogues = true, elementwise = true;
  /// One function per distinct layer body (else a copy of the code per
  /// layer).
  bool layerBodies = true;
};

/// The fusion flags every target pipeline takes.
template <typename Derived>
struct FusionPipelineOptions : mlir::PassPipelineOptions<Derived> {
  using BoolOption = mlir::detail::PassOptions::Option<bool>;
  BoolOption fuseAttention{*this, "fuse-attention", llvm::cl::desc("Run xfmr-fuse-attention"),
                           llvm::cl::init(true)};
  BoolOption fuseSoftmax{*this, "fuse-softmax", llvm::cl::desc("Run xfmr-fuse-softmax"),
                         llvm::cl::init(true)};
  BoolOption fuseLayerNorm{*this, "fuse-layer-norm", llvm::cl::desc("Run xfmr-fuse-layer-norm"),
                           llvm::cl::init(true)};
  BoolOption fuseEpilogues{*this, "fuse-epilogues", llvm::cl::desc("Run xfmr-fuse-epilogues"),
                           llvm::cl::init(true)};
  BoolOption fuseElementwise{*this, "fuse-elementwise",
                             llvm::cl::desc("Run linalg-fuse-elementwise-ops"),
                             llvm::cl::init(true)};
  BoolOption layerBodies{*this, "layer-bodies",
                         llvm::cl::desc("Compile each distinct layer once (xfmr-outline-layers)"),
                         llvm::cl::init(true)};

  FusionOptions fusion() const {
    return {fuseAttention, fuseSoftmax, fuseLayerNorm, fuseEpilogues, fuseElementwise, layerBodies};
  }
  void setFusion(const FusionOptions &fusion) {
    fuseAttention = fusion.attention;
    fuseSoftmax = fusion.softmax;
    fuseLayerNorm = fusion.layerNorm;
    fuseEpilogues = fusion.epilogues;
    fuseElementwise = fusion.elementwise;
    layerBodies = fusion.layerBodies;
  }
};

struct CpuPipelineOptions : FusionPipelineOptions<CpuPipelineOptions> {
  BoolOption openmp{*this, "openmp", llvm::cl::desc("Run parallel loops on OpenMP threads"),
                    llvm::cl::init(true)};
  Option<int64_t> vectorLanes{
      *this, "lanes", llvm::cl::desc("f32 lanes per vector register (8: AVX2, 16: AVX-512)"),
      llvm::cl::init(8)};
  Option<int64_t> vectorRegisters{*this, "registers",
                                  llvm::cl::desc("Vector registers (16: AVX2, 32: AVX-512)"),
                                  llvm::cl::init(16)};
  BoolOption globalArena{
      *this, "global-arena",
      llvm::cl::desc(
          "Keep each function's temporaries in a module global (calls must not overlap)"),
      llvm::cl::init(false)};
  BoolOption overlapAllReduce{
      *this, "overlap-all-reduce",
      llvm::cl::desc("Start each gradient's reduction where the backward has computed it "
                     "(xfmr-overlap-all-reduce)"),
      llvm::cl::init(false)};
  Option<std::string> int8Dot{
      *this, "int8-dot",
      llvm::cl::desc(
          "The target's int8 dot product: none, madd (AVX2, AVX-512BW), vnni or portable"),
      llvm::cl::init("none")};
  BoolOption bf16Dot{*this, "bf16-dot",
                     llvm::cl::desc("The target has AVX-512 BF16's dot product (vdpbf16ps)"),
                     llvm::cl::init(false)};
};

/// The CPU pipeline's options and the GPU whose kernels to emulate.
struct GpuEmulationPipelineOptions : CpuPipelineOptions {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("The GPU architecture whose kernels to build"),
                           llvm::cl::init("sm_90")};
  BoolOption reverseThreads{*this, "reverse-threads",
                            llvm::cl::desc("Run each phase's threads last to first"),
                            llvm::cl::init(false)};
};

struct GpuPipelineOptions : FusionPipelineOptions<GpuPipelineOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("GPU architecture: sm_80, sm_90, ..."),
                           llvm::cl::init("sm_90")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What the kernels are embedded as: isa (PTX), bin (cubin) or fatbin"),
      llvm::cl::init("isa")};
  Option<std::string> toolkit{*this, "toolkit",
                              llvm::cl::desc("CUDA toolkit root, for ptxas and fatbinary"),
                              llvm::cl::init("")};
  Option<int64_t> blockSize{*this, "block-size", llvm::cl::desc("Threads per block"),
                            llvm::cl::init(256)};
};

/// The xfmr-level part shared by every target: decomposition, then each
/// fusion the options enable (softmax before attention, which consumes it).
void buildXfmrFusionPipeline(mlir::OpPassManager &pm, const FusionOptions &fusion);

/// Adds `<function>_grad` (xfmr-autodiff) after the fusions that change what
/// the backward computes: attention (so its backward is FlashAttention-2's,
/// from the saved log-sum-exp), softmax and layer norm. Matmul epilogues are
/// fused later, over forward and backward together: fused into its GEMM, an
/// activation's input would have to be recomputed for the backward. With
/// `lossScale`, the gradient function takes the loss scale (dynamic loss
/// scaling, xfmr-autodiff{loss-scale}).
void buildGradientPipeline(mlir::OpPassManager &pm, const FusionOptions &fusion,
                           llvm::StringRef function, llvm::ArrayRef<std::string> wrtInputs,
                           bool lossScale = false);

/// A training step of the loss `step.function`: its gradient
/// (buildGradientPipeline; dynamically loss-scaled where `step.lossScale` >
/// 0) and the optimizer's update around it (xfmr-train-step), `train_step`.
void buildTrainStepPipeline(mlir::OpPassManager &pm, const FusionOptions &fusion,
                            const XfmrTrainStepOptions &step,
                            llvm::ArrayRef<std::string> wrtInputs);

/// The xfmr ops a target has no kernels of -> linalg (convert-xfmr-to-linalg,
/// elementwise ops, with `fuseElementwise` fused where a producer has one
/// use, collapsed loop dims), then tensors -> memrefs: function results
/// become caller-owned buffers (xfmr-destination-passing-entry), one-shot
/// bufferization, deallocation. With `distribute`, linalg ops with enough
/// work are split across the CPU's threads (xfmr-distribute-linalg).
void buildLinalgBufferizationPipeline(mlir::OpPassManager &pm, bool fuseElementwise,
                                      bool distribute);

/// Host code (scf, memref, arith, math, vector, OpenMP and, with `gpu`,
/// kernel launches and GPU buffers) -> the LLVM dialect. Entry functions use
/// the bare-pointer convention and get `<name>_packed(void **)` wrappers.
void buildHostToLLVMPipeline(mlir::OpPassManager &pm, bool gpu);

/// xfmr IR on tensors -> the LLVM dialect for the host CPU: decomposition,
/// fusion, lowering to linalg, bufferization into caller-owned outputs,
/// loops (OpenMP-parallel), LLVM. Entry functions use the bare-pointer
/// convention and get `<name>_packed(void **)` wrappers.
void buildCpuPipeline(mlir::OpPassManager &pm, const CpuPipelineOptions &options);

/// The CPU pipeline with the GPU's kernels for `options.chip` built first
/// (convert-xfmr-to-gpu-kernels{emulate-threads}), their thread blocks run
/// as CPU loops, each phase's threads in turn: the GPU kernels' arithmetic,
/// memory accesses and barriers tested on a machine without a GPU. With
/// `reverseThreads`, the threads of each phase run last to first, so that
/// a missing barrier changes the results.
void buildGpuEmulationPipeline(mlir::OpPassManager &pm, const GpuEmulationPipelineOptions &options);

/// xfmr IR on tensors -> host LLVM dialect plus one `gpu.binary` of NVPTX
/// kernels: the same fusion, lowering and bufferization as for the CPU,
/// buffers in CUDA managed memory, linalg ops as parallel loops tiled into
/// blocks and threads (one kernel each), kernels outlined into one
/// gpu.module, lowered to NVVM and serialized (PTX, cubin or fatbin). The
/// entry keeps the CPU build's ABI (host pointers, `<name>_packed`).
void buildGpuPipeline(mlir::OpPassManager &pm, const GpuPipelineOptions &options);

/// Whether the kernels for GPU architecture `chip` multiply by warpgroup MMAs
/// (convert-xfmr-to-gpu-kernels{warpgroup-mma}): sm_90a, the one
/// architecture that has them (sm_90 code must also run on later GPUs).
bool hasWarpgroupMma(llvm::StringRef chip);

/// Registers `xfmr-cpu-pipeline`, `xfmr-gpu-emulation-pipeline` and
/// `xfmr-gpu-pipeline` for xfmr-opt.
void registerPipelines();

} // namespace xfmr

#endif // XFMR_PIPELINES_PIPELINES_H
