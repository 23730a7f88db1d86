//===- FusedKernels.cpp - lowering of the fused xfmr ops --------*- C++ -*-===//
//
// Each fused op becomes a few linalg ops: softmax, layer norm and matmul
// epilogues short chains over rows; attention (for element types no kernel
// takes) a loop over blocks of queries or keys, each block's softmax exact.
//
//===----------------------------------------------------------------------===//

#include "../Kernels/AttentionLimits.h"
#include "LinalgLowering.h"

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

Value lowering::asColumn(OpBuilder &b, Location loc, Value row) {
  auto type = tensorTypeOf(row);
  SmallVector<int64_t> shape(type.getShape());
  shape.push_back(1);
  return reshapeTensor(b, loc, row, RankedTensorType::get(shape, type.getElementType()));
}

Value lowering::asRows(OpBuilder &b, Location loc, Value x) {
  auto type = tensorTypeOf(x);
  int64_t width = type.getShape().back();
  return reshapeTensor(
      b, loc, x,
      RankedTensorType::get({type.getNumElements() / width, width}, type.getElementType()));
}

Value lowering::sumRows(OpBuilder &b, Location loc, Value input) {
  return reduceAxis(b, loc, asRows(b, loc, input), 0, 0.0,
                    [](OpBuilder &nb, Location l, ValueRange args) -> Value {
                      return arith::AddFOp::create(nb, l, args[0], args[1]);
                    });
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

std::pair<Value, Value> lowering::buildRowMoments(OpBuilder &b, Location loc, Value rows) {
  auto type = tensorTypeOf(rows);
  Type elementType = type.getElementType();
  auto vectorType = RankedTensorType::get({type.getDimSize(0)}, elementType);
  Value width = floatConstant(b, loc, elementType, type.getDimSize(1));
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
  Value squares = reduceRows(b, loc, ValueRange{rows, mean}, filledTensor(b, loc, vectorType, 0.0),
                             [](OpBuilder &nb, Location l, ValueRange args) -> Value {
                               Value centered = arith::SubFOp::create(nb, l, args[0], args[1]);
                               return arith::MulFOp::create(nb, l, centered, centered);
                             },
                             addValues);
  Value variance = broadcastGeneric(b, loc, vectorType, squares,
                                    [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                                      return arith::DivFOp::create(nb, l, args[0], width);
                                    });
  return {mean, variance};
}

Value lowering::buildLayerNormRows(OpBuilder &b, Location loc, Value rows, Value gamma,
                                   Value beta, double epsilon) {
  auto type = tensorTypeOf(rows);
  Type elementType = type.getElementType();
  auto [mean, variance] = buildRowMoments(b, loc, rows);
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

struct GatedLinearLowering : OpConversionPattern<GatedLinearOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GatedLinearOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    bool transposed = op.getTransposeWeight();
    Value gate =
        buildLinearProduct(rewriter, loc, adaptor.getInput(), adaptor.getGate(), transposed);
    Value up = buildLinearProduct(rewriter, loc, adaptor.getInput(), adaptor.getUp(), transposed);
    auto productType = tensorTypeOf(gate);
    SmallVector<Value> inputs = {gate, up};
    Value gateBias = adaptor.getGateBias(), upBias = adaptor.getUpBias();
    if (gateBias)
      inputs.push_back(gateBias);
    if (upBias)
      inputs.push_back(upBias);
    Activation activation = op.getActivation();
    Value result = broadcastGeneric(
        rewriter, loc, productType, inputs, [&](OpBuilder &b, Location l, ValueRange args) {
          Value g = args[0], u = args[1];
          if (gateBias)
            g = addValues(b, l, g, args[2]);
          if (upBias)
            u = addValues(b, l, u, args.back());
          return arith::MulFOp::create(b, l, buildActivation(b, l, activation, g), u).getResult();
        });
    rewriter.replaceOp(op, reshapeTensor(rewriter, loc, result, op.getType()));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Fused attention: the reference lowering
//===----------------------------------------------------------------------===//
//
// For element types no kernel takes (f64): per block of queries, the whole
// [rows, seq_k] tile of scores, its exact softmax from the row max and sum,
// and its product with V; the backward's dK and dV per block of keys, from
// the [seq_q, rows] tile. The online softmax and the key-tile limits are the
// kernels' own (a target's KernelSet): here every key is read and the masks
// zero its probability, which makes this an independent check of them. No
// [seq_q, seq_k] tensor exists.

/// The largest divisor of `size` not above `limit`, so blocks are static.
int64_t blockSizeFor(int64_t size, int64_t limit) {
  for (int64_t block = std::min(size, limit); block > 1; --block)
    if (size % block == 0)
      return block;
  return 1;
}

/// One attention problem cut into blocks of rows: operand tiles, the masked
/// scores of a tile and their probabilities.
class AttentionTiles {
public:
  template <typename OpTy>
  AttentionTiles(OpBuilder &b, Location loc, OpTy op, typename OpTy::Adaptor adaptor)
      : dims(op.getDims()), paddingMask(adaptor.getPaddingMask()),
        scale(op.getScale().convertToDouble()), causal(op.getCausal()),
        window(static_cast<int64_t>(op.getWindow().value_or(0))) {
    if (std::optional<APFloat> cap = op.getSoftcap())
      softcap = cap->convertToDouble();
    if constexpr (std::is_same_v<OpTy, FusedAttentionOp>) {
      queryOffset = adaptor.getQueryOffset();
      keyLength = adaptor.getKeyLength();
      positionBias = adaptor.getPositionBias();
    }
    auto q = tensorTypeOf(op.getQuery());
    elementType = q.getElementType();
    batch = q.getDimSize(dims.batch);
    heads = q.getDimSize(dims.heads);
    seqQ = q.getDimSize(dims.seq);
    headDim = q.getDimSize(dims.headDim);
    seqK = tensorTypeOf(op.getKey()).getDimSize(dims.seq);
    blockQ = blockSizeFor(seqQ, 64);
    blockK = blockSizeFor(seqK, 64);
    if (Value bias = adaptor.getAttnBias()) {
      auto biasType = tensorTypeOf(bias);
      SmallVector<int64_t> shape(4 - biasType.getRank(), 1);
      llvm::append_range(shape, biasType.getShape());
      bias4d = reshapeTensor(b, loc, bias, RankedTensorType::get(shape, elementType));
    }
  }

  /// An scf.forall over (batch, head, block of `blockRows` rows of `seq`)
  /// whose shared outputs start as `inits`. `body(batch, head, start)`
  /// returns one tile per output: [blockRows, head_dim] for rank-4 outputs,
  /// [blockRows] for rank-3 ([batch, heads, seq]) ones.
  SmallVector<Value> forallBlocks(OpBuilder &b, Location loc, int64_t seq, int64_t blockRows,
                                  ValueRange inits,
                                  function_ref<SmallVector<Value>(Value, Value, Value)> body) {
    SmallVector<OpFoldResult> upperBounds = {b.getIndexAttr(batch), b.getIndexAttr(heads),
                                             b.getIndexAttr(seq / blockRows)};
    auto forall = scf::ForallOp::create(b, loc, upperBounds, inits, std::nullopt, nullptr);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getTerminator());
    SmallVector<Value> ivs = forall.getInductionVars();
    Value start = arith::MulIOp::create(b, loc, ivs[2], index(b, loc, blockRows));
    SmallVector<Value> tiles = body(ivs[0], ivs[1], start);
    b.setInsertionPointToStart(forall.getTerminator().getBody());
    for (auto [tile, shared] : llvm::zip_equal(tiles, forall.getRegionIterArgs())) {
      bool rowVector = tensorTypeOf(tile).getRank() == 1;
      auto [offsets, sizes] = rowVector ? rowGeometry(b, ivs[0], ivs[1], start, blockRows)
                                        : tileGeometry(b, ivs[0], ivs[1], start, blockRows);
      tensor::ParallelInsertSliceOp::create(b, loc, tile, shared, offsets, sizes,
                                            unitStrides(b, offsets.size()));
    }
    return forall.getResults();
  }

  /// The [rows, head_dim] tile of a rank-4 operand at (batch, head, start).
  Value extractTile(OpBuilder &b, Location loc, Value operand, Value batchIv, Value head,
                    Value start, int64_t rows) {
    auto [offsets, sizes] = tileGeometry(b, batchIv, head, start, rows);
    return tensor::ExtractSliceOp::create(b, loc,
                                          RankedTensorType::get({rows, headDim}, elementType),
                                          operand, offsets, sizes, unitStrides(b, 4));
  }

  /// The [rows] slice of a [batch, heads, seq] per-row value.
  Value extractRows(OpBuilder &b, Location loc, Value perRow, Value batchIv, Value head,
                    Value start, int64_t rows) {
    auto [offsets, sizes] = rowGeometry(b, batchIv, head, start, rows);
    return tensor::ExtractSliceOp::create(b, loc, RankedTensorType::get({rows}, elementType),
                                          perRow, offsets, sizes, unitStrides(b, 3));
  }

  /// scale * qTile kTile^T (soft-capped) plus the biases, -inf where a mask
  /// hides the key: the scores of the queries from qStart and the keys from
  /// kStart; `product`, if given, is set to qTile kTile^T.
  Value maskedScores(OpBuilder &b, Location loc, Value qTile, Value kTile, Value batchIv,
                     Value head, Value qStart, Value kStart, Value *product = nullptr) {
    int64_t rows = tensorTypeOf(qTile).getDimSize(0), cols = tensorTypeOf(kTile).getDimSize(0);
    auto scoreType = RankedTensorType::get({rows, cols}, elementType);
    Value scores = linalg::MatmulTransposeBOp::create(b, loc, scoreType, ValueRange{qTile, kTile},
                                                      filledTensor(b, loc, scoreType, 0.0))
                       .getResult(0);
    if (product)
      *product = scores;
    SmallVector<Value> inputs = {scores};
    bool hasPadding = static_cast<bool>(paddingMask);
    if (hasPadding)
      inputs.push_back(tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({cols}, b.getI1Type()), paddingMask,
          ArrayRef<OpFoldResult>{batchIv, kStart},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(cols)}, unitStrides(b, 2)));
    if (bias4d)
      inputs.push_back(extractBiasTile(b, loc, batchIv, head, qStart, kStart, rows, cols));
    bool limited = causal || keyLength;
    return broadcastGeneric(
        b, loc, scoreType, inputs, [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          Value value =
              arith::MulFOp::create(nb, l, args[0], floatConstant(nb, l, elementType, scale));
          if (softcap)
            value = softcapped(nb, l, value, softcap);
          if (bias4d)
            value = arith::AddFOp::create(nb, l, value, args.back());
          Value i = arith::AddIOp::create(nb, l, linalg::IndexOp::create(nb, l, 0), qStart);
          Value j = arith::AddIOp::create(nb, l, linalg::IndexOp::create(nb, l, 1), kStart);
          if (positionBias)
            value = arith::AddFOp::create(nb, l, value, diagonalBias(nb, l, batchIv, head, i, j));
          Value keep = arith::ConstantOp::create(nb, l, nb.getBoolAttr(true));
          if (limited)
            keep = kernels::AttentionLimits(nb, l,
                                            {seqQ, seqK, causal, window, queryOffset, keyLength})
                       .isVisible(batchIv, i, j);
          if (hasPadding)
            keep = arith::AndIOp::create(nb, l, keep, args[1]);
          return arith::SelectOp::create(nb, l, keep, value,
                                         floatConstant(nb, l, elementType, kNegInf));
        });
  }

  /// exp(scores - rowValue) per row, 0 on rows whose value is -inf (rows
  /// that see no key).
  Value rowExp(OpBuilder &b, Location loc, Value scores, Value rowValue) {
    return broadcastGeneric(
        b, loc, tensorTypeOf(scores), ValueRange{scores, asColumn(b, loc, rowValue)},
        [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          Value none = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ, args[1],
                                             floatConstant(nb, l, elementType, kNegInf));
          Value exp = math::ExpOp::create(nb, l, arith::SubFOp::create(nb, l, args[0], args[1]));
          return arith::SelectOp::create(nb, l, none, floatConstant(nb, l, elementType, 0.0), exp);
        });
  }

  /// lhs rhs (transposed as given), times `factor`: a [rows, cols] tile.
  template <typename MatmulOpTy>
  Value product(OpBuilder &b, Location loc, Value lhs, Value rhs, int64_t rows, int64_t cols,
                double factor = 1.0) {
    auto type = RankedTensorType::get({rows, cols}, elementType);
    Value result =
        MatmulOpTy::create(b, loc, type, ValueRange{lhs, rhs}, filledTensor(b, loc, type, 0.0))
            .getResult(0);
    if (factor == 1.0)
      return result;
    return broadcastGeneric(
        b, loc, type, result, [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          return arith::MulFOp::create(nb, l, args[0], floatConstant(nb, l, elementType, factor));
        });
  }

  static Value index(OpBuilder &b, Location loc, int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }

  AttentionDims dims;
  Value paddingMask, bias4d;
  /// The [1 | batch, heads, seq_q + seq_k - 1] bias per diagonal, or null.
  Value positionBias;
  /// [batch] i32 runtime limits of a cache attention, or null.
  Value queryOffset, keyLength;
  double scale;
  bool causal;
  /// The sliding window (0: none) and the scores' soft cap (0: none).
  int64_t window = 0;
  double softcap = 0;
  Type elementType;
  int64_t batch, heads, seqQ, seqK, headDim, blockQ, blockK;

