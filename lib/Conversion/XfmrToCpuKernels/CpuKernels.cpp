//===- CpuKernels.cpp - fused xfmr ops to vectorized CPU kernels -*- C++ -*-===//

#include "Kernels.h"

#include "xfmr/Conversion/Passes.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "convert-xfmr-to-cpu-kernels"

namespace xfmr {
#define GEN_PASS_DEF_CONVERTXFMRTOCPUKERNELS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;

namespace {

/// The vector kernels, built through a VectorBuilder of the target.
class CpuKernelSet : public KernelSet {
public:
  explicit CpuKernelSet(const CpuTarget &target) : target(target) {}

  Value gemm(KernelBuilder &kb, Value a, bool transposeA, Value b, bool transposeB, Value bias,
             Value residual, Activation activation, Type resultType) const override {
    assert(resultType.isF32() && "the CPU kernels write f32");
    VectorBuilder vb(kb, target);
    return emitGemm(vb, a, transposeA, b, transposeB, bias, residual, activation);
  }
  Value gatedGemm(KernelBuilder &kb, Value a, Value gate, bool transposeGate, Value up,
                  bool transposeUp, Value gateBias, Value upBias, Activation activation,
                  Type resultType) const override {
    assert(resultType.isF32() && "the CPU kernels write f32");
    VectorBuilder vb(kb, target);
    return emitGatedGemm(vb, a, gate, transposeGate, up, transposeUp, gateBias, upBias, activation);
  }
  bool widensNarrowInputs() const override { return true; }
  bool takesBf16Products() const override { return target.bf16Dot; }
  Value softmaxRows(KernelBuilder &kb, Value x, Type resultType) const override {
    assert(resultType.isF32() && "the CPU kernels write f32");
    VectorBuilder vb(kb, target);
    return emitSoftmaxRows(vb, x);
  }
  std::pair<Value, Value> layerNormRows(KernelBuilder &kb, Value x, Value residual, Value gamma,
                                        Value beta, double epsilon, Type sumType,
                                        Type resultType) const override {
    assert(sumType.isF32() && resultType.isF32() && "the CPU kernels write f32");
    VectorBuilder vb(kb, target);
    return emitLayerNormRows(vb, x, residual, gamma, beta, epsilon);
  }
  void attention(KernelBuilder &kb, const AttentionOperands &operands) const override {
    VectorBuilder vb(kb, target);
    emitAttention(vb, operands);
  }
  void attentionBackward(KernelBuilder &kb, const AttentionOperands &operands) const override {
    VectorBuilder vb(kb, target);
    emitAttentionBackward(vb, operands);
  }
  bool hasTrainingRowKernels() const override { return true; }
  Value softmaxBackwardRows(KernelBuilder &kb, Value y, Value grad) const override {
    VectorBuilder vb(kb, target);
    return emitSoftmaxBackwardRows(vb, y, grad);
  }
  LayerNormGradients layerNormBackwardRows(KernelBuilder &kb, Value x, Value grad, Value gamma,
                                           double epsilon) const override {
    VectorBuilder vb(kb, target);
    return emitLayerNormBackwardRows(vb, x, grad, gamma, epsilon);
  }
  Value crossEntropyRows(KernelBuilder &kb, Value logits, Value targets,
                         int64_t ignoreIndex) const override {
    VectorBuilder vb(kb, target);
    return emitCrossEntropyRows(vb, logits, targets, ignoreIndex);
  }
  Value crossEntropyBackwardRows(KernelBuilder &kb, Value logits, Value targets, Value grad,
                                 int64_t ignoreIndex) const override {
    VectorBuilder vb(kb, target);
    return emitCrossEntropyBackwardRows(vb, logits, targets, grad, ignoreIndex);
  }

private:
  CpuTarget target;
};

struct ConvertXfmrToCpuKernelsPass
    : xfmr::impl::ConvertXfmrToCpuKernelsBase<ConvertXfmrToCpuKernelsPass> {
  using Base::Base;
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    if (lanes != 8 && lanes != 16) {
      getOperation()->emitError("lanes must be 8 or 16, got ") << lanes.getValue();
      return signalPassFailure();
    }
    std::optional<IntegerDot> integerDot = llvm::StringSwitch<std::optional<IntegerDot>>(int8Dot)
                                               .Case("none", IntegerDot::None)
                                               .Case("madd", IntegerDot::MultiplyAdd)
                                               .Case("vnni", IntegerDot::Vnni)
                                               .Case("portable", IntegerDot::Portable)
                                               .Default(std::nullopt);
    if (!integerDot) {
      getOperation()->emitError("int8-dot must be none, madd, vnni or portable, got '")
          << int8Dot.getValue() << "'";
      return signalPassFailure();
    }
    if (bf16Dot && lanes != 16) {
      getOperation()->emitError("bf16-dot needs 16 lanes, got ") << lanes.getValue();
      return signalPassFailure();
    }
    if (failed(applyKernelPatterns(
            getOperation(), CpuKernelSet(CpuTarget{lanes, registers, *integerDot, bf16Dot}))))
      signalPassFailure();
  }
};

} // namespace
