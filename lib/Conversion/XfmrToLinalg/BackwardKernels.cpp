//===- BackwardKernels.cpp - lowering of the xfmr backward ops --*- C++ -*-===//
//
// The ops xfmr-autodiff builds adjoints from, as linalg on tensors. Fused
// attention's backward is with the forward in FusedKernels.cpp; the
// cross-entropy gradient with the loss in XfmrToLinalg.cpp.
//
//===----------------------------------------------------------------------===//

#include "LinalgLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::lowering;

namespace {

Value addScalars(OpBuilder &b, Location loc, ValueRange args) {
  return arith::AddFOp::create(b, loc, args[0], args[1]);
}

Value multiplyElementwise(OpBuilder &b, Location loc, RankedTensorType type, Value x, Value y) {
  return broadcastGeneric(b, loc, type, ValueRange{x, y},
                          [](OpBuilder &nb, Location l, ValueRange args) -> Value {
                            return arith::MulFOp::create(nb, l, args[0], args[1]);
                          });
}

/// Mean over the last dimension of [n, d] rows: [n].
Value rowMeans(OpBuilder &b, Location loc, Value rows) {
  auto type = tensorTypeOf(rows);
  Value sums = reduceAxis(b, loc, rows, 1, 0.0, addScalars);
  Value width = floatConstant(b, loc, type.getElementType(), type.getDimSize(1));
  return broadcastGeneric(b, loc, tensorTypeOf(sums), sums,
                          [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                            return arith::DivFOp::create(nb, l, args[0], width);
                          });
}

/// y * (g - sum(g * y, axis)).
struct SoftmaxBackwardLowering : OpConversionPattern<SoftmaxBackwardOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SoftmaxBackwardOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = tensorTypeOf(op.getOutput());
    int64_t axis = op.getNormalizedAxis();
    Value y = adaptor.getOutput(), g = adaptor.getGrad();
    Value dot = reduceAxis(rewriter, loc, multiplyElementwise(rewriter, loc, type, y, g), axis,
                           0.0, addScalars);
    SmallVector<int64_t> keptShape(type.getShape());
    keptShape[axis] = 1;
    dot = reshapeTensor(rewriter, loc, dot, RankedTensorType::get(keptShape, type.getElementType()));
    rewriter.replaceOp(op, broadcastGeneric(rewriter, loc, type, ValueRange{y, g, dot},
                                            [](OpBuilder &b, Location l, ValueRange args) -> Value {
                                              Value diff =
                                                  arith::SubFOp::create(b, l, args[1], args[2]);
                                              return arith::MulFOp::create(b, l, args[0], diff);
                                            }));
    return success();
  }
};

/// With xhat = (x - mean) * rstd and gy = g * gamma:
/// dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)),
/// dgamma = sum(g * xhat), dbeta = sum(g) over rows.
struct LayerNormBackwardLowering : OpConversionPattern<LayerNormBackwardOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LayerNormBackwardOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = asRows(rewriter, loc, adaptor.getInput());
    Value g = asRows(rewriter, loc, adaptor.getGrad());
    auto rowsType = tensorTypeOf(x);
    Type elementType = rowsType.getElementType();
    auto [mean, variance] = buildRowMoments(rewriter, loc, x);
    Value eps = floatConstant(rewriter, loc, elementType, op.getEpsilon().convertToDouble());
    Value rstd = broadcastGeneric(rewriter, loc, tensorTypeOf(variance), variance,
                                  [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                                    return math::RsqrtOp::create(
                                        b, l, arith::AddFOp::create(b, l, args[0], eps));
                                  });
    Value normalized = broadcastGeneric(
        rewriter, loc, rowsType,
        ValueRange{x, asColumn(rewriter, loc, mean), asColumn(rewriter, loc, rstd)},
        [](OpBuilder &b, Location l, ValueRange args) -> Value {
          return arith::MulFOp::create(b, l, arith::SubFOp::create(b, l, args[0], args[1]),
                                       args[2]);
        });
    Value gamma = adaptor.getGamma();
    Value scaledGrad = gamma ? multiplyElementwise(rewriter, loc, rowsType, g, gamma) : g;
    Value meanGrad = rowMeans(rewriter, loc, scaledGrad);
    Value meanProjection = rowMeans(
        rewriter, loc, multiplyElementwise(rewriter, loc, rowsType, scaledGrad, normalized));
    Value dx = broadcastGeneric(
        rewriter, loc, rowsType,
        ValueRange{scaledGrad, normalized, asColumn(rewriter, loc, meanGrad),
                   asColumn(rewriter, loc, meanProjection), asColumn(rewriter, loc, rstd)},
        [](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value centered = arith::SubFOp::create(b, l, args[0], args[2]);
          Value projected = arith::MulFOp::create(b, l, args[1], args[3]);
          return arith::MulFOp::create(b, l, arith::SubFOp::create(b, l, centered, projected),
                                       args[4]);
        });
    auto rowType = RankedTensorType::get({rowsType.getDimSize(1)}, elementType);
    Value dGamma, dBeta;
    if (gamma) {
      dGamma = sumRows(rewriter, loc, multiplyElementwise(rewriter, loc, rowsType, g, normalized));
      dBeta = sumRows(rewriter, loc, g);
    } else {
      dGamma = dBeta = filledTensor(rewriter, loc, rowType, 0.0);
    }
    rewriter.replaceOp(op, {reshapeTensor(rewriter, loc, dx, op.getGradInput().getType()), dGamma,
                            dBeta});
    return success();
  }
};

