//===- xfmr-opt.cpp - mlir-opt with the xfmr dialect and passes -----------===//

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "xfmr/Conversion/Passes.h"
#include "xfmr/Dialect/XfmrDialect.h"
#include "xfmr/Pipelines/Pipelines.h"
#include "xfmr/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  xfmr::registerXfmrTransformsPasses();
  xfmr::registerXfmrConversionPasses();
  xfmr::registerPipelines();
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  registry.insert<xfmr::XfmrDialect>();
  xfmr::registerGpuKernelMemoryEffects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "xfmr optimizer driver\n", registry));
}
