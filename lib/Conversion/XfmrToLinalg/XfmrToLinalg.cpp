//===- XfmrToLinalg.cpp - lower xfmr ops to linalg on tensors ---*- C++ -*-===//
//
// Primitive and high-level ops; the fused kernels are in FusedKernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "LinalgLowering.h"

#include "xfmr/Conversion/Passes.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"

#include "llvm/Support/Debug.h"
#include <cmath>
#include <limits>

#define DEBUG_TYPE "convert-xfmr-to-linalg"

namespace xfmr {
#define GEN_PASS_DEF_CONVERTXFMRTOLINALG
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;
using namespace xfmr::lowering;

namespace {

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

template <typename OpTy, typename ArithOpTy>
struct BinaryLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, broadcastGeneric(rewriter, op.getLoc(), op.getType(),
                                            adaptor.getOperands(),
                                            [](OpBuilder &b, Location loc, ValueRange args) {
                                              return ArithOpTy::create(b, loc, args[0],
                                                                       args[1]);
                                            }));
    return success();
  }
};

struct SelectLowering : OpConversionPattern<SelectOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SelectOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, broadcastGeneric(rewriter, op.getLoc(), op.getType(),
                                            adaptor.getOperands(),
                                            [](OpBuilder &b, Location loc, ValueRange args) {
                                              return arith::SelectOp::create(
                                                  b, loc, args[0], args[1], args[2]);
                                            }));
    return success();
  }
};

struct ActivationLowering : OpInterfaceConversionPattern<ActivationOpInterface> {
  using OpInterfaceConversionPattern::OpInterfaceConversionPattern;
  LogicalResult matchAndRewrite(ActivationOpInterface op, ArrayRef<Value> operands,
                                ConversionPatternRewriter &rewriter) const override {
    Activation activation = op.getActivation();
    rewriter.replaceOp(op, broadcastGeneric(rewriter, op->getLoc(), tensorTypeOf(op->getResult(0)),
                                            operands.front(),
                                            [&](OpBuilder &b, Location loc, ValueRange args) {
                                              return buildActivation(b, loc, activation,
                                                                     args[0]);
                                            }));
    return success();
  }
};

/// Dropout without a seed is the identity (inference). With one, element i
/// is kept when a 32-bit hash of (seed, i) clears the rate: counter-based,
/// so any pass over the same tensor shape and seed draws the same mask.
struct DropoutLowering : OpConversionPattern<DropoutOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(DropoutOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    double rate = op.getRate().convertToDouble();
    if (!adaptor.getSeed() || rate == 0) {
      rewriter.replaceOp(op, adaptor.getInput());
      return success();
    }
    Location loc = op.getLoc();
    auto type = op.getType();
    Type elementType = type.getElementType();
    Value seed = tensor::ExtractOp::create(rewriter, loc, adaptor.getSeed(), ValueRange{});
    rewriter.replaceOp(
        op, broadcastGeneric(
                rewriter, loc, type, adaptor.getInput(),
                [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                  Value counter = linearIndex(b, l, type.getShape());
                  Value keep = keepElement(b, l, seed, counter, rate);
                  Value scaled = arith::MulFOp::create(
                      b, l, args[0], floatConstant(b, l, elementType, 1.0 / (1.0 - rate)));
                  return arith::SelectOp::create(b, l, keep, scaled,
                                                 floatConstant(b, l, elementType, 0.0));
                }));
    return success();
  }

  /// The row-major position of the current element, as i32.
  static Value linearIndex(OpBuilder &b, Location l, ArrayRef<int64_t> shape) {
    Value linear = arith::ConstantIndexOp::create(b, l, 0);
    for (auto [dim, size] : llvm::enumerate(shape)) {
      linear = arith::MulIOp::create(b, l, linear, arith::ConstantIndexOp::create(b, l, size));
      linear = arith::AddIOp::create(b, l, linear, linalg::IndexOp::create(b, l, dim));
    }
    return arith::IndexCastUIOp::create(b, l, b.getI32Type(), linear);
  }

  /// murmur3's finalizer of (counter ^ seed_hi) * golden + seed_lo; the top
  /// 24 bits against rate * 2^24.
  static Value keepElement(OpBuilder &b, Location l, Value seed, Value counter, double rate) {
    Type i32 = b.getI32Type();
    auto constant = [&](uint32_t value) {
      return arith::ConstantOp::create(b, l, b.getIntegerAttr(i32, static_cast<int32_t>(value)))
          .getResult();
    };
    auto shiftXor = [&](Value h, uint32_t bits) {
      return arith::XOrIOp::create(b, l, h, arith::ShRUIOp::create(b, l, h, constant(bits)))
          .getResult();
    };
    auto mul = [&](Value h, uint32_t factor) {
      return arith::MulIOp::create(b, l, h, constant(factor)).getResult();
    };
    Value seedLo = arith::TruncIOp::create(b, l, i32, seed);
    Value seedHi = arith::TruncIOp::create(
        b, l, i32,
        arith::ShRUIOp::create(
            b, l, seed, arith::ConstantOp::create(b, l, b.getIntegerAttr(seed.getType(), 32))));
    Value h = arith::AddIOp::create(b, l, mul(arith::XOrIOp::create(b, l, counter, seedHi), 0x9E3779B1u),
                                    seedLo);
    h = mul(shiftXor(h, 16), 0x85EBCA6Bu);
    h = mul(shiftXor(h, 13), 0xC2B2AE35u);
    h = shiftXor(h, 16);
    uint32_t threshold = static_cast<uint32_t>(std::llround(rate * 16777216.0));
    return arith::CmpIOp::create(b, l, arith::CmpIPredicate::uge,
                                 arith::ShRUIOp::create(b, l, h, constant(8)), constant(threshold));
  }
};

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

struct TransposeLowering : OpConversionPattern<TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = op.getType();
    Value init = tensor::EmptyOp::create(rewriter, op.getLoc(), type.getShape(),
                                         type.getElementType());
    rewriter.replaceOp(op, linalg::TransposeOp::create(rewriter, op.getLoc(),
                                                       adaptor.getInput(), init,
                                                       op.getPermutation())
                               .getResult());
    return success();
  }
};

struct ReshapeLowering : OpConversionPattern<ReshapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ReshapeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       reshapeTensor(rewriter, op.getLoc(), adaptor.getInput(), op.getType()));
    return success();
  }
};

