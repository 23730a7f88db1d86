//===- XfmrOps.cpp - xfmr operations ----------------------------*- C++ -*-===//
//
// Verifiers and result-type inference. Diagnostics name the operand and the
// dimension at fault so that a malformed model reads as a precise message.
//
//===----------------------------------------------------------------------===//

#include "xfmr/Dialect/XfmrOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;

namespace {

RankedTensorType tensorTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::interleave(
      shape, [&](int64_t d) { text += std::to_string(d); },
      [&] { text += ", "; });
  return text + "]";
}

/// Maps a possibly negative axis into [0, rank), or fails.
FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return failure();
  return axis < 0 ? axis + rank : axis;
}

} // namespace

FailureOr<SmallVector<int64_t>> xfmr::broadcastShapes(ArrayRef<int64_t> lhs,
                                                      ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t r = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    if (l != r && l != 1 && r != 1)
      return failure();
    result[rank - 1 - i] = l == 1 ? r : l;
  }
  return result;
}

Value xfmr::createActivation(OpBuilder &b, Location loc, Value x, Activation activation) {
  switch (activation) {
  case Activation::none:
    return x;
  case Activation::relu:
    return ReluOp::create(b, loc, x);
  case Activation::gelu:
    return GeluOp::create(b, loc, x, GeluApproximation::none);
  case Activation::gelu_tanh:
    return GeluOp::create(b, loc, x, GeluApproximation::tanh);
  case Activation::silu:
    return SiluOp::create(b, loc, x);
  case Activation::tanh:
    return TanhOp::create(b, loc, x);
  }
  llvm_unreachable("unknown activation");
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto ids = tensorTypeOf(adaptor.getIds());
  auto table = tensorTypeOf(adaptor.getTable());
  if (table.getRank() != 2)
    return emitOptionalError(loc, "embedding table must be rank 2 [vocab, d_model], got ",
                             table);
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  results.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult EmbeddingOp::verify() {
  double scale = getScale().convertToDouble();
  if (!(scale > 0) || !std::isfinite(scale))
    return emitOpError("scale must be a positive finite number, got ") << scale;
  int64_t vocab = tensorTypeOf(getTable()).getDimSize(0);
  if (std::optional<uint64_t> padding = getPaddingIdx();
      padding && *padding >= static_cast<uint64_t>(vocab))
    return emitOpError("padding_idx ")
           << *padding << " is outside the table's " << vocab << " rows";
  return success();
}

//===----------------------------------------------------------------------===//
// Position encodings
//===----------------------------------------------------------------------===//

/// Checks the optional [batch] i32 start positions of a position encoding.
static LogicalResult verifyStartPositions(Operation *op, Value positions, RankedTensorType input) {
  if (!positions)
    return success();
  if (input.getRank() != 3)
    return op->emitOpError("with positions, input must be [batch, seq, d_model], got ") << input;
  auto type = tensorTypeOf(positions);
  if (type.getRank() != 1 || type.getDimSize(0) != input.getDimSize(0) ||
      !type.getElementType().isInteger(32))
    return op->emitOpError("positions must be i32 [batch] = [")
           << input.getDimSize(0) << "], got " << type;
  return success();
}

LogicalResult SinusoidalPositionEncodingOp::verify() {
  auto type = tensorTypeOf(getInput());
  if (type.getRank() < 2)
    return emitOpError("input must be [..., seq, d_model], got rank ") << type.getRank();
  if (failed(verifyStartPositions(*this, getPositions(), type)))
    return failure();
  if (type.getShape().back() % 2 != 0)
    return emitOpError("d_model must be even for the sinusoidal encoding, got ")
           << type.getShape().back();
  return success();
}

LogicalResult RotaryEmbeddingOp::verify() {
  auto type = tensorTypeOf(getInput());
  if (type.getRank() != 4)
    return emitOpError("input must be [batch, seq, heads, head_dim], got ") << type;
  if (Value positions = getPositions()) {
    auto positionsType = tensorTypeOf(positions);
    if (positionsType.getRank() != 1 || positionsType.getDimSize(0) != type.getDimSize(0) ||
        !positionsType.getElementType().isInteger(32))
      return emitOpError("positions must be i32 [batch] = [")
             << type.getDimSize(0) << "], got " << positionsType;
  }
  ArrayRef<double> frequencies = getInvFreq();
  int64_t headDim = type.getDimSize(3);
  if (frequencies.empty() || 2 * static_cast<int64_t>(frequencies.size()) > headDim)
    return emitOpError("inv_freq must hold 1 to head_dim / 2 = ")
           << headDim / 2 << " frequencies, got " << frequencies.size();
  if (llvm::any_of(frequencies, [](double f) { return !std::isfinite(f) || f < 0; }))
    return emitOpError("inv_freq must be finite and non-negative");
  double scaling = getAttentionScaling().convertToDouble();
  if (!std::isfinite(scaling) || !(scaling > 0))
    return emitOpError("attention_scaling must be positive and finite, got ") << scaling;
  return success();
}

LogicalResult LearnedPositionEncodingOp::verify() {
  auto type = tensorTypeOf(getInput());
  auto table = tensorTypeOf(getTable());
  if (type.getRank() < 2)
    return emitOpError("input must be [..., seq, d_model], got rank ") << type.getRank();
  if (failed(verifyStartPositions(*this, getPositions(), type)))
    return failure();
  if (table.getRank() != 2)
    return emitOpError("position table must be rank 2 [max_positions, d_model], got ")
           << table;
  if (table.getElementType() != type.getElementType())
    return emitOpError("position table element type ")
           << table.getElementType() << " differs from input element type "
           << type.getElementType();
  int64_t seq = type.getDimSize(type.getRank() - 2);
  int64_t dModel = type.getShape().back();
  if (table.getDimSize(1) != dModel)
    return emitOpError("position table width ")
           << table.getDimSize(1) << " differs from d_model " << dModel;
  int64_t offset = static_cast<int64_t>(getOffset());
  if (seq + offset > table.getDimSize(0))
    return emitOpError("sequence length ")
           << seq << (offset ? " from offset " + std::to_string(offset) : "") << " exceeds the "
           << table.getDimSize(0) << " learned positions";
  return success();
}

//===----------------------------------------------------------------------===//
// LinearOp, FusedLinearOp and GatedLinearOp
//===----------------------------------------------------------------------===//

/// Checks input [..., in] against weight ([in, out] or [out, in]) and bias
/// [out]; returns the result type.
static FailureOr<RankedTensorType>
inferLinearType(std::optional<Location> loc, Value input, Value weight, Value bias,
                bool transposeWeight) {
  auto x = tensorTypeOf(input);
  auto w = tensorTypeOf(weight);
  if (x.getRank() < 1)
    return emitOptionalError(loc, "linear input must have rank >= 1");
  if (w.getRank() != 2)
    return emitOptionalError(loc, "linear weight must be rank 2, got ", w);
  if (x.getElementType() != w.getElementType())
    return emitOptionalError(loc, "linear weight element type ", w.getElementType(),
                             " differs from input element type ", x.getElementType());
  int64_t in = transposeWeight ? w.getDimSize(1) : w.getDimSize(0);
  int64_t out = transposeWeight ? w.getDimSize(0) : w.getDimSize(1);
  if (x.getShape().back() != in)
    return emitOptionalError(loc, "linear input feature size ", x.getShape().back(),
                             " does not match weight ", shapeString(w.getShape()),
                             transposeWeight ? " ([out, in] layout)" : " ([in, out] layout)");
  if (bias) {
    auto b = tensorTypeOf(bias);
    if (b.getRank() != 1 || b.getDimSize(0) != out)
      return emitOptionalError(loc, "linear bias must be [", out, "], got ",
                               shapeString(b.getShape()));
  }
  SmallVector<int64_t> shape(x.getShape());
  shape.back() = out;
  return RankedTensorType::get(shape, x.getElementType());
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &results) {
  auto type = inferLinearType(loc, adaptor.getInput(), adaptor.getWeight(),
                              adaptor.getBias(), adaptor.getTransposeWeight());
  if (failed(type))
    return failure();
  results.push_back(*type);
  return success();
}

LogicalResult FusedLinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  auto type = inferLinearType(loc, adaptor.getInput(), adaptor.getWeight(),
                              adaptor.getBias(), adaptor.getTransposeWeight());
  if (failed(type))
    return failure();
  if (Value residual = adaptor.getResidual(); residual && residual.getType() != *type)
    return emitOptionalError(loc, "residual type ", residual.getType(),
                             " differs from the result type ", *type);
  results.push_back(*type);
  return success();
}

