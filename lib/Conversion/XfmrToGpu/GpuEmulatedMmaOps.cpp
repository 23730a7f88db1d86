//===- GpuEmulatedMmaOps.cpp - tensor-core products on the CPU ---*- C++ -*-===//
//
// The tensor-core operations of the attention and GEMM kernels, emulated:
// a thread computes its accumulators' dot products from the shared tiles
// and, where a GPU thread feeds its own registers to an MMA, from the
// fragments or factors of the other lanes of its warp, read from their
// private arrays (written in an earlier phase); asynchronous copies copy at
// once. The tiling, staging, packing and arithmetic are checked on the
// CPU, the ldmatrix and MMA fragment layouts only on a GPU. Emulating
// warpgroup MMAs, a thread reads the shared tiles through the MMAs' matrix
// descriptors (MmaBuilder::describedElement), so their layout bits and
// offsets are checked on the CPU as well. Every copy and MMA is noted to
// the kernel's AsyncOrderChecker, which checks that each read of a shared
// array comes after the wait for the copies that wrote it, and each write
// after the wait for the MMAs that read it.
//
//===----------------------------------------------------------------------===//

#include "GpuMmaAttentionBase.h"
#include "GpuMmaGemmKernel.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace xfmr::gpu;

namespace xfmr::gpu {

class EmulatedMmaOps : public TensorCoreOps {
public:
  EmulatedMmaOps(MmaAttentionKernelBase &kernel, bool warpgroupMma)
      : TensorCoreOps(kernel), warpgroupMma(warpgroupMma) {}

  SmallVector<Value> products(Value t, const MmaLane &lane, const RowFactor &x, Value tile,
                              function_ref<void()> whileMultiplying, Value pending) override {
    noteProductsIssued(t, x, tile);
    if (whileMultiplying)
      whileMultiplying();
    SmallVector<Value> result = productsEmulated(t, lane, x, tile);
    k.asyncOrder.waitForMmas(t, /*pending=*/0);
    return result;
  }

  std::pair<SmallVector<Value>, SmallVector<Value>>
  productPair(Value t, const MmaLane &lane, const RowFactor &x, Value xTile, const RowFactor &y,
              Value yTile, function_ref<void()> whileMultiplying) override {
    if (!warpgroupMma)
      return TensorCoreOps::productPair(t, lane, x, xTile, y, yTile, whileMultiplying);
    noteProductsIssued(t, x, xTile);
    noteProductsIssued(t, y, yTile);
    if (whileMultiplying)
      whileMultiplying();
    std::pair<SmallVector<Value>, SmallVector<Value>> result = {
        productsEmulated(t, lane, x, xTile), productsEmulated(t, lane, y, yTile)};
    k.asyncOrder.waitForMmas(t, /*pending=*/0);
    return result;
  }

  SmallVector<Value> issueProducts(Value t, const MmaLane &lane, const RowFactor &x,
                                   Value tile) override {
    if (!warpgroupMma)
      return products(t, lane, x, tile, {}, {});
    noteProductsIssued(t, x, tile);
    return productsEmulated(t, lane, x, tile);
  }

  SmallVector<Value> waitForAccumulators(Value t, ArrayRef<Value> arrays, int64_t pending,
                                         ArrayRef<Value> alsoWaited) override {
    k.asyncOrder.waitForMmas(t, pending);
    return SmallVector<Value>(alsoWaited);
  }

  void accumulate(Value t, const MmaLane &lane, Value factors, Value tile, Value acc,
                  bool commit) override;

  void copyAsync(Value t, Value bi, Value hi, Value first, int64_t seq, int64_t rows,
                 ArrayRef<std::pair<Value, Value>> operandsAndTiles, Value enabled) override {
    auto copies = [&] {
      k.forEachVector(t, rows, [&](Value row, Value c) {
        for (auto [operand, tile] : operandsAndTiles)
          vector::StoreOp::create(k.b, k.loc,
                                  k.rowVector(operand, bi, hi, kb.addi(first, row), seq, c), tile,
                                  k.tileAt(row, c),
                                  /*nontemporal=*/false, llvm::Align(2 * k.kVector));
      });
    };
    for (auto [operand, tile] : operandsAndTiles)
      k.asyncOrder.noteWrite(t, tile, /*copy=*/true);
    if (enabled)
      kb.ifThen(enabled, copies);
    else
      copies();
    k.asyncOrder.commitCopies(t);
  }

