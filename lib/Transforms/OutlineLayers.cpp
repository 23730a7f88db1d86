//===- OutlineLayers.cpp - one function per distinct layer body -*- C++ -*-===//
//
// A model of 48 identical layers lowered as 48 copies of the same ops costs
// 48 times the compile time and code of one. Each xfmr.layer becomes a call
// of a private function whose arguments are the values the layer reads from
// above; layers whose functions are the same (same signature, equivalent
// body) share one. Constants and what the layer derives from weights alone
// (a dequantization, a widening, a transpose) move into the body, where the
// kernels fold them into their loads as they do in a flat function.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <algorithm>

#define DEBUG_TYPE "xfmr-outline-layers"

namespace xfmr {
#define GEN_PASS_DEF_XFMROUTLINELAYERS
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

/// Whether `value` is a constant, or computed by side-effect-free ops from
/// the weights (xfmr.param arguments) and constants alone: what a layer
/// recomputes in its body rather than taking as an argument.
bool derivesFromWeights(Value value, func::FuncOp func) {
  if (auto arg = dyn_cast<BlockArgument>(value))
    return arg.getOwner()->getParentOp() == func &&
           func.getArgAttr(arg.getArgNumber(), "xfmr.param");
  Operation *op = value.getDefiningOp();
  if (op->getNumRegions() != 0 || !isMemoryEffectFree(op))
    return false;
  return llvm::all_of(op->getOperands(),
                      [&](Value operand) { return derivesFromWeights(operand, func); });
}

/// Clones the ops computing `value` from weights into `b`'s block, mapping
/// each weight to the argument `argumentFor` gives it.
Value cloneDerivation(OpBuilder &b, Value value, IRMapping &mapping,
                      llvm::function_ref<Value(Value)> argumentFor) {
  if (Value mapped = mapping.lookupOrNull(value))
    return mapped;
  if (isa<BlockArgument>(value)) {
    Value arg = argumentFor(value);
    mapping.map(value, arg);
    return arg;
  }
  Operation *op = value.getDefiningOp();
  for (Value operand : op->getOperands())
    cloneDerivation(b, operand, mapping, argumentFor);
  b.clone(*op, mapping);
  return mapping.lookup(value);
}

struct OutlineLayersPass : xfmr::impl::XfmrOutlineLayersBase<OutlineLayersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (copies) {
      module.walk([](LayerOp layer) { layer.inlineBody(); });
      return;
    }
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> bodies;
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      for (auto layer : llvm::to_vector(func.getBody().getOps<LayerOp>()))
        outline(layer, func, symbols, bodies);
    }
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << bodies.size() << " layer bodies\n");
  }

  void outline(LayerOp layer, func::FuncOp parent, SymbolTable &symbols,
               SmallVectorImpl<func::FuncOp> &bodies) {
    MLIRContext *context = layer.getContext();
    llvm::SetVector<Value> used;
    getUsedValuesDefinedAbove(layer.getBody(), used);

    // The function: an argument per value read from above, except what is
    // derived from weights, whose weights become the arguments instead.
    auto func = func::FuncOp::create(layer.getLoc(), "layer", FunctionType::get(context, {}, {}));
    Block *entry = func.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockBegin(entry);
    SmallVector<Value> operands;
    auto argumentFor = [&](Value outer) {
      operands.push_back(outer);
      return entry->addArgument(outer.getType(), outer.getLoc());
    };
    IRMapping mapping;
    for (Value value : used) {
      if (derivesFromWeights(value, parent))
        cloneDerivation(b, value, mapping, argumentFor);
      else
        mapping.map(value, argumentFor(value));
    }
    for (Operation &op : layer.getBody().front().without_terminator())
      b.clone(op, mapping);
    // Each result but an updated cache (the argument itself, written in
    // place) is written into a buffer the caller passes: a result the callee
    // allocated would be freed by the caller through a run-time alias check.
    auto yield = cast<YieldOp>(layer.getBody().front().getTerminator());
    SmallVector<Value> results;
    OpBuilder caller(layer);
    for (Value value : yield.getValues()) {
      Value result = mapping.lookupOrDefault(value);
      auto tensor = dyn_cast<RankedTensorType>(result.getType());
      if (tensor && !result.getDefiningOp<CacheUpdateOp>()) {
        Value destination = argumentFor(tensor::EmptyOp::create(
            caller, layer.getLoc(), tensor.getShape(), tensor.getElementType()));
        result = bufferization::MaterializeInDestinationOp::create(b, yield.getLoc(), result,
                                                                   destination)
                     .getResult();
      }
      results.push_back(result);
    }
    func::ReturnOp::create(b, yield.getLoc(), results);
    func.setFunctionType(
        FunctionType::get(context, entry->getArgumentTypes(), layer.getResultTypes()));
    func.setPrivate();
    // Inlined, the body would be compiled once per call again.
    func->setAttr("passthrough", ArrayAttr::get(context, {StringAttr::get(context, "noinline")}));
    func->setAttr("llvm.linkage", LLVM::LinkageAttr::get(context, LLVM::Linkage::Internal));

    // One function per distinct body.
    func::FuncOp callee;
    for (func::FuncOp body : bodies)
      if (body.getFunctionType() == func.getFunctionType() &&
          OperationEquivalence::isRegionEquivalentTo(&body.getBody(), &func.getBody(),
                                                     OperationEquivalence::IgnoreLocations)) {
        callee = body;
        break;
      }
    if (callee) {
      func.erase();
    } else {
      // Symbols become kernel names on a GPU, where a '.' is no identifier.
      std::string name = (parent.getName() + "_" + layer.getName()).str();
      std::replace(name.begin(), name.end(), '.', '_');
      func.setName(name);
      symbols.insert(func, Block::iterator(parent));
      bodies.push_back(func);
      callee = func;
    }
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << parent.getName() << ": layer "
                            << layer.getName() << " calls @" << callee.getName() << "\n");

    auto call = func::CallOp::create(caller, layer.getLoc(), callee, operands);
    call->setAttr("xfmr.layer", layer.getNameAttr());
    layer.replaceAllUsesWith(call.getResults());
    layer.erase();
  }
};

} // namespace
