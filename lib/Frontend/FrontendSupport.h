//===- FrontendSupport.h - config reading and graph building ---*- C++ -*-===//
//
// Shared by the per-family builders (Gpt2.cpp, Bert.cpp, Bart.cpp,
// Transformer.cpp, Encoder.cpp), each of which holds all knowledge of its
// family: config keys, Hugging Face classes, checkpoint tensor names and the
// block structure.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_FRONTEND_FRONTENDSUPPORT_H
#define XFMR_LIB_FRONTEND_FRONTENDSUPPORT_H

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Frontend/ModelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <optional>

namespace xfmr::frontend {

/// Parses the JSON `text` of file `path`. Nesting deeper than any config
/// needs is rejected before llvm::json, whose parser recurses, sees it.
llvm::Expected<llvm::json::Value> parseJsonFile(llvm::StringRef path, llvm::StringRef text);

/// Reads typed, validated values from a config object. A key holding null
/// counts as absent (transformers writes null for "the default"); every
/// failure names the file and key; the first one is kept and reported by
/// `takeError`.
class ConfigReader {
public:
  ConfigReader(llvm::StringRef path, const llvm::json::Object &object)
      : path(path.str()), object(object) {}

  /// A positive integer under the first of `keys` present (HF configs use
  /// several spellings); `fallback` if none is present and it is > 0.
  int64_t positiveInt(llvm::ArrayRef<llvm::StringRef> keys, int64_t fallback = 0);
  /// positiveInt of a number of layers, at most 1024.
  int64_t layerCount(llvm::ArrayRef<llvm::StringRef> keys, int64_t fallback = 0);
  int64_t nonNegativeInt(llvm::StringRef key, int64_t fallback);
  /// A token id: a non-negative integer, or -1 when absent.
  int64_t tokenId(llvm::StringRef key);
  /// Token ids: one, or a list (Llama 3's eos_token_id); none when absent.
  std::vector<int64_t> tokenIds(llvm::StringRef key);
  double positiveNumber(llvm::StringRef key, double fallback);
  /// A dropout rate in [0, 1).
  double probability(llvm::StringRef key, double fallback);
  bool boolean(llvm::StringRef key, bool fallback);
  std::string string(llvm::ArrayRef<llvm::StringRef> keys, llvm::StringRef fallback);
  /// The activation named under `keys` (relu, gelu, gelu_new, ...).
  Activation activation(llvm::ArrayRef<llvm::StringRef> keys, llvm::StringRef fallback);
  /// The activation of transformers' name `name`, if xfmr has it.
  static std::optional<Activation> parseActivation(llvm::StringRef name);
  /// The activations parseActivation knows, for messages.
  static constexpr llvm::StringLiteral kActivationNames =
      "relu, gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, silu, swish, tanh";
  /// The number of entries of an object (transformers' `id2label`), or
  /// `fallback` when absent.
  int64_t objectSize(llvm::StringRef key, int64_t fallback);
  /// The first string of an array (transformers' `architectures`), or "".
  std::string firstString(llvm::StringRef key);
  /// A reader of the object under the first of `keys` present (none when
  /// absent, or not an object: an error). Its failures are this reader's,
  /// naming keys as "<key>.<inner key>".
  std::optional<ConfigReader> nested(llvm::ArrayRef<llvm::StringRef> keys);
  /// A list of `count` positive numbers under `key`.
  std::vector<double> positiveNumbers(llvm::StringRef key, size_t count);
  /// A list of `count` strings under `key`, or none when absent.
  std::vector<std::string> strings(llvm::StringRef key, size_t count);
  /// Whether `key` is present and not null.
  bool has(llvm::StringRef key) { return lookup(key) != nullptr; }
  /// Whether `key` is present and null (for the keys where transformers
  /// tells an explicit null from an absent key).
  bool isNull(llvm::StringRef key) const {
    const llvm::json::Value *value = object.get(key);
    return value && value->getAsNull();
  }
  /// Records a failure about `key`.
  void error(llvm::StringRef key, const llvm::Twine &message);
  /// Requires `dModel % heads == 0` and a head size the kernels take,
  /// naming both keys.
  void requireDivisible(llvm::StringRef modelKey, int64_t dModel, llvm::StringRef headsKey,
                        int64_t heads);
  /// Requires a head size the kernels take, given under `key`.
  void requireHeadSize(llvm::StringRef key, int64_t headSize);

  bool failed() const { return parent ? parent->failed() : static_cast<bool>(firstError); }
  llvm::Error takeError();

private:
  /// The value of the first of `keys` present and not null.
  const llvm::json::Value *lookup(llvm::ArrayRef<llvm::StringRef> keys, llvm::StringRef &found);
  const llvm::json::Value *lookup(llvm::StringRef key);

