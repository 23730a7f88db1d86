//===- TrainStep.cpp - a compiled training step -----------------*- C++ -*-===//

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringMap.h"

#include "llvm/Support/Debug.h"
#include <cmath>

#define DEBUG_TYPE "xfmr-train-step"

namespace xfmr {
#define GEN_PASS_DEF_XFMRTRAINSTEP
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

/// An argument or result of the step function being built.
struct Slot {
  Value value;
  DictionaryAttr attrs;
};

struct TrainStepPass : xfmr::impl::XfmrTrainStepBase<TrainStepPass> {
  using Base::Base;

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    std::string gradName = function + "_grad";
    auto grad = module.lookupSymbol<func::FuncOp>(gradName);
    if (!grad || grad.isExternal() || !grad.getBody().hasOneBlock()) {
      module.emitError("xfmr-train-step: no function @")
          << gradName << " (run xfmr-autodiff{function=" << function << "} first)";
      return signalPassFailure();
    }
    if (optimizer != "adamw" && optimizer != "sgd") {
      module.emitError("xfmr-train-step: optimizer must be adamw or sgd, got '")
          << optimizer << "'";
      return signalPassFailure();
    }
    if (!(lossScale >= 0) || std::isinf(lossScale) || lossScaleGrowthInterval < 1) {
      module.emitError("xfmr-train-step: loss-scale must be positive and finite (or 0: none) "
                       "and loss-scale-growth-interval at least 1");
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step")) {
      module.emitError("xfmr-train-step: the module already has a @train_step");
      return signalPassFailure();
    }
    if (failed(build(module, grad)))
      signalPassFailure();
  }