struct ReduceLowering : OpConversionPattern<ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t axis = op.getNormalizedAxis();
    ReduceKind kind = op.getKind();
    Type elementType = op.getType().getElementType();
    double init = kind == ReduceKind::max ? -std::numeric_limits<double>::infinity() : 0.0;
    Value reduced = reduceAxis(rewriter, loc, adaptor.getInput(), axis, init,
                               [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                                 if (kind == ReduceKind::max)
                                   return arith::MaximumFOp::create(b, l, args[0], args[1]);
                                 return arith::AddFOp::create(b, l, args[0], args[1]);
                               });
    if (kind == ReduceKind::mean) {
      double count = tensorTypeOf(adaptor.getInput()).getDimSize(axis);
      reduced = broadcastGeneric(rewriter, loc, tensorTypeOf(reduced), reduced,
                                 [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                                   return arith::DivFOp::create(
                                       b, l, args[0], floatConstant(b, l, elementType, count));
                                 });
    }
    rewriter.replaceOp(op, reshapeTensor(rewriter, loc, reduced, op.getType()));
    return success();
  }
};

struct MatmulLowering : OpConversionPattern<MatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MatmulOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value lhs = adaptor.getLhs(), rhs = adaptor.getRhs();
    auto lhsType = tensorTypeOf(lhs), rhsType = tensorTypeOf(rhs);
    auto resultType = op.getType();
    bool transposed = op.getTransposeRhs(), lhsTransposed = op.getTransposeLhs();

    // A shared 2-D right-hand side: one GEMM over all rows of lhs.
    if (rhsType.getRank() == 2 && !lhsTransposed) {
      Value product = buildLinearProduct(rewriter, loc, lhs, rhs, transposed);
      rewriter.replaceOp(op, reshapeTensor(rewriter, loc, product, resultType));
      return success();
    }

    // General case: a contraction whose batch dims broadcast.
    MLIRContext *context = rewriter.getContext();
    int64_t rank = resultType.getRank();
    int64_t loops = rank + 1; // batch..., m, n, k
    AffineExpr m = getAffineDimExpr(rank - 2, context), n = getAffineDimExpr(rank - 1, context),
               k = getAffineDimExpr(rank, context);
    auto operandMap = [&](RankedTensorType type, AffineExpr row, AffineExpr col) {
      SmallVector<AffineExpr> exprs;
      int64_t batchRank = type.getRank() - 2, offset = rank - 2 - batchRank;
      for (int64_t i = 0; i < batchRank; ++i) {
        bool stretched = type.getDimSize(i) == 1 && resultType.getDimSize(offset + i) != 1;
        exprs.push_back(stretched ? getAffineConstantExpr(0, context)
                                  : getAffineDimExpr(offset + i, context));
      }
      exprs.append({row, col});
      return AffineMap::get(loops, 0, exprs, context);
    };
    SmallVector<AffineExpr> resultExprs;
    for (int64_t i = 0; i < rank; ++i)
      resultExprs.push_back(getAffineDimExpr(i, context));
    SmallVector<AffineMap> maps = {lhsTransposed ? operandMap(lhsType, k, m)
                                                 : operandMap(lhsType, m, k),
                                   transposed ? operandMap(rhsType, n, k)
                                              : operandMap(rhsType, k, n),
                                   AffineMap::get(loops, 0, resultExprs, context)};
    SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    Value init = filledTensor(rewriter, loc, resultType, 0.0);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, resultType, ValueRange{lhs, rhs}, init, maps, iterators,
        [](OpBuilder &b, Location l, ValueRange args) {
          Value product = arith::MulFOp::create(b, l, args[0], args[1]);
          linalg::YieldOp::create(b, l, arith::AddFOp::create(b, l, args[2], product).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct CausalMaskLowering : OpConversionPattern<CausalMaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(CausalMaskOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = op.getType();
    int64_t offset = type.getDimSize(1) - type.getDimSize(0);
    rewriter.replaceOp(op, broadcastGeneric(
                               rewriter, op.getLoc(), type, {},
                               [&](OpBuilder &b, Location loc, ValueRange) -> Value {
                                 Value i = linalg::IndexOp::create(b, loc, 0);
                                 Value j = linalg::IndexOp::create(b, loc, 1);
                                 Value limit = arith::AddIOp::create(
                                     b, loc, i, arith::ConstantIndexOp::create(b, loc, offset));
                                 return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                                              j, limit);
                               }));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Embeddings and position encodings
//===----------------------------------------------------------------------===//

/// Element (`row`, `col`) of `op`'s result, from its `values`, `scales` and
/// `mins` (null without), as `type`: an int8 value q (`int8`, when the
/// caller has read it, else from `values`) times its group's scale (widened
/// to f32 when narrower), plus its min; or a 4-bit one, (q - 8) * scale or
/// q * scale + min. The
/// scale's index is the value's with the grouped dimension divided by the
/// group size.
Value dequantizedElement(OpBuilder &b, Location loc, DequantizeOp op, Value values, Value scales,
                         Value mins, Value row, Value col, Type type, Value int8 = {}) {
  auto index = [&](int64_t value) { return arith::ConstantIndexOp::create(b, loc, value); };
  SmallVector<Value, 2> at = {row, col};
  at[op.getAxis()] = arith::DivUIOp::create(b, loc, at[op.getAxis()], index(op.getGroupSize()));
  Type f32 = b.getF32Type();
  auto widened = [&](Value from) -> Value {
    Value element = tensor::ExtractOp::create(b, loc, from, at);
    return element.getType().isF32() ? element : arith::ExtFOp::create(b, loc, f32, element);
  };
  Value value;
  if (op.getBits() == 4) {
    // Byte col % 16 of block col / 32; the high nibble for its second half.
    Value block = arith::DivUIOp::create(b, loc, col, index(32));
    Value within = arith::RemUIOp::create(b, loc, col, index(32));
    Value byteCol = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, block, index(16)),
                                          arith::RemUIOp::create(b, loc, within, index(16)));
    Value byte =
        arith::ExtUIOp::create(b, loc, b.getI32Type(),
                               tensor::ExtractOp::create(b, loc, values, ValueRange{row, byteCol}));
    Value shift = arith::IndexCastOp::create(
        b, loc, b.getI32Type(),
        arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, within, index(16)), index(4)));
    Value nibble = arith::AndIOp::create(b, loc, arith::ShRUIOp::create(b, loc, byte, shift),
                                         arith::ConstantIntOp::create(b, loc, b.getI32Type(), 15));
    Value q = arith::UIToFPOp::create(b, loc, f32, nibble);
    Value scale = widened(scales);
    if (mins) {
      value = arith::AddFOp::create(b, loc, arith::MulFOp::create(b, loc, q, scale), widened(mins));
    } else {
      Value eight = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(8));
      value = arith::MulFOp::create(b, loc, arith::SubFOp::create(b, loc, q, eight), scale);
    }
  } else {
    Value q = int8 ? int8 : tensor::ExtractOp::create(b, loc, values, ValueRange{row, col});
    Value scale = widened(scales);
    value = arith::MulFOp::create(b, loc, arith::SIToFPOp::create(b, loc, f32, q), scale);
    if (mins)
      value = arith::AddFOp::create(b, loc, value, widened(mins));
  }
  if (type != f32)
    value = arith::TruncFOp::create(b, loc, type, value);
  return value;
}

