//===- Compiler.cpp - lower, generate code, link ----------------*- C++ -*-===//

#include "xfmr/Driver/Compiler.h"

#include "xfmr-rt/xfmr_runtime.h"

#include "xfmr/Conversion/Passes.h"
#include "xfmr/Dialect/XfmrDialect.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/StandardInstrumentations.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/IPO/MergeFunctions.h"

#define DEBUG_TYPE "xfmr-compiler"

using namespace mlir;
using namespace xfmr;

namespace {

llvm::Error writeText(StringRef path, StringRef text) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return llvm::createStringError(path + ": cannot write: " + ec.message());
  out.os() << text;
  out.keep();
  return llvm::Error::success();
}

/// Collects MLIR diagnostics emitted during the pipeline into one error.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext &context)
      : handler(context.getDiagEngine().registerHandler([this](Diagnostic &diagnostic) {
          if (diagnostic.getSeverity() != DiagnosticSeverity::Error)
            return success();
          std::string location;
          llvm::raw_string_ostream os(location);
          if (auto file = diagnostic.getLocation()->findInstanceOf<FileLineColLoc>())
            os << file.getFilename().getValue() << ":" << file.getLine() << ":"
               << file.getColumn();
          else
            diagnostic.getLocation().print(os);
          messages.push_back(location + ": error: " + diagnostic.str());
          return success();
        })),
        context(context) {}
  ~DiagnosticCollector() { context.getDiagEngine().eraseHandler(handler); }
  llvm::Error error(const Twine &what) {
    if (messages.empty())
      return llvm::createStringError(what);
    return llvm::make_error<LocatedDiagnosticsError>(llvm::join(messages, "\n"));
  }

private:
  DiagnosticEngine::HandlerID handler;
  MLIRContext &context;
  std::vector<std::string> messages;
};

llvm::Expected<std::unique_ptr<llvm::TargetMachine>> createHostTargetMachine(StringRef cpu) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return llvm::createStringError("no code generator for " + triple.str() + ": " + error);
  std::string cpuName = cpu == "native" ? llvm::sys::getHostCPUName().str() : cpu.str();
  std::string features;
  if (cpu == "native") {
    llvm::SubtargetFeatures subtarget;
    for (const auto &[feature, enabled] : llvm::sys::getHostCPUFeatures())
      subtarget.AddFeature(feature, enabled);
    features = subtarget.getString();
  }
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpuName, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    return llvm::createStringError("cannot create a target machine for CPU '" + cpuName + "'");
  if (cpu != "native" && !machine->getMCSubtargetInfo()->isCPUStringValid(cpuName))
    return llvm::createStringError("unknown --mcpu '" + cpuName + "' for " + triple.str());
  return std::move(machine);
}

void optimize(llvm::Module &module, llvm::TargetMachine &machine) {
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  // LLVM's own flags (--time-passes, --print-after=...) then cover this pipeline too.
  llvm::PassInstrumentationCallbacks callbacks;
  llvm::StandardInstrumentations instrumentations(module.getContext(), /*DebugLogging=*/false);
  instrumentations.registerCallbacks(callbacks, &modules);
  llvm::PassBuilder builder(&machine, llvm::PipelineTuningOptions(), std::nullopt, &callbacks);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  // Every layer lowers to the same kernels; the OpenMP translation outlines
  // each parallel loop into a function of its own, so a model of N layers has
  // N identical copies of each. Their addresses only reach the OpenMP runtime,
  // so merging them first lets the pipeline below optimize each kernel once.
  for (llvm::Function &function : module)
    if (function.hasLocalLinkage())
      function.setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  [[maybe_unused]] size_t before = module.getFunctionList().size();
  llvm::MergeFunctionsPass::runOnModule(module);
  LLVM_DEBUG(llvm::dbgs() << "merged identical functions: " << before << " -> "
                          << module.getFunctionList().size() << "\n");
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(module, modules);
}

llvm::Error emitObject(llvm::Module &module, llvm::TargetMachine &machine, StringRef path) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(path + ": cannot write: " + ec.message());
  llvm::legacy::PassManager passes;
  if (machine.addPassesToEmitFile(passes, out.os(), nullptr, llvm::CodeGenFileType::ObjectFile))
    return llvm::createStringError("the target cannot emit object files");
  passes.run(module);
  out.keep();
  return llvm::Error::success();
}

