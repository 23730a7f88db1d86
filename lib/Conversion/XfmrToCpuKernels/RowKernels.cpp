//===- RowKernels.cpp - softmax and layer norm, one row at a time -*- C++ -*-===//
//
// Rows are independent: threads take chunks of rows, and within a row the
// vector lanes keep separate partial statistics that are combined once at the
// end of the row, so each statistic is a single sweep over the row.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;

namespace {

/// Rows per parallel chunk: enough work per chunk to amortise scheduling,
/// enough chunks to balance two threads.
int64_t rowsPerChunk(int64_t rows, int64_t width) {
  int64_t byWork = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, width));
  return std::max<int64_t>(1, std::min(byWork, (rows + 7) / 8));
}

/// Calls body(column, valid) for the vectors covering [0, width).
void forEachVector(VectorBuilder &kb, int64_t width, function_ref<void(Value, int64_t)> body) {
  int64_t lanes = kb.cpu().lanes;
  int64_t full = width / lanes * lanes;
  if (full > 0)
    kb.forLoop(kb.index(0), kb.index(full), lanes, [&](Value c) { body(c, lanes); });
  if (width % lanes)
    body(kb.index(full), width % lanes);
}

/// The sums over a row of `width` of the vectors `terms(c, valid)` gives for
/// the columns [c, c + valid) (zero in the lanes past `valid`): one running
/// vector per term, added up across lanes at the end.
SmallVector<Value> sumRow(VectorBuilder &kb, int64_t width, int64_t count,
                          function_ref<SmallVector<Value>(Value, int64_t)> terms) {
  int64_t lanes = kb.cpu().lanes;
  int64_t full = width / lanes * lanes;
  auto addTerms = [&](ValueRange sums, Value c, int64_t valid) {
    return llvm::map_to_vector(llvm::zip_equal(sums, terms(c, valid)), [&](auto pair) {
      return kb.add(std::get<0>(pair), std::get<1>(pair));
    });
  };
  SmallVector<Value> sums(count, kb.splat(0.0));
  if (full > 0)
    sums = llvm::to_vector(
        kb.forLoop(kb.index(0), kb.index(full), lanes, sums,
                   [&](Value c, ValueRange carried) { return addTerms(carried, c, lanes); }));
  if (width % lanes)
    sums = addTerms(sums, kb.index(full), width % lanes);
  return llvm::map_to_vector(sums, [&](Value sum) { return kb.reduceAdd(sum); });
}

/// Calls body(c, valid) for the vectors covering [0, width), in parallel.
void forEachVectorInParallel(VectorBuilder &kb, int64_t width,
                             function_ref<void(Value, int64_t)> body) {
  int64_t lanes = kb.cpu().lanes;
  int64_t vectors = (width + lanes - 1) / lanes, tail = width - (vectors - 1) * lanes;
  kb.parallelFor(vectors, [&](Value vector) {
    Value c = kb.muli(vector, lanes);
    if (tail == lanes)
      return body(c, lanes);
    kb.ifThenElse(
        kb.below(vector, vectors - 1), [&] { body(c, lanes); }, [&] { body(c, tail); });
  });
}

/// The max of row `row` of `in` [rows, width] and the sum of e^(x - max)
/// over it, in one sweep: per lane a running max and sum (the sum rescaled
/// as the max grows), the lanes combined at the end.
std::pair<Value, Value> rowMaxAndExpSum(VectorBuilder &kb, Value in, Value row, int64_t width) {
  int64_t lanes = kb.cpu().lanes;
  Value max = kb.splat(kNegInf), sum = kb.splat(0.0);
  int64_t full = width / lanes * lanes;
  auto update = [&](Value value, Value m, Value s) -> std::pair<Value, Value> {
    Value next = kb.max(m, value);
    Value rescaled = kb.mul(s, kb.expShifted(m, next));
    return {next, kb.add(rescaled, kb.expShifted(value, next))};
  };
  if (full > 0) {
    ValueRange state =
        kb.forLoop(kb.index(0), kb.index(full), lanes, {max, sum},
                   [&](Value c, ValueRange carried) -> SmallVector<Value> {
                     auto [m, s] = update(kb.loadVector(in, {row, c}), carried[0], carried[1]);
                     return {m, s};
                   });
    max = state[0];
    sum = state[1];
  }
  if (width % lanes)
    std::tie(max, sum) =
        update(kb.loadVector(in, {row, kb.index(full)}, width % lanes, kNegInf), max, sum);
  Value rowMax = kb.reduceMax(max);
  return {rowMax, kb.reduceAdd(kb.mul(sum, kb.expShifted(max, kb.splat(rowMax))))};
}

