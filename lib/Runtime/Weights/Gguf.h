//===- Gguf.h - llama.cpp's GGUF model files --------------------*- C++ -*-===//
//
// A GGUF file (ggml's docs/gguf.md) holds a model's metadata (key/value
// pairs: the architecture's hyperparameters, the tokenizer, the chat
// template) and its tensors, quantized in ggml's block formats
// (ggml-common.h). GgufFile validates the container; GgufModel reads it as
// a Hugging Face checkpoint of the same model: its config.json, and its
// tensors under transformers' names, with what llama.cpp's converter changed
// undone.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_GGUF_H
#define XFMR_LIB_RUNTIME_GGUF_H

#include "xfmr-rt/xfmr_runtime.h"

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace xfmr::rt {

/// One metadata value: an integer (of any width), a float, a bool, a
/// string, or an array of them.
struct GgufValue {
  enum class Kind { Integer, Float, Bool, String, Array };
  Kind kind = Kind::Integer;
  int64_t integer = 0;
  double number = 0;
  std::string text;
  std::vector<GgufValue> items;
};

/// A tensor as the file stores it.
struct GgufTensor {
  std::string name;
  /// ggml's type id (GGML_TYPE_*) and its xfmr dtype.
  uint32_t ggmlType = 0;
  xfmr_dtype dtype = XFMR_DTYPE_F32;
  /// Outermost dimension first (ggml's `ne` reversed), as PyTorch's.
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;
  uint64_t bytes = 0;
  /// Whether `data` lies in the file's mapping (not in memory of its own).
  bool inMapping = true;
};

/// A mapped, validated GGUF file (version 2 or 3, little-endian). Open
/// throws a Failure naming the file and what is wrong.
class GgufFile {
public:
  static std::unique_ptr<GgufFile> open(const std::string &path);
  ~GgufFile();

  const std::string &path() const { return filePath; }
  const GgufValue *find(const std::string &key) const;
  const std::vector<GgufTensor> &tensors() const { return tensorList; }

private:
  GgufFile() = default;
  std::string filePath;
  void *mapping = nullptr;
  size_t fileSize = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensor> tensorList;
};

/// Whether `dtype` is one of ggml's block formats.
bool isGgmlBlockType(xfmr_dtype dtype);

/// ggml's name of a block dtype ("Q4_K"), or null for other dtypes.
const char *ggmlBlockTypeName(xfmr_dtype dtype);

/// Values per block and bytes per block of a ggml block dtype.
std::pair<int64_t, int64_t> ggmlBlockLayout(xfmr_dtype dtype);

/// Decodes `count` values (whole blocks) of the ggml block dtype `dtype`.
void dequantizeBlocks(xfmr_dtype dtype, const uint8_t *blocks, float *out, int64_t count);

/// How a ggml block type holds its values as integer levels: groups of
/// `group` values with a scale each, and with `mins` a minimum (value =
/// level * scale + min, levels 0 .. 2^bits - 1) or without (value = level *
/// scale, signed levels), levels fitting in `bits` (4 or 8). `scales`
/// holds the scales and mins exactly: F16 where they are the blocks' own
/// f16 fields, F32 for a K-quant's f16 times a sub-block's integer.
struct GgmlIntegerLayout {
  int64_t group;
  bool mins;
  int64_t bits;
  xfmr_dtype scales;
};

/// The integer layout of a ggml block dtype (Q8_0, Q6_K, Q5_*, Q4_*).
GgmlIntegerLayout ggmlIntegerLayout(xfmr_dtype dtype);

/// Splits `count` values of the block dtype `dtype` into their integer
/// levels, one per value, and the scales (and mins) of their groups, as
/// ggmlIntegerLayout says: level * scale (+ min), rounded in f32, is ggml's
/// dequantized value bit for bit.
void ggmlIntegerGroups(xfmr_dtype dtype, const uint8_t *blocks, int64_t count, int8_t *levels,
                       float *scales, float *mins);

/// A GGUF file read as the checkpoint transformers would load from it.
class GgufModel {
public:
  /// Opens `path`; a Failure names the key or tensor it cannot read.
  explicit GgufModel(const std::string &path);

  /// The config.json of the model: transformers' keys, from the file's
  /// `<architecture>.*` and `tokenizer.ggml.*` metadata.
  const std::string &configJson() const { return config; }
  /// Every tensor under its transformers name. What llama.cpp's converter
  /// changed is undone in memory of the model's own: query and key rows
  /// permuted for its rope, norm weights stored plus one; the other tensors
  /// point into the mapping.
  const std::vector<GgufTensor> &tensors() const { return renamed; }
  const GgufFile &file() const { return *gguf; }

private:
  std::unique_ptr<GgufFile> gguf;
  std::string config;
  std::vector<GgufTensor> renamed;
  std::vector<std::unique_ptr<uint8_t[]>> rewritten;
};

/// The tokenizer.json (transformers' layout) of the tokenizer a GGUF file
/// describes in its `tokenizer.ggml.*` metadata (GgufTokenizer.cpp).
nlohmann::json ggufTokenizerJson(const GgufFile &file);
/// Its tokenizer_config.json: the special tokens and the chat template.
nlohmann::json ggufTokenizerConfigJson(const GgufFile &file);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_GGUF_H