private:
  static SmallVector<OpFoldResult> unitStrides(OpBuilder &b, int64_t rank) {
    return SmallVector<OpFoldResult>(rank, b.getIndexAttr(1));
  }

  /// Offsets and sizes of the [rows, head_dim] tile at (b, h, start).
  std::pair<SmallVector<OpFoldResult>, SmallVector<OpFoldResult>>
  tileGeometry(OpBuilder &b, Value batchIv, Value head, Value start, int64_t rows) {
    SmallVector<OpFoldResult> offsets(4), sizes(4);
    offsets[dims.batch] = batchIv;
    sizes[dims.batch] = b.getIndexAttr(1);
    offsets[dims.heads] = head;
    sizes[dims.heads] = b.getIndexAttr(1);
    offsets[dims.seq] = start;
    sizes[dims.seq] = b.getIndexAttr(rows);
    offsets[dims.headDim] = b.getIndexAttr(0);
    sizes[dims.headDim] = b.getIndexAttr(headDim);
    return {offsets, sizes};
  }

  /// Offsets and sizes of `rows` entries of a [batch, heads, seq] tensor.
  std::pair<SmallVector<OpFoldResult>, SmallVector<OpFoldResult>>
  rowGeometry(OpBuilder &b, Value batchIv, Value head, Value start, int64_t rows) {
    return {{batchIv, head, start}, {b.getIndexAttr(1), b.getIndexAttr(1), b.getIndexAttr(rows)}};
  }

  /// positionBias at (batch, head, query, key): its entry on their diagonal.
  Value diagonalBias(OpBuilder &b, Location loc, Value batchIv, Value head, Value query,
                     Value key) {
    Value perSequence = tensorTypeOf(positionBias).getDimSize(0) == 1 ? index(b, loc, 0) : batchIv;
    Value diagonal = arith::AddIOp::create(b, loc, arith::SubIOp::create(b, loc, key, query),
                                           index(b, loc, seqQ - 1));
    return tensor::ExtractOp::create(b, loc, positionBias, ValueRange{perSequence, head, diagonal});
  }

  /// The [rows | 1, cols | 1] slice of the rank-4 bias for this tile.
  Value extractBiasTile(OpBuilder &b, Location loc, Value batchIv, Value head, Value qStart,
                        Value kStart, int64_t rows, int64_t cols) {
    auto type = tensorTypeOf(bias4d);
    Value starts[4] = {batchIv, head, qStart, kStart};
    int64_t fullSizes[4] = {1, 1, rows, cols};
    SmallVector<OpFoldResult> offsets, sizes;
    SmallVector<int64_t> shape;
    for (int i = 0; i < 4; ++i) {
      bool broadcast = type.getDimSize(i) == 1;
      offsets.push_back(broadcast ? OpFoldResult(b.getIndexAttr(0)) : OpFoldResult(starts[i]));
      shape.push_back(broadcast ? 1 : fullSizes[i]);
      sizes.push_back(b.getIndexAttr(shape.back()));
    }
    Value slice = tensor::ExtractSliceOp::create(b, loc, RankedTensorType::get(shape, elementType),
                                                 bias4d, offsets, sizes, unitStrides(b, 4));
    return reshapeTensor(b, loc, slice, RankedTensorType::get({shape[2], shape[3]}, elementType));
  }
};

