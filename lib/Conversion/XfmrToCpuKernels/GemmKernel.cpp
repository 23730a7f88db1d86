//===- GemmKernel.cpp - register-tiled GEMM with a fused epilogue --*- C++ -*-===//
//
// C = epilogue(A B). Threads take blocks of C: a chunk of columns times a
// band of rows (bands only when there are too few column chunks to keep the
// threads busy, as in the small products of training). Within a block each
// panel of 2 vectors of columns is swept down the band's row tiles, so the
// panel of B it reads (K x 2 vectors, contiguous along N) stays in L2 while
// A's rows stream by. A tile's accumulators stay in registers over the whole K loop
// and the epilogue (bias, activation, residual) is applied to them before
// the one store. Column tails use masked loads and stores; row tails a
// smaller tile. B may be bf16 or f16 (narrow weights), widened as it is
// loaded or packed, or int8 with scales (xfmr.dequantize), converted and
// scaled as it is loaded or packed, or 4 bits a value, unpacked the same
// way. Products of a few rows (decoding) stream B once, as dot products of
// rows of A and B^T (or slabs of B). With an integer dot
// product (vpdpbusd, vpmaddubsw), products of an int8 or 4-bit B^T quantize
// A to int8 and take integer dot products instead: the skinny ones, and
// GEMMs of weights in groups along K (16, 32 or a multiple, or one per
// channel) of a depth a multiple of 32 (with vpmaddubsw, 4-bit ones only). With AVX-512 BF16, GEMMs
// of bf16 A and B take vdpbf16ps on the stored values.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "../LoweringUtils.h"
#include "xfmr/Conversion/KernelLimits.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <algorithm>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;

namespace {

/// At most this many panels of columns per parallel chunk: small enough
/// that threads balance, large enough that each chunk streams a useful
/// amount of B.
constexpr int64_t kPanelsPerChunk = 4;
/// Parallel blocks the partition aims for, and the fewest register tiles of
/// rows a band may have.
constexpr int64_t kTargetBlocks = 8;
constexpr int64_t kMinTilesPerBand = 4;
/// Bytes after which addresses map to the same L1 set, the lines a set
/// holds, and a cache line.
constexpr int64_t kL1SetBytes = 4096;
constexpr int64_t kL1Ways = 8;
constexpr int64_t kCacheLineBytes = 64;

struct GemmOperands {
  Value a, b, c, bias, residual;
  /// For the up product of a gated MLP: the activated gate [M, N] that
  /// multiplies each output after its bias; null otherwise.
  Value multiplier;
  /// For an int8 or 4-bit B (xfmr.dequantize, `bits`): its scales, one per
  /// `groupSize` values along dimension `groupAxis` of B's storage (and
  /// mins, for groups that have them); null otherwise.
  Value bScales, bMins;
  int64_t groupAxis = 0, groupSize = 1, bits = 8;
  /// A is stored [K, M]; B is stored [N, K].
  bool transposeA, transposeB;
  int64_t m, n, k;
  Activation activation;

  /// Whether B's scales are one per output channel (groups along K that
  /// span it), which a product may apply to its sums instead of to every
  /// value.
  bool scalesPerChannel() const {
    return bScales && bits == 8 && !bMins && groupAxis == (transposeB ? 1 : 0) && groupSize == k;
  }

  /// `valid` lanes of B's storage from (row, col) along its rows, as f32:
  /// bf16 and f16 widened, int8 converted and (unless `unscaled`) scaled,
  /// in registers.
  Value loadB(VectorBuilder &kb, Value row, Value col, int64_t valid = -1,
              bool unscaled = false) const {
    if (!bScales)
      return kb.loadVectorWidened(b, {row, col}, valid);
    OpBuilder &builder = kb.builder();
    Location loc = kb.location();
    VectorType wide = kb.vectorType();
    auto narrow = VectorType::get(wide.getShape(), builder.getI8Type());
    Value zeros = arith::ConstantOp::create(
        builder, loc, DenseElementsAttr::get(narrow, builder.getI8IntegerAttr(0)));
    if (bits == 4)
      return loadNibbles(kb, row, col, [&](Value byteCol) {
        return kb.loadVector(b, {row, byteCol}, valid, zeros);
      });
    Value values =
        arith::SIToFPOp::create(builder, loc, wide, kb.loadVector(b, {row, col}, valid, zeros));
    if (unscaled)
      return values;
    // Groups along the rows: the lanes lie in one group (emitGemm checks).
    auto perGroup = [&](Value of) {
      return groupAxis == 0 ? kb.loadVectorWidened(of, {kb.divui(row, groupSize), col}, valid)
                            : kb.splat(kb.loadWidened(of, {row, kb.divui(col, groupSize)}));
    };
    return bMins ? kb.fma(values, perGroup(bScales), perGroup(bMins))
                 : kb.mul(values, perGroup(bScales));
  }
  /// The 4-bit values of B^T's row `row` from column `col` (a vector, or
  /// one lane when `load` returns a scalar) as f32: `load` reads the bytes
  /// from a byte column; a vector of up to 16 values aligned to its width
  /// lies in one half of a block of 32, the low nibbles of bytes (col / 32)
  /// * 16 + col % 16 on, or the high ones.
  Value loadNibbles(VectorBuilder &kb, Value row, Value col,
                    llvm::function_ref<Value(Value)> load) const {
    OpBuilder &builder = kb.builder();
    Location loc = kb.location();
    Value within = kb.remui(col, 32);
    Value bytes = load(kb.addi(kb.muli(kb.divui(col, 32), 16), kb.remui(within, 16)));
    auto vector = dyn_cast<VectorType>(bytes.getType());
    Type i32 = builder.getI32Type(), f32 = builder.getF32Type();
    auto like = [&](Type element) -> Type {
      return vector ? Type(VectorType::get(vector.getShape(), element)) : element;
    };
    auto splatInt = [&](Value scalar) -> Value {
      return vector ? Value(vector::BroadcastOp::create(builder, loc, like(i32), scalar)) : scalar;
    };
    Value shift = arith::IndexCastOp::create(builder, loc, i32, kb.muli(kb.divui(within, 16), 4));
    Value nibbles = arith::AndIOp::create(
        builder, loc,
        arith::ShRUIOp::create(builder, loc, arith::ExtUIOp::create(builder, loc, like(i32), bytes),
                               splatInt(shift)),
        splatInt(arith::ConstantIntOp::create(builder, loc, i32, 15)));
    Value q = arith::UIToFPOp::create(builder, loc, like(f32), nibbles);
    auto splatF32 = [&](Value scalar) { return vector ? kb.splat(scalar) : scalar; };
    Value group = kb.divui(col, groupSize);
    Value scale = splatF32(kb.loadWidened(bScales, {row, group}));
    if (bMins)
      return kb.fma(q, scale, splatF32(kb.loadWidened(bMins, {row, group})));
    Value eight = vector ? kb.splat(8.0) : kb.f32(8.0);
    return kb.mul(kb.sub(q, eight), scale);
  }

  /// B's storage at (row, col) as f32.
  Value loadBScalar(VectorBuilder &kb, Value row, Value col) const {
    if (!bScales)
      return kb.loadWidened(b, {row, col});
    if (bits == 4)
      return loadNibbles(kb, row, col, [&](Value byteCol) { return kb.load(b, {row, byteCol}); });
    OpBuilder &builder = kb.builder();
    Value value = arith::SIToFPOp::create(builder, kb.location(), builder.getF32Type(),
                                          kb.load(b, {row, col}));
    auto perGroup = [&](Value of) {
      return groupAxis == 0 ? kb.loadWidened(of, {kb.divui(row, groupSize), col})
                            : kb.loadWidened(of, {row, kb.divui(col, groupSize)});
    };
    return bMins ? kb.fma(value, perGroup(bScales), perGroup(bMins))
                 : kb.mul(value, perGroup(bScales));
  }
};

/// The epilogue of output element (m, n) on a vector of `valid` columns
/// from n (or a scalar): bias, activation, multiplier, residual, store.
/// `bias` is the bias at n where the caller has loaded it already.
void storeFinished(VectorBuilder &kb, const GemmOperands &g, Value value, Value m, Value n,
                   int64_t valid, bool scalar, Value bias = {}) {
  OpBuilder &b = kb.builder();
  if (g.bias && !bias)
    bias = scalar ? kb.load(g.bias, {n}) : kb.loadVector(g.bias, {n}, valid);
  if (bias)
    value = kb.add(value, bias);
  value = lowering::buildActivation(b, kb.location(), g.activation, value);
  if (g.multiplier)
    value = kb.mul(value, scalar ? kb.load(g.multiplier, {m, n})
                                 : kb.loadVector(g.multiplier, {m, n}, valid));
  if (g.residual)
    value = kb.add(value,
                   scalar ? kb.load(g.residual, {m, n}) : kb.loadVector(g.residual, {m, n}, valid));
  if (scalar)
    kb.store(value, g.c, {m, n});
  else
    kb.storeVector(value, g.c, {m, n}, valid);
}

/// Where a tile reads B: the weight itself (`packed` null), or a packed
/// panel `packed[panel][k][0 .. 2 * lanes)` whose rows are contiguous.
struct PanelSource {
  Value packed, panel;
};

/// One register tile: rows [row, row + rows), `vectors` vectors of columns
/// from `col`, the last holding `lastValid` valid lanes.
void emitGemmTile(VectorBuilder &kb, const GemmOperands &g, Value row, int64_t rows, Value col,
                  int64_t vectors, int64_t lastValid, PanelSource source) {
  int64_t lanes = kb.cpu().lanes;
  auto valid = [&](int64_t j) { return j + 1 == vectors ? lastValid : lanes; };
  auto column = [&](int64_t j) { return kb.addi(col, kb.index(j * lanes)); };
  auto rowIndex = [&](int64_t i) { return kb.addi(row, kb.index(i)); };

  Tile tile{rows, vectors, {}};
  for (int64_t i = 0; i < rows * vectors; ++i)
    tile.values.push_back(kb.splat(0.0));
  tile = emitTileUpdate(
      kb, tile, kb.index(0), kb.index(g.k),
      [&](int64_t i, Value k) {
        return g.transposeA ? kb.load(g.a, {k, rowIndex(i)}) : kb.load(g.a, {rowIndex(i), k});
      },
      [&](int64_t j, Value k) {
        if (source.packed)
          return kb.loadVector(source.packed, {source.panel, k, kb.index(j * lanes)});
        return g.loadB(kb, k, column(j), valid(j));
      });

  // The bias vectors are loaded once for all the tile's rows.
  SmallVector<Value> biasVectors(vectors);
  for (int64_t j = 0; g.bias && j < vectors; ++j)
    biasVectors[j] = kb.loadVector(g.bias, {column(j)}, valid(j));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < vectors; ++j)
      storeFinished(kb, g, tile.at(i, j), rowIndex(i), column(j), valid(j), /*scalar=*/false,
                    biasVectors[j]);
}

/// The row tiles of rows [row, row + rows) of the columns
/// [col, col + vectors * lanes).
void emitGemmPanel(VectorBuilder &kb, const GemmOperands &g, Value row, int64_t rows, Value col,
                   int64_t vectors, int64_t lastValid, PanelSource source = {}) {
  kb.forRowTiles(row, rows, kb.cpu().tileRows(), [&](Value tileRow, int64_t tileRows) {
    emitGemmTile(kb, g, tileRow, tileRows, col, vectors, lastValid, source);
  });
}

