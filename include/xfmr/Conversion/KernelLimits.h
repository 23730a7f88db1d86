//===- KernelLimits.h - facts of the kernels that others rely on -*- C++ -*-===//

#ifndef XFMR_CONVERSION_KERNELLIMITS_H
#define XFMR_CONVERSION_KERNELLIMITS_H

#include <cstdint>

namespace xfmr {

/// Products of at most this many rows of A (decode steps) take kernels of
/// their own (the GPU's skinny products; on the CPU, products of a B [K, N]
/// in slabs of K).
inline constexpr int64_t kSkinnyProductRows = 8;

/// Products of at most this many rows may sum a row in another order than
/// the tiled kernels of larger products; a product of more rows computes
/// each row alike, whatever their number. The CPU's products of a B^T
/// [N, K] with up to this many rows (dot products of rows: float weights,
/// or integer ones with activations rounded to int8 per row or block)
/// compute each row alike too, whatever their number.
inline constexpr int64_t kSmallProductRows = 16;

} // namespace xfmr

#endif // XFMR_CONVERSION_KERNELLIMITS_H
