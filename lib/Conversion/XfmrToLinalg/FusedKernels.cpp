//===- FusedKernels.cpp - lowering of the fused xfmr ops --------*- C++ -*-===//
//
// Each fused op becomes one kernel: attention a tiled loop nest with an online
// softmax; softmax, layer norm and matmul epilogues short linalg chains over
// rows that the CPU schedule tiles together.
//
//===----------------------------------------------------------------------===//

#include "../LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"

#include <limits>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::lowering;

static constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Appends a unit dimension: [n] -> [n, 1], for broadcasting a per-row value.
static Value asColumn(OpBuilder &b, Location loc, Value row) {
  auto type = tensorTypeOf(row);
  SmallVector<int64_t> shape(type.getShape());
  shape.push_back(1);
  return reshapeTensor(b, loc, row, RankedTensorType::get(shape, type.getElementType()));
}

/// Row-wise reduction of [n, d] `input` into the [n] `init` with `combine`
/// (accumulator last), where `transform` maps each element first.
static Value reduceRows(OpBuilder &b, Location loc, ValueRange inputs, Value init,
                        BodyBuilder transform,
                        function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
  MLIRContext *context = b.getContext();
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(tensorTypeOf(input).getRank() == 2
                       ? AffineMap::getMultiDimIdentityMap(2, context)
                       : AffineMap::get(2, 0, getAffineDimExpr(0, context)));
  maps.push_back(AffineMap::get(2, 0, getAffineDimExpr(0, context)));
  auto generic = linalg::GenericOp::create(
      b, loc, init.getType(), inputs, init, maps,
      {utils::IteratorType::parallel, utils::IteratorType::reduction},
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value value = transform(nb, nloc, args.drop_back());
        linalg::YieldOp::create(nb, nloc, combine(nb, nloc, value, args.back()));
      });
  return generic.getResult(0);
}

static Value addValues(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddFOp::create(b, loc, x, y);
}
static Value maxValues(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MaximumFOp::create(b, loc, x, y);
}
static Value firstArg(OpBuilder &, Location, ValueRange args) { return args[0]; }

Value lowering::buildLayerNormRows(OpBuilder &b, Location loc, Value rows, Value gamma,
                                   Value beta, double epsilon) {
  auto type = tensorTypeOf(rows);
  Type elementType = type.getElementType();
  auto vectorType = RankedTensorType::get({type.getDimSize(0)}, elementType);
  Value width = floatConstant(b, loc, elementType, type.getDimSize(1));
  auto divideByWidth = [&](Value sums) {
    return broadcastGeneric(b, loc, vectorType, sums,
                            [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                              return arith::DivFOp::create(nb, l, args[0], width);
                            });
  };
  // The mean is summed relative to each row's first element and the variance
  // around the mean, so rows with a large mean lose no precision.
  Value shift = reshapeTensor(
      b, loc,
      tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({type.getDimSize(0), 1}, elementType), rows,
          ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(type.getDimSize(0)), b.getIndexAttr(1)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)}),
      vectorType);
  Value shiftedSum = reduceRows(b, loc, ValueRange{rows, shift},
                                filledTensor(b, loc, vectorType, 0.0),
                                [](OpBuilder &nb, Location l, ValueRange args) -> Value {
                                  return arith::SubFOp::create(nb, l, args[0], args[1]);
                                },
                                addValues);
  Value mean = broadcastGeneric(b, loc, vectorType, ValueRange{shiftedSum, shift},
                                [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                                  return arith::AddFOp::create(
                                      nb, l, args[1], arith::DivFOp::create(nb, l, args[0], width));
                                });
  Value variance = divideByWidth(reduceRows(
      b, loc, ValueRange{rows, mean}, filledTensor(b, loc, vectorType, 0.0),
      [](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Value centered = arith::SubFOp::create(nb, l, args[0], args[1]);
        return arith::MulFOp::create(nb, l, centered, centered);
      },
      addValues));
  SmallVector<Value> inputs = {rows, asColumn(b, loc, mean), asColumn(b, loc, variance)};
  if (gamma)
    inputs.append({gamma, beta});
  Value eps = floatConstant(b, loc, elementType, epsilon);
  return broadcastGeneric(b, loc, type, inputs,
                          [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                            Value centered = arith::SubFOp::create(nb, l, args[0], args[1]);
                            Value rstd = math::RsqrtOp::create(
                                nb, l, arith::AddFOp::create(nb, l, args[2], eps));
                            Value normed = arith::MulFOp::create(nb, l, centered, rstd);
                            if (args.size() == 3)
                              return normed;
                            return arith::AddFOp::create(
                                nb, l, arith::MulFOp::create(nb, l, normed, args[3]), args[4]);
                          });
}

