//===- LoweringUtils.cpp - helpers shared by the xfmr lowerings -----------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::lowering;

Value lowering::floatConstant(OpBuilder &b, Location loc, Type type, double value) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(shaped, b.getFloatAttr(shaped.getElementType(), value)));
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
}

Value lowering::filledTensor(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  Value empty = tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  Value scalar = floatConstant(b, loc, type.getElementType(), value);
  return linalg::FillOp::create(b, loc, scalar, empty).getResult(0);
}

AffineMap lowering::broadcastMap(MLIRContext *context, ArrayRef<int64_t> operandShape,
                                 ArrayRef<int64_t> resultShape) {
  int64_t offset = resultShape.size() - operandShape.size();
  SmallVector<AffineExpr> exprs;
  for (auto [i, size] : llvm::enumerate(operandShape)) {
    bool stretched = size == 1 && resultShape[offset + i] != 1;
    exprs.push_back(stretched ? getAffineConstantExpr(0, context)
                              : getAffineDimExpr(offset + i, context));
  }
  return AffineMap::get(resultShape.size(), 0, exprs, context);
}

Value lowering::broadcastGeneric(OpBuilder &b, Location loc, RankedTensorType resultType,
                                 ValueRange inputs, BodyBuilder body) {
  MLIRContext *context = b.getContext();
  ArrayRef<int64_t> shape = resultType.getShape();
  // Splat constants (the zeros a gradient is broadcast against, say) become
  // scalars in the body rather than tensors to read, which could otherwise
  // end up as globals as large as the result.
  SmallVector<Value> tensorInputs;
  SmallVector<TypedAttr> splats;
  SmallVector<AffineMap> maps;
  for (Value input : inputs) {
    DenseElementsAttr constant;
    if (matchPattern(input, m_Constant(&constant)) && constant.isSplat()) {
      splats.push_back(constant.getSplatValue<TypedAttr>());
      continue;
    }
    splats.push_back(nullptr);
    tensorInputs.push_back(input);
    maps.push_back(broadcastMap(context, tensorTypeOf(input).getShape(), shape));
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(shape.size(), context));
  SmallVector<utils::IteratorType> iterators(shape.size(), utils::IteratorType::parallel);
  Value init = tensor::EmptyOp::create(b, loc, shape, resultType.getElementType());
  auto generic = linalg::GenericOp::create(
      b, loc, resultType, tensorInputs, init, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> operands;
        unsigned nextArg = 0;
        for (TypedAttr splat : splats)
          operands.push_back(splat ? arith::ConstantOp::create(nb, nloc, splat).getResult()
                                   : args[nextArg++]);
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, operands));
      });
  return generic.getResult(0);
}

Value lowering::reduceAxis(OpBuilder &b, Location loc, Value input, int64_t axis, double init,
                           BodyBuilder combine) {
  auto type = tensorTypeOf(input);
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + axis);
  Value acc = filledTensor(b, loc, RankedTensorType::get(shape, type.getElementType()), init);
  auto reduce =
      linalg::ReduceOp::create(b, loc, input, acc, ArrayRef<int64_t>{axis},
                               [&](OpBuilder &nb, Location nloc, ValueRange args) {
                                 linalg::YieldOp::create(nb, nloc, combine(nb, nloc, args));
                               });
  return reduce.getResult(0);
}

Value lowering::reshapeTensor(OpBuilder &b, Location loc, Value input,
                              RankedTensorType resultType) {
  auto sourceType = tensorTypeOf(input);
  if (sourceType == resultType)
    return input;
  if (auto reassociation = getReassociationIndicesForReshape(sourceType, resultType)) {
    if (sourceType.getRank() > resultType.getRank())
      return tensor::CollapseShapeOp::create(b, loc, resultType, input, *reassociation);
    if (sourceType.getRank() < resultType.getRank())
      return tensor::ExpandShapeOp::create(b, loc, resultType, input, *reassociation);
  }
  // No single collapse or expand relates the shapes: go through 1-D.
  auto flatType = RankedTensorType::get({sourceType.getNumElements()}, sourceType.getElementType());
  return reshapeTensor(b, loc, reshapeTensor(b, loc, input, flatType), resultType);
}

/// 1 / (1 + exp(-x)): exp overflows to +inf for x below about -88, which
/// gives the right limit 0.
static Value buildSigmoid(OpBuilder &b, Location loc, Value x) {
  Type type = x.getType();
  Value one = floatConstant(b, loc, type, 1.0);
  Value exp = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  return arith::DivFOp::create(b, loc, one, arith::AddFOp::create(b, loc, one, exp));
}

Value lowering::softcapped(OpBuilder &b, Location loc, Value x, double cap) {
  Value limit = floatConstant(b, loc, x.getType(), cap);
  return arith::MulFOp::create(
      b, loc, limit, math::TanhOp::create(b, loc, arith::DivFOp::create(b, loc, x, limit)));
}

Value lowering::softcapSlope(OpBuilder &b, Location loc, Value x, double cap) {
  Value tanh = math::TanhOp::create(
      b, loc, arith::DivFOp::create(b, loc, x, floatConstant(b, loc, x.getType(), cap)));
  return arith::SubFOp::create(b, loc, floatConstant(b, loc, x.getType(), 1.0),
                               arith::MulFOp::create(b, loc, tanh, tanh));
}