/// Whether each target of `targets` [rows] counts (is not `ignoreIndex`),
/// and the target as an index (0 where it does not count).
std::pair<Value, Value> countedTarget(VectorBuilder &kb, Value targets, Value row,
                                      int64_t ignoreIndex) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  Value target = kb.load(targets, {row});
  Type type = target.getType();
  Value counted =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, target,
                            arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, ignoreIndex)));
  Value safe =
      kb.select(counted, target, arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, 0)));
  return {counted, arith::IndexCastOp::create(b, loc, b.getIndexType(), safe)};
}

/// max(the number of targets that count, 1), as an f32, summed serially
/// (one compare a row).
Value countedRows(VectorBuilder &kb, Value targets, int64_t rows, int64_t ignoreIndex) {
  Value count =
      kb.forLoop(kb.index(0), kb.index(rows), 1, ValueRange{kb.f32(0.0)},
                 [&](Value row, ValueRange carried) -> SmallVector<Value> {
                   Value counted = countedTarget(kb, targets, row, ignoreIndex).first;
                   return {kb.add(carried[0], kb.select(counted, kb.f32(1.0), kb.f32(0.0)))};
                 })[0];
  return kb.max(count, kb.f32(1.0));
}

} // namespace

void xfmr::cpu::forEachRow(VectorBuilder &kb, int64_t rows, int64_t width,
                           function_ref<void(Value)> body) {
  int64_t chunk = rowsPerChunk(rows, width);
  kb.parallelFor((rows + chunk - 1) / chunk, [&](Value c) {
    Value begin = kb.muli(c, chunk);
    Value end = kb.mini(kb.addi(begin, kb.index(chunk)), kb.index(rows));
    kb.forLoop(begin, end, 1, body);
  });
}

Value xfmr::cpu::emitSoftmaxRows(VectorBuilder &kb, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1);
  Value in = kb.readBuffer(x);
  Value out = kb.allocate({rows, width}, type.getElementType());
  forEachRow(kb, rows, width, [&](Value row) {
    auto [rowMax, rowSum] = rowMaxAndExpSum(kb, in, row, width);
    Value empty = kb.equals(rowSum, 0.0);
    Value inverse = kb.splat(kb.select(empty, kb.f32(0.0), kb.div(kb.f32(1.0), rowSum)));
    Value shift = kb.splat(rowMax);
    forEachVector(kb, width, [&](Value c, int64_t valid) {
      Value value = kb.loadVector(in, {row, c}, valid, kNegInf);
      kb.storeVector(kb.mul(kb.expShifted(value, shift), inverse), out, {row, c}, valid);
    });
  });
  return kb.asTensor(out);
}