/// A as a fresh [M, K + one cache line] buffer when its rows are a multiple
/// of 4 KiB long (K = 1024, 3072, ...) and a register tile has more rows
/// than the L1 cache has ways: the tile reads the same k of all its rows at
/// once, and rows that far apart share one L1 set, evicting each other at
/// every k. The copy, one parallel pass over A, costs about 2% of such a
/// product.
Value padAliasedRows(VectorBuilder &kb, const GemmOperands &g) {
  Type element = cast<MemRefType>(g.a.getType()).getElementType();
  int64_t bytes = element.getIntOrFloatBitWidth() / 8;
  int64_t lanes = kb.cpu().lanes;
  // Rows of 4 KiB hold whole vectors: the copy needs no masked tail.
  if (g.transposeA || kb.cpu().tileRows() <= kL1Ways || (g.k * bytes) % kL1SetBytes != 0)
    return g.a;
  Value padded = kb.allocate({g.m, g.k + kCacheLineBytes / bytes}, element);
  forEachRow(kb, g.m, g.k, [&](Value row) {
    kb.forLoop(kb.index(0), kb.index(g.k), lanes, [&](Value k) {
      kb.storeVector(kb.loadVector(g.a, {row, k}), padded, {row, k});
    });
  });
  return padded;
}

/// Copies the full panels of columns [begin, end) of B into
/// packed[panel][k][0 .. 2 * lanes): each tile then reads B sequentially
/// instead of one row stride (a new page, for wide weights) per k. A B
/// stored [N, K] is transposed on the way, lanes x lanes at a time in
/// registers.
void packPanels(VectorBuilder &kb, const GemmOperands &g, Value packed, Value begin, Value end) {
  int64_t lanes = kb.cpu().lanes, panel = 2 * lanes;
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  kb.forLoop(begin, end, panel, [&](Value col) {
    Value index = kb.divui(arith::SubIOp::create(b, loc, col, begin), panel);
    if (!g.transposeB) {
      kb.forLoop(kb.index(0), kb.index(g.k), 1, [&](Value k) {
        for (int64_t j = 0; j < 2; ++j) {
          Value offset = kb.index(j * lanes);
          kb.storeVector(g.loadB(kb, k, kb.addi(col, offset)), packed, {index, k, offset});
        }
      });
      return;
    }
    int64_t fullDepth = g.k / lanes * lanes;
    kb.forLoop(kb.index(0), kb.index(fullDepth), lanes, [&](Value k) {
      for (int64_t j = 0; j < 2; ++j) {
        SmallVector<Value> rows;
        for (int64_t r = 0; r < lanes; ++r)
          rows.push_back(g.loadB(kb, kb.addi(col, kb.index(j * lanes + r)), k));
        for (auto [c, column] : llvm::enumerate(kb.transpose(rows)))
          kb.storeVector(column, packed, {index, kb.addi(k, kb.index(c)), kb.index(j * lanes)});
      }
    });
    kb.forLoop(kb.index(fullDepth), kb.index(g.k), 1, [&](Value k) {
      kb.forLoop(kb.index(0), kb.index(panel), 1, [&](Value j) {
        kb.store(g.loadBScalar(kb, kb.addi(col, j), k), packed, {index, k, j});
      });
    });
  });
}

/// The last `tail` columns of a B stored [N, K], as packed[0][k][j] (0 past
/// the tail).
void packTail(VectorBuilder &kb, const GemmOperands &g, Value packed, int64_t tail) {
  int64_t panel = 2 * kb.cpu().lanes;
  kb.forLoop(kb.index(0), kb.index(g.k), 1, [&](Value k) {
    for (int64_t j = 0; j < panel; ++j) {
      Value value = j < tail ? g.loadBScalar(kb, kb.index(g.n - tail + j), k) : kb.f32(0.0);
      kb.store(value, packed, {kb.index(0), k, kb.index(j)});
    }
  });
}

/// The most row bands of equal height, `minRows` or more each, that
/// `columnChunks` chunks of columns need to make kTargetBlocks blocks; 1 if
/// no such split exists.
int64_t rowBands(int64_t m, int64_t columnChunks, int64_t minRows) {
  for (int64_t candidate = (kTargetBlocks + columnChunks - 1) / columnChunks; candidate > 1;
       --candidate)
    if (m % candidate == 0 && m / candidate >= minRows)
      return candidate;
  return 1;
}

/// Rows up to which a product with a B [K, N] counts as skinny, and the
/// slabs K is cut into.
constexpr int64_t kSkinnyRows = xfmr::kSkinnyProductRows;
constexpr int64_t kSkinnySlabs = 16;

/// C = epilogue(A B) for B [K, N]: partial[s] = A[:, slab s] B[slab s, :],
/// each slab of B read row after row, then C = sum over s of partial[s].
void emitSkinnyGemmAlongK(VectorBuilder &kb, const GemmOperands &g) {
  int64_t lanes = kb.cpu().lanes;
  int64_t slabs = std::min(kSkinnySlabs, g.k);
  int64_t slabRows = (g.k + slabs - 1) / slabs;
  slabs = (g.k + slabRows - 1) / slabRows;
  int64_t vectors = (g.n + lanes - 1) / lanes, lastValid = g.n - (vectors - 1) * lanes;
  OpBuilder &b = kb.builder();
  Value partial = kb.allocate({slabs, g.m, vectors * lanes}, b.getF32Type());
  kb.parallelFor(slabs, [&](Value slab) {
    Value begin = kb.muli(slab, slabRows);
    Value end = kb.mini(kb.addi(begin, kb.index(slabRows)), kb.index(g.k));
    for (int64_t m = 0; m < g.m; ++m)
      kb.forLoop(kb.index(0), kb.index(vectors * lanes), lanes, [&](Value col) {
        kb.storeVector(kb.splat(0.0), partial, {slab, kb.index(m), col});
      });
    kb.forLoop(begin, end, 1, [&](Value k) {
      SmallVector<Value> a;
      for (int64_t m = 0; m < g.m; ++m)
        a.push_back(kb.splat(kb.load(g.a, {kb.index(m), k})));
      auto update = [&](Value col, int64_t valid) {
        Value row = g.loadB(kb, k, col, valid, /*unscaled=*/g.scalesPerChannel());
        for (int64_t m = 0; m < g.m; ++m) {
          SmallVector<Value> at = {slab, kb.index(m), col};
          kb.storeVector(kb.fma(a[m], row, kb.loadVector(partial, at)), partial, at);
        }
      };
      kb.forLoop(kb.index(0), kb.index((vectors - 1) * lanes), lanes,
                 [&](Value col) { update(col, lanes); });
      update(kb.index((vectors - 1) * lanes), lastValid);
    });
  });
  // Sums and epilogue, a vector of columns at a time.
  kb.parallelFor(vectors, [&](Value vector) {
    Value col = kb.muli(vector, lanes);
    auto finish = [&](int64_t valid) {
      for (int64_t m = 0; m < g.m; ++m) {
        Value sum = kb.splat(0.0);
        for (int64_t s = 0; s < slabs; ++s)
          sum = kb.add(sum, kb.loadVector(partial, {kb.index(s), kb.index(m), col}));
        if (g.scalesPerChannel())
          sum = kb.mul(sum, kb.loadVectorWidened(g.bScales, {kb.index(0), col}, valid));
        storeFinished(kb, g, sum, kb.index(m), col, valid, /*scalar=*/false);
      }
    };
    if (lastValid == lanes)
      return finish(lanes);
    kb.ifThenElse(
        kb.below(vector, vectors - 1), [&] { finish(lanes); }, [&] { finish(lastValid); });
  });
}

/// Calls `step(k, valid)` for the columns [k, k + valid) of a sweep of
/// [0, depth) `width` at a time, the accumulators `acc` (which `step`
/// updates) carried through the loop of full steps, the tail step after it.
void sweepDepth(VectorBuilder &kb, int64_t depth, int64_t width, SmallVector<Value> &acc,
                llvm::function_ref<void(Value, int64_t)> step) {
  int64_t full = depth / width * width;
  if (full)
    acc = llvm::to_vector(
        kb.forLoop(kb.index(0), kb.index(full), width, acc, [&](Value k, ValueRange carried) {
          acc.assign(carried.begin(), carried.end());
          step(k, width);
          return acc;
        }));
  if (depth > full)
    step(kb.index(full), depth - full);
}

/// Rows up to which a product of B^T [N, K] takes dot products of rows
/// (emitDotBlocks) rather than packing B for register tiles: decode steps,
/// of one sequence or a batch, whose few rows cannot repay the packing.
constexpr int64_t kDotBlockRows = xfmr::kSmallProductRows;
/// The most rows of A a dot-product block takes at once, and the most rows
/// of B (fewer where the accumulators would not fit the registers).
constexpr int64_t kDotGroupRows = 6;
constexpr int64_t kDotBlockColumns = 8;
/// Bytes of A's rows a depth chunk spans, and of a band's accumulators kept
/// between chunks: together a 32 KiB L1 (measured best of 8-64 KiB at 16
/// rows). Chunks are taken where a block's rows are at least 4 times its
/// columns: its reads of A then outweigh those of B.
constexpr int64_t kDotChunkBytes = 16 * 1024;
constexpr int64_t kDotBandBytes = 16 * 1024;
constexpr int64_t kDotChunkRowsPerColumn = 4;
/// Bands a chunked product keeps at least, where it has the blocks: work for
/// the threads.
constexpr int64_t kDotMinBands = 8;

/// The sum of a vector's lanes by a halving tree, written out so that its
/// order is the same wherever it appears (a reassociating reduction leaves
/// the order to LLVM, which may combine it with its neighbours').
Value sumLanesInOrder(VectorBuilder &kb, Value vector) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  for (int64_t n = cast<VectorType>(vector.getType()).getNumElements(); n > 1; n /= 2) {
    Value low = vector::ExtractStridedSliceOp::create(b, loc, vector, {0}, {n / 2}, {1});
    Value high = vector::ExtractStridedSliceOp::create(b, loc, vector, {n / 2}, {n / 2}, {1});
    vector = arith::AddFOp::create(b, loc, low, high);
  }
  return vector::ExtractOp::create(b, loc, vector, ArrayRef<int64_t>{0});
}