LogicalResult GatedLinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &results) {
  if (adaptor.getGate().getType() != adaptor.getUp().getType())
    return emitOptionalError(loc, "gate type ", adaptor.getGate().getType(),
                             " differs from up type ", adaptor.getUp().getType());
  auto type = inferLinearType(loc, adaptor.getInput(), adaptor.getUp(), Value(),
                              adaptor.getTransposeWeight());
  if (failed(type))
    return failure();
  int64_t out = type->getShape().back();
  for (auto [bias, name] :
       {std::pair{adaptor.getGateBias(), "gate_bias"}, std::pair{adaptor.getUpBias(), "up_bias"}}) {
    if (!bias)
      continue;
    auto biasType = tensorTypeOf(bias);
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != out ||
        biasType.getElementType() != type->getElementType())
      return emitOptionalError(loc, name, " must be [", out, "] of ", type->getElementType(),
                               ", got ", biasType);
  }
  results.push_back(*type);
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Checks that `bias` broadcasts to [batch, heads, seqQ, seqK].
static LogicalResult verifyAttentionBias(Operation *op, Value bias,
                                         ArrayRef<int64_t> scoresShape) {
  auto type = tensorTypeOf(bias);
  auto broadcast = broadcastShapes(type.getShape(), scoresShape);
  if (type.getRank() > 4 || failed(broadcast) ||
      ArrayRef<int64_t>(*broadcast) != scoresShape)
    return op->emitOpError("attn_bias of shape ")
           << shapeString(type.getShape())
           << " does not broadcast to the scores [batch, heads, seq_q, seq_k] = "
           << shapeString(scoresShape);
  return success();
}

static LogicalResult verifyPaddingMask(Operation *op, Value mask, int64_t batch,
                                       int64_t seqK) {
  auto type = tensorTypeOf(mask);
  if (type.getRank() != 2 || type.getDimSize(0) != batch || type.getDimSize(1) != seqK)
    return op->emitOpError("padding_mask must be [batch, seq_k] = ")
           << shapeString({batch, seqK}) << ", got " << shapeString(type.getShape());
  return success();
}

int64_t MultiHeadAttentionOp::getInnerDim() {
  // The output projection's input side: [inner, d_model], or [d_model, inner]
  // in [out, in] layout.
  auto shape = tensorTypeOf(getOutWeight()).getShape();
  return shape.size() == 2 ? shape[getTransposeWeights() ? 1 : 0] : 0;
}

int64_t MultiHeadAttentionOp::getHeadDim() { return getInnerDim() / getNumHeads(); }

double MultiHeadAttentionOp::getScaleOrDefault() {
  if (auto scale = getScale())
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(getHeadDim()));
}

LogicalResult MultiHeadAttentionOp::inferReturnTypes(MLIRContext *,
                                                     std::optional<Location>,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type> &results) {
  auto query = tensorTypeOf(adaptor.getQuery());
  results.push_back(query);
  if (!adaptor.getReturnProbabilities())
    return success();
  // Shapes are checked by the verifier; infer what the operands allow.
  int64_t seqK = query.getRank() == 3 ? query.getDimSize(1) : 0;
  if (Value kv = adaptor.getKeyValue(); kv && tensorTypeOf(kv).getRank() == 3)
    seqK = tensorTypeOf(kv).getDimSize(1);
  int64_t batch = query.getRank() == 3 ? query.getDimSize(0) : 0;
  int64_t seqQ = query.getRank() == 3 ? query.getDimSize(1) : 0;
  results.push_back(RankedTensorType::get(
      {batch, static_cast<int64_t>(adaptor.getNumHeads()), seqQ, seqK}, query.getElementType()));
  return success();
}

