//===- GpuMmaAttentionBase.cpp - tensor-core attention building blocks ----===//
//
// The definitions of GpuMmaAttentionBase.h's building blocks, which the
// header describes.
//
//===----------------------------------------------------------------------===//

#include "GpuMmaAttentionBase.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;
using namespace xfmr::gpu;

void MmaAttentionKernelBase::forEachRowBlock(
    int64_t seq, llvm::ArrayRef<int64_t> tileRows,
    llvm::ArrayRef<llvm::SmallVector<int64_t>> arrays,
    llvm::function_ref<void(mlir::Value, mlir::Value, mlir::Value, llvm::ArrayRef<mlir::Value>)>
        body) {
  llvm::SmallVector<llvm::SmallVector<int64_t>> shapes;
  for (int64_t rows : tileRows) {
    if (warpgroupMma)
      shapes.push_back({rows / kVector, paddedDim / kVector, kVector, kVector});
    else
      shapes.push_back({rows, paddedDim + kPadding});
  }
  llvm::append_range(shapes, arrays);
  block.forEachBlock(
      {llvm::divideCeilSigned(seq, rowsPerBlock), heads, batch}, shapes,
      [&](std::array<mlir::Value, 3> ids, llvm::ArrayRef<mlir::Value> shared) {
        asyncOrder.track(shared.take_front(tileRows.size()));
        body(ids[2], ids[1], kb.muli(ids[0], rowsPerBlock), shared);
      },
      llvm::SmallVector<mlir::Type>(tileRows.size(), mma.narrowType()));
}

llvm::SmallVector<mlir::Value> MmaAttentionKernelBase::tileAt(mlir::Value row, mlir::Value c) {
  if (!warpgroupMma)
    return {row, c};
  return mma.coreMatrixIndices(row, c);
}

llvm::SmallVector<int64_t> MmaAttentionKernelBase::sharedTileRows(int64_t blockOperands) const {
  llvm::SmallVector<int64_t> rows(2 * stages, columns);
  rows.append(blockOperands, rowsPerBlock);
  return rows;
}

llvm::SmallVector<mlir::Value> MmaAttentionKernelBase::stageOf(
    mlir::Value tile, llvm::ArrayRef<llvm::SmallVector<mlir::Value>> stageArrays, int64_t later) {
  int64_t count = stageArrays.size();
  assert(-count < later && later < count && "a stage index plus a select");
  mlir::Value index = kb.remui(tile, count);
  if (later != 0) {
    index = kb.addi(index, kb.index((later + count) % count));
    index = kb.select(kb.below(index, count), index,
                      mlir::arith::SubIOp::create(b, loc, index, kb.index(count)));
  }
  llvm::SmallVector<mlir::Value> arrays(stageArrays.front());
  for (auto [s, stage] : llvm::enumerate(stageArrays.drop_front())) {
    mlir::Value here =
        mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, index, kb.index(s + 1));
    for (auto [array, candidate] : llvm::zip_equal(arrays, stage))
      array = kb.select(here, candidate, array);
  }
  return arrays;
}

llvm::SmallVector<llvm::SmallVector<mlir::Value>>
MmaAttentionKernelBase::stagesOf(llvm::ArrayRef<mlir::Value> shared, int64_t perStage) const {
  llvm::SmallVector<llvm::SmallVector<mlir::Value>> result;
  for (int64_t s = 0; s < stages; ++s)
    result.emplace_back(shared.slice(s * perStage, perStage));
  return result;
}

MmaAttentionKernelBase::Lane MmaAttentionKernelBase::laneOf(mlir::Value t, mlir::Value first) {
  mlir::Value warp = kb.divui(t, kWarpSize), lane = kb.remui(t, kWarpSize);
  auto [group, inGroup] = mma.laneCoordinates(lane);
  mlir::Value warpRow = kb.muli(warp, rowsPerWarp);
  mlir::Value top = kb.addi(first, kb.addi(warpRow, group));
  return {kb.muli(warp, kWarpSize), lane, group, inGroup, warpRow, top};
}

llvm::SmallVector<mlir::Value> MmaAttentionKernelBase::entry(mlir::Value t, int64_t i,
                                                             std::optional<int64_t> j) {
  llvm::SmallVector<mlir::Value> indices = {kb.index(i)};
  if (j)
    indices.push_back(kb.index(*j));
  return block.at(t, indices);
}

