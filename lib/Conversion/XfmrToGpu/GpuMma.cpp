//===- GpuMma.cpp - tensor-core products of bf16/f16 factors ----*- C++ -*-===//

#include "GpuMma.h"
#include "GpuKernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace xfmr::gpu;

MmaBuilder::MmaBuilder(kernels::KernelBuilder &kb, Type narrow, bool emulated)
    : kb(kb), b(kb.builder()), loc(kb.location()), narrow(narrow), emulated(emulated) {
  assert((narrow.isBF16() || narrow.isF16()) && "mma.sync factors are bf16 or f16");
}

std::pair<Value, Value> MmaBuilder::laneCoordinates(Value lane) {
  return {kb.divui(lane, 4), kb.remui(lane, 4)};
}

Value MmaBuilder::accumulatorRow(Value group, int64_t r) {
  return kb.addi(group, kb.index((r / 2) * 8));
}

Value MmaBuilder::accumulatorCol(Value inGroup, int64_t r) {
  return kb.addi(kb.muli(inGroup, 2), kb.index(r % 2));
}

Value MmaBuilder::i32(int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), value);
}

Value MmaBuilder::bits(Value narrowValue) {
  return arith::BitcastOp::create(b, loc, b.getI16Type(), narrowValue);
}

Value MmaBuilder::pack(Value lowBits, Value highBits) {
  Value lowWord = arith::ExtUIOp::create(b, loc, b.getI32Type(), lowBits);
  Value highWord = arith::ExtUIOp::create(b, loc, b.getI32Type(), highBits);
  highWord = arith::ShLIOp::create(b, loc, highWord, i32(16));
  return arith::OrIOp::create(b, loc, lowWord, highWord);
}

Value MmaBuilder::packRounded(Value low, Value high) {
  Type f32 = b.getF32Type();
  Value pair = vector::FromElementsOp::create(b, loc, VectorType::get({2}, f32), {low, high});
  Value rounded = arith::TruncFOp::create(b, loc, VectorType::get({2}, narrow), pair);
  return LLVM::BitcastOp::create(b, loc, b.getI32Type(), rounded);
}

std::pair<Value, Value> MmaBuilder::unpack(Value word) {
  auto half = [&](Value wordBits) {
    Value narrowBits = arith::TruncIOp::create(b, loc, b.getI16Type(), wordBits);
    Value value = arith::BitcastOp::create(b, loc, narrow, narrowBits);
    return arith::ExtFOp::create(b, loc, b.getF32Type(), value).getResult();
  };
  return {half(word), half(arith::ShRUIOp::create(b, loc, word, i32(16)))};
}

Value MmaBuilder::operandRegister(Value word) {
  if (narrow.isBF16())
    return word;
  return LLVM::BitcastOp::create(b, loc, VectorType::get({2}, narrow), word);
}

SmallVector<Value> MmaBuilder::multiply(ArrayRef<Value> a, ArrayRef<Value> bWords,
                                        ArrayRef<Value> acc) {
  Type f32 = b.getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes type = narrow.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  auto registers = [&](ArrayRef<Value> words) {
    return llvm::map_to_vector(words, [&](Value word) { return operandRegister(word); });
  };
  auto mma = NVVM::MmaOp::create(
      b, loc, resultType, registers(a), registers(bWords), acc, ArrayRef<int64_t>{kM, kN, kK},
      std::nullopt, std::nullopt, std::array<NVVM::MMATypes, 2>{type, type},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
  SmallVector<Value> result;
  for (int64_t r = 0; r < kAccumulators; ++r)
    result.push_back(LLVM::ExtractValueOp::create(b, loc, mma.getRes(), r));
  return result;
}

Value MmaBuilder::sharedAddress(Value tile, ValueRange indices) {
  auto [strides, offset] = cast<MemRefType>(tile.getType()).getStridesAndOffset();
  assert((indices.empty() || indices.size() == strides.size()) && "no indices: the first element");
  Value element = kb.index(offset);
  for (auto [index, stride] : llvm::zip(indices, strides))
    element = kb.addi(element, kb.muli(index, stride));
  Value bytes = kb.muli(element, 2);
  if (!emulated)
    bytes = kb.addi(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, tile), bytes);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), bytes);
}