LogicalResult MultiHeadAttentionOp::verify() {
  auto query = tensorTypeOf(getQuery());
  if (query.getRank() != 3)
    return emitOpError("query must be [batch, seq_q, d_model], got ") << query;
  int64_t batch = query.getDimSize(0), seqQ = query.getDimSize(1);
  int64_t dModel = query.getDimSize(2), heads = getNumHeads();
  int64_t inner = getInnerDim();
  if (tensorTypeOf(getOutWeight()).getRank() != 2)
    return emitOpError("output weight must be rank 2, got ") << getOutWeight().getType();
  if (inner % heads != 0)
    return emitOpError("the projected width ")
           << inner << " (the output weight's input side) is not divisible by num_heads " << heads;
  Type elementType = query.getElementType();

  int64_t seqK = seqQ, dKv = dModel;
  if (Value kv = getKeyValue()) {
    auto kvType = tensorTypeOf(kv);
    if (kvType.getRank() != 3 || kvType.getDimSize(0) != batch)
      return emitOpError("key_value must be [batch = ")
             << batch << ", seq_k, d_kv], got " << shapeString(kvType.getShape());
    seqK = kvType.getDimSize(1);
    dKv = kvType.getDimSize(2);
  }

  auto checkWeight = [&](Value weight, int64_t in, int64_t out,
                         StringRef name) -> LogicalResult {
    auto type = tensorTypeOf(weight);
    SmallVector<int64_t> expected =
        getTransposeWeights() ? SmallVector<int64_t>{out, in} : SmallVector<int64_t>{in, out};
    if (type.getShape() != ArrayRef<int64_t>(expected))
      return emitOpError() << name << " weight must be " << shapeString(expected)
                           << (getTransposeWeights() ? " ([out, in] layout)" : "")
                           << ", got " << shapeString(type.getShape());
    if (type.getElementType() != elementType)
      return emitOpError() << name << " weight element type " << type.getElementType()
                           << " differs from query element type " << elementType;
    return success();
  };
  auto checkBias = [&](Value bias, int64_t size, StringRef name) -> LogicalResult {
    auto type = tensorTypeOf(bias);
    if (type.getRank() != 1 || type.getDimSize(0) != size)
      return emitOpError() << name << " bias must be [" << size << "], got "
                           << shapeString(type.getShape());
    return success();
  };

  ValueRange weights = getInWeights(), biases = getInBiases();
  if (weights.size() != 1 && weights.size() != 3)
    return emitOpError("in_proj takes one fused QKV weight or three (Q, K, V) weights, got ")
           << weights.size();
  if (!biases.empty() && biases.size() != weights.size())
    return emitOpError("in_bias needs one bias per in_proj weight (")
           << weights.size() << "), got " << biases.size();
  if (weights.size() == 1) {
    if (getKeyValue())
      return emitOpError("a fused QKV projection needs self-attention; cross-attention "
                         "takes separate Q, K, V weights");
    if (failed(checkWeight(weights[0], dModel, 3 * inner, "fused QKV")))
      return failure();
    if (!biases.empty() && failed(checkBias(biases[0], 3 * inner, "fused QKV")))
      return failure();
  } else {
    static constexpr StringLiteral names[] = {"query", "key", "value"};
    for (int i = 0; i < 3; ++i) {
      if (failed(checkWeight(weights[i], i == 0 ? dModel : dKv, inner, names[i])))
        return failure();
      if (!biases.empty() && failed(checkBias(biases[i], inner, names[i])))
        return failure();
    }
  }
  if (failed(checkWeight(getOutWeight(), inner, dModel, "output")))
    return failure();
  if (getOutBias() && failed(checkBias(getOutBias(), dModel, "output")))
    return failure();
  if (getPaddingMask() && failed(verifyPaddingMask(*this, getPaddingMask(), batch, seqK)))
    return failure();
  if (getAttnBias() &&
      failed(verifyAttentionBias(*this, getAttnBias(), {batch, heads, seqQ, seqK})))
    return failure();
  if (getCausal() && seqK < seqQ)
    return emitOpError("causal attention needs seq_k >= seq_q, got seq_q = ")
           << seqQ << ", seq_k = " << seqK;
  if (auto scale = getScale(); scale && !(scale->convertToDouble() > 0))
    return emitOpError("scale must be positive");
  return success();
}

AttentionDims FusedAttentionOp::getDims() {
  if (getLayout() == AttentionLayout::bshd)
    return {0, 2, 1, 3};
  return {0, 1, 2, 3};
}

int64_t FusedAttentionOp::getQueryHeadsPerKeyHead() {
  AttentionDims dims = getDims();
  return tensorTypeOf(getQuery()).getDimSize(dims.heads) /
         tensorTypeOf(getKey()).getDimSize(dims.heads);
}

/// A soft cap, where given, is a positive finite number.
static LogicalResult verifySoftcap(Operation *op, std::optional<APFloat> cap) {
  if (cap && !(cap->convertToDouble() > 0 && std::isfinite(cap->convertToDouble())))
    return op->emitOpError("softcap must be positive and finite");
  return success();
}