struct EmbeddingLowering : OpConversionPattern<EmbeddingOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(EmbeddingOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto resultType = op.getType();
    Value table = adaptor.getTable();
    Value ids = adaptor.getIds();
    Type elementType = resultType.getElementType();
    double scale = op.getScale().convertToDouble();
    int64_t rank = resultType.getRank();
    // A narrowed table (int8 with scales, or bf16) is read a row at a time
    // as stored, not widened whole.
    auto dequantize = op.getTable().getDefiningOp<DequantizeOp>();
    auto widen = op.getTable().getDefiningOp<arith::ExtFOp>();
    MLIRContext *context = rewriter.getContext();
    SmallVector<AffineMap> maps = {
        AffineMap::getMultiDimIdentityMap(rank, context).dropResult(rank - 1),
        AffineMap::getMultiDimIdentityMap(rank, context)};
    SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
    Value init = tensor::EmptyOp::create(rewriter, loc, resultType.getShape(), elementType);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, resultType, ids, init, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value row = arith::IndexCastOp::create(b, l, b.getIndexType(), args[0]);
          Value col = linalg::IndexOp::create(b, l, rank - 1);
          Value value;
          if (dequantize) {
            value =
                dequantizedElement(b, l, dequantize, dequantize.getValues(), dequantize.getScales(),
                                   dequantize.getMins(), row, col, elementType);
          } else if (widen) {
            value = arith::ExtFOp::create(
                b, l, elementType,
                tensor::ExtractOp::create(b, l, widen.getIn(), ValueRange{row, col}),
                /*fastmath=*/nullptr);
          } else {
            value = tensor::ExtractOp::create(b, l, table, ValueRange{row, col});
          }
          if (scale != 1.0)
            value = arith::MulFOp::create(b, l, value, floatConstant(b, l, elementType, scale));
          linalg::YieldOp::create(b, l, value);
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// Inside a generic over [batch, ...]: `offset` + starts[batch index],
/// clamped to [0, limit], as an index.
Value startPosition(OpBuilder &b, Location loc, Value starts, int64_t offset, int64_t limit) {
  Value start =
      tensor::ExtractOp::create(b, loc, starts, ValueRange{linalg::IndexOp::create(b, loc, 0)});
  Value index =
      arith::AddIOp::create(b, loc, arith::IndexCastOp::create(b, loc, b.getIndexType(), start),
                            arith::ConstantIndexOp::create(b, loc, offset));
  index = arith::MaxSIOp::create(b, loc, index, arith::ConstantIndexOp::create(b, loc, 0));
  return arith::MinSIOp::create(b, loc, index, arith::ConstantIndexOp::create(b, loc, limit));
}

struct SinusoidalPositionLowering : OpConversionPattern<SinusoidalPositionEncodingOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SinusoidalPositionEncodingOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = op.getType();
    int64_t rank = type.getRank();
    int64_t dModel = type.getShape().back();
    Type elementType = type.getElementType();
    // Evaluated as PyTorch's reference implementation does, in the element
    // type: div = exp(2i * -ln(10000)/d), angle = pos * div, where feature
    // f holds frequency i and a sine or a cosine as the layout says.
    double logStep = -std::log(10000.0) / static_cast<double>(dModel);
    bool halves = op.getLayout() == SinusoidLayout::halves;
    rewriter.replaceOp(
        op, broadcastGeneric(
                rewriter, op.getLoc(), type, adaptor.getInput(),
                [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
                  Value pos = linalg::IndexOp::create(b, loc, rank - 2);
                  if (Value starts = adaptor.getPositions())
                    pos = arith::AddIOp::create(b, loc, pos,
                                                startPosition(b, loc, starts, 0, INT32_MAX));
                  Value feature = linalg::IndexOp::create(b, loc, rank - 1);
                  Value isCosine, twiceFrequency;
                  if (halves) {
                    Value half = arith::ConstantIndexOp::create(b, loc, dModel / 2);
                    isCosine =
                        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, feature, half);
                    Value frequency = arith::SelectOp::create(
                        b, loc, isCosine, arith::SubIOp::create(b, loc, feature, half), feature);
                    twiceFrequency = arith::AddIOp::create(b, loc, frequency, frequency);
                  } else {
                    Value two = arith::ConstantIndexOp::create(b, loc, 2);
                    Value odd = arith::RemUIOp::create(b, loc, feature, two);
                    twiceFrequency = arith::SubIOp::create(b, loc, feature, odd);
                    isCosine = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, odd,
                                                     arith::ConstantIndexOp::create(b, loc, 0));
                  }
                  auto toFloat = [&](Value index) -> Value {
                    Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
                    return arith::SIToFPOp::create(b, loc, elementType, i64);
                  };
                  Value div = math::ExpOp::create(
                      b, loc,
                      arith::MulFOp::create(b, loc, toFloat(twiceFrequency),
                                            floatConstant(b, loc, elementType, logStep)));
                  Value angle = arith::MulFOp::create(b, loc, toFloat(pos), div);
                  Value encoding =
                      arith::SelectOp::create(b, loc, isCosine, math::CosOp::create(b, loc, angle),
                                              math::SinOp::create(b, loc, angle));
                  return arith::AddFOp::create(b, loc, args[0], encoding);
                }));
    return success();
  }
};