SmallVector<Value> MmaBuilder::loadMatrices(Value tile, ValueRange indices, int64_t count,
                                            bool transposed) {
  MLIRContext *context = b.getContext();
  Value pointer = LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(context, 3),
                                           sharedAddress(tile, indices));
  Type i32 = b.getI32Type();
  Type type = LLVM::LLVMStructType::getLiteral(context, SmallVector<Type>(count, i32));
  auto load = NVVM::LdMatrixOp::create(
      b, loc, type, pointer, b.getI32IntegerAttr(count),
      NVVM::MMALayoutAttr::get(context, transposed ? NVVM::MMALayout::col : NVVM::MMALayout::row),
      NVVM::LdStMatrixShapeAttr::get(context, 8, 8),
      NVVM::LdStMatrixEltTypeAttr::get(context, NVVM::LdStMatrixEltType::B16));
  SmallVector<Value> result;
  for (int64_t i = 0; i < count; ++i)
    result.push_back(LLVM::ExtractValueOp::create(b, loc, load.getRes(), i));
  return result;
}

Value MmaBuilder::vectorsAligned(Value buffer, int64_t contiguousDim) {
  return xfmr::gpu::vectorsAligned(kb, buffer, kVector, contiguousDim);
}

void MmaBuilder::copyAsync(Value tile, ValueRange tileIndices, Value source,
                           ValueRange sourceIndices, Value sourceElements) {
  nvgpu::DeviceAsyncCopyOp::create(b, loc, tile, tileIndices, source, sourceIndices,
                                   b.getIndexAttr(kVector), sourceElements, b.getUnitAttr());
}

void MmaBuilder::commitCopies() { ptxInstruction("cp.async.commit_group;"); }

void MmaBuilder::waitForCopies(int64_t pending) {
  ptxInstruction(("cp.async.wait_group " + Twine(pending) + ";").str());
}

/// Inline assembly with side effects.
static LLVM::InlineAsmOp createInlineAsm(OpBuilder &b, Location loc, TypeRange results,
                                         ValueRange operands, StringRef text,
                                         StringRef constraints) {
  return LLVM::InlineAsmOp::create(
      b, loc, results, operands, b.getStringAttr(text), b.getStringAttr(constraints),
      b.getUnitAttr(), /*is_align_stack=*/nullptr,
      LLVM::TailCallKindAttr::get(b.getContext(), LLVM::TailCallKind::None),
      /*asm_dialect=*/nullptr, /*operand_attrs=*/nullptr);
}

void MmaBuilder::ptxInstruction(StringRef text) {
  createInlineAsm(b, loc, TypeRange{}, ValueRange{}, text, "");
}

void MmaBuilder::fenceSharedForWarpgroupMma() { ptxInstruction("fence.proxy.async.shared::cta;"); }

SmallVector<Value> MmaBuilder::ptxWithOperands(StringRef text, StringRef constraints,
                                               TypeRange results, ValueRange operands) {
  Type type = LLVM::LLVMStructType::getLiteral(b.getContext(), llvm::to_vector(results));
  auto asmOp = createInlineAsm(b, loc, type, operands, text, constraints);
  SmallVector<Value> values;
  for (int64_t i = 0, e = results.size(); i < e; ++i)
    values.push_back(LLVM::ExtractValueOp::create(b, loc, asmOp.getRes(), i));
  return values;
}

SmallVector<Value> MmaBuilder::coreMatrixIndices(Value row, Value col) {
  return {kb.divui(row, kVector), kb.divui(col, kVector), kb.remui(row, kVector),
          kb.remui(col, kVector)};
}

