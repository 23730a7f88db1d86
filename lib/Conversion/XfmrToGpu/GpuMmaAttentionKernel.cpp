//===- GpuMmaAttentionKernel.cpp - bf16/f16 attention on tensor cores -*- C++ -*-===//
//
// FlashAttention-2 forward for bf16 or f16 q, k and v: both products on
// tensor cores (mma.sync.m16n8k16, GpuMma.h), the online softmax in f32
// registers. A block per (16 x warps query rows, head, batch), 8 warps (4
// for head dims up to 64) of 16 rows:
//
//   Q fragments <- the warp's rows of Q         registers, once
//   o = 0; m = -inf; l = 0                      registers
//   for each key tile of 64 (up to the block's causal limit):
//     K[64 x d], V[64 x d] -> shared            0 past the ends; where
//                                               16-byte loads are possible,
//                                               from registers loaded ahead
//     barrier
//     (next tile's K, V -> registers)           overlapping what follows
//     S = log2(e) (scale Q K^T + masks)         16 x 64 per warp: 8 x d/16 MMAs
//                                               (K fragments by ldmatrix);
//                                               masks and biases only on
//                                               tiles that may hide a key
//     m' = max(m, rowmax S)                     a row's 4 lanes: 2 shuffles
//     P = 2^(S - m'); l = l 2^(m - m') + rowsum P   (l per lane, summed
//                                               over the row's lanes at the end)
//     o = o 2^(m - m') + P V                    P's accumulators rounded and
//                                               repacked as A fragments:
//                                               4 x d/8 MMAs (V fragments by
//                                               ldmatrix.trans)
//     barrier
//   out = o / l (0 where nothing was visible); lse = m ln 2 + log l
//
// The exponentials are base 2 so that each is one approximate PTX
// instruction (ex2.approx, 2 ulp; math.exp2 with fastmath afn).
//
// Emulated, where a GPU thread feeds its own registers to an MMA, a thread
// reads the Q fragments or probabilities of the other lanes of its warp
// from their private arrays (written in an earlier phase) and computes its
// accumulators' dot products from them and the shared tiles: the tiling,
// staging, packing and softmax are checked on the CPU, the ldmatrix and
// MMA fragment layouts only on a GPU.
//
//===----------------------------------------------------------------------===//

#include "GpuAttentionKernelBase.h"
#include "GpuKernels.h"
#include "GpuMma.h"
#include "ThreadBlockBuilder.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;
using namespace xfmr::gpu;

namespace {

constexpr int64_t kWarpSize = MmaBuilder::kWarpSize;
constexpr int64_t kKeysPerTile = 64;
/// Accumulator tiles of S along the keys, and K steps of P V.
constexpr int64_t kKeyTiles = kKeysPerTile / MmaBuilder::kN;
constexpr int64_t kKeySteps = kKeysPerTile / MmaBuilder::kK;
constexpr int64_t kAccumulators = MmaBuilder::kAccumulators;
/// Shared rows are 8 elements (16 bytes) longer than their content, so that
/// the 8 rows of 16 bytes an ldmatrix reads hit 32 distinct banks.
constexpr int64_t kPadding = 8;
/// Static shared memory of a block.
constexpr int64_t kMaxSharedBytes = 48 * 1024;
/// Elements of a 16-byte load.
constexpr int64_t kVector = 8;

int64_t dimSteps(int64_t headDim) { return llvm::divideCeilSigned(headDim, MmaBuilder::kK); }

/// Warps of a block (16 query rows each): 8 where a thread's registers
/// allow one block per SM at most anyway, 4 for head dims up to 64, whose
/// 4-warp blocks fit several per SM (measured on an H100: 4 warps 1.3-1.5x
/// faster at head dim 64, 8 warps up to 1.2x faster at 128).
int64_t warpsFor(int64_t headDim) { return dimSteps(headDim) <= 4 ? 4 : 8; }

/// The K and V tiles: [keys, padded head dim + padding] 16-bit elements each.
int64_t sharedBytes(int64_t headDim) {
  return 2 * 2 * kKeysPerTile * (dimSteps(headDim) * MmaBuilder::kK + kPadding);
}

class MmaForwardKernel : AttentionKernelBase {
public:
  MmaForwardKernel(KernelBuilder &kb, const AttentionOperands &in, Emulation emulate)
      : AttentionKernelBase(kb, in), emulate(emulate), threads(warpsFor(headDim) * kWarpSize),
        rowsPerBlock(warpsFor(headDim) * MmaBuilder::kM), block(kb, emulate, threads),
        mma(kb, cast<MemRefType>(in.q.getType()).getElementType()), steps(dimSteps(headDim)),
        words(steps * MmaBuilder::kWords), paddedDim(steps * MmaBuilder::kK),
        dimTiles(paddedDim / MmaBuilder::kN) {}