  /// Records the first failure (a nested reader's go to its parent).
  void fail(const llvm::Twine &message);

  std::string path;
  const llvm::json::Object &object;
  std::optional<std::string> firstError;
  /// For a nested reader: the reader of the enclosing object, and the
  /// "<key>." its keys are named under.
  ConfigReader *parent = nullptr;
  std::string prefix;
};

/// The entry function a GraphBuilder builds: the forward pass, the training
/// loss, or one of generation's entries over a KV cache -- for
/// encoder-decoders the encoder's (`encode`: the cross-attention keys and
/// values of the source), then the decoder's (`prefill`, `decode`, and over a
/// batch `prefill_row`).
enum class EntryKind { Forward, Loss, Encode, Prefill, Decode };

/// Multi-head attention as `xfmr.multi_head_attention` takes it.
struct AttentionSpec {
  mlir::Value query;
  /// The keys' and values' source (cross-attention); null for self.
  mlir::Value keyValue;
  /// One fused QKV weight, or Q, K, V; biases likewise, or none.
  llvm::SmallVector<mlir::Value, 3> inWeights, inBiases;
  mlir::Value outWeight, outBias;
  mlir::Value paddingMask;
  int64_t heads = 1;
  bool causal = false;
  /// torch.nn.Linear's [out, in] layout (else GPT-2's Conv1D [in, out]).
  bool torchLayout = true;
  /// The scores' scale; default 1/sqrt(head_dim).
  std::optional<double> scale;
  /// Added to the scores: [1 or batch, heads, seq_q, seq_k], or null.
  mlir::Value bias;
};

/// How fused attention forms its scores: the scale (default
/// 1/sqrt(head_dim)), a sliding window of keys (0: none) and soft-capping.
struct ScoreOptions {
  std::optional<double> scale;
  int64_t window = 0;
  std::optional<double> softcap;
};

/// Builds one entry function whose arguments appear as the body asks for
/// them: token inputs, then parameters in first-use order (a tied weight is
/// one argument used twice).
class GraphBuilder {
public:
  /// Builds the function `name` (default: the entry kind's, e.g. "prefill").
  GraphBuilder(mlir::ModuleOp module, EntryKind entry, const ModelRequest &request,
               mlir::Type floatType, llvm::StringRef name = {});

  EntryKind entry() const { return entryKind; }
  /// Whether this is a decoder's generation entry over a KV cache.
  bool caching() const { return entryKind == EntryKind::Prefill || entryKind == EntryKind::Decode; }

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }
  /// The element type of weights and activations.
  mlir::Type floatType() const { return elementType; }

  /// An int32 [batch, length] token input.
  mlir::Value input(llvm::StringRef name, int64_t length);
  /// A weight named as in the checkpoint (in a bf16/f16 model's training
  /// form: an f32 argument, rounded).
  mlir::Value param(llvm::StringRef name, llvm::ArrayRef<int64_t> shape);
  /// The padding mask (i1, true = token) of an int32 attention_mask input.
  mlir::Value paddingMask(mlir::Value attentionMask);