struct LearnedPositionLowering : OpConversionPattern<LearnedPositionEncodingOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LearnedPositionEncodingOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    int64_t seq = type.getDimSize(type.getRank() - 2), dModel = type.getShape().back();
    if (Value starts = adaptor.getPositions()) {
      // Sequence b's token t reads row offset + positions[b] + t.
      Value table = adaptor.getTable();
      int64_t rows = tensorTypeOf(table).getDimSize(0);
      int64_t offset = static_cast<int64_t>(op.getOffset());
      rewriter.replaceOp(
          op, broadcastGeneric(
                  rewriter, loc, type, adaptor.getInput(),
                  [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                    Value start = startPosition(b, l, starts, offset, rows - 1);
                    Value row = arith::MinSIOp::create(
                        b, l, arith::AddIOp::create(b, l, start, linalg::IndexOp::create(b, l, 1)),
                        arith::ConstantIndexOp::create(b, l, rows - 1));
                    Value value = tensor::ExtractOp::create(
                        b, l, table, ValueRange{row, linalg::IndexOp::create(b, l, 2)});
                    return arith::AddFOp::create(b, l, args[0], value);
                  }));
      return success();
    }
    auto sliceType = RankedTensorType::get({seq, dModel}, type.getElementType());
    Value positions = tensor::ExtractSliceOp::create(
        rewriter, loc, sliceType, adaptor.getTable(),
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(op.getOffset()), rewriter.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(seq), rewriter.getIndexAttr(dModel)},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1), rewriter.getIndexAttr(1)});
    rewriter.replaceOp(op, broadcastGeneric(rewriter, loc, type,
                                            ValueRange{adaptor.getInput(), positions},
                                            [](OpBuilder &b, Location l, ValueRange args) {
                                              return arith::AddFOp::create(b, l, args[0],
                                                                           args[1]);
                                            }));
    return success();
  }
};

/// A table of cosines and sines over [batch, seq, n], computed in f32 from
/// the position and the frequency table fixed at compile time, then one
/// generic over [batch, seq, heads, n] that reads the two rotated halves
/// (slices of the input) and writes both, inserted into the input's
/// features. The table shares each angle's cos and sin among the heads.
struct RotaryEmbeddingLowering : OpConversionPattern<RotaryEmbeddingOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RotaryEmbeddingOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    Type elementType = type.getElementType();
    Type f32 = rewriter.getF32Type();
    // Computed in f32, or f64 for f64 values; the angle is f32 as
    // transformers forms it.
    Type compute = elementType.getIntOrFloatBitWidth() > 32 ? elementType : f32;
    SmallVector<float> frequencies(op.getInvFreq().begin(), op.getInvFreq().end());
    int64_t half = static_cast<int64_t>(frequencies.size());
    Value input = adaptor.getInput(), starts = adaptor.getPositions();
    double scaling = op.getAttentionScaling().convertToDouble();
    // The forward rotation subtracts the partner's term in the first half
    // and adds it in the second; its transpose the other way round.
    bool transpose = op.getTranspose();

    SmallVector<int64_t> tableShape = {type.getDimSize(0), type.getDimSize(1), half};
    auto tableType = RankedTensorType::get(tableShape, compute);
    Value frequencyTable = arith::ConstantOp::create(
        rewriter, loc,
        DenseElementsAttr::get(RankedTensorType::get({half}, f32), ArrayRef<float>(frequencies)));
    auto angles = linalg::GenericOp::create(
        rewriter, loc, TypeRange{tableType, tableType}, ValueRange{},
        ValueRange{tensor::EmptyOp::create(rewriter, loc, tableShape, compute),
                   tensor::EmptyOp::create(rewriter, loc, tableShape, compute)},
        SmallVector<AffineMap>(2, AffineMap::getMultiDimIdentityMap(3, getContext())),
        SmallVector<utils::IteratorType>(3, utils::IteratorType::parallel),
        [&](OpBuilder &b, Location l, ValueRange) {
          Value position = linalg::IndexOp::create(b, l, 1);
          if (starts)
            position = arith::AddIOp::create(
                b, l, position,
                startPosition(b, l, starts, 0, std::numeric_limits<int32_t>::max()));
          Value positionF32 = arith::SIToFPOp::create(
              b, l, f32, arith::IndexCastOp::create(b, l, b.getI64Type(), position));
          Value frequency = tensor::ExtractOp::create(b, l, frequencyTable,
                                                      ValueRange{linalg::IndexOp::create(b, l, 2)});
          Value angle = arith::MulFOp::create(b, l, positionF32, frequency);
          if (compute != f32)
            angle = arith::ExtFOp::create(b, l, compute, angle);
          Value cosine = math::CosOp::create(b, l, angle), sine = math::SinOp::create(b, l, angle);
          if (scaling != 1.0) {
            cosine = arith::MulFOp::create(b, l, cosine, floatConstant(b, l, compute, scaling));
            sine = arith::MulFOp::create(b, l, sine, floatConstant(b, l, compute, scaling));
          }
          linalg::YieldOp::create(b, l, ValueRange{cosine, sine});
        });

    SmallVector<int64_t> halfShape(type.getShape());
    halfShape.back() = half;
    auto halfType = RankedTensorType::get(halfShape, elementType);
    SmallVector<OpFoldResult> sizes = llvm::map_to_vector(
        halfShape, [&](int64_t size) -> OpFoldResult { return rewriter.getIndexAttr(size); });
    SmallVector<OpFoldResult> strides(4, rewriter.getIndexAttr(1));
    auto offsetsAt = [&](int64_t feature) {
      SmallVector<OpFoldResult> offsets(4, rewriter.getIndexAttr(0));
      offsets.back() = rewriter.getIndexAttr(feature);
      return offsets;
    };
    Value first = tensor::ExtractSliceOp::create(rewriter, loc, halfType, input, offsetsAt(0),
                                                 sizes, strides);
    Value second = tensor::ExtractSliceOp::create(rewriter, loc, halfType, input, offsetsAt(half),
                                                  sizes, strides);
    AffineMap identity = AffineMap::getMultiDimIdentityMap(4, getContext());
    AffineMap perToken = AffineMap::get(
        4, 0, {rewriter.getAffineDimExpr(0), rewriter.getAffineDimExpr(1), rewriter.getAffineDimExpr(3)},
        getContext());
    SmallVector<Value> inits = {tensor::EmptyOp::create(rewriter, loc, halfShape, elementType),
                                tensor::EmptyOp::create(rewriter, loc, halfShape, elementType)};
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{halfType, halfType},
        ValueRange{first, second, angles.getResult(0), angles.getResult(1)}, inits,
        SmallVector<AffineMap>{identity, identity, perToken, perToken, identity, identity},
        SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
        [&](OpBuilder &b, Location l, ValueRange args) {
          auto widen = [&](Value x) -> Value {
            return x.getType() == compute ? x : arith::ExtFOp::create(b, l, compute, x).getResult();
          };
          auto narrow = [&](Value x) -> Value {
            return elementType == compute ? x : arith::TruncFOp::create(b, l, elementType, x);
          };
          Value cosine = args[2], sine = args[3];
          Value x1 = widen(args[0]), x2 = widen(args[1]);
          Value x1c = arith::MulFOp::create(b, l, x1, cosine);
          Value x2c = arith::MulFOp::create(b, l, x2, cosine);
          Value x1s = arith::MulFOp::create(b, l, x1, sine);
          Value x2s = arith::MulFOp::create(b, l, x2, sine);
          Value out1 = transpose ? arith::AddFOp::create(b, l, x1c, x2s).getResult()
                                 : arith::SubFOp::create(b, l, x1c, x2s).getResult();
          Value out2 = transpose ? arith::SubFOp::create(b, l, x2c, x1s).getResult()
                                 : arith::AddFOp::create(b, l, x2c, x1s).getResult();
          linalg::YieldOp::create(b, l, ValueRange{narrow(out1), narrow(out2)});
        });
    Value result = tensor::InsertSliceOp::create(rewriter, loc, generic.getResult(0), input,
                                                 offsetsAt(0), sizes, strides);
    result = tensor::InsertSliceOp::create(rewriter, loc, generic.getResult(1), result,
                                           offsetsAt(half), sizes, strides);
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// One tensor.insert_slice per kept row into the loop-carried cache: only
/// the chunk's rows are written, in place once bufferized.
struct CacheUpdateLowering : OpConversionPattern<CacheUpdateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(CacheUpdateOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto cacheType = tensorTypeOf(adaptor.getCache());
    auto valuesType = tensorTypeOf(adaptor.getValues());
    int64_t rank = cacheType.getRank();
    auto c = [&](OpBuilder &b, int64_t value) {
      return arith::ConstantIndexOp::create(b, loc, value);
    };
    SmallVector<int64_t> rowShape(valuesType.getShape());
    rowShape[0] = rowShape[1] = 1;
    auto rowType = RankedTensorType::get(rowShape, valuesType.getElementType());
    // Offsets, sizes and strides of row (b, t) of a [batch, rows, ...] tensor.
    auto rowSlice = [&](OpBuilder &b, Value batch, Value row) {
      SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)), sizes,
          strides(rank, b.getIndexAttr(1));
      for (int64_t size : rowShape)
        sizes.push_back(b.getIndexAttr(size));
      offsets[0] = batch;
      offsets[1] = row;
      return std::make_tuple(offsets, sizes, strides);
    };
    auto forRange = [&](OpBuilder &b, int64_t count, Value init,
                        function_ref<Value(OpBuilder &, Value, Value)> body) {
      return scf::ForOp::create(b, loc, c(b, 0), c(b, count), c(b, 1), ValueRange{init},
                                [&](OpBuilder &nb, Location l, Value iv, ValueRange iter) {
                                  scf::YieldOp::create(nb, l, body(nb, iv, iter[0]));
                                })
          .getResult(0);
    };
    Value updated = forRange(
        rewriter, cacheType.getDimSize(0), adaptor.getCache(),
        [&](OpBuilder &b, Value batch, Value cache) {
          Value start = tensor::ExtractOp::create(b, loc, adaptor.getPositions(), batch);
          Value first = arith::IndexCastOp::create(b, loc, b.getIndexType(), start);
          return forRange(
              b, valuesType.getDimSize(1), cache, [&](OpBuilder &nb, Value t, Value current) {
                Value row = arith::AddIOp::create(nb, loc, first, t);
                // Rows before 0 or past the capacity, and masked rows, stay.
                Value write = arith::AndIOp::create(
                    nb, loc,
                    arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::sge, row, c(nb, 0)),
                    arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::slt, row,
                                          c(nb, cacheType.getDimSize(1))));
                if (Value mask = adaptor.getMask())
                  write = arith::AndIOp::create(
                      nb, loc, write,
                      tensor::ExtractOp::create(nb, loc, mask, ValueRange{batch, t}));
                auto branch = scf::IfOp::create(
                    nb, loc, write,
                    [&](OpBuilder &tb, Location l) {
                      auto [offsets, sizes, strides] = rowSlice(tb, batch, t);
                      Value slice = tensor::ExtractSliceOp::create(
                          tb, l, rowType, adaptor.getValues(), offsets, sizes, strides);
                      offsets[1] = row;
                      scf::YieldOp::create(tb, l,
                                           ValueRange{tensor::InsertSliceOp::create(
                                               tb, l, slice, current, offsets, sizes, strides)});
                    },
                    [&](OpBuilder &eb, Location l) { scf::YieldOp::create(eb, l, current); });
                return branch.getResult(0);
              });
        });
    rewriter.replaceOp(op, updated);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

