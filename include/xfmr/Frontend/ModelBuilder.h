//===- ModelBuilder.h - model descriptions to xfmr IR -----------*- C++ -*-===//

#ifndef XFMR_FRONTEND_MODELBUILDER_H
#define XFMR_FRONTEND_MODELBUILDER_H

#include "xfmr-rt/manifest.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace xfmr {

/// Element type of a model's weights and activations.
enum class ElementType { F32, BF16, F16 };

/// A generator over a batch of sequences also has this entry: the prefill
/// of one sequence (batch 1), whose caches are one row of the batch's.
inline constexpr llvm::StringLiteral kRowPrefillEntry = "prefill_row";
/// And the decode step of one sequence, where a row's products compute it
/// as the batch's do (see xfmr::kSmallProductRows): then a step of a few
/// sequences costs their work, not the batch's.
inline constexpr llvm::StringLiteral kRowDecodeEntry = "decode_row";
/// And, over a batch of several such groups, the decode step of an aligned
/// group of kDecodeGroupRows sequences: where few sequences generate, their
/// steps multiply the weights with those rows, not the batch's.
inline constexpr llvm::StringLiteral kGroupDecodeEntry = "decode_group";
/// The sequences of kGroupDecodeEntry: the products of a Llama-1B-shaped
/// layer took 7.0, 7.8 and 10.5 ms for 1, 4 and 16 rows in f32
/// (docs/benchmarks.md), so four cost little more than one.
inline constexpr int64_t kDecodeGroupRows = 4;

/// What the compiled model is asked to be: static shapes, element type,
/// inference or training, and which head and outputs.
struct ModelRequest {
  int64_t batch = 1;
  /// Tokens per (encoder) sequence; 0 means the model's max positions.
  int64_t seqLen = 0;
  /// Tokens per decoder sequence (encoder-decoder models); 0 means seqLen.
  int64_t decoderSeqLen = 0;
  /// Build the training form: `@loss` returning the mean cross-entropy of
  /// the logits against a `labels` input (-100 ignored) and the logits, with
  /// dropout active, its masks drawn from a `dropout_seed` input.
  bool training = false;
  /// bf16 or f16: weights, activations and logits stored in that type (each
  /// op still computes in f32, see xfmr-compute-in-f32).
  ElementType elementType = ElementType::F32;
  /// The Hugging Face class to build (GPT2Model, BertForMaskedLM, ...);
  /// empty: the config's "architectures", else the family's default.
  std::string architecture;
  /// Layers whose attention probabilities become outputs, as
  /// Attention as one fused_attention op; else its scores, softmax and
  /// products as separate ops (--fuse-attention=false: the exact reference).
  bool fuseAttention = true;
  /// `output_attentions` in transformers; `allAttentions` asks for all.
  std::vector<int64_t> attentionLayers;
  bool allAttentions = false;
  /// Generation: instead of one forward, a `prefill` entry (seqLen tokens a
  /// call) and a `decode` entry (one token), each taking the sequences'
  /// start positions and a KV cache per layer, and returning the logits of
  /// each sequence's last token.
  bool generate = false;
  /// Positions the KV cache holds; 0: the model's positions.
  int64_t cacheLength = 0;
  /// The KV cache's element type; none: `elementType`.
  std::optional<ElementType> cacheElementType;
};

/// A tensor a checkpoint declares.
struct CheckpointTensor {
  std::string dtype; // safetensors spelling: F32, BF16, ..., or ggml's: Q4_K, ...
  std::vector<int64_t> shape;
  /// A ggml block type's integer groups, as xfmr-quantize-weights' per-weight
  /// storage ("int4:32:mins", "int8:16"); empty for floats.
  std::string integerStorage;
};

/// A model description on disk: a config.json alone, or a checkpoint
/// directory as Hugging Face `save_pretrained` (or sentence-transformers'
/// `save`) writes it.
struct ModelSource {
  std::string configPath;
  std::string configText;
  /// The checkpoint's generation_config.json, if it has one.
  std::string generationConfigPath, generationConfigText;
  /// The checkpoint directory; empty for a bare config.
  std::string directory;
  /// The tensors its safetensors files declare (all shards).
  llvm::StringMap<CheckpointTensor> tensors;
  /// Every linear weight is [out, in] (torch.nn.Linear's), also where the
  /// family's checkpoints hold GPT-2's Conv1D [in, out]: llama.cpp's
  /// converter transposes those.
  bool linearWeightsOutIn = false;
  /// sentence-transformers (modules.json): how token vectors are pooled
  /// into a sentence embedding ("cls", "mean", "max", "mean_sqrt_len"), or
  /// empty; and whether it is then normalized.
  std::string sentencePooling;
  bool sentenceNormalize = false;
};

/// Reads `path`: a config .json, or a checkpoint directory (its
/// config.json, the headers of its safetensors files, and
/// sentence-transformers' modules.json and pooling config). Errors name the
/// file and key.
llvm::Expected<ModelSource> readModelSource(llvm::StringRef path);

/// What the runtime needs beyond the entry functions' signatures: the
/// metadata part of their manifests.
using ModelInfo = rt::ModelMetadata;

/// Builds `func.func @forward` (or, with `request.training`, `@loss`) from
/// a Hugging Face style config: token inputs carry `xfmr.input = "<name>"`,
/// weights `xfmr.param = "<checkpoint name>"`, results `xfmr.output =
/// "<name>"` (logits, last_hidden_state, ...). Errors name the file and the
/// offending key.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildModel(mlir::MLIRContext &context,
                                                             const ModelSource &source,
                                                             const ModelRequest &request,
                                                             ModelInfo &info);

/// The architectures buildModel knows (values of "model_type").
llvm::ArrayRef<llvm::StringRef> supportedModelTypes();

} // namespace xfmr

#endif // XFMR_FRONTEND_MODELBUILDER_H