LogicalResult FusedAttentionOp::verify() {
  auto q = tensorTypeOf(getQuery()), k = tensorTypeOf(getKey()),
       v = tensorTypeOf(getValue());
  for (auto [type, name] : {std::pair{q, "query"}, {k, "key"}, {v, "value"}})
    if (type.getRank() != 4)
      return emitOpError() << name << " must be rank 4 ("
                           << stringifyAttentionLayout(getLayout()) << "), got " << type;
  AttentionDims dims = getDims();
  int64_t batch = q.getDimSize(dims.batch), heads = q.getDimSize(dims.heads);
  int64_t seqQ = q.getDimSize(dims.seq), headDim = q.getDimSize(dims.headDim);
  int64_t seqK = k.getDimSize(dims.seq), keyHeads = k.getDimSize(dims.heads);
  if (keyHeads <= 0 || heads % keyHeads != 0)
    return emitOpError("the query's ") << heads << " heads must be a multiple of the key's "
                                       << keyHeads << " (grouped-query attention)";
  SmallVector<int64_t> kvShape(4);
  kvShape[dims.batch] = batch;
  kvShape[dims.heads] = keyHeads;
  kvShape[dims.seq] = seqK;
  kvShape[dims.headDim] = headDim;
  if (k.getShape() != ArrayRef<int64_t>(kvShape) || v.getShape() != ArrayRef<int64_t>(kvShape))
    return emitOpError("key and value must both be ")
           << shapeString(kvShape) << " to match query " << shapeString(q.getShape())
           << ", got key " << shapeString(k.getShape()) << " and value "
           << shapeString(v.getShape());
  if (k.getElementType() != q.getElementType() || v.getElementType() != q.getElementType())
    return emitOpError("query, key and value must share one element type");
  if (getPaddingMask() && failed(verifyPaddingMask(*this, getPaddingMask(), batch, seqK)))
    return failure();
  if (getAttnBias() &&
      failed(verifyAttentionBias(*this, getAttnBias(), {batch, heads, seqQ, seqK})))
    return failure();
  if (Value band = getPositionBias()) {
    if (getAttnBias())
      return emitOpError("takes attn_bias or position_bias, not both");
    auto type = tensorTypeOf(band);
    if (type.getRank() != 3 || (type.getDimSize(0) != 1 && type.getDimSize(0) != batch) ||
        type.getDimSize(1) != heads || type.getDimSize(2) != seqQ + seqK - 1)
      return emitOpError("position_bias must be [1 | batch, heads, seq_q + seq_k - 1] = [1 | ")
             << batch << ", " << heads << ", " << seqQ + seqK - 1 << "], got " << type;
  }
  // A cache's queries may outnumber the keys filled so far, never its rows.
  if (getCausal() && seqK < seqQ)
    return emitOpError("causal attention needs seq_k >= seq_q, got seq_q = ")
           << seqQ << ", seq_k = " << seqK;
  for (auto [value, name] :
       {std::pair{getQueryOffset(), "query_offset"}, {getKeyLength(), "key_length"}}) {
    if (!value)
      continue;
    auto type = tensorTypeOf(value);
    if (type.getRank() != 1 || type.getDimSize(0) != batch || !type.getElementType().isInteger(32))
      return emitOpError() << name << " must be i32 [batch] = [" << batch << "], got " << type;
  }
  if (!(getScale().convertToDouble() > 0))
    return emitOpError("scale must be positive");
  if (getWindow() && !getCausal())
    return emitOpError("a sliding window needs causal attention");
  if (failed(verifySoftcap(*this, getSoftcap())))
    return failure();
  if (Value lse = getLogsumexp()) {
    auto type = tensorTypeOf(lse);
    SmallVector<int64_t> expected = {batch, heads, seqQ};
    if (type.getShape() != ArrayRef<int64_t>(expected))
      return emitOpError("logsumexp must be ") << shapeString(expected) << ", got " << type;
  }
  return success();
}

AttentionDims FusedAttentionBackwardOp::getDims() {
  if (getLayout() == AttentionLayout::bshd)
    return {0, 2, 1, 3};
  return {0, 1, 2, 3};
}

LogicalResult FusedAttentionBackwardOp::verify() {
  for (auto [value, name] : {std::pair{getQuery(), "query"}, {getOutput(), "output"},
                             {getGradOutput(), "grad_output"}, {getGradQuery(), "grad_query"}})
    if (value.getType() != getQuery().getType())
      return emitOpError() << name << " must have the query type " << getQuery().getType();
  for (auto [value, name] : {std::pair{getValue(), "value"}, {getGradKey(), "grad_key"},
                             {getGradValue(), "grad_value"}})
    if (value.getType() != getKey().getType())
      return emitOpError() << name << " must have the key type " << getKey().getType();
  auto q = tensorTypeOf(getQuery());
  if (q.getRank() != 4)
    return emitOpError("query must be rank 4, got ") << q;
  AttentionDims dims = getDims();
  SmallVector<int64_t> lse = {q.getDimSize(dims.batch), q.getDimSize(dims.heads),
                              q.getDimSize(dims.seq)};
  if (tensorTypeOf(getLogsumexp()).getShape() != ArrayRef<int64_t>(lse))
    return emitOpError("logsumexp must be ") << shapeString(lse);
  // One key/value head per query head: the kernels index keys by the query
  // head (grouped-query attention's adjoint repeats them first).
  auto k = tensorTypeOf(getKey());
  if (k.getRank() != 4 || k.getDimSize(dims.batch) != q.getDimSize(dims.batch) ||
      k.getDimSize(dims.heads) != q.getDimSize(dims.heads) ||
      k.getDimSize(dims.headDim) != q.getDimSize(dims.headDim))
    return emitOpError("key must have the query's batch, heads and head dim, got ") << k;
  if (!(getScale().convertToDouble() > 0))
    return emitOpError("scale must be positive");
  if (failed(verifySoftcap(*this, getSoftcap())))
    return failure();
  if (getWindow() && !getCausal())
    return emitOpError("a sliding window needs causal attention");
  return success();
}

LogicalResult SoftmaxBackwardOp::verify() {
  int64_t rank = tensorTypeOf(getOutput()).getRank();
  if (failed(normalizeAxis(getAxis(), rank)))
    return emitOpError("axis ") << static_cast<int64_t>(getAxis()) << " is out of range for rank "
                                << rank;
  return success();
}

int64_t SoftmaxBackwardOp::getNormalizedAxis() {
  return *normalizeAxis(getAxis(), tensorTypeOf(getOutput()).getRank());
}

