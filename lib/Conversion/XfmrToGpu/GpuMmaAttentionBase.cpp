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

void MmaAttentionKernelBase::copyAsync(mlir::Value t, mlir::Value bi, mlir::Value hi,
                                       mlir::Value first, int64_t seq, int64_t rows,
                                       llvm::ArrayRef<Staged> operandsAndTiles,
                                       mlir::Value enabled) {
  if (emulate != Emulation::None) {
    auto copies = [&] {
      forEachVector(t, rows, [&](mlir::Value row, mlir::Value c) {
        for (auto [operand, tile] : operandsAndTiles)
          mlir::vector::StoreOp::create(
              b, loc, rowVector(operand, bi, hi, kb.addi(first, row), seq, c), tile, tileAt(row, c),
              /*nontemporal=*/false, llvm::Align(2 * kVector));
      });
    };
    for (auto [operand, tile] : operandsAndTiles)
      asyncOrder.noteWrite(t, tile, /*copy=*/true);
    if (enabled)
      kb.ifThen(enabled, copies);
    else
      copies();
    asyncOrder.commitCopies(t);
    return;
  }
  // Rows clamped to the sequence (and the zero fill sized) only where it
  // ends inside the tile: elsewhere a copy's address is the row's, without
  // the min and select (sm_90, head-dim-128 forward: its hot loop with
  // both paths is 46 instructions shorter than with the clamped one).
  auto copies = [&](bool clampRows) {
    forEachVector(t, rows, [&](mlir::Value row, mlir::Value c) {
      mlir::Value source = kb.addi(first, row);
      for (auto [operand, tile] : operandsAndTiles) {
        mlir::Value inside;
        llvm::SmallVector<mlir::Value> indices;
        if (clampRows) {
          std::tie(inside, indices) = clampedRow(bi, hi, source, seq, c, kVector);
        } else {
          indices = in.at(bi, source, hi, kb.mini(c, kb.index(headDim - kVector)));
          if (paddedDim > headDim)
            inside = kb.below(c, headDim);
        }
        if (enabled)
          inside = inside ? mlir::arith::AndIOp::create(b, loc, inside, enabled) : enabled;
        mlir::Value readElements =
            inside ? kb.select(inside, kb.index(kVector), kb.index(0)) : mlir::Value();
        mma.copyAsync(tile, tileAt(row, c), operand, indices, readElements);
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

llvm::SmallVector<MmaAttentionKernelBase::RowFactor>
MmaAttentionKernelBase::rowFactors(int64_t count, bool inShared,
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
      if (warpgroupMma && emulate == Emulation::None)
        mma.fenceSharedForWarpgroupMma();
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
          if (readAfter && warpgroupMma && emulate == Emulation::None)
            mma.fenceSharedForWarpgroupMma();
        },
        /*barrier=*/readAfter);
}

llvm::SmallVector<mlir::Value>
MmaAttentionKernelBase::products(mlir::Value t, const Lane &lane, const RowFactor &x,
                                 mlir::Value tile, llvm::function_ref<void()> whileMultiplying,
                                 mlir::Value pending) {
  if (emulate == Emulation::None && warpgroupMma)
    return productsOnWarpgroup(t, x, tile, whileMultiplying, pending);
  noteProductsIssued(t, x, tile);
  if (whileMultiplying)
    whileMultiplying();
  if (emulate == Emulation::None)
    return productsOnTensorCores(t, lane, x, tile);
  llvm::SmallVector<mlir::Value> result = productsEmulated(t, lane, x, tile);
  asyncOrder.waitForMmas(t, /*pending=*/0);
  return result;
}

std::pair<llvm::SmallVector<mlir::Value>, llvm::SmallVector<mlir::Value>>
MmaAttentionKernelBase::productPair(mlir::Value t, const Lane &lane, const RowFactor &x,
                                    mlir::Value xTile, const RowFactor &y, mlir::Value yTile,
                                    llvm::function_ref<void()> whileMultiplying) {
  if (emulatesWarpgroupMma()) {
    noteProductsIssued(t, x, xTile);
    noteProductsIssued(t, y, yTile);
    if (whileMultiplying)
      whileMultiplying();
    std::pair<llvm::SmallVector<mlir::Value>, llvm::SmallVector<mlir::Value>> result = {
        productsEmulated(t, lane, x, xTile), productsEmulated(t, lane, y, yTile)};
    asyncOrder.waitForMmas(t, /*pending=*/0);
    return result;
  }
  if (!warpgroupMma)
    return {products(t, lane, x, xTile, whileMultiplying), products(t, lane, y, yTile)};
  llvm::SmallVector<mlir::Value> both = issueOnWarpgroup(t, x, xTile);
  size_t firstCount = both.size();
  llvm::append_range(both, issueOnWarpgroup(t, y, yTile));
  if (whileMultiplying)
    whileMultiplying();
  both = waitForProducts(t, both, /*pending=*/0);
  llvm::ArrayRef<mlir::Value> waited(both);
  return {llvm::SmallVector<mlir::Value>(waited.take_front(firstCount)),
          llvm::SmallVector<mlir::Value>(waited.drop_front(firstCount))};
}

void MmaAttentionKernelBase::pipelinedProductPair(
    const StreamedTile &tile, mlir::Value first, const RowFactor &x, mlir::Value xTile,
    const RowFactor &y, mlir::Value yTile, mlir::Value xArray, mlir::Value yArray,
    llvm::function_ref<void(mlir::Value, const Lane &)> updateBefore,
    llvm::function_ref<void(mlir::Value, const Lane &, llvm::ArrayRef<mlir::Value>,
                            llvm::ArrayRef<mlir::Value>)>
        body) {
  block.phase(
      [&](mlir::Value t) {
        Lane lane = laneOf(t, first);
        storeAccumulators(t, xArray, issueProducts(t, lane, x, xTile));
        storeAccumulators(t, yArray, issueProducts(t, lane, y, yTile));
        if (!tile.peeled)
          updateBefore(t, lane);
      },
      /*barrier=*/false);
  block.phase(
      [&](mlir::Value t) {
        llvm::SmallVector<mlir::Value> both = loadAccumulators(t, xArray, columnTiles);
        llvm::append_range(both, loadAccumulators(t, yArray, columnTiles));
        both = waitForProducts(t, both, tile.peeled ? 0 : 1);
        tile.copyNext(t);
        llvm::ArrayRef<mlir::Value> waited(both);
        body(t, laneOf(t, first), waited.take_front(waited.size() / 2),
             waited.drop_front(waited.size() / 2));
      },
      /*barrier=*/false);
}

llvm::SmallVector<mlir::Value> MmaAttentionKernelBase::issueProducts(mlir::Value t,
                                                                     const Lane &lane,
                                                                     const RowFactor &x,
                                                                     mlir::Value tile) {
  if (emulate == Emulation::None && warpgroupMma)
    return issueOnWarpgroup(t, x, tile);
  if (!emulatesWarpgroupMma())
    return products(t, lane, x, tile);
  noteProductsIssued(t, x, tile);
  return productsEmulated(t, lane, x, tile);
}

void MmaAttentionKernelBase::accumulate(mlir::Value t, const Lane &lane, mlir::Value factors,
                                        mlir::Value tile, mlir::Value acc, bool commit) {
  if (emulate != Emulation::None) {
    asyncOrder.noteMmaRead(t, tile);
    if (commit || !warpgroupMma)
      asyncOrder.commitMmas(t);
    accumulateEmulated(t, lane, factors, tile, acc);
    // mma.sync completes as issued.
    if (!warpgroupMma)
      asyncOrder.waitForMmas(t, /*pending=*/0);
  } else if (warpgroupMma)
    accumulateOnWarpgroup(t, factors, tile, acc, commit);
  else
    accumulateOnTensorCores(t, lane, factors, tile, acc);
}

llvm::SmallVector<mlir::Value>
MmaAttentionKernelBase::loadAccumulators(mlir::Value t, mlir::Value array, int64_t tiles) {
  llvm::SmallVector<mlir::Value> values;
  for (int64_t n = 0; n < rowTiles * tiles; ++n)
    for (int64_t r = 0; r < kAccumulators; ++r)
      values.push_back(kb.load(array, entry(t, n, r)));
  return values;
}

llvm::SmallVector<mlir::Value>
MmaAttentionKernelBase::waitForAccumulators(mlir::Value t, llvm::ArrayRef<mlir::Value> arrays,
                                            int64_t pending,
                                            llvm::ArrayRef<mlir::Value> alsoWaited) {
  if (!warpgroupMma || emulate != Emulation::None) {
    asyncOrder.waitForMmas(t, pending);
    return llvm::SmallVector<mlir::Value>(alsoWaited);
  }
  llvm::SmallVector<mlir::Value> values;
  for (mlir::Value acc : arrays)
    llvm::append_range(values, loadAccumulators(t, acc, dimTiles));
  int64_t dims = values.size();
  llvm::append_range(values, alsoWaited);
  values = mma.waitForWarpgroupMma(values, pending);
  llvm::ArrayRef<mlir::Value> waited(values);
  int64_t size = dims / std::max<int64_t>(arrays.size(), 1);
  for (auto [i, acc] : llvm::enumerate(arrays))
    storeAccumulators(t, acc, waited.slice(i * size, size));
  return llvm::SmallVector<mlir::Value>(waited.drop_front(dims));
}

llvm::SmallVector<mlir::Value> MmaAttentionKernelBase::rowFragment(mlir::Value t, const Lane &lane,
                                                                   const RowFactor &x, int64_t m,
                                                                   int64_t step) {
  if (x.shared) {
    // Lane l addresses row l % 16 of the row tile at column 16 step +
    // 8 (l / 16): the 8 x 8 matrices of rows 0-7 and 8-15 at columns
    // 0-7, then 8-15, are A registers 0-3.
    mlir::Value row =
        kb.addi(kb.addi(lane.warpRow, kb.remui(lane.lane, 16)), kb.index(m * MmaBuilder::kM));
    mlir::Value col = kb.addi(kb.muli(kb.divui(lane.lane, 16), 8), kb.index(step * MmaBuilder::kK));
    return mma.loadMatrices(x.array, {row, col}, 4, /*transposed=*/false);
  }
  llvm::SmallVector<mlir::Value> words;
  for (int64_t r = 0; r < kAccumulators; ++r)
    words.push_back(kb.load(x.array, entry(t, tileIndex(m, step, steps), r)));
  return words;
}

llvm::SmallVector<mlir::Value> MmaAttentionKernelBase::productsOnTensorCores(mlir::Value t,
                                                                             const Lane &lane,
                                                                             const RowFactor &x,
                                                                             mlir::Value tile) {
  // B of column tile n at step s is T[8n + g][16 s + 2q, + 1] and
  // [16 s + 8 + 2q, + 1]: the 8 x 8 matrices of T's rows 8n at columns
  // 16 s and 16 s + 8, those of column tile n + 1 with them in one
  // ldmatrix (lane l addresses row l % 8 of matrix l / 8), each for every
  // row tile. One step at a time: a row tile's A fragment is live for
  // one step only.
  static_assert(kAccumulators == 4, "two column tiles per ldmatrix");
  assert(columnTiles % 2 == 0 && "tiles of columns in pairs");
  mlir::Value row = kb.addi(kb.remui(lane.lane, 8), kb.muli(kb.divui(lane.lane, 16), 8));
  mlir::Value colInStep = kb.muli(kb.remui(kb.divui(lane.lane, 8), 2), 8);
  llvm::SmallVector<mlir::Value> result(rowTiles * columnTiles * kAccumulators, kb.f32(0.0));
  for (int64_t s = 0; s < steps; ++s) {
    llvm::SmallVector<llvm::SmallVector<mlir::Value>> a;
    for (int64_t m = 0; m < rowTiles; ++m)
      a.push_back(rowFragment(t, lane, x, m, s));
    mlir::Value col = kb.addi(colInStep, kb.index(s * MmaBuilder::kK));
    for (int64_t n = 0; n < columnTiles; n += 2) {
      llvm::SmallVector<mlir::Value> bWords = mma.loadMatrices(
          tile, {kb.addi(row, kb.index(n * MmaBuilder::kN)), col}, 4, /*transposed=*/false);
      for (int64_t pair = 0; pair < 2; ++pair) {
        for (int64_t m = 0; m < rowTiles; ++m) {
          auto acc = llvm::MutableArrayRef<mlir::Value>(result).slice(
              accumulatorIndex(m, n + pair, 0, columnTiles), kAccumulators);
          llvm::SmallVector<mlir::Value> updated =
              mma.multiply(a[m], llvm::ArrayRef<mlir::Value>(bWords).slice(pair * 2, 2), acc);
          llvm::copy(updated, acc.begin());
        }
      }
    }
  }
  return result;
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

void MmaAttentionKernelBase::forEachEmulatedStep(
    mlir::Value tile, int64_t words, bool kAlongRows,
    llvm::function_ref<void(int64_t, int64_t,
                            llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)>)>
        update) {
  if (!warpgroupMma)
    return update(0, words, [&](mlir::Value mn, mlir::Value k) {
      return widen(kb.load(tile, kAlongRows ? tileAt(k, mn) : tileAt(mn, k)));
    });
  for (int64_t step = 0; step * MmaBuilder::kWords < words; ++step) {
    MmaBuilder::DescribedTile described =
        mma.describedTile(tile, stepOperand(tile, step, kAlongRows));
    update(step * MmaBuilder::kWords, (step + 1) * MmaBuilder::kWords,
           [&](mlir::Value mn, mlir::Value k) {
             return widen(mma.describedElement(described, mn, kb.remui(k, MmaBuilder::kK)));
           });
  }
}

llvm::SmallVector<mlir::Value>
MmaAttentionKernelBase::issueOnWarpgroup(mlir::Value t, const RowFactor &x, mlir::Value tile) {
  assert(rowTiles == 1 && "a warp's 16 rows of a warpgroup's 64");
  assert(x.shared && "loop-invariant rows by descriptor (RowFactor)");
  mma.fenceForWarpgroupMma({});
  llvm::SmallVector<mlir::Value> acc;
  for (int64_t s = 0; s < steps; ++s) {
    MmaBuilder::SharedOperand b = stepOperand(tile, s, /*kAlongRows=*/false);
    acc = mma.warpgroupMultiply(rowsOperand(t, x.array, s), b, acc, columns);
  }
  mma.commitWarpgroupMma();
  return acc;
}

llvm::SmallVector<mlir::Value>
MmaAttentionKernelBase::productsOnWarpgroup(mlir::Value t, const RowFactor &x, mlir::Value tile,
                                            llvm::function_ref<void()> whileMultiplying,
                                            mlir::Value pending) {
  llvm::SmallVector<mlir::Value> acc = issueOnWarpgroup(t, x, tile);
  if (whileMultiplying)
    whileMultiplying();
  // One wait for both: the head-dim accumulators' MMAs came first.
  llvm::SmallVector<mlir::Value> pendingArrays;
  if (pending)
    pendingArrays.push_back(pending);
  return waitForAccumulators(t, pendingArrays, /*pending=*/0, acc);
}

void MmaAttentionKernelBase::accumulateOnWarpgroup(mlir::Value t, mlir::Value factors,
                                                   mlir::Value tile, mlir::Value acc, bool commit) {
  assert(rowTiles == 1 && "a warp's 16 rows of a warpgroup's 64");
  llvm::SmallVector<mlir::Value> registers;
  for (int64_t ks = 0; ks < columnSteps; ++ks)
    llvm::append_range(registers, factorFragment(t, factors, 0, ks));
  int64_t aWords = registers.size();
  llvm::append_range(registers, loadAccumulators(t, acc, dimTiles));
  registers = mma.fenceForWarpgroupMma(registers);
  llvm::ArrayRef<mlir::Value> a(registers);
  llvm::SmallVector<mlir::Value> sums(a.drop_front(aWords));
  for (int64_t ks = 0; ks < columnSteps; ++ks)
    sums = mma.warpgroupMultiply(a.slice(ks * kAccumulators, kAccumulators),
                                 stepOperand(tile, ks, /*kAlongRows=*/true), sums, paddedDim);
  if (commit)
    mma.commitWarpgroupMma();
  storeAccumulators(t, acc, sums);
}

llvm::SmallVector<mlir::Value> MmaAttentionKernelBase::productsEmulated(mlir::Value t,
                                                                        const Lane &lane,
                                                                        const RowFactor &x,
                                                                        mlir::Value tile) {
  using namespace mlir;
  SmallVector<Value> tileRows;
  for (int64_t m = 0; m < rowTiles; ++m)
    for (int64_t n = 0; n < columnTiles; ++n)
      for (int64_t r = 0; r < kAccumulators; ++r)
        tileRows.push_back(columnOf(lane, n, r));
  SmallVector<Value> sums(tileRows.size(), kb.f32(0.0));
  forEachEmulatedStep(
      tile, words, /*kAlongRows=*/false, [&](int64_t first, int64_t end, auto tElement) {
        // Shared rows of warpgroup MMAs are read through their descriptor.
        std::optional<MmaBuilder::DescribedTile> xTile;
        if (x.shared && warpgroupMma)
          xTile = mma.describedTile(x.array, rowsOperand(t, x.array, first / MmaBuilder::kWords));
        ValueRange updated =
            kb.forLoop(kb.index(first), kb.index(end), 1, sums, [&](Value w, ValueRange carried) {
              // Word w of row g (+ 8) of row tile m is in register (row / 8) +
              // 2 ((w % 8) / 4) of step w / 8 of lane 4 g + w % 4.
              Value holder =
                  kb.addi(lane.warpThread, kb.addi(kb.muli(lane.group, 4), kb.remui(w, 4)));
              Value step = kb.divui(w, MmaBuilder::kWords);
              Value highWords = kb.muli(kb.divui(kb.remui(w, MmaBuilder::kWords), 4), 2);
              Value c = kb.muli(w, 2);
              SmallVector<Value> next;
              for (auto [i, partial] : llvm::enumerate(carried)) {
                int64_t r = i % kAccumulators, m = i / (columnTiles * kAccumulators);
                Value xLow, xHigh;
                if (xTile) {
                  // The warp's row of the warpgroup's 64.
                  Value row = kb.addi(
                      kb.addi(kb.remui(lane.warpRow, MmaBuilder::kWarpgroupRows), lane.group),
                      kb.index((r / 2) * 8));
                  Value k = kb.remui(c, MmaBuilder::kK);
                  xLow = widen(mma.describedElement(*xTile, row, k));
                  xHigh = widen(mma.describedElement(*xTile, row, kb.addi(k, kb.index(1))));
                } else if (x.shared) {
                  Value row = kb.addi(kb.addi(lane.warpRow, lane.group),
                                      kb.index(m * MmaBuilder::kM + (r / 2) * 8));
                  xLow = widen(kb.load(x.array, {row, c}));
                  xHigh = widen(kb.load(x.array, {row, kb.addi(c, kb.index(1))}));
                } else {
                  Value reg = kb.addi(highWords, kb.index(r / 2));
                  Value fragment = kb.addi(step, kb.index(m * steps));
                  std::tie(xLow, xHigh) =
                      mma.unpack(kb.load(x.array, block.at(holder, {fragment, reg})));
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

llvm::SmallVector<mlir::Value>
MmaAttentionKernelBase::factorFragment(mlir::Value t, mlir::Value factors, int64_t m, int64_t ks) {
  auto packed = [&](int64_t n, int64_t r) {
    int64_t i = tileIndex(m, n, columnTiles);
    return mma.packRounded(kb.load(factors, entry(t, i, r)), kb.load(factors, entry(t, i, r + 1)));
  };
  return {packed(2 * ks, 0), packed(2 * ks, 2), packed(2 * ks + 1, 0), packed(2 * ks + 1, 2)};
}

void MmaAttentionKernelBase::accumulateOnTensorCores(mlir::Value t, const Lane &lane,
                                                     mlir::Value factors, mlir::Value tile,
                                                     mlir::Value acc) {
  llvm::SmallVector<mlir::Value> tileWords;
  for (int64_t ks = 0; ks < columnSteps; ++ks) {
    llvm::SmallVector<llvm::SmallVector<mlir::Value>> a;
    for (int64_t m = 0; m < rowTiles; ++m)
      a.push_back(factorFragment(t, factors, m, ks));
    // B of dim tile n is T[16 ks + 2q, + 1][8n + g] and the same 8 rows
    // on: the 8 x 8 matrices of T's rows 16 ks and 16 ks + 8 at column
    // 8n, transposed; two dim tiles per ldmatrix, each for every row
    // tile.
    mlir::Value row =
        kb.addi(kb.addi(kb.remui(lane.lane, 8), kb.muli(kb.remui(kb.divui(lane.lane, 8), 2), 8)),
                kb.index(ks * MmaBuilder::kK));
    for (int64_t n = 0; n < dimTiles; ++n) {
      if (n % 2 == 0) {
        mlir::Value col =
            kb.addi(kb.muli(kb.divui(lane.lane, 16), 8), kb.index(n * MmaBuilder::kN));
        tileWords = mma.loadMatrices(tile, {row, col}, 4, /*transposed=*/true);
      }
      llvm::ArrayRef<mlir::Value> bWords =
          llvm::ArrayRef<mlir::Value>(tileWords).slice((n % 2) * 2, 2);
      for (int64_t m = 0; m < rowTiles; ++m) {
        int64_t i = tileIndex(m, n, dimTiles);
        llvm::SmallVector<mlir::Value> sums;
        for (int64_t r = 0; r < kAccumulators; ++r)
          sums.push_back(kb.load(acc, entry(t, i, r)));
        for (auto [r, updated] : llvm::enumerate(mma.multiply(a[m], bWords, sums)))
          kb.store(updated, acc, entry(t, i, r));
      }
    }
  }
}

void MmaAttentionKernelBase::accumulateEmulated(mlir::Value t, const Lane &lane,
                                                mlir::Value factors, mlir::Value tile,
                                                mlir::Value acc) {
  using namespace mlir;
  SmallVector<Value> dims, initial;
  for (int64_t i = 0; i < rowTiles * dimTiles; ++i) {
    for (int64_t r = 0; r < kAccumulators; ++r) {
      dims.push_back(columnOf(lane, i % dimTiles, r));
      initial.push_back(kb.load(acc, entry(t, i, r)));
    }
  }
  auto rounded = [&](Value x) {
    return widen(arith::TruncFOp::create(b, loc, mma.narrowType(), x));
  };
  SmallVector<Value> sums(initial);
  forEachEmulatedStep(
      tile, columns / 2, /*kAlongRows=*/true, [&](int64_t first, int64_t end, auto tElement) {
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
                int64_t r = i % kAccumulators, m = i / (dimTiles * kAccumulators);
                Value factorTile = kb.addi(n, kb.index(m * columnTiles));
                auto factor = [&](int64_t reg) {
                  return rounded(kb.load(factors, block.at(holder, {factorTile, kb.index(reg)})));
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
  for (int64_t i = 0; i < rowTiles * dimTiles; ++i)
    for (int64_t r = 0; r < kAccumulators; ++r)
      kb.store(sums[i * kAccumulators + r], acc, entry(t, i, r));
}

void MmaAttentionKernelBase::waitForCopies(mlir::Value t, int64_t pending) {
  if (emulate == Emulation::None)
    mma.waitForCopies(pending);
  else
    asyncOrder.waitForCopies(t, pending);
}

void MmaAttentionKernelBase::noteProductsIssued(Value t, const RowFactor &x, Value tile) {
  asyncOrder.noteMmaRead(t, tile);
  if (x.shared)
    asyncOrder.noteMmaRead(t, x.array);
  asyncOrder.commitMmas(t);
}