std::pair<Value, Value> xfmr::cpu::emitLayerNormRows(VectorBuilder &kb, Value x, Value residual,
                                                     Value gamma, Value beta, double epsilon) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1);
  int64_t lanes = kb.cpu().lanes;
  Type f32 = type.getElementType();
  Value in = kb.readBuffer(x);
  Value other = residual ? kb.readBuffer(residual) : Value();
  Value g = gamma ? kb.readBuffer(gamma) : Value();
  Value b = beta ? kb.readBuffer(beta) : Value();
  Value sumOut = residual ? kb.allocate({rows, width}, f32) : Value();
  Value out = kb.allocate({rows, width}, f32);
  // The normalised rows are read from here: the input, or the sums.
  Value source = residual ? sumOut : in;
  int64_t full = width / lanes * lanes;

  forEachRow(kb, rows, width, [&](Value row) {
    auto value = [&](Value c, int64_t valid) {
      Value v = kb.loadVector(in, {row, c}, valid);
      if (!residual)
        return v;
      v = kb.add(v, kb.loadVector(other, {row, c}, valid));
      kb.storeVector(v, sumOut, {row, c}, valid);
      return v;
    };
    // Statistics of the row shifted by its first element: the values are
    // then of the size of their spread, not of their mean (a row around 1e3
    // would lose the mean's low bits to rounding).
    Value shift = kb.load(in, {row, kb.index(0)});
    if (residual)
      shift = kb.add(shift, kb.load(other, {row, kb.index(0)}));
    Value shiftVector = kb.splat(shift);
    // Welford per lane over the full vectors: after n vectors each lane
    // holds the mean and the sum of squared deviations of its n values.
    Value mean = kb.splat(0.0), m2 = kb.splat(0.0);
    if (full > 0) {
      ValueRange state = kb.forLoop(
          kb.index(0), kb.index(full), lanes, {mean, m2},
          [&](Value c, ValueRange carried) -> SmallVector<Value> {
            OpBuilder &bb = kb.builder();
            Value n = arith::DivUIOp::create(bb, kb.location(), c, kb.index(lanes));
            Value count = arith::UIToFPOp::create(
                bb, kb.location(), f32,
                arith::IndexCastUIOp::create(bb, kb.location(), bb.getI64Type(),
                                             kb.addi(n, kb.index(1))));
            Value v = kb.sub(value(c, lanes), shiftVector);
            Value delta = kb.sub(v, carried[0]);
            Value nextMean = kb.add(carried[0], kb.mul(delta, kb.splat(kb.div(kb.f32(1.0), count))));
            Value nextM2 = kb.fma(delta, kb.sub(v, nextMean), carried[1]);
            return {nextMean, nextM2};
          });
      mean = state[0];
      m2 = state[1];
    }
    // Lanes hold equal counts: the row mean is the mean of lane means and
    // M2 adds the lanes' spread around it (Chan et al.).
    double perLane = static_cast<double>(full / lanes);
    Value rowMean = kb.f32(0.0), rowM2 = kb.f32(0.0);
    if (full > 0) {
      rowMean = kb.div(kb.reduceAdd(mean), kb.f32(lanes));
      Value spread = kb.sub(mean, kb.splat(rowMean));
      rowM2 = kb.add(kb.reduceAdd(m2), kb.mul(kb.reduceAdd(kb.mul(spread, spread)), kb.f32(perLane)));
    }
    // The tail, one element at a time.
    for (int64_t t = 0; t < width % lanes; ++t) {
      Value c = kb.index(full + t);
      Value v = kb.load(in, {row, c});
      if (residual) {
        v = kb.add(v, kb.load(other, {row, c}));
        kb.store(v, sumOut, {row, c});
      }
      v = kb.sub(v, shift);
      double count = static_cast<double>(full + t + 1);
      Value delta = kb.sub(v, rowMean);
      rowMean = kb.add(rowMean, kb.div(delta, kb.f32(count)));
      rowM2 = kb.add(rowM2, kb.mul(delta, kb.sub(v, rowMean)));
    }
    Value rstd = kb.rsqrt(kb.add(kb.div(rowM2, kb.f32(width)), kb.f32(epsilon)));
    // rowMean is of the shifted row.
    Value meanVector = kb.splat(rowMean), rstdVector = kb.splat(rstd);
    forEachVector(kb, width, [&](Value c, int64_t valid) {
      Value shifted = kb.sub(kb.loadVector(source, {row, c}, valid), shiftVector);
      Value normed = kb.mul(kb.sub(shifted, meanVector), rstdVector);
      if (g)
        normed = kb.fma(normed, kb.loadVector(g, {c}, valid), kb.loadVector(b, {c}, valid));
      kb.storeVector(normed, out, {row, c}, valid);
    });
  });
  return {residual ? kb.asTensor(sumOut) : Value(), kb.asTensor(out)};
}