  /// x plus rows `offset + t` of a learned position table.
  mlir::Value learnedPositions(mlir::Value x, mlir::Value table, int64_t offset = 0);
  /// x plus the fixed sinusoids.
  mlir::Value sinusoidalPositions(mlir::Value x,
                                  SinusoidLayout layout = SinusoidLayout::interleaved);
  mlir::Value layerNorm(mlir::Value x, llvm::StringRef prefix, double epsilon);
  /// RMS normalization scaled by `<prefix>.weight`.
  mlir::Value rmsNorm(mlir::Value x, llvm::StringRef prefix, double epsilon);
  /// T5's relative-position bias from `table` [buckets, heads] for `queries`
  /// queries over as many keys, or in a generation entry over the cache from
  /// each sequence's start position.
  mlir::Value relativePositionBias(mlir::Value table, int64_t queries, bool bidirectional,
                                   int64_t maxDistance);
  /// x times a constant.
  mlir::Value scale(mlir::Value x, double factor);
  /// A linear layer with weight `<prefix>.weight` and bias `<prefix>.bias`
  /// (none if `bias` is false); `torchLayout` selects torch.nn.Linear's
  /// [out, in] weight layout.
  mlir::Value linear(mlir::Value x, llvm::StringRef prefix, int64_t in, int64_t out,
                     bool torchLayout, bool bias = true);
  mlir::Value add(mlir::Value x, mlir::Value y);
  /// Dropout, active (seeded) in the training form only.
  mlir::Value dropout(mlir::Value x, double rate);
  mlir::Value activation(mlir::Value x, Activation activation);
  /// Multi-head attention; when the request asks for layer `layer`'s
  /// probabilities, they become the output `<group>.<layer>`. In a
  /// generation entry, causal self-attention reads and extends the KV cache
  /// `cache.<group>.<layer>.key` / `.value` (state in, updated state out).
  mlir::Value attention(const AttentionSpec &spec, llvm::StringRef group, int64_t layer);
  /// Causal self-attention of split heads: `q` [batch, seq, heads,
  /// head_dim], `k` and `v` with a divisor of its heads (grouped-query
  /// attention), merged back to [batch, seq, heads * head_dim]. In a
  /// generation entry `k` and `v` extend the KV cache `cache.<group>.<layer>`
  /// (sized by their heads), which the queries then read.
  mlir::Value causalSelfAttention(mlir::Value q, mlir::Value k, mlir::Value v,
                                  mlir::Value paddingMask, const ScoreOptions &options,
                                  llvm::StringRef group, int64_t layer);
  /// Whether the request asks for layer `layer`'s attention probabilities
  /// (--output-attentions).
  bool wantsAttentions(int64_t layer) const {
    return request.allAttentions || llvm::is_contained(request.attentionLayers, layer);
  }
  /// The attention probabilities of split heads (`q` [batch, queries,
  /// heads, head_dim], `k` with a divisor of its heads), [batch, heads,
  /// queries, keys], computed unfused: what `output_attentions` returns.
  /// `paddingMask` ([batch, keys] i1) and `bias` (added to the scores) may
  /// be null.
  mlir::Value attentionProbabilities(mlir::Value q, mlir::Value k, mlir::Value paddingMask,
                                     mlir::Value bias, const ScoreOptions &options, bool causal);
  /// `probabilities` ([batch, heads, queries, keys]) times the split heads
  /// `v`, merged to [batch, queries, heads * head_dim]: attention's unfused
  /// second product.
  mlir::Value weighValues(mlir::Value probabilities, mlir::Value v);
  /// Rotary position embedding of split heads (xfmr.rotary_embedding):
  /// positions from 0, or in a generation entry from each sequence's start.
  mlir::Value rotary(mlir::Value x, llvm::ArrayRef<double> inverseFrequencies, double scaling);
  /// The positions whose logits the entry returns: `x` itself, or in a
  /// generation entry the last token `mask` keeps in each sequence ([batch,
  /// d]).
  mlir::Value predictedPositions(mlir::Value x, mlir::Value mask);

  /// Records a result of the entry function; `updates` names the argument
  /// it replaces (a cache), if any.
  void output(llvm::StringRef name, mlir::Value value, llvm::StringRef updates = "");
  /// Tokens per sequence of the entry's call (at most `maxPositions`, the
  /// config's `positionsKey`): the requested --seq-len (an encoder-decoder's
  /// decoder: --decoder-seq-len), else the model's positions, or in a
  /// generation entry a chunk of 64 (prefill) or 1 (decode). Also fixes a
  /// generation entry's cache length (--max-context, else the model's
  /// positions).
  int64_t sequenceLength(ConfigReader &config, int64_t maxPositions, llvm::StringRef positionsKey,
                         bool decoder = false);
  /// Attention of the decoder at `layer` over the encoder's output `memory`;
  /// in a decoder generation entry, over the keys and values the encode
  /// entry computed (inputs `cross.<layer>.key` / `.value`, [batch, source,
  /// heads, head_dim]) under the source's padding mask.
  mlir::Value crossAttention(const AttentionSpec &spec, mlir::Value memory, int64_t layer);
  /// The positions a generation entry's KV cache holds (once
  /// sequenceLength has fixed them).
  int64_t contextLength() const { return cacheLength; }
  /// The source length a decoder generation entry's cross-attention reads
  /// (the encoder's --seq-len).
  void setSourceLength(int64_t length) { sourceLength = length; }
  /// In the encode entry: the keys and values decoder layer `layer`'s
  /// cross-attention reads, projected from `memory` once, as the outputs
  /// the decoder entries take.
  void outputCrossKeysAndValues(const AttentionSpec &spec, mlir::Value memory, int64_t layer);
  /// Checks that every requested attention layer is below `layers`, the
  /// value of the config's `layersKey`.
  void checkAttentionLayers(ConfigReader &config, llvm::StringRef layersKey, int64_t layers);
  /// The ops built from here to endLayer are layer `name` (its checkpoint
  /// prefix: h.3): finish() wraps them into one xfmr.layer, which is
  /// compiled once per distinct body.
  void beginLayer(llvm::StringRef name);
  void endLayer();
  /// Finishes the function with the recorded outputs (in the training form:
  /// the loss of output "logits" against a `labels` input, then the logits).
  llvm::Error finish();

private:
  mlir::Value addArgument(mlir::Type type, llvm::StringRef attrName, llvm::StringRef name);
  /// The `positions` input of a generation entry: where each sequence's
  /// tokens of this call start.
  mlir::Value startPositions();
  mlir::Value cachedSelfAttention(const AttentionSpec &spec, llvm::StringRef group, int64_t layer);
  /// `value` with elements of type `element` (arith.extf / arith.truncf).
  mlir::Value convertElements(mlir::Value value, mlir::Type element);
  /// The element type of cached keys and values (--cache-dtype).
  mlir::Type cacheElementType() const;