  void emit() {
    Type narrow = mma.narrowType();
    SmallVector<int64_t> tileShape = {kKeysPerTile, paddedDim + kPadding};
    block.forEachBlock(
        {llvm::divideCeilSigned(seqQ, rowsPerBlock), heads, batch}, {tileShape, tileShape},
        [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
          emitBlock(ids[2], ids[1], kb.muli(ids[0], rowsPerBlock), shared[0], shared[1]);
        },
        {narrow, narrow});
  }

private:
  /// A thread's place: the first thread of its warp, its lane's group g and
  /// index q in the group, and its first query row (the warp's row g; the
  /// second is g + 8).
  struct Lane {
    Value warpThread, lane, group, inGroup, top;
  };
  Lane laneOf(Value t, Value q0) {
    Value warp = kb.divui(t, kWarpSize), lane = kb.remui(t, kWarpSize);
    auto [group, inGroup] = mma.laneCoordinates(lane);
    Value top = kb.addi(q0, kb.addi(kb.muli(warp, MmaBuilder::kM), group));
    return {kb.muli(warp, kWarpSize), lane, group, inGroup, top};
  }

  /// Entry (indices...) of a private array of thread t.
  SmallVector<Value> entry(Value t, int64_t i, std::optional<int64_t> j = std::nullopt) {
    SmallVector<Value> indices = {kb.index(i)};
    if (j)
      indices.push_back(kb.index(*j));
    return block.at(t, indices);
  }
  /// The query row of accumulator r.
  Value rowOf(const Lane &lane, int64_t r) { return kb.addi(lane.top, kb.index((r / 2) * 8)); }

  /// Whether elements c to c + width - 1 of a row of q, k or v (a sequence
  /// of `seq` rows) lie inside it, and the indices of their load, clamped
  /// to it.
  std::pair<Value, SmallVector<Value>> clampedRow(Value bi, Value hi, Value row, int64_t seq,
                                                  Value c, int64_t width) {
    Value inside = arith::AndIOp::create(b, loc, kb.below(row, seq), kb.below(c, headDim));
    return {inside,
            in.at(bi, kb.mini(row, kb.index(seq - 1)), hi, kb.mini(c, kb.index(headDim - width)))};
  }

  /// Element (row, c) of q, k or v, 0 past the sequence of `seq` rows or
  /// the head dim.
  Value element(Value operand, Value bi, Value hi, Value row, int64_t seq, Value c) {
    auto [inside, indices] = clampedRow(bi, hi, row, seq, c, 1);
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(mma.narrowType()));
    return kb.select(inside, kb.load(operand, indices), zero);
  }

  /// The word of elements 2w and 2w + 1 along the head dim of a row.
  Value rowWord(Value operand, Value bi, Value hi, Value row, int64_t seq, Value w) {
    Value c = kb.muli(w, 2);
    return mma.pack(mma.bits(element(operand, bi, hi, row, seq, c)),
                    mma.bits(element(operand, bi, hi, row, seq, kb.addi(c, kb.index(1)))));
  }

