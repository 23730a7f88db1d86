//===- ConfigFuzzer.cpp - config.json through the frontend ----------------===//
//
// A config.json (after one byte choosing the request: inference, training
// or generation, f32 or bf16) built into xfmr IR and verified, as xfmrc
// does before its pipeline.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "../lib/Frontend/FrontendSupport.h"

#include "xfmr/Dialect/XfmrDialect.h"
#include "xfmr/Frontend/ModelBuilder.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;

/// A context for a few hundred inputs: one per input would dominate the
/// time, and one for all would keep every type and attribute ever built.
MLIRContext &freshContext() {
  static std::unique_ptr<MLIRContext> context;
  static unsigned uses = 0;
  if (!context || ++uses % 256 == 0) {
    context = std::make_unique<MLIRContext>(MLIRContext::Threading::DISABLED);
    context->getDiagEngine().registerHandler([](Diagnostic &) { return success(); });
  }
  return *context;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext &context = freshContext();
  if (size == 0)
    return 0;
  xfmr::ModelRequest request;
  request.training = data[0] & 1;
  request.generate = !request.training && (data[0] & 2);
  if (data[0] & 4)
    request.elementType = xfmr::ElementType::BF16;
  request.batch = 1 + (data[0] >> 6);
  xfmr::ModelSource source;
  source.configPath = "config.json";
  source.configText = std::string(xfmr::fuzz::asText(data + 1, size - 1));
  // Layers past a few repeat the IR of the first ones and make an input a
  // hundred times slower (the limit itself is tested in config-errors.test).
  llvm::Expected<llvm::json::Value> json =
      xfmr::frontend::parseJsonFile(source.configPath, source.configText);
  if (!json) {
    llvm::consumeError(json.takeError());
  } else if (const llvm::json::Object *object = json->getAsObject()) {
    for (llvm::StringRef key : {"n_layer", "num_hidden_layers", "num_layers", "num_decoder_layers",
                                "encoder_layers", "decoder_layers"})
      if (std::optional<int64_t> layers = object->getInteger(key); layers && *layers > 4)
        return 0;
  }
  xfmr::ModelInfo info;
  llvm::Expected<OwningOpRef<ModuleOp>> module = xfmr::buildModel(context, source, request, info);
  if (!module) {
    llvm::consumeError(module.takeError());
    return 0;
  }
  // The frontend builds only valid IR.
  if (failed(verify(**module)))
    __builtin_trap();
  return 0;
}