Value lowering::buildActivation(OpBuilder &b, Location loc, Activation activation, Value x) {
  Type type = x.getType();
  auto constant = [&](double value) { return floatConstant(b, loc, type, value); };
  switch (activation) {
  case Activation::none:
    return x;
  case Activation::relu:
    // max(x, 0) that keeps NaN, like torch.relu.
    return arith::MaximumFOp::create(b, loc, x, constant(0.0));
  case Activation::gelu: {
    Value scaled = arith::MulFOp::create(b, loc, x, constant(M_SQRT1_2));
    Value erf = math::ErfOp::create(b, loc, scaled);
    Value onePlus = arith::AddFOp::create(b, loc, erf, constant(1.0));
    Value half = arith::MulFOp::create(b, loc, x, constant(0.5));
    return arith::MulFOp::create(b, loc, half, onePlus);
  }
  case Activation::gelu_tanh: {
    Value cube = arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, x, x), x);
    Value inner =
        arith::AddFOp::create(b, loc, x, arith::MulFOp::create(b, loc, cube, constant(0.044715)));
    Value tanh = math::TanhOp::create(
        b, loc, arith::MulFOp::create(b, loc, inner, constant(std::sqrt(2.0 / M_PI))));
    Value onePlus = arith::AddFOp::create(b, loc, tanh, constant(1.0));
    Value half = arith::MulFOp::create(b, loc, x, constant(0.5));
    return arith::MulFOp::create(b, loc, half, onePlus);
  }
  case Activation::silu:
    return arith::MulFOp::create(b, loc, x, buildSigmoid(b, loc, x));
  case Activation::tanh:
    return math::TanhOp::create(b, loc, x);
  }
  llvm_unreachable("unknown activation");
}

Value lowering::buildActivationDerivative(OpBuilder &b, Location loc, Activation activation,
                                          Value x) {
  Type type = x.getType();
  auto constant = [&](double value) { return floatConstant(b, loc, type, value); };
  auto mul = [&](Value p, Value q) { return arith::MulFOp::create(b, loc, p, q).getResult(); };
  auto add = [&](Value p, Value q) { return arith::AddFOp::create(b, loc, p, q).getResult(); };
  switch (activation) {
  case Activation::none:
    return constant(1.0);
  case Activation::relu: {
    // 1 where x > 0, as torch's relu backward (0 at x = 0).
    Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, constant(0.0));
    return arith::SelectOp::create(b, loc, positive, constant(1.0), constant(0.0));
  }
  case Activation::gelu: {
    // Phi(x) + x * phi(x).
    Value cdf = mul(constant(0.5),
                    add(constant(1.0), math::ErfOp::create(b, loc, mul(x, constant(M_SQRT1_2)))));
    Value pdf = mul(constant(0.5 * M_2_SQRTPI * M_SQRT1_2),
                    math::ExpOp::create(b, loc, mul(mul(x, x), constant(-0.5))));
    return add(cdf, mul(x, pdf));
  }
  case Activation::gelu_tanh: {
    // u = c (x + a x^3): 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 a x^2).
    double c = std::sqrt(2.0 / M_PI), a = 0.044715;
    Value square = mul(x, x);
    Value u = mul(constant(c), add(x, mul(constant(a), mul(square, x))));
    Value t = math::TanhOp::create(b, loc, u);
    Value du = mul(constant(c), add(constant(1.0), mul(constant(3 * a), square)));
    Value sech2 = arith::SubFOp::create(b, loc, constant(1.0), mul(t, t));
    return add(mul(constant(0.5), add(constant(1.0), t)),
               mul(mul(constant(0.5), x), mul(sech2, du)));
  }
  case Activation::silu: {
    // s (1 + x (1 - s)) with s = sigmoid(x).
    Value s = buildSigmoid(b, loc, x);
    Value oneMinus = arith::SubFOp::create(b, loc, constant(1.0), s);
    return mul(s, add(constant(1.0), mul(x, oneMinus)));
  }
  case Activation::tanh: {
    Value t = math::TanhOp::create(b, loc, x);
    return arith::SubFOp::create(b, loc, constant(1.0), mul(t, t));
  }
  }
  llvm_unreachable("unknown activation");
}

Value lowering::buildLinearProduct(OpBuilder &b, Location loc, Value x, Value weight,
                                   bool transposeWeight) {
  auto xType = tensorTypeOf(x);
  auto wType = tensorTypeOf(weight);
  int64_t in = xType.getShape().back();
  int64_t rows = xType.getNumElements() / in;
  int64_t out = transposeWeight ? wType.getDimSize(0) : wType.getDimSize(1);
  Type elementType = xType.getElementType();
  Value rows2d = reshapeTensor(b, loc, x, RankedTensorType::get({rows, in}, elementType));
  auto resultType = RankedTensorType::get({rows, out}, elementType);
  Value init = filledTensor(b, loc, resultType, 0.0);
  if (transposeWeight)
    return linalg::MatmulTransposeBOp::create(b, loc, resultType, ValueRange{rows2d, weight}, init)
        .getResult(0);
  return linalg::MatmulOp::create(b, loc, resultType, ValueRange{rows2d, weight}, init)
      .getResult(0);
}