/// The products of B^T [N, K] with an A of at most kDotBlockRows rows, each
/// output a dot product of A's row with a row of B. A block of a few rows of
/// B is read along K `width` values a step (`loadB(n, col, valid)`), each
/// step multiplied in registers with a group of up to 6 rows of A
/// (`loadA(a, indices, valid)`, `multiplyAdd(acc, a, b)`), then with the next
/// group: B streams from memory once, the later groups find the block in L1
/// or L2, and the groups prefetch the next block meanwhile. Where A's rows
/// would not stay in L1 beside it (several groups, long rows), a parallel
/// task takes a band of blocks and sweeps them a chunk of K at a time, their
/// accumulators kept in a scratch buffer between chunks: A's chunk is read
/// from L2 once a band, not once a block. Each output sums in one chain of
/// vectors, in K's order whatever the chunks, whose lanes are then added
/// (times B's scale where it has one per output channel) and finished by the
/// epilogue: the same order for a row whatever the number of rows.
void emitDotBlocks(VectorBuilder &kb, const GemmOperands &g, int64_t width,
                   llvm::function_ref<Value(Value, Value, int64_t)> loadB,
                   llvm::function_ref<Value(Value, ValueRange, int64_t)> loadA,
                   llvm::function_ref<Value(Value, Value, Value)> multiplyAdd) {
  // Groups of rows as even as they can be; accumulators for a group's rows
  // x the block's columns, plus the block's vectors of B and one of A.
  int64_t groups = (g.m + kDotGroupRows - 1) / kDotGroupRows;
  int64_t groupRows = (g.m + groups - 1) / groups;
  int64_t columns =
      std::clamp<int64_t>((kb.cpu().registers - 1) / (groupRows + 1), 2, kDotBlockColumns);
  // With one group nothing rereads the block while the next could arrive.
  bool prefetch = groups > 1;
  int64_t blocks = (g.n + columns - 1) / columns, tail = g.n - (blocks - 1) * columns;
  // Bytes of A's rows at one position of K.
  int64_t columnBytes = cast<MemRefType>(g.a.getType()).getElementTypeBitWidth() / 8 * g.m;
  bool chunked = g.m >= kDotChunkRowsPerColumn * columns;
  int64_t chunk = chunked ? std::max(width, kDotChunkBytes / columnBytes / width * width)
                          : std::max<int64_t>(g.k, 1);
  int64_t chunks = (g.k + chunk - 1) / chunk;
  int64_t lanes = kb.cpu().lanes;
  int64_t bandBlocks = chunks > 1
                           ? std::clamp<int64_t>(kDotBandBytes / (g.m * columns * lanes * 4), 1,
                                                 (blocks + kDotMinBands - 1) / kDotMinBands)
                           : 1;
  int64_t bands = (blocks + bandBlocks - 1) / bandBlocks;
  Value lastRow = kb.index(g.n - 1);
  int64_t lastChunk = (chunks - 1) * chunk;
  // A's rows lie K values apart, often a multiple of 4 KiB: in the same sets
  // of L1. Swept in chunks, they are first copied to [chunk][row][k], each
  // chunk of rows contiguous.
  Value aChunks;
  if (chunks > 1) {
    Type element = cast<MemRefType>(g.a.getType()).getElementType();
    aChunks = kb.allocate({chunks, g.m, chunk}, element);
    Value zeros =
        arith::ConstantOp::create(kb.builder(), kb.location(),
                                  DenseElementsAttr::get(VectorType::get({width}, element),
                                                         kb.builder().getFloatAttr(element, 0.0)));
    kb.parallelFor(g.m, [&](Value row) {
      auto copyChunk = [&](Value k0, int64_t depth) {
        SmallVector<Value> none;
        sweepDepth(kb, depth, width, none, [&](Value k, int64_t valid) {
          Value values = kb.loadVector(g.a, {row, kb.addi(k0, k)}, valid, zeros);
          kb.storeVector(values, aChunks, {kb.divui(k0, chunk), row, k}, valid);
        });
      };
      kb.forLoop(kb.index(0), kb.index(lastChunk), chunk, [&](Value k0) { copyChunk(k0, chunk); });
      copyChunk(kb.index(lastChunk), g.k - lastChunk);
    });
  }
  kb.parallelFor(bands, [&](Value band) {
    Value firstBlock = bandBlocks == 1 ? band : kb.muli(band, bandBlocks);
    // The band's accumulators between chunks, by block, row and column.
    Value scratch;
    if (chunks > 1) {
      scratch = kb.allocate({bandBlocks * g.m * columns, lanes}, kb.builder().getF32Type());
      kb.forLoop(kb.index(0), kb.index(bandBlocks * g.m * columns), 1, [&](Value i) {
        kb.storeVector(kb.splat(0.0), scratch, {i, kb.index(0)});
      });
    }
    // Block `inBand` of the band (from column n) over K's [k0, k0 + depth): from zeros (a
    // single chunk) or the scratch, to the scratch or (the last chunk)
    // finished into C.
    auto sweep = [&](Value inBand, Value n, int64_t blockColumns, Value k0, int64_t depth,
                     bool last) {
      auto column = [&](int64_t c) { return kb.addi(n, kb.index(c)); };
      auto accIndex = [&](int64_t r, int64_t c) -> SmallVector<Value> {
        return {kb.addi(kb.muli(inBand, g.m * columns), kb.index(r * columns + c)), kb.index(0)};
      };
      int64_t rows = 0;
      for (int64_t group = 0, first = 0; group < groups; ++group, first += rows) {
        rows = g.m / groups + (group < g.m % groups ? 1 : 0);
        SmallVector<Value> acc;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < blockColumns; ++c)
            acc.push_back(scratch ? kb.loadVector(scratch, accIndex(first + r, c)) : kb.splat(0.0));
        sweepDepth(kb, depth, width, acc, [&](Value step, int64_t valid) {
          Value k = chunks == 1 ? step : kb.addi(k0, step);
          // Group j prefetches the next block's rows j, j + groups, ...
          for (int64_t c = group; prefetch && c < columns; c += groups)
            kb.prefetch(g.b, {kb.mini(column(columns + c), lastRow),
                              g.bits == 4 && g.bScales ? kb.divui(k, 2) : k});
          SmallVector<Value> bVectors;
          for (int64_t c = 0; c < blockColumns; ++c)
            bVectors.push_back(loadB(column(c), k, valid));
          for (int64_t r = 0; r < rows; ++r) {
            Value row = kb.index(first + r);
            Value aVector = aChunks ? loadA(aChunks, {kb.divui(k0, chunk), row, step}, valid)
                                    : loadA(g.a, {row, k}, valid);
            for (int64_t c = 0; c < blockColumns; ++c)
              acc[r * blockColumns + c] =
                  multiplyAdd(acc[r * blockColumns + c], aVector, bVectors[c]);
          }
        });
        for (int64_t c = 0; c < blockColumns; ++c) {
          Value scale = last && g.scalesPerChannel()
                            ? kb.loadWidened(g.bScales, {column(c), kb.index(0)})
                            : Value();
          for (int64_t r = 0; r < rows; ++r) {
            Value sum = acc[r * blockColumns + c];
            if (!last) {
              kb.storeVector(sum, scratch, accIndex(first + r, c));
              continue;
            }
            sum = sumLanesInOrder(kb, sum);
            storeFinished(kb, g, scale ? kb.mul(sum, scale) : sum, kb.index(first + r), column(c),
                          1, /*scalar=*/true);
          }
        }
      }
    };
    // The band's blocks over one chunk; the last block of C may be short.
    auto sweepBand = [&](Value k0, int64_t depth, bool last) {
      auto sweepBlock = [&](Value inBand) {
        Value block = bandBlocks == 1 ? band : kb.addi(firstBlock, inBand);
        Value n = kb.muli(block, columns);
        if (tail == columns || blocks == 1)
          return sweep(inBand, n, tail, k0, depth, last);
        kb.ifThenElse(
            kb.below(block, blocks - 1), [&] { sweep(inBand, n, columns, k0, depth, last); },
            [&] { sweep(inBand, n, tail, k0, depth, last); });
      };
      if (bandBlocks == 1)
        return sweepBlock(kb.index(0));
      Value left = arith::SubIOp::create(kb.builder(), kb.location(), kb.index(blocks), firstBlock);
      kb.forLoop(kb.index(0), kb.mini(kb.index(bandBlocks), left), 1, sweepBlock);
    };
    if (chunks > 1)
      kb.forLoop(kb.index(0), kb.index(lastChunk), chunk,
                 [&](Value k0) { sweepBand(k0, chunk, /*last=*/false); });
    sweepBand(kb.index(lastChunk), g.k - lastChunk, /*last=*/true);
  });
}

/// C = epilogue(A B^T) for B [N, K] in f32 (B widened, or int8 converted, in
/// registers), a vector of lanes a step.
void emitDotBlocksF32(VectorBuilder &kb, const GemmOperands &g) {
  emitDotBlocks(
      kb, g, kb.cpu().lanes,
      [&](Value n, Value col, int64_t valid) {
        return g.loadB(kb, n, col, valid, /*unscaled=*/g.scalesPerChannel());
      },
      [&](Value a, ValueRange at, int64_t valid) { return kb.loadVector(a, at, valid); },
      [&](Value acc, Value a, Value b) { return kb.fma(a, b, acc); });
}

/// C = epilogue(A B^T) for a bf16 A and a bf16 B^T [N, K] (K even) on
/// AVX-512 BF16: the products of `--dtype=bf16` decoding, both read as
/// stored, 32 values a step on vdpbf16ps (a lane adds the products of two
/// adjacent values: exact, as the f32 kernels' of widened values), where
/// widening each value took two instructions more.
void emitDotBlocksBf16Dot(VectorBuilder &kb, const GemmOperands &g) {
  OpBuilder &b = kb.builder();
  Type bf16 = b.getBF16Type();
  Value zeros = arith::ConstantOp::create(
      b, kb.location(),
      DenseElementsAttr::get(VectorType::get({32}, bf16), b.getFloatAttr(bf16, 0.0)));
  emitDotBlocks(
      kb, g, 32,
      [&](Value n, Value col, int64_t valid) {
        return kb.loadVector(g.b, {n, col}, valid, zeros);
      },
      [&](Value a, ValueRange at, int64_t valid) { return kb.loadVector(a, at, valid, zeros); },
      [&](Value acc, Value a, Value b) { return kb.dotBf16(acc, a, b); });
}

/// A splat constant vector of integers.
Value splatInt(OpBuilder &b, Location loc, VectorType type, int64_t value) {
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getIntegerAttr(type.getElementType(), value)));
}

/// Per lane of a chunk of integer dot products (4 values a lane) at `col`
/// spanning `chunkBlocks` blocks of 32, row `row`'s entry of `buffer` (f32,
/// f16 or bf16; one entry per `group` values along K, a multiple of 32) for
/// the lane's block, block `blockOfLane(lane)` of the chunk (clamped to the
/// last of `blocks`: a chunk past K reads zeros there), as f32. A whole
/// chunk (`whole`) takes one entry (the chunk lies in one group) or its
/// groups' entries in one load and a shuffle (groups dividing the chunk);
/// a tail loads, widens and broadcasts each block's and selects.
Value chunkBlockLanes(VectorBuilder &kb, llvm::function_ref<int64_t(int64_t)> blockOfLane,
                      int64_t chunkBlocks, Value buffer, Value row, Value col, int64_t blocks,
                      int64_t group, bool whole) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  int64_t lanes = kb.cpu().lanes;
  Value first = kb.divui(col, 32);
  auto entryOf = [&](Value block) {
    return kb.loadWidened(buffer, {row, kb.divui(kb.muli(block, 32), group)});
  };
  if (chunkBlocks == 1 || (whole && group % (32 * chunkBlocks) == 0))
    return kb.splat(entryOf(first));
  SmallVector<int64_t> laneBlocks = llvm::map_to_vector(llvm::seq<int64_t>(0, lanes), blockOfLane);
  if (whole && (32 * chunkBlocks) % group == 0) {
    // In bounds: a whole chunk's groups are groups of K.
    int64_t groups = 32 * chunkBlocks / group;
    Type element = cast<MemRefType>(buffer.getType()).getElementType();
    Value entries = vector::LoadOp::create(b, loc, VectorType::get({groups}, element), buffer,
                                           ValueRange{row, kb.divui(col, group)});
    if (!element.isF32())
      entries = arith::ExtFOp::create(b, loc, VectorType::get({groups}, b.getF32Type()), entries);
    SmallVector<int64_t> laneGroups =
        llvm::map_to_vector(laneBlocks, [&](int64_t laneBlock) { return laneBlock * 32 / group; });
    return vector::ShuffleOp::create(b, loc, entries, entries, laneGroups);
  }
  Value result = kb.splat(entryOf(first));
  for (int64_t block = 1; block < chunkBlocks; ++block) {
    Value inBlock = arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(VectorType::get({lanes}, b.getI1Type()),
                               llvm::to_vector(llvm::map_range(laneBlocks, [&](int64_t laneBlock) {
                                 return laneBlock == block;
                               }))));
    Value entry = entryOf(kb.mini(kb.addi(first, kb.index(block)), kb.index(blocks - 1)));
    result = kb.select(inBlock, kb.splat(entry), result);
  }
  return result;
}