LogicalResult LayerNormBackwardOp::verify() {
  auto x = tensorTypeOf(getInput());
  if (getGrad().getType() != x || getGradInput().getType() != x)
    return emitOpError("grad and grad_input must have the input type ") << x;
  SmallVector<int64_t> row = {x.getShape().back()};
  for (Value v : {getGradGamma(), getGradBeta()})
    if (tensorTypeOf(v).getShape() != ArrayRef<int64_t>(row))
      return emitOpError("gamma and beta gradients must be ") << shapeString(row);
  if (getGamma() && tensorTypeOf(getGamma()).getShape() != ArrayRef<int64_t>(row))
    return emitOpError("gamma must be ") << shapeString(row);
  return success();
}

LogicalResult EmbeddingBackwardOp::verify() {
  auto ids = tensorTypeOf(getIds()), grad = tensorTypeOf(getGrad()), table = getType();
  if (table.getRank() != 2 || grad.getShape().drop_back() != ids.getShape() ||
      grad.getShape().back() != table.getDimSize(1))
    return emitOpError("grad ") << shapeString(grad.getShape())
                                << " must be the ids shape plus d_model of the table "
                                << shapeString(table.getShape());
  return success();
}

LogicalResult CrossEntropyBackwardOp::verify() {
  auto logits = tensorTypeOf(getLogits());
  if (tensorTypeOf(getTargets()).getShape() != logits.getShape().drop_back())
    return emitOpError("targets must have the logits shape without the vocab dim");
  if (tensorTypeOf(getGrad()).getRank() != 0)
    return emitOpError("grad must be rank 0");
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization, softmax, dropout, loss
//===----------------------------------------------------------------------===//

int64_t SoftmaxOp::getNormalizedAxis() {
  return *normalizeAxis(getAxis(), tensorTypeOf(getInput()).getRank());
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = tensorTypeOf(getInput()).getRank();
  if (failed(normalizeAxis(getAxis(), rank)))
    return emitOpError("axis ") << static_cast<int64_t>(getAxis()) << " is out of range for rank " << rank;
  return success();
}

/// Checks optional gamma/beta [d] of a layer norm over `input`'s last dim.
static LogicalResult verifyLayerNormParams(Operation *op, Value input, Value gamma,
                                           Value beta, double epsilon) {
  auto type = tensorTypeOf(input);
  if (type.getRank() < 1)
    return op->emitOpError("input must have rank >= 1");
  if (static_cast<bool>(gamma) != static_cast<bool>(beta))
    return op->emitOpError("gamma and beta must both be given (affine) or both omitted");
  int64_t d = type.getShape().back();
  for (auto [param, name] : {std::pair{gamma, "gamma"}, {beta, "beta"}}) {
    if (!param)
      continue;
    auto paramType = tensorTypeOf(param);
    if (paramType.getRank() != 1 || paramType.getDimSize(0) != d)
      return op->emitOpError() << name << " must be [" << d << "], got "
                               << shapeString(paramType.getShape());
    if (paramType.getElementType() != type.getElementType())
      return op->emitOpError() << name << " element type " << paramType.getElementType()
                               << " differs from input element type "
                               << type.getElementType();
  }
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    return op->emitOpError("epsilon must be a positive finite number, got ") << epsilon;
  return success();
}

Activation GeluOp::getActivation() {
  return getApproximate() == GeluApproximation::tanh ? Activation::gelu_tanh : Activation::gelu;
}

LogicalResult LayerNormOp::verify() {
  if (getResult().getType() != getInput().getType())
    return emitOpError("result type ")
           << getResult().getType() << " differs from input type " << getInput().getType();
  return verifyLayerNormParams(*this, getInput(), getGamma(), getBeta(),
                               getEpsilon().convertToDouble());
}

LogicalResult FusedAddLayerNormOp::verify() {
  Type type = getInput().getType();
  if (getResidual().getType() != type)
    return emitOpError("residual type ")
           << getResidual().getType() << " differs from input type " << type;
  if (getSum().getType() != type || getResult().getType() != type)
    return emitOpError("both results must have the input type ") << type;
  return verifyLayerNormParams(*this, getInput(), getGamma(), getBeta(),
                               getEpsilon().convertToDouble());
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0 && rate < 1))
    return emitOpError("rate must be in [0, 1), got ") << rate;
  if (getSeed() && tensorTypeOf(getSeed()).getRank() != 0)
    return emitOpError("seed must be a rank-0 i64 tensor");
  return success();
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  if (getRate().isZero() || !getSeed())
    return getInput();
  return {};
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &results) {
  results.push_back(RankedTensorType::get(
      {}, tensorTypeOf(adaptor.getLogits()).getElementType()));
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  auto logits = tensorTypeOf(getLogits());
  auto targets = tensorTypeOf(getTargets());
  if (logits.getRank() < 1)
    return emitOpError("logits must be [..., vocab]");
  if (targets.getShape() != logits.getShape().drop_back())
    return emitOpError("targets ") << shapeString(targets.getShape())
                                   << " must have the logits shape without the vocab dim, "
                                   << shapeString(logits.getShape().drop_back());
  return success();
}

//===----------------------------------------------------------------------===//
// Primitive ops
//===----------------------------------------------------------------------===//

