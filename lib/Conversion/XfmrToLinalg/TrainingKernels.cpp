//===- TrainingKernels.cpp - lowering of the xfmr training ops --*- C++ -*-===//
//
// The learning-rate schedule, the clipping factor and dynamic loss scaling
// are scalar arithmetic on values extracted from rank-0 tensors; each
// optimizer update is one elementwise linalg.generic over the parameter and
// its state, reading the scalars from above.
//
//===----------------------------------------------------------------------===//

#include "LinalgLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::lowering;

namespace {

/// Scalar arithmetic in one float type.
class ScalarMath {
public:
  ScalarMath(OpBuilder &b, Location loc, Type type) : b(b), loc(loc), type(type) {}

  Value constant(double value) { return floatConstant(b, loc, type, value); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return arith::MinimumFOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return arith::MaximumFOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return math::SqrtOp::create(b, loc, x); }
  /// Whether a norm (never negative) is finite: false for +inf and NaN.
  Value isFiniteNorm(Value norm) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, norm, constant(INFINITY));
  }
  /// `value` (of another float type) converted to this type.
  Value convert(Value value) {
    unsigned from = value.getType().getIntOrFloatBitWidth(), to = type.getIntOrFloatBitWidth();
    if (from == to)
      return value;
    if (from < to)
      return arith::ExtFOp::create(b, loc, type, value);
    return arith::TruncFOp::create(b, loc, type, value);
  }
  /// The 0-based step of a rank-0 i64 tensor, as a float.
  Value step(Value stepTensor) {
    Value step = tensor::ExtractOp::create(b, loc, stepTensor, ValueRange{});
    return arith::SIToFPOp::create(b, loc, type, step);
  }

private:
  OpBuilder &b;
  Location loc;
  Type type;
};

Value scalarOf(OpBuilder &b, Location loc, Value rank0) {
  return tensor::ExtractOp::create(b, loc, rank0, ValueRange{});
}

Value rank0Tensor(OpBuilder &b, Location loc, Value scalar) {
  return tensor::FromElementsOp::create(b, loc, RankedTensorType::get({}, scalar.getType()),
                                        scalar);
}

/// What an optimizer update does with the step's gradient: multiply it by
/// `factor` (clipping and unscaling), and with a loss scale, keep the old
/// values unless `applies` (the scaled gradients are finite).
struct GradientTreatment {
  Value factor;
  Value applies; // i1, or null: always
};

/// min(1, max_grad_norm / (norm + 1e-6)) (or 1 without a norm or a
/// max_grad_norm), with `norm` the gradients' global norm; with a loss
/// scale, both the gradients and their norm divided by it first.
GradientTreatment treatGradient(ScalarMath &math, OpBuilder &b, Location loc, Value gradNorm,
                                Value lossScale, double maxGradNorm) {
  GradientTreatment treatment{math.constant(1.0), Value()};
  if (!gradNorm)
    return treatment;
  Value norm = scalarOf(b, loc, gradNorm);
  if (lossScale) {
    Value unscale = math.div(math.constant(1.0), scalarOf(b, loc, lossScale));
    treatment.applies = math.isFiniteNorm(norm);
    treatment.factor = unscale;
    norm = math.mul(norm, unscale);
  }
  if (maxGradNorm > 0)
    treatment.factor =
        math.mul(treatment.factor,
                 math.min(math.constant(1.0), math.div(math.constant(maxGradNorm),
                                                       math.add(norm, math.constant(1e-6)))));
  return treatment;
}

/// `updated`, or where the step is skipped, `old`.
SmallVector<Value> unlessSkipped(OpBuilder &b, Location loc, const GradientTreatment &treatment,
                                 ValueRange updated, ValueRange old) {
  if (!treatment.applies)
    return updated;
  SmallVector<Value> results;
  for (auto [now, before] : llvm::zip_equal(updated, old))
    results.push_back(arith::SelectOp::create(b, loc, treatment.applies, now, before));
  return results;
}

/// An all-parallel generic over `type` that reads `inputs` and overwrites
/// `updated` (its outputs, so that bufferization updates their buffers in
/// place: a training step's weights and moments are computed in the
/// caller's buffers, not in temporaries copied there); `body` gets the
/// input and the current updated scalars and returns the new ones.
SmallVector<Value>
updateInPlace(OpBuilder &b, Location loc, RankedTensorType type, ValueRange inputs,
              ValueRange updated,
              function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body) {
  int64_t rank = type.getRank();
  SmallVector<AffineMap> maps(inputs.size() + updated.size(),
                              AffineMap::getMultiDimIdentityMap(rank, b.getContext()));
  auto generic = linalg::GenericOp::create(
      b, loc, SmallVector<Type>(updated.size(), type), inputs, updated, maps,
      SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args));
      });
  return generic.getResults();
}