void MmaAttentionKernelBase::forEachAccumulator(
    int64_t tiles, llvm::function_ref<void(int64_t, int64_t, int64_t)> body) const {
  for (int64_t m = 0; m < rowTiles; ++m)
    for (int64_t n = 0; n < tiles; ++n)
      for (int64_t r = 0; r < kAccumulators; ++r)
        body(m, n, r);
}

std::pair<mlir::Value, llvm::SmallVector<mlir::Value>>
MmaAttentionKernelBase::clampedRow(mlir::Value bi, mlir::Value hi, mlir::Value row, int64_t seq,
                                   mlir::Value c, int64_t width) {
  mlir::Value inside =
      mlir::arith::AndIOp::create(b, loc, kb.below(row, seq), kb.below(c, headDim));
  return {inside,
          in.at(bi, kb.mini(row, kb.index(seq - 1)), hi, kb.mini(c, kb.index(headDim - width)))};
}

mlir::Value MmaAttentionKernelBase::element(mlir::Value operand, mlir::Value bi, mlir::Value hi,
                                            mlir::Value row, int64_t seq, mlir::Value c) {
  auto [inside, indices] = clampedRow(bi, hi, row, seq, c, 1);
  mlir::Value value = kb.load(operand, indices);
  if (value.getType() != mma.narrowType())
    value = mlir::arith::TruncFOp::create(b, loc, mma.narrowType(), value);
  mlir::Value zero = mlir::arith::ConstantOp::create(b, loc, b.getZeroAttr(mma.narrowType()));
  return kb.select(inside, value, zero);
}

mlir::Value MmaAttentionKernelBase::rowWord(mlir::Value operand, mlir::Value bi, mlir::Value hi,
                                            mlir::Value row, int64_t seq, mlir::Value w) {
  mlir::Value c = kb.muli(w, 2);
  return mma.pack(mma.bits(element(operand, bi, hi, row, seq, c)),
                  mma.bits(element(operand, bi, hi, row, seq, kb.addi(c, kb.index(1)))));
}

void MmaAttentionKernelBase::loadFragments(mlir::Value t, const Lane &lane, mlir::Value bi,
                                           mlir::Value hi, mlir::Value operand, int64_t seq,
                                           mlir::Value fragments) {
  for (int64_t m = 0; m < rowTiles; ++m) {
    for (int64_t s = 0; s < steps; ++s) {
      for (int64_t r = 0; r < kAccumulators; ++r) {
        mlir::Value w = kb.addi(lane.inGroup, kb.index(s * MmaBuilder::kWords + (r / 2) * 4));
        mlir::Value row = rowOf(lane, m, (r % 2) * 2);
        kb.store(rowWord(operand, bi, hi, row, seq, w), fragments,
                 entry(t, tileIndex(m, s, steps), r));
      }
    }
  }
}

void MmaAttentionKernelBase::zero(mlir::Value t, mlir::Value accumulators, int64_t tiles) {
  for (int64_t n = 0; n < rowTiles * tiles; ++n)
    for (int64_t r = 0; r < kAccumulators; ++r)
      kb.store(kb.f32(0.0), accumulators, entry(t, n, r));
}

void MmaAttentionKernelBase::storeRows(
    mlir::Value t, const Lane &lane, mlir::Value bi, mlir::Value hi, mlir::Value acc,
    mlir::Value out, int64_t seq, llvm::function_ref<mlir::Value(int64_t, mlir::Value)> factor) {
  for (int64_t m = 0; m < rowTiles; ++m) {
    for (int64_t half = 0; half < 2; ++half) {
      mlir::Value row = rowOf(lane, m, half * 2);
      kb.ifThen(kb.below(row, seq), [&] {
        mlir::Value rowFactor = factor(rowSlot(m, half), row);
        for (int64_t n = 0; n < dimTiles; ++n) {
          for (int64_t r = half * 2; r < half * 2 + 2; ++r) {
            mlir::Value c = columnOf(lane, n, r);
            auto store = [&] {
              kb.storeRounded(
                  kb.mul(kb.load(acc, entry(t, tileIndex(m, n, dimTiles), r)), rowFactor), out,
                  in.at(bi, row, hi, c));
            };
            if ((n + 1) * MmaBuilder::kN > headDim)
              kb.ifThen(kb.below(c, headDim), store);
            else
              store();
          }
        }
      });
    }
  }
}

