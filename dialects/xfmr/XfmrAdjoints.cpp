//===- XfmrAdjoints.cpp - reverse-mode adjoints of the xfmr ops -*- C++ -*-===//
//
// DifferentiableOpInterface::buildAdjoint for each op: the gradients of the
// operands from those of the results, written with xfmr ops (backward ops
// where a kernel should see the whole computation). `multi_head_attention`
// has no rule of its own: xfmr-autodiff decomposes it and differentiates the
// parts.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Dialect/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace xfmr;

namespace {

RankedTensorType typeOf(Value value) { return cast<RankedTensorType>(value.getType()); }

Value scalar(OpBuilder &b, Location loc, Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(elementType, value)));
}

Value zeros(OpBuilder &b, Location loc, RankedTensorType type) {
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0)));
}

/// `value` broadcast to `type`'s shape (adding zeros, which is exact).
Value broadcastTo(OpBuilder &b, Location loc, Value value, RankedTensorType type) {
  if (value.getType() == type)
    return value;
  return AddOp::create(b, loc, value, zeros(b, loc, type));
}

/// Sums `grad` over the dimensions along which a value of `type` was
/// broadcast to grad's shape: the adjoint of numpy broadcasting. Adjacent
/// such dimensions are merged first, so that a bias's gradient over
/// [batch, seq, d] is one sum over batch x seq rows.
Value sumToShape(OpBuilder &b, Location loc, Value grad, RankedTensorType type) {
  auto gradType = typeOf(grad);
  if (gradType.getShape() == type.getShape())
    return grad;
  int64_t offset = gradType.getRank() - type.getRank();
  SmallVector<int64_t> merged, summed;
  bool previousSummed = false;
  for (int64_t d = 0; d < gradType.getRank(); ++d) {
    int64_t size = gradType.getDimSize(d);
    bool sum = d < offset || (type.getDimSize(d - offset) == 1 && size != 1);
    if (sum && previousSummed) {
      merged.back() *= size;
    } else {
      if (sum)
        summed.push_back(merged.size());
      merged.push_back(size);
    }
    previousSummed = sum;
  }
  if (merged != gradType.getShape())
    grad = ReshapeOp::create(b, loc, RankedTensorType::get(merged, gradType.getElementType()), grad);
  for (int64_t d : summed)
    grad = ReduceOp::create(b, loc, grad, ReduceKind::sum, d);
  return ReshapeOp::create(b, loc, RankedTensorType::get(type.getShape(), type.getElementType()),
                           grad);
}

Value negate(OpBuilder &b, Location loc, Value x) {
  return MulOp::create(b, loc, x, scalar(b, loc, typeOf(x).getElementType(), -1.0));
}

bool isFloat(Value value) { return isa<FloatType>(typeOf(value).getElementType()); }

/// [..., d] as [n, d].
Value asRows(OpBuilder &b, Location loc, Value x) {
  auto type = typeOf(x);
  int64_t d = type.getShape().back();
  return ReshapeOp::create(
      b, loc, RankedTensorType::get({type.getNumElements() / d, d}, type.getElementType()), x);
}

/// Gradients of x @ weight (+ bias) from the output gradient `g`, for a
/// weight in [in, out] or, when `transposed`, [out, in] layout.
void linearAdjoint(OpBuilder &b, Location loc, Value x, Value weight, Value bias, bool transposed,
                   Value g, Value &dx, Value &dWeight, Value &dBias) {
  // dx = g W^T ([in, out] weights) or g W ([out, in] weights).
  dx = MatmulOp::create(b, loc, g, weight, /*transpose_rhs=*/!transposed,
                        /*transpose_lhs=*/false);
  Value x2 = asRows(b, loc, x), g2 = asRows(b, loc, g);
  // dW = x^T g, or (g^T x) for [out, in] weights: one GEMM over all rows.
  dWeight = transposed ? MatmulOp::create(b, loc, g2, x2, false, /*transpose_lhs=*/true)
                       : MatmulOp::create(b, loc, x2, g2, false, /*transpose_lhs=*/true);
  if (bias)
    dBias = sumToShape(b, loc, g2, typeOf(bias));
}

template <typename OpTy>
LogicalResult broadcastBinaryAdjoint(OpTy op, OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads,
                                     function_ref<std::pair<Value, Value>(Value)> partials) {
  operandGrads.assign(2, Value());
  Value g = resultGrads[0];
  if (!g)
    return success();
  auto [dl, dr] = partials(g);
  Location loc = op.getLoc();
  operandGrads[0] = sumToShape(b, loc, dl, typeOf(op.getLhs()));
  operandGrads[1] = sumToShape(b, loc, dr, typeOf(op.getRhs()));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise and shape ops
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  return broadcastBinaryAdjoint(*this, b, rg, og, [](Value g) { return std::pair{g, g}; });
}

