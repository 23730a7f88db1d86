//===- Autodiff.cpp - reverse-mode differentiation of xfmr IR ---*- C++ -*-===//

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-autodiff"

namespace xfmr {
#define GEN_PASS_DEF_XFMRAUTODIFF
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

RankedTensorType typeOf(Value value) { return cast<RankedTensorType>(value.getType()); }

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

Value zerosOf(OpBuilder &b, Location loc, RankedTensorType type) {
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0)));
}

Value scalarOf(OpBuilder &b, Location loc, Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(elementType, value)));
}

/// Adjoints of the upstream ops that appear in xfmr programs: slices of a
/// fused QKV projection and same-shape math on tensors.
LogicalResult upstreamAdjoint(Operation *op, OpBuilder &b, ValueRange rg,
                              SmallVectorImpl<Value> &og) {
  og.assign(op->getNumOperands(), Value());
  Value g = rg.empty() ? Value() : rg[0];
  if (!g)
    return success();
  Location loc = op->getLoc();
  Value y = op->getNumResults() ? op->getResult(0) : Value();
  auto constant = [&](double value) { return scalarOf(b, loc, typeOf(g).getElementType(), value); };
  auto mul = [&](Value x, Value z) { return MulOp::create(b, loc, x, z).getResult(); };
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    og[0] = tensor::InsertSliceOp::create(b, loc, g, zerosOf(b, loc, typeOf(slice.getSource())),
                                          slice.getMixedOffsets(), slice.getMixedSizes(),
                                          slice.getMixedStrides());
    return success();
  }
  if (isa<math::ExpOp>(op)) {
    og[0] = mul(g, y);
    return success();
  }
  if (isa<math::TanhOp>(op)) {
    og[0] = mul(g, SubOp::create(b, loc, constant(1.0), mul(y, y)));
    return success();
  }
  if (isa<math::SqrtOp>(op)) {
    og[0] = DivOp::create(b, loc, mul(g, constant(0.5)), y);
    return success();
  }
  if (isa<math::RsqrtOp>(op)) {
    og[0] = mul(mul(g, constant(-0.5)), mul(y, mul(y, y)));
    return success();
  }
  if (isa<math::LogOp>(op)) {
    og[0] = DivOp::create(b, loc, g, op->getOperand(0));
    return success();
  }
  if (isa<math::AbsFOp>(op)) {
    Value x = op->getOperand(0);
    Value zero = constant(0.0);
    Value negative = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x,
                                           AddOp::create(b, loc, zero, zerosOf(b, loc, typeOf(x))));
    og[0] = SelectOp::create(b, loc, negative, mul(g, constant(-1.0)), g);
    return success();
  }
  // A rounding's adjoint passes the gradient through, in the operand's type
  // (so master weights get f32 gradients from the narrow ops that use them).
  if (isa<arith::TruncFOp>(op)) {
    og[0] = arith::ExtFOp::create(b, loc, op->getOperand(0).getType(), g);
    return success();
  }
  if (isa<arith::ExtFOp>(op)) {
    og[0] = arith::TruncFOp::create(b, loc, op->getOperand(0).getType(), g);
    return success();
  }
  if (isa<arith::NegFOp>(op)) {
    og[0] = mul(g, constant(-1.0));
    return success();
  }
  return op->emitOpError("has no adjoint, but a value depending on a parameter reaches it");
}

/// The static box (offsets, sizes) that a unit-stride `insert_slice`
/// writes, if it has one.
std::optional<std::pair<SmallVector<int64_t>, SmallVector<int64_t>>>
staticBox(tensor::InsertSliceOp insert) {
  if (ShapedType::isDynamicShape(insert.getStaticOffsets()) ||
      ShapedType::isDynamicShape(insert.getStaticSizes()) ||
      llvm::any_of(insert.getStaticStrides(), [](int64_t stride) { return stride != 1; }))
    return std::nullopt;
  return std::make_pair(llvm::to_vector(insert.getStaticOffsets()),
                        llvm::to_vector(insert.getStaticSizes()));
}

bool isZeros(Value value) {
  DenseElementsAttr attr;
  return matchPattern(value, m_Constant(&attr)) && attr.isSplat() &&
         isa<FloatType>(attr.getElementType()) && attr.getSplatValue<APFloat>().isZero();
}

