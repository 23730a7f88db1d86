//===- ExpandStridedCopies.cpp - no memrefCopy calls ------------*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-expand-strided-copies"

namespace xfmr {
#define GEN_PASS_DEF_XFMREXPANDSTRIDEDCOPIES
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// The longest innermost dimension copied as one vector.
constexpr int64_t kMaxVectorElements = 64;

bool isContiguous(Value buffer) {
  auto type = dyn_cast<MemRefType>(buffer.getType());
  return type && type.getLayout().isIdentity();
}

/// Whether `type` is static with a unit-stride innermost dimension short
/// enough to copy as one vector.
bool copiesByRows(MemRefType type) {
  return type.hasStaticShape() && type.getRank() >= 1 && type.isLastDimUnitStride() &&
         type.getShape().back() <= kMaxVectorElements && type.getElementType().isIntOrFloat();
}

/// A loop nest over the outer dimensions copying a vector of the innermost
/// one at a time: the loops linalg.copy lowers to copy an element at a time,
/// which LLVM leaves scalar where it cannot tell the buffers apart.
void copyRows(OpBuilder &b, Location loc, Value source, Value target) {
  auto type = cast<MemRefType>(source.getType());
  auto vectorType = VectorType::get({type.getShape().back()}, type.getElementType());
  SmallVector<Value> lower, upper, steps;
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  for (int64_t size : type.getShape().drop_back()) {
    lower.push_back(zero);
    upper.push_back(arith::ConstantIndexOp::create(b, loc, size));
    steps.push_back(one);
  }
  scf::buildLoopNest(b, loc, lower, upper, steps, [&](OpBuilder &nb, Location l, ValueRange outer) {
    SmallVector<Value> indices(outer);
    indices.push_back(zero);
    Value row = vector::LoadOp::create(nb, l, vectorType, source, indices);
    vector::StoreOp::create(nb, l, row, target, indices);
  });
}

struct ExpandStridedCopiesPass
    : xfmr::impl::XfmrExpandStridedCopiesBase<ExpandStridedCopiesPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    getOperation()->walk([](memref::CopyOp copy) {
      if (isContiguous(copy.getSource()) && isContiguous(copy.getTarget()))
        return;
      OpBuilder b(copy);
      auto sourceType = cast<MemRefType>(copy.getSource().getType());
      auto targetType = cast<MemRefType>(copy.getTarget().getType());
      if (copiesByRows(sourceType) && copiesByRows(targetType))
        copyRows(b, copy.getLoc(), copy.getSource(), copy.getTarget());
      else
        linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(), copy.getTarget());
      copy.erase();
    });
  }
};

} // namespace