LogicalResult SubOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  return broadcastBinaryAdjoint(*this, b, rg, og, [&](Value g) {
    return std::pair{g, negate(b, getLoc(), g)};
  });
}

LogicalResult MulOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  return broadcastBinaryAdjoint(*this, b, rg, og, [&](Value g) {
    return std::pair{MulOp::create(b, getLoc(), g, getRhs()).getResult(),
                     MulOp::create(b, getLoc(), g, getLhs()).getResult()};
  });
}

LogicalResult DivOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  return broadcastBinaryAdjoint(*this, b, rg, og, [&](Value g) {
    Location loc = getLoc();
    Value dl = DivOp::create(b, loc, g, getRhs());
    // d(l/r)/dr = -(l/r)/r.
    Value dr = negate(b, loc, DivOp::create(b, loc, MulOp::create(b, loc, g, getResult()), getRhs()));
    return std::pair{dl, dr};
  });
}

LogicalResult MaximumOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  return broadcastBinaryAdjoint(*this, b, rg, og, [&](Value g) {
    // The gradient goes to the larger operand (to the left one on ties).
    Location loc = getLoc();
    auto type = getType();
    Value lhs = broadcastTo(b, loc, getLhs(), type), rhs = broadcastTo(b, loc, getRhs(), type);
    Value left = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, lhs, rhs);
    Value zero = scalar(b, loc, type.getElementType(), 0.0);
    return std::pair{SelectOp::create(b, loc, left, g, zero).getResult(),
                     SelectOp::create(b, loc, left, zero, g).getResult()};
  });
}

LogicalResult SelectOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(3, Value());
  Value g = rg[0];
  if (!g)
    return success();
  Location loc = getLoc();
  Value zero = scalar(b, loc, getType().getElementType(), 0.0);
  og[1] = sumToShape(b, loc, SelectOp::create(b, loc, getCondition(), g, zero),
                     typeOf(getTrueValue()));
  og[2] = sumToShape(b, loc, SelectOp::create(b, loc, getCondition(), zero, g),
                     typeOf(getFalseValue()));
  return success();
}

LogicalResult MatmulOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(2, Value());
  Value g = rg[0];
  if (!g)
    return success();
  Location loc = getLoc();
  Value lhs = getLhs(), rhs = getRhs();
  auto lhsType = typeOf(lhs), rhsType = typeOf(rhs);
  bool tl = getTransposeLhs(), tr = getTransposeRhs();
  // A weight shared by every batch: one GEMM over all rows, no transposes.
  if (rhsType.getRank() == 2 && !tl) {
    Value dx, dw, db;
    linearAdjoint(b, loc, lhs, rhs, Value(), tr, g, dx, dw, db);
    og[0] = dx;
    og[1] = dw;
    return success();
  }
  // C = op(A) op(B): dop(A) = g op(B)^T, dop(B) = op(A)^T g.
  SmallVector<int64_t> swap(lhsType.getRank());
  auto lastTwoSwapped = [&](Value x) -> Value {
    SmallVector<int64_t> perm;
    int64_t rank = typeOf(x).getRank();
    for (int64_t i = 0; i < rank; ++i)
      perm.push_back(i);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return TransposeOp::create(b, loc, x, perm);
  };
  Value dOpA = MatmulOp::create(b, loc, g, rhs, /*transpose_rhs=*/!tr, false);
  Value dOpB = MatmulOp::create(b, loc, lhs, g, false, /*transpose_lhs=*/!tl);
  Value dA = tl ? lastTwoSwapped(dOpA) : dOpA;
  Value dB = tr ? lastTwoSwapped(dOpB) : dOpB;
  og[0] = sumToShape(b, loc, dA, lhsType);
  og[1] = sumToShape(b, loc, dB, rhsType);
  return success();
}

LogicalResult TransposeOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (!rg[0])
    return success();
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  og[0] = TransposeOp::create(b, getLoc(), rg[0], inverse);
  return success();
}

LogicalResult ReshapeOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (rg[0])
    og[0] = ReshapeOp::create(b, getLoc(), getInput().getType(), rg[0]);
  return success();
}

