//===- QuantizeWeights.cpp - int8 weights for products ----------*- C++ -*-===//
//
// A decode step reads every weight once per token, so its time is the
// weights' bytes over the memory bandwidth: int8 values with a scale per
// group read a quarter of f32's, bf16 half. The runtime quantizes or rounds
// the checkpoint's f32 tensors into the arguments this pass makes
// (xfmr.quantized); the products read them through xfmr.dequantize or
// arith.extf, which the CPU kernels fold into their loads.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-quantize-weights"

namespace xfmr {
#define GEN_PASS_DEF_XFMRQUANTIZEWEIGHTS
#include "xfmr/Transforms/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;

namespace {

/// The input side (the dimension a product reduces over) of the weight that
/// `use` is, or nullopt when the use is not the weight of a product. An
/// embedding table (with `embeddings`) reads rows: its groups lie along them.
std::optional<int64_t> inputSideOfWeight(OpOperand &use, bool embeddings) {
  Operation *user = use.getOwner();
  if (auto embedding = dyn_cast<EmbeddingOp>(user);
      embedding && embeddings && &use == &embedding.getTableMutable())
    return 1;
  if (auto linear = dyn_cast<LinearOp>(user); linear && &use == &linear.getWeightMutable())
    return linear.getTransposeWeight() ? 1 : 0;
  if (auto matmul = dyn_cast<MatmulOp>(user); matmul && &use == &matmul.getRhsMutable())
    return matmul.getTransposeRhs() ? 1 : 0;
  if (auto attention = dyn_cast<MultiHeadAttentionOp>(user)) {
    bool weight = &use == &attention.getOutWeightMutable();
    for (OpOperand &in : attention.getInWeightsMutable())
      weight |= &use == &in;
    if (weight)
      return attention.getTransposeWeights() ? 1 : 0;
  }
  return std::nullopt;
}

struct QuantizeWeightsPass : xfmr::impl::XfmrQuantizeWeightsBase<QuantizeWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << weightType << ", group size " << groupSize
                            << "\n");
    if (weightType != "int8" && weightType != "bf16") {
      getOperation().emitError("xfmr-quantize-weights: type must be int8 or bf16, got '")
          << weightType << "'";
      return signalPassFailure();
    }
    if (scaleType != "f32" && scaleType != "bf16") {
      getOperation().emitError("xfmr-quantize-weights: scale-type must be f32 or bf16, got '")
          << scaleType << "'";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(quantize(func)))
        return signalPassFailure();
  }

  LogicalResult quantize(func::FuncOp func) {
    OpBuilder b(func.getBody());
    MLIRContext *context = func.getContext();
    Type i8 = IntegerType::get(context, 8);
    Type scale = scaleType == "bf16" ? Type(BFloat16Type::get(context)) : Float32Type::get(context);
    unsigned originalCount = func.getNumArguments();
    llvm::BitVector unused(originalCount);
    for (unsigned index = 0; index < originalCount; ++index) {
      BlockArgument arg = func.getArgument(index);
      auto name = func.getArgAttrOfType<StringAttr>(index, "xfmr.param");
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!name || !type || type.getRank() != 2 || !type.getElementType().isF32())
        continue;
      // The weight's uses as a product's weight, by input side.
      llvm::MapVector<int64_t, SmallVector<OpOperand *>> uses;
      for (OpOperand &use : arg.getUses())
        if (std::optional<int64_t> axis = inputSideOfWeight(use, embeddings))
          uses[*axis].push_back(&use);
      if (uses.empty())
        continue;
      if (weightType == "bf16") {
        if (failed(roundToBf16(func, arg, name, uses)))
          return failure();
        uses.clear();
      }
      for (auto &[axis, operands] : uses) {
        int64_t inputs = type.getDimSize(axis);
        int64_t group = groupSize > 0 ? groupSize : inputs;
        if (inputs % group != 0)
          return func.emitError("weight '") << name.getValue() << "': its input side (" << inputs
                                            << ") is not a multiple of the group size " << group;
        // A weight stored [in, out] is kept transposed, [out, in]: each
        // output's values (and groups) then lie contiguous, the rows a
        // skinny product streams and an integer dot product reads.
        bool transposed = axis == 0;
        SmallVector<int64_t> storedShape(type.getShape());
        if (transposed)
          std::swap(storedShape[0], storedShape[1]);
        int64_t storedAxis = transposed ? 1 : axis;
        SmallVector<int64_t> scaleShape = storedShape;
        scaleShape[storedAxis] /= group;
        auto attrs = [&](StringRef part) {
          NamedAttrList quantized;
          quantized.set("part", StringAttr::get(context, part));
          quantized.set("axis", b.getI64IntegerAttr(storedAxis));
          quantized.set("group_size", b.getI64IntegerAttr(group));
          if (transposed)
            quantized.set("transposed", UnitAttr::get(context));
          NamedAttrList list;
          list.set("xfmr.param", name);
          list.set("xfmr.quantized", quantized.getDictionary(context));
          return list.getDictionary(context);
        };
        unsigned end = func.getNumArguments();
        if (failed(func.insertArgument(end, RankedTensorType::get(storedShape, i8), attrs("values"),
                                       arg.getLoc())) ||
            failed(func.insertArgument(end + 1, RankedTensorType::get(scaleShape, scale),
                                       attrs("scales"), arg.getLoc())))
          return func.emitError("cannot add the int8 arguments of '") << name.getValue() << "'";
        Value weight = DequantizeOp::create(
            b, arg.getLoc(), RankedTensorType::get(storedShape, type.getElementType()),
            func.getArgument(end), func.getArgument(end + 1), b.getI64IntegerAttr(storedAxis),
            b.getI64IntegerAttr(group));
        if (transposed)
          weight = TransposeOp::create(b, arg.getLoc(), weight, b.getDenseI64ArrayAttr({1, 0}));
        for (OpOperand *use : operands)
          use->set(weight);
        LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << name.getValue() << ": " << operands.size()
                                << " uses, input side " << axis
                                << (transposed ? ", stored transposed" : "") << "\n");
      }
      if (arg.use_empty())
        unused.set(index);
    }
    unused.resize(func.getNumArguments());
    return func.eraseArguments(unused);
  }

  /// Gives the product uses of `arg` its widening from a new bf16 argument.
  LogicalResult roundToBf16(func::FuncOp func, BlockArgument arg, StringAttr name,
                            const llvm::MapVector<int64_t, SmallVector<OpOperand *>> &uses) {
    MLIRContext *context = func.getContext();
    auto type = cast<RankedTensorType>(arg.getType());
    NamedAttrList rounded;
    rounded.set("part", StringAttr::get(context, "bf16"));
    NamedAttrList attrs;
    attrs.set("xfmr.param", name);
    attrs.set("xfmr.quantized", rounded.getDictionary(context));
    unsigned end = func.getNumArguments();
    if (failed(func.insertArgument(
            end, RankedTensorType::get(type.getShape(), BFloat16Type::get(context)),
            attrs.getDictionary(context), arg.getLoc())))
      return func.emitError("cannot add the bf16 argument of '") << name.getValue() << "'";
    OpBuilder b(func.getBody());
    Value weight = arith::ExtFOp::create(b, arg.getLoc(), type, func.getArgument(end));
    for (auto &[axis, operands] : uses)
      for (OpOperand *use : operands)
        use->set(weight);
    return success();
  }
};

} // namespace