struct PoolLowering : OpConversionPattern<PoolOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PoolOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value input = adaptor.getInput(), mask = adaptor.getMask();
    auto inputType = tensorTypeOf(input);
    auto resultType = op.getType();
    Type elementType = resultType.getElementType();
    int64_t batch = inputType.getDimSize(0), d = inputType.getDimSize(2);
    PoolMode mode = op.getMode();
    if (mode == PoolMode::last) {
      rewriter.replaceOp(op, lastKept(rewriter, loc, input, mask, resultType));
      return success();
    }
    if (mode == PoolMode::cls) {
      auto first = tensor::ExtractSliceOp::create(
          rewriter, loc, RankedTensorType::get({batch, 1, d}, elementType), input,
          ArrayRef<OpFoldResult>{rewriter.getIndexAttr(0), rewriter.getIndexAttr(0),
                                 rewriter.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{rewriter.getIndexAttr(batch), rewriter.getIndexAttr(1),
                                 rewriter.getIndexAttr(d)},
          ArrayRef<OpFoldResult>(SmallVector<OpFoldResult>(3, rewriter.getIndexAttr(1))));
      rewriter.replaceOp(op, reshapeTensor(rewriter, loc, first, resultType));
      return success();
    }

    // Masked tokens contribute 0 to a sum and -inf to a max, as
    // sentence-transformers fills them.
    bool isMax = mode == PoolMode::max;
    MLIRContext *context = rewriter.getContext();
    AffineExpr bDim = getAffineDimExpr(0, context), sDim = getAffineDimExpr(1, context),
               dDim = getAffineDimExpr(2, context);
    SmallVector<AffineMap> maps = {AffineMap::get(3, 0, {bDim, sDim, dDim}, context),
                                   AffineMap::get(3, 0, {bDim, sDim}, context),
                                   AffineMap::get(3, 0, {bDim, dDim}, context)};
    SmallVector<utils::IteratorType> iterators = {utils::IteratorType::parallel,
                                                  utils::IteratorType::reduction,
                                                  utils::IteratorType::parallel};
    Value init = filledTensor(rewriter, loc, resultType,
                              isMax ? -std::numeric_limits<double>::infinity() : 0.0);
    Value pooled =
        linalg::GenericOp::create(
            rewriter, loc, resultType, ValueRange{input, mask}, init, maps, iterators,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value masked = floatConstant(b, l, elementType,
                                           isMax ? -std::numeric_limits<double>::infinity() : 0.0);
              Value value = arith::SelectOp::create(b, l, args[1], args[0], masked);
              Value combined = isMax ? arith::MaximumFOp::create(b, l, value, args[2]).getResult()
                                     : arith::AddFOp::create(b, l, value, args[2]).getResult();
              linalg::YieldOp::create(b, l, combined);
            })
            .getResult(0);
    if (isMax) {
      rewriter.replaceOp(op, pooled);
      return success();
    }
    // sum / max(count, 1e-9), or / sqrt of that for mean_sqrt_len.
    Value ones = broadcastGeneric(
        rewriter, loc, RankedTensorType::get({batch, inputType.getDimSize(1)}, elementType), mask,
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          return arith::SelectOp::create(b, l, args[0], floatConstant(b, l, elementType, 1.0),
                                         floatConstant(b, l, elementType, 0.0));
        });
    Value counts = reduceAxis(rewriter, loc, ones, 1, 0.0,
                              [](OpBuilder &b, Location l, ValueRange args) -> Value {
                                return arith::AddFOp::create(b, l, args[0], args[1]);
                              });
    Value divisors = broadcastGeneric(rewriter, loc, tensorTypeOf(counts), counts,
                                      [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                                        Value count = arith::MaximumFOp::create(
                                            b, l, args[0], floatConstant(b, l, elementType, 1e-9));
                                        return mode == PoolMode::mean_sqrt_len
                                                   ? math::SqrtOp::create(b, l, count).getResult()
                                                   : count;
                                      });
    rewriter.replaceOp(op, broadcastGeneric(rewriter, loc, resultType,
                                            ValueRange{pooled, asColumn(rewriter, loc, divisors)},
                                            [](OpBuilder &b, Location l, ValueRange args) {
                                              return arith::DivFOp::create(b, l, args[0], args[1]);
                                            }));
    return success();
  }

  /// Row b of the result is input[b, s] for the largest s that mask[b]
  /// keeps (0 if none).
  static Value lastKept(OpBuilder &b, Location loc, Value input, Value mask,
                        RankedTensorType resultType) {
    auto maskType = tensorTypeOf(mask);
    auto indexType = RankedTensorType::get({maskType.getDimSize(0)}, b.getIndexType());
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value empty = tensor::EmptyOp::create(b, loc, indexType.getShape(), b.getIndexType());
    Value init = linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{empty}).getResult(0);
    MLIRContext *context = b.getContext();
    AffineExpr row = getAffineDimExpr(0, context), token = getAffineDimExpr(1, context);
    Value last = linalg::GenericOp::create(
                     b, loc, indexType, ValueRange{mask}, init,
                     ArrayRef<AffineMap>{AffineMap::get(2, 0, {row, token}, context),
                                         AffineMap::get(2, 0, {row}, context)},
                     ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                                   utils::IteratorType::reduction},
                     [&](OpBuilder &nb, Location l, ValueRange args) {
                       Value index = linalg::IndexOp::create(nb, l, 1);
                       Value kept = arith::SelectOp::create(nb, l, args[0], index, args[1]);
                       linalg::YieldOp::create(
                           nb, l, ValueRange{arith::MaxUIOp::create(nb, l, kept, args[1])});
                     })
                     .getResult(0);
    return broadcastGeneric(
        b, loc, resultType, ValueRange{}, [&](OpBuilder &nb, Location l, ValueRange) -> Value {
          Value batch = linalg::IndexOp::create(nb, l, 0);
          Value token = tensor::ExtractOp::create(nb, l, last, batch);
          return tensor::ExtractOp::create(
              nb, l, input, ValueRange{batch, token, linalg::IndexOp::create(nb, l, 1)});
        });
  }
};