mlir::Value MmaAttentionKernelBase::exp2(mlir::Value x) {
  return mlir::math::Exp2Op::create(
      b, loc, x,
      mlir::arith::FastMathFlagsAttr::get(b.getContext(), mlir::arith::FastMathFlags::afn));
}

mlir::Value MmaAttentionKernelBase::probability2(mlir::Value product, mlir::Value bi,
                                                 mlir::Value hi, mlir::Value query, mlir::Value key,
                                                 mlir::Value max, bool masked) {
  if (!masked)
    return productProbability2(product, max);
  return probability2(maskedLogit2(product, bi, hi, query, key), max);
}

mlir::Value MmaAttentionKernelBase::keyTileNeedsMask(mlir::Value bi, mlir::Value k0,
                                                     const Lane &lane) {
  using namespace mlir;
  if (in.keyBias || in.bias)
    return Value();
  // The warp's first row is the lane's row less its group; the tile is
  // masked where its last key is past that row's visible end.
  Value firstRow = arith::SubIOp::create(b, loc, lane.top, lane.group);
  Value lastKey = kb.addi(k0, kb.index(columns - 1));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, lastKey,
                               limits().visibleEnd(bi, firstRow));
}

mlir::Value MmaAttentionKernelBase::firstMaskedTile(mlir::Value bi, mlir::Value q0) {
  if (in.keyBias || in.bias)
    return kb.index(0);
  return limits().unmaskedKeyTiles(bi, q0, columns);
}

void MmaAttentionKernelBase::ifMasked(mlir::Value needsMask, llvm::function_ref<void(bool)> body) {
  if (!needsMask)
    return body(true);
  kb.ifThenElse(
      needsMask, [&] { body(true); }, [&] { body(false); });
}

mlir::Value MmaAttentionKernelBase::vectorCopies(llvm::ArrayRef<mlir::Value> operands) {
  bool possible =
      headDim % kVector == 0 && llvm::all_of(operands, [&](mlir::Value operand) {
        auto type = mlir::cast<mlir::MemRefType>(operand.getType());
        auto [strides, offset] = type.getStridesAndOffset();
        return type.getElementType() == mma.narrowType() && strides[in.dims.headDim] == 1;
      });
  if (!possible)
    return mlir::Value();
  mlir::Value aligned = mlir::arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
  for (mlir::Value operand : operands)
    aligned =
        mlir::arith::AndIOp::create(b, loc, aligned, mma.vectorsAligned(operand, in.dims.headDim));
  return aligned;
}

mlir::Value MmaAttentionKernelBase::rowVector(mlir::Value operand, mlir::Value bi, mlir::Value hi,
                                              mlir::Value row, int64_t seq, mlir::Value c) {
  auto type = mlir::VectorType::get({kVector}, mma.narrowType());
  auto [inside, indices] = clampedRow(bi, hi, row, seq, c, kVector);
  mlir::Value value = mlir::vector::LoadOp::create(b, loc, type, operand, indices,
                                                   /*nontemporal=*/false, llvm::Align(2 * kVector));
  mlir::Value zero = mlir::arith::ConstantOp::create(b, loc, b.getZeroAttr(type));
  return kb.select(inside, value, zero);
}

void MmaAttentionKernelBase::forEachVector(
    mlir::Value t, int64_t rows, llvm::function_ref<void(mlir::Value, mlir::Value)> body) {
  int64_t chunks = paddedDim / kVector, total = rows * chunks;
  auto place = [&](mlir::Value i) -> std::pair<mlir::Value, mlir::Value> {
    if (!warpgroupMma)
      return {kb.divui(i, chunks), kb.muli(kb.remui(i, chunks), kVector)};
    return mma.coreMatrixVector(i, chunks);
  };
  for (int64_t slot = 0; slot < llvm::divideCeilSigned(total, threads); ++slot) {
    mlir::Value i = kb.addi(t, kb.index(slot * threads));
    auto atSlot = [&] {
      auto [row, c] = place(i);
      body(row, c);
    };
    if ((slot + 1) * threads > total)
      kb.ifThen(kb.below(i, total), atSlot);
    else
      atSlot();
  }
}