llvm::Error link(StringRef object, const CompileOptions &options, StringRef mainLibrary) {
  llvm::ErrorOr<std::string> linker = std::string(XFMR_RUNTIME_LINKER);
  if (!llvm::sys::fs::can_execute(*linker))
    linker = llvm::sys::findProgramByName("clang++-22");
  if (!linker)
    linker = llvm::sys::findProgramByName("c++");
  if (!linker)
    return llvm::createStringError("no C++ linker driver (" XFMR_RUNTIME_LINKER
                                   ", clang++-22 or c++) found");
  auto library = [&](StringRef name) {
    SmallString<256> path(options.runtimeLibraryDir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };
  // Every executable runs its tokenizer (--tokenize), SentencePiece models
  // included.
  std::vector<std::string> libraries = {library(mainLibrary)};
  // Generators and encoders serve OpenAI's API (--serve).
  bool serves = options.mode != CompileMode::Train;
  if (serves)
    libraries.push_back(library("libxfmr_server.a"));
  libraries.push_back(library("libxfmr_sentencepiece.a"));
  libraries.push_back(library("libxfmr_runtime.a"));
  if (options.target == Target::Nvptx)
    libraries.push_back(library("libxfmr_cuda.a"));
  for (StringRef lib : libraries)
    if (!llvm::sys::fs::exists(lib))
      return llvm::createStringError(
          "runtime library " + lib + " not found" +
          (lib.ends_with("libxfmr_cuda.a")
               ? " (this build of xfmr skipped it: no cuda.h under XFMR_CUDA_ROOT; "
                 "--emit=obj and --emit=ptx work without it)"
               : ""));
  std::string rpath = "-Wl,-rpath," XFMR_OPENMP_LIB_DIR;
  SmallVector<StringRef> args = {*linker, object};
  args.append(libraries.begin(), libraries.end());
  if (serves)
    args.append({"-lcpp-httplib", "-pthread"});
  args.append({"-lsentencepiece", "-lpcre2-8", "-lutf8proc", "-L" XFMR_OPENMP_LIB_DIR, "-lomp",
               rpath, "-ldl", "-lm", "-o", options.outputPath});
  if (llvm::sys::fs::exists(XFMR_COMPILER_RT_BUILTINS))
    args.push_back(XFMR_COMPILER_RT_BUILTINS);
  SmallVector<StringRef> sanitizerFlags;
  StringRef(XFMR_RUNTIME_LINK_FLAGS).split(sanitizerFlags, ' ', -1, /*KeepEmpty=*/false);
  args.append(sanitizerFlags.begin(), sanitizerFlags.end());
  // The trainer's main joins an MPI job under mpirun.
  SmallVector<StringRef> mpiLibraries;
  if (options.mode == CompileMode::Train)
    StringRef(XFMR_MPI_LINK_LIBRARIES).split(mpiLibraries, ' ', -1, /*KeepEmpty=*/false);
  args.append(mpiLibraries.begin(), mpiLibraries.end());
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*linker, args, std::nullopt, {}, 0, 0, &message);
  if (status != 0)
    return llvm::createStringError("linking " + options.outputPath + " failed" +
                                   (message.empty() ? "" : ": " + message));
  return llvm::Error::success();
}

/// Writes the kernels of the GPU pipeline's `gpu.binary` as they are: PTX
/// text, a cubin or a fatbin.
llvm::Error writeKernels(ModuleOp module, StringRef path) {
  auto binaries = llvm::to_vector(module.getOps<gpu::BinaryOp>());
  if (binaries.size() != 1 || binaries.front().getObjects().size() != 1)
    return llvm::createStringError("internal error: expected one kernel binary, found " +
                                   Twine(binaries.size()));
  auto object = cast<gpu::ObjectAttr>(binaries.front().getObjects()[0]);
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(path + ": cannot write: " + ec.message());
  out.os() << object.getObject().getValue();
  out.keep();
  return llvm::Error::success();
}