  /// [batch, seq, heads * head_dim] -> [batch, seq, heads, head_dim].
  mlir::Value splitHeads(mlir::Value x, int64_t heads);
  /// The projections of `spec`'s query (and keys and values from `memory`,
  /// or the query when null), heads split.
  llvm::SmallVector<mlir::Value, 3> projectHeads(const AttentionSpec &spec, mlir::Value memory);
  /// fused_attention of split heads, merged to [batch, seq, heads *
  /// head_dim]; the scale defaults to 1/sqrt(head_dim).
  mlir::Value attendHeads(mlir::Value q, mlir::Value k, mlir::Value v, mlir::Value paddingMask,
                          mlir::Value bias, const ScoreOptions &options, bool causal,
                          mlir::Value queryOffset, mlir::Value keyLength);
  /// attendHeads, projected out by `spec`'s output weight.
  mlir::Value attendAndProject(const AttentionSpec &spec, mlir::Value q, mlir::Value k,
                               mlir::Value v, mlir::Value paddingMask, mlir::Value queryOffset,
                               mlir::Value keyLength);
  /// Causal attention of split heads over the layer's KV cache, which `k`
  /// and `v` (this call's chunk) extend first; merged as attendHeads.
  mlir::Value attendOverCache(mlir::Value q, mlir::Value k, mlir::Value v, mlir::Value paddingMask,
                              mlir::Value bias, const ScoreOptions &options, llvm::StringRef group,
                              int64_t layer);

  EntryKind entryKind;
  mlir::OpBuilder b;
  mlir::Location loc;
  mlir::func::FuncOp func;
  mlir::Block *body;
  const ModelRequest &request;
  mlir::Type elementType;
  llvm::StringMap<mlir::Value> params;
  /// Each argument's xfmr.input / xfmr.param / xfmr.state name.
  llvm::SmallVector<mlir::Attribute> argumentAttrs;
  struct Output {
    std::string name;
    mlir::Value value;
    std::string updates;
  };
  llvm::SmallVector<Output> outputs;
  mlir::Value positions;
  int64_t cacheLength = 0;
  /// A decoder generation entry's source: its length and padding mask.
  mlir::Value sourceMask;
  int64_t sourceLength = 0;

  /// Each layer's name and its ops: those after `before` (null: from the
  /// block's start) up to `last` (null: none).
  struct LayerOps {
    std::string name;
    mlir::Operation *before = nullptr, *last = nullptr;
  };
  llvm::SmallVector<LayerOps> layers;
  /// Moves each layer's ops into an xfmr.layer.
  void wrapLayers();

  /// A generation entry met bidirectional self-attention, which no cache
  /// can serve.
  bool cachesNonCausalAttention = false;
  /// The `dropout_seed` input, and how many dropouts drew from it.
  mlir::Value dropoutSeed;
  int64_t dropouts = 0;
};

/// What a family's builder reads and writes.
struct FamilyInputs {
  ConfigReader &config;
  GraphBuilder &graph;
  const ModelRequest &request;
  /// The Hugging Face class to build, one of the family's (empty for the
  /// tutorial types, which have none).
  llvm::StringRef architecture;
  const ModelSource &source;
  ModelInfo &info;

  /// Whether the checkpoint holds `name` under one of the info's prefixes;
  /// true when there is no checkpoint to ask (a bare config).
  bool hasWeight(llvm::StringRef name) const;
};

using FamilyBuilder = llvm::Error (*)(FamilyInputs &in);

llvm::Error buildGpt2(FamilyInputs &in);
llvm::Error buildBert(FamilyInputs &in);
llvm::Error buildBart(FamilyInputs &in);
llvm::Error buildTransformer(FamilyInputs &in);

llvm::Error buildEncoder(FamilyInputs &in);
llvm::Error buildT5(FamilyInputs &in);
/// The Llama-style decoders (Llama.cpp): llama, mistral, qwen2, qwen3,
/// gemma, phi3.
llvm::Error buildLlama(FamilyInputs &in);

/// Resolves the compiled sequence length against the model's max positions,
/// naming `positionsKey` when it is too long.
int64_t resolveSeqLen(ConfigReader &config, int64_t requested, int64_t maxPositions,
                      llvm::StringRef positionsKey, llvm::StringRef flag);

} // namespace xfmr::frontend

#endif // XFMR_LIB_FRONTEND_FRONTENDSUPPORT_H
