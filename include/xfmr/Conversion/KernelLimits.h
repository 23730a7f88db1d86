//===- KernelLimits.h - facts of the kernels that others rely on -*- C++ -*-===//

#ifndef XFMR_CONVERSION_KERNELLIMITS_H
#define XFMR_CONVERSION_KERNELLIMITS_H

#include <cstdint>

namespace xfmr {

/// Products of at most this many rows of A (decode steps) take kernels of
/// their own (the GPU's skinny products, the CPU's integer dot products).
inline constexpr int64_t kSkinnyProductRows = 8;

/// Products of at most this many rows may sum a row in another order than
/// the tiled kernels of larger products (the CPU's dot products of rows take
/// up to this many); a product of more rows computes each row alike,
/// whatever their number.
inline constexpr int64_t kSmallProductRows = 16;

} // namespace xfmr

#endif // XFMR_CONVERSION_KERNELLIMITS_H
