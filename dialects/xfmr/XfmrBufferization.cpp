//===- XfmrBufferization.cpp - xfmr ops that bufferize themselves ---------===//
//
// Most xfmr ops lower to linalg or to kernels before bufferization.
// `xfmr.all_reduce` (and its split form, `xfmr.all_reduce_start` and
// `xfmr.all_reduce_wait`) stays until then: it reduces its operand's buffer
// in place, through the runtime, so a gradient is not copied to be reduced.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Dialect/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace xfmr;

/// The runtime's reductions: `void xfmr_all_reduce_f32(uintptr_t data,
/// int64_t count, float weight)`, its split `xfmr_all_reduce_start_f32` (the
/// same arguments) and `xfmr_all_reduce_wait_f32(uintptr_t data)`. Addresses
/// travel as integers: the executables' bare pointer convention takes only
/// memrefs of static shape.
static constexpr StringLiteral kAllReduceFunction = "xfmr_all_reduce_f32";
static constexpr StringLiteral kAllReduceStartFunction = "xfmr_all_reduce_start_f32";
static constexpr StringLiteral kAllReduceWaitFunction = "xfmr_all_reduce_wait_f32";

static func::FuncOp getOrDeclare(RewriterBase &rewriter, Operation *from, StringRef name,
                                 TypeRange arguments) {
  auto module = from->getParentOfType<ModuleOp>();
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  // Among the leading declarations in the order of their names: one-shot
  // bufferization may visit functions in an order that varies between runs,
  // and the output should not.
  Block *body = module.getBody();
  auto position = llvm::find_if(*body, [&](Operation &other) {
    auto function = dyn_cast<func::FuncOp>(other);
    return !function || !function.isDeclaration() || function.getSymName() > name;
  });
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(body, position);
  auto declaration =
      func::FuncOp::create(rewriter, from->getLoc(), name, rewriter.getFunctionType(arguments, {}));
  declaration.setPrivate();
  declaration->setAttr(kMainThreadOnlyAttrName, rewriter.getUnitAttr());
  return declaration;
}

static Value addressOf(RewriterBase &rewriter, Location loc, Value buffer) {
  Value address = memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, buffer);
  return arith::IndexCastOp::create(rewriter, loc, rewriter.getI64Type(), address);
}

/// The runtime reads one contiguous array (identity layouts start at the
/// aligned pointer); a strided view is reduced through a contiguous copy.
static bool isContiguous(Value buffer) {
  return cast<MemRefType>(buffer.getType()).getLayout().isIdentity();
}

/// Calls `function(data, count, weight)` on `data`, through a contiguous
/// copy if it is strided.
static void callReduction(RewriterBase &rewriter, Operation *op, StringRef function, Value data,
                          Value weight) {
  Location loc = op->getLoc();
  auto type = cast<MemRefType>(data.getType());
  Value contiguous = data;
  if (!isContiguous(data)) {
    contiguous = memref::AllocOp::create(rewriter, loc,
                                         MemRefType::get(type.getShape(), type.getElementType()));
    memref::CopyOp::create(rewriter, loc, data, contiguous);
  }
  Type i64 = rewriter.getI64Type();
  Value address = addressOf(rewriter, loc, contiguous);
  Value countValue = arith::ConstantIntOp::create(rewriter, loc, type.getNumElements(), 64);
  Value weightValue = memref::LoadOp::create(rewriter, loc, weight, ValueRange{});
  func::CallOp::create(rewriter, loc,
                       getOrDeclare(rewriter, op, function, {i64, i64, rewriter.getF32Type()}),
                       ValueRange{address, countValue, weightValue});
  if (contiguous != data)
    memref::CopyOp::create(rewriter, loc, contiguous, data);
}

/// `op`'s reduction in place: a call of `function`, or for a strided view,
/// which cannot stay in flight through a copy the wait would have to copy
/// back, of the blocking reduction.
template <typename Op>
static LogicalResult bufferizeReduction(Op op, RewriterBase &rewriter,
                                        const BufferizationOptions &options,
                                        BufferizationState &state, StringRef function) {
  FailureOr<Value> data = getBuffer(rewriter, op.getInput(), options, state);
  FailureOr<Value> weight = getBuffer(rewriter, op.getWeight(), options, state);
  if (failed(data) || failed(weight))
    return failure();
  callReduction(rewriter, op, isContiguous(*data) ? function : StringRef(kAllReduceFunction), *data,
                *weight);
  replaceOpWithBufferizedValues(rewriter, op, *data);
  return success();
}

LogicalResult AllReduceOp::bufferize(RewriterBase &rewriter, const BufferizationOptions &options,
                                     BufferizationState &state) {
  return bufferizeReduction(*this, rewriter, options, state, kAllReduceFunction);
}

LogicalResult AllReduceStartOp::bufferize(RewriterBase &rewriter,
                                          const BufferizationOptions &options,
                                          BufferizationState &state) {
  return bufferizeReduction(*this, rewriter, options, state, kAllReduceStartFunction);
}

LogicalResult AllReduceWaitOp::bufferize(RewriterBase &rewriter,
                                         const BufferizationOptions &options,
                                         BufferizationState &state) {
  FailureOr<Value> data = getBuffer(rewriter, getInput(), options, state);
  if (failed(data))
    return failure();
  if (isContiguous(*data))
    func::CallOp::create(
        rewriter, getLoc(),
        getOrDeclare(rewriter, *this, kAllReduceWaitFunction, {rewriter.getI64Type()}),
        ValueRange{addressOf(rewriter, getLoc(), *data)});
  replaceOpWithBufferizedValues(rewriter, *this, *data);
  return success();
}
