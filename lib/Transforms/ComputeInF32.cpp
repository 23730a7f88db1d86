//===- ComputeInF32.cpp - bf16/f16 xfmr ops computed in f32 -----*- C++ -*-===//

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-compute-in-f32"

namespace xfmr {
#define GEN_PASS_DEF_XFMRCOMPUTEINF32
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

/// Ops that only move values: exact in any type, so left narrow (a KV
/// cache updated in place, an embedding table read a row at a time).
bool movesValues(Operation *op) {
  if (auto embedding = dyn_cast<EmbeddingOp>(op))
    return embedding.getScale().convertToDouble() == 1.0;
  return isa<ReshapeOp, TransposeOp, SelectOp, CacheUpdateOp>(op);
}

bool isLowPrecision(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && (tensor.getElementType().isBF16() || tensor.getElementType().isF16());
}

/// Ops that compute in f32 from narrow operands themselves: the products
/// read an f32 xfmr.dequantize's bf16/f16 scales as stored, where a widened
/// copy would be written and read again at every call.
bool readsNarrowInF32(Operation *op) {
  auto dequantize = dyn_cast<DequantizeOp>(op);
  return dequantize && !isLowPrecision(dequantize.getType());
}

Type widened(Type type) {
  if (!isLowPrecision(type))
    return type;
  auto tensor = cast<RankedTensorType>(type);
  return tensor.clone(Float32Type::get(type.getContext()));
}

struct ComputeInF32Pass : xfmr::impl::XfmrComputeInF32Base<ComputeInF32Pass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    Dialect *xfmrDialect = getContext().getLoadedDialect<XfmrDialect>();
    SmallVector<Operation *> lowPrecision;
    getOperation()->walk([&](Operation *op) {
      if (op->getDialect() != xfmrDialect || movesValues(op) || readsNarrowInF32(op))
        return;
      if (llvm::any_of(op->getOperandTypes(), isLowPrecision) ||
          llvm::any_of(op->getResultTypes(), isLowPrecision))
        lowPrecision.push_back(op);
    });
    for (Operation *op : lowPrecision) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      IRMapping extended;
      for (Value value : op->getOperands())
        if (isLowPrecision(value.getType()) && !extended.contains(value))
          extended.map(value, arith::ExtFOp::create(b, loc, widened(value.getType()), value));
      Operation *wide = b.clone(*op, extended);
      for (auto [narrow, result] : llvm::zip_equal(op->getResults(), wide->getResults())) {
        result.setType(widened(narrow.getType()));
        Value replacement = result;
        if (isLowPrecision(narrow.getType()))
          replacement = arith::TruncFOp::create(b, loc, narrow.getType(), result);
        narrow.replaceAllUsesWith(replacement);
      }
      op->erase();
      if (failed(verify(wide))) {
        wide->emitOpError("cannot be computed in f32");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