  LogicalResult build(ModuleOp module, func::FuncOp grad) {
    MLIRContext *context = &getContext();
    OpBuilder b(context);
    b.setInsertionPointAfter(grad);
    Location loc = grad.getLoc();
    auto step = func::FuncOp::create(b, loc, "train_step", b.getFunctionType({}, {}));
    Block *body = step.addEntryBlock();
    SmallVector<Slot> args, results;
    auto named = [&](StringRef attr, StringRef name) {
      return b.getDictionaryAttr(b.getNamedAttr(attr, b.getStringAttr(name)));
    };

    // The gradient function's arguments, then state, then the step.
    IRMapping mapping;
    llvm::StringMap<Value> params;
    BlockArgument lossScaleArg; // replaced by the scale of the state below
    for (BlockArgument arg : grad.getArguments()) {
      BlockArgument copy = body->addArgument(arg.getType(), arg.getLoc());
      mapping.map(arg, copy);
      args.push_back({copy, grad.getArgAttrDict(arg.getArgNumber())});
      if (auto name = grad.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "xfmr.param"))
        params[name.getValue()] = copy;
      if (auto name = grad.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "xfmr.input");
          name && name.getValue() == kLossScaleInput)
        lossScaleArg = copy;
    }
    bool scaling = lossScale > 0;
    if (scaling != static_cast<bool>(lossScaleArg))
      return grad.emitError("xfmr-train-step: ")
             << (scaling ? "loss-scale needs a gradient function that takes the loss scale (run "
                           "xfmr-autodiff{function=" +
                               function + " loss-scale} first)"
                         : "@" + grad.getName().str() +
                               " takes a loss_scale, so loss-scale must be set");
    b.setInsertionPointToStart(body);
    for (Operation &op : grad.getBody().front().without_terminator())
      b.clone(op, mapping);

    // Split the gradient function's results into pass-through values and
    // the gradient of each weight.
    auto ret = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    SmallVector<std::pair<std::string, Value>> gradients;
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
      auto name = grad.getResultAttrOfType<StringAttr>(index, "xfmr.output");
      Value mapped = mapping.lookup(value);
      if (name && name.getValue().starts_with("grad:")) {
        std::string weight = name.getValue().drop_front(5).str();
        if (!params.count(weight))
          return grad.emitError("xfmr-train-step: result '")
                 << name.getValue() << "' is not the gradient of a weight";
        gradients.push_back({weight, mapped});
        continue;
      }
      results.push_back({mapped, grad.getResultAttrDict(index)});
    }
    if (gradients.empty())
      return grad.emitError("xfmr-train-step: @") << grad.getName() << " returns no weight gradients";

    // Arguments: the gradient function's, each weight's optimizer state,
    // then the step.
    SmallVector<Slot> states;
    auto addState = [&](StringRef weight, StringRef kind) {
      Value state = body->addArgument(params[weight].getType(), loc);
      states.push_back({state, named("xfmr.state", (weight + "." + kind).str())});
      return state;
    };
    // Each optimizer's state tensors per weight, in the order its update op
    // takes and returns them.
    SmallVector<StringRef, 2> stateKinds;
    if (optimizer == "adamw")
      stateKinds = {"exp_avg", "exp_avg_sq"};
    else
      stateKinds = {"momentum_buffer"};
    SmallVector<SmallVector<Value, 2>> weightStates;
    for (auto &entry : gradients) {
      SmallVector<Value, 2> own;
      for (StringRef kind : stateKinds)
        own.push_back(addState(entry.first, kind));
      weightStates.push_back(own);
    }
    Type elementType = cast<RankedTensorType>(gradients.front().second.getType()).getElementType();
    auto scalarType = RankedTensorType::get({}, elementType);
    // Dynamic loss scaling: its state, and the scale the backward starts from.
    Value scaleExponent, goodSteps, scale;
    if (scaling) {
      if (lossScaleArg.getType() != scalarType || !elementType.isF32())
        return grad.emitError("xfmr-train-step: loss scaling needs an f32 loss and f32 weights "
                              "(a mixed-precision model's master weights)");
      auto addScalerState = [&](StringRef name) {
        Value state = body->addArgument(scalarType, loc);
        states.push_back({state, named("xfmr.state", name)});
        return state;
      };
      scaleExponent = addScalerState("loss_scale.exponent");
      goodSteps = addScalerState("loss_scale.good_steps");
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(body);
      scale = LossScaleOp::create(b, loc, scalarType, scaleExponent, b.getF64FloatAttr(lossScale));
      lossScaleArg.replaceAllUsesWith(scale);
      llvm::erase_if(args, [&](const Slot &slot) { return slot.value == lossScaleArg; });
      body->eraseArgument(lossScaleArg.getArgNumber());
    }
    llvm::append_range(args, states);
    if (dataParallel) {
      if (!elementType.isF32())
        return grad.emitError("xfmr-train-step: data-parallel training reduces f32 gradients, "
                              "got ")
               << elementType;
      Value weight = body->addArgument(scalarType, loc);
      args.push_back({weight, named("xfmr.input", "gradient_weight")});
      for (auto &entry : gradients)
        entry.second = AllReduceOp::create(b, loc, entry.second, weight);
    }
    Value stepArg = body->addArgument(RankedTensorType::get({}, b.getI64Type()), loc);
    args.push_back({stepArg, named("xfmr.input", "step")});

    Value lr = LearningRateOp::create(b, loc, scalarType, stepArg,
                                      b.getF64FloatAttr(learningRate),
                                      b.getI64IntegerAttr(warmupSteps),
                                      b.getI64IntegerAttr(decaySteps),
                                      b.getF64FloatAttr(minLrRatio));
    results.push_back({lr, named("xfmr.output", "lr")});
    // The norm clips, and with loss scaling, tells overflows (non-finite)
    // apart; it is reported unscaled.
    Value norm;
    if (maxGradNorm > 0 || scaling) {
      SmallVector<Value> all;
      for (auto &entry : gradients)
        all.push_back(entry.second);
      norm = GlobalNormOp::create(b, loc, scalarType, all);
      Value reported = scaling ? arith::DivFOp::create(b, loc, norm, scale).getResult() : norm;
      results.push_back({reported, named("xfmr.output", "grad_norm")});
    }
    if (scaling)
      results.push_back({scale, named("xfmr.output", "loss_scale")});

    auto updated = [&](Value value, StringRef name) {
      NamedAttribute attrs[] = {b.getNamedAttr("xfmr.output", b.getStringAttr("new:" + name)),
                                b.getNamedAttr("xfmr.updates", b.getStringAttr(name))};
      results.push_back({value, b.getDictionaryAttr(attrs)});
    };
    // 0: the norm is there only for the overflow check.
    FloatAttr clipTo = b.getF64FloatAttr(maxGradNorm > 0 ? maxGradNorm : scaling ? 0.0 : 1.0);
    for (auto [entry, own] : llvm::zip_equal(gradients, weightStates)) {
      auto &[weight, gradient] = entry;
      Value param = params[weight];
      if (cast<RankedTensorType>(param.getType()).getElementType() != elementType)
        return grad.emitError("xfmr-train-step: weights of mixed element types");
      Operation *update;
      if (optimizer == "adamw")
        update = AdamWUpdateOp::create(b, loc, param, gradient, own[0], own[1], lr, stepArg, norm,
                                       scale, b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
                                       b.getF64FloatAttr(epsilon), b.getF64FloatAttr(weightDecay),
                                       clipTo);
      else
        update = SgdUpdateOp::create(b, loc, param, gradient, own[0], lr, norm, scale,
                                     b.getF64FloatAttr(momentum), b.getF64FloatAttr(weightDecay),
                                     clipTo);
      // Results: the new parameter, then the new states.
      updated(update->getResult(0), weight);
      for (auto [kind, state] : llvm::zip_equal(stateKinds, update->getResults().drop_front()))
        updated(state, weight + "." + kind.str());
    }
    if (scaling) {
      auto next = LossScaleUpdateOp::create(b, loc, scaleExponent, goodSteps, norm,
                                            b.getI64IntegerAttr(lossScaleGrowthInterval));
      updated(next.getNewExponent(), "loss_scale.exponent");
      updated(next.getNewGoodSteps(), "loss_scale.good_steps");
    }

    SmallVector<Value> returned;
    SmallVector<Type> argTypes, resultTypes;
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    for (Slot &slot : results) {
      returned.push_back(slot.value);
      resultTypes.push_back(slot.value.getType());
      resultAttrs.push_back(slot.attrs);
    }
    for (Slot &slot : args) {
      argTypes.push_back(slot.value.getType());
      argAttrs.push_back(slot.attrs);
    }
    func::ReturnOp::create(b, loc, returned);
    step.setType(b.getFunctionType(argTypes, resultTypes));
    step.setAllArgAttrs(argAttrs);
    step.setAllResultAttrs(resultAttrs);
    return success();
  }
};

} // namespace