/// 127 / `largest` (the largest magnitude of values to quantize to int8),
/// or 0 where it is 0 or NaN: their values then round to 0, and the NaN
/// reaches the outputs through the scale.
Value inverseScale(VectorBuilder &kb, Value largest) {
  OpBuilder &b = kb.builder();
  Value positive =
      arith::CmpFOp::create(b, kb.location(), arith::CmpFPredicate::OGT, largest, kb.f32(0.0));
  return kb.select(positive, kb.div(kb.f32(127.0), largest), kb.f32(0.0));
}

/// Row `row` of A quantized to int8 as the integer dot products take it: its
/// scale (its largest magnitude over 127; a NaN reaches it, and through it
/// the outputs) stored at aScales[row], then `store(k, valid, ints)` for each
/// vector of its values from k, rounded to the nearest multiple of the scale
/// (as i32 lanes).
void quantizeRowOfA(VectorBuilder &kb, const GemmOperands &g, Value row, Value aScales,
                    llvm::function_ref<void(Value, int64_t, Value)> store) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  int64_t lanes = kb.cpu().lanes, full = g.k / lanes * lanes, tail = g.k - full;
  auto magnitude = [&](Value k, int64_t valid) -> Value {
    return math::AbsFOp::create(b, loc, kb.loadVector(g.a, {row, k}, valid));
  };
  Value largest =
      kb.forLoop(kb.index(0), kb.index(full), lanes, ValueRange{kb.splat(0.0)},
                 [&](Value k, ValueRange carried) -> SmallVector<Value> {
                   return {arith::MaximumFOp::create(b, loc, carried[0], magnitude(k, lanes))};
                 })[0];
  if (tail)
    largest = arith::MaximumFOp::create(b, loc, largest, magnitude(kb.index(full), tail));
  largest = vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXIMUMF, largest);
  kb.store(kb.div(largest, kb.f32(127.0)), aScales, {row});
  Value inverse = kb.splat(inverseScale(kb, largest));
  auto quantize = [&](Value k, int64_t valid) {
    Value scaled =
        math::RoundEvenOp::create(b, loc, kb.mul(kb.loadVector(g.a, {row, k}, valid), inverse));
    auto ints = VectorType::get({lanes}, b.getI32Type());
    store(k, valid, arith::FPToSIOp::create(b, loc, ints, scaled));
  };
  kb.forLoop(kb.index(0), kb.index(full), lanes, [&](Value k) { quantize(k, lanes); });
  if (tail)
    quantize(kb.index(full), tail);
}

/// Row `row` of A quantized to int8 as llama.cpp's q8_0, per block of 32
/// values (K a multiple of 32): the block's scale d = its largest magnitude
/// / 127 (a NaN reaches it), rounded to f16, stored at aScales[row, k / 32];
/// then `store(k, ints)` for each vector of the block from k, its values
/// rounded to even at 127 / (largest magnitude) in f32 (as i32 lanes), as
/// llama.cpp's x86 quantize_row_q8_0 rounds them; with `aSums`, the sum of
/// each `sumSpan` of them (16 or 32) at aSums[row, k / sumSpan].
void quantizeBlocksOfA(VectorBuilder &kb, const GemmOperands &g, Value row, Value aScales,
                       llvm::function_ref<void(Value, Value)> store, Value aSums = {},
                       int64_t sumSpan = 32) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  constexpr int64_t kBlock = 32;
  int64_t lanes = kb.cpu().lanes;
  assert(kBlock % sumSpan == 0 && sumSpan % lanes == 0 && "sums of whole vectors of a block");
  auto ints = VectorType::get({lanes}, b.getI32Type());
  kb.forLoop(kb.index(0), kb.index(g.k), kBlock, [&](Value k) {
    SmallVector<Value> values;
    Value largest = kb.splat(0.0);
    for (int64_t v = 0; v < kBlock / lanes; ++v) {
      values.push_back(kb.loadVector(g.a, {row, kb.addi(k, kb.index(v * lanes))}));
      largest =
          arith::MaximumFOp::create(b, loc, largest, math::AbsFOp::create(b, loc, values.back()));
    }
    largest = vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXIMUMF, largest);
    Value scale = kb.div(largest, kb.f32(127.0));
    Value half = arith::TruncFOp::create(b, loc, b.getF16Type(), scale);
    kb.store(arith::ExtFOp::create(b, loc, b.getF32Type(), half), aScales,
             {row, kb.divui(k, kBlock)});
    Value inverse = kb.splat(inverseScale(kb, largest));
    Value sum;
    for (int64_t v = 0; v < kBlock / lanes; ++v) {
      Value at = kb.addi(k, kb.index(v * lanes));
      Value quantized = arith::FPToSIOp::create(
          b, loc, ints, math::RoundEvenOp::create(b, loc, kb.mul(values[v], inverse)));
      store(at, quantized);
      if (!aSums)
        continue;
      sum = sum ? arith::AddIOp::create(b, loc, sum, quantized).getResult() : quantized;
      if ((v + 1) * lanes % sumSpan == 0) {
        Value span = kb.divui(kb.addi(k, kb.index((v + 1) * lanes - sumSpan)), sumSpan);
        kb.store(vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, sum), aSums,
                 {row, span});
        sum = {};
      }
    }
  });
}

/// Vectors of groups of B that sumGroupsOfA pads its rows to.
int64_t groupVectors(const GemmOperands &g, int64_t lanes) {
  return (g.k / g.groupSize + lanes - 1) / lanes;
}

/// Row `row` of A's dequantized values summed over each group of B at
/// aGroupSums[row, group] (zeros up to whole vectors of groups): each span's
/// sum of integers (aSpanSums, spans of `span` values) times its block's
/// scale. B's offsets and mins multiply these.
void sumGroupsOfA(VectorBuilder &kb, const GemmOperands &g, Value row, Value aScales,
                  Value aSpanSums, int64_t span, Value aGroupSums) {
  OpBuilder &b = kb.builder();
  int64_t lanes = kb.cpu().lanes, spansPerGroup = g.groupSize / span;
  kb.storeVector(kb.splat(0.0), aGroupSums, {row, kb.index((groupVectors(g, lanes) - 1) * lanes)});
  kb.forLoop(kb.index(0), kb.index(g.k / g.groupSize), 1, [&](Value group) {
    Value sum = kb.f32(0.0);
    for (int64_t i = 0; i < spansPerGroup; ++i) {
      Value at = kb.addi(kb.muli(group, spansPerGroup), kb.index(i));
      Value ints =
          arith::SIToFPOp::create(b, kb.location(), b.getF32Type(), kb.load(aSpanSums, {row, at}));
      sum = kb.fma(ints, kb.load(aScales, {row, kb.divui(kb.muli(at, span), 32)}), sum);
    }
    kb.store(sum, aGroupSums, {row, group});
  });
}

/// Calls `body(first, rows)` for the rows of A in balanced groups of at
/// most `most` rows. The skinny integer dot products keep each row's
/// accumulators whatever the group, so a row sums in the same order in a
/// product of any number of rows (xfmr::kSmallProductRows), and a group's
/// accumulators fit the registers.
void forRowGroups(int64_t m, int64_t most, llvm::function_ref<void(int64_t, int64_t)> body) {
  assert(most > 0 && "a group holds at least one row");
  int64_t groups = (m + most - 1) / most, rows = (m + groups - 1) / groups;
  for (int64_t first = 0; first < m; first += rows)
    body(first, std::min(rows, m - first));
}

/// Stores outputs (first + i, n), i < `rows`, of a skinny dot product: the
/// sum of each one's `unroll` accumulators acc[i * unroll + u] and, given
/// `offsets`, of its offsets' share, per lane `offsets(group, valid)` (a
/// vector of row n of B's per-group values from `group`) times A's row's
/// group sums.
void storeWithGroupShares(VectorBuilder &kb, const GemmOperands &g, Value n, int64_t first,
                          int64_t rows, Value aGroupSums, ArrayRef<Value> acc, int64_t unroll,
                          llvm::function_ref<Value(Value, int64_t)> offsets) {
  SmallVector<Value> totals(rows, kb.splat(0.0));
  if (offsets)
    sweepDepth(kb, g.k / g.groupSize, kb.cpu().lanes, totals, [&](Value group, int64_t valid) {
      Value row = offsets(group, valid);
      for (int64_t i = 0; i < rows; ++i)
        totals[i] = kb.fma(row, kb.loadVector(aGroupSums, {kb.index(first + i), group}), totals[i]);
    });
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t u = 0; u < unroll; ++u)
      totals[i] = kb.add(totals[i], acc[i * unroll + u]);
    storeFinished(kb, g, sumLanesInOrder(kb, totals[i]), kb.index(first + i), n, 1,
                  /*scalar=*/true);
  }
}

/// Row `n` of an int8 B from `col`, `valid` of 4 x lanes bytes (zeros past
/// them), plus the target's int8Offset() as dotInt8 takes them.
Value loadInt8Operand(VectorBuilder &kb, const GemmOperands &g, Value n, Value col, int64_t valid) {
  OpBuilder &b = kb.builder();
  auto bytes = VectorType::get({4 * kb.cpu().lanes}, b.getI8Type());
  Value values = kb.loadVector(g.b, {n, col}, valid, splatInt(b, kb.location(), bytes, 0));
  if (!kb.cpu().int8Offset())
    return values;
  assert(kb.cpu().int8Offset() == 128 && "offset to unsigned bytes");
  return arith::XOrIOp::create(b, kb.location(), values, splatInt(b, kb.location(), bytes, -128));
}

/// 2 x `count` values of row `n` of a 4-bit B from `col` (`validBytes`
/// bytes, zeros past them) as two vectors of `count` bytes: the low nibbles
/// of its bytes, and their high ones.
std::array<Value, 2> loadNibblePlanes(VectorBuilder &kb, const GemmOperands &g, Value n, Value col,
                                      int64_t count, int64_t validBytes) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  auto type = VectorType::get({count}, b.getI8Type());
  Value bytes = kb.loadVector(g.b, {n, kb.divui(col, 2)}, validBytes, splatInt(b, loc, type, 0));
  Value mask = splatInt(b, loc, type, 0x0F);
  return {arith::AndIOp::create(b, loc, bytes, mask),
          arith::AndIOp::create(
              b, loc, arith::ShRUIOp::create(b, loc, bytes, splatInt(b, loc, type, 4)), mask)};
}

