//===- PackedEntry.cpp - `<f>_packed(void **args)` wrappers -----*- C++ -*-===//

#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-emit-packed-entry"

namespace xfmr {
#define GEN_PASS_DEF_XFMREMITPACKEDENTRY
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;

namespace {

struct EmitPackedEntryPass : xfmr::impl::XfmrEmitPackedEntryBase<EmitPackedEntryPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    auto ptrType = LLVM::LLVMPointerType::get(context);
    auto voidType = LLVM::LLVMVoidType::get(context);
    SmallVector<LLVM::LLVMFuncOp> entries;
    for (auto func : module.getOps<LLVM::LLVMFuncOp>())
      if (func->hasAttr("xfmr.entry") && !func.isExternal())
        entries.push_back(func);

    for (LLVM::LLVMFuncOp func : entries) {
      // The signature was recorded (manifest, header) before lowering; LLVM
      // IR cannot carry these attributes, and its translation warns about
      // each one.
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        for (StringRef name : {"xfmr.input", "xfmr.param", "xfmr.output"})
          func.removeArgAttr(i, StringAttr::get(context, name));
      LLVM::LLVMFunctionType type = func.getFunctionType();
      if (!llvm::all_of(type.getParams(), [](Type t) { return isa<LLVM::LLVMPointerType>(t); }) ||
          !isa<LLVM::LLVMVoidType>(type.getReturnType())) {
        func.emitError("packed entry needs a void function of pointers (lower memrefs with "
                       "the bare-pointer calling convention)");
        return signalPassFailure();
      }
      OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
      Location loc = func.getLoc();
      auto wrapper = LLVM::LLVMFuncOp::create(b, loc, (func.getName() + "_packed").str(),
                                              LLVM::LLVMFunctionType::get(voidType, {ptrType}));
      Block *body = wrapper.addEntryBlock(b);
      b.setInsertionPointToStart(body);
      SmallVector<Value> args;
      for (unsigned i = 0, e = type.getNumParams(); i < e; ++i) {
        Value slot = LLVM::GEPOp::create(b, loc, ptrType, ptrType, body->getArgument(0),
                                         ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
        args.push_back(LLVM::LoadOp::create(b, loc, ptrType, slot));
      }
      LLVM::CallOp::create(b, loc, func, args);
      LLVM::ReturnOp::create(b, loc, ValueRange{});
    }
  }
};

} // namespace
