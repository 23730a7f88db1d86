//===- DestinationPassingEntry.cpp - caller-owned result buffers -*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

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
  for (BlockArgument arg : entry.getArguments()) {
    Type tensorType = arg.getType();
    arg.setType(bufferTypeOf(tensorType));
    auto tensor = bufferization::ToTensorOp::create(b, func.getLoc(), tensorType, arg,
                                                    /*restrict=*/true, /*writable=*/false);
    arg.replaceAllUsesExcept(tensor, tensor);
  }

  SmallVector<Type> newInputs;
  for (BlockArgument arg : entry.getArguments())
    newInputs.push_back(arg.getType());
  SmallVector<Value> outputs;
  for (Type result : type.getResults()) {
    newInputs.push_back(bufferTypeOf(result));
    outputs.push_back(entry.addArgument(newInputs.back(), func.getLoc()));
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
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isPrivate() || func.isExternal())
        continue;
      if (failed(rewriteEntry(func)))
        return signalPassFailure();
    }
  }
};

} // namespace
