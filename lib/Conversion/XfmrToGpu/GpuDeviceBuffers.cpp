//===- GpuDeviceBuffers.cpp - managed buffers only kernels touch -*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-gpu-device-buffers"

namespace xfmr {
#define GEN_PASS_DEF_XFMRGPUDEVICEBUFFERS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// Whether the memory `buffer` views is used only by the GPU: kernels, the
/// copy engine, and ops that read no element (a deallocation, the shape).
bool onlyGpuTouches(Value buffer) {
  for (Operation *user : buffer.getUsers()) {
    if (user->getParentOfType<gpu::LaunchOp>() ||
        isa<gpu::LaunchFuncOp, gpu::MemcpyOp, gpu::MemsetOp, gpu::DeallocOp>(user))
      continue;
    // A buffer an scf.if yields (an argument staged where it was not in
    // managed memory) counts through the yielded value.
    if (auto yield = dyn_cast<scf::YieldOp>(user)) {
      for (OpOperand &use : yield->getOpOperands())
        if (use.get() == buffer &&
            !onlyGpuTouches(yield->getParentOp()->getResult(use.getOperandNumber())))
          return false;
      continue;
    }
    if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
      if (view.getViewSource() == buffer && !onlyGpuTouches(view->getResult(0)))
        return false;
      continue;
    }
    // A host op that neither reads nor writes the buffer (memref.dim,
    // extract_strided_metadata) and makes no other buffer of it.
    auto effects = dyn_cast<MemoryEffectOpInterface>(user);
    if (!effects || !effects.hasNoEffect() ||
        llvm::any_of(user->getResultTypes(), llvm::IsaPred<BaseMemRefType>))
      return false;
  }
  return true;
}

struct GpuDeviceBuffersPass : xfmr::impl::XfmrGpuDeviceBuffersBase<GpuDeviceBuffersPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    SmallVector<gpu::AllocOp> managed;
    getOperation().walk([&](gpu::AllocOp alloc) {
      if (alloc.getHostShared() && alloc.getAsyncToken())
        managed.push_back(alloc);
    });
    OpBuilder b(&getContext());
    for (gpu::AllocOp alloc : managed) {
      if (onlyGpuTouches(alloc.getMemref())) {
        alloc.setHostShared(false);
        continue;
      }
      // gpu-to-llvm allocates managed memory only outside the stream order:
      // wait for the work before, allocate, and start a new stream.
      b.setInsertionPoint(alloc);
      Location loc = alloc.getLoc();
      gpu::WaitOp::create(b, loc, Type(), alloc.getAsyncDependencies());
      auto host = gpu::AllocOp::create(b, loc, alloc.getMemref().getType(), Type(), ValueRange(),
                                       alloc.getDynamicSizes(), alloc.getSymbolOperands(),
                                       /*hostShared=*/true);
      Value stream = gpu::WaitOp::create(b, loc, b.getType<gpu::AsyncTokenType>(), ValueRange())
                         .getAsyncToken();
      alloc.getMemref().replaceAllUsesWith(host.getMemref());
      alloc.getAsyncToken().replaceAllUsesWith(stream);
      alloc.erase();
    }
  }
};

} // namespace