static LogicalResult inferBroadcastType(std::optional<Location> loc, ValueRange operands,
                                        Type elementType,
                                        SmallVectorImpl<Type> &results) {
  SmallVector<int64_t> shape;
  for (Value operand : operands) {
    auto broadcast = broadcastShapes(shape, tensorTypeOf(operand).getShape());
    if (failed(broadcast))
      return emitOptionalError(loc, "operand shapes ", shapeString(shape), " and ",
                               shapeString(tensorTypeOf(operand).getShape()),
                               " do not broadcast");
    shape = *broadcast;
  }
  results.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

LogicalResult xfmr::inferBroadcastBinaryType(std::optional<Location> loc, Value lhs,
                                             Value rhs, SmallVectorImpl<Type> &results) {
  Type elementType = tensorTypeOf(lhs).getElementType();
  if (tensorTypeOf(rhs).getElementType() != elementType)
    return emitOptionalError(loc, "operands must share one element type, got ",
                             lhs.getType(), " and ", rhs.getType());
  return inferBroadcastType(loc, {lhs, rhs}, elementType, results);
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &results) {
  Type elementType = tensorTypeOf(adaptor.getTrueValue()).getElementType();
  if (tensorTypeOf(adaptor.getFalseValue()).getElementType() != elementType)
    return emitOptionalError(loc, "true and false values must share one element type");
  return inferBroadcastType(loc, adaptor.getOperands(), elementType, results);
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &results) {
  auto lhs = tensorTypeOf(adaptor.getLhs()), rhs = tensorTypeOf(adaptor.getRhs());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(loc, "matmul operands must have rank >= 2, got ", lhs, " and ",
                             rhs);
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "matmul operands must share one element type");
  bool lhsTransposed = adaptor.getTransposeLhs();
  int64_t m = lhs.getDimSize(lhs.getRank() - (lhsTransposed ? 1 : 2));
  int64_t k = lhs.getDimSize(lhs.getRank() - (lhsTransposed ? 2 : 1));
  bool transposed = adaptor.getTransposeRhs();
  int64_t rhsK = rhs.getDimSize(rhs.getRank() - (transposed ? 1 : 2));
  int64_t n = rhs.getDimSize(rhs.getRank() - (transposed ? 2 : 1));
  if (k != rhsK)
    return emitOptionalError(loc, "matmul contraction sizes differ: lhs ",
                             shapeString(lhs.getShape()), " and rhs ",
                             shapeString(rhs.getShape()),
                             transposed ? " (rhs transposed)" : "");
  auto batch = broadcastShapes(lhs.getShape().drop_back(2), rhs.getShape().drop_back(2));
  if (failed(batch))
    return emitOptionalError(loc, "matmul batch dimensions ", shapeString(lhs.getShape()),
                             " and ", shapeString(rhs.getShape()), " do not broadcast");
  SmallVector<int64_t> shape = *batch;
  shape.append({m, n});
  results.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto type = tensorTypeOf(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != type.getRank())
    return emitOptionalError(loc, "permutation has ", perm.size(),
                             " entries for an input of rank ", type.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= type.getRank() || seen[p])
      return emitOptionalError(loc, "permutation ", shapeString(perm),
                               " is not a permutation of 0..", type.getRank() - 1);
    seen[p] = true;
    shape.push_back(type.getDimSize(p));
  }
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = tensorTypeOf(getInput()), out = tensorTypeOf(getResult());
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << shapeString(in.getShape()) << " (" << in.getNumElements() << " elements) to "
           << shapeString(out.getShape()) << " (" << out.getNumElements() << " elements)";
  if (in.getElementType() != out.getElementType())
    return emitOpError("reshape must keep the element type");
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) is one reshape of x.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

int64_t ReduceOp::getNormalizedAxis() {
  return *normalizeAxis(getAxis(), tensorTypeOf(getInput()).getRank());
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &results) {
  auto type = tensorTypeOf(adaptor.getInput());
  auto axis = normalizeAxis(adaptor.getAxis(), type.getRank());
  if (failed(axis))
    return emitOptionalError(loc, "axis ", static_cast<int64_t>(adaptor.getAxis()),
                             " is out of range for rank ",
                             type.getRank());
  SmallVector<int64_t> shape(type.getShape());
  shape[*axis] = 1;
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult CacheUpdateOp::verify() {
  auto cache = tensorTypeOf(getCache()), values = tensorTypeOf(getValues());
  auto positions = tensorTypeOf(getPositions());
  if (cache.getRank() < 2)
    return emitOpError("cache must be [batch, capacity, ...], got ") << cache;
  SmallVector<int64_t> expected(cache.getShape());
  expected[1] = values.getRank() == cache.getRank() ? values.getDimSize(1) : 0;
  if (values.getShape() != ArrayRef<int64_t>(expected) || expected[1] > cache.getDimSize(1) ||
      expected[1] == 0)
    return emitOpError("values must be [batch, chunk, ...] with the cache's other dims and a "
                       "chunk of 1 to ")
           << cache.getDimSize(1) << " rows, got " << shapeString(values.getShape())
           << " for a cache of " << shapeString(cache.getShape());
  if (values.getElementType() != cache.getElementType())
    return emitOpError("values element type ")
           << values.getElementType() << " differs from the cache's " << cache.getElementType();
  if (positions.getRank() != 1 || positions.getDimSize(0) != cache.getDimSize(0) ||
      !positions.getElementType().isInteger(32))
    return emitOpError("positions must be i32 [batch] = [")
           << cache.getDimSize(0) << "], got " << positions;
  if (Value mask = getMask()) {
    ArrayRef<int64_t> rows = values.getShape().take_front(2);
    if (tensorTypeOf(mask).getShape() != rows)
      return emitOpError("mask must be [batch, chunk] = ")
             << shapeString(rows) << ", got " << shapeString(tensorTypeOf(mask).getShape());
  }
  return success();
}

LogicalResult LayerOp::verify() {
  if (getName().empty())
    return emitOpError("needs a name");
  Block &body = getBody().front();
  auto yield = dyn_cast_or_null<YieldOp>(body.empty() ? nullptr : &body.back());
  if (!yield)
    return emitOpError("body must end in xfmr.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields ") << yield.getValues().getTypes().size()
                                  << " values whose types differ from its " << getNumResults()
                                  << " results";
  return success();
}

void LayerOp::inlineBody() {
  Block &body = getBody().front();
  replaceAllUsesWith(cast<YieldOp>(body.getTerminator()).getValues());
  getOperation()->getBlock()->getOperations().splice(
      Block::iterator(getOperation()), body.getOperations(), body.begin(), std::prev(body.end()));
  erase();
}

LogicalResult PoolOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  auto input = tensorTypeOf(adaptor.getInput());
  if (input.getRank() != 3)
    return emitOptionalError(loc, "pooled input must be [batch, seq, d], got ", input);
  results.push_back(
      RankedTensorType::get({input.getDimSize(0), input.getDimSize(2)}, input.getElementType()));
  return success();
}

