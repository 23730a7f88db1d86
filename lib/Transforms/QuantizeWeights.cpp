//===- QuantizeWeights.cpp - weights stored as decoding reads them -*- C++ -*-===//
//
// A decode step reads every weight once per token, so its time is the
// weights' bytes over the memory bandwidth: int8 values with a scale per
// group read a quarter of f32's, bf16 half; and a weight stored [out, in]
// is read as one sequential stream per thread. The runtime quantizes,
// rounds or transposes the checkpoint's tensors into the arguments this
// pass makes (xfmr.quantized); the products read them through
// xfmr.dequantize or arith.extf, which the CPU kernels fold into their
// loads, and xfmr.transpose, which they read as a transposed operand.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
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
  if (auto linear = dyn_cast<FusedLinearOp>(user); linear && &use == &linear.getWeightMutable())
    return linear.getTransposeWeight() ? 1 : 0;
  if (auto gated = dyn_cast<GatedLinearOp>(user);
      gated && (&use == &gated.getGateMutable() || &use == &gated.getUpMutable()))
    return gated.getTransposeWeight() ? 1 : 0;
  if (auto attention = dyn_cast<MultiHeadAttentionOp>(user)) {
    bool weight = &use == &attention.getOutWeightMutable();
    for (OpOperand &in : attention.getInWeightsMutable())
      weight |= &use == &in;
    if (weight)
      return attention.getTransposeWeights() ? 1 : 0;
  }
  return std::nullopt;
}

/// The float type `name` (f32, bf16, f16) names, or null.
FloatType floatTypeNamed(MLIRContext *context, StringRef name) {
  return llvm::StringSwitch<FloatType>(name)
      .Case("f32", Float32Type::get(context))
      .Case("bf16", BFloat16Type::get(context))
      .Case("f16", Float16Type::get(context))
      .Default(nullptr);
}

/// How a weight is stored: `type` int8, int4 or a float type; integer
/// types in groups of `group` values along the input side (0: the whole
/// side), with a minimum per group when `mins`, scales (and mins) of
/// `scaleType`.
struct Storage {
  std::string type;
  int64_t group = 0;
  bool mins = false;
  std::string scaleType = "f32";

  bool isInteger() const { return type == "int8" || type == "int4"; }
  int64_t bits() const { return type == "int4" ? 4 : 8; }

  /// The float type of `type`, or null for integers.
  FloatType floatType(MLIRContext *context) const { return floatTypeNamed(context, type); }

  /// What is wrong with this storage, or "".
  std::string problem(MLIRContext *context) const {
    if (!isInteger() && !floatType(context))
      return "type must be int8, int4, bf16, f16 or f32, got '" + type + "'";
    if (type == "int4" && (group <= 0 || group % 32 != 0))
      return "int4 groups are whole blocks of 32 values (group-size 32, 64, 128, ...), got " +
             std::to_string(group);
    if (mins && !isInteger())
      return "mins apply to int8 and int4";
    if (!floatTypeNamed(context, scaleType))
      return "scales are f32, bf16 or f16, got '" + scaleType + "'";
    return "";
  }
};