/// 4 x lanes values of row `n` of a 4-bit B from `col` (`validBytes` bytes,
/// zeros past them) as bytes, the low nibbles of its bytes then their high
/// ones, shuffled by `order`.
Value loadNibbleBytes(VectorBuilder &kb, const GemmOperands &g, Value n, Value col,
                      int64_t validBytes, ArrayRef<int64_t> order) {
  auto [low, high] = loadNibblePlanes(kb, g, n, col, 2 * kb.cpu().lanes, validBytes);
  return vector::ShuffleOp::create(kb.builder(), kb.location(), low, high, order);
}

/// A's rows as bytes as emitIntegerGroupRows reads them: [M, K in whole
/// chunks of `chunkValues`], zeros past K (written here; the caller writes
/// the values).
Value allocateBytesOfA(VectorBuilder &kb, const GemmOperands &g, int64_t chunkValues) {
  OpBuilder &b = kb.builder();
  int64_t lanes = kb.cpu().lanes;
  int64_t full = g.k / chunkValues * chunkValues;
  int64_t depth = (g.k + chunkValues - 1) / chunkValues * chunkValues;
  Value aBytes = kb.allocate({g.m, depth}, b.getI8Type());
  Value zeros = splatInt(b, kb.location(), VectorType::get({lanes}, b.getI8Type()), 0);
  for (int64_t m = 0; m < g.m; ++m)
    for (int64_t k = full; k < depth; k += lanes)
      kb.storeVector(zeros, aBytes, {kb.index(m), kb.index(k)});
  return aBytes;
}

/// A chunk of a row of B as a grouped integer product reads it: the bytes
/// of its dot products as dotInt8 takes them (4 x lanes each) and,
/// per lane, the scale of the lane's group.
struct IntegerChunkOfB {
  SmallVector<Value, 2> bytes;
  Value scales;
};

/// How a grouped integer product lays out a chunk: `dots` dot products of
/// 4 x lanes bytes, summed into one vector whose lane `lane` sums values of
/// the chunk's block `blockOfLane(lane)` of 32.
struct IntegerChunkLayout {
  int64_t dots;
  llvm::function_ref<int64_t(int64_t)> blockOfLane;

  int64_t values(VectorBuilder &kb) const { return dots * 4 * kb.cpu().lanes; }
};

/// The rows of a skinny product of B in groups with A quantized per block of
/// 32: aBytes [M, K in whole chunks] (zeros past K, in the order of
/// `loadChunk(n, col, valid)`'s bytes), aScales [M, K / 32], aGroupSums
/// [M, groups of B]. Per row of B, in groups of rows whose two f32 chains a
/// row fit the registers beside `temporaries` (forRowGroups), each chunk's
/// `layout.dots` exact dot products in one dotInt8 (B's values of `uBits`)
/// times B's lanes' scales times A's blocks' (spread to the chunks' lanes by
/// chunkBlockLanes once per product), then the offsets' share, if any
/// (storeWithGroupShares with `offsets`): a row sums alike in a product of
/// any number of rows.
void emitIntegerGroupRows(VectorBuilder &kb, const GemmOperands &g, int64_t uBits,
                          int64_t temporaries, IntegerChunkLayout layout, Value aBytes,
                          Value aScales, Value aGroupSums,
                          llvm::function_ref<IntegerChunkOfB(Value, Value, int64_t)> loadChunk,
                          llvm::function_ref<Value(Value, Value, int64_t)> offsets) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  int64_t lanes = kb.cpu().lanes, chunkValues = layout.values(kb),
          full = g.k / chunkValues * chunkValues;
  auto sumVector = VectorType::get({lanes}, b.getI32Type());
  Value zeroSums = splatInt(b, loc, sumVector, 0);
  // A's bytes are loaded whole (allocateBytesOfA); the zeros give the type.
  Value zeroBytes = splatInt(b, loc, VectorType::get({4 * lanes}, b.getI8Type()), 0);
  // A's scales spread to the lanes of each chunk once, rather than per row
  // of B.
  int64_t chunks = (g.k + chunkValues - 1) / chunkValues, valuesPerLane = chunkValues / lanes;
  Value aLaneScales = kb.allocate({g.m, chunks * lanes}, b.getF32Type());
  auto spreadScales = [&](Value m, Value col, int64_t valid) {
    kb.storeVector(chunkBlockLanes(kb, layout.blockOfLane, chunkValues / 32, aScales, m, col,
                                   g.k / 32, 32, valid == chunkValues),
                   aLaneScales, {m, kb.divui(col, valuesPerLane)});
  };
  for (int64_t m = 0; m < g.m; ++m) {
    kb.forLoop(kb.index(0), kb.index(full), chunkValues,
               [&](Value col) { spreadScales(kb.index(m), col, chunkValues); });
    if (g.k > full)
      spreadScales(kb.index(m), kb.index(full), g.k - full);
  }
  constexpr int64_t kUnroll = 2;
  kb.parallelFor(g.n, [&](Value n) {
    forRowGroups(
        g.m, (kb.cpu().registers - temporaries) / kUnroll, [&](int64_t first, int64_t rows) {
          SmallVector<Value> acc(rows * kUnroll, kb.splat(0.0));
          auto chunk = [&](Value col, int64_t u, int64_t valid) {
            IntegerChunkOfB chunkOfB = loadChunk(n, col, valid);
            for (int64_t i = 0; i < rows; ++i) {
              Value m = kb.index(first + i);
              SmallVector<Value, 2> aChunk;
              for (int64_t d = 0; d < layout.dots; ++d)
                aChunk.push_back(kb.loadVector(aBytes, {m, kb.addi(col, kb.index(d * 4 * lanes))},
                                               -1, zeroBytes));
              Value dot = kb.dotInt8(zeroSums, chunkOfB.bytes, aChunk, uBits);
              Value aLanes = kb.loadVector(aLaneScales, {m, kb.divui(col, valuesPerLane)});
              Value &sum = acc[i * kUnroll + u];
              sum = kb.fma(arith::SIToFPOp::create(b, loc, kb.vectorType(), dot),
                           kb.mul(chunkOfB.scales, aLanes), sum);
            }
          };
          sweepDepth(kb, full, kUnroll * chunkValues, acc, [&](Value k, int64_t valid) {
            for (int64_t u = 0; u * chunkValues < valid; ++u)
              chunk(kb.addi(k, kb.index(u * chunkValues)), u, chunkValues);
          });
          if (g.k > full)
            chunk(kb.index(full), 0, g.k - full);
          auto rowOffsets = [&](Value group, int64_t valid) { return offsets(n, group, valid); };
          storeWithGroupShares(kb, g, n, first, rows, aGroupSums, acc, kUnroll,
                               offsets ? llvm::function_ref<Value(Value, int64_t)>(rowOffsets)
                                       : nullptr);
        });
  });
}

/// C = epilogue(A B^T) for a 4-bit B [N, K / 2] (groups of 32 or more) on
/// targets with an int8 dot product: each row of A is quantized to int8 as
/// llama.cpp's q8_0 (quantizeBlocksOfA, a scale per block of 32, as its q4
/// products take it) and stored in the order B's bytes unpack to, a chunk
/// of 8 x lanes values (lanes / 4 blocks) at a time: the first half of each
/// block (values 0-15 of the first block, then of the second ...), then
/// their second halves. Each vector of B's bytes makes two dot products,
/// its low nibbles (the first halves) and its high ones, summed in one
/// vector whose lanes 4b to 4b + 3 sum block b's products; each lane is
/// scaled by its block's scales (B's group's times A's block's) in f32.
/// The nibbles' offset of 8 (or the group's min) multiplies the sum of A's
/// dequantized values over a group: sum (q - 8) s a = s dot(q, a) - 8 s
/// sum(a), and sum (q s + min) a = s dot(q, a) + min sum(a), one dot
/// product of a row of B's scales (or mins) with A's sums per group, apart
/// from the chunks.
void emitSkinnyGemmInt4Dot(VectorBuilder &kb, const GemmOperands &g) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  int64_t lanes = kb.cpu().lanes;
  auto blockOfLane = [](int64_t lane) { return lane / 4; };
  IntegerChunkLayout layout{/*dots=*/2, blockOfLane};
  int64_t chunkValues = layout.values(kb), chunkBlocks = chunkValues / 32;
  auto bytesOf = [&](int64_t count) { return VectorType::get({count}, b.getI8Type()); };

  // A's rows as bytes in B's order (zeros past K), their scales, each
  // block's sum of integers, and the sums of A's values per group of B
  // (zeros up to a whole vector of groups).
  Value aBytes = allocateBytesOfA(kb, g, chunkValues);
  int64_t blocks = g.k / 32;
  Value aScales = kb.allocate({g.m, blocks}, b.getF32Type());
  Value aBlockSums = kb.allocate({g.m, blocks}, b.getI32Type());
  Value aGroupSums = kb.allocate({g.m, groupVectors(g, lanes) * lanes}, b.getF32Type());
  for (int64_t m = 0; m < g.m; ++m) {
    Value row = kb.index(m);
    // Value r of a chunk's block `block` goes to block * 16 + r % 16, in the
    // chunk's second half if r >= 16.
    quantizeBlocksOfA(
        kb, g, row, aScales,
        [&](Value k, Value ints) {
          Value inChunk = kb.remui(k, chunkValues), inBlock = kb.remui(inChunk, 32);
          Value to = kb.addi(kb.addi(kb.muli(kb.divui(k, chunkValues), chunkValues),
                                     kb.muli(kb.divui(inBlock, 16), chunkValues / 2)),
                             kb.addi(kb.muli(kb.divui(inChunk, 32), 16), kb.remui(inBlock, 16)));
          kb.storeVector(arith::TruncIOp::create(b, loc, bytesOf(lanes), ints), aBytes, {row, to});
        },
        aBlockSums);
    sumGroupsOfA(kb, g, row, aScales, aBlockSums, 32, aGroupSums);
  }

  // A chunk's bytes, nibbles and scales take 8 registers.
  emitIntegerGroupRows(
      kb, g, /*uBits=*/4, /*temporaries=*/8, layout, aBytes, aScales, aGroupSums,
      [&](Value n, Value col, int64_t valid) -> IntegerChunkOfB {
        auto [low, high] = loadNibblePlanes(kb, g, n, col, 4 * lanes, valid / 2);
        return {{low, high},
                chunkBlockLanes(kb, blockOfLane, chunkBlocks, g.bScales, n, col, blocks,
                                g.groupSize, valid == chunkValues)};
      },
      // The offsets' share: a row of B's mins (or -8 times its scales) times
      // A's sums per group.
      [&](Value n, Value group, int64_t valid) {
        return g.bMins ? kb.loadVectorWidened(g.bMins, {n, group}, valid)
                       : kb.mul(kb.loadVectorWidened(g.bScales, {n, group}, valid), kb.splat(-8.0));
      });
}