LogicalResult PoolOp::verify() {
  auto input = tensorTypeOf(getInput());
  auto mask = tensorTypeOf(getMask());
  if (mask.getShape() != input.getShape().drop_back())
    return emitOpError("mask must be [batch, seq] = ")
           << shapeString(input.getShape().drop_back()) << ", got " << shapeString(mask.getShape());
  return success();
}

LogicalResult L2NormalizeOp::verify() {
  if (tensorTypeOf(getInput()).getRank() < 1)
    return emitOpError("input must have at least one dimension");
  double epsilon = getEpsilon().convertToDouble();
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    return emitOpError("epsilon must be a positive finite number, got ") << epsilon;
  return success();
}

LogicalResult RmsNormOp::verify() {
  auto type = tensorTypeOf(getInput());
  if (type.getRank() < 1)
    return emitOpError("input must have at least one dimension");
  auto gamma = tensorTypeOf(getGamma());
  if (gamma.getRank() != 1 || gamma.getDimSize(0) != type.getShape().back())
    return emitOpError("gamma must be [") << type.getShape().back() << "], got " << gamma;
  if (gamma.getElementType() != type.getElementType())
    return emitOpError("gamma must have the input's element type");
  double epsilon = getEpsilon().convertToDouble();
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    return emitOpError("epsilon must be a positive finite number, got ") << epsilon;
  return success();
}

SmallVector<int32_t> RelativePositionBiasOp::distanceBuckets(int64_t buckets, int64_t maxDistance) {
  // transformers: max_exact + (log(n.float() / max_exact) / math.log(max_distance / max_exact)
  // * (buckets - max_exact)).long(), at most buckets - 1; float32 throughout.
  int64_t maxExact = buckets / 2;
  float logRange = static_cast<float>(
      std::log(static_cast<double>(maxDistance) / static_cast<double>(maxExact)));
  SmallVector<int32_t> table;
  for (int64_t n = 0; n <= maxDistance; ++n) {
    if (n < maxExact) {
      table.push_back(static_cast<int32_t>(n));
      continue;
    }
    float ratio = static_cast<float>(n) / static_cast<float>(maxExact);
    float scaled = std::log(ratio) / logRange * static_cast<float>(buckets - maxExact);
    table.push_back(static_cast<int32_t>(
        std::min<int64_t>(maxExact + static_cast<int64_t>(scaled), buckets - 1)));
  }
  return table;
}

LogicalResult DequantizeOp::verify() {
  auto values = tensorTypeOf(getValues()), scales = tensorTypeOf(getScales());
  auto type = tensorTypeOf(getResult());
  if (values.getRank() != 2)
    return emitOpError("values must be a rank-2 weight, got ") << values;
  if (type.getRank() != 2)
    return emitOpError("the result must be a rank-2 weight, got ") << type;
  int64_t axis = getAxis(), group = getGroupSize(), bits = getBits();
  if (bits != 8 && bits != 4)
    return emitOpError("bits must be 8 or 4, got ") << bits;
  SmallVector<int64_t> stored(type.getShape());
  if (bits == 4) {
    if (axis != 1 || group % 32 != 0)
      return emitOpError("4-bit values are grouped along dimension 1 in whole blocks of 32, "
                         "got axis ")
             << axis << " and group_size " << group;
    stored[1] /= 2;
  }
  if (ArrayRef<int64_t>(stored) != values.getShape())
    return emitOpError("values must be ")
           << shapeString(stored) << " for a result of " << shapeString(type.getShape()) << " ("
           << bits << " bits a value), got " << shapeString(values.getShape());
  Type scaleType = scales.getElementType();
  if (!scaleType.isF32() && !scaleType.isBF16() && !scaleType.isF16())
    return emitOpError("scales must be f32, bf16 or f16, got ") << scaleType;
  if (type.getDimSize(axis) % group != 0)
    return emitOpError("group_size ") << group << " does not divide dimension " << axis << " ("
                                      << type.getDimSize(axis) << ")";
  SmallVector<int64_t> expected(type.getShape());
  expected[axis] /= group;
  if (scales.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("scales must be ")
           << shapeString(expected) << " (one per group of " << group << " along dimension " << axis
           << "), got " << shapeString(scales.getShape());
  if (getMins() && tensorTypeOf(getMins()) != scales)
    return emitOpError("mins must be of the scales' type ")
           << scales << ", got " << tensorTypeOf(getMins());
  return success();
}

int64_t RelativePositionBiasOp::getNumQueries() {
  auto type = tensorTypeOf(getResult());
  return getSeqQ() ? *getSeqQ() : type.getDimSize(2);
}

int64_t RelativePositionBiasOp::getNumKeys() {
  auto type = tensorTypeOf(getResult());
  return getSeqQ() ? type.getDimSize(2) - *getSeqQ() + 1 : type.getDimSize(3);
}

LogicalResult RelativePositionBiasOp::verify() {
  auto table = tensorTypeOf(getTable());
  auto type = tensorTypeOf(getResult());
  if (table.getRank() != 2)
    return emitOpError("table must be [num_buckets, heads], got ") << table;
  if (std::optional<uint64_t> seqQ = getSeqQ()) {
    if (type.getRank() != 3 || type.getDimSize(2) < static_cast<int64_t>(*seqQ))
      return emitOpError("with seq_q = ")
             << *seqQ << " the result must be [batch, heads, seq_q + seq_k - 1], got " << type;
  } else if (type.getRank() != 4) {
    return emitOpError("result must be [batch, heads, seq_q, seq_k], got ") << type;
  }
  if (type.getElementType() != table.getElementType())
    return emitOpError("result must have the table's element type");
  if (type.getDimSize(1) != table.getDimSize(1))
    return emitOpError("result has ")
           << type.getDimSize(1) << " heads, the table " << table.getDimSize(1);
  // Each direction needs an exact bucket and a logarithmic range beyond it.
  int64_t buckets = table.getDimSize(0) / (getBidirectional() ? 2 : 1);
  if (buckets < 2)
    return emitOpError("needs at least ")
           << (getBidirectional() ? 4 : 2) << " buckets, got " << table.getDimSize(0);
  if (getMaxDistance() <= buckets / 2)
    return emitOpError("max_distance must exceed the exact buckets (")
           << buckets / 2 << "), got " << getMaxDistance();
  if (Value offset = getQueryOffset()) {
    auto offsetType = tensorTypeOf(offset);
    if (offsetType.getRank() != 1 || offsetType.getDimSize(0) != type.getDimSize(0) ||
        !offsetType.getElementType().isInteger(32))
      return emitOpError("query_offset must be i32 [batch] = [")
             << type.getDimSize(0) << "], got " << offsetType;
  } else if (type.getDimSize(0) != 1) {
    return emitOpError("without query_offset the batch dimension must be 1, got ") << type;
  }
  return success();
}

LogicalResult CausalMaskOp::verify() {
  auto type = tensorTypeOf(getResult());
  if (type.getRank() != 2)
    return emitOpError("causal mask must be [seq_q, seq_k], got ") << type;
  if (type.getDimSize(1) < type.getDimSize(0))
    return emitOpError("causal mask needs seq_k >= seq_q, got ") << type;
  return success();
}

#define GET_OP_CLASSES
#include "xfmr/XfmrOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

LogicalResult LearningRateOp::verify() {
  if (!(getPeak().convertToDouble() > 0))
    return emitOpError("peak must be positive");
  int64_t warmup = static_cast<int64_t>(getWarmupSteps());
  int64_t decay = static_cast<int64_t>(getDecaySteps());
  if (warmup < 0 || decay < 0)
    return emitOpError("warmup_steps and decay_steps must not be negative");
  if (decay != 0 && decay <= warmup)
    return emitOpError("decay_steps (") << decay << ") must exceed warmup_steps (" << warmup
                                        << "), or be 0 for no decay";
  double minRatio = getMinRatio().convertToDouble();
  if (!(minRatio >= 0 && minRatio <= 1))
    return emitOpError("min_ratio must be in [0, 1], got ") << minRatio;
  return success();
}

LogicalResult GlobalNormOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one tensor");
  for (Value input : getInputs())
    if (tensorTypeOf(input).getElementType() != getType().getElementType())
      return emitOpError("inputs must have the result element type ")
             << getType().getElementType() << ", got " << input.getType();
  return success();
}