struct LearningRateLowering : OpConversionPattern<LearningRateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LearningRateOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    // In f64, converted once at the end.
    ScalarMath math(rewriter, loc, rewriter.getF64Type());
    Value step = math.step(adaptor.getStep());
    double peak = op.getPeak().convertToDouble(), minRatio = op.getMinRatio().convertToDouble();
    double warmup = static_cast<double>(op.getWarmupSteps());
    double decay = static_cast<double>(op.getDecaySteps());
    Value lr = math.constant(peak);
    if (decay > 0) {
      Value progress = math.div(math.sub(step, math.constant(warmup)),
                                math.constant(decay - warmup));
      progress = math.min(math.max(progress, math.constant(0.0)), math.constant(1.0));
      Value cosine = math::CosOp::create(rewriter, loc, math.mul(progress, math.constant(M_PI)));
      Value shape = math.mul(math.constant(0.5), math.add(math.constant(1.0), cosine));
      lr = math.mul(math.constant(peak),
                    math.add(math.constant(minRatio), math.mul(math.constant(1 - minRatio), shape)));
    }
    if (warmup > 0) {
      Value warming = math.mul(math.constant(peak),
                               math.div(math.add(step, math.constant(1.0)), math.constant(warmup)));
      Value inWarmup = arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::OLT, step,
                                             math.constant(warmup));
      lr = arith::SelectOp::create(rewriter, loc, inWarmup, warming, lr);
    }
    ScalarMath result(rewriter, loc, op.getType().getElementType());
    rewriter.replaceOp(op, rank0Tensor(rewriter, loc, result.convert(lr)));
    return success();
  }
};

/// Sums of squares per tensor in f64, added up; the square root in the
/// result type.
struct GlobalNormLowering : OpConversionPattern<GlobalNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GlobalNormOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    Type f64 = rewriter.getF64Type();
    ScalarMath math(rewriter, loc, f64);
    auto accType = RankedTensorType::get({}, f64);
    Value total = math.constant(0.0);
    for (Value input : adaptor.getInputs()) {
      auto type = tensorTypeOf(input);
      Value flat = reshapeTensor(rewriter, loc, input,
                                 RankedTensorType::get({type.getNumElements()},
                                                       type.getElementType()));
      SmallVector<AffineMap> maps = {AffineMap::getMultiDimIdentityMap(1, context),
                                     AffineMap::get(1, 0, {}, context)};
      Value squares =
          linalg::GenericOp::create(
              rewriter, loc, accType, flat, filledTensor(rewriter, loc, accType, 0.0), maps,
              ArrayRef<utils::IteratorType>{utils::IteratorType::reduction},
              [&](OpBuilder &b, Location l, ValueRange args) {
                Value x = arith::ExtFOp::create(b, l, f64, args[0]);
                Value square = arith::MulFOp::create(b, l, x, x);
                linalg::YieldOp::create(b, l,
                                        arith::AddFOp::create(b, l, args[1], square).getResult());
              })
              .getResult(0);
      total = math.add(total, scalarOf(rewriter, loc, squares));
    }
    ScalarMath result(rewriter, loc, op.getType().getElementType());
    rewriter.replaceOp(op, rank0Tensor(rewriter, loc, result.convert(math.sqrt(total))));
    return success();
  }
};

/// initial * 2^exponent.
struct LossScaleLowering : OpConversionPattern<LossScaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LossScaleOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarMath math(rewriter, loc, op.getType().getElementType());
    Value power =
        math::Exp2Op::create(rewriter, loc, scalarOf(rewriter, loc, adaptor.getExponent()));
    Value scale = math.mul(math.constant(op.getInitial().convertToDouble()), power);
    rewriter.replaceOp(op, rank0Tensor(rewriter, loc, scale));
    return success();
  }
};

struct LossScaleUpdateLowering : OpConversionPattern<LossScaleUpdateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(LossScaleUpdateOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ScalarMath math(rewriter, loc, tensorTypeOf(op.getExponent()).getElementType());
    Value exponent = scalarOf(rewriter, loc, adaptor.getExponent());
    Value good = math.add(scalarOf(rewriter, loc, adaptor.getGoodSteps()), math.constant(1.0));
    Value norm = scalarOf(rewriter, loc, adaptor.getGradNorm());
    Value finite = ScalarMath(rewriter, loc, norm.getType()).isFiniteNorm(norm);
    Value grows = arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::OGE, good,
                                        math.constant(static_cast<double>(op.getGrowthInterval())));
    auto select = [&](Value condition, Value ifTrue, Value ifFalse) -> Value {
      return arith::SelectOp::create(rewriter, loc, condition, ifTrue, ifFalse);
    };
    Value zero = math.constant(0.0);
    Value finiteExponent = select(grows, math.add(exponent, math.constant(1.0)), exponent);
    Value newExponent = select(finite, finiteExponent, math.sub(exponent, math.constant(1.0)));
    Value newGood = select(finite, select(grows, zero, good), zero);
    rewriter.replaceOp(
        op, {rank0Tensor(rewriter, loc, newExponent), rank0Tensor(rewriter, loc, newGood)});
    return success();
  }
};