  void emitBlock(Value bi, Value hi, Value q0, Value keyStage, Value valueStage) {
    Value queryFragments = block.privateArray({steps, kAccumulators}, b.getI32Type());
    Value scores = block.privateArray({kKeyTiles, kAccumulators});
    Value acc = block.privateArray({dimTiles, kAccumulators});
    // Per row (g, g + 8): the running max, this lane's part of the running
    // sum, and the current tile's max.
    Value max = block.privateArray({2}), sum = block.privateArray({2});
    Value tileMax = block.privateArray({2});

    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t, q0);
          for (int64_t s = 0; s < steps; ++s) {
            for (int64_t r = 0; r < kAccumulators; ++r) {
              Value w = kb.addi(lane.inGroup, kb.index(s * MmaBuilder::kWords + (r / 2) * 4));
              Value row = kb.addi(lane.top, kb.index((r % 2) * 8));
              kb.store(rowWord(in.q, bi, hi, row, seqQ, w), queryFragments, entry(t, s, r));
            }
          }
          for (int64_t n = 0; n < dimTiles; ++n)
            for (int64_t r = 0; r < kAccumulators; ++r)
              kb.store(kb.f32(0.0), acc, entry(t, n, r));
          for (int64_t half = 0; half < 2; ++half) {
            kb.store(kb.f32(kNegInf), max, entry(t, half));
            kb.store(kb.f32(0.0), sum, entry(t, half));
          }
        },
        /*barrier=*/false);

    // Where 16-byte loads are possible, each thread loads its part of the
    // next tile into registers before the current tile's products, which
    // hide the loads' latency; else it loads element by element.
    Value aligned = readsVectors() ? vectorsAligned() : Value();
    Value keysAhead, valuesAhead;
    if (aligned) {
      auto type = VectorType::get({kVector}, mma.narrowType());
      keysAhead = block.privateArray({vectorSlots()}, type);
      valuesAhead = block.privateArray({vectorSlots()}, type);
      block.phase(
          [&](Value t) {
            kb.ifThen(aligned, [&] { loadAhead(t, bi, hi, kb.index(0), keysAhead, valuesAhead); });
          },
          /*barrier=*/false);
    }
    Value tiles = keyTileCount(q0, rowsPerBlock, kKeysPerTile);
    kb.forLoop(kb.index(0), tiles, 1, [&](Value tile) {
      Value k0 = kb.muli(tile, kKeysPerTile);
      block.phase([&](Value t) {
        auto scalars = [&] { emitStageLoad(t, bi, hi, k0, keyStage, valueStage); };
        if (!aligned)
          return scalars();
        kb.ifThenElse(
            aligned, [&] { storeAhead(t, keysAhead, valuesAhead, keyStage, valueStage); }, scalars);
      });
      if (aligned) {
        block.phase(
            [&](Value t) {
              Value next = kb.addi(tile, kb.index(1));
              kb.ifThen(arith::AndIOp::create(b, loc, aligned, kb.below(next, tiles)), [&] {
                loadAhead(t, bi, hi, kb.muli(next, kKeysPerTile), keysAhead, valuesAhead);
              });
            },
            /*barrier=*/false);
      }
      block.phase(
          [&](Value t) {
            Lane lane = laneOf(t, q0);
            SmallVector<Value> products =
                emulate == Emulation::None ? scoresOnTensorCores(t, lane, queryFragments, keyStage)
                                           : scoresEmulated(lane, queryFragments, keyStage);
            // Scores in base 2; masks and biases only where some key of the
            // tile may be hidden from some row of the warp.
            auto logits = [&](bool masked) {
              SmallVector<Value> rowMax(2, kb.f32(kNegInf));
              for (int64_t n = 0; n < kKeyTiles; ++n) {
                for (int64_t r = 0; r < kAccumulators; ++r) {
                  Value product = products[n * kAccumulators + r];
                  Value s;
                  if (masked) {
                    Value key = kb.addi(k0, kb.addi(mma.accumulatorCol(lane.inGroup, r),
                                                    kb.index(n * MmaBuilder::kN)));
                    s = score(bi, hi, rowOf(lane, r), key, kb.mul(product, kb.f32(in.scale)));
                    s = kb.mul(s, kb.f32(llvm::numbers::log2e));
                  } else {
                    s = kb.mul(product, kb.f32(in.scale * llvm::numbers::log2e));
                  }
                  kb.store(s, scores, entry(t, n, r));
                  rowMax[r / 2] = kb.max(rowMax[r / 2], s);
                }
              }
              for (int64_t half = 0; half < 2; ++half)
                kb.store(rowMax[half], tileMax, entry(t, half));
            };
            if (Value masked = tileNeedsMask(k0, lane))
              kb.ifThenElse(
                  masked, [&] { logits(true); }, [&] { logits(false); });
            else
              logits(true);
          },
          /*barrier=*/false);
      block.allReduceLanes({tileMax}, 2, /*laneBits=*/3,
                           [&](Value x, Value y) { return kb.max(x, y); });
      block.phase([&](Value t) { emitSoftmaxUpdate(t, scores, acc, max, sum, tileMax); },
                  /*barrier=*/false);
      block.phase([&](Value t) {
        Lane lane = laneOf(t, q0);
        if (emulate == Emulation::None)
          accumulateOnTensorCores(t, lane, scores, valueStage, acc);
        else
          accumulateEmulated(t, lane, scores, valueStage, acc);
      });
    });

    block.allReduceLanes({sum}, 2, /*laneBits=*/3, [&](Value x, Value y) { return kb.add(x, y); });
    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t, q0);
          for (int64_t half = 0; half < 2; ++half) {
            Value row = rowOf(lane, half * 2);
            kb.ifThen(kb.below(row, seqQ), [&] {
              Value l = kb.load(sum, entry(t, half));
              Value empty = kb.equals(l, 0.0);
              Value inverse = kb.select(empty, kb.f32(0.0), kb.div(kb.f32(1.0), l));
              for (int64_t n = 0; n < dimTiles; ++n) {
                for (int64_t r = half * 2; r < half * 2 + 2; ++r) {
                  Value c =
                      kb.addi(mma.accumulatorCol(lane.inGroup, r), kb.index(n * MmaBuilder::kN));
                  auto store = [&] {
                    kb.store(kb.mul(kb.load(acc, entry(t, n, r)), inverse), in.out,
                             in.at(bi, row, hi, c));
                  };
                  if ((n + 1) * MmaBuilder::kN > headDim)
                    kb.ifThen(kb.below(c, headDim), store);
                  else
                    store();
                }
              }
              if (in.lse) {
                kb.ifThen(kb.below(lane.inGroup, 1), [&] {
                  Value lse =
                      kb.fma(kb.load(max, entry(t, half)), kb.f32(llvm::numbers::ln2), kb.log(l));
                  kb.store(kb.select(empty, kb.f32(kNegInf), lse), in.lse, {bi, hi, row});
                });
              }
            });
          }
        },
        /*barrier=*/false);
  }

  /// Whether the key tile at k0 may hide a key from a row of the lane's
  /// warp: it runs past seq_k or, when causal, past the first row's last
  /// key. Null when every tile may (with biases, which each score adds).
  Value tileNeedsMask(Value k0, const Lane &lane) {
    if (in.keyBias || in.bias)
      return Value();
    Value lastKey = kb.addi(k0, kb.index(kKeysPerTile - 1));
    Value masked = kb.below(kb.index(seqK - 1), lastKey);
    if (in.causal) {
      // The warp's first row is the lane's row less its group.
      Value firstRow = arith::SubIOp::create(b, loc, lane.top, lane.group);
      Value firstRowKeys = kb.addi(firstRow, kb.index(seqK - seqQ));
      // Signed: with seq_k < seq_q the first rows see no key at all.
      Value hidden =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, firstRowKeys, lastKey);
      masked = arith::OrIOp::create(b, loc, masked, hidden);
    }
    return masked;
  }

  /// 2^(x - max), 0 where x is -inf: a masked key, or any key of a row
  /// that has seen none (whose max is -inf).
  Value probability2(Value x, Value max) {
    Value power = math::Exp2Op::create(
        b, loc, kb.sub(x, max),
        arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::afn));
    return kb.select(kb.equals(x, kNegInf), kb.f32(0.0), power);
  }

  /// Whether k and v have a head dim of whole 16-byte vectors with unit
  /// stride: then, where their addresses, offsets and other strides are
  /// multiples of 16 bytes (vectorsAligned, at run time), tiles are staged
  /// 16 bytes per load.
  bool readsVectors() const {
    if (headDim % kVector)
      return false;
    return llvm::all_of(std::array<Value, 2>{in.k, in.v}, [&](Value operand) {
      auto [strides, offset] = cast<MemRefType>(operand.getType()).getStridesAndOffset();
      return strides[in.dims.headDim] == 1;
    });
  }
  Value vectorsAligned() {
    Value aligned = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
    auto multipleOf = [&](Value x, int64_t factor) {
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, kb.remui(x, factor),
                                   kb.index(0));
    };
    for (Value operand : {in.k, in.v}) {
      auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, operand);
      Value pointer = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, operand);
      SmallVector<Value> checks = {multipleOf(pointer, 2 * kVector),
                                   multipleOf(metadata.getOffset(), kVector)};
      for (auto [dim, stride] : llvm::enumerate(metadata.getStrides()))
        if (dim != in.dims.headDim)
          checks.push_back(multipleOf(stride, kVector));
      for (Value check : checks)
        aligned = arith::AndIOp::create(b, loc, aligned, check);
    }
    return aligned;
  }

  /// Elements c to c + 7 of a row of k or v, 0 past the sequence of `seq`
  /// rows or the head dim.
  Value rowVector(Value operand, Value bi, Value hi, Value row, int64_t seq, Value c) {
    auto type = VectorType::get({kVector}, mma.narrowType());
    auto [inside, indices] = clampedRow(bi, hi, row, seq, c, kVector);
    Value value = vector::LoadOp::create(b, loc, type, operand, indices, /*nontemporal=*/false,
                                         llvm::Align(2 * kVector));
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(type));
    return kb.select(inside, value, zero);
  }

  /// 16-byte vectors of a K or V tile per thread: slot j of thread t holds
  /// vector t + j * threads of the tile (row-major, paddedDim / 8 a row).
  int64_t vectorSlots() const {
    return llvm::divideCeilSigned(kKeysPerTile * paddedDim / kVector, threads);
  }

  /// Calls `body(slot, key, c)` for thread t's vectors of a tile: row `key`
  /// of the tile, elements c to c + 7.
  void forEachVector(Value t, function_ref<void(int64_t, Value, Value)> body) {
    int64_t chunks = paddedDim / kVector, total = kKeysPerTile * chunks;
    for (int64_t slot = 0; slot < vectorSlots(); ++slot) {
      Value i = kb.addi(t, kb.index(slot * threads));
      auto atSlot = [&] { body(slot, kb.divui(i, chunks), kb.muli(kb.remui(i, chunks), kVector)); };
      if ((slot + 1) * threads > total)
        kb.ifThen(kb.below(i, total), atSlot);
      else
        atSlot();
    }
  }

  /// Thread t's vectors of the K and V tile at k0 into its registers.
  void loadAhead(Value t, Value bi, Value hi, Value k0, Value keysAhead, Value valuesAhead) {
    forEachVector(t, [&](int64_t slot, Value key, Value c) {
      for (auto [operand, ahead] : {std::pair(in.k, keysAhead), std::pair(in.v, valuesAhead)})
        kb.store(rowVector(operand, bi, hi, kb.addi(k0, key), seqK, c), ahead, entry(t, slot));
    });
  }

  /// ... and from its registers into the shared tiles.
  void storeAhead(Value t, Value keysAhead, Value valuesAhead, Value keyStage, Value valueStage) {
    forEachVector(t, [&](int64_t slot, Value key, Value c) {
      for (auto [ahead, stage] :
           {std::pair(keysAhead, keyStage), std::pair(valuesAhead, valueStage)})
        vector::StoreOp::create(b, loc, kb.load(ahead, entry(t, slot)), stage, {key, c},
                                /*nontemporal=*/false, llvm::Align(2 * kVector));
    });
  }

  /// Thread t's share of staging the key tile at k0: rows of K and V into
  /// keyStage and valueStage, consecutive threads along the head dim.
  void emitStageLoad(Value t, Value bi, Value hi, Value k0, Value keyStage, Value valueStage) {
    kb.forLoop(t, kb.index(kKeysPerTile * paddedDim), threads, [&](Value i) {
      Value key = kb.divui(i, paddedDim), c = kb.remui(i, paddedDim);
      for (auto [operand, stage] : {std::pair(in.k, keyStage), std::pair(in.v, valueStage)})
        kb.store(element(operand, bi, hi, kb.addi(k0, key), seqK, c), stage, {key, c});
    });
  }

  /// The words of `count` 8 x 8 matrices of 16-bit elements in `stage`
  /// (ldmatrix, transposed when `transposed`), the lane giving the address
  /// of its row: row `row` of the stage from column `col`. Lane l holds
  /// row l / 4, elements 2 (l % 4) and + 1, of each (transposed) matrix.
  SmallVector<Value> loadMatrices(Value stage, Value row, Value col, int64_t count,
                                  bool transposed) {
    MLIRContext *context = b.getContext();
    int64_t rowLength = cast<MemRefType>(stage.getType()).getDimSize(1);
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, stage);
    Value offset = kb.muli(kb.addi(kb.muli(row, rowLength), col), 2);
    Value address = arith::IndexCastOp::create(b, loc, b.getI64Type(), kb.addi(base, offset));
    Value pointer =
        LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(context, 3), address);
    Type i32 = b.getI32Type();
    Type type = LLVM::LLVMStructType::getLiteral(context, SmallVector<Type>(count, i32));
    auto load = NVVM::LdMatrixOp::create(
        b, loc, type, pointer, b.getI32IntegerAttr(count),
        NVVM::MMALayoutAttr::get(context, transposed ? NVVM::MMALayout::col : NVVM::MMALayout::row),
        NVVM::LdStMatrixShapeAttr::get(context, 8, 8),
        NVVM::LdStMatrixEltTypeAttr::get(context, NVVM::LdStMatrixEltType::B16));
    SmallVector<Value> words;
    for (int64_t i = 0; i < count; ++i)
      words.push_back(LLVM::ExtractValueOp::create(b, loc, load.getRes(), i));
    return words;
  }

  /// Q K^T of the thread's accumulators, tile n's r at n * 4 + r.
  SmallVector<Value> scoresOnTensorCores(Value t, const Lane &lane, Value queryFragments,
                                         Value keyStage) {
    // B of step s is K[8n + g][16 s + 2q, + 1] and [16 s + 8 + 2q, + 1]:
    // the 8 x 8 matrices of K's rows at columns 16 s and 16 s + 8, two
    // steps per ldmatrix (lane l addresses row l % 8 of matrix l / 8).
    Value matrixRow = kb.remui(lane.lane, 8), matrix = kb.divui(lane.lane, 8);
    SmallVector<Value> result;
    for (int64_t n = 0; n < kKeyTiles; ++n) {
      SmallVector<Value> tileAcc(kAccumulators, kb.f32(0.0));
      Value key = kb.addi(matrixRow, kb.index(n * MmaBuilder::kN));
      for (int64_t s = 0; s < steps; s += 2) {
        int64_t count = s + 1 < steps ? 4 : 2;
        Value col = kb.addi(kb.muli(kb.remui(matrix, count), 8), kb.index(s * MmaBuilder::kK));
        SmallVector<Value> bWords = loadMatrices(keyStage, key, col, count, /*transposed=*/false);
        for (int64_t step = s; step < s + count / 2; ++step) {
          SmallVector<Value> a;
          for (int64_t r = 0; r < kAccumulators; ++r)
            a.push_back(kb.load(queryFragments, entry(t, step, r)));
          tileAcc = mma.multiply(a, ArrayRef<Value>(bWords).slice((step - s) * 2, 2), tileAcc);
        }
      }
      llvm::append_range(result, tileAcc);
    }
    return result;
  }

  /// The same products, each a dot product over the words of the query row
  /// (from the fragments of the lane holding them) and the key's elements.
  SmallVector<Value> scoresEmulated(const Lane &lane, Value queryFragments, Value keyStage) {
    SmallVector<Value> keys;
    for (int64_t n = 0; n < kKeyTiles; ++n)
      for (int64_t r = 0; r < kAccumulators; ++r)
        keys.push_back(kb.addi(mma.accumulatorCol(lane.inGroup, r), kb.index(n * MmaBuilder::kN)));
    SmallVector<Value> zeros(keys.size(), kb.f32(0.0));
    ValueRange sums =
        kb.forLoop(kb.index(0), kb.index(words), 1, zeros, [&](Value w, ValueRange carried) {
          // Word w of query row g (+ 8) is in register (row / 8) + 2 ((w % 8) / 4)
          // of step w / 8 of lane 4 g + w % 4.
          Value holder = kb.addi(lane.warpThread, kb.addi(kb.muli(lane.group, 4), kb.remui(w, 4)));
          Value step = kb.divui(w, MmaBuilder::kWords);
          Value highWords = kb.muli(kb.divui(kb.remui(w, MmaBuilder::kWords), 4), 2);
          SmallVector<Value> next;
          for (auto [i, partial] : llvm::enumerate(carried)) {
            int64_t r = i % kAccumulators;
            Value reg = kb.addi(highWords, kb.index(r / 2));
            auto [qLow, qHigh] = mma.unpack(kb.load(queryFragments, block.at(holder, {step, reg})));
            Value c = kb.muli(w, 2);
            Value kLow = widen(kb.load(keyStage, {keys[i], c}));
            Value kHigh = widen(kb.load(keyStage, {keys[i], kb.addi(c, kb.index(1))}));
            next.push_back(kb.fma(qHigh, kHigh, kb.fma(qLow, kLow, partial)));
          }
          return next;
        });
    return SmallVector<Value>(sums);
  }

  /// The online-softmax step of the thread's two rows: the new max from
  /// the tile's, the scores turned into probabilities, the sums and
  /// accumulators rescaled.
  void emitSoftmaxUpdate(Value t, Value scores, Value acc, Value max, Value sum, Value tileMax) {
    for (int64_t half = 0; half < 2; ++half) {
      SmallVector<Value> row = entry(t, half);
      Value oldMax = kb.load(max, row);
      Value newMax = kb.max(oldMax, kb.load(tileMax, row));
      Value correction = probability2(oldMax, newMax);
      Value tileSum = kb.f32(0.0);
      for (int64_t n = 0; n < kKeyTiles; ++n) {
        for (int64_t r = half * 2; r < half * 2 + 2; ++r) {
          Value p = probability2(kb.load(scores, entry(t, n, r)), newMax);
          kb.store(p, scores, entry(t, n, r));
          tileSum = kb.add(tileSum, p);
        }
      }
      kb.store(kb.fma(kb.load(sum, row), correction, tileSum), sum, row);
      kb.store(newMax, max, row);
      for (int64_t n = 0; n < dimTiles; ++n)
        for (int64_t r = half * 2; r < half * 2 + 2; ++r)
          kb.store(kb.mul(kb.load(acc, entry(t, n, r)), correction), acc, entry(t, n, r));
    }
  }

  /// acc += P V: the probabilities of key tiles 2 ks and 2 ks + 1, rounded
  /// and packed, are the A fragment of key step ks.
  void accumulateOnTensorCores(Value t, const Lane &lane, Value scores, Value valueStage,
                               Value acc) {
    SmallVector<Value> valueWords;
    for (int64_t ks = 0; ks < kKeySteps; ++ks) {
      auto probabilities = [&](int64_t n, int64_t r) {
        return mma.pack(mma.roundedBits(kb.load(scores, entry(t, n, r))),
                        mma.roundedBits(kb.load(scores, entry(t, n, r + 1))));
      };
      SmallVector<Value> a = {probabilities(2 * ks, 0), probabilities(2 * ks, 2),
                              probabilities(2 * ks + 1, 0), probabilities(2 * ks + 1, 2)};
      // B of dim tile n is V[16 ks + 2q, + 1][8n + g] and the same 8 keys
      // on: the 8 x 8 matrices of V's rows 16 ks and 16 ks + 8 at column
      // 8n, transposed; two dim tiles per ldmatrix.
      Value key =
          kb.addi(kb.addi(kb.remui(lane.lane, 8), kb.muli(kb.remui(kb.divui(lane.lane, 8), 2), 8)),
                  kb.index(ks * MmaBuilder::kK));
      for (int64_t n = 0; n < dimTiles; ++n) {
        if (n % 2 == 0) {
          Value col = kb.addi(kb.muli(kb.divui(lane.lane, 16), 8), kb.index(n * MmaBuilder::kN));
          valueWords = loadMatrices(valueStage, key, col, 4, /*transposed=*/true);
        }
        ArrayRef<Value> bWords = ArrayRef<Value>(valueWords).slice((n % 2) * 2, 2);
        SmallVector<Value> sums;
        for (int64_t r = 0; r < kAccumulators; ++r)
          sums.push_back(kb.load(acc, entry(t, n, r)));
        for (auto [r, updated] : llvm::enumerate(mma.multiply(a, bWords, sums)))
          kb.store(updated, acc, entry(t, n, r));
      }
    }
  }

  /// The same update, each accumulator a dot product over the keys of the
  /// row's rounded probabilities (from the lanes holding them) and V's
  /// column.
  void accumulateEmulated(Value t, const Lane &lane, Value scores, Value valueStage, Value acc) {
    SmallVector<Value> columns, initial;
    for (int64_t n = 0; n < dimTiles; ++n) {
      for (int64_t r = 0; r < kAccumulators; ++r) {
        columns.push_back(
            kb.addi(mma.accumulatorCol(lane.inGroup, r), kb.index(n * MmaBuilder::kN)));
        initial.push_back(kb.load(acc, entry(t, n, r)));
      }
    }
    auto rounded = [&](Value p) {
      return widen(arith::TruncFOp::create(b, loc, mma.narrowType(), p));
    };
    ValueRange sums = kb.forLoop(
        kb.index(0), kb.index(kKeysPerTile / 2), 1, initial, [&](Value w, ValueRange carried) {
          // Keys 2w and 2w + 1 of row g (+ 8) are accumulators (row / 8) * 2
          // and + 1 of tile w / 4 of lane 4 g + w % 4.
          Value holder = kb.addi(lane.warpThread, kb.addi(kb.muli(lane.group, 4), kb.remui(w, 4)));
          Value n = kb.divui(w, 4);
          SmallVector<Value> next;
          for (auto [i, partial] : llvm::enumerate(carried)) {
            int64_t r = i % kAccumulators;
            Value pLow = rounded(kb.load(scores, block.at(holder, {n, kb.index((r / 2) * 2)})));
            Value pHigh =
                rounded(kb.load(scores, block.at(holder, {n, kb.index((r / 2) * 2 + 1)})));
            Value key = kb.muli(w, 2);
            Value vLow = widen(kb.load(valueStage, {key, columns[i]}));
            Value vHigh = widen(kb.load(valueStage, {kb.addi(key, kb.index(1)), columns[i]}));
            next.push_back(kb.fma(pHigh, vHigh, kb.fma(pLow, vLow, partial)));
          }
          return next;
        });
    int64_t i = 0;
    for (int64_t n = 0; n < dimTiles; ++n)
      for (int64_t r = 0; r < kAccumulators; ++r)
        kb.store(sums[i++], acc, entry(t, n, r));
  }

  Emulation emulate;
  int64_t threads, rowsPerBlock;
  ThreadBlockBuilder block;
  MmaBuilder mma;
  /// MMA steps along the head dim, its words, its length padded to steps,
  /// and the accumulator tiles of the output along it.
  int64_t steps, words, paddedDim, dimTiles;
};

} // namespace

bool xfmr::gpu::fitsMmaAttention(const AttentionOperands &operands) {
  Type element = cast<MemRefType>(operands.q.getType()).getElementType();
  int64_t headDim = cast<MemRefType>(operands.q.getType()).getDimSize(operands.dims.headDim);
  return (element.isBF16() || element.isF16()) && sharedBytes(headDim) <= kMaxSharedBytes;
}

void xfmr::gpu::emitMmaAttention(KernelBuilder &kb, const AttentionOperands &operands,
                                 Emulation emulate) {
  MmaForwardKernel(kb, operands, emulate).emit();
}