/// Forward: per query block, the softmax of its scores against every key.
struct FusedAttentionLowering : OpConversionPattern<FusedAttentionOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(FusedAttentionOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    AttentionTiles t(rewriter, loc, op, adaptor);
    Type elementType = t.elementType;
    bool wantLse = static_cast<bool>(op.getLogsumexp());
    SmallVector<Value> inits = {tensor::EmptyOp::create(
        rewriter, loc, tensorTypeOf(op.getQuery()).getShape(), elementType)};
    if (wantLse)
      inits.push_back(tensor::EmptyOp::create(
          rewriter, loc, ArrayRef<int64_t>{t.batch, t.heads, t.seqQ}, elementType));
    auto rowType = RankedTensorType::get({t.blockQ}, elementType);
    SmallVector<Value> results = t.forallBlocks(
        rewriter, loc, t.seqQ, t.blockQ, inits,
        [&](Value batchIv, Value head, Value qStart) -> SmallVector<Value> {
          OpBuilder &b = rewriter;
          Value zero = AttentionTiles::index(b, loc, 0);
          Value queries =
              t.extractTile(b, loc, adaptor.getQuery(), batchIv, head, qStart, t.blockQ);
          // Grouped-query attention: the query head's key/value head.
          Value keyHead = arith::DivUIOp::create(
              b, loc, head, AttentionTiles::index(b, loc, op.getQueryHeadsPerKeyHead()));
          Value keys = t.extractTile(b, loc, adaptor.getKey(), batchIv, keyHead, zero, t.seqK);
          Value values = t.extractTile(b, loc, adaptor.getValue(), batchIv, keyHead, zero, t.seqK);
          Value scores = t.maskedScores(b, loc, queries, keys, batchIv, head, qStart, zero);
          Value max = reduceRows(b, loc, scores, filledTensor(b, loc, rowType, kNegInf), firstArg,
                                 maxValues);
          Value probs = t.rowExp(b, loc, scores, max);
          Value sum =
              reduceRows(b, loc, probs, filledTensor(b, loc, rowType, 0.0), firstArg, addValues);
          Value weighted = t.product<linalg::MatmulOp>(b, loc, probs, values, t.blockQ, t.headDim);
          Value out = broadcastGeneric(
              b, loc, tensorTypeOf(weighted), ValueRange{weighted, asColumn(b, loc, sum)},
              [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                // Rows that see no key give 0, never NaN.
                Value zero = floatConstant(nb, l, elementType, 0.0);
                Value empty =
                    arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ, args[1], zero);
                return arith::SelectOp::create(nb, l, empty, zero,
                                               arith::DivFOp::create(nb, l, args[0], args[1]));
              });
          if (!wantLse)
            return {out};
          // max + log(sum): -inf for rows that see nothing (log 0 = -inf).
          return {out, broadcastGeneric(b, loc, rowType, ValueRange{max, sum},
                                        [](OpBuilder &nb, Location l, ValueRange args) -> Value {
                                          return arith::AddFOp::create(
                                              nb, l, args[0], math::LogOp::create(nb, l, args[1]));
                                        })};
        });
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// Backward, from the probabilities P = exp(S - lse) recomputed from the
/// forward's log-sum-exp: dQ per query block against every key, dK and dV
/// per key block against every query, so each gradient tile has one writer.
struct FusedAttentionBackwardLowering : OpConversionPattern<FusedAttentionBackwardOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(FusedAttentionBackwardOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    AttentionTiles t(rewriter, loc, op, adaptor);
    Value rowDot = outputDotGrad(rewriter, loc, t, adaptor.getOutput(), adaptor.getGradOutput());
    Value lse = adaptor.getLogsumexp();

    // The tile of queries (from qStart) and keys (from kStart) of the
    // operand tiles: its P, and dS = P (dP - D) with dP = dO V^T and D =
    // rowsum(dO O).
    struct Tile {
      Value probs, gradScores;
    };
    auto buildTile = [&](OpBuilder &b, Value batchIv, Value head, Value qStart, Value kStart,
                         Value queries, Value keys, Value values, Value gradOut) {
      int64_t rows = tensorTypeOf(queries).getDimSize(0);
      int64_t cols = tensorTypeOf(keys).getDimSize(0);
      Value product;
      Value scores = t.maskedScores(b, loc, queries, keys, batchIv, head, qStart, kStart, &product);
      Value probs =
          t.rowExp(b, loc, scores, t.extractRows(b, loc, lse, batchIv, head, qStart, rows));
      Value gradProbs = t.product<linalg::MatmulTransposeBOp>(b, loc, gradOut, values, rows, cols);
      Value dots = t.extractRows(b, loc, rowDot, batchIv, head, qStart, rows);
      SmallVector<Value> inputs = {probs, gradProbs, asColumn(b, loc, dots)};
      if (t.softcap)
        inputs.push_back(product);
      Value gradScores = broadcastGeneric(
          b, loc, tensorTypeOf(scores), inputs, [&](OpBuilder &nb, Location l, ValueRange args) {
            Value diff = arith::SubFOp::create(nb, l, args[1], args[2]);
            Value grad = arith::MulFOp::create(nb, l, args[0], diff);
            if (!t.softcap)
              return grad;
            // Through the cap, at the scaled score.
            Value scaled =
                arith::MulFOp::create(nb, l, args[3], floatConstant(nb, l, t.elementType, t.scale));
            return arith::MulFOp::create(nb, l, grad, softcapSlope(nb, l, scaled, t.softcap))
                .getResult();
          });
      return Tile{probs, gradScores};
    };

    // dK = scale dS^T Q and dV = P^T dO per key block.
    Value keyEmpty =
        tensor::EmptyOp::create(rewriter, loc, tensorTypeOf(op.getKey()).getShape(), t.elementType);
    SmallVector<Value> keyGrads = t.forallBlocks(
        rewriter, loc, t.seqK, t.blockK, ValueRange{keyEmpty, keyEmpty},
        [&](Value batchIv, Value head, Value kStart) -> SmallVector<Value> {
          OpBuilder &b = rewriter;
          Value zero = AttentionTiles::index(b, loc, 0);
          Value queries = t.extractTile(b, loc, adaptor.getQuery(), batchIv, head, zero, t.seqQ);
          Value gradOut =
              t.extractTile(b, loc, adaptor.getGradOutput(), batchIv, head, zero, t.seqQ);
          Value keys = t.extractTile(b, loc, adaptor.getKey(), batchIv, head, kStart, t.blockK);
          Value values = t.extractTile(b, loc, adaptor.getValue(), batchIv, head, kStart, t.blockK);
          Tile tile = buildTile(b, batchIv, head, zero, kStart, queries, keys, values, gradOut);
          return {t.product<linalg::MatmulTransposeAOp>(b, loc, tile.gradScores, queries, t.blockK,
                                                        t.headDim, t.scale),
                  t.product<linalg::MatmulTransposeAOp>(b, loc, tile.probs, gradOut, t.blockK,
                                                        t.headDim)};
        });

    // dQ = scale dS K per query block.
    Value queryEmpty = tensor::EmptyOp::create(
        rewriter, loc, tensorTypeOf(op.getQuery()).getShape(), t.elementType);
    SmallVector<Value> queryGrad = t.forallBlocks(
        rewriter, loc, t.seqQ, t.blockQ, queryEmpty,
        [&](Value batchIv, Value head, Value qStart) -> SmallVector<Value> {
          OpBuilder &b = rewriter;
          Value zero = AttentionTiles::index(b, loc, 0);
          Value queries =
              t.extractTile(b, loc, adaptor.getQuery(), batchIv, head, qStart, t.blockQ);
          Value gradOut =
              t.extractTile(b, loc, adaptor.getGradOutput(), batchIv, head, qStart, t.blockQ);
          Value keys = t.extractTile(b, loc, adaptor.getKey(), batchIv, head, zero, t.seqK);
          Value values = t.extractTile(b, loc, adaptor.getValue(), batchIv, head, zero, t.seqK);
          Tile tile = buildTile(b, batchIv, head, qStart, zero, queries, keys, values, gradOut);
          return {t.product<linalg::MatmulOp>(b, loc, tile.gradScores, keys, t.blockQ, t.headDim,
                                              t.scale)};
        });
    rewriter.replaceOp(op, {queryGrad[0], keyGrads[0], keyGrads[1]});
    return success();
  }

  /// D = rowsum(dO * O) as [batch, heads, seq_q].
  static Value outputDotGrad(OpBuilder &b, Location loc, AttentionTiles &t, Value output,
                             Value gradOutput) {
    MLIRContext *context = b.getContext();
    AffineMap identity = AffineMap::getMultiDimIdentityMap(4, context);
    AffineMap rows = AffineMap::get(4, 0,
                                    {getAffineDimExpr(t.dims.batch, context),
                                     getAffineDimExpr(t.dims.heads, context),
                                     getAffineDimExpr(t.dims.seq, context)},
                                    context);
    SmallVector<utils::IteratorType> iterators(4, utils::IteratorType::parallel);
    iterators[t.dims.headDim] = utils::IteratorType::reduction;
    auto type = RankedTensorType::get({t.batch, t.heads, t.seqQ}, t.elementType);
    return linalg::GenericOp::create(
               b, loc, type, ValueRange{output, gradOutput}, filledTensor(b, loc, type, 0.0),
               ArrayRef<AffineMap>{identity, identity, rows}, iterators,
               [](OpBuilder &nb, Location l, ValueRange args) {
                 Value product = arith::MulFOp::create(nb, l, args[0], args[1]);
                 linalg::YieldOp::create(nb, l,
                                         arith::AddFOp::create(nb, l, args[2], product).getResult());
               })
        .getResult(0);
  }
};

} // namespace

void lowering::populateFusedKernelLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<SoftmaxLowering, LayerNormLowering, FusedAddLayerNormLowering, FusedLinearLowering,
               GatedLinearLowering, FusedAttentionLowering, FusedAttentionBackwardLowering>(
      patterns.getContext());
}
