//===- GpuManagedBuffers.cpp - buffers the kernels can address --*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-gpu-managed-buffers"

namespace xfmr {
#define GEN_PASS_DEF_XFMRGPUMANAGEDBUFFERS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// Whether `value`, or a view of it, may be written by one of its users.
/// Users that declare no memory effects count as writers.
bool mayBeWritten(Value value) {
  for (Operation *user : value.getUsers()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
      if (view.getViewSource() == value && mayBeWritten(view->getResult(0)))
        return true;
      continue;
    }
    auto effects = dyn_cast<MemoryEffectOpInterface>(user);
    if (!effects)
      return true;
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffectsOnValue(value, instances);
    if (llvm::any_of(instances, [](const MemoryEffects::EffectInstance &instance) {
          return isa<MemoryEffects::Write>(instance.getEffect());
        }))
      return true;
  }
  return false;
}

Value allocateManaged(OpBuilder &b, Location loc, MemRefType type, ValueRange dynamicSizes = {},
                      ValueRange symbols = {}) {
  return gpu::AllocOp::create(b, loc, type, /*asyncToken=*/Type(), ValueRange(), dynamicSizes,
                              symbols, /*hostShared=*/true)
      .getMemref();
}

struct GpuManagedBuffersPass : xfmr::impl::XfmrGpuManagedBuffersBase<GpuManagedBuffersPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;

    WalkResult hostAlloca = func.walk([](memref::AllocaOp alloca) {
      if (alloca->getParentOfType<scf::ParallelOp>() || alloca->getParentOfType<scf::ForallOp>() ||
          alloca->getParentOfType<gpu::LaunchOp>())
        return WalkResult::advance();
      alloca.emitOpError("outside parallel loops cannot be placed in GPU-visible memory");
      return WalkResult::interrupt();
    });
    if (hostAlloca.wasInterrupted())
      return signalPassFailure();

    OpBuilder b(&getContext());
    // Copies between the function's own buffers run as kernels. Done first:
    // the argument copies made below are the copy engine's.
    func.walk([&](memref::CopyOp copy) {
      b.setInsertionPoint(copy);
      linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(), copy.getTarget());
      copy.erase();
    });

    func.walk([&](memref::AllocOp alloc) {
      b.setInsertionPoint(alloc);
      alloc.replaceAllUsesWith(allocateManaged(b, alloc.getLoc(), alloc.getType(),
                                               alloc.getDynamicSizes(), alloc.getSymbolOperands()));
      alloc.erase();
    });
    func.walk([&](memref::DeallocOp dealloc) {
      b.setInsertionPoint(dealloc);
      gpu::DeallocOp::create(b, dealloc.getLoc(), Type(), ValueRange(), dealloc.getMemref());
      dealloc.erase();
    });

    // Arguments (host memory) and constants (host globals) are copied into
    // managed buffers at entry; written arguments are copied back. These are
    // copy-engine copies (gpu.memcpy), so kernels never fault on the data.
    Block &entry = func.getBody().front();
    SmallVector<func::ReturnOp> returns;
    func.walk([&](func::ReturnOp ret) { returns.push_back(ret); });
    SmallVector<Value> managedBuffers;
    auto stage = [&](Value hostValue, Location loc) {
      auto type = cast<MemRefType>(hostValue.getType());
      Value managed = allocateManaged(b, loc, type);
      auto copyIn = gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), managed, hostValue);
      hostValue.replaceAllUsesExcept(managed, copyIn);
      managedBuffers.push_back(managed);
      return managed;
    };
    b.setInsertionPointToStart(&entry);
    for (BlockArgument argument : func.getArguments()) {
      auto type = dyn_cast<MemRefType>(argument.getType());
      if (!type || argument.use_empty())
        continue;
      if (!type.getLayout().isIdentity() || !type.hasStaticShape()) {
        func.emitOpError("argument #")
            << argument.getArgNumber() << " must be a statically shaped, contiguous memref";
        return signalPassFailure();
      }
      bool written = mayBeWritten(argument);
      Value managed = stage(argument, func.getLoc());
      if (!written)
        continue;
      for (func::ReturnOp ret : returns) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(ret);
        gpu::MemcpyOp::create(b, ret.getLoc(), Type(), ValueRange(), argument, managed);
      }
    }
    SmallVector<memref::GetGlobalOp> globals;
    // Host constants; a kernel's own (shared-memory) globals stay put.
    func.walk([&](memref::GetGlobalOp global) {
      if (!global->getParentOfType<gpu::LaunchOp>())
        globals.push_back(global);
    });
    for (memref::GetGlobalOp global : globals) {
      global->moveBefore(&entry, b.getInsertionPoint());
      b.setInsertionPointAfter(global);
      stage(global.getResult(), global.getLoc());
    }
    for (func::ReturnOp ret : returns) {
      b.setInsertionPoint(ret);
      for (Value managed : managedBuffers)
        gpu::DeallocOp::create(b, ret.getLoc(), Type(), ValueRange(), managed);
    }
  }
};

} // namespace
