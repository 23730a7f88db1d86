//===- GpuManagedBuffers.cpp - buffers the kernels can address --*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
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

/// The runtime function (libxfmr_cuda) that tells whether a host pointer is
/// CUDA managed memory: the runtime's own buffers in GPU executables.
constexpr StringLiteral kIsManaged = "xfmrGpuIsManaged";

/// Places `func`'s buffers in memory the kernels address; see the pass
/// description.
LogicalResult placeBuffers(func::FuncOp func, func::FuncOp isManaged) {
  WalkResult hostAlloca = func.walk([](memref::AllocaOp alloca) {
    if (alloca->getParentOfType<scf::ParallelOp>() || alloca->getParentOfType<scf::ForallOp>() ||
        alloca->getParentOfType<gpu::LaunchOp>())
      return WalkResult::advance();
    alloca.emitOpError("outside parallel loops cannot be placed in GPU-visible memory");
    return WalkResult::interrupt();
  });
  if (hostAlloca.wasInterrupted())
    return failure();

  OpBuilder b(func.getContext());
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

  Block &entry = func.getBody().front();
  SmallVector<func::ReturnOp> returns;
  func.walk([&](func::ReturnOp ret) { returns.push_back(ret); });
  b.setInsertionPointToStart(&entry);
  // Arguments in managed memory are used in place. Others (host memory) are
  // copied into managed buffers at entry and, where written, back before
  // returning; those copies are the copy engine's (gpu.memcpy), so the
  // kernels find staged data already in GPU memory.
  for (BlockArgument argument : func.getArguments()) {
    auto type = dyn_cast<MemRefType>(argument.getType());
    if (!type || argument.use_empty())
      continue;
    if (!type.getLayout().isIdentity() || !type.hasStaticShape())
      return func.emitOpError("argument #")
             << argument.getArgNumber() << " must be a statically shaped, contiguous memref";
    bool written = mayBeWritten(argument);
    Location loc = argument.getLoc();
    auto pointer = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, argument);
    Value inPlace = func::CallOp::create(b, loc, isManaged, pointer.getResult()).getResult(0);
    auto ifManaged = scf::IfOp::create(b, loc, type, inPlace, /*withElseRegion=*/true);
    b.setInsertionPointToStart(ifManaged.thenBlock());
    auto yieldArgument = scf::YieldOp::create(b, loc, argument);
    b.setInsertionPointToStart(ifManaged.elseBlock());
    Value staged = allocateManaged(b, loc, type);
    auto copyIn = gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), staged, argument);
    scf::YieldOp::create(b, loc, staged);
    b.setInsertionPointAfter(ifManaged);
    Value buffer = ifManaged.getResult(0);
    argument.replaceAllUsesExcept(buffer,
                                  SmallPtrSet<Operation *, 3>{pointer, yieldArgument, copyIn});
    Value wasStaged = arith::XOrIOp::create(b, loc, inPlace,
                                            arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
    for (func::ReturnOp ret : returns) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(ret);
      auto ifStaged = scf::IfOp::create(b, loc, wasStaged);
      b.setInsertionPointToStart(ifStaged.thenBlock());
      if (written)
        gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), argument, buffer);
      gpu::DeallocOp::create(b, loc, Type(), ValueRange(), buffer);
    }
  }
  // Host constants are copied into managed buffers at entry; a kernel's own
  // (shared-memory) globals stay put.
  SmallVector<memref::GetGlobalOp> globals;
  func.walk([&](memref::GetGlobalOp global) {
    if (!global->getParentOfType<gpu::LaunchOp>())
      globals.push_back(global);
  });
  for (memref::GetGlobalOp global : globals) {
    global->moveBefore(&entry, b.getInsertionPoint());
    b.setInsertionPointAfter(global);
    Location loc = global.getLoc();
    Value staged = allocateManaged(b, loc, global.getType());
    auto copyIn = gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), staged, global.getResult());
    global.getResult().replaceAllUsesExcept(staged, copyIn);
    for (func::ReturnOp ret : returns) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(ret);
      gpu::DeallocOp::create(b, ret.getLoc(), Type(), ValueRange(), staged);
    }
  }
  return success();
}

struct GpuManagedBuffersPass : xfmr::impl::XfmrGpuManagedBuffersBase<GpuManagedBuffersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << module.getLoc() << "\n");
    auto isManaged = module.lookupSymbol<func::FuncOp>(kIsManaged);
    if (!isManaged) {
      OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
      isManaged = func::FuncOp::create(b, module.getLoc(), kIsManaged,
                                       b.getFunctionType({b.getIndexType()}, {b.getI1Type()}));
      isManaged.setPrivate();
    }
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (!func.isExternal() && failed(placeBuffers(func, isManaged)))
        return signalPassFailure();
  }
};

} // namespace
