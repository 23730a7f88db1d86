//===- DestinationPassingEntry.cpp - caller-owned result buffers -*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-destination-passing-entry"

namespace xfmr {
#define GEN_PASS_DEF_XFMRDESTINATIONPASSINGENTRY
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

MemRefType bufferTypeOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

LogicalResult rewriteEntry(func::FuncOp func) {
  FunctionType type = func.getFunctionType();
  for (Type t : llvm::concat<const Type>(type.getInputs(), type.getResults()))
    if (!isa<RankedTensorType>(t) || !cast<RankedTensorType>(t).hasStaticShape())
      return func.emitError("entry function arguments and results must be statically "
                            "shaped tensors, got ")
             << t;

  Block &entry = func.getBody().front();
  OpBuilder b(func.getContext());
  b.setInsertionPointToStart(&entry);
  SmallVector<Type> newInputs(entry.getArgumentTypes());
  for (Type &input : newInputs)
    input = bufferTypeOf(input);
  SmallVector<Value> outputs;
  for (Type result : type.getResults()) {
    newInputs.push_back(bufferTypeOf(result));
    outputs.push_back(entry.addArgument(newInputs.back(), func.getLoc()));
  }

  // A result that updates an argument (xfmr.updates: a training step's
  // weights, a KV cache) is computed in its output buffer, which starts as a
  // copy of the argument -- no copy when the caller passes the argument's
  // own buffer, which is then updated in place.
  llvm::SmallDenseMap<unsigned, Value> updatedIn;
  for (unsigned result = 0; result < type.getNumResults(); ++result) {
    auto updates = func.getResultAttrOfType<StringAttr>(result, "xfmr.updates");
    if (!updates)
      continue;
    for (unsigned arg = 0; arg < type.getNumInputs(); ++arg)
      for (StringRef kind : {"xfmr.param", "xfmr.state"})
        if (auto name = func.getArgAttrOfType<StringAttr>(arg, kind);
            name && name == updates && type.getInput(arg) == type.getResult(result))
          updatedIn[arg] = outputs[result];
  }
  for (BlockArgument arg : entry.getArguments().take_front(type.getNumInputs())) {
    Type tensorType = arg.getType();
    arg.setType(bufferTypeOf(tensorType));
    Value source = arg;
    bool writable = false;
    if (Value output = updatedIn.lookup(arg.getArgNumber())) {
      Location loc = func.getLoc();
      Value from = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, arg);
      Value to = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, output);
      Value distinct = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, from, to);
      scf::IfOp::create(b, loc, distinct, [&](OpBuilder &nb, Location nloc) {
        memref::CopyOp::create(nb, nloc, arg, output);
        scf::YieldOp::create(nb, nloc);
      });
      source = output;
      writable = true;
    }
    auto tensor = bufferization::ToTensorOp::create(b, func.getLoc(), tensorType, source,
                                                    /*restrict=*/true, writable);
    arg.replaceUsesWithIf(tensor, [&](OpOperand &use) {
      return !isa<bufferization::ToTensorOp, memref::ExtractAlignedPointerAsIndexOp,
                  memref::CopyOp>(use.getOwner());
    });
  }

  // Result attributes describe the new output arguments.
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  func.getAllArgAttrs(argAttrs);
  func.getAllResultAttrs(resultAttrs);
  llvm::append_range(argAttrs, resultAttrs);

  func.walk([&](func::ReturnOp ret) {
    OpBuilder rb(ret);
    for (auto [value, output] : llvm::zip_equal(ret.getOperands(), outputs))
      bufferization::MaterializeInDestinationOp::create(rb, ret.getLoc(), Type(), value, output,
                                                        /*restrict=*/true, /*writable=*/true);
    ret->setOperands({});
  });
  func.setFunctionType(FunctionType::get(func.getContext(), newInputs, {}));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
  func->setAttr("xfmr.entry", UnitAttr::get(func.getContext()));
  return success();
}

struct DestinationPassingEntryPass
    : xfmr::impl::XfmrDestinationPassingEntryBase<DestinationPassingEntryPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isPrivate() || func.isExternal())
        continue;
      if (failed(rewriteEntry(func)))
        return signalPassFailure();
    }
  }
};

} // namespace
