//===- AttentionLimits.h - which keys an attention query sees ---*- C++ -*-===//
//
// Every attention implementation (the linalg lowering, the CPU vector
// kernel, the GPU f32 and tensor-core kernels; forward and backward) tiles
// queries and keys and must know, per sequence, which keys a query sees:
// the keys filled so far (a KV cache's runtime key length), and with a
// causal mask those up to the query's own position (a runtime query offset
// over a cache, else bottom-right aligned), under a sliding window only the
// last `window` of those. This is that logic, written
// once: the visible key range of a query, the key tiles a query tile reads
// and the ones it reads without masking, the first query that sees a key
// and, under a window, the last.
// Padding and additive biases are per-score values the kernels add.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_KERNELS_ATTENTIONLIMITS_H
#define XFMR_LIB_CONVERSION_KERNELS_ATTENTIONLIMITS_H

#include "mlir/IR/Builders.h"

namespace xfmr::kernels {

/// The masks that limit an attention's key range.
struct AttentionMasks {
  int64_t seqQ = 0, seqK = 0;
  bool causal = false;
  /// Causal only: a query sees the `window` keys up to its own position
  /// (sliding-window attention); 0: all of them.
  int64_t window = 0;
  /// [batch] i32 tensors or memrefs, or null: the position of each
  /// sequence's query 0 among the keys, and how many keys it has.
  mlir::Value queryOffset, keyLength;
};

/// Index arithmetic on the key range of `masks`, emitted at `b`'s
/// insertion point. Every count is clamped to [0, seq_k] (or [0, seq_q] for
/// queries), so signed and unsigned comparisons of it agree.
class AttentionLimits {
public:
  AttentionLimits(mlir::OpBuilder &b, mlir::Location loc, AttentionMasks masks)
      : b(b), loc(loc), masks(masks) {}

  /// How many keys sequence `batch` has: key_length[batch], or seq_k.
  mlir::Value keyCount(mlir::Value batch);
  /// Where query 0 of sequence `batch` stands among the keys:
  /// query_offset[batch], or seq_k - seq_q.
  mlir::Value queryOffset(mlir::Value batch);
  /// One past the last key query `query` sees.
  mlir::Value visibleEnd(mlir::Value batch, mlir::Value query);
  /// The first key query `query` sees: 0, or under a window the first
  /// inside it.
  mlir::Value visibleBegin(mlir::Value batch, mlir::Value query);
  /// The first tile of `tileKeys` keys that query `first` (and so every
  /// later one) sees.
  mlir::Value firstKeyTile(mlir::Value batch, mlir::Value first, int64_t tileKeys);
  /// Whether query `query` sees key `key` (an i1).
  mlir::Value isVisible(mlir::Value batch, mlir::Value query, mlir::Value key);
  /// The tiles of `tileKeys` keys that the queries [first, first + rows)
  /// read: up to the last visible key of the last of them.
  mlir::Value keyTiles(mlir::Value batch, mlir::Value first, int64_t rows, int64_t tileKeys);
  /// The tiles that each of the queries from `first` on sees in full, which
  /// need no mask (none under a window, whose lower edge moves with the
  /// query).
  mlir::Value unmaskedKeyTiles(mlir::Value batch, mlir::Value first, int64_t tileKeys);
  /// The first query that sees key `key` (the queries before it see none
  /// of the keys from `key` on).
  mlir::Value firstQuerySeeing(mlir::Value batch, mlir::Value key);
  /// One past the last query that sees key `key`: seq_q, or under a window
  /// the last whose window still reaches it (the queries after it see none
  /// of the keys up to `key`).
  mlir::Value queriesSeeingEnd(mlir::Value batch, mlir::Value key);
  /// The tiles of `tileRows` queries up to that last query: all of seq_q's
  /// (a constant) without a window.
  mlir::Value queryTilesSeeing(mlir::Value batch, mlir::Value key, int64_t tileRows);

private:
  mlir::Value index(int64_t value);
  /// values[batch] as an index in [0, limit].
  mlir::Value perSequence(mlir::Value values, mlir::Value batch, int64_t limit);
  /// max(0, min(value, limit)), signed.
  mlir::Value clamp(mlir::Value value, int64_t limit);

  mlir::OpBuilder &b;
  mlir::Location loc;
  AttentionMasks masks;
};

} // namespace xfmr::kernels

#endif // XFMR_LIB_CONVERSION_KERNELS_ATTENTIONLIMITS_H
