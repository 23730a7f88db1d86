//===- KernelLimits.h - facts of the kernels that others rely on -*- C++ -*-===//

#ifndef XFMR_CONVERSION_KERNELLIMITS_H
#define XFMR_CONVERSION_KERNELLIMITS_H

#include <cstdint>

namespace xfmr {

/// Products of at most this many rows of A (decode steps) take kernels of
/// their own on every target (the CPU's and the GPU's skinny products),
/// which sum in another order than the tiled ones; a product of more rows
/// computes each row alike, whatever their number.
inline constexpr int64_t kSkinnyProductRows = 8;

} // namespace xfmr

#endif // XFMR_CONVERSION_KERNELLIMITS_H