LogicalResult ReduceOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  Value g = rg[0];
  if (!g)
    return success();
  Location loc = getLoc();
  auto type = typeOf(getInput());
  switch (getKind()) {
  case ReduceKind::sum:
    og[0] = broadcastTo(b, loc, g, type);
    break;
  case ReduceKind::mean:
    og[0] = broadcastTo(b, loc,
                        DivOp::create(b, loc, g,
                                      scalar(b, loc, type.getElementType(),
                                             type.getDimSize(getNormalizedAxis()))),
                        type);
    break;
  case ReduceKind::max: {
    Value max = broadcastTo(b, loc, getResult(), type);
    Value isMax = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, getInput(), max);
    og[0] = SelectOp::create(b, loc, isMax, broadcastTo(b, loc, g, type),
                             scalar(b, loc, type.getElementType(), 0.0));
    break;
  }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(2, Value());
  if (!rg[0])
    return success();
  Location loc = getLoc();
  auto tableType = typeOf(getTable());
  og[1] = EmbeddingBackwardOp::create(b, loc, tableType, getIds(), rg[0], getScaleAttr());
  if (std::optional<uint64_t> padding = getPaddingIdx()) {
    // The padding row's gradient is zero.
    int64_t width = tableType.getDimSize(1);
    auto rowType = RankedTensorType::get({1, width}, tableType.getElementType());
    og[1] = tensor::InsertSliceOp::create(
        b, loc, zeros(b, loc, rowType), og[1],
        ArrayRef<OpFoldResult>{b.getIndexAttr(static_cast<int64_t>(*padding)), b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(width)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
  }
  return success();
}

LogicalResult SinusoidalPositionEncodingOp::buildAdjoint(OpBuilder &, ValueRange rg,
                                                         SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  og[0] = rg[0];
  return success();
}

LogicalResult LearnedPositionEncodingOp::buildAdjoint(OpBuilder &b, ValueRange rg,
                                                      SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  Value g = rg[0];
  if (!g)
    return success();
  if (getPositions())
    return emitOpError("cannot differentiate positions read at run time");
  og[0] = g;
  // The table's rows offset .. offset+seq-1 get the gradient summed over
  // the batch.
  Location loc = getLoc();
  auto table = typeOf(getTable());
  auto gType = typeOf(g);
  int64_t seq = gType.getDimSize(gType.getRank() - 2), d = gType.getShape().back();
  auto rows = RankedTensorType::get({seq, d}, gType.getElementType());
  Value used = sumToShape(b, loc, g, rows);
  SmallVector<OpFoldResult> offsets = {b.getIndexAttr(getOffset()), b.getIndexAttr(0)},
                            sizes = {b.getIndexAttr(seq), b.getIndexAttr(d)},
                            strides(2, b.getIndexAttr(1));
  og[1] = tensor::InsertSliceOp::create(b, loc, used, zeros(b, loc, table), offsets, sizes,
                                        strides);
  return success();
}

LogicalResult LinearOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  if (!rg[0])
    return success();
  Value dx, dw, db;
  linearAdjoint(b, getLoc(), getInput(), getWeight(), getBias(), getTransposeWeight(), rg[0], dx,
                dw, db);
  og[0] = dx;
  og[1] = dw;
  if (getBias())
    og[2] = db;
  return success();
}

LogicalResult FusedLinearOp::buildAdjoint(OpBuilder &b, ValueRange rg,
                                          SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  Value g = rg[0];
  if (!g)
    return success();
  Location loc = getLoc();
  Value dz = g;
  if (getActivation() != Activation::none) {
    // The pre-activation is not kept by the fused forward: recompute it.
    Value z = FusedLinearOp::create(b, loc, getInput(), getWeight(), getBias(), Value(),
                                    Activation::none, getTransposeWeight());
    dz = ActivationBackwardOp::create(b, loc, z, g, getActivationAttr());
  }
  Value dx, dw, db;
  linearAdjoint(b, loc, getInput(), getWeight(), getBias(), getTransposeWeight(), dz, dx, dw, db);
  // Operand order: input, weight, bias?, residual?.
  unsigned next = 0;
  og[next++] = dx;
  og[next++] = dw;
  if (getBias())
    og[next++] = db;
  if (getResidual())
    og[next++] = g;
  return success();
}

