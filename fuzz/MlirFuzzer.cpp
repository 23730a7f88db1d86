//===- MlirFuzzer.cpp - parsing and verifying xfmr IR ---------------------===//
//
// `.mlir` text as xfmr-opt reads it, with the dialects xfmr models use:
// the parser, then every op's verifier.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "xfmr/Dialect/XfmrDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

using namespace mlir;

/// A context for a few hundred inputs: one per input would dominate the
/// time, and one for all would keep every type and attribute ever parsed.
MLIRContext &freshContext() {
  static std::unique_ptr<MLIRContext> context;
  static unsigned uses = 0;
  if (!context || ++uses % 256 == 0) {
    context = std::make_unique<MLIRContext>(MLIRContext::Threading::DISABLED);
    context->loadDialect<xfmr::XfmrDialect, func::FuncDialect, arith::ArithDialect,
                         tensor::TensorDialect>();
    context->getDiagEngine().registerHandler([](Diagnostic &) { return success(); });
  }
  return *context;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ParserConfig config(&freshContext());
  // The lexer reads up to a terminating NUL, as file buffers have.
  std::string text(xfmr::fuzz::asText(data, size));
  // parseSourceString verifies what it parsed.
  parseSourceString<ModuleOp>(text, config);
  return 0;
}