void MmaAttentionKernelBase::stageElements(mlir::Value t, mlir::Value bi, mlir::Value hi,
                                           mlir::Value first, int64_t seq, int64_t rows,
                                           llvm::ArrayRef<Staged> operandsAndTiles) {
  for (auto [operand, tile] : operandsAndTiles)
    asyncOrder.noteWrite(t, tile, /*copy=*/false);
  kb.forLoop(t, kb.index(rows * paddedDim), threads, [&](mlir::Value i) {
    mlir::Value row = kb.divui(i, paddedDim), c = kb.remui(i, paddedDim);
    for (auto [operand, tile] : operandsAndTiles)
      kb.store(element(operand, bi, hi, kb.addi(first, row), seq, c), tile, tileAt(row, c));
  });
}

void MmaAttentionKernelBase::stageRows(mlir::Value t, mlir::Value bi, mlir::Value hi,
                                       mlir::Value first, int64_t seq, mlir::Value operand,
                                       mlir::Value tile, mlir::Value aligned) {
  auto elements = [&] { stageElements(t, bi, hi, first, seq, rowsPerBlock, {{operand, tile}}); };
  if (!aligned)
    return elements();
  kb.ifThenElse(
      aligned,
      [&] {
        copyAsync(t, bi, hi, first, seq, rowsPerBlock, {{operand, tile}});
      },
      elements);
}

llvm::SmallVector<RowFactor> MmaAttentionKernelBase::rowFactors(int64_t count, bool inShared,
                                                                llvm::ArrayRef<mlir::Value> tiles) {
  llvm::SmallVector<RowFactor> factors;
  for (int64_t i = 0; i < count; ++i)
    factors.push_back(inShared ? RowFactor{tiles[i], /*shared=*/true} : RowFactor{fragmentArray()});
  return factors;
}

void MmaAttentionKernelBase::loadRows(mlir::Value t, const Lane &lane, mlir::Value bi,
                                      mlir::Value hi, mlir::Value first, int64_t seq,
                                      llvm::ArrayRef<mlir::Value> operands,
                                      llvm::ArrayRef<RowFactor> factors, mlir::Value aligned) {
  for (auto [operand, factor] : llvm::zip_equal(operands, factors)) {
    if (factor.shared)
      stageRows(t, bi, hi, first, seq, operand, factor.array, aligned);
    else
      loadFragments(t, lane, bi, hi, operand, seq, factor.array);
  }
}