/// `slot + g` when both are slices of a gradient inserted into zeros (the
/// adjoints of a fused QKV projection's slices, `slot` a chain of them):
/// g's slice inserted into `slot` instead, when it is disjoint from the
/// chain's; once the slices cover the whole tensor, the chain is rebuilt on
/// an empty tensor (nothing is filled, nothing added). Existing ops are left
/// as they are: an adjoint may hand the same value to several operands. Null
/// when the pattern does not apply.
Value insertDisjointSlice(OpBuilder &b, Location loc, Value slot, Value g) {
  auto added = g.getDefiningOp<tensor::InsertSliceOp>();
  auto box = added ? staticBox(added) : std::nullopt;
  if (!box || !isZeros(added.getDest()))
    return Value();
  auto [offsets, sizes] = *box;
  int64_t covered = ShapedType::getNumElements(sizes);
  SmallVector<tensor::InsertSliceOp> chain;
  for (Value link = slot; !isZeros(link);) {
    auto insert = link.getDefiningOp<tensor::InsertSliceOp>();
    auto other = insert ? staticBox(insert) : std::nullopt;
    if (!other)
      return Value();
    auto [otherOffsets, otherSizes] = *other;
    bool disjoint = false;
    for (auto [offset, size, otherOffset, otherSize] :
         llvm::zip_equal(offsets, sizes, otherOffsets, otherSizes))
      disjoint |= offset + size <= otherOffset || otherOffset + otherSize <= offset;
    if (!disjoint)
      return Value();
    covered += ShapedType::getNumElements(otherSizes);
    chain.push_back(insert);
    link = insert.getDest();
  }
  if (chain.empty())
    return Value();
  auto insertInto = [&](tensor::InsertSliceOp slice, Value into) -> Value {
    return tensor::InsertSliceOp::create(b, loc, slice.getSource(), into, slice.getMixedOffsets(),
                                         slice.getMixedSizes(), slice.getMixedStrides());
  };
  RankedTensorType type = typeOf(slot);
  bool covers = covered == type.getNumElements();
  Value result = slot;
  if (covers) {
    result = tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
    for (tensor::InsertSliceOp slice : llvm::reverse(chain))
      result = insertInto(slice, result);
  }
  LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] disjoint slice of " << type << " inserted"
                          << (covers ? ", covering it" : "") << "\n");
  return insertInto(added, result);
}

class Differentiator {
public:
  /// `seed`: the loss's own gradient (a rank-0 tensor of its type), or
  /// null for 1.
  Differentiator(func::FuncOp func, ArrayRef<unsigned> wrt, Value seed)
      : func(func), wrt(wrt), seed(seed) {}

  /// Builds the backward part before the return; returns the gradients of
  /// the `wrt` arguments, or failure.
  FailureOr<SmallVector<Value>> run() {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(0);
    for (unsigned index : wrt)
      active.insert(body.getArgument(index));
    findActiveValues(body);
    OpBuilder b(ret);
    Location loc = func.getLoc();
    grads[loss] = seed ? seed : scalarOf(b, loc, typeOf(loss).getElementType(), 1.0);
    if (failed(backward(body, b)))
      return failure();
    SmallVector<Value> result;
    for (unsigned index : wrt) {
      Value arg = body.getArgument(index);
      Value g = grads.lookup(arg);
      result.push_back(g ? g : zerosOf(b, loc, typeOf(arg)));
    }
    return result;
  }

private:
  /// Values that depend on a differentiated argument through float data,
  /// inside layers too.
  void findActiveValues(Block &block) {
    for (Operation &op : block.without_terminator()) {
      if (auto layer = dyn_cast<LayerOp>(op)) {
        Block &inner = layer.getBody().front();
        findActiveValues(inner);
        for (auto [result, yielded] :
             llvm::zip_equal(layer.getResults(), inner.getTerminator()->getOperands()))
          if (active.contains(yielded))
            active.insert(result);
        continue;
      }
      if (!llvm::any_of(op.getOperands(), [&](Value v) { return active.contains(v); }))
        continue;
      for (Value result : op.getResults())
        if (isFloatTensor(result))
          active.insert(result);
    }
  }

  /// Adds `g` to the gradient of `value`.
  void accumulate(OpBuilder &b, Location loc, Value value, Value g) {
    Value &slot = grads[value];
    if (!slot)
      slot = g;
    else if (Value inserted = insertDisjointSlice(b, loc, slot, g))
      slot = inserted;
    else
      slot = AddOp::create(b, loc, slot, g).getResult();
  }