std::pair<Value, Value> MmaBuilder::coreMatrixVector(Value i, int64_t chunks) {
  Value group = kb.divui(i, kVector * chunks);
  return {kb.addi(kb.muli(group, kVector), kb.remui(i, kVector)),
          kb.muli(kb.remui(kb.divui(i, kVector), chunks), kVector)};
}

MmaBuilder::SharedOperand MmaBuilder::matrixDescriptor(Value tile, ValueRange start,
                                                       int64_t offsetBytes, int64_t cols,
                                                       bool kAlongRows) {
  // The leading byte offset steps along K, the stride along M or N: between
  // the tile's groups of 8 rows, or between its core matrices along a row.
  int64_t rowGroupBytes = coreMatrixOffset(kVector, 0, cols);
  int64_t leadingBytes = kAlongRows ? rowGroupBytes : kCoreMatrixBytes;
  int64_t strideBytes = kAlongRows ? kCoreMatrixBytes : rowGroupBytes;
  // Addresses and offsets in 16-byte units: the start address's 14 bits at
  // 0, the leading offset's at 16, the stride's at 32 (no swizzle, base
  // offset 0).
  auto i64 = [&](int64_t value) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), value).getResult();
  };
  Value address = arith::AndIOp::create(b, loc, sharedAddress(tile, start), i64(0x3FFFF));
  address = arith::ShRUIOp::create(b, loc, address, i64(4));
  address = arith::AddIOp::create(b, loc, address, i64(offsetBytes >> 4));
  Value descriptor = arith::OrIOp::create(
      b, loc, address, i64((leadingBytes >> 4) << 16 | (strideBytes >> 4) << 32));
  return {descriptor, /*mnMajor=*/kAlongRows};
}

MmaBuilder::DescribedTile MmaBuilder::describedTile(Value tile, SharedOperand operand) {
  assert(emulated && "the tensor cores read on a GPU");
  auto bytesAt = [&](int64_t bit) {
    Value units = arith::ShRUIOp::create(
        b, loc, operand.descriptor,
        arith::ConstantIntOp::create(b, loc, b.getI64Type(), bit).getResult());
    units = arith::TruncIOp::create(b, loc, b.getI32Type(), units);
    units = arith::AndIOp::create(b, loc, units, i32(0x3FFF));
    return kb.muli(arith::IndexCastUIOp::create(b, loc, b.getIndexType(), units), 16);
  };
  auto type = cast<MemRefType>(tile.getType());
  assert(type.getLayout().isIdentity() && "addresses relative to the tile's first element");
  SmallVector<ReassociationIndices> allDims(1);
  for (int64_t dim = 0; dim < type.getRank(); ++dim)
    allDims.front().push_back(dim);
  Value flat = memref::CollapseShapeOp::create(b, loc, tile, allDims);
  return {flat, bytesAt(0), bytesAt(16), bytesAt(32), operand.mnMajor};
}

Value MmaBuilder::describedElement(const DescribedTile &tile, Value mn, Value k) {
  // A core matrix is 8 rows of 16 contiguous bytes (8 elements along K, or
  // along MN where MN-major), 16 bytes apart; core matrices lie the leading
  // offset apart along K and the stride apart along MN.
  auto [contiguous, strided] = tile.mnMajor ? std::pair(mn, k) : std::pair(k, mn);
  Value byte = kb.addi(tile.start, kb.muli(kb.remui(contiguous, kVector), 2));
  byte = kb.addi(byte, kb.muli(kb.remui(strided, kVector), 16));
  byte = kb.addi(byte, arith::MulIOp::create(b, loc, kb.divui(k, kVector), tile.leading));
  byte = kb.addi(byte, arith::MulIOp::create(b, loc, kb.divui(mn, kVector), tile.stride));
  return kb.load(tile.flat, {kb.divui(byte, 2)});
}

/// The constraint letter of a register of `type`: f32 or 32-bit word.
static StringRef registerConstraint(Type type) { return type.isF32() ? "f" : "r"; }