struct AdamWUpdateLowering : OpConversionPattern<AdamWUpdateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AdamWUpdateOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = tensorTypeOf(op.getParam());
    Type elementType = type.getElementType();
    double beta1 = op.getBeta1().convertToDouble(), beta2 = op.getBeta2().convertToDouble();
    double epsilon = op.getEpsilon().convertToDouble();
    double weightDecay = op.getWeightDecay().convertToDouble();

    // Per-step scalars, in f64: bias corrections of t = step + 1.
    ScalarMath wide(rewriter, loc, rewriter.getF64Type());
    Value t = wide.add(wide.step(adaptor.getStep()), wide.constant(1.0));
    auto correction = [&](double beta) {
      Value power = math::PowFOp::create(rewriter, loc, wide.constant(beta), t);
      return wide.sub(wide.constant(1.0), power);
    };
    Value lr = wide.convert(scalarOf(rewriter, loc, adaptor.getLr()));
    ScalarMath math(rewriter, loc, elementType);
    Value stepSize = math.convert(wide.div(lr, correction(beta1)));
    Value secondScale = math.convert(wide.sqrt(correction(beta2)));
    Value decay = math.convert(wide.sub(wide.constant(1.0), wide.mul(lr, wide.constant(weightDecay))));
    GradientTreatment treatment =
        treatGradient(math, rewriter, loc, adaptor.getGradNorm(), adaptor.getLossScale(),
                      op.getMaxGradNorm().convertToDouble());

    SmallVector<Value> results = updateInPlace(
        rewriter, loc, type, adaptor.getGrad(),
        ValueRange{adaptor.getParam(), adaptor.getExpAvg(), adaptor.getExpAvgSq()},
        [&](OpBuilder &b, Location l, ValueRange args) -> SmallVector<Value> {
          ScalarMath m(b, l, elementType);
          Value param = args[1], oldAvg = args[2], oldAvgSq = args[3];
          Value g = m.mul(args[0], treatment.factor);
          Value avg = m.add(m.mul(m.constant(beta1), oldAvg), m.mul(m.constant(1 - beta1), g));
          Value avgSq =
              m.add(m.mul(m.constant(beta2), oldAvgSq), m.mul(m.constant(1 - beta2), m.mul(g, g)));
          Value denominator = m.add(m.div(m.sqrt(avgSq), secondScale), m.constant(epsilon));
          Value p = m.sub(m.mul(param, decay), m.mul(stepSize, m.div(avg, denominator)));
          return unlessSkipped(b, l, treatment, {p, avg, avgSq}, {param, oldAvg, oldAvgSq});
        });
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct SgdUpdateLowering : OpConversionPattern<SgdUpdateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SgdUpdateOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = tensorTypeOf(op.getParam());
    Type elementType = type.getElementType();
    double momentum = op.getMomentum().convertToDouble();
    double weightDecay = op.getWeightDecay().convertToDouble();
    ScalarMath math(rewriter, loc, elementType);
    Value lr = scalarOf(rewriter, loc, adaptor.getLr());
    GradientTreatment treatment =
        treatGradient(math, rewriter, loc, adaptor.getGradNorm(), adaptor.getLossScale(),
                      op.getMaxGradNorm().convertToDouble());
    SmallVector<Value> results = updateInPlace(
        rewriter, loc, type, adaptor.getGrad(),
        ValueRange{adaptor.getParam(), adaptor.getMomentumBuffer()},
        [&](OpBuilder &b, Location l, ValueRange args) -> SmallVector<Value> {
          ScalarMath m(b, l, elementType);
          Value param = args[1], oldBuffer = args[2];
          Value g = m.add(m.mul(args[0], treatment.factor), m.mul(m.constant(weightDecay), param));
          Value buffer = m.add(m.mul(m.constant(momentum), oldBuffer), g);
          return unlessSkipped(b, l, treatment, {m.sub(param, m.mul(lr, buffer)), buffer},
                               {param, oldBuffer});
        });
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void lowering::populateTrainingLoweringPatterns(RewritePatternSet &patterns) {
  patterns.add<LearningRateLowering, GlobalNormLowering, LossScaleLowering, LossScaleUpdateLowering,
               AdamWUpdateLowering, SgdUpdateLowering>(patterns.getContext());
}