Value xfmr::cpu::emitSoftmaxBackwardRows(VectorBuilder &kb, Value y, Value grad) {
  auto type = cast<RankedTensorType>(y.getType());
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1);
  Value output = kb.readBuffer(y), g = kb.readBuffer(grad);
  Value result = kb.allocate({rows, width}, type.getElementType());
  forEachRow(kb, rows, width, [&](Value row) {
    Value dot = sumRow(kb, width, 1, [&](Value c, int64_t valid) -> SmallVector<Value> {
      return {kb.mul(kb.loadVector(output, {row, c}, valid), kb.loadVector(g, {row, c}, valid))};
    })[0];
    Value dotVector = kb.splat(dot);
    forEachVector(kb, width, [&](Value c, int64_t valid) {
      Value difference = kb.sub(kb.loadVector(g, {row, c}, valid), dotVector);
      kb.storeVector(kb.mul(kb.loadVector(output, {row, c}, valid), difference), result, {row, c},
                     valid);
    });
  });
  return kb.asTensor(result);
}

LayerNormGradients xfmr::cpu::emitLayerNormBackwardRows(VectorBuilder &kb, Value x, Value grad,
                                                        Value gamma, double epsilon) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1);
  Type f32 = type.getElementType();
  Value input = kb.readBuffer(x), g = kb.readBuffer(grad);
  Value scale = gamma ? kb.readBuffer(gamma) : Value();
  Value dx = kb.allocate({rows, width}, f32);
  // Each row's mean and 1/std, for the column sums of gamma's gradient.
  Value means = gamma ? kb.allocate({rows}, f32) : Value();
  Value rstds = gamma ? kb.allocate({rows}, f32) : Value();
  Value inverseWidth = kb.f32(1.0 / static_cast<double>(width));

  forEachRow(kb, rows, width, [&](Value row) {
    Value mean = kb.mul(sumRow(kb, width, 1,
                               [&](Value c, int64_t valid) -> SmallVector<Value> {
                                 return {kb.loadVector(input, {row, c}, valid)};
                               })[0],
                        inverseWidth);
    Value meanVector = kb.splat(mean);
    // x - mean, 0 past the row (the lanes there read the mean).
    auto centered = [&](Value c, int64_t valid) {
      return kb.sub(kb.loadVector(input, {row, c}, valid, meanVector), meanVector);
    };
    // The gradient of the normalised row: g * gamma.
    auto scaledGrad = [&](Value c, int64_t valid) {
      Value gv = kb.loadVector(g, {row, c}, valid);
      return scale ? kb.mul(gv, kb.loadVector(scale, {c}, valid)) : gv;
    };
    // Two-pass variance (the row centred first), with the sums of gy and
    // gy * (x - mean) in the same sweep.
    SmallVector<Value> sums = sumRow(kb, width, 3, [&](Value c, int64_t valid) {
      Value d = centered(c, valid), gy = scaledGrad(c, valid);
      return SmallVector<Value>{kb.mul(d, d), gy, kb.mul(gy, d)};
    });
    Value rstd = kb.rsqrt(kb.add(kb.mul(sums[0], inverseWidth), kb.f32(epsilon)));
    // dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)), xhat = d * rstd.
    Value meanGrad = kb.splat(kb.mul(sums[1], inverseWidth));
    Value projection = kb.splat(kb.mul(kb.mul(sums[2], inverseWidth), kb.mul(rstd, rstd)));
    Value rstdVector = kb.splat(rstd);
    forEachVector(kb, width, [&](Value c, int64_t valid) {
      Value d = centered(c, valid);
      Value inner = kb.sub(kb.sub(scaledGrad(c, valid), meanGrad), kb.mul(d, projection));
      kb.storeVector(kb.mul(inner, rstdVector), dx, {row, c}, valid);
    });
    if (gamma) {
      kb.store(mean, means, {row});
      kb.store(rstd, rstds, {row});
    }
  });
  if (!gamma)
    return {kb.asTensor(dx), Value(), Value()};

  // dgamma = sum over rows of g * xhat, dbeta = sum of g: threads take
  // vectors of columns and sweep the rows.
  Value dGamma = kb.allocate({width}, f32), dBeta = kb.allocate({width}, f32);
  forEachVectorInParallel(kb, width, [&](Value c, int64_t valid) {
    ValueRange sums = kb.forLoop(
        kb.index(0), kb.index(rows), 1, {kb.splat(0.0), kb.splat(0.0)},
        [&](Value row, ValueRange carried) -> SmallVector<Value> {
          Value gv = kb.loadVector(g, {row, c}, valid);
          Value d = kb.sub(kb.loadVector(input, {row, c}, valid), kb.splat(kb.load(means, {row})));
          Value normalized = kb.mul(d, kb.splat(kb.load(rstds, {row})));
          return {kb.fma(gv, normalized, carried[0]), kb.add(carried[1], gv)};
        });
    kb.storeVector(sums[0], dGamma, {c}, valid);
    kb.storeVector(sums[1], dBeta, {c}, valid);
  });
  return {kb.asTensor(dx), kb.asTensor(dGamma), kb.asTensor(dBeta)};
}

