//===- GpuMergeKernelModules.cpp - one gpu.module for all kernels ---------===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-gpu-merge-kernel-modules"

namespace xfmr {
#define GEN_PASS_DEF_XFMRGPUMERGEKERNELMODULES
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

/// A kernel's dynamic shared memory: a zero-length array without initial value in
/// workgroup memory (ThreadBlockBuilder), private so that the host module
/// drops its copy once the kernels are outlined.
bool isDynamicSharedMemory(memref::GlobalOp global) {
  auto space = dyn_cast_if_present<gpu::AddressSpaceAttr>(global.getType().getMemorySpace());
  return space && space.getValue() == gpu::AddressSpace::Workgroup && global.isExternal() &&
         global.getType().getNumElements() == 0;
}

struct GpuMergeKernelModulesPass
    : xfmr::impl::XfmrGpuMergeKernelModulesBase<GpuMergeKernelModulesPass> {
  using Base::Base;

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> kernelModules(module.getOps<gpu::GPUModuleOp>());
    if (kernelModules.empty())
      return;
    for (gpu::GPUModuleOp kernels : kernelModules)
      if (kernels.getTargetsAttr() != kernelModules.front().getTargetsAttr()) {
        kernels.emitOpError("has other targets than '")
            << kernelModules.front().getName() << "'; cannot merge them";
        return signalPassFailure();
      }

    OpBuilder b(kernelModules.front());
    auto merged = gpu::GPUModuleOp::create(b, kernelModules.front().getLoc(), moduleName,
                                           kernelModules.front().getTargetsAttr());
    SymbolTable mergedSymbols(merged);
    // (old module, old symbol) -> symbol in the merged module; SymbolTable
    // renames a symbol whose name is taken.
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> moved;
    for (gpu::GPUModuleOp kernels : kernelModules) {
      for (Operation &op : llvm::make_early_inc_range(kernels.getBody()->getOperations())) {
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        if (!symbol) {
          op.emitOpError("in a kernel module is not a symbol; cannot merge it");
          return signalPassFailure();
        }
        StringAttr oldName = symbol.getNameAttr();
        if (auto global = dyn_cast<memref::GlobalOp>(op); global && isDynamicSharedMemory(global))
          global.setPublic();
        op.remove();
        moved[{kernels.getNameAttr(), oldName}] = mergedSymbols.insert(&op);
      }
    }
    WalkResult updated = module.walk([&](gpu::LaunchFuncOp launch) {
      SymbolRefAttr kernel = launch.getKernel();
      auto it = moved.find({kernel.getRootReference(), kernel.getLeafReference()});
      if (it == moved.end()) {
        launch.emitOpError("launches ") << kernel << ", which is in no kernel module";
        return WalkResult::interrupt();
      }
      launch.setKernelAttr(SymbolRefAttr::get(merged.getNameAttr(),
                                              {FlatSymbolRefAttr::get(it->second)}));
      return WalkResult::advance();
    });
    if (updated.wasInterrupted())
      return signalPassFailure();
    for (gpu::GPUModuleOp kernels : kernelModules)
      kernels.erase();
  }
};

} // namespace