/// grad * activation'(input).
struct ActivationBackwardLowering : OpConversionPattern<ActivationBackwardOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ActivationBackwardOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Activation activation = op.getActivation();
    rewriter.replaceOp(
        op, broadcastGeneric(rewriter, op.getLoc(), op.getType(),
                             ValueRange{adaptor.getInput(), adaptor.getGrad()},
                             [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                               Value slope = buildActivationDerivative(b, l, activation, args[0]);
                               return arith::MulFOp::create(b, l, args[1], slope);
                             }));
    return success();
  }
};

/// A loop over the tokens adding each scaled gradient row into its table
/// row: O(tokens x d_model) work after zeroing the table.
struct EmbeddingBackwardLowering : OpConversionPattern<EmbeddingBackwardOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(EmbeddingBackwardOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto tableType = op.getType();
    Type elementType = tableType.getElementType();
    int64_t width = tableType.getDimSize(1);
    Value grad = asRows(rewriter, loc, adaptor.getGrad());
    int64_t tokens = tensorTypeOf(grad).getDimSize(0);
    auto idsType = tensorTypeOf(adaptor.getIds());
    Value ids = reshapeTensor(rewriter, loc, adaptor.getIds(),
                              RankedTensorType::get({tokens}, idsType.getElementType()));
    double scale = op.getScale().convertToDouble();
    auto rowType = RankedTensorType::get({width}, elementType);
    auto rowSlice = [&](OpBuilder &b, Location l, Value row) {
      return std::pair<SmallVector<OpFoldResult>, SmallVector<OpFoldResult>>{
          {row, b.getIndexAttr(0)}, {b.getIndexAttr(1), b.getIndexAttr(width)}};
    };
    SmallVector<OpFoldResult> strides(2, rewriter.getIndexAttr(1));
    auto loop = scf::ForOp::create(
        rewriter, loc, arith::ConstantIndexOp::create(rewriter, loc, 0),
        arith::ConstantIndexOp::create(rewriter, loc, tokens),
        arith::ConstantIndexOp::create(rewriter, loc, 1),
        ValueRange{filledTensor(rewriter, loc, tableType, 0.0)},
        [&](OpBuilder &b, Location l, Value token, ValueRange iter) {
          Value id = tensor::ExtractOp::create(b, l, ids, token);
          Value row = arith::IndexCastOp::create(b, l, b.getIndexType(), id);
          auto [tableOffsets, sizes] = rowSlice(b, l, row);
          auto [gradOffsets, gradSizes] = rowSlice(b, l, token);
          Value target = tensor::ExtractSliceOp::create(b, l, rowType, iter[0], tableOffsets,
                                                        sizes, strides);
          Value source =
              tensor::ExtractSliceOp::create(b, l, rowType, grad, gradOffsets, gradSizes, strides);
          AffineMap identity = AffineMap::getMultiDimIdentityMap(1, b.getContext());
          Value updated =
              linalg::GenericOp::create(
                  b, l, rowType, source, target, ArrayRef<AffineMap>{identity, identity},
                  ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
                  [&](OpBuilder &nb, Location bl, ValueRange args) {
                    Value value = args[0];
                    if (scale != 1.0)
                      value = arith::MulFOp::create(nb, bl, value,
                                                    floatConstant(nb, bl, elementType, scale));
                    linalg::YieldOp::create(
                        nb, bl, arith::AddFOp::create(nb, bl, args[1], value).getResult());
                  })
                  .getResult(0);
          scf::YieldOp::create(b, l,
                               tensor::InsertSliceOp::create(b, l, updated, iter[0], tableOffsets,
                                                             sizes, strides)
                                   .getResult());
        });
    rewriter.replaceOp(op, loop.getResult(0));
    return success();
  }
};

} // namespace

void lowering::populateBackwardLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<SoftmaxBackwardLowering, LayerNormBackwardLowering, ActivationBackwardLowering,
               EmbeddingBackwardLowering>(patterns.getContext());
}
