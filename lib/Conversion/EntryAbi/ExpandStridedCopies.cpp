//===- ExpandStridedCopies.cpp - no memrefCopy calls ------------*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-expand-strided-copies"

namespace xfmr {
#define GEN_PASS_DEF_XFMREXPANDSTRIDEDCOPIES
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

bool isContiguous(Value buffer) {
  auto type = dyn_cast<MemRefType>(buffer.getType());
  return type && type.getLayout().isIdentity();
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
      linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(), copy.getTarget());
      copy.erase();
    });
  }
};

} // namespace