LogicalResult GatedLinearOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  Value g = rg[0];
  if (!g)
    return success();
  Location loc = getLoc();
  bool transposed = getTransposeWeight();
  // The fused forward keeps neither product: recompute both.
  Value gate = FusedLinearOp::create(b, loc, getInput(), getGate(), getGateBias(), Value(),
                                     Activation::none, transposed);
  Value up = FusedLinearOp::create(b, loc, getInput(), getUp(), getUpBias(), Value(),
                                   Activation::none, transposed);
  Value dUp = MulOp::create(b, loc, g, createActivation(b, loc, gate, getActivation()));
  Value dGate = MulOp::create(b, loc, g, up);
  if (getActivation() != Activation::none)
    dGate = ActivationBackwardOp::create(b, loc, gate, dGate, getActivationAttr());
  Value dxGate, dGateWeight, dGateBias, dxUp, dUpWeight, dUpBias;
  linearAdjoint(b, loc, getInput(), getGate(), getGateBias(), transposed, dGate, dxGate,
                dGateWeight, dGateBias);
  linearAdjoint(b, loc, getInput(), getUp(), getUpBias(), transposed, dUp, dxUp, dUpWeight,
                dUpBias);
  // Operand order: input, gate, up, gate_bias?, up_bias?.
  unsigned next = 0;
  og[next++] = AddOp::create(b, loc, dxGate, dxUp);
  og[next++] = dGateWeight;
  og[next++] = dUpWeight;
  if (getGateBias())
    og[next++] = dGateBias;
  if (getUpBias())
    og[next++] = dUpBias;
  return success();
}

LogicalResult SoftmaxOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (rg[0])
    og[0] = SoftmaxBackwardOp::create(b, getLoc(), getResult(), rg[0], getAxisAttr());
  return success();
}

/// (dx, dgamma, dbeta) of a layer norm of `x`, or nulls when no gradient.
static std::tuple<Value, Value, Value> layerNormGradients(OpBuilder &b, Location loc, Value x,
                                                          Value gamma, Value g,
                                                          FloatAttr epsilon) {
  auto row = RankedTensorType::get({typeOf(x).getShape().back()}, typeOf(x).getElementType());
  auto backward =
      LayerNormBackwardOp::create(b, loc, TypeRange{x.getType(), row, row}, x, g, gamma, epsilon);
  return {backward.getGradInput(), backward.getGradGamma(), backward.getGradBeta()};
}

LogicalResult LayerNormOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  if (!rg[0])
    return success();
  auto [dx, dg, db] =
      layerNormGradients(b, getLoc(), getInput(), getGamma(), rg[0], getEpsilonAttr());
  og[0] = dx;
  if (getGamma()) {
    og[1] = dg;
    og[2] = db;
  }
  return success();
}

LogicalResult FusedAddLayerNormOp::buildAdjoint(OpBuilder &b, ValueRange rg,
                                                SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  Value gSum = rg[0], gNorm = rg[1];
  if (!gSum && !gNorm)
    return success();
  Location loc = getLoc();
  Value total = gSum;
  if (gNorm) {
    auto [dx, dg, db] = layerNormGradients(b, loc, getSum(), getGamma(), gNorm, getEpsilonAttr());
    total = gSum ? AddOp::create(b, loc, gSum, dx).getResult() : dx;
    if (getGamma()) {
      og[2] = dg;
      og[3] = db;
    }
  }
  og[0] = og[1] = total;
  return success();
}

LogicalResult RmsNormOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  Value g = rg[0];
  if (!g)
    return success();
  // With r = rsqrt(mean(x^2) + eps) per row and n = x r:
  //   dgamma = sum over rows of g n,  dx = r (g gamma - n mean(g gamma n)).
  Location loc = getLoc();
  Value x = getInput();
  Type elementType = typeOf(x).getElementType();
  Value meanSquare =
      ReduceOp::create(b, loc, MulOp::create(b, loc, x, x), ReduceKind::mean, /*axis=*/-1);
  Value r = math::RsqrtOp::create(
      b, loc,
      AddOp::create(b, loc, meanSquare,
                    scalar(b, loc, elementType, getEpsilon().convertToDouble())));
  Value normalized = MulOp::create(b, loc, x, r);
  og[1] = sumToShape(b, loc, MulOp::create(b, loc, g, normalized), typeOf(getGamma()));
  Value scaled = MulOp::create(b, loc, g, getGamma());
  Value projection = ReduceOp::create(b, loc, MulOp::create(b, loc, scaled, normalized),
                                      ReduceKind::mean, /*axis=*/-1);
  og[0] = MulOp::create(
      b, loc, r, SubOp::create(b, loc, scaled, MulOp::create(b, loc, normalized, projection)));
  return success();
}