  void waitForCopies(Value t, int64_t pending) override { k.asyncOrder.waitForCopies(t, pending); }

private:
  /// The reads of products(X, T) issued, as a group.
  void noteProductsIssued(Value t, const RowFactor &x, Value tile) {
    k.asyncOrder.noteMmaRead(t, tile);
    if (x.shared)
      k.asyncOrder.noteMmaRead(t, x.array);
    k.asyncOrder.commitMmas(t);
  }

  /// Emulates products with T over `words` words (pairs of elements along
  /// K) by `update(first, end, tElement)` over the words [first, end), where
  /// `tElement(mn, k)` is T's element at N mn and K k (T's row k where
  /// `kAlongRows`, else its row mn): all words at once; or, emulating
  /// warpgroup MMAs, a step (16 of K) at a time, T read through the step's
  /// descriptor (stepOperand, describedElement) - so that the descriptors
  /// are checked on the CPU too.
  void forEachStep(Value tile, int64_t words, bool kAlongRows,
                   function_ref<void(int64_t, int64_t, function_ref<Value(Value, Value)>)> update);

  /// products(): each accumulator a dot product over the words of the
  /// lane's row (from the fragments of the lane holding them, or the shared
  /// tile) and T's row.
  SmallVector<Value> productsEmulated(Value t, const MmaLane &lane, const RowFactor &x, Value tile);

  /// Whether the MMAs emulated are warpgroup MMAs (run on, in groups).
  bool warpgroupMma;
};

} // namespace xfmr::gpu

void EmulatedMmaOps::forEachStep(
    Value tile, int64_t words, bool kAlongRows,
    function_ref<void(int64_t, int64_t, function_ref<Value(Value, Value)>)> update) {
  if (!warpgroupMma)
    return update(0, words, [&](Value mn, Value kk) {
      return k.widen(kb.load(tile, kAlongRows ? k.tileAt(kk, mn) : k.tileAt(mn, kk)));
    });
  for (int64_t step = 0; step * MmaBuilder::kWords < words; ++step) {
    MmaBuilder::DescribedTile described =
        mma.describedTile(tile, k.stepOperand(tile, step, kAlongRows));
    update(step * MmaBuilder::kWords, (step + 1) * MmaBuilder::kWords, [&](Value mn, Value kk) {
      return k.widen(mma.describedElement(described, mn, kb.remui(kk, MmaBuilder::kK)));
    });
  }
}