struct L2NormalizeLowering : OpConversionPattern<L2NormalizeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(L2NormalizeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    Type elementType = type.getElementType();
    Value rows = asRows(rewriter, loc, adaptor.getInput());
    Value squares = broadcastGeneric(rewriter, loc, tensorTypeOf(rows), rows,
                                     [](OpBuilder &b, Location l, ValueRange args) -> Value {
                                       return arith::MulFOp::create(b, l, args[0], args[0]);
                                     });
    Value sums = reduceAxis(rewriter, loc, squares, 1, 0.0,
                            [](OpBuilder &b, Location l, ValueRange args) -> Value {
                              return arith::AddFOp::create(b, l, args[0], args[1]);
                            });
    double epsilon = op.getEpsilon().convertToDouble();
    Value normalized = broadcastGeneric(
        rewriter, loc, tensorTypeOf(rows), ValueRange{rows, asColumn(rewriter, loc, sums)},
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value norm = math::SqrtOp::create(b, l, args[1]);
          Value divisor =
              arith::MaximumFOp::create(b, l, norm, floatConstant(b, l, elementType, epsilon));
          return arith::DivFOp::create(b, l, args[0], divisor);
        });
    rewriter.replaceOp(op, reshapeTensor(rewriter, loc, normalized, type));
    return success();
  }
};

struct RmsNormLowering : OpConversionPattern<RmsNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RmsNormOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value rows = asRows(rewriter, loc, adaptor.getInput());
    auto rowsType = tensorTypeOf(rows);
    Type elementType = rowsType.getElementType();
    // Statistics in f32 (f64 for f64 values).
    Type statistics =
        elementType.getIntOrFloatBitWidth() > 32 ? elementType : rewriter.getF32Type();
    auto widen = [&](OpBuilder &b, Location l, Value x) -> Value {
      return x.getType() == statistics ? x : arith::ExtFOp::create(b, l, statistics, x).getResult();
    };
    Value squares =
        broadcastGeneric(rewriter, loc, RankedTensorType::get(rowsType.getShape(), statistics),
                         rows, [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                           Value x = widen(b, l, args[0]);
                           return arith::MulFOp::create(b, l, x, x);
                         });
    Value sums = reduceAxis(rewriter, loc, squares, 1, 0.0,
                            [](OpBuilder &b, Location l, ValueRange args) -> Value {
                              return arith::AddFOp::create(b, l, args[0], args[1]);
                            });
    double width = static_cast<double>(rowsType.getShape().back());
    double epsilon = op.getEpsilon().convertToDouble();
    Value normed = broadcastGeneric(
        rewriter, loc, rowsType,
        ValueRange{rows, asColumn(rewriter, loc, sums), adaptor.getGamma()},
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          // transformers: gamma * (x * rsqrt(mean(x^2) + eps)), rounded to
          // gamma's type before the product.
          Value mean = arith::DivFOp::create(b, l, args[1], floatConstant(b, l, statistics, width));
          Value rstd = math::RsqrtOp::create(
              b, l, arith::AddFOp::create(b, l, mean, floatConstant(b, l, statistics, epsilon)));
          Value scaled = arith::MulFOp::create(b, l, widen(b, l, args[0]), rstd);
          if (elementType != statistics)
            scaled = arith::TruncFOp::create(b, l, elementType, scaled);
          return arith::MulFOp::create(b, l, args[2], scaled);
        });
    rewriter.replaceOp(op, reshapeTensor(rewriter, loc, normed, op.getType()));
    return success();
  }
};