/// An activation's input gradient: `grad * activation'(input)`.
static LogicalResult activationAdjoint(ActivationOpInterface op, OpBuilder &b, ValueRange rg,
                                       SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (rg[0])
    og[0] = ActivationBackwardOp::create(b, op->getLoc(), op->getOperand(0), rg[0],
                                         ActivationAttr::get(b.getContext(), op.getActivation()));
  return success();
}

LogicalResult GeluOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  return activationAdjoint(*this, b, rg, og);
}

LogicalResult ReluOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  return activationAdjoint(*this, b, rg, og);
}

LogicalResult SiluOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  return activationAdjoint(*this, b, rg, og);
}

LogicalResult TanhOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  return activationAdjoint(*this, b, rg, og);
}

LogicalResult DropoutOp::buildAdjoint(OpBuilder &b, ValueRange rg, SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  // Linear in the input with the mask the seed determines: the same op.
  if (rg[0])
    og[0] = DropoutOp::create(b, getLoc(), rg[0].getType(), rg[0], getSeed(), getRateAttr());
  return success();
}

LogicalResult CrossEntropyOp::buildAdjoint(OpBuilder &b, ValueRange rg,
                                           SmallVectorImpl<Value> &og) {
  og.assign(2, Value());
  if (rg[0])
    og[0] = CrossEntropyBackwardOp::create(b, getLoc(), getLogits().getType(), getLogits(),
                                           getTargets(), rg[0], getIgnoreIndexAttr());
  return success();
}

LogicalResult FusedAttentionOp::buildAdjoint(OpBuilder &b, ValueRange rg,
                                             SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  if (rg.size() > 1 && rg[1])
    return emitOpError("cannot differentiate through the logsumexp result");
  if (!rg[0])
    return success();
  if (!getLogsumexp())
    return emitOpError("the backward pass needs the forward's logsumexp result");
  if (getQueryOffset() || getKeyLength())
    return emitOpError("cannot differentiate attention over a cache (query_offset, key_length)");
  if (getPositionBias())
    return emitOpError("cannot differentiate attention with a position_bias");
  // Grouped-query attention: the backward runs on keys and values repeated
  // per query head, whose gradients are then summed over each group.
  Location loc = getLoc();
  int64_t groups = getQueryHeadsPerKeyHead();
  AttentionDims dims = getDims();
  auto kvType = typeOf(getKey());
  // [.., kv heads, ..] as [.., kv heads, 1 or groups, ..].
  auto grouped = [&](int64_t size) {
    SmallVector<int64_t> shape(kvType.getShape());
    shape.insert(shape.begin() + dims.heads + 1, size);
    return RankedTensorType::get(shape, kvType.getElementType());
  };
  SmallVector<int64_t> expandedShape(kvType.getShape());
  expandedShape[dims.heads] *= groups;
  auto expanded = RankedTensorType::get(expandedShape, kvType.getElementType());
  auto repeat = [&](Value x) -> Value {
    if (groups == 1)
      return x;
    Value single = ReshapeOp::create(b, loc, grouped(1), x);
    return ReshapeOp::create(b, loc, expanded, broadcastTo(b, loc, single, grouped(groups)));
  };
  auto sumGroups = [&](Value g) -> Value {
    if (groups == 1)
      return g;
    Value perGroup = ReshapeOp::create(b, loc, grouped(groups), g);
    return ReshapeOp::create(b, loc, kvType, sumToShape(b, loc, perGroup, grouped(1)));
  };
  Value keys = repeat(getKey()), values = repeat(getValue());
  auto backward = FusedAttentionBackwardOp::create(
      b, loc, TypeRange{getQuery().getType(), keys.getType(), values.getType()}, getQuery(), keys,
      values, getResult(), getLogsumexp(), rg[0], getPaddingMask(), getAttnBias(), getScaleAttr(),
      getCausalAttr(), getLayoutAttr(), getWindowAttr(), getSoftcapAttr());
  og[0] = backward.getGradQuery();
  og[1] = sumGroups(backward.getGradKey());
  og[2] = sumGroups(backward.getGradValue());
  return success();
}

LogicalResult RotaryEmbeddingOp::buildAdjoint(OpBuilder &b, ValueRange rg,
                                              SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  if (!rg[0])
    return success();
  // A rotation's adjoint is its transpose: the rotation by -angle.
  og[0] = RotaryEmbeddingOp::create(b, getLoc(), rg[0].getType(), rg[0], getPositions(),
                                    getInvFreqAttr(), getAttentionScalingAttr(),
                                    getTranspose() ? UnitAttr() : b.getUnitAttr());
  return success();
}
