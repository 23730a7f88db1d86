//===- DestinationPassingEntry.cpp - caller-owned result buffers -*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
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

/// A private function copying one buffer of `type` into another unless they
/// are the same, made once per type: a deep model's entry has a cache per
/// layer, and LLVM's constraint elimination costs the square of the branches
/// dominating one another in one function.
func::FuncOp copyUnlessSame(ModuleOp module, MemRefType type,
                            llvm::DenseMap<Type, func::FuncOp> &copiers) {
  func::FuncOp &copier = copiers[type];
  if (copier)
    return copier;
  MLIRContext *context = module.getContext();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = module.getLoc();
  copier =
      func::FuncOp::create(b, loc, "xfmr_copy_unless_same", b.getFunctionType({type, type}, {}));
  SymbolTable(module).insert(copier);
  copier.setPrivate();
  copier->setAttr("passthrough", b.getArrayAttr({b.getStringAttr("noinline")}));
  copier->setAttr("llvm.linkage", LLVM::LinkageAttr::get(context, LLVM::Linkage::Internal));
  Block *body = copier.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value from = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, body->getArgument(0));
  Value to = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, body->getArgument(1));
  Value distinct = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, from, to);
  scf::IfOp::create(b, loc, distinct, [&](OpBuilder &nb, Location nloc) {
    memref::CopyOp::create(nb, nloc, body->getArgument(0), body->getArgument(1));
    scf::YieldOp::create(nb, nloc);
  });
  func::ReturnOp::create(b, loc);
  return copier;
}

LogicalResult rewriteEntry(func::FuncOp func, llvm::DenseMap<Type, func::FuncOp> &copiers) {
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
    Operation *copy = nullptr;
    if (Value output = updatedIn.lookup(arg.getArgNumber())) {
      copy = func::CallOp::create(
          b, func.getLoc(),
          copyUnlessSame(func->getParentOfType<ModuleOp>(), bufferTypeOf(tensorType), copiers),
          ValueRange{arg, output});
      source = output;
      writable = true;
    }
    auto tensor = bufferization::ToTensorOp::create(b, func.getLoc(), tensorType, source,
                                                    /*restrict=*/true, writable);
    arg.replaceUsesWithIf(
        tensor, [&](OpOperand &use) { return use.getOwner() != tensor && use.getOwner() != copy; });
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
    llvm::DenseMap<Type, func::FuncOp> copiers;
    for (auto func : llvm::to_vector(getOperation().getOps<func::FuncOp>())) {
      if (func.isPrivate() || func.isExternal())
        continue;
      if (failed(rewriteEntry(func, copiers)))
        return signalPassFailure();
    }
  }
};

} // namespace