void MmaAttentionKernelBase::streamTiles(
    mlir::Value begin, mlir::Value end, mlir::Value bi, mlir::Value hi, int64_t seq,
    llvm::ArrayRef<mlir::Value> operands,
    llvm::ArrayRef<llvm::SmallVector<mlir::Value>> stageArrays,
    llvm::function_ref<void(const StreamedTile &)> compute,
    llvm::function_ref<void(mlir::Value, mlir::Value, llvm::ArrayRef<mlir::Value>)> stageMore,
    std::optional<MaskSplit> masks, llvm::ArrayRef<TileReads> reads) {
  auto staged = [&](llvm::ArrayRef<mlir::Value> stage) {
    return llvm::map_to_vector(llvm::zip(operands, stage), [](auto pair) {
      return Staged(std::get<0>(pair), std::get<1>(pair));
    });
  };
  mlir::Value aligned = vectorCopies(operands);
  // `vectors`: whether copies are possible - where null, decided at run
  // time by `aligned` (a branch), else statically.
  auto copyTile = [&](mlir::Value t, mlir::Value tile, std::optional<bool> vectors) {
    if (!aligned || vectors == false)
      return;
    llvm::SmallVector<mlir::Value> stage = stageOf(tile, stageArrays);
    mlir::Value first = kb.muli(tile, columns);
    if (vectors)
      return copyAsync(t, bi, hi, first, seq, columns, staged(stage), kb.below(tile, end));
    kb.ifThen(mlir::arith::AndIOp::create(b, loc, aligned, kb.below(tile, end)),
              [&] { copyAsync(t, bi, hi, first, seq, columns, staged(stage)); });
  };
  // With `reads`: the copies tile `tile` issues, or, `offset` tiles
  // before `begin`, the ones issued in its stead: operand i's tile
  // `distance - reads[i].first` later. Each tile commits a group per
  // operand, past the end too (copying nothing), so that a wait can
  // leave the groups of the `distance - 1` tiles after it in flight.
  int64_t spread = 0;
  for (const TileReads &read : reads)
    spread = std::max(spread, read.last - read.first);
  int64_t distance = stages - 1 - spread;
  assert((reads.empty() || reads.size() == operands.size()) && "a TileReads per operand");
  assert(
      llvm::all_of(
          reads, [&](const TileReads &read) { return 0 <= read.first && read.first < distance; }) &&
      "a stage free for each tile copied ahead");
  int64_t copiesInFlight = reads.empty() ? 0 : (distance - 1) * operands.size();
  auto copyAhead = [&](mlir::Value t, mlir::Value tile, std::optional<bool> vectors,
                       int64_t offset = 0) {
    auto copies = [&] {
      for (auto [i, operand] : llvm::enumerate(operands)) {
        int64_t later = offset + distance - reads[i].first;
        if (later < 0)
          continue;
        mlir::Value copied = kb.addi(tile, kb.index(later));
        copyAsync(t, bi, hi, kb.muli(copied, columns), seq, columns,
                  {{operand, stageOf(tile, stageArrays, later)[i]}}, kb.below(copied, end));
      }
    };
    if (!aligned || vectors == false)
      return;
    if (vectors)
      return copies();
    kb.ifThen(aligned, copies);
  };
  auto step = [&](mlir::Value tile, std::optional<bool> vectors, bool peeled,
                  std::optional<bool> masked) {
    mlir::Value first = kb.muli(tile, columns);
    llvm::SmallVector<mlir::Value> stage = stageOf(tile, stageArrays);
    block.phase([&](mlir::Value t) {
      auto elements = [&] { stageElements(t, bi, hi, first, seq, columns, staged(stage)); };
      if (!aligned || vectors == false)
        elements();
      else if (vectors)
        waitForCopies(t, copiesInFlight);
      else
        kb.ifThenElse(
            aligned, [&] { waitForCopies(t, copiesInFlight); }, elements);
      if (stageMore)
        stageMore(t, first, stage);
      tensorCores->fenceShared();
    });
    mlir::Value next = kb.addi(tile, kb.index(1));
    compute({first, stage,
             [&](mlir::Value t) {
               if (reads.empty())
                 copyTile(t, next, vectors);
               else
                 copyAhead(t, tile, vectors);
             },
             peeled, masked});
  };
  // The copies before the first tile.
  auto prologue = [&](std::optional<bool> vectors) {
    if (!aligned || vectors == false)
      return;
    block.phase(
        [&](mlir::Value t) {
          if (reads.empty())
            return copyTile(t, begin, vectors);
          for (int64_t offset = -distance; offset < 0; ++offset)
            copyAhead(t, begin, vectors, offset);
        },
        /*barrier=*/false);
  };
  if (!masks) {
    prologue(std::nullopt);
    kb.forLoop(begin, end, 1,
               [&](mlir::Value tile) { step(tile, std::nullopt, /*peeled=*/false, std::nullopt); });
  } else {
    auto pipeline = [&](bool vectors) {
      prologue(vectors);
      kb.ifThen(kb.below(begin, end), [&] { step(begin, vectors, /*peeled=*/true, std::nullopt); });
      mlir::Value second = kb.addi(begin, kb.index(1));
      mlir::Value split = kb.mini(mlir::arith::MaxSIOp::create(b, loc, masks->split, second), end);
      kb.forLoop(second, split, 1, [&](mlir::Value tile) {
        step(tile, vectors, /*peeled=*/false, masks->maskedFirst);
      });
      kb.forLoop(
          mlir::arith::MaxSIOp::create(b, loc, split, second), end, 1,
          [&](mlir::Value tile) { step(tile, vectors, /*peeled=*/false, !masks->maskedFirst); });
    };
    if (aligned)
      kb.ifThenElse(
          aligned, [&] { pipeline(true); }, [&] { pipeline(false); });
    else
      pipeline(false);
  }
  // No copy stays in flight past the loop: rows staged with the first
  // tile (stageRows) still are where there was no tile, and the last
  // tiles of operands first read a tile late are waited for, and
  // published, here.
  bool readAfter = llvm::any_of(reads, [](const TileReads &read) { return read.first > 0; });
  if (aligned)
    block.phase(
        [&](mlir::Value t) {
          waitForCopies(t);
          if (readAfter)
            tensorCores->fenceShared();
        },
        /*barrier=*/readAfter);
}

