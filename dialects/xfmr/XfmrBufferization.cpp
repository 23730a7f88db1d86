//===- XfmrBufferization.cpp - xfmr ops that bufferize themselves ---------===//
//
// Most xfmr ops lower to linalg or to kernels before bufferization.
// `xfmr.all_reduce` stays until then: it reduces its operand's buffer in
// place, through the runtime, so a gradient is not copied to be reduced.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Dialect/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace xfmr;

/// The runtime's `void xfmr_all_reduce_f32(uintptr_t data, int64_t count,
/// float weight)`. The address travels as an integer: the executables' bare
/// pointer convention takes only memrefs of static shape.
static constexpr StringLiteral kAllReduceFunction = "xfmr_all_reduce_f32";

static func::FuncOp getOrDeclareAllReduce(RewriterBase &rewriter, Operation *from) {
  auto module = from->getParentOfType<ModuleOp>();
  if (auto existing = module.lookupSymbol<func::FuncOp>(kAllReduceFunction))
    return existing;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(module.getBody());
  Type f32 = rewriter.getF32Type();
  auto type = rewriter.getFunctionType({rewriter.getI64Type(), rewriter.getI64Type(), f32}, {});
  auto declaration = func::FuncOp::create(rewriter, from->getLoc(), kAllReduceFunction, type);
  declaration.setPrivate();
  return declaration;
}

bool AllReduceOp::bufferizesToMemoryRead(OpOperand &, const AnalysisState &) { return true; }

bool AllReduceOp::bufferizesToMemoryWrite(OpOperand &operand, const AnalysisState &) {
  return operand.get() == getInput();
}

AliasingValueList AllReduceOp::getAliasingValues(OpOperand &operand, const AnalysisState &) {
  if (operand.get() != getInput())
    return {};
  return {{getResult(), BufferRelation::Equivalent}};
}

LogicalResult AllReduceOp::bufferize(RewriterBase &rewriter, const BufferizationOptions &options,
                                     BufferizationState &state) {
  FailureOr<Value> data = getBuffer(rewriter, getInput(), options, state);
  FailureOr<Value> weight = getBuffer(rewriter, getWeight(), options, state);
  if (failed(data) || failed(weight))
    return failure();
  Location loc = getLoc();
  auto type = cast<MemRefType>(data->getType());
  int64_t count = type.getNumElements();
  // The runtime reads one contiguous array (identity layouts start at the
  // aligned pointer): a strided view is reduced through a contiguous copy.
  bool strided = !type.getLayout().isIdentity();
  Value contiguous = *data;
  if (strided) {
    contiguous = memref::AllocOp::create(rewriter, loc,
                                         MemRefType::get(type.getShape(), type.getElementType()));
    memref::CopyOp::create(rewriter, loc, *data, contiguous);
  }
  Value address = memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, contiguous);
  address = arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(), address);
  Value countValue = arith::ConstantIntOp::create(rewriter, loc, count, 64);
  Value weightValue = memref::LoadOp::create(rewriter, loc, *weight, ValueRange{});
  func::CallOp::create(rewriter, loc, getOrDeclareAllReduce(rewriter, *this),
                       ValueRange{address, countValue, weightValue});
  if (strided)
    memref::CopyOp::create(rewriter, loc, contiguous, *data);
  replaceOpWithBufferizedValues(rewriter, *this, *data);
  return success();
}