struct DequantizeLowering : OpConversionPattern<DequantizeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(DequantizeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = op.getType();
    // int8 values map onto the result; 4-bit ones are read two a byte.
    bool int8 = op.getBits() == 8;
    SmallVector<Value> inputs;
    if (int8)
      inputs.push_back(adaptor.getValues());
    rewriter.replaceOp(op, broadcastGeneric(rewriter, op.getLoc(), type, inputs,
                                            [&](OpBuilder &b, Location l, ValueRange args) {
                                              return dequantizedElement(
                                                  b, l, op, adaptor.getValues(),
                                                  adaptor.getScales(), adaptor.getMins(),
                                                  linalg::IndexOp::create(b, l, 0),
                                                  linalg::IndexOp::create(b, l, 1),
                                                  type.getElementType(), int8 ? args[0] : Value());
                                            }));
    return success();
  }
};

struct RelativePositionBiasLowering : OpConversionPattern<RelativePositionBiasOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(RelativePositionBiasOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    Value table = adaptor.getTable();
    Value queryOffset = adaptor.getQueryOffset();
    bool bidirectional = op.getBidirectional();
    int64_t perDirection = tensorTypeOf(table).getDimSize(0) / (bidirectional ? 2 : 1);
    int64_t maxDistance = op.getMaxDistance();
    // The bucket of each distance in [0, max_distance], fixed at compile
    // time so that the logarithms are transformers' float32 ones.
    SmallVector<int32_t> buckets =
        RelativePositionBiasOp::distanceBuckets(perDirection, maxDistance);
    auto bucketsType =
        RankedTensorType::get({static_cast<int64_t>(buckets.size())}, rewriter.getI32Type());
    Value bucketTable = arith::ConstantOp::create(
        rewriter, loc, DenseElementsAttr::get(bucketsType, ArrayRef<int32_t>(buckets)));
    int64_t seqQ = op.getNumQueries();
    int64_t bottomRight = op.getNumKeys() - seqQ;
    bool band = type.getRank() == 3;
    rewriter.replaceOp(
        op, broadcastGeneric(
                rewriter, loc, type, {}, [&](OpBuilder &b, Location l, ValueRange) -> Value {
                  auto index = [&](int64_t value) -> Value {
                    return arith::ConstantIndexOp::create(b, l, value);
                  };
                  Value head = linalg::IndexOp::create(b, l, 1);
                  // Key index minus query index: the diagonal of a band entry.
                  Value keyMinusQuery =
                      band ? arith::SubIOp::create(b, l, linalg::IndexOp::create(b, l, 2),
                                                   index(seqQ - 1))
                           : arith::SubIOp::create(b, l, linalg::IndexOp::create(b, l, 3),
                                                   linalg::IndexOp::create(b, l, 2));
                  Value offset = index(bottomRight);
                  if (queryOffset)
                    offset = arith::IndexCastOp::create(
                        b, l, b.getIndexType(),
                        tensor::ExtractOp::create(b, l, queryOffset,
                                                  ValueRange{linalg::IndexOp::create(b, l, 0)}));
                  // Key position minus query position.
                  Value relative = arith::SubIOp::create(b, l, keyMinusQuery, offset);
                  Value before = arith::SubIOp::create(b, l, index(0), relative);
                  Value distance, base = index(0);
                  if (bidirectional) {
                    Value after =
                        arith::CmpIOp::create(b, l, arith::CmpIPredicate::sgt, relative, index(0));
                    distance = arith::SelectOp::create(b, l, after, relative, before);
                    base = arith::SelectOp::create(b, l, after, index(perDirection), base);
                  } else {
                    distance = arith::MaxSIOp::create(b, l, before, index(0));
                  }
                  distance = arith::MinSIOp::create(b, l, distance, index(maxDistance));
                  Value bucket = arith::AddIOp::create(
                      b, l, base,
                      arith::IndexCastOp::create(
                          b, l, b.getIndexType(),
                          tensor::ExtractOp::create(b, l, bucketTable, ValueRange{distance})));
                  return tensor::ExtractOp::create(b, l, table, ValueRange{bucket, head});
                }));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

/// Logits and targets of a cross-entropy as [rows, vocab] and [rows], with
/// each row's max and sum of exp(logit - max).
struct CrossEntropyRows {
  CrossEntropyRows(OpBuilder &b, Location loc, Value logitsTensor, Value targetsTensor) {
    auto logitsType = tensorTypeOf(logitsTensor);
    elementType = logitsType.getElementType();
    vocab = logitsType.getShape().back();
    rows = logitsType.getNumElements() / vocab;
    logits = reshapeTensor(b, loc, logitsTensor, RankedTensorType::get({rows, vocab}, elementType));
    targets = reshapeTensor(
        b, loc, targetsTensor,
        RankedTensorType::get({rows}, tensorTypeOf(targetsTensor).getElementType()));
    max = reduceAxis(b, loc, logits, 1, -std::numeric_limits<double>::infinity(),
                     [](OpBuilder &nb, Location l, ValueRange args) -> Value {
                       return arith::MaximumFOp::create(nb, l, args[0], args[1]);
                     });
    Value exps = broadcastGeneric(b, loc, tensorTypeOf(logits), ValueRange{logits, asColumn(b, loc, max)},
                                  [](OpBuilder &nb, Location l, ValueRange args) -> Value {
                                    return math::ExpOp::create(
                                        nb, l, arith::SubFOp::create(nb, l, args[0], args[1]));
                                  });
    sumExp = reduceAxis(b, loc, exps, 1, 0.0, add);
  }

  static Value add(OpBuilder &b, Location l, ValueRange args) {
    return arith::AddFOp::create(b, l, args[0], args[1]);
  }

  /// Whether `target` (a scalar) counts, i.e. is not `ignoreIndex`.
  static Value counts(OpBuilder &b, Location l, Value target, int64_t ignoreIndex) {
    Value ignore = arith::ConstantOp::create(b, l, b.getIntegerAttr(target.getType(), ignoreIndex));
    return arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne, target, ignore);
  }

  /// max(number of counted rows, 1), rank 0: all-ignored batches give 0, not NaN.
  Value countedRows(OpBuilder &b, Location loc, int64_t ignoreIndex) {
    Value perRow = broadcastGeneric(
        b, loc, RankedTensorType::get({rows}, elementType), targets,
        [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
          return arith::SelectOp::create(nb, l, counts(nb, l, args[0], ignoreIndex),
                                         floatConstant(nb, l, elementType, 1.0),
                                         floatConstant(nb, l, elementType, 0.0));
        });
    Value count = reduceAxis(b, loc, perRow, 0, 0.0, add);
    return broadcastGeneric(b, loc, tensorTypeOf(count), count,
                            [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
                              return arith::MaximumFOp::create(
                                  nb, l, args[0], floatConstant(nb, l, elementType, 1.0));
                            });
  }

  Type elementType;
  int64_t vocab, rows;
  Value logits, targets, max, sumExp;
};