void MmaAttentionKernelBase::streamProductPairs(
    Value begin, Value end, Value bi, Value hi, int64_t seq, ArrayRef<Value> operands,
    ArrayRef<SmallVector<Value>> stageArrays, Value first, const RowFactor &x, const RowFactor &y,
    function_ref<void(Value, Value, ArrayRef<Value>)> stageMore,
    function_ref<Value(Value, const Lane &)> needsMask, function_ref<MaskSplit()> split,
    ArrayRef<TileReads> reads,
    function_ref<void(Value, const Lane &, const StreamedTile &, ArrayRef<Value>, ArrayRef<Value>,
                      bool)>
        body,
    function_ref<void(Value, const Lane &, ArrayRef<Value>)> update) {
  if (!warpgroupMma) {
    streamTiles(
        begin, end, bi, hi, seq, operands, stageArrays,
        [&](const StreamedTile &tile) {
          block.phase(
              [&](Value t) {
                Lane lane = laneOf(t, first);
                auto products = productPair(t, lane, x, tile.stage[0], y, tile.stage[1],
                                            [&] { tile.copyNext(t); });
                ifMasked(needsMask(tile.first, lane), [&](bool masked) {
                  body(t, lane, tile, products.first, products.second, masked);
                });
              },
              /*barrier=*/false);
          block.phase([&](Value t) { update(t, laneOf(t, first), tile.stage); },
                      /*barrier=*/false);
        },
        stageMore);
    return;
  }
  Value xArray = columnAccumulators(), yArray = columnAccumulators();
  // The updates of the tile before `tile`, from its stage.
  auto updateBefore = [&](Value t, const Lane &lane, Value tile) {
    update(t, lane, stageOf(tile, stageArrays, /*later=*/-1));
  };
  streamTiles(
      begin, end, bi, hi, seq, operands, stageArrays,
      [&](const StreamedTile &tile) {
        block.phase(
            [&](Value t) {
              Lane lane = laneOf(t, first);
              storeAccumulators(t, xArray, issueProducts(t, lane, x, tile.stage[0]));
              storeAccumulators(t, yArray, issueProducts(t, lane, y, tile.stage[1]));
              if (!tile.peeled)
                updateBefore(t, lane, kb.divui(tile.first, columns));
            },
            /*barrier=*/false);
        block.phase(
            [&](Value t) {
              SmallVector<Value> both = loadAccumulators(t, xArray, columnTiles);
              llvm::append_range(both, loadAccumulators(t, yArray, columnTiles));
              both = waitForProducts(t, both, tile.peeled ? 0 : 1);
              tile.copyNext(t);
              ArrayRef<Value> waited(both);
              body(t, laneOf(t, first), tile, waited.take_front(waited.size() / 2),
                   waited.drop_front(waited.size() / 2), tile.masked.value_or(true));
            },
            /*barrier=*/false);
      },
      stageMore, split(), reads);
  // The last tile's updates.
  block.phase(
      [&](Value t) {
        kb.ifThen(kb.below(begin, end), [&] { updateBefore(t, laneOf(t, first), end); });
      },
      /*barrier=*/false);
}

llvm::SmallVector<mlir::Value>
MmaAttentionKernelBase::loadAccumulators(mlir::Value t, mlir::Value array, int64_t tiles) {
  llvm::SmallVector<mlir::Value> values;
  for (int64_t n = 0; n < rowTiles * tiles; ++n)
    for (int64_t r = 0; r < kAccumulators; ++r)
      values.push_back(kb.load(array, entry(t, n, r)));
  return values;
}