/// Views [..., d] as [n, d].
static Value asRows(OpBuilder &b, Location loc, Value x) {
  auto type = tensorTypeOf(x);
  int64_t width = type.getShape().back();
  return reshapeTensor(
      b, loc, x,
      RankedTensorType::get({type.getNumElements() / width, width}, type.getElementType()));
}

namespace {

struct SoftmaxLowering : OpConversionPattern<SoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SoftmaxOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value input = adaptor.getInput();
    auto type = op.getType();
    int64_t axis = op.getNormalizedAxis();
    SmallVector<int64_t> keptShape(type.getShape());
    keptShape[axis] = 1;
    auto keptType = RankedTensorType::get(keptShape, type.getElementType());
    auto keepDim = [&](Value reduced) {
      return reshapeTensor(rewriter, loc, reduced, keptType);
    };
    Value max = keepDim(reduceAxis(rewriter, loc, input, axis, kNegInf,
                                   [](OpBuilder &b, Location l, ValueRange args) {
                                     return maxValues(b, l, args[0], args[1]);
                                   }));
    Type elementType = type.getElementType();
    Value exps = broadcastGeneric(
        rewriter, loc, type, ValueRange{input, max},
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          // A row of -inf has max -inf: shift by 0 so it yields exp(-inf) = 0.
          Value isNegInf = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, args[1],
                                                 floatConstant(b, l, elementType, kNegInf));
          Value shift = arith::SelectOp::create(b, l, isNegInf,
                                                floatConstant(b, l, elementType, 0.0), args[1]);
          return math::ExpOp::create(b, l, arith::SubFOp::create(b, l, args[0], shift));
        });
    Value sum = keepDim(reduceAxis(rewriter, loc, exps, axis, 0.0,
                                   [](OpBuilder &b, Location l, ValueRange args) {
                                     return addValues(b, l, args[0], args[1]);
                                   }));
    rewriter.replaceOp(
        op, broadcastGeneric(rewriter, loc, type, ValueRange{exps, sum},
                             [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                               // Fully masked rows give 0, never NaN.
                               Value zero = floatConstant(b, l, elementType, 0.0);
                               Value empty = arith::CmpFOp::create(
                                   b, l, arith::CmpFPredicate::OEQ, args[1], zero);
                               return arith::SelectOp::create(
                                   b, l, empty, zero,
                                   arith::DivFOp::create(b, l, args[0], args[1]));
                             }));
    return success();
  }
};

struct LayerNormLowering : OpConversionPattern<LayerNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value normed = buildLayerNormRows(rewriter, loc, asRows(rewriter, loc, adaptor.getInput()),
                                      adaptor.getGamma(), adaptor.getBeta(),
                                      op.getEpsilon().convertToDouble());
    rewriter.replaceOp(op, reshapeTensor(rewriter, loc, normed, op.getType()));
    return success();
  }
};

struct FusedAddLayerNormLowering : OpConversionPattern<FusedAddLayerNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(FusedAddLayerNormOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = tensorTypeOf(op.getInput());
    Value rows = asRows(rewriter, loc,
                        broadcastGeneric(rewriter, loc, type,
                                         ValueRange{adaptor.getInput(), adaptor.getResidual()},
                                         [](OpBuilder &b, Location l, ValueRange args) {
                                           return addValues(b, l, args[0], args[1]);
                                         }));
    Value normed = buildLayerNormRows(rewriter, loc, rows, adaptor.getGamma(),
                                      adaptor.getBeta(), op.getEpsilon().convertToDouble());
    rewriter.replaceOp(op, {reshapeTensor(rewriter, loc, rows, type),
                            reshapeTensor(rewriter, loc, normed, type)});
    return success();
  }
};