  /// The adjoints of `block`'s ops, last to first, built by `b`.
  LogicalResult backward(Block &block, OpBuilder &b) {
    SmallVector<Operation *> forward;
    for (Operation &op : block.without_terminator())
      forward.push_back(&op);
    for (Operation *op : llvm::reverse(forward)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value result : op->getResults()) {
        resultGrads.push_back(grads.lookup(result));
        any |= static_cast<bool>(resultGrads.back());
      }
      if (!any)
        continue;
      if (auto layer = dyn_cast<LayerOp>(op)) {
        if (failed(backwardLayer(layer, b)))
          return failure();
        continue;
      }
      SmallVector<Value> operandGrads;
      LogicalResult built = success();
      if (auto differentiable = dyn_cast<DifferentiableOpInterface>(op))
        built = differentiable.buildAdjoint(b, resultGrads, operandGrads);
      else
        built = upstreamAdjoint(op, b, resultGrads, operandGrads);
      if (failed(built))
        return failure();
      for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
        if (!active.contains(operand))
          continue;
        Value g = index < operandGrads.size() ? operandGrads[index] : Value();
        if (!g)
          return op->emitOpError("gives no gradient for operand #")
                 << index << ", which depends on a parameter";
        accumulate(b, op->getLoc(), operand, g);
      }
    }
    return success();
  }

  /// A layer's backward is a layer of its own, `<name>.grad`, so that the
  /// backward of identical layers is one body too. It yields the gradients
  /// of the active values the layer reads from above; the forward layer
  /// yields, besides its results, what its backward reads of its inside.
  LogicalResult backwardLayer(LayerOp layer, OpBuilder &b) {
    Location loc = layer.getLoc();
    Block &forwardBody = layer.getBody().front();
    llvm::SetVector<Value> read;
    getUsedValuesDefinedAbove(layer.getBody(), read);
    SmallVector<Value> inputs(llvm::make_filter_range(read, [&](Value v) {
      return active.contains(v);
    }));
    // The inputs' gradients so far belong outside; inside, they start anew.
    DenseMap<Value, Value> outside;
    for (Value input : inputs)
      if (Value g = grads.lookup(input)) {
        outside[input] = g;
        grads.erase(input);
      }
    auto backwardLayer = LayerOp::create(b, loc, ValueRange(inputs).getTypes(),
                                         (layer.getName() + ".grad").str());
    Block *body = new Block();
    backwardLayer.getBody().push_back(body);
    OpBuilder inner = OpBuilder::atBlockEnd(body);
    for (auto [result, yielded] :
         llvm::zip_equal(layer.getResults(), forwardBody.getTerminator()->getOperands()))
      if (Value g = grads.lookup(result))
        accumulate(inner, loc, yielded, g);
    if (failed(backward(forwardBody, inner)))
      return failure();
    SmallVector<Value> inputGrads;
    for (Value input : inputs) {
      Value g = grads.lookup(input);
      inputGrads.push_back(g ? g : zerosOf(inner, loc, typeOf(input)));
      grads.erase(input);
    }
    YieldOp::create(inner, loc, inputGrads);
    for (auto [input, g] : llvm::zip_equal(inputs, backwardLayer.getResults())) {
      if (Value before = outside.lookup(input))
        grads[input] = before;
      accumulate(b, loc, input, g);
    }

    // The tape: values of the forward layer its backward reads.
    llvm::SetVector<Value> tape;
    backwardLayer.walk([&](Operation *op) {
      for (Value operand : op->getOperands())
        if (layer->isAncestor(operand.getParentRegion()->getParentOp()))
          tape.insert(operand);
    });
    if (tape.empty())
      return success();
    OpBuilder before(layer);
    SmallVector<Type> types(layer.getResultTypes());
    llvm::append_range(types, ValueRange(tape.getArrayRef()).getTypes());
    auto taped = LayerOp::create(before, loc, types, layer.getName());
    taped.getBody().takeBody(layer.getBody());
    Operation *yield = taped.getBody().front().getTerminator();
    SmallVector<Value> yielded(yield->getOperands());
    llvm::append_range(yielded, tape);
    yield->setOperands(yielded);
    layer.replaceAllUsesWith(taped.getResults().take_front(layer.getNumResults()));
    for (auto [value, result] :
         llvm::zip_equal(tape.getArrayRef(), taped.getResults().drop_front(layer.getNumResults())))
      Value(value).replaceUsesWithIf(result, [&](OpOperand &use) {
        return backwardLayer->isProperAncestor(use.getOwner());
      });
    layer.erase();
    return success();
  }

  func::FuncOp func;
  ArrayRef<unsigned> wrt;
  Value seed;
  llvm::DenseSet<Value> active;
  DenseMap<Value, Value> grads;
};

