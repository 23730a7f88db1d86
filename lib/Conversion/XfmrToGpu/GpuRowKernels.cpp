//===- GpuRowKernels.cpp - softmax and layer norm, a block per row -*- C++ -*-===//
//
// A block of T threads (a power of 2, 32 to 256) per row; thread t handles
// columns t, t + T, ... Each statistic is one sweep of partial results per
// thread, then a tree reduction through shared memory in log2(T) phases;
// thread 0's entry is then the row's.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "ThreadBlockBuilder.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;
using namespace xfmr::gpu;

namespace {

constexpr int64_t kMinRowThreads = 32;
constexpr int64_t kMaxRowThreads = 256;

int64_t threadsForRow(int64_t width) {
  return std::clamp<int64_t>(llvm::PowerOf2Ceil(width), kMinRowThreads, kMaxRowThreads);
}

/// Thread t's columns of a row of `width`: carries `init` through `body`.
ValueRange forThreadColumns(KernelBuilder &kb, const ThreadBlockBuilder &block, Value t,
                            int64_t width, ValueRange init,
                            function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  return kb.forLoop(t, kb.index(width), block.threadCount(), init, body);
}

void forThreadColumns(KernelBuilder &kb, const ThreadBlockBuilder &block, Value t, int64_t width,
                      function_ref<void(Value)> body) {
  kb.forLoop(t, kb.index(width), block.threadCount(), body);
}

/// The (max, sum of e^(x - max)) of two parts of a row, combined.
SmallVector<Value> combineSoftmax(KernelBuilder &kb, ArrayRef<Value> x, ArrayRef<Value> y) {
  Value max = kb.max(x[0], y[0]);
  return {max, kb.add(kb.mul(x[1], kb.expShifted(x[0], max)),
                      kb.mul(y[1], kb.expShifted(y[0], max)))};
}

} // namespace

Value xfmr::gpu::emitSoftmaxRows(KernelBuilder &kb, Value x, Type resultType, Emulation emulate) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1);
  Value in = kb.readBuffer(x);
  Value out = kb.allocate({rows, width}, resultType);
  ThreadBlockBuilder block(kb, emulate, threadsForRow(width));
  SmallVector<int64_t> perThread = {block.threadCount()};
  block.forEachBlock(
      {rows, 1, 1}, {perThread, perThread}, [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
        Value row = ids[0], maxes = shared[0], sums = shared[1];
        block.phase([&](Value t) {
          ValueRange state =
              forThreadColumns(kb, block, t, width, {kb.f32(kNegInf), kb.f32(0.0)},
                               [&](Value c, ValueRange carried) -> SmallVector<Value> {
                                 return combineSoftmax(kb, {carried[0], carried[1]},
                                                       {kb.loadWidened(in, {row, c}), kb.f32(1.0)});
                               });
          kb.store(state[0], maxes, {t});
          kb.store(state[1], sums, {t});
        });
        block.reduce({maxes, sums}, [&](ArrayRef<Value> x, ArrayRef<Value> y) {
          return combineSoftmax(kb, x, y);
        });
        block.phase(
            [&](Value t) {
              Value zero = kb.index(0);
              Value max = kb.load(maxes, {zero}), sum = kb.load(sums, {zero});
              // A row of only -inf has a sum of 0 and gives 0.
              Value inverse = kb.select(kb.equals(sum, 0.0), kb.f32(0.0), kb.div(kb.f32(1.0), sum));
              forThreadColumns(kb, block, t, width, [&](Value c) {
                kb.storeRounded(kb.mul(kb.expShifted(kb.loadWidened(in, {row, c}), max), inverse),
                                out, {row, c});
              });
            },
            /*barrier=*/false);
      });
  return kb.asTensor(out);
}

std::pair<Value, Value> xfmr::gpu::emitLayerNormRows(KernelBuilder &kb, Value x, Value residual,
                                                     Value gamma, Value beta, double epsilon,
                                                     Type sumType, Type resultType,
                                                     Emulation emulate) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rows = type.getDimSize(0), width = type.getDimSize(1);
  Value in = kb.readBuffer(x);
  Value other = residual ? kb.readBuffer(residual) : Value();
  Value g = gamma ? kb.readBuffer(gamma) : Value();
  Value bt = beta ? kb.readBuffer(beta) : Value();
  Value sumOut = residual ? kb.allocate({rows, width}, sumType) : Value();
  Value out = kb.allocate({rows, width}, resultType);
  // Element c of the row (of the sum with the residual) in f32: reread
  // from the sums when they are f32, else added again (rounded sums would
  // change the statistics).
  auto input = [&](Value row, Value c) {
    Value v = kb.loadWidened(in, {row, c});
    return residual ? kb.add(v, kb.loadWidened(other, {row, c})) : v;
  };
  auto source = [&](Value row, Value c) {
    return residual && sumType.isF32() ? kb.load(sumOut, {row, c}) : input(row, c);
  };
  ThreadBlockBuilder block(kb, emulate, threadsForRow(width));
  SmallVector<int64_t> perThread = {block.threadCount()};
  auto add = [&](ArrayRef<Value> x, ArrayRef<Value> y) -> SmallVector<Value> {
    return {kb.add(x[0], y[0])};
  };
  block.forEachBlock(
      {rows, 1, 1}, {perThread, perThread}, [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
        Value row = ids[0], sums = shared[0], squares = shared[1];
        Value zero = kb.index(0);
        // Statistics of the row shifted by its first element: the values are
        // then of the size of their spread, not of their mean (a row around 1e3
        // would lose the mean's low bits to rounding).
        auto mean = [&] { return kb.div(kb.load(sums, {zero}), kb.f32(width)); };
        block.phase([&](Value t) {
          Value shiftValue = input(row, zero);
          Value partial = forThreadColumns(kb, block, t, width, {kb.f32(0.0)},
                                           [&](Value c, ValueRange carried) -> SmallVector<Value> {
                                             Value v = input(row, c);
                                             if (residual)
                                               kb.storeRounded(v, sumOut, {row, c});
                                             return {kb.add(carried[0], kb.sub(v, shiftValue))};
                                           })[0];
          kb.store(partial, sums, {t});
        });
        block.reduce({sums}, add);
        // Each thread rereads the sums it wrote itself.
        block.phase([&](Value t) {
          Value shiftValue = input(row, zero), shiftedMean = mean();
          Value partial = forThreadColumns(
              kb, block, t, width, {kb.f32(0.0)},
              [&](Value c, ValueRange carried) -> SmallVector<Value> {
                Value d = kb.sub(kb.sub(source(row, c), shiftValue), shiftedMean);
                return {kb.fma(d, d, carried[0])};
              })[0];
          kb.store(partial, squares, {t});
        });
        block.reduce({squares}, add);
        block.phase(
            [&](Value t) {
              Value shiftValue = input(row, zero), shiftedMean = mean();
              Value variance = kb.div(kb.load(squares, {zero}), kb.f32(width));
              Value rstd = kb.rsqrt(kb.add(variance, kb.f32(epsilon)));
              forThreadColumns(kb, block, t, width, [&](Value c) {
                Value shifted = kb.sub(source(row, c), shiftValue);
                Value normed = kb.mul(kb.sub(shifted, shiftedMean), rstd);
                if (g)
                  normed = kb.fma(normed, kb.loadWidened(g, {c}), kb.loadWidened(bt, {c}));
                kb.storeRounded(normed, out, {row, c});
              });
            },
            /*barrier=*/false);
      });
  return {residual ? kb.asTensor(sumOut) : Value(), kb.asTensor(out)};
}