/// The arena of `entry` and of every function it calls, directly or not,
/// by function name, as xfmr-plan-buffers recorded them on the lowered
/// functions.
std::map<std::string, int64_t> arenasReachedFrom(ModuleOp module, StringRef entry) {
  SymbolTable symbols(module);
  std::map<std::string, int64_t> arenas;
  llvm::StringSet<> seen;
  SmallVector<StringRef> pending = {entry};
  while (!pending.empty()) {
    StringRef name = pending.pop_back_val();
    if (!seen.insert(name).second)
      continue;
    auto function = symbols.lookup<LLVM::LLVMFuncOp>(name);
    if (!function)
      continue;
    if (auto bytes = function->getAttrOfType<IntegerAttr>(kArenaBytesAttr))
      arenas[name.str()] = bytes.getInt();
    function.walk([&](LLVM::CallOp call) {
      if (std::optional<StringRef> callee = call.getCallee())
        pending.push_back(*callee);
    });
  }
  return arenas;
}

} // namespace

llvm::Error xfmr::compileModel(const CompileOptions &options) {
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  registry.insert<XfmrDialect>();
  registerGpuKernelMemoryEffects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Diagnostics name the location; the operation dump would bury that.
  context.printOpOnDiagnostic(false);

  std::vector<ModelSignature> entries;
  auto module = loadModel(context, options, entries);
  if (!module)
    return module.takeError();
  bool executable = options.emit == EmitKind::Executable;
  std::string prefix = executable ? "xfmr_model" : options.symbolPrefix;

  if (options.emit == EmitKind::Mlir) {
    std::string text;
    llvm::raw_string_ostream os(text);
    (*module)->print(os);
    return writeText(options.outputPath, text);
  }
  if (options.emit == EmitKind::RandomWeights)
    return writeRandomWeights(entries.front(), options.outputPath, options.seed);
  if (options.emit == EmitKind::QuantizedWeights) {
    const std::string &source = entries.front().manifest.defaultWeights;
    if (source.empty())
      return llvm::createStringError(options.inputPath +
                                     ": --quantize reads a checkpoint directory's weights, and "
                                     "this model has none (compile the checkpoint directory)");
    std::vector<std::string> manifests;
    std::vector<const char *> texts;
    for (const ModelSignature &entry : entries)
      manifests.push_back(rt::writeManifest(entry.manifest));
    for (const std::string &manifest : manifests)
      texts.push_back(manifest.c_str());
    char err[512];
    if (xfmr_write_model_weights(texts.data(), texts.size(), source.c_str(),
                                 options.outputPath.c_str(), err, sizeof(err)))
      return llvm::createStringError(err);
    return llvm::Error::success();
  }
  if (options.emit == EmitKind::Header)
    return writeText(options.outputPath,
                     buildHeader(entries, prefix, llvm::sys::path::filename(options.inputPath)));

  // Name the entries `<prefix>_<symbol>`; other functions are not part of
  // the ABI (e.g. the loss a gradient entry was derived from): drop them
  // unless an entry calls them.
  llvm::StringMap<std::string> symbols;
  for (const ModelSignature &entry : entries)
    symbols[entry.manifest.entry] = prefix + "_" + entry.symbol;
  for (auto func : llvm::make_early_inc_range((*module)->getOps<func::FuncOp>())) {
    auto it = symbols.find(func.getName());
    if (it != symbols.end())
      func.setName(it->second);
    else if (!func.isExternal())
      func.setPrivate();
  }
  PassManager cleanup(&context);
  cleanup.addPass(createSymbolDCEPass());
  if (failed(cleanup.run(**module)))
    return llvm::createStringError("internal error: removing unused functions failed");

  auto machine = createHostTargetMachine(options.cpu);
  if (!machine)
    return machine.takeError();
  DiagnosticCollector diagnostics(context);
  PassManager pm(&context);
  // --mlir-timing and the other pass-manager flags of mlir-opt.
  if (failed(applyPassManagerCLOptions(pm)))
    return llvm::createStringError("invalid pass-manager options");
  applyDefaultTimingPassManagerCLOptions(pm);
  if (options.target == Target::Nvptx) {
    GpuPipelineOptions pipeline;
    pipeline.setFusion(options.fusion);
    pipeline.chip = options.gpuArch;
    pipeline.format = options.emit == EmitKind::Cubin    ? "bin"
                      : options.emit == EmitKind::Fatbin ? "fatbin"
                                                         : "isa";
    pipeline.toolkit = options.cudaRoot;
    buildGpuPipeline(pm, pipeline);
  } else {
    // Vector code for the widest unit the target has. (The CPU pipeline's
    // options, and the GPU's where its kernels are emulated.)
    GpuEmulationPipelineOptions pipeline;
    pipeline.setFusion(options.fusion);
    pipeline.openmp = options.openmp;
    // An executable calls each entry once at a time; an object's users may not.
    pipeline.globalArena = options.emit == EmitKind::Executable;
    pipeline.overlapAllReduce = options.train.overlapAllReduce;
    pipeline.chip = options.gpuArch;
    pipeline.reverseThreads = options.reverseGpuThreads;
    const llvm::MCSubtargetInfo &host = *(*machine)->getMCSubtargetInfo();
    bool wide = options.vectorLanes ? options.vectorLanes == 16 : host.checkFeatures("+avx512f");
    pipeline.vectorLanes = wide ? 16 : 8;
    pipeline.vectorRegisters = wide ? 32 : 16;
    // vpdpbusd on 16 lanes is AVX-512 VNNI's; on 8, AVX-VNNI's or, with
    // AVX-512VL, AVX-512 VNNI's. Without it, vpmaddubsw and vpmaddwd.
    bool vnni = wide
                    ? host.checkFeatures("+avx512vnni")
                    : host.checkFeatures("+avxvnni") || host.checkFeatures("+avx512vnni,+avx512vl");
    bool multiplyAdd = host.checkFeatures(wide ? "+avx512bw" : "+avx2");
    pipeline.int8Dot = !options.int8Dot          ? "none"
                       : options.portableInt8Dot ? "portable"
                       : vnni                    ? "vnni"
                       : multiplyAdd             ? "madd"
                                                 : "none";
    pipeline.bf16Dot = options.bf16Dot && wide && host.checkFeatures("+avx512bf16");
    if (options.emulateGpuKernels)
      buildGpuEmulationPipeline(pm, pipeline);
    else
      buildCpuPipeline(pm, pipeline);
  }
  if (failed(pm.run(**module)))
    return diagnostics.error("lowering " + options.inputPath + " failed");
  for (ModelSignature &entry : entries)
    entry.manifest.arenas = arenasReachedFrom(**module, symbols[entry.manifest.entry]);
  if (emitsKernelsOnly(options.emit))
    return writeKernels(**module, options.outputPath);

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(**module, llvmContext, prefix);
  if (!llvmModule)
    return diagnostics.error("translating " + options.inputPath + " to LLVM IR failed");
  llvmModule->setTargetTriple((*machine)->getTargetTriple());
  llvmModule->setDataLayout((*machine)->createDataLayout());

  for (const ModelSignature &entry : entries) {
    std::string base = entry.symbol == "forward" ? prefix : prefix + "_" + entry.symbol;
    auto *manifestData =
        llvm::ConstantDataArray::getString(llvmContext, rt::writeManifest(entry.manifest), true);
    new llvm::GlobalVariable(*llvmModule, manifestData->getType(), /*isConstant=*/true,
                             llvm::GlobalValue::ExternalLinkage, manifestData, base + "_manifest");
  }
  if (llvm::verifyModule(*llvmModule, &llvm::errs()))
    return llvm::createStringError("internal error: the generated LLVM IR does not verify");
  optimize(*llvmModule, **machine);

  if (options.emit == EmitKind::Llvm) {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvmModule->print(os, nullptr);
    return writeText(options.outputPath, text);
  }
  if (options.emit == EmitKind::Object)
    return emitObject(*llvmModule, **machine, options.outputPath);

  SmallString<128> objectPath;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("xfmr-model", "o", objectPath))
    return llvm::createStringError("cannot create a temporary object file: " + ec.message());
  llvm::FileRemover removeObject(objectPath);
  if (llvm::Error error = emitObject(*llvmModule, **machine, objectPath))
    return error;
  return link(objectPath, options,
              options.mode == CompileMode::Train      ? "libxfmr_train_main.a"
              : options.mode == CompileMode::Generate ? "libxfmr_generate_main.a"
                                                      : "libxfmr_main.a");
}