/// Gives fused attentions their logsumexp result, which the backward needs.
void addLogsumexp(func::FuncOp func) {
  SmallVector<FusedAttentionOp> attentions;
  func.walk([&](FusedAttentionOp op) {
    if (!op.getLogsumexp())
      attentions.push_back(op);
  });
  for (FusedAttentionOp op : attentions) {
    OpBuilder b(op);
    AttentionDims dims = op.getDims();
    auto q = typeOf(op.getQuery());
    auto lseType = RankedTensorType::get(
        {q.getDimSize(dims.batch), q.getDimSize(dims.heads), q.getDimSize(dims.seq)},
        Float32Type::get(op.getContext()));
    auto withLse = FusedAttentionOp::create(
        b, op.getLoc(), TypeRange{op.getResult().getType(), lseType}, op.getOperands(),
        op->getAttrs());
    op.getResult().replaceAllUsesWith(withLse.getResult());
    op.erase();
  }
}

struct AutodiffPass : xfmr::impl::XfmrAutodiffBase<AutodiffPass> {
  using Base::Base;
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func || func.isExternal()) {
      module.emitError("xfmr-autodiff: no function @") << function << " with a body";
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock() || func.getNumResults() == 0 ||
        !isFloatTensor(cast<func::ReturnOp>(func.getBody().front().getTerminator()).getOperand(0)) ||
        typeOf(cast<func::ReturnOp>(func.getBody().front().getTerminator()).getOperand(0))
                .getRank() != 0) {
      func.emitError("xfmr-autodiff: @")
          << function << " must be one block returning a rank-0 float loss first";
      return signalPassFailure();
    }

    // The gradient function starts as a copy, with composite ops expanded.
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(func);
    auto grad = cast<func::FuncOp>(b.clone(*func));
    grad.setName(function.getValue() + "_grad");
    RewritePatternSet patterns(&getContext());
    populateDecompositionPatterns(patterns);
    if (failed(applyPatternsGreedily(grad, std::move(patterns))))
      return signalPassFailure();
    addLogsumexp(grad);

    llvm::StringSet<> requested;
    for (const std::string &name : wrtInputs)
      requested.insert(name);
    bool allInputs = requested.contains("*");
    SmallVector<unsigned> wrt;
    for (BlockArgument arg : grad.getArguments()) {
      unsigned index = arg.getArgNumber();
      bool param = static_cast<bool>(grad.getArgAttr(index, "xfmr.param"));
      auto input = grad.getArgAttrOfType<StringAttr>(index, "xfmr.input");
      if (lossScale && input && input.getValue() == kLossScaleInput) {
        func.emitError("xfmr-autodiff: @")
            << function << " already has an input named '" << kLossScaleInput << "'";
        return signalPassFailure();
      }
      bool named = input && requested.erase(input.getValue());
      if (!param && !named && !(input && allInputs && isFloatTensor(arg)))
        continue;
      if (!isFloatTensor(arg)) {
        func.emitError("xfmr-autodiff: argument ") << index << " of @" << function
                                                   << " is not a float tensor";
        return signalPassFailure();
      }
      wrt.push_back(index);
    }
    requested.erase("*");
    if (!requested.empty()) {
      func.emitError("xfmr-autodiff: @")
          << function << " has no input named '" << requested.begin()->getKey() << "'";
      return signalPassFailure();
    }
    Value seed;
    if (lossScale) {
      Type lossType =
          cast<func::ReturnOp>(grad.getBody().front().getTerminator()).getOperand(0).getType();
      unsigned index = grad.getNumArguments();
      if (failed(grad.insertArgument(
              index, lossType,
              b.getDictionaryAttr(b.getNamedAttr("xfmr.input", b.getStringAttr(kLossScaleInput))),
              grad.getLoc())))
        return signalPassFailure();
      seed = grad.getArgument(index);
    }
    FailureOr<SmallVector<Value>> gradients = Differentiator(grad, wrt, seed).run();
    if (failed(gradients))
      return signalPassFailure();

    auto ret = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    SmallVector<Value> results(ret.getOperands());
    llvm::append_range(results, *gradients);
    SmallVector<DictionaryAttr> resultAttrs;
    grad.getAllResultAttrs(resultAttrs);
    if (resultAttrs.empty())
      resultAttrs.assign(grad.getNumResults(), DictionaryAttr::get(&getContext()));
    resultAttrs[0] = b.getDictionaryAttr(b.getNamedAttr("xfmr.output", b.getStringAttr("loss")));
    for (unsigned index : wrt) {
      StringAttr name = grad.getArgAttrOfType<StringAttr>(index, "xfmr.param");
      if (!name)
        name = grad.getArgAttrOfType<StringAttr>(index, "xfmr.input");
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr("xfmr.output", b.getStringAttr("grad:" + name.getValue().str()))));
    }
    ret->setOperands(results);
    grad.setType(b.getFunctionType(grad.getArgumentTypes(), ValueRange(results).getTypes()));
    grad.setAllResultAttrs(resultAttrs);
  }
};

} // namespace
