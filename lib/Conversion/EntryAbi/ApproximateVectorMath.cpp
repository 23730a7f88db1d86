//===- ApproximateVectorMath.cpp - polynomial math on vectors ---*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-approximate-vector-math"

namespace xfmr {
#define GEN_PASS_DEF_XFMRAPPROXIMATEVECTORMATH
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

struct ApproximateVectorMathPass
    : xfmr::impl::XfmrApproximateVectorMathBase<ApproximateVectorMathPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    SmallVector<Operation *> vectorMath;
    getOperation()->walk([&](Operation *op) {
      if (!isa<math::ExpOp, math::TanhOp, math::ErfOp, math::LogOp>(op))
        return;
      Type type = op->getResult(0).getType();
      // Scalar tanh and erf too (GELU and its derivative in linalg loops):
      // as polynomials the loops vectorize, instead of calling libm per
      // element. They saturate to +-1, so their inputs need no range care;
      // scalar exp and log stay exact at +-inf through libm.
      if ((isa<math::ExpOp, math::TanhOp, math::ErfOp, math::LogOp>(op) && isa<VectorType>(type)) ||
          (isa<math::TanhOp, math::ErfOp>(op) && type.isF32()))
        vectorMath.push_back(op);
    });
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
      return llvm::is_contained({math::ExpOp::getOperationName(), math::TanhOp::getOperationName(),
                                 math::ErfOp::getOperationName(), math::LogOp::getOperationName()},
                                name);
    });
    if (failed(applyOpPatternsGreedily(vectorMath, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