/// Mean over non-ignored rows of logsumexp(row) - row[target].
struct CrossEntropyLowering : OpConversionPattern<CrossEntropyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(CrossEntropyOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    CrossEntropyRows ce(rewriter, loc, adaptor.getLogits(), adaptor.getTargets());
    Type elementType = ce.elementType;
    int64_t ignoreIndex = static_cast<int64_t>(op.getIgnoreIndex());
    Value perRow = broadcastGeneric(
        rewriter, loc, RankedTensorType::get({ce.rows}, elementType),
        ValueRange{ce.targets, ce.max, ce.sumExp},
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value target = args[0];
          Value counted = CrossEntropyRows::counts(b, l, target, ignoreIndex);
          // Ignored rows may carry any id: clamp the gather index to 0.
          Value safe = arith::SelectOp::create(
              b, l, counted, target,
              arith::ConstantOp::create(b, l, b.getIntegerAttr(target.getType(), 0)));
          Value row = linalg::IndexOp::create(b, l, 0);
          Value col = arith::IndexCastOp::create(b, l, b.getIndexType(), safe);
          Value picked = tensor::ExtractOp::create(b, l, ce.logits, ValueRange{row, col});
          Value lse = arith::AddFOp::create(b, l, math::LogOp::create(b, l, args[2]), args[1]);
          Value loss = arith::SubFOp::create(b, l, lse, picked);
          return arith::SelectOp::create(b, l, counted, loss,
                                         floatConstant(b, l, elementType, 0.0));
        });
    Value total = reduceAxis(rewriter, loc, perRow, 0, 0.0, CrossEntropyRows::add);
    Value count = ce.countedRows(rewriter, loc, ignoreIndex);
    rewriter.replaceOp(op, broadcastGeneric(rewriter, loc, op.getType(), ValueRange{total, count},
                                            [](OpBuilder &b, Location l, ValueRange args) -> Value {
                                              return arith::DivFOp::create(b, l, args[0], args[1]);
                                            }));
    return success();
  }
};

/// grad / count * (softmax(row) - onehot(target)) on counted rows, else 0.
struct CrossEntropyBackwardLowering : OpConversionPattern<CrossEntropyBackwardOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(CrossEntropyBackwardOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    CrossEntropyRows ce(rewriter, loc, adaptor.getLogits(), adaptor.getTargets());
    Type elementType = ce.elementType;
    int64_t ignoreIndex = static_cast<int64_t>(op.getIgnoreIndex());
    Value count = ce.countedRows(rewriter, loc, ignoreIndex);
    Value weight = broadcastGeneric(rewriter, loc, tensorTypeOf(count),
                                    ValueRange{adaptor.getGrad(), count},
                                    [](OpBuilder &b, Location l, ValueRange args) -> Value {
                                      return arith::DivFOp::create(b, l, args[0], args[1]);
                                    });
    Value grad = broadcastGeneric(
        rewriter, loc, tensorTypeOf(ce.logits),
        ValueRange{ce.logits, asColumn(rewriter, loc, ce.targets), asColumn(rewriter, loc, ce.max),
                   asColumn(rewriter, loc, ce.sumExp), weight},
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value target = args[1];
          Value prob = arith::DivFOp::create(
              b, l, math::ExpOp::create(b, l, arith::SubFOp::create(b, l, args[0], args[2])),
              args[3]);
          Value col = arith::IndexCastOp::create(b, l, target.getType(),
                                                 linalg::IndexOp::create(b, l, 1));
          Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, col, target);
          Value zero = floatConstant(b, l, elementType, 0.0);
          Value onehot = arith::SelectOp::create(b, l, hit, floatConstant(b, l, elementType, 1.0),
                                                 zero);
          Value value =
              arith::MulFOp::create(b, l, arith::SubFOp::create(b, l, prob, onehot), args[4]);
          return arith::SelectOp::create(b, l, CrossEntropyRows::counts(b, l, target, ignoreIndex),
                                         value, zero);
        });
    rewriter.replaceOp(op, reshapeTensor(rewriter, loc, grad, op.getType()));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct ConvertXfmrToLinalgPass
    : xfmr::impl::ConvertXfmrToLinalgBase<ConvertXfmrToLinalgPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    MLIRContext *context = &getContext();
    ConversionTarget target(*context);
    target.addIllegalDialect<XfmrDialect>();
    // Bufferizes itself, in place (a call of the runtime).
    target.addLegalOp<AllReduceOp, AllReduceStartOp, AllReduceWaitOp>();
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect, math::MathDialect,
                           scf::SCFDialect, tensor::TensorDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });

    RewritePatternSet patterns(context);
    populateDecompositionPatterns(patterns);
    patterns
        .add<BinaryLowering<AddOp, arith::AddFOp>, BinaryLowering<SubOp, arith::SubFOp>,
             BinaryLowering<MulOp, arith::MulFOp>, BinaryLowering<DivOp, arith::DivFOp>,
             BinaryLowering<MaximumOp, arith::MaximumFOp>, SelectLowering, ActivationLowering,
             DropoutLowering, PoolLowering, L2NormalizeLowering, RmsNormLowering,
             RelativePositionBiasLowering, DequantizeLowering, TransposeLowering, ReshapeLowering,
             ReduceLowering, MatmulLowering, CausalMaskLowering, EmbeddingLowering,
             SinusoidalPositionLowering, LearnedPositionLowering, RotaryEmbeddingLowering,
             CrossEntropyLowering, CrossEntropyBackwardLowering, CacheUpdateLowering>(context);
    populateFusedKernelLoweringPatterns(patterns);
    populateBackwardLoweringPatterns(patterns);
    populateTrainingLoweringPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
