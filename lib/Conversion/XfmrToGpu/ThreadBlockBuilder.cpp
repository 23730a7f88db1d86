//===- ThreadBlockBuilder.cpp - GPU kernels that also run on a CPU --------===//

#include "ThreadBlockBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace xfmr::gpu;

void ThreadBlockBuilder::forEachBlock(
    std::array<int64_t, 3> grid, ArrayRef<SmallVector<int64_t>> sharedShapes,
    function_ref<void(std::array<Value, 3>, ArrayRef<Value>)> body, ArrayRef<Type> sharedTypes) {
  auto typeOf = [&](size_t array) {
    return array < sharedTypes.size() ? sharedTypes[array] : b.getF32Type();
  };
  if (emulate != Emulation::None) {
    kb.forLoop(kb.index(0), kb.index(grid[2]), 1, [&](Value z) {
      kb.forLoop(kb.index(0), kb.index(grid[1]), 1, [&](Value y) {
        kb.forLoop(kb.index(0), kb.index(grid[0]), 1, [&](Value x) {
          SmallVector<Value> shared;
          for (auto [i, shape] : llvm::enumerate(sharedShapes))
            shared.push_back(kb.allocate(shape, typeOf(i)));
          body({x, y, z}, shared);
        });
      });
    });
    return;
  }
  auto workgroup =
      mlir::gpu::AddressSpaceAttr::get(b.getContext(), mlir::gpu::AddressSpace::Workgroup);
  SmallVector<MemRefType> types;
  SmallVector<int64_t> offsets;
  int64_t bytes = 0;
  for (auto [i, shape] : llvm::enumerate(sharedShapes)) {
    types.push_back(MemRefType::get(shape, typeOf(i), MemRefLayoutAttrInterface(), workgroup));
    offsets.push_back(bytes);
    bytes += llvm::alignTo(types.back().getNumElements() *
                               llvm::divideCeil(typeOf(i).getIntOrFloatBitWidth(), 8),
                           kSharedAlignment);
  }
  bool dynamic = bytes > kMaxStaticSharedBytes;

  // Shared memory as workgroup-space globals rather than launch
  // attributions: the buffer deallocation pipeline, which runs after this,
  // would add ownership arguments to a launch body with memref arguments.
  // Dynamic shared memory is one zero-length array, which
  // xfmr-gpu-merge-kernel-modules declares external in the kernel module
  // (CUDA's `extern __shared__ char memory[]`); not gpu.dynamic_shared_memory,
  // which lowers to an internal zero-length global, whose accesses LLVM may
  // take for undefined behaviour.
  auto module = b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  SymbolTable symbols(module);
  auto addGlobal = [&](StringRef name, MemRefType type) {
    OpBuilder detached(b.getContext());
    auto global =
        memref::GlobalOp::create(detached, loc, name, b.getStringAttr("private"), type, Attribute(),
                                 /*constant=*/false, b.getI64IntegerAttr(kSharedAlignment));
    symbols.insert(global, module.getBody()->begin());
    return global;
  };
  SmallVector<memref::GlobalOp> globals;
  if (dynamic)
    globals.push_back(
        addGlobal("__xfmr_dynamic_shared",
                  MemRefType::get({0}, b.getI8Type(), MemRefLayoutAttrInterface(), workgroup)));
  else
    for (MemRefType type : types)
      globals.push_back(addGlobal("__xfmr_shared", type));
  Value dynamicBytes =
      dynamic ? arith::ConstantIntOp::create(b, loc, b.getI32Type(), bytes).getResult() : Value();
  auto launch =
      mlir::gpu::LaunchOp::create(b, loc, kb.index(grid[0]), kb.index(grid[1]), kb.index(grid[2]),
                                  kb.index(threads), kb.index(1), kb.index(1), dynamicBytes);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  mlir::gpu::TerminatorOp::create(b, loc);
  b.setInsertionPointToStart(&launch.getBody().front());
  kernelEntry = &launch.getBody().front();
  lastPrivateArray = nullptr;
  threadId = launch.getThreadIds().x;
  mlir::gpu::KernelDim3 blocks = launch.getBlockIds();
  auto getGlobal = [&](memref::GlobalOp global) -> Value {
    return memref::GetGlobalOp::create(b, loc, global.getType(), global.getSymName());
  };
  SmallVector<Value> shared;
  if (dynamic) {
    // Past the static limit, the arrays are views of the launch's dynamic
    // shared memory (the runtime raises the kernel's limit to its size).
    Value memory = getGlobal(globals.front());
    for (auto [type, offset] : llvm::zip_equal(types, offsets))
      shared.push_back(
          memref::ViewOp::create(b, loc, type, memory, kb.index(offset), ValueRange{}));
  } else {
    shared = llvm::map_to_vector(globals, getGlobal);
  }
  body({blocks.x, blocks.y, blocks.z}, shared);
}