struct FusedLinearLowering : OpConversionPattern<FusedLinearOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(FusedLinearOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value product = buildLinearProduct(rewriter, loc, adaptor.getInput(), adaptor.getWeight(),
                                       op.getTransposeWeight());
    auto productType = tensorTypeOf(product);
    SmallVector<Value> inputs = {product};
    if (Value bias = adaptor.getBias())
      inputs.push_back(bias);
    if (Value residual = adaptor.getResidual())
      inputs.push_back(reshapeTensor(rewriter, loc, residual, productType));
    bool hasBias = static_cast<bool>(adaptor.getBias());
    bool hasResidual = static_cast<bool>(adaptor.getResidual());
    Activation activation = op.getActivation();
    Value result = broadcastGeneric(rewriter, loc, productType, inputs,
                                    [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                                      Value value = args[0];
                                      if (hasBias)
                                        value = addValues(b, l, value, args[1]);
                                      value = buildActivation(b, l, activation, value);
                                      if (hasResidual)
                                        value = addValues(b, l, value, args.back());
                                      return value;
                                    });
    rewriter.replaceOp(op, reshapeTensor(rewriter, loc, result, op.getType()));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

/// The largest divisor of `size` not above `limit`, so tiles are static.
int64_t tileSizeFor(int64_t size, int64_t limit) {
  for (int64_t tile = std::min(size, limit); tile > 1; --tile)
    if (size % tile == 0)
      return tile;
  return 1;
}

class AttentionKernelBuilder {
public:
  AttentionKernelBuilder(FusedAttentionOp op, FusedAttentionOp::Adaptor adaptor)
      : op(op), adaptor(adaptor), dims(op.getDims()) {
    auto q = tensorTypeOf(op.getQuery());
    elementType = q.getElementType();
    batch = q.getDimSize(dims.batch);
    heads = q.getDimSize(dims.heads);
    seqQ = q.getDimSize(dims.seq);
    headDim = q.getDimSize(dims.headDim);
    seqK = tensorTypeOf(op.getKey()).getDimSize(dims.seq);
    blockQ = tileSizeFor(seqQ, 64);
    blockK = tileSizeFor(seqK, 64);
  }

  Value build(OpBuilder &b, Location loc) {
    auto resultType = tensorTypeOf(op.getQuery());
    Value init = tensor::EmptyOp::create(b, loc, resultType.getShape(), elementType);
    Value bias = adaptor.getAttnBias();
    if (bias) {
      auto biasType = tensorTypeOf(bias);
      SmallVector<int64_t> shape(4 - biasType.getRank(), 1);
      llvm::append_range(shape, biasType.getShape());
      bias4d = reshapeTensor(b, loc, bias, RankedTensorType::get(shape, elementType));
    }
    SmallVector<OpFoldResult> upperBounds = {b.getIndexAttr(batch), b.getIndexAttr(heads),
                                             b.getIndexAttr(seqQ / blockQ)};
    auto forall = scf::ForallOp::create(b, loc, upperBounds, init, std::nullopt, nullptr);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getTerminator());
    SmallVector<Value> ivs = forall.getInductionVars();
    Value qStart = scaled(b, loc, ivs[2], blockQ);
    Value tile = buildQueryBlock(b, loc, ivs[0], ivs[1], qStart);
    b.setInsertionPointToStart(forall.getTerminator().getBody());
    auto [offsets, sizes] = tileGeometry(b, ivs[0], ivs[1], qStart, blockQ);
    tensor::ParallelInsertSliceOp::create(b, loc, tile, forall.getRegionIterArgs()[0], offsets,
                                          sizes, unitStrides(b));
    return forall.getResult(0);
  }

private:
  static Value scaled(OpBuilder &b, Location loc, Value index, int64_t factor) {
    return arith::MulIOp::create(b, loc, index, arith::ConstantIndexOp::create(b, loc, factor));
  }
  static SmallVector<OpFoldResult> unitStrides(OpBuilder &b) {
    return SmallVector<OpFoldResult>(4, b.getIndexAttr(1));
  }

  /// Offsets and sizes of the [rows, head_dim] tile at (b, h, seqStart).
  std::pair<SmallVector<OpFoldResult>, SmallVector<OpFoldResult>>
  tileGeometry(OpBuilder &b, Value batchIv, Value head, Value seqStart, int64_t rows) {
    SmallVector<OpFoldResult> offsets(4), sizes(4);
    offsets[dims.batch] = batchIv;
    sizes[dims.batch] = b.getIndexAttr(1);
    offsets[dims.heads] = head;
    sizes[dims.heads] = b.getIndexAttr(1);
    offsets[dims.seq] = seqStart;
    sizes[dims.seq] = b.getIndexAttr(rows);
    offsets[dims.headDim] = b.getIndexAttr(0);
    sizes[dims.headDim] = b.getIndexAttr(headDim);
    return {offsets, sizes};
  }

  Value extractTile(OpBuilder &b, Location loc, Value operand, Value batchIv, Value head,
                    Value seqStart, int64_t rows) {
    auto [offsets, sizes] = tileGeometry(b, batchIv, head, seqStart, rows);
    return tensor::ExtractSliceOp::create(b, loc,
                                          RankedTensorType::get({rows, headDim}, elementType),
                                          operand, offsets, sizes, unitStrides(b));
  }

  /// The [blockQ | 1, blockK | 1] slice of the rank-4 bias for this tile.
  Value extractBiasTile(OpBuilder &b, Location loc, Value batchIv, Value head, Value qStart,
                        Value kStart) {
    auto type = tensorTypeOf(bias4d);
    Value starts[4] = {batchIv, head, qStart, kStart};
    int64_t fullSizes[4] = {1, 1, blockQ, blockK};
    SmallVector<OpFoldResult> offsets, sizes;
    for (int i = 0; i < 4; ++i) {
      bool broadcast = type.getDimSize(i) == 1;
      offsets.push_back(broadcast ? OpFoldResult(b.getIndexAttr(0)) : OpFoldResult(starts[i]));
      sizes.push_back(b.getIndexAttr(broadcast ? 1 : fullSizes[i]));
    }
    int64_t rows = type.getDimSize(2) == 1 ? 1 : blockQ;
    int64_t cols = type.getDimSize(3) == 1 ? 1 : blockK;
    Value slice = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({1, 1, rows, cols}, elementType), bias4d, offsets, sizes,
        unitStrides(b));
    return reshapeTensor(b, loc, slice, RankedTensorType::get({rows, cols}, elementType));
  }

  /// Number of key blocks query block `qb` must visit: all of them, or with a
  /// causal mask only those at or below the diagonal.
  Value keyBlockCount(OpBuilder &b, Location loc, Value qStart) {
    Value all = arith::ConstantIndexOp::create(b, loc, seqK / blockK);
    if (!op.getCausal())
      return all;
    // Last visible key of the block: qStart + blockQ - 1 + (seqK - seqQ).
    Value end = arith::AddIOp::create(
        b, loc, qStart, arith::ConstantIndexOp::create(b, loc, blockQ + seqK - seqQ));
    Value blocks = arith::CeilDivUIOp::create(b, loc, end,
                                              arith::ConstantIndexOp::create(b, loc, blockK));
    return arith::MinUIOp::create(b, loc, blocks, all);
  }

  /// Scaled scores with masked entries set to -inf.
  Value maskedScores(OpBuilder &b, Location loc, Value scores, Value batchIv, Value head,
                     Value qStart, Value kStart) {
    SmallVector<Value> inputs = {scores};
    bool hasPadding = static_cast<bool>(adaptor.getPaddingMask());
    if (hasPadding) {
      Value maskTile = tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({blockK}, b.getI1Type()), adaptor.getPaddingMask(),
          ArrayRef<OpFoldResult>{batchIv, kStart},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(blockK)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
      inputs.push_back(maskTile);
    }
    if (bias4d)
      inputs.push_back(extractBiasTile(b, loc, batchIv, head, qStart, kStart));
    double scale = op.getScale().convertToDouble();
    bool causal = op.getCausal();
    int64_t diagonalOffset = seqK - seqQ;
    return broadcastGeneric(
        b, loc, tensorTypeOf(scores), inputs,
        [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          Value value =
              arith::MulFOp::create(nb, l, args[0], floatConstant(nb, l, elementType, scale));
          if (bias4d)
            value = arith::AddFOp::create(nb, l, value, args.back());
          Value keep = arith::ConstantOp::create(nb, l, nb.getBoolAttr(true));
          if (causal) {
            Value i = arith::AddIOp::create(nb, l, linalg::IndexOp::create(nb, l, 0), qStart);
            Value j = arith::AddIOp::create(nb, l, linalg::IndexOp::create(nb, l, 1), kStart);
            Value limit = arith::AddIOp::create(
                nb, l, i, arith::ConstantIndexOp::create(nb, l, diagonalOffset));
            keep = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sle, j, limit);
          }
          if (hasPadding)
            keep = arith::AndIOp::create(nb, l, keep, args[1]);
          return arith::SelectOp::create(nb, l, keep, value,
                                         floatConstant(nb, l, elementType, kNegInf));
        });
  }

  /// exp(x - max), or 0 when max is -inf (nothing visible yet).
  Value safeExp(OpBuilder &b, Location l, Value x, Value max) {
    Value negInf = floatConstant(b, l, elementType, kNegInf);
    Value none = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, max, negInf);
    Value exp = math::ExpOp::create(b, l, arith::SubFOp::create(b, l, x, max));
    return arith::SelectOp::create(b, l, none, floatConstant(b, l, elementType, 0.0), exp);
  }

  /// The online-softmax loop over key blocks for one query block; returns
  /// the normalised [blockQ, head_dim] output tile.
  Value buildQueryBlock(OpBuilder &b, Location loc, Value batchIv, Value head, Value qStart) {
    Value qTile = extractTile(b, loc, adaptor.getQuery(), batchIv, head, qStart, blockQ);
    auto rowType = RankedTensorType::get({blockQ}, elementType);
    auto accType = RankedTensorType::get({blockQ, headDim}, elementType);
    auto scoreType = RankedTensorType::get({blockQ, blockK}, elementType);
    Value initMax = filledTensor(b, loc, rowType, kNegInf);
    Value initSum = filledTensor(b, loc, rowType, 0.0);
    Value initAcc = filledTensor(b, loc, accType, 0.0);

    auto loop = scf::ForOp::create(
        b, loc, arith::ConstantIndexOp::create(b, loc, 0), keyBlockCount(b, loc, qStart),
        arith::ConstantIndexOp::create(b, loc, 1), ValueRange{initMax, initSum, initAcc},
        [&](OpBuilder &nb, Location l, Value kb, ValueRange iter) {
          Value runningMax = iter[0], runningSum = iter[1], acc = iter[2];
          Value kStart = scaled(nb, l, kb, blockK);
          Value kTile = extractTile(nb, l, adaptor.getKey(), batchIv, head, kStart, blockK);
          Value vTile = extractTile(nb, l, adaptor.getValue(), batchIv, head, kStart, blockK);
          Value scores = linalg::MatmulTransposeBOp::create(
                             nb, l, scoreType, ValueRange{qTile, kTile},
                             filledTensor(nb, l, scoreType, 0.0))
                             .getResult(0);
          scores = maskedScores(nb, l, scores, batchIv, head, qStart, kStart);
          Value newMax = reduceRows(nb, l, scores, runningMax, firstArg, maxValues);
          Value probs = broadcastGeneric(
              nb, l, scoreType, ValueRange{scores, asColumn(nb, l, newMax)},
              [&](OpBuilder &bb, Location bl, ValueRange args) {
                return safeExp(bb, bl, args[0], args[1]);
              });
          Value correction = broadcastGeneric(
              nb, l, rowType, ValueRange{runningMax, newMax},
              [&](OpBuilder &bb, Location bl, ValueRange args) {
                return safeExp(bb, bl, args[0], args[1]);
              });
          auto rescale = [&](Value value) {
            Value factor = tensorTypeOf(value).getRank() == 1 ? correction
                                                              : asColumn(nb, l, correction);
            return broadcastGeneric(nb, l, tensorTypeOf(value), ValueRange{value, factor},
                                    [](OpBuilder &bb, Location bl, ValueRange args) -> Value {
                                      return arith::MulFOp::create(bb, bl, args[0], args[1]);
                                    });
          };
          Value newSum = reduceRows(nb, l, probs, rescale(runningSum), firstArg, addValues);
          Value newAcc = linalg::MatmulOp::create(nb, l, accType, ValueRange{probs, vTile},
                                                  rescale(acc))
                             .getResult(0);
          // Write the new state back over the loop-carried tiles so that the
          // loop bufferizes in place (no allocation per iteration).
          auto overwrite = [&](Value value, Value carried) {
            return linalg::CopyOp::create(nb, l, value, carried).getResult(0);
          };
          scf::YieldOp::create(nb, l,
                               ValueRange{overwrite(newMax, runningMax),
                                          overwrite(newSum, runningSum), overwrite(newAcc, acc)});
        });
    Value sum = loop.getResult(1), acc = loop.getResult(2);
    return broadcastGeneric(b, loc, accType, ValueRange{acc, asColumn(b, loc, sum)},
                            [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                              // Rows that saw no visible key give 0, never NaN.
                              Value zero = floatConstant(nb, l, elementType, 0.0);
                              Value empty = arith::CmpFOp::create(
                                  nb, l, arith::CmpFPredicate::OEQ, args[1], zero);
                              return arith::SelectOp::create(
                                  nb, l, empty, zero,
                                  arith::DivFOp::create(nb, l, args[0], args[1]));
                            });
  }

  FusedAttentionOp op;
  FusedAttentionOp::Adaptor adaptor;
  FusedAttentionOp::Dims dims;
  Type elementType;
  int64_t batch, heads, seqQ, seqK, headDim, blockQ, blockK;
  Value bias4d;
};

struct FusedAttentionLowering : OpConversionPattern<FusedAttentionOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(FusedAttentionOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    AttentionKernelBuilder kernel(op, adaptor);
    rewriter.replaceOp(op, kernel.build(rewriter, op.getLoc()));
    return success();
  }
};

} // namespace

void lowering::populateFusedKernelLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<SoftmaxLowering, LayerNormLowering, FusedAddLayerNormLowering,
               FusedLinearLowering, FusedAttentionLowering>(patterns.getContext());
}