/// C = epilogue(A B^T) for an int8 B [N, K] with a scale per output channel,
/// on targets with an int8 dot product, as llama.cpp's q8_0 products: each
/// row of A is quantized to int8 with one scale (its largest magnitude over
/// 127); an output is then a dot product of bytes (4 products summed a
/// lane), minus the target's int8Offset() times the sum of A's row (once per
/// product), times both scales.
void emitSkinnyGemmInt8Dot(VectorBuilder &kb, const GemmOperands &g) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  int64_t lanes = kb.cpu().lanes, bytes = 4 * lanes;
  auto byteVector = VectorType::get({bytes}, b.getI8Type());
  auto laneBytes = VectorType::get({lanes}, b.getI8Type());
  auto sumVector = VectorType::get({lanes}, b.getI32Type());
  auto splatInt = [&](VectorType type, int64_t value) { return ::splatInt(b, loc, type, value); };
  Value zeroBytes = splatInt(byteVector, 0);

  // A's rows as bytes, their scales, and the sums of their integers where
  // B's bytes are offset.
  int64_t offset = kb.cpu().int8Offset();
  Value aBytes = kb.allocate({g.m, g.k}, b.getI8Type());
  Value aScales = kb.allocate({g.m}, b.getF32Type());
  Value aSums = offset ? kb.allocate({g.m}, b.getI32Type()) : Value();
  for (int64_t m = 0; m < g.m; ++m) {
    Value row = kb.index(m);
    quantizeRowOfA(kb, g, row, aScales, [&](Value k, int64_t valid, Value ints) {
      kb.storeVector(arith::TruncIOp::create(b, loc, laneBytes, ints), aBytes, {row, k}, valid);
    });
    if (!offset)
      continue;
    SmallVector<Value> sum = {splatInt(sumVector, 0)};
    sweepDepth(kb, g.k, bytes, sum, [&](Value k, int64_t valid) {
      sum[0] = kb.dotInt8(sum[0], splatInt(byteVector, 1),
                          kb.loadVector(aBytes, {row, k}, valid, zeroBytes), /*uBits=*/1);
    });
    kb.store(vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, sum[0]), aSums, {row});
  }

  // Accumulators for a group's rows x unroll vectors, plus A's vector and
  // B's, one row of B at a time. The sums are exact integers: any unroll
  // computes a row alike.
  kb.parallelFor(g.n, [&](Value n) {
    forRowGroups(g.m, kb.cpu().registers - 2, [&](int64_t first, int64_t rows) {
      int64_t unroll = std::clamp<int64_t>((kb.cpu().registers - 2) / rows, 1, 4);
      SmallVector<Value> sums(rows * unroll, splatInt(sumVector, 0));
      auto step = [&](Value k, int64_t valid) {
        for (int64_t u = 0; u * bytes < valid; ++u) {
          Value col = kb.addi(k, kb.index(u * bytes));
          int64_t vectorValid = std::min(bytes, valid - u * bytes);
          Value row = loadInt8Operand(kb, g, n, col, vectorValid);
          for (int64_t i = 0; i < rows; ++i)
            sums[i * unroll + u] = kb.dotInt8(
                sums[i * unroll + u], row,
                kb.loadVector(aBytes, {kb.index(first + i), col}, vectorValid, zeroBytes));
        }
      };
      sweepDepth(kb, g.k, unroll * bytes, sums, step);
      Value scale = kb.loadWidened(g.bScales, {n, kb.index(0)});
      for (int64_t i = 0; i < rows; ++i) {
        Value m = kb.index(first + i);
        Value dot = sums[i * unroll];
        for (int64_t u = 1; u < unroll; ++u)
          dot = arith::AddIOp::create(b, loc, dot, sums[i * unroll + u]);
        dot = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, dot);
        if (offset)
          dot = arith::SubIOp::create(
              b, loc, dot,
              arith::MulIOp::create(b, loc, kb.load(aSums, {m}),
                                    arith::ConstantIntOp::create(b, loc, b.getI32Type(), offset)));
        Value sum = arith::SIToFPOp::create(b, loc, b.getF32Type(), dot);
        sum = kb.mul(sum, kb.mul(kb.load(aScales, {m}), scale));
        storeFinished(kb, g, sum, m, n, 1, /*scalar=*/true);
      }
    });
  });
}

/// C = epilogue(A B^T) for an int8 B [N, K] with a scale per group of 32
/// (or a multiple, or 16) along K, on targets with an int8 dot product, as
/// llama.cpp's q8_0 products compute it: each block of 32 values of a row of
/// A is quantized to int8 (quantizeBlocksOfA: the scale d = its largest
/// magnitude / 127, rounded to f16); the exact integer dot product of a
/// block with B's, times both blocks' scales, is summed in f32. Where
/// dotInt8 takes B's bytes offset (int8Offset()), minus the offset times a
/// group's scale times A's sum over the group undoes it once per output
/// (storeWithGroupShares); a dot product of 4 x lanes bytes sums 4 products
/// a lane (with 16 lanes, lanes 0-7 of the first block, 8-15 of the second;
/// each 4 lanes of one group of 16).
void emitSkinnyGemmInt8GroupDot(VectorBuilder &kb, const GemmOperands &g) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  constexpr int64_t kBlock = 32;
  int64_t lanes = kb.cpu().lanes, chunkValues = 4 * lanes, blocks = g.k / kBlock;
  auto bytesOf = [&](int64_t count) { return VectorType::get({count}, b.getI8Type()); };

  // A's rows as bytes (zeros past K), the blocks' scales and, where B's
  // bytes are offset, the sums of each span of integers (a group of 16, or
  // a block) and A's sums per group of B.
  int64_t span = std::min(g.groupSize, kBlock), offset = kb.cpu().int8Offset();
  Value aBytes = allocateBytesOfA(kb, g, chunkValues);
  Value aScales = kb.allocate({g.m, blocks}, b.getF32Type());
  Value aSpanSums, aGroupSums;
  if (offset) {
    aSpanSums = kb.allocate({g.m, g.k / span}, b.getI32Type());
    aGroupSums = kb.allocate({g.m, groupVectors(g, lanes) * lanes}, b.getF32Type());
  }
  for (int64_t m = 0; m < g.m; ++m) {
    quantizeBlocksOfA(
        kb, g, kb.index(m), aScales,
        [&](Value k, Value ints) {
          kb.storeVector(arith::TruncIOp::create(b, loc, bytesOf(lanes), ints), aBytes,
                         {kb.index(m), k});
        },
        aSpanSums, span);
    if (offset)
      sumGroupsOfA(kb, g, kb.index(m), aScales, aSpanSums, span, aGroupSums);
  }
  // The offset's share: minus the offset times a row of B's scales times A's
  // sums per group.
  auto offsetShares = [&](Value n, Value group, int64_t valid) {
    return kb.mul(kb.loadVectorWidened(g.bScales, {n, group}, valid),
                  kb.splat(-static_cast<double>(offset)));
  };

  // With 16 lanes, lanes 8-15 belong to a chunk's second block. A chunk's
  // bytes and scales take 6 registers.
  auto blockOfLane = [](int64_t lane) { return lane / 8; };
  emitIntegerGroupRows(
      kb, g, /*uBits=*/8, /*temporaries=*/6, IntegerChunkLayout{/*dots=*/1, blockOfLane}, aBytes,
      aScales, aGroupSums,
      [&](Value n, Value col, int64_t valid) -> IntegerChunkOfB {
        Value bytes = loadInt8Operand(kb, g, n, col, valid);
        if (g.groupSize != 16)
          return {{bytes},
                  chunkBlockLanes(kb, blockOfLane, chunkValues / kBlock, g.bScales, n, col, blocks,
                                  g.groupSize, valid == chunkValues)};
        // 4 lanes a group (clamped to the last past K).
        SmallVector<Value> groupScales;
        for (int64_t q = 0; q < chunkValues / 16; ++q) {
          Value group = kb.mini(kb.addi(kb.divui(col, 16), kb.index(q)), kb.index(g.k / 16 - 1));
          groupScales.append(4, kb.loadWidened(g.bScales, {n, group}));
        }
        return {{bytes}, vector::FromElementsOp::create(b, loc, kb.vectorType(), groupScales)};
      },
      offset ? llvm::function_ref<Value(Value, Value, int64_t)>(offsetShares) : nullptr);
}

/// The GEMMs that pack B into lanes of several values (emitGemmIntegerDot,
/// emitGemmBf16Dot): parallel blocks of a panel of `panelColumns` columns of
/// B times a band of A's rows (as many bands as kTargetBlocks needs; each
/// packs its panel), `pack(first, columns)` once per block, then for each
/// register tile of up to `tileRows` rows of the band the sums that
/// `tile(row, rows, first)` returns (2 vectors of columns a row), finished
/// by the epilogue.
void forPackedPanels(VectorBuilder &kb, const GemmOperands &g, int64_t panelColumns,
                     int64_t tileRows, llvm::function_ref<void(Value, int64_t)> pack,
                     llvm::function_ref<SmallVector<Value>(Value, int64_t, Value)> tile) {
  int64_t lanes = kb.cpu().lanes;
  int64_t panels = (g.n + panelColumns - 1) / panelColumns;
  int64_t lastColumns = g.n - (panels - 1) * panelColumns;
  int64_t bands = rowBands(g.m, panels, kMinTilesPerBand * tileRows), bandRows = g.m / bands;
  kb.parallelFor(panels * bands, [&](Value block) {
    Value panel = bands == 1 ? block : kb.remui(block, panels);
    Value band = bands == 1 ? kb.index(0) : kb.muli(kb.divui(block, panels), bandRows);
    Value first = kb.muli(panel, panelColumns);
    auto run = [&](int64_t columns) {
      pack(first, columns);
      kb.forRowTiles(band, bandRows, tileRows, [&](Value row, int64_t rows) {
        SmallVector<Value> sums = tile(row, rows, first);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j * lanes < columns; ++j)
            storeFinished(kb, g, sums[i * 2 + j], kb.addi(row, kb.index(i)),
                          kb.addi(first, kb.index(j * lanes)), std::min(lanes, columns - j * lanes),
                          /*scalar=*/false);
      });
    };
    if (lastColumns == panelColumns)
      return run(panelColumns);
    kb.ifThenElse(
        kb.below(panel, panels - 1), [&] { run(panelColumns); }, [&] { run(lastColumns); });
  });
}

/// Stores the transposes of two blocks of `lanes` rows x `lanes` i32 lanes,
/// `row(r)` for rows r of [0, 2 lanes), each lane `perLane` values of B
/// along K from `k` (`valid` of them): packed[k / perLane + q][r] = lane q
/// of row r, for the lanes that hold values.
void packTransposed(VectorBuilder &kb, llvm::function_ref<Value(int64_t)> row, Value packed,
                    Value k, int64_t perLane, int64_t valid) {
  int64_t lanes = kb.cpu().lanes;
  for (int64_t half = 0; half < 2; ++half) {
    SmallVector<Value> rows;
    for (int64_t r = 0; r < lanes; ++r)
      rows.push_back(row(half * lanes + r));
    for (auto [q, column] : llvm::enumerate(kb.transpose(rows)))
      if (static_cast<int64_t>(q) * perLane < valid)
        kb.storeVector(column, packed,
                       {kb.addi(kb.divui(k, perLane), kb.index(q)), kb.index(half * lanes)});
  }
}

/// Whether the target has an integer dot product (dotInt8).
bool hasIntegerDot(VectorBuilder &kb) { return kb.cpu().integerDot != IntegerDot::None; }

/// Whether emitGemmIntegerDot takes a product: an int8 or 4-bit B^T with
/// groups of a multiple of 32 along K (int8 also of 16, GGUF's Q6_K), on
/// targets with an int8 dot product.
bool takesIntegerDot(VectorBuilder &kb, const GemmOperands &g) {
  return hasIntegerDot(kb) && g.transposeB && !g.transposeA && g.bScales && g.groupAxis == 1 &&
         (g.groupSize % 32 == 0 || (g.bits == 8 && g.groupSize == 16)) && g.k % 32 == 0;
}