SmallVector<Value> EmulatedMmaOps::productsEmulated(Value t, const MmaLane &lane,
                                                    const RowFactor &x, Value tile) {
  SmallVector<Value> tileRows;
  for (int64_t m = 0; m < k.rowTiles; ++m)
    for (int64_t n = 0; n < k.columnTiles; ++n)
      for (int64_t r = 0; r < kAccumulators; ++r)
        tileRows.push_back(k.columnOf(lane, n, r));
  SmallVector<Value> sums(tileRows.size(), kb.f32(0.0));
  forEachStep(tile, k.words, /*kAlongRows=*/false, [&](int64_t first, int64_t end, auto tElement) {
    // Shared rows of warpgroup MMAs are read through their descriptor.
    std::optional<MmaBuilder::DescribedTile> xTile;
    if (x.shared && warpgroupMma)
      xTile = mma.describedTile(x.array, k.rowsOperand(t, x.array, first / MmaBuilder::kWords));
    ValueRange updated =
        kb.forLoop(kb.index(first), kb.index(end), 1, sums, [&](Value w, ValueRange carried) {
          // Word w of row g (+ 8) of row tile m is in register (row / 8) +
          // 2 ((w % 8) / 4) of step w / 8 of lane 4 g + w % 4.
          Value holder = kb.addi(lane.warpThread, kb.addi(kb.muli(lane.group, 4), kb.remui(w, 4)));
          Value step = kb.divui(w, MmaBuilder::kWords);
          Value highWords = kb.muli(kb.divui(kb.remui(w, MmaBuilder::kWords), 4), 2);
          Value c = kb.muli(w, 2);
          SmallVector<Value> next;
          for (auto [i, partial] : llvm::enumerate(carried)) {
            int64_t r = i % kAccumulators, m = i / (k.columnTiles * kAccumulators);
            Value xLow, xHigh;
            if (xTile) {
              // The warp's row of the warpgroup's 64.
              Value row =
                  kb.addi(kb.addi(kb.remui(lane.warpRow, MmaBuilder::kWarpgroupRows), lane.group),
                          kb.index((r / 2) * 8));
              Value inStep = kb.remui(c, MmaBuilder::kK);
              xLow = k.widen(mma.describedElement(*xTile, row, inStep));
              xHigh = k.widen(mma.describedElement(*xTile, row, kb.addi(inStep, kb.index(1))));
            } else if (x.shared) {
              Value row = kb.addi(kb.addi(lane.warpRow, lane.group),
                                  kb.index(m * MmaBuilder::kM + (r / 2) * 8));
              xLow = k.widen(kb.load(x.array, {row, c}));
              xHigh = k.widen(kb.load(x.array, {row, kb.addi(c, kb.index(1))}));
            } else {
              Value reg = kb.addi(highWords, kb.index(r / 2));
              Value fragment = kb.addi(step, kb.index(m * k.steps));
              std::tie(xLow, xHigh) =
                  mma.unpack(kb.load(x.array, k.block.at(holder, {fragment, reg})));
            }
            Value tLow = tElement(tileRows[i], c);
            Value tHigh = tElement(tileRows[i], kb.addi(c, kb.index(1)));
            next.push_back(kb.fma(xHigh, tHigh, kb.fma(xLow, tLow, partial)));
          }
          return next;
        });
    sums.assign(updated.begin(), updated.end());
  });
  return sums;
}

void EmulatedMmaOps::accumulate(Value t, const MmaLane &lane, Value factors, Value tile, Value acc,
                                bool commit) {
  k.asyncOrder.noteMmaRead(t, tile);
  if (commit || !warpgroupMma)
    k.asyncOrder.commitMmas(t);
  // Each accumulator a dot product over the columns of the row's rounded
  // factors (from the lanes holding them) and T's column.
  SmallVector<Value> dims, initial;
  for (int64_t i = 0; i < k.rowTiles * k.dimTiles; ++i) {
    for (int64_t r = 0; r < kAccumulators; ++r) {
      dims.push_back(k.columnOf(lane, i % k.dimTiles, r));
      initial.push_back(kb.load(acc, k.entry(t, i, r)));
    }
  }
  auto rounded = [&](Value x) {
    return k.widen(arith::TruncFOp::create(k.b, k.loc, mma.narrowType(), x));
  };
  SmallVector<Value> sums(initial);
  forEachStep(
      tile, k.columns / 2, /*kAlongRows=*/true, [&](int64_t first, int64_t end, auto tElement) {
        ValueRange updated =
            kb.forLoop(kb.index(first), kb.index(end), 1, sums, [&](Value w, ValueRange carried) {
              // Columns 2w and 2w + 1 of row g (+ 8) of row tile m are
              // accumulators (row / 8) * 2 and + 1 of its tile w / 4 of lane
              // 4 g + w % 4.
              Value holder =
                  kb.addi(lane.warpThread, kb.addi(kb.muli(lane.group, 4), kb.remui(w, 4)));
              Value n = kb.divui(w, 4);
              Value column = kb.muli(w, 2);
              SmallVector<Value> next;
              for (auto [i, partial] : llvm::enumerate(carried)) {
                int64_t r = i % kAccumulators, m = i / (k.dimTiles * kAccumulators);
                Value factorTile = kb.addi(n, kb.index(m * k.columnTiles));
                auto factor = [&](int64_t reg) {
                  return rounded(kb.load(factors, k.block.at(holder, {factorTile, kb.index(reg)})));
                };
                Value fLow = factor((r / 2) * 2), fHigh = factor((r / 2) * 2 + 1);
                Value tLow = tElement(dims[i], column);
                Value tHigh = tElement(dims[i], kb.addi(column, kb.index(1)));
                next.push_back(kb.fma(fHigh, tHigh, kb.fma(fLow, tLow, partial)));
              }
              return next;
            });
        sums.assign(updated.begin(), updated.end());
      });
  for (int64_t i = 0; i < k.rowTiles * k.dimTiles; ++i)
    for (int64_t r = 0; r < kAccumulators; ++r)
      kb.store(sums[i * kAccumulators + r], acc, k.entry(t, i, r));
  // mma.sync completes as issued.
  if (!warpgroupMma)
    k.asyncOrder.waitForMmas(t, /*pending=*/0);
}