struct QuantizeWeightsPass : xfmr::impl::XfmrQuantizeWeightsBase<QuantizeWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << weightType << ", group size " << groupSize
                            << ", " << perWeight.size() << " weights of their own\n");
    MLIRContext *context = &getContext();
    auto fail = [&](const Twine &message) {
      getOperation().emitError("xfmr-quantize-weights: ") << message;
      signalPassFailure();
    };
    fallback = {weightType, groupSize, mins, scaleType};
    if (std::string problem = fallback.problem(context); !problem.empty())
      return fail(problem);
    if (mins && weightType != "int4")
      return fail("mins apply to type=int4");
    // name=int8:32:mins, name=int4:32:f16, name=int8:16:mins:f16, name=bf16.
    for (const std::string &entry : perWeight) {
      StringRef name, spec;
      std::tie(name, spec) = StringRef(entry).rsplit('=');
      SmallVector<StringRef> fields;
      spec.split(fields, ':');
      Storage storage{fields.front().str(), 0, false, scaleType};
      if (fields.size() > 1 && fields[1].getAsInteger(10, storage.group))
        return fail("per-weight '" + entry + "': the group size is not a number");
      size_t next = 2;
      storage.mins = fields.size() > next && fields[next] == "mins";
      next += storage.mins;
      if (fields.size() > next)
        storage.scaleType = fields[next++].str();
      std::string problem = storage.problem(context);
      if (name.empty() || spec.empty() || fields.size() > next ||
          (fields.size() > 2 && !storage.isInteger()) || !problem.empty())
        return fail("per-weight '" + entry +
                    "': expected name=int8|int4:<group>[:mins][:<scale type>] or " +
                    "name=<float type>" + (problem.empty() ? "" : " (" + problem + ")"));
      perWeightStorage[name] = storage;
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(quantize(func)))
        return signalPassFailure();
  }

  LogicalResult quantize(func::FuncOp func) {
    // The widenings and dequantizations, in the order of the weights.
    OpBuilder b(func.getBody());
    unsigned originalCount = func.getNumArguments();
    llvm::BitVector unused(originalCount);
    for (unsigned index = 0; index < originalCount; ++index) {
      BlockArgument arg = func.getArgument(index);
      auto name = func.getArgAttrOfType<StringAttr>(index, "xfmr.param");
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!name || !type || type.getRank() != 2)
        continue;
      auto own = perWeightStorage.find(name.getValue());
      const Storage &storage = own != perWeightStorage.end() ? own->second : fallback;
      // f32 weights, and with a float type, those of that type already
      // (which only a transpose changes).
      Type element = type.getElementType();
      FloatType floatType = storage.floatType(func.getContext());
      bool sameType = element == floatType;
      if (!element.isF32() && !sameType)
        continue;
      // The weight's uses as a product's weight, by input side.
      llvm::MapVector<int64_t, SmallVector<OpOperand *>> uses;
      for (OpOperand &use : arg.getUses())
        if (std::optional<int64_t> axis = inputSideOfWeight(use, embeddings))
          if (!sameType || *axis == 0)
            uses[*axis].push_back(&use);
      if (uses.empty())
        continue;
      for (auto &[axis, operands] : uses) {
        // A weight stored [in, out] is kept transposed, [out, in]: each
        // output's values (and groups) then lie contiguous, the rows a
        // skinny product streams and an integer dot product reads.
        bool transposed = axis == 0;
        FailureOr<Value> weight =
            floatType ? convertWeight(b, func, arg, name, storage, transposed)
                      : quantizeToInts(b, func, arg, name, axis, storage, transposed);
        if (failed(weight))
          return failure();
        for (OpOperand *use : operands)
          use->set(*weight);
        LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << name.getValue() << ": " << operands.size()
                                << " uses, input side " << axis << ", " << storage.type
                                << (transposed ? ", stored transposed" : "") << "\n");
      }
      if (arg.use_empty())
        unused.set(index);
    }
    unused.resize(func.getNumArguments());
    return func.eraseArguments(unused);
  }

  /// The attributes of an argument holding `part` of weight `name`.
  DictionaryAttr partAttrs(StringAttr name, StringRef part, std::optional<int64_t> axis,
                           int64_t group, bool transposed, int64_t bits = 8) {
    MLIRContext *context = name.getContext();
    Builder b(context);
    NamedAttrList quantized;
    quantized.set("part", StringAttr::get(context, part));
    if (axis) {
      quantized.set("axis", b.getI64IntegerAttr(*axis));
      quantized.set("group_size", b.getI64IntegerAttr(group));
    }
    if (bits != 8)
      quantized.set("bits", b.getI64IntegerAttr(bits));
    if (transposed)
      quantized.set("transposed", UnitAttr::get(context));
    NamedAttrList list;
    list.set("xfmr.param", name);
    list.set("xfmr.quantized", quantized.getDictionary(context));
    return list.getDictionary(context);
  }

  /// `shape`, transposed when `transposed`.
  static SmallVector<int64_t> storedShapeOf(ArrayRef<int64_t> shape, bool transposed) {
    SmallVector<int64_t> stored(shape);
    if (transposed)
      std::swap(stored[0], stored[1]);
    return stored;
  }

  /// `weight` read as the product's weight: through its transpose when
  /// stored transposed.
  static Value asProductWeight(OpBuilder &b, Location loc, Value weight, bool transposed) {
    if (!transposed)
      return weight;
    return TransposeOp::create(b, loc, weight, b.getDenseI64ArrayAttr({1, 0}));
  }

  /// The weight `arg` read from a new argument of the storage's float type
  /// (of its transpose when `transposed`), widened back to `arg`'s type.
  FailureOr<Value> convertWeight(OpBuilder &b, func::FuncOp func, BlockArgument arg,
                                 StringAttr name, const Storage &storage, bool transposed) {
    auto type = cast<RankedTensorType>(arg.getType());
    unsigned end = func.getNumArguments();
    auto stored = RankedTensorType::get(storedShapeOf(type.getShape(), transposed),
                                        storage.floatType(func.getContext()));
    if (failed(func.insertArgument(
            end, stored, partAttrs(name, storage.type, std::nullopt, 0, transposed), arg.getLoc())))
      return func.emitError("cannot add the ")
             << storage.type << " argument of '" << name.getValue() << "'";
    // Widened after the transpose, so that the kernels find the narrow
    // matrix they stream below the widening.
    Value weight = asProductWeight(b, arg.getLoc(), func.getArgument(end), transposed);
    if (stored.getElementType() == type.getElementType())
      return weight;
    return arith::ExtFOp::create(b, arg.getLoc(), type, weight).getResult();
  }

  /// The f32 weight `arg` as xfmr.dequantize of new int8 or int4 values and
  /// scales (and mins) of its transpose when `transposed`, a scale per group
  /// along input side `axis`.
  FailureOr<Value> quantizeToInts(OpBuilder &b, func::FuncOp func, BlockArgument arg,
                                  StringAttr name, int64_t axis, const Storage &storage,
                                  bool transposed) {
    MLIRContext *context = func.getContext();
    auto type = cast<RankedTensorType>(arg.getType());
    int64_t inputs = type.getDimSize(axis);
    int64_t group = storage.group > 0 ? storage.group : inputs;
    if (inputs % group != 0)
      return func.emitError("weight '") << name.getValue() << "': its input side (" << inputs
                                        << ") is not a multiple of the group size " << group;
    SmallVector<int64_t> storedShape = storedShapeOf(type.getShape(), transposed);
    int64_t storedAxis = transposed ? 1 : axis;
    SmallVector<int64_t> scaleShape = storedShape;
    scaleShape[storedAxis] /= group;
    Type scale = floatTypeNamed(context, storage.scaleType);
    // Stored axis 1 holds two 4-bit values a byte.
    int64_t bits = storage.bits();
    SmallVector<int64_t> valuesShape = storedShape;
    valuesShape[1] = valuesShape[1] * bits / 8;
    unsigned end = func.getNumArguments();
    SmallVector<std::pair<StringRef, Type>> parts = {
        {"values", RankedTensorType::get(valuesShape, IntegerType::get(context, 8))},
        {"scales", RankedTensorType::get(scaleShape, scale)}};
    if (storage.mins)
      parts.push_back({"mins", RankedTensorType::get(scaleShape, scale)});
    for (auto [i, part] : llvm::enumerate(parts))
      if (failed(func.insertArgument(
              end + i, part.second,
              partAttrs(name, part.first, storedAxis, group, transposed, bits), arg.getLoc())))
        return func.emitError("cannot add the ")
               << storage.type << " arguments of '" << name.getValue() << "'";
    Value weight = DequantizeOp::create(
        b, arg.getLoc(), RankedTensorType::get(storedShape, type.getElementType()),
        func.getArgument(end), func.getArgument(end + 1),
        storage.mins ? Value(func.getArgument(end + 2)) : Value(), b.getI64IntegerAttr(storedAxis),
        b.getI64IntegerAttr(group), b.getI64IntegerAttr(bits));
    return asProductWeight(b, arg.getLoc(), weight, transposed);
  }

  Storage fallback;
  llvm::StringMap<Storage> perWeightStorage;
};

} // namespace
