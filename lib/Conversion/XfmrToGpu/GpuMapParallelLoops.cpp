//===- GpuMapParallelLoops.cpp - scf.parallel to blocks and threads -------===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/MathExtras.h"

#define DEBUG_TYPE "xfmr-gpu-map-parallel-loops"

namespace xfmr {
#define GEN_PASS_DEF_XFMRGPUMAPPARALLELLOOPS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// CUDA's limit on gridDim.y and gridDim.z.
constexpr int64_t kMaxGridYZ = 65535;

struct GpuMapParallelLoopsPass
    : xfmr::impl::XfmrGpuMapParallelLoopsBase<GpuMapParallelLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    if (blockSize <= 0 || !llvm::isPowerOf2_64(blockSize)) {
      getOperation().emitError("xfmr-gpu-map-parallel-loops: block-size must be a power of two, "
                               "got ")
          << blockSize.getValue();
      return signalPassFailure();
    }
    SmallVector<scf::ParallelOp> outermost;
    getOperation().walk([&](scf::ParallelOp loop) {
      if (!loop->getParentOfType<scf::ParallelOp>())
        outermost.push_back(loop);
    });
    for (scf::ParallelOp loop : outermost)
      if (failed(map(loop)))
        return signalPassFailure();
  }

  LogicalResult map(scf::ParallelOp loop) {
    if (loop.getNumReductions() != 0)
      return loop.emitOpError("with reductions cannot be mapped to GPU threads");
    unsigned rank = loop.getNumLoops();
    // Thread-block extents, innermost dimension first, from the static trip
    // counts (a dynamic one takes whatever threads are left).
    SmallVector<int64_t> tileSizes(rank, 1);
    int64_t threadsLeft = blockSize;
    for (unsigned i = 0; i < std::min(rank, 3u) && threadsLeft > 1; ++i) {
      unsigned dim = rank - 1 - i;
      std::optional<int64_t> trips = constantTripCount(loop, dim);
      int64_t extent =
          trips ? std::clamp<int64_t>(llvm::PowerOf2Ceil(*trips), 1, threadsLeft) : threadsLeft;
      tileSizes[dim] = extent;
      threadsLeft /= extent;
    }
    // Tiles per dimension (nullopt: dynamic).
    SmallVector<std::optional<int64_t>> tiles;
    for (unsigned dim = 0; dim < rank; ++dim) {
      std::optional<int64_t> trips = constantTripCount(loop, dim);
      tiles.push_back(trips ? std::optional<int64_t>(llvm::divideCeil(*trips, tileSizes[dim]))
                            : std::nullopt);
    }
    MLIRContext *context = loop.getContext();
    // Replaces (and erases) `loop`.
    auto [tileLoop, threadLoop] = scf::tileParallelLoop(loop, tileSizes, /*noMinMaxBounds=*/true);

    AffineMap identity = AffineMap::getMultiDimIdentityMap(1, context);
    auto mappingOf = [&](gpu::Processor processor) {
      return gpu::ParallelLoopDimMappingAttr::get(context, processor, identity, identity);
    };
    auto nth = [](gpu::Processor first, unsigned n) {
      return static_cast<gpu::Processor>(static_cast<int>(first) + n);
    };
    SmallVector<gpu::ParallelLoopDimMappingAttr> blockMapping, threadMapping;
    for (unsigned dim = 0; dim < rank; ++dim) {
      unsigned fromInner = rank - 1 - dim;
      threadMapping.push_back(mappingOf(tileSizes[dim] > 1 && fromInner < 3
                                            ? nth(gpu::Processor::ThreadX, fromInner)
                                            : gpu::Processor::Sequential));
    }
    // Block ids x, y, z for the innermost tile dimensions with more than one
    // tile; y and z only where the count is known to fit the grid.
    SmallVector<gpu::Processor> blockIds(rank, gpu::Processor::Sequential);
    unsigned blockDims = 0;
    for (unsigned i = 0; i < rank && blockDims < 3; ++i) {
      unsigned dim = rank - 1 - i;
      if (tiles[dim] == 1 || (blockDims > 0 && (!tiles[dim] || *tiles[dim] > kMaxGridYZ)))
        continue;
      blockIds[dim] = nth(gpu::Processor::BlockX, blockDims++);
    }
    for (gpu::Processor id : blockIds)
      blockMapping.push_back(mappingOf(id));
    if (failed(gpu::setMappingAttr(tileLoop, blockMapping)) ||
        failed(gpu::setMappingAttr(threadLoop, threadMapping)))
      return tileLoop.emitOpError("cannot be mapped to GPU blocks and threads");
    return success();
  }

  static std::optional<int64_t> constantTripCount(scf::ParallelOp loop, unsigned dim) {
    std::optional<int64_t> lower = getConstantIntValue(loop.getLowerBound()[dim]);
    std::optional<int64_t> upper = getConstantIntValue(loop.getUpperBound()[dim]);
    std::optional<int64_t> step = getConstantIntValue(loop.getStep()[dim]);
    if (!lower || !upper || !step || *step <= 0)
      return std::nullopt;
    return llvm::divideCeil(std::max<int64_t>(*upper - *lower, 0), *step);
  }
};

} // namespace
