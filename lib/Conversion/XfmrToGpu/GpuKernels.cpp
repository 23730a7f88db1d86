//===- GpuKernels.cpp - fused xfmr ops to hand-built GPU kernels -*- C++ -*-===//

#include "GpuKernels.h"
#include "ThreadBlockBuilder.h"

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "convert-xfmr-to-gpu-kernels"

namespace xfmr {
#define GEN_PASS_DEF_CONVERTXFMRTOGPUKERNELS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;

namespace {

class GpuKernelSet : public KernelSet {
public:
  GpuKernelSet(xfmr::gpu::Emulation emulate, bool warpgroupMma)
      : emulate(emulate), warpgroupMma(warpgroupMma) {}

  bool handlesNarrowFloats() const override { return true; }
  Value gemm(KernelBuilder &kb, Value a, bool transposeA, Value b, bool transposeB, Value bias,
             Value residual, Activation activation, Type resultType) const override {
    int64_t rows = cast<RankedTensorType>(a.getType()).getDimSize(transposeA ? 1 : 0);
    if (rows <= xfmr::gpu::kSkinnyGemmMaxRows && !transposeA) {
      // An int8 weight is read as stored: no f32 copy of it is made. (A
      // 4-bit one, or one with mins, is read dequantized.)
      auto dequantize = b.getDefiningOp<DequantizeOp>();
      if (dequantize && (dequantize.getBits() != 8 || dequantize.getMins()))
        dequantize = {};
      xfmr::gpu::GemmProblem problem(kb, a, transposeA, dequantize ? dequantize.getValues() : b,
                                     transposeB, bias, residual, activation, resultType);
      return xfmr::gpu::emitSkinnyGemm(kb, problem, dequantize, emulate);
    }
    xfmr::gpu::GemmProblem problem(kb, a, transposeA, b, transposeB, bias, residual, activation,
                                   resultType);
    return cast<RankedTensorType>(a.getType()).getElementType().isF32()
               ? xfmr::gpu::emitGemm(kb, problem, emulate)
               : xfmr::gpu::emitMmaGemm(kb, problem, emulate, warpgroupMma);
  }
  Value softmaxRows(KernelBuilder &kb, Value x, Type resultType) const override {
    return xfmr::gpu::emitSoftmaxRows(kb, x, resultType, emulate);
  }
  std::pair<Value, Value> layerNormRows(KernelBuilder &kb, Value x, Value residual, Value gamma,
                                        Value beta, double epsilon, Type sumType,
                                        Type resultType) const override {
    return xfmr::gpu::emitLayerNormRows(kb, x, residual, gamma, beta, epsilon, sumType, resultType,
                                        emulate);
  }
  void attention(KernelBuilder &kb, const AttentionOperands &operands) const override {
    xfmr::gpu::emitAttention(kb, operands, emulate, warpgroupMma);
  }
  void attentionBackward(KernelBuilder &kb, const AttentionOperands &operands) const override {
    xfmr::gpu::emitAttentionBackward(kb, operands, emulate, warpgroupMma);
  }

private:
  xfmr::gpu::Emulation emulate;
  bool warpgroupMma;
};

struct BarrierMemoryEffects
    : MemoryEffectOpInterface::ExternalModel<BarrierMemoryEffects, mlir::gpu::BarrierOp> {
  void
  getEffects(Operation *,
             SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) const {
    effects.emplace_back(MemoryEffects::Read::get());
    effects.emplace_back(MemoryEffects::Write::get());
  }
};

/// nvvm.ldmatrix reads shared memory through a pointer.
struct LdMatrixMemoryEffects
    : MemoryEffectOpInterface::ExternalModel<LdMatrixMemoryEffects, NVVM::LdMatrixOp> {
  void
  getEffects(Operation *,
             SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) const {
    effects.emplace_back(MemoryEffects::Read::get());
  }
};

template <typename OpTy>
struct NoMemoryEffects : MemoryEffectOpInterface::ExternalModel<NoMemoryEffects<OpTy>, OpTy> {
  void getEffects(Operation *,
                  SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &) const {}
};

struct ConvertXfmrToGpuKernelsPass
    : xfmr::impl::ConvertXfmrToGpuKernelsBase<ConvertXfmrToGpuKernelsPass> {
  using Base::Base;
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    if (reverseThreads && !emulateThreads) {
      getOperation()->emitError("reverse-threads needs emulate-threads");
      return signalPassFailure();
    }
    GpuKernelSet kernels(!emulateThreads  ? xfmr::gpu::Emulation::None
                         : reverseThreads ? xfmr::gpu::Emulation::Reversed
                                          : xfmr::gpu::Emulation::InOrder,
                         warpgroupMma);
    if (failed(applyKernelPatterns(getOperation(), kernels)))
      signalPassFailure();
  }
};

} // namespace

void xfmr::registerGpuKernelMemoryEffects(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, mlir::gpu::GPUDialect *) {
    mlir::gpu::BarrierOp::attachInterface<BarrierMemoryEffects>(*context);
  });
  registry.addExtension(+[](MLIRContext *context, NVVM::NVVMDialect *) {
    NVVM::MmaOp::attachInterface<NoMemoryEffects<NVVM::MmaOp>>(*context);
    NVVM::LdMatrixOp::attachInterface<LdMatrixMemoryEffects>(*context);
  });
}