/// C = epilogue(A B^T) for an int8 or 4-bit B [N, K] with groups of 32 (or
/// a multiple, or 16) along K, on targets with an int8 dot product: the
/// GEMM of prompts, as llama.cpp's q8_0 products compute it. A's rows are
/// quantized per block of 32 (quantizeBlocksOfA) to signed bytes. Each
/// parallel task packs a panel of 2 x lanes rows of B as dotInt8 takes them, 4
/// consecutive values of a row per i32 lane ([K / 4][2 lanes]), with its
/// groups' scales (and mins) per span of 32 values, or 16 for groups of 16
/// ([K / span][2 lanes]); a register tile of up to 6 rows x 2 vectors of
/// columns then sums each span in i32 on dotInt8 (A's 4 bytes broadcast) and adds it to
/// f32 sums scaled by both scales. B's bytes are offset (int8 by the target's
/// int8Offset(); 4 bits by 8 unless their groups have mins), which a span's sum
/// undoes with that offset times the sum of A's span; a group's min adds
/// min times A's span sum, scaled.
void emitGemmIntegerDot(VectorBuilder &kb, const GemmOperands &g) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  constexpr int64_t kBlock = 32;
  int64_t lanes = kb.cpu().lanes, panelRows = 2 * lanes, chunkValues = 4 * lanes;
  // Per tile row, 2 vectors of f32 sums and 2 of a span's i32 ones; B's 2
  // vectors and A's 4 bytes beside.
  int64_t tileRows = std::min<int64_t>(6, (kb.cpu().registers - 4) / 4);
  int64_t span = std::min(g.groupSize, kBlock), spanQuads = span / 4;
  int64_t blocks = g.k / kBlock, spans = g.k / span, quads = g.k / 4;
  int64_t offset = g.bits == 8 ? kb.cpu().int8Offset() : g.bMins ? 0 : 8;
  Type i8 = b.getI8Type(), i32 = b.getI32Type(), f32 = b.getF32Type();
  auto bytesOf = [&](int64_t count) { return VectorType::get({count}, i8); };
  auto quadVector = VectorType::get({lanes}, i32);
  auto splatInt = [&](VectorType type, int64_t value) { return ::splatInt(b, loc, type, value); };
  auto asBytes = [&](Value quadLanes) {
    return vector::BitCastOp::create(b, loc, bytesOf(chunkValues), quadLanes).getResult();
  };

  // A's rows as signed bytes, 4 to an i32, with their blocks' scales and
  // their spans' sums where an offset or a min multiplies them.
  Value aQuads = kb.allocate({g.m, quads}, i32);
  Value aScales = kb.allocate({g.m, blocks}, f32);
  Value aSums = offset || g.bMins ? kb.allocate({g.m, spans}, i32) : Value();
  forEachRow(kb, g.m, g.k, [&](Value row) {
    quantizeBlocksOfA(
        kb, g, row, aScales,
        [&](Value k, Value ints) {
          Value bytes = arith::TruncIOp::create(b, loc, bytesOf(lanes), ints);
          Value packed =
              vector::BitCastOp::create(b, loc, VectorType::get({lanes / 4}, i32), bytes);
          kb.storeVector(packed, aQuads, {row, kb.divui(k, 4)});
        },
        aSums, span);
  });

  // B's row `n` (clamped to the last), 4 x lanes values from `k` (`valid` of them)
  // as dotInt8 takes them, 4 to an i32 lane.
  Value lastRow = kb.index(g.n - 1);
  auto rowQuads = [&](Value n, Value k, int64_t valid) {
    n = kb.mini(n, lastRow);
    if (g.bits == 8) {
      return vector::BitCastOp::create(b, loc, quadVector, loadInt8Operand(kb, g, n, k, valid))
          .getResult();
    }
    // Values 0-15 of a block of 32 are the low nibbles of its 16 bytes,
    // 16-31 the high ones.
    SmallVector<int64_t> order;
    for (int64_t block = 0; block < chunkValues / kBlock; ++block)
      for (int64_t high = 0; high < 2; ++high)
        for (int64_t i = 0; i < 16; ++i)
          order.push_back(high * chunkValues / 2 + block * 16 + i);
    return vector::BitCastOp::create(b, loc, quadVector,
                                     loadNibbleBytes(kb, g, n, k, valid / 2, order))
        .getResult();
  };

  Value packed, scales, mins;
  auto pack = [&](Value first, int64_t) {
    packed = kb.allocate({quads, panelRows}, i32);
    scales = kb.allocate({spans, panelRows}, f32);
    mins = g.bMins ? kb.allocate({spans, panelRows}, f32) : Value();
    auto packQuads = [&](Value k, int64_t valid) {
      packTransposed(
          kb, [&](int64_t r) { return rowQuads(kb.addi(first, kb.index(r)), k, valid); }, packed, k,
          4, valid);
    };
    int64_t full = g.k / chunkValues * chunkValues;
    kb.forLoop(kb.index(0), kb.index(full), chunkValues,
               [&](Value k) { packQuads(k, chunkValues); });
    if (g.k > full)
      packQuads(kb.index(full), g.k - full);
    kb.forLoop(kb.index(0), kb.index(spans), 1, [&](Value at) {
      Value group = kb.divui(kb.muli(at, span), g.groupSize);
      for (int64_t r = 0; r < panelRows; ++r) {
        Value n = kb.mini(kb.addi(first, kb.index(r)), lastRow);
        kb.store(kb.loadWidened(g.bScales, {n, group}), scales, {at, kb.index(r)});
        if (mins)
          kb.store(kb.loadWidened(g.bMins, {n, group}), mins, {at, kb.index(r)});
      }
    });
  };

  auto tile = [&](Value row, int64_t rows, Value) {
    auto rowIndex = [&](int64_t i) { return kb.addi(row, kb.index(i)); };
    SmallVector<Value> acc(rows * 2, kb.splat(0.0));
    acc = llvm::to_vector(
        kb.forLoop(kb.index(0), kb.index(spans), 1, acc, [&](Value at, ValueRange carried) {
          SmallVector<Value> next(carried.begin(), carried.end());
          SmallVector<Value> sums(rows * 2, splatInt(quadVector, 0));
          for (int64_t q = 0; q < spanQuads; ++q) {
            Value quad = kb.addi(kb.muli(at, spanQuads), kb.index(q));
            Value bBytes[2] = {
                asBytes(kb.loadVector(packed, {quad, kb.index(0)}, -1, splatInt(quadVector, 0))),
                asBytes(
                    kb.loadVector(packed, {quad, kb.index(lanes)}, -1, splatInt(quadVector, 0)))};
            for (int64_t i = 0; i < rows; ++i) {
              Value aBytes = asBytes(vector::BroadcastOp::create(
                  b, loc, quadVector, kb.load(aQuads, {rowIndex(i), quad})));
              for (int64_t j = 0; j < 2; ++j)
                sums[i * 2 + j] = kb.dotInt8(sums[i * 2 + j], bBytes[j], aBytes, g.bits);
            }
          }
          Value bScales[2], bMins[2];
          for (int64_t j = 0; j < 2; ++j) {
            bScales[j] = kb.loadVector(scales, {at, kb.index(j * lanes)});
            if (mins)
              bMins[j] = kb.loadVector(mins, {at, kb.index(j * lanes)});
          }
          Value block = kb.divui(kb.muli(at, span), kBlock);
          for (int64_t i = 0; i < rows; ++i) {
            Value aScale = kb.load(aScales, {rowIndex(i), block});
            Value aSum = aSums ? kb.load(aSums, {rowIndex(i), at}) : Value();
            Value correction, minWeight;
            if (offset)
              correction = vector::BroadcastOp::create(
                  b, loc, quadVector,
                  arith::MulIOp::create(b, loc, aSum,
                                        arith::ConstantIntOp::create(b, loc, i32, offset)));
            if (mins)
              minWeight = kb.splat(kb.mul(arith::SIToFPOp::create(b, loc, f32, aSum), aScale));
            for (int64_t j = 0; j < 2; ++j) {
              Value exact = sums[i * 2 + j];
              if (correction)
                exact = arith::SubIOp::create(b, loc, exact, correction);
              Value &sum = next[i * 2 + j];
              sum = kb.fma(arith::SIToFPOp::create(b, loc, kb.vectorType(), exact),
                           kb.mul(bScales[j], kb.splat(aScale)), sum);
              if (minWeight)
                sum = kb.fma(bMins[j], minWeight, sum);
            }
          }
          return next;
        }));
    return acc;
  };
  forPackedPanels(kb, g, panelRows, tileRows, pack, tile);
}

/// Whether emitGemmBf16Dot takes a product: bf16 A and B (neither
/// transposed A nor scales), a depth of whole pairs, on AVX-512 BF16.
bool takesBf16Dot(VectorBuilder &kb, const GemmOperands &g) {
  auto elementOf = [](Value buffer) { return cast<MemRefType>(buffer.getType()).getElementType(); };
  return kb.cpu().bf16Dot && !g.transposeA && !g.bScales && elementOf(g.a).isBF16() &&
         elementOf(g.b).isBF16() && g.k % 2 == 0;
}