LogicalResult AllReduceOp::verify() {
  // MPI and the runtime reduce f32: gradients of f32 (master) weights.
  if (!getType().getElementType().isF32() || !getWeight().getType().getElementType().isF32())
    return emitOpError("reduces f32 tensors with an f32 weight, got ")
           << getType() << " and " << getWeight().getType();
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  if (!getType().getElementType().isF32() || !getWeight().getType().getElementType().isF32())
    return emitOpError("reduces f32 tensors with an f32 weight, got ")
           << getType() << " and " << getWeight().getType();
  // The buffer is the runtime's until the wait: one use, later in the block.
  if (!getResult().hasOneUse() || !isa<AllReduceWaitOp>(*getResult().getUsers().begin()) ||
      (*getResult().getUsers().begin())->getBlock() != (*this)->getBlock())
    return emitOpError("result must have one use, an xfmr.all_reduce_wait in the same block");
  return success();
}

LogicalResult AllReduceWaitOp::verify() {
  if (!getInput().getDefiningOp<AllReduceStartOp>())
    return emitOpError("waits for the result of an xfmr.all_reduce_start");
  return success();
}

LogicalResult LossScaleOp::verify() {
  double initial = getInitial().convertToDouble();
  if (!(initial > 0) || std::isinf(initial))
    return emitOpError("initial must be positive and finite, got ") << initial;
  return success();
}

LogicalResult LossScaleUpdateOp::verify() {
  if (getGrowthInterval() < 1)
    return emitOpError("growth_interval must be at least 1, got ") << getGrowthInterval();
  return success();
}

/// Shared checks of the optimizer updates: hyperparameters in range, and a
/// learning rate, norm and loss scale of the parameters' element type.
static LogicalResult verifyOptimizer(Operation *op, Value param, Value lr, Value gradNorm,
                                     Value lossScale, double maxGradNorm,
                                     ArrayRef<std::pair<StringRef, double>> unitInterval) {
  Type elementType = tensorTypeOf(param).getElementType();
  for (Value scalar : {lr, gradNorm, lossScale})
    if (scalar && tensorTypeOf(scalar).getElementType() != elementType)
      return op->emitOpError("lr, grad_norm and loss_scale must be ")
             << elementType << " like the parameter, got " << scalar.getType();
  if (lossScale && !gradNorm)
    return op->emitOpError("a loss_scale needs the grad_norm that tells whether the scaled "
                           "gradients overflowed");
  // With a loss scale, the norm may be there only for the overflow check.
  if (gradNorm && !(lossScale ? maxGradNorm >= 0 : maxGradNorm > 0))
    return op->emitOpError("max_grad_norm must be positive")
           << (lossScale ? " or 0" : "") << ", got " << maxGradNorm;
  for (auto [name, value] : unitInterval)
    if (!(value >= 0 && value < 1))
      return op->emitOpError() << name << " must be in [0, 1), got " << value;
  return success();
}

LogicalResult AdamWUpdateOp::verify() {
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError("epsilon must be positive");
  return verifyOptimizer(*this, getParam(), getLr(), getGradNorm(), getLossScale(),
                         getMaxGradNorm().convertToDouble(),
                         {{"beta1", getBeta1().convertToDouble()},
                          {"beta2", getBeta2().convertToDouble()},
                          {"weight_decay", getWeightDecay().convertToDouble()}});
}

LogicalResult SgdUpdateOp::verify() {
  return verifyOptimizer(*this, getParam(), getLr(), getGradNorm(), getLossScale(),
                         getMaxGradNorm().convertToDouble(),
                         {{"momentum", getMomentum().convertToDouble()},
                          {"weight_decay", getWeightDecay().convertToDouble()}});
}