SmallVector<Value> MmaBuilder::ptxThrough(StringRef text, ArrayRef<Value> values) {
  SmallVector<std::string> constraints;
  for (Value value : values)
    constraints.push_back(("=" + registerConstraint(value.getType())).str());
  for (size_t i = 0; i < values.size(); ++i)
    constraints.push_back(std::to_string(i));
  return ptxWithOperands(text, llvm::join(constraints, ","), ValueRange(values).getTypes(), values);
}

SmallVector<Value> MmaBuilder::fenceForWarpgroupMma(ArrayRef<Value> values) {
  if (values.empty()) {
    ptxInstruction("wgmma.fence.sync.aligned;");
    return {};
  }
  return ptxThrough("wgmma.fence.sync.aligned;", values);
}

SmallVector<Value> MmaBuilder::warpgroupMultiply(ArrayRef<Value> a, SharedOperand bOperand,
                                                 ArrayRef<Value> acc, int64_t n) {
  assert(a.size() == 4 && "an A fragment");
  return warpgroupMma(a, /*transposeA=*/std::nullopt, bOperand, acc, n);
}

SmallVector<Value> MmaBuilder::warpgroupMultiply(SharedOperand aOperand, SharedOperand bOperand,
                                                 ArrayRef<Value> acc, int64_t n) {
  return warpgroupMma(aOperand.descriptor, aOperand.mnMajor, bOperand, acc, n);
}

SmallVector<Value> MmaBuilder::warpgroupMma(ValueRange a, std::optional<bool> transposeA,
                                            SharedOperand bOperand, ArrayRef<Value> acc,
                                            int64_t n) {
  assert((acc.empty() || static_cast<int64_t>(acc.size()) == n / 2) && "N / 2 accumulators");
  int64_t results = n / 2;
  std::string type = narrow.isBF16() ? "bf16" : "f16";
  auto operand = [](int64_t i) { return "$" + std::to_string(i); };
  SmallVector<std::string> outputs, constraints;
  for (int64_t i = 0; i < results; ++i) {
    outputs.push_back(operand(i));
    constraints.push_back("=f");
  }
  // Operands: the accumulators (tied to the results), A (its words, or its
  // descriptor), B's descriptor, whether D is read.
  if (!acc.empty())
    for (int64_t i = 0; i < results; ++i)
      constraints.push_back(std::to_string(i));
  int64_t next = results + acc.size();
  SmallVector<std::string> aOperands;
  for (Value value : a) {
    aOperands.push_back(operand(next++));
    constraints.push_back(value.getType().isInteger(64) ? "l" : "r");
  }
  std::string aText = transposeA ? aOperands.front() : "{" + llvm::join(aOperands, ", ") + "}";
  std::string bText = operand(next++), readsD = operand(next++);
  constraints.append({"l", "r"});
  std::string transposes = transposeA ? (*transposeA ? "1, " : "0, ") : "";
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, " + readsD +
                     ", 0;\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16.f32." +
                     type + "." + type + " {" + llvm::join(outputs, ", ") + "}, " + aText + ", " +
                     bText + ", p, 1, 1, " + transposes + (bOperand.mnMajor ? "1" : "0") + ";\n}";
  SmallVector<Value> operands(acc);
  llvm::append_range(operands, a);
  operands.push_back(bOperand.descriptor);
  operands.push_back(i32(acc.empty() ? 0 : 1));
  return ptxWithOperands(text, llvm::join(constraints, ","),
                         SmallVector<Type>(results, b.getF32Type()), operands);
}

void MmaBuilder::commitWarpgroupMma() { ptxInstruction("wgmma.commit_group.sync.aligned;"); }

void MmaBuilder::waitForWarpgroupMma(int64_t pending) {
  ptxInstruction(("wgmma.wait_group.sync.aligned " + Twine(pending) + ";").str());
}

SmallVector<Value> MmaBuilder::waitForWarpgroupMma(ArrayRef<Value> acc, int64_t pending) {
  return ptxThrough(("wgmma.wait_group.sync.aligned " + Twine(pending) + ";").str(), acc);
}