/// C = epilogue(A B) for bf16 A and B (`--dtype=bf16`) on AVX-512 BF16:
/// vdpbf16ps adds the products of a pair of bf16 values to each f32 lane
/// (exact products, as the f32 kernels' of widened values; denormals count
/// as zeros). Each parallel task packs a panel of 32 columns of B as pairs
/// of consecutive values along K, one pair an i32 lane ([K / 2][32]): from
/// a B^T [N, K], 16 rows of 16 pairs transposed in registers; from a B
/// [K, N], rows k and k + 1 interleaved. A register tile of 6 rows x 2
/// vectors of columns accumulates over all of K, a pair of A's row
/// broadcast per step, and the epilogue is applied to it.
void emitGemmBf16Dot(VectorBuilder &kb, const GemmOperands &g) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  // Panels of 32 columns; B^T packed 32 values (16 pairs) of K at a time.
  constexpr int64_t kLanes = 16, kPanel = 2 * kLanes, kChunk = 2 * kLanes, kTileRows = 6;
  int64_t pairs = g.k / 2;
  Type bf16 = b.getBF16Type(), i32 = b.getI32Type();
  auto pairVector = VectorType::get({kLanes}, i32);
  auto valuesOf = [&](int64_t count) { return VectorType::get({count}, bf16); };
  auto zerosOf = [&](int64_t count) -> Value {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(valuesOf(count), b.getFloatAttr(bf16, 0.0)));
  };
  auto asPairs = [&](Value values) {
    return vector::BitCastOp::create(b, loc, pairVector, values).getResult();
  };
  auto asValues = [&](Value pairLanes) {
    return vector::BitCastOp::create(b, loc, valuesOf(2 * kLanes), pairLanes).getResult();
  };

  Value lastRow = kb.index(g.n - 1);
  Value packed;
  auto pack = [&](Value first, int64_t columns) {
    packed = kb.allocate({pairs, kPanel}, i32);
    if (g.transposeB) {
      // Rows of B^T (clamped to the last), 16 pairs at a time.
      auto packChunk = [&](Value k, int64_t valid) {
        packTransposed(
            kb,
            [&](int64_t r) {
              Value n = kb.mini(kb.addi(first, kb.index(r)), lastRow);
              return asPairs(kb.loadVector(g.b, {n, k}, valid, zerosOf(kChunk)));
            },
            packed, k, 2, valid);
      };
      int64_t full = g.k / kChunk * kChunk;
      kb.forLoop(kb.index(0), kb.index(full), kChunk, [&](Value k) { packChunk(k, kChunk); });
      if (g.k > full)
        packChunk(kb.index(full), g.k - full);
      return;
    }
    // Rows k and k + 1 of the panel's columns, interleaved.
    kb.forLoop(kb.index(0), kb.index(pairs), 1, [&](Value pair) {
      Value k = kb.muli(pair, 2);
      Value even = kb.loadVector(g.b, {k, first}, columns, zerosOf(kPanel));
      Value odd = kb.loadVector(g.b, {kb.addi(k, kb.index(1)), first}, columns, zerosOf(kPanel));
      for (int64_t half = 0; half < 2; ++half) {
        SmallVector<int64_t> order;
        for (int64_t i = 0; i < kLanes; ++i)
          order.append({half * kLanes + i, kPanel + half * kLanes + i});
        Value interleaved = vector::ShuffleOp::create(b, loc, even, odd, order);
        kb.storeVector(asPairs(interleaved), packed, {pair, kb.index(half * kLanes)});
      }
    });
  };

  auto tile = [&](Value row, int64_t rows, Value) {
    auto rowIndex = [&](int64_t i) { return kb.addi(row, kb.index(i)); };
    SmallVector<Value> acc(rows * 2, kb.splat(0.0));
    acc = llvm::to_vector(
        kb.forLoop(kb.index(0), kb.index(pairs), 1, acc, [&](Value pair, ValueRange carried) {
          SmallVector<Value> next(carried.begin(), carried.end());
          Value bValues[2];
          for (int64_t j = 0; j < 2; ++j)
            bValues[j] = asValues(kb.loadVector(packed, {pair, kb.index(j * kLanes)}, -1,
                                                splatInt(b, loc, pairVector, 0)));
          for (int64_t i = 0; i < rows; ++i) {
            // A's pair as one i32, broadcast.
            Value two = kb.loadVector(g.a, {rowIndex(i), kb.muli(pair, 2)}, -1, zerosOf(2));
            Value aPair = vector::ExtractOp::create(
                b, loc,
                vector::BitCastOp::create(b, loc, VectorType::get({1}, i32), two).getResult(),
                ArrayRef<int64_t>{0});
            Value aValues = asValues(vector::BroadcastOp::create(b, loc, pairVector, aPair));
            for (int64_t j = 0; j < 2; ++j)
              next[i * 2 + j] = kb.dotBf16(next[i * 2 + j], aValues, bValues[j]);
          }
          return next;
        }));
    return acc;
  };
  forPackedPanels(kb, g, kPanel, kTileRows, pack, tile);
}

/// The operands of C = epilogue(A B): A, C and the epilogue's buffers, and
/// B as the kernels read it.
GemmOperands gemmOperands(VectorBuilder &kb, Value a, bool transposeA, Value b, bool transposeB,
                          Value bias, Value residual, Activation activation) {
  auto aType = cast<RankedTensorType>(a.getType());
  auto bType = cast<RankedTensorType>(b.getType());
  GemmOperands g;
  g.transposeA = transposeA;
  g.m = aType.getDimSize(transposeA ? 1 : 0);
  g.k = aType.getDimSize(transposeA ? 0 : 1);
  g.n = transposeB ? bType.getDimSize(0) : bType.getDimSize(1);
  g.activation = activation;
  g.a = kb.readBuffer(a);
  g.transposeB = transposeB;
  // An int8 weight is read as it is stored, when each vector of it lies in
  // one group: groups along its columns must hold whole vectors. A 4-bit one
  // when stored [N, K] and a vector lies in half a block of 32.
  auto dequantize = b.getDefiningOp<DequantizeOp>();
  int64_t columns = bType.getDimSize(1);
  bool readAsStored =
      dequantize && (dequantize.getBits() == 4
                         ? transposeB && 16 % kb.cpu().lanes == 0
                         : dequantize.getAxis() == 0 || dequantize.getGroupSize() == columns ||
                               dequantize.getGroupSize() % kb.cpu().lanes == 0);
  if (readAsStored) {
    g.b = kb.readBuffer(dequantize.getValues());
    g.bScales = kb.readBuffer(dequantize.getScales());
    g.bMins = dequantize.getMins() ? kb.readBuffer(dequantize.getMins()) : Value();
    g.groupAxis = dequantize.getAxis();
    g.groupSize = dequantize.getGroupSize();
    g.bits = dequantize.getBits();
  } else {
    g.b = kb.readBuffer(b);
  }
  g.bias = bias ? kb.readBuffer(bias) : Value();
  g.residual = residual ? kb.readBuffer(residual) : Value();
  g.c = kb.allocate({g.m, g.n}, kb.builder().getF32Type());
  return g;
}

/// C = epilogue(A B) into g.c; `a` is A's tensor (bf16 ones are widened
/// for the kernels that read f32).
void emitProduct(VectorBuilder &kb, GemmOperands &g, Value a) {
  // A bf16 A (productFactors) is read as stored by the bf16 dot product's
  // GEMM, widened for the others.
  auto aType = cast<RankedTensorType>(a.getType());
  if (aType.getElementType().isBF16()) {
    if (g.m <= kDotBlockRows && g.transposeB && takesBf16Dot(kb, g))
      return emitDotBlocksBf16Dot(kb, g);
    if (g.m > kSkinnyRows && takesBf16Dot(kb, g))
      return emitGemmBf16Dot(kb, g);
    g.a = kb.readBuffer(arith::ExtFOp::create(kb.builder(), kb.location(),
                                              aType.clone(kb.builder().getF32Type()), a));
  }
  // A B^T of few rows (decode steps, a prefill's logits) takes kernels that
  // compute a row alike whatever the rows (xfmr::kSmallProductRows).
  if (g.m <= kDotBlockRows && g.transposeB && !g.transposeA) {
    if (hasIntegerDot(kb) && g.bits == 8 && g.scalesPerChannel())
      return emitSkinnyGemmInt8Dot(kb, g);
    if (hasIntegerDot(kb) && g.bits == 8 && !g.bMins && g.groupAxis == 1 &&
        (g.groupSize % 32 == 0 || (g.groupSize == 16 && g.k % 32 == 0)))
      return emitSkinnyGemmInt8GroupDot(kb, g);
    if (hasIntegerDot(kb) && g.bits == 4)
      return emitSkinnyGemmInt4Dot(kb, g);
    return emitDotBlocksF32(kb, g);
  }
  if (g.m <= kSkinnyRows && !g.transposeA)
    return emitSkinnyGemmAlongK(kb, g);
  if (takesIntegerDot(kb, g))
    return emitGemmIntegerDot(kb, g);

  g.a = padAliasedRows(kb, g);
  // Column chunks: full panels, then the tail columns (masked vectors).
  int64_t lanes = kb.cpu().lanes, panel = 2 * lanes;
  int64_t fullColumns = g.n / panel * panel;
  int64_t panels = fullColumns / panel;
  int64_t panelsPerChunk = std::clamp<int64_t>(panels / kTargetBlocks, 1, kPanelsPerChunk);
  int64_t panelChunks = (panels + panelsPerChunk - 1) / panelsPerChunk;
  int64_t tail = g.n - fullColumns;
  int64_t columnChunks = panelChunks + (tail ? 1 : 0);
  // Row bands of equal height, as many as needed to reach kTargetBlocks;
  // bands of a single register tile where a product would otherwise be one
  // block (the weight gradients of small models), which one thread would run
  // while the others wait.
  int64_t tileRows = kb.cpu().tileRows();
  int64_t bands = rowBands(g.m, columnChunks, kMinTilesPerBand * tileRows);
  if (bands * columnChunks == 1)
    bands = rowBands(g.m, 1, tileRows);
  int64_t bandRows = g.m / bands;
  // A B [K, N] one panel wide is laid out as its packed panel already; one
  // of few rows reads each panel too few times to repay a packed copy.
  bool packB = g.transposeB || g.bScales || (g.n != panel && g.m > kDotBlockRows) ||
               !cast<MemRefType>(g.b.getType()).getElementType().isF32();

  OpBuilder &builder = kb.builder();
  Location loc = kb.location();
  kb.parallelFor(bands * columnChunks, [&](Value block) {
    Value chunk = kb.remui(block, columnChunks);
    Value row = kb.muli(kb.divui(block, columnChunks), bandRows);
    auto fullPanels = [&] {
      int64_t chunkColumns = panelsPerChunk * panel;
      Value begin = kb.muli(chunk, chunkColumns);
      Value end = kb.mini(kb.addi(begin, kb.index(chunkColumns)), kb.index(fullColumns));
      if (!packB)
        return kb.forLoop(begin, end, panel,
                          [&](Value col) { emitGemmPanel(kb, g, row, bandRows, col, 2, lanes); });
      Value packed = kb.allocate({panelsPerChunk, g.k, panel}, builder.getF32Type());
      packPanels(kb, g, packed, begin, end);
      kb.forLoop(begin, end, panel, [&](Value col) {
        Value index = kb.divui(arith::SubIOp::create(builder, loc, col, begin), panel);
        emitGemmPanel(kb, g, row, bandRows, col, 2, lanes, PanelSource{packed, index});
      });
    };
    auto tailColumns = [&] {
      int64_t vectors = (tail + lanes - 1) / lanes;
      PanelSource source;
      if (g.transposeB) {
        source.packed = kb.allocate({1, g.k, panel}, builder.getF32Type());
        source.panel = kb.index(0);
        packTail(kb, g, source.packed, tail);
      }
      emitGemmPanel(kb, g, row, bandRows, kb.index(fullColumns), vectors,
                    tail - (vectors - 1) * lanes, source);
    };
    if (!tail)
      return fullPanels();
    if (!panelChunks)
      return tailColumns();
    kb.ifThen(kb.below(chunk, panelChunks), fullPanels);
    kb.ifThen(arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, chunk,
                                    kb.index(panelChunks)),
              tailColumns);
  });
}

} // namespace

Value xfmr::cpu::emitGemm(VectorBuilder &kb, Value a, bool transposeA, Value b, bool transposeB,
                          Value bias, Value residual, Activation activation) {
  GemmOperands g = gemmOperands(kb, a, transposeA, b, transposeB, bias, residual, activation);
  emitProduct(kb, g, a);
  return kb.asTensor(g.c);
}

Value xfmr::cpu::emitGatedGemm(VectorBuilder &kb, Value a, Value gate, bool transposeGate, Value up,
                               bool transposeUp, Value gateBias, Value upBias,
                               Activation activation) {
  // The gate's product, activated in its epilogue, then up's, each output
  // multiplied by its gate in its epilogue. (One sweep pairing blocks of
  // the gate and up, each output finished from both, measured slower: two
  // weight streams a block.)
  GemmOperands gated =
      gemmOperands(kb, a, /*transposeA=*/false, gate, transposeGate, gateBias, Value(), activation);
  emitProduct(kb, gated, a);
  GemmOperands g =
      gemmOperands(kb, a, /*transposeA=*/false, up, transposeUp, upBias, Value(), Activation::none);
  g.multiplier = gated.c;
  emitProduct(kb, g, a);
  return kb.asTensor(g.c);
}