void ThreadBlockBuilder::phase(function_ref<void(Value)> body, bool barrier) {
  if (emulate != Emulation::None) {
    kb.forLoop(kb.index(0), kb.index(threads), 1, [&](Value i) {
      Value thread = emulate == Emulation::InOrder
                         ? i
                         : arith::SubIOp::create(b, loc, kb.index(threads - 1), i).getResult();
      body(thread);
      if (barrier && barrierHook)
        barrierHook(thread);
    });
    return;
  }
  body(threadId);
  if (barrier)
    mlir::gpu::BarrierOp::create(b, loc);
}

void ThreadBlockBuilder::reduce(
    ArrayRef<Value> values,
    function_ref<SmallVector<Value>(ArrayRef<Value>, ArrayRef<Value>)> combine) {
  assert(llvm::isPowerOf2_64(threads) && "a tree reduction needs a power-of-2 block");
  for (int64_t stride = threads / 2; stride >= 1; stride /= 2) {
    phase([&](Value t) {
      kb.ifThen(kb.below(t, stride), [&] {
        Value other = kb.addi(t, kb.index(stride));
        SmallVector<Value> mine, theirs;
        for (Value array : values) {
          mine.push_back(kb.load(array, {t}));
          theirs.push_back(kb.load(array, {other}));
        }
        for (auto [array, value] : llvm::zip_equal(values, combine(mine, theirs)))
          kb.store(value, array, {t});
      });
    });
  }
}

void ThreadBlockBuilder::allReduceLanes(ArrayRef<Value> arrays, int64_t size, int64_t laneBits,
                                        function_ref<Value(Value, Value)> combine) {
  assert(laneBits > 0 && laneBits < 32 && "lanes of one warp");
  if (emulate == Emulation::None) {
    for (Value array : arrays) {
      for (int64_t i = 0; i < size; ++i) {
        Value value = kb.load(array, {kb.index(i)});
        for (int64_t bit = 1; bit < 32; bit *= 2) {
          if (!(laneBits & bit))
            continue;
          Value other =
              mlir::gpu::ShuffleOp::create(b, loc, value, bit, 32, mlir::gpu::ShuffleMode::XOR)
                  .getShuffleResult();
          value = combine(value, other);
        }
        kb.store(value, array, {kb.index(i)});
      }
    }
    return;
  }
  // Each lane's combination goes to a scratch copy first: the other lane
  // of the pair still needs the value it replaces.
  SmallVector<Value> scratch;
  for (Value array : arrays)
    scratch.push_back(privateArray({size}, cast<MemRefType>(array.getType()).getElementType()));
  for (int64_t bit = 1; bit < 32; bit *= 2) {
    if (!(laneBits & bit))
      continue;
    phase(
        [&](Value t) {
          Value partner = arith::XOrIOp::create(b, loc, t, kb.index(bit));
          for (auto [array, copy] : llvm::zip_equal(arrays, scratch))
            for (int64_t i = 0; i < size; ++i)
              kb.store(combine(kb.load(array, at(t, {kb.index(i)})),
                               kb.load(array, at(partner, {kb.index(i)}))),
                       copy, at(t, {kb.index(i)}));
        },
        /*barrier=*/false);
    phase(
        [&](Value t) {
          for (auto [array, copy] : llvm::zip_equal(arrays, scratch))
            for (int64_t i = 0; i < size; ++i)
              kb.store(kb.load(copy, at(t, {kb.index(i)})), array, at(t, {kb.index(i)}));
        },
        /*barrier=*/false);
  }
}

Value ThreadBlockBuilder::warpUniform(Value value) {
  if (emulate != Emulation::None)
    return value;
  Value word = arith::IndexCastUIOp::create(b, loc, b.getI32Type(), value);
  Value first = mlir::gpu::ShuffleOp::create(b, loc, word, 0, 32, mlir::gpu::ShuffleMode::IDX)
                    .getShuffleResult();
  return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), first);
}

Value ThreadBlockBuilder::privateArray(ArrayRef<int64_t> shape, Type elementType) {
  if (!elementType)
    elementType = b.getF32Type();
  if (emulate == Emulation::None) {
    // At the kernel's entry, wherever the kernel asks for it: LLVM's SROA
    // promotes to registers only the allocas of a function's entry block.
    assert(kernelEntry && "inside forEachBlock");
    OpBuilder::InsertionGuard guard(b);
    if (lastPrivateArray)
      b.setInsertionPointAfter(lastPrivateArray);
    else
      b.setInsertionPointToStart(kernelEntry);
    auto array = memref::AllocaOp::create(b, loc, MemRefType::get(shape, elementType));
    lastPrivateArray = array;
    return array;
  }
  SmallVector<int64_t> perThread = {threads};
  llvm::append_range(perThread, shape);
  return kb.allocate(perThread, elementType);
}

SmallVector<Value> ThreadBlockBuilder::at(Value thread, ValueRange indices) {
  SmallVector<Value> result;
  if (emulate != Emulation::None)
    result.push_back(thread);
  llvm::append_range(result, indices);
  return result;
}
