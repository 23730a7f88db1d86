//===- ModelWeights.h - buffers and weights ---------------------*- C++ -*-===//
//
// Aligned (large ones on huge pages) buffers for a manifest's arguments, an
// entry's arguments bound to them, and its weights read from a safetensors
// file or checkpoint: converted to the model's element type, or quantized to
// int8 as the manifest says.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_MODELWEIGHTS_H
#define XFMR_LIB_RUNTIME_MODELWEIGHTS_H

#include "Manifest.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace xfmr::rt {

/// A zero-filled, 64-byte aligned buffer: its own memory, or `size` bytes
/// at `offset` of a larger `block`, or read-only bytes of a mapped file,
/// whose owner it keeps alive.
struct Buffer {
  explicit Buffer(size_t bytes);
  Buffer(std::shared_ptr<Buffer> block, size_t offset, size_t bytes);
  Buffer(std::shared_ptr<const void> mapping, const void *bytes, size_t size);
  ~Buffer();
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  uint8_t *data;
  size_t size;
  std::shared_ptr<const void> owner;
  template <typename T> T *as() { return reinterpret_cast<T *>(data); }
};

std::unique_ptr<Buffer> allocate(const ArgSpec &arg);

/// Buffers by argument name: weights, or state that entries share.
using BufferMap = std::map<std::string, std::unique_ptr<Buffer>>;

/// The arguments of a compiled entry, bound in its manifest's order. Each is
/// the buffer `place` gives it, if any; else a weight (param) from `weights`
/// (an error when absent); a state (optimizer state, KV cache) from
/// `states`, allocated zeroed there on first use; with `updateInPlace`, an
/// output that `updates` a state, that state; else a zeroed buffer of its
/// own. A buffer found by name must have the argument's size.
class EntryArgs {
public:
  using Place = std::function<Buffer *(const ArgSpec &)>;

  EntryArgs(const Manifest &manifest, const BufferMap &weights, BufferMap &states,
            const Place &place = nullptr, bool updateInPlace = true);
  EntryArgs(const EntryArgs &) = delete;
  EntryArgs &operator=(const EntryArgs &) = delete;

  /// The argument list an entry function takes.
  void **data() { return pointers.data(); }
  void *operator[](size_t i) const { return pointers[i]; }
  /// The buffer bound to the argument `name`, or null.
  Buffer *find(const std::string &name) const;

private:
  std::vector<void *> pointers;
  std::vector<std::unique_ptr<Buffer>> own;
  std::map<std::string, Buffer *> bound;
};

/// What loadWeights did, added up over calls: bytes used where the file
/// maps them, and bytes converted (to the model's type, quantized or
/// transposed) into memory; and the weights cache read or written, if any.
struct WeightsLoaded {
  size_t mapped = 0, converted = 0;
  std::string cacheRead, cacheWritten;
};

/// When loadModelWeights keeps a weights cache (weightsCachePath): when it
/// converts at least 64 MiB where it could map the rest, always, or never.
enum class WeightsCache { Auto, Always, Off };

/// --weights-cache's value: auto, always or off.
WeightsCache parseWeightsCache(const std::string &value);
/// Prints to stderr which weights cache was read or written, if any.
void reportWeightsCache(const WeightsLoaded &loaded);

/// Reads every weight of `manifest` but those named in `skip` from the
/// safetensors file at `path` (trying the manifest's name prefixes), checked
/// finite. With `mapInPlace` (executables that never write their weights, on
/// the host), a tensor stored as the kernels read it (type, shape, layout)
/// is used where the file is mapped; the others are converted into one
/// block of memory: on huge pages as a whole, where small weights on their
/// own would sit on 4 KiB pages, which a stream reads at a fraction of the
/// bandwidth.
BufferMap loadWeights(const Manifest &manifest, const std::string &path,
                      const std::set<std::string> &skip = {}, bool mapInPlace = false,
                      WeightsLoaded *loaded = nullptr);

/// Where the weights of `manifests` loaded from `source` are kept as the
/// executables read them (quantized, rounded, transposed: what loading
/// converts), so that later starts map them instead: a file beside the
/// source (in a checkpoint directory, inside it) whose name carries a hash
/// of the manifests' weights and of the source files' names, sizes and
/// modification times, so that a changed model or checkpoint misses it.
std::string weightsCachePath(const std::vector<const Manifest *> &manifests,
                             const std::string &source);

/// Writes the weights of `manifests`, each once by its argument's name, to
/// the safetensors file `path` (through a temporary file renamed into
/// place), as loadWeights reads them back.
void writeWeights(const std::vector<const Manifest *> &manifests, const BufferMap &weights,
                  const std::string &path);

/// The weights of every manifest, each once (the first manifest's of a
/// name), loaded from `source` by loadWeights; through the weights cache as
/// `cache` says: read from it where it exists, else written after loading
/// when loading converted enough (a failure to write it is a warning).
BufferMap loadModelWeights(const std::vector<const Manifest *> &manifests,
                           const std::string &source, bool mapInPlace, WeightsCache cache,
                           WeightsLoaded &loaded);

/// The bytes of the compiled arenas the entries of `manifests` run (each
/// function's once): the memory their activations take.
size_t activationBytes(const std::vector<const Manifest *> &manifests);

/// Fails, naming the sizes, when the weights, state (KV caches) and
/// activations of `manifests` (each tensor and arena once by name) exceed
/// the machine's memory: before anything is allocated, rather than at an
/// allocation or page fault minutes later.
void checkFitsInMemory(const std::vector<const Manifest *> &manifests);

/// Writes the weights of the executables of `manifests`, read from the
/// checkpoint `source` and quantized as the manifests say, to the
/// safetensors file `path`: a weight by its name, a narrow part of checkpoint
/// tensor T as `T:values` (I8), `T:scales` (F32) or `T:bf16` (BF16), which
/// loadWeights then reads as stored (`xfmrc --quantize`).
void writeModelWeights(const std::vector<Manifest> &manifests, const std::string &source,
                       const std::string &path);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_MODELWEIGHTS_H