std::unique_ptr<TensorCoreOps> xfmr::gpu::createEmulatedMmaOps(MmaAttentionKernelBase &kernel,
                                                               bool warpgroupMma) {
  return std::make_unique<EmulatedMmaOps>(kernel, warpgroupMma);
}

namespace xfmr::gpu {

class EmulatedGemmOps : public GemmTensorCoreOps {
public:
  EmulatedGemmOps(kernels::KernelBuilder &kb, MmaBuilder &mma, AsyncOrderChecker &asyncOrder,
                  bool warpgroupMma)
      : GemmTensorCoreOps(kb, mma), asyncOrder(asyncOrder), warpgroupMma(warpgroupMma) {}

  /// The MMA type's bits: x86 code generation lowers bf16 vectors passed
  /// between blocks through conversions (to a libgcc function ours lacks).
  Type tileElementType() override { return kb.builder().getI16Type(); }
  Value asTileElements(Value narrowValue) override {
    if (auto type = dyn_cast<VectorType>(narrowValue.getType()))
      return vector::BitCastOp::create(kb.builder(), kb.location(),
                                       type.clone(kb.builder().getI16Type()), narrowValue);
    return mma.bits(narrowValue);
  }

  void copyVector(Value tiles, ArrayRef<Value> target, Value matrix, ArrayRef<Value> source,
                  Value inside) override {
    OpBuilder &b = kb.builder();
    Location loc = kb.location();
    auto type = VectorType::get({MmaBuilder::kVector}, mma.narrowType());
    Value value =
        vector::LoadOp::create(b, loc, type, matrix, source,
                               /*nontemporal=*/false, llvm::Align(2 * MmaBuilder::kVector));
    value = asTileElements(value);
    if (inside)
      value =
          kb.select(inside, value,
                    arith::ConstantOp::create(b, loc, b.getZeroAttr(value.getType())).getResult());
    vector::StoreOp::create(b, loc, value, tiles, target, /*nontemporal=*/false,
                            llvm::Align(2 * MmaBuilder::kVector));
  }

  void commitCopies(Value t) override { asyncOrder.commitCopies(t); }
  void waitForCopies(Value t, int64_t pending) override { asyncOrder.waitForCopies(t, pending); }

  /// As mma.sync (copies, then MMAs completing as issued), or as warpgroup
  /// MMAs (issued, copies while they run, one group left in flight).
  SmallVector<Value> multiplyStage(Value t, const MmaGemmKernel::Stage &stage, ArrayRef<Value> sums,
                                   function_ref<void()> copyNext) override {
    if (!warpgroupMma)
      copyNext();
    SmallVector<Value> result = multiply(t, stage, sums);
    if (warpgroupMma)
      copyNext();
    asyncOrder.waitForMmas(t, /*pending=*/warpgroupMma ? 1 : 0);
    return result;
  }

