//===- GpuKernelMath.cpp - kernel math without libdevice --------*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-gpu-kernel-math"

namespace xfmr {
#define GEN_PASS_DEF_XFMRGPUKERNELMATH
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// `instruction` (a PTX instruction of one operand, `T` standing for its
/// type, f32 or f64) applied to `x` through inline assembly.
Value ptxUnary(OpBuilder &b, Location loc, StringRef instruction, Value x) {
  bool f64 = x.getType().isF64();
  std::string text;
  for (char c : instruction)
    text += c == 'T' ? (f64 ? "f64" : "f32") : std::string(1, c);
  text += " $0, $1;";
  return LLVM::InlineAsmOp::create(
             b, loc, x.getType(), ValueRange{x}, b.getStringAttr(text),
             b.getStringAttr(f64 ? "=d,d" : "=f,f"), /*has_side_effects=*/nullptr,
             /*is_align_stack=*/nullptr,
             LLVM::TailCallKindAttr::get(b.getContext(), LLVM::TailCallKind::None),
             /*asm_dialect=*/nullptr, /*operand_attrs=*/nullptr)
      .getResult(0);
}

bool isScalarF32OrF64(Type type) { return type.isF32() || type.isF64(); }

/// A math op PTX computes in one instruction (convert-gpu-to-nvvm would
/// call libdevice for it).
template <typename MathOp> struct UnaryToPtx : OpRewritePattern<MathOp> {
  UnaryToPtx(MLIRContext *context, StringRef instruction, bool reciprocal = false)
      : OpRewritePattern<MathOp>(context, /*benefit=*/3), instruction(instruction),
        reciprocal(reciprocal) {}

  LogicalResult matchAndRewrite(MathOp op, PatternRewriter &rewriter) const override {
    if (!isScalarF32OrF64(op.getType()))
      return failure();
    Location loc = op.getLoc();
    Value result = ptxUnary(rewriter, loc, instruction, op.getOperand());
    if (reciprocal) {
      Value one =
          arith::ConstantOp::create(rewriter, loc, rewriter.getFloatAttr(op.getType(), 1.0));
      result = arith::DivFOp::create(rewriter, loc, one, result);
    }
    rewriter.replaceOp(op, result);
    return success();
  }

  std::string instruction;
  bool reciprocal;
};

/// An f32 exp2 that may be approximate (fastmath `afn`): PTX's
/// ex2.approx.ftz, one instruction of at most 2 ulp error (subnormal
/// results flushed to 0), which softmax-style exponentials afford.
struct ApproximateExp2ToPtx : OpRewritePattern<math::Exp2Op> {
  ApproximateExp2ToPtx(MLIRContext *context)
      : OpRewritePattern<math::Exp2Op>(context, /*benefit=*/3) {}
  LogicalResult matchAndRewrite(math::Exp2Op op, PatternRewriter &rewriter) const override {
    if (!op.getType().isF32() ||
        !arith::bitEnumContainsAll(op.getFastmath(), arith::FastMathFlags::afn))
      return failure();
    rewriter.replaceOp(op, ptxUnary(rewriter, op.getLoc(), "ex2.approx.ftz.T", op.getOperand()));
    return success();
  }
};

void populateUnaryToPtxPatterns(RewritePatternSet &patterns) {
  MLIRContext *context = patterns.getContext();
  patterns.add<UnaryToPtx<math::SqrtOp>>(context, "sqrt.rn.T");
  patterns.add<UnaryToPtx<math::RsqrtOp>>(context, "sqrt.rn.T", /*reciprocal=*/true);
  patterns.add<UnaryToPtx<math::FloorOp>>(context, "cvt.rmi.T.T");
  patterns.add<UnaryToPtx<math::CeilOp>>(context, "cvt.rpi.T.T");
  patterns.add<UnaryToPtx<math::TruncOp>>(context, "cvt.rzi.T.T");
  patterns.add<UnaryToPtx<math::RoundEvenOp>>(context, "cvt.rni.T.T");
  patterns.add<ApproximateExp2ToPtx>(context);
}

struct GpuKernelMathPass : xfmr::impl::XfmrGpuKernelMathBase<GpuKernelMathPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    // Polynomials first (higher benefit); the expansions rewrite what they
    // leave (powf, floor, ...) into arith and the approximated functions.
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) { return name != math::RsqrtOp::getOperationName(); },
        /*benefit=*/2);
    // Every expansion but fma's (into a multiply and an add, each rounded:
    // twice the instructions of fma.rn and less accurate).
    math::populateExpansionPatterns(patterns, {"ctlz", "sinh", "cosh", "tan", "tanh", "asinh",
                                               "acosh", "atanh", "ceil", "exp2", "powf", "fpowi",
                                               "round", "roundeven", "rsqrt", "clampf"});
    populateUnaryToPtxPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();

    // What convert-gpu-to-nvvm lowers without libdevice.
    WalkResult left = getOperation().walk([](Operation *op) {
      if (op->getDialect() != op->getContext()->getLoadedDialect<math::MathDialect>() ||
          isa<math::AbsFOp, math::AbsIOp, math::FmaOp, math::CopySignOp>(op))
        return WalkResult::advance();
      op->emitOpError("on ") << op->getResult(0).getType()
                             << " has no GPU lowering without libdevice";
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