Value xfmr::cpu::emitCrossEntropyRows(VectorBuilder &kb, Value logits, Value targets,
                                      int64_t ignoreIndex) {
  auto type = cast<RankedTensorType>(logits.getType());
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1);
  Value in = kb.readBuffer(logits), labels = kb.readBuffer(targets);
  Value losses = kb.allocate({rows}, type.getElementType());
  forEachRow(kb, rows, width, [&](Value row) {
    auto [counted, target] = countedTarget(kb, labels, row, ignoreIndex);
    auto [rowMax, rowSum] = rowMaxAndExpSum(kb, in, row, width);
    Value loss = kb.sub(kb.add(kb.log(rowSum), rowMax), kb.load(in, {row, target}));
    kb.store(kb.select(counted, loss, kb.f32(0.0)), losses, {row});
  });
  Value total = kb.forLoop(kb.index(0), kb.index(rows), 1, ValueRange{kb.f32(0.0)},
                           [&](Value row, ValueRange carried) -> SmallVector<Value> {
                             return {kb.add(carried[0], kb.load(losses, {row}))};
                           })[0];
  Value result = kb.allocate({}, type.getElementType());
  kb.store(kb.div(total, countedRows(kb, labels, rows, ignoreIndex)), result, {});
  return kb.asTensor(result);
}

Value xfmr::cpu::emitCrossEntropyBackwardRows(VectorBuilder &kb, Value logits, Value targets,
                                              Value grad, int64_t ignoreIndex) {
  auto type = cast<RankedTensorType>(logits.getType());
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1);
  Value in = kb.readBuffer(logits), labels = kb.readBuffer(targets);
  Value weight =
      kb.div(kb.load(kb.readBuffer(grad), {}), countedRows(kb, labels, rows, ignoreIndex));
  Value result = kb.allocate({rows, width}, type.getElementType());
  forEachRow(kb, rows, width, [&](Value row) {
    auto [counted, target] = countedTarget(kb, labels, row, ignoreIndex);
    auto [rowMax, rowSum] = rowMaxAndExpSum(kb, in, row, width);
    // weight * softmax, then weight off the target's entry; 0 on rows
    // whose target does not count.
    Value rowWeight = kb.select(counted, weight, kb.f32(0.0));
    Value scale = kb.splat(kb.div(rowWeight, rowSum)), shift = kb.splat(rowMax);
    forEachVector(kb, width, [&](Value c, int64_t valid) {
      Value value = kb.loadVector(in, {row, c}, valid, kNegInf);
      kb.storeVector(kb.mul(kb.expShifted(value, shift), scale), result, {row, c}, valid);
    });
    kb.store(kb.sub(kb.load(result, {row, target}), rowWeight), result, {row, target});
  });
  return kb.asTensor(result);
}