  void waitForLastStage(ThreadBlockBuilder &block, function_ref<SmallVector<Value>(Value)>,
                        function_ref<void(Value, ArrayRef<Value>)>) override {
    if (warpgroupMma)
      block.phase([&](Value t) { asyncOrder.waitForMmas(t, /*pending=*/0); },
                  /*barrier=*/false);
  }

private:
  /// The stage's products, each accumulator a dot product of the shared
  /// tiles' row and column, as a group of MMAs issued (AsyncOrderChecker).
  /// Emulating warpgroup MMAs, a step (16 of K) at a time, the factors read
  /// through the step's descriptors (describedElement) - so that the
  /// descriptors are checked on the CPU too.
  SmallVector<Value> multiply(Value t, const MmaGemmKernel::Stage &stage, ArrayRef<Value> sums) {
    Value aTiles = stage.aTiles, bTiles = stage.bTiles, buffer = stage.buffer;
    for (Value tiles : {aTiles, bTiles})
      asyncOrder.noteMmaRead(t, tiles, buffer);
    asyncOrder.commitMmas(t);
    SmallVector<int64_t> rowTiles;
    SmallVector<Value> rows, cols;
    MmaGemmKernel::forEachAccumulator(
        stage.tilesM, stage.tilesN, [&](int64_t mi, int64_t ni, int64_t r) {
          rowTiles.push_back(mi);
          rows.push_back(stage.accumulatorRow(warpgroupMma ? 0 : mi, r));
          cols.push_back(stage.accumulatorCol(ni, r));
        });
    OpBuilder &b = kb.builder();
    auto widen = [&](Value bits) {
      Value x = arith::BitcastOp::create(b, kb.location(), mma.narrowType(), bits);
      return arith::ExtFOp::create(b, kb.location(), b.getF32Type(), x);
    };
    SmallVector<Value> result(sums);
    int64_t stepDepth = warpgroupMma ? MmaBuilder::kK : MmaGemmKernel::kDepth;
    for (int64_t k0 = 0; k0 < MmaGemmKernel::kDepth; k0 += stepDepth) {
      SmallVector<MmaBuilder::DescribedTile> aDescribed;
      std::optional<MmaBuilder::DescribedTile> bDescribed;
      if (warpgroupMma) {
        for (int64_t mi = 0; mi < stage.tilesM; ++mi)
          aDescribed.push_back(
              mma.describedTile(aTiles, stage.lhs.operand(kb, mma, aTiles, buffer,
                                                          mi * MmaBuilder::kWarpgroupRows, k0)));
        bDescribed = mma.describedTile(bTiles, stage.rhs.operand(kb, mma, bTiles, buffer, 0, k0));
      }
      ValueRange updated = kb.forLoop(
          kb.index(0), kb.index(stepDepth), 1, result, [&](Value kIndex, ValueRange carried) {
            SmallVector<Value> next;
            for (auto [i, sum] : llvm::enumerate(carried)) {
              Value x = widen(warpgroupMma
                                  ? mma.describedElement(aDescribed[rowTiles[i]], rows[i], kIndex)
                                  : kb.load(aTiles, stage.lhs.atMnK(mma, buffer, rows[i], kIndex)));
              Value y = widen(warpgroupMma
                                  ? mma.describedElement(*bDescribed, cols[i], kIndex)
                                  : kb.load(bTiles, stage.rhs.atMnK(mma, buffer, cols[i], kIndex)));
              next.push_back(kb.fma(x, y, sum));
            }
            return next;
          });
      result.assign(updated.begin(), updated.end());
    }
    return result;
  }

  AsyncOrderChecker &asyncOrder;
  bool warpgroupMma;
};

} // namespace xfmr::gpu

std::unique_ptr<GemmTensorCoreOps> xfmr::gpu::createEmulatedGemmOps(kernels::KernelBuilder &kb,
                                                                    MmaBuilder &mma,
                                                                    AsyncOrderChecker &asyncOrder,
                                                                    bool warpgroupMma) {
  return std::make_unique<EmulatedGemmOps>(kb, mma, asyncOrder, warpgroupMma);
}
