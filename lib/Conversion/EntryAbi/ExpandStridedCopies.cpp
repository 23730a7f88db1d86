//===- ExpandStridedCopies.cpp - no memrefCopy calls ------------*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

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