MmaBuilder::SharedOperand MmaAttentionKernelBase::stepOperand(mlir::Value tile, int64_t step,
                                                              bool kAlongRows) {
  int64_t k0 = step * MmaBuilder::kK;
  return mma.matrixDescriptor(tile, {},
                              kAlongRows ? MmaBuilder::coreMatrixOffset(k0, 0, paddedDim)
                                         : MmaBuilder::coreMatrixOffset(0, k0, paddedDim),
                              paddedDim, kAlongRows);
}

MmaBuilder::SharedOperand MmaAttentionKernelBase::rowsOperand(mlir::Value t, mlir::Value rows,
                                                              int64_t s) {
  mlir::Value first = kb.muli(block.warpUniform(kb.divui(t, MmaBuilder::kWarpgroupThreads)),
                              MmaBuilder::kWarpgroupRows);
  return mma.matrixDescriptor(rows, mma.coreMatrixIndices(first, kb.index(0)),
                              MmaBuilder::coreMatrixOffset(0, s * MmaBuilder::kK, paddedDim),
                              paddedDim, /*kAlongRows=*/false);
}

llvm::SmallVector<mlir::Value>
MmaAttentionKernelBase::factorFragment(mlir::Value t, mlir::Value factors, int64_t m, int64_t ks) {
  auto packed = [&](int64_t n, int64_t r) {
    int64_t i = tileIndex(m, n, columnTiles);
    return mma.packRounded(kb.load(factors, entry(t, i, r)), kb.load(factors, entry(t, i, r + 1)));
  };
  return {packed(2 * ks, 0), packed(2 * ks, 2), packed(2 * ks + 1, 0), packed(2 * ks + 1, 2)};
}

TensorCoreOps::TensorCoreOps(MmaAttentionKernelBase &kernel)
    : k(kernel), kb(kernel.kb), mma(kernel.mma) {}

void TensorCoreOps::copyAsync(mlir::Value t, mlir::Value bi, mlir::Value hi, mlir::Value first,
                              int64_t seq, int64_t rows,
                              llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> operandsAndTiles,
                              mlir::Value enabled) {
  // Rows clamped to the sequence (and the zero fill sized) only where it
  // ends inside the tile: elsewhere a copy's address is the row's, without
  // the min and select (sm_90, head-dim-128 forward: its hot loop with
  // both paths is 46 instructions shorter than with the clamped one).
  auto copies = [&](bool clampRows) {
    k.forEachVector(t, rows, [&](mlir::Value row, mlir::Value c) {
      mlir::Value source = kb.addi(first, row);
      for (auto [operand, tile] : operandsAndTiles) {
        mlir::Value inside;
        llvm::SmallVector<mlir::Value> indices;
        if (clampRows) {
          std::tie(inside, indices) = k.clampedRow(bi, hi, source, seq, c, k.kVector);
        } else {
          indices = k.in.at(bi, source, hi, kb.mini(c, kb.index(k.headDim - k.kVector)));
          if (k.paddedDim > k.headDim)
            inside = kb.below(c, k.headDim);
        }
        if (enabled)
          inside = inside ? mlir::arith::AndIOp::create(k.b, k.loc, inside, enabled) : enabled;
        mlir::Value readElements =
            inside ? kb.select(inside, kb.index(k.kVector), kb.index(0)) : mlir::Value();
        mma.copyAsync(tile, k.tileAt(row, c), operand, indices, readElements);
      }
    });
  };
  if (enabled) {
    // Where whole tiles fill the sequence, a tile past its end (whose
    // copies copy nothing) takes the last one's addresses: no row is
    // clamped, and a copy's address is its first's plus a constant.
    bool wholeTiles = seq % rows == 0;
    if (wholeTiles)
      first = kb.mini(first, kb.index(seq - rows));
    copies(/*clampRows=*/!wholeTiles);
    return mma.commitCopies();
  }
  kb.ifThenElse(
      kb.below(kb.addi(first, kb.index(rows - 1)), seq), [&] { copies(false); },
      [&] { copies(true); });
  mma.commitCopies();
}

void TensorCoreOps::waitForCopies(mlir::Value t, int64_t pending) { mma.waitForCopies(pending); }
