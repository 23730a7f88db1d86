//===- Safetensors.cpp - validated safetensors reading and writing --------===//
//
// Format: an 8-byte little-endian header length N, N bytes of JSON mapping
// tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the byte after the header) plus an optional "__metadata__",
// then the data. Every field is checked before any pointer into the file is
// handed out: a truncated or corrupt file is an error, never a crash.
//
//===----------------------------------------------------------------------===//

#include "xfmr-rt/xfmr_runtime.h"

#include "Json.h"
#include "RuntimeSupport.h"
#include "Tokenizers/Unicode.h"
#include "Weights/Gguf.h"

#include <algorithm>
#include <cerrno>
#include <memory>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace xfmr::rt;

namespace {

struct DtypeName {
  const char *name;
  xfmr_dtype dtype;
  size_t size;
};

constexpr DtypeName kDtypes[] = {
    {"F32", XFMR_DTYPE_F32, 4},  {"F64", XFMR_DTYPE_F64, 8},   {"F16", XFMR_DTYPE_F16, 2},
    {"BF16", XFMR_DTYPE_BF16, 2}, {"I64", XFMR_DTYPE_I64, 8},   {"I32", XFMR_DTYPE_I32, 4},
    {"I16", XFMR_DTYPE_I16, 2},   {"I8", XFMR_DTYPE_I8, 1},     {"U8", XFMR_DTYPE_U8, 1},
    {"BOOL", XFMR_DTYPE_BOOL, 1},
};

struct TensorEntry {
  std::string name;
  xfmr_dtype dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

} // namespace

struct xfmr_safetensors {
  std::string path;
  void *mapping = nullptr;
  size_t fileSize = 0;
  const uint8_t *data = nullptr; // start of the data section
  std::vector<TensorEntry> tensors;

  ~xfmr_safetensors() {
    if (mapping)
      munmap(mapping, fileSize);
  }

  const TensorEntry *find(const char *name) const {
    for (const TensorEntry &entry : tensors)
      if (entry.name == name)
        return &entry;
    return nullptr;
  }

  void describe(const TensorEntry &entry, xfmr_tensor_info *info) const {
    info->name = entry.name.c_str();
    info->dtype = entry.dtype;
    info->rank = static_cast<int32_t>(entry.shape.size());
    info->shape = entry.shape.data();
    info->data = data + entry.begin;
    info->num_bytes = entry.end - entry.begin;
  }
};

size_t xfmr_dtype_size(xfmr_dtype dtype) {
  for (const DtypeName &d : kDtypes)
    if (d.dtype == dtype)
      return d.size;
  return 0;
}

const char *xfmr_dtype_name(xfmr_dtype dtype) {
  for (const DtypeName &d : kDtypes)
    if (d.dtype == dtype)
      return d.name;
  const char *block = ggmlBlockTypeName(dtype);
  return block ? block : "?";
}

/// Parses and checks one header entry; returns an error message or "".
/// Maps `size` bytes of `fd` read-only at a 2 MiB-aligned address, asking
/// for huge pages: where the kernel keeps the file's page cache in 2 MiB
/// folios (ext4 on recent kernels), they are then mapped whole, and weights
/// used in place stream through as few TLB entries as a copy on huge pages.
static void *mapOnHugePages(int fd, size_t size) {
  constexpr size_t kHugePage = size_t(2) << 20;
  void *reserved = mmap(nullptr, size + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (reserved == MAP_FAILED)
    return MAP_FAILED;
  auto *begin = static_cast<uint8_t *>(reserved);
  auto *aligned = reinterpret_cast<uint8_t *>(
      (reinterpret_cast<uintptr_t>(begin) + kHugePage - 1) & ~(kHugePage - 1));
  void *mapping = mmap(aligned, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  if (mapping == MAP_FAILED) {
    munmap(reserved, size + kHugePage);
    return MAP_FAILED;
  }
  // The reservation around the mapping goes back.
  if (aligned > begin)
    munmap(begin, aligned - begin);
  size_t pageSize = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  uint8_t *end = aligned + (size + pageSize - 1) / pageSize * pageSize;
  if (begin + size + kHugePage > end)
    munmap(end, begin + size + kHugePage - end);
  madvise(mapping, size, MADV_HUGEPAGE);
  return mapping;
}

static std::string parseEntry(const std::string &name, const Json &value, uint64_t dataSize,
                              TensorEntry &entry) {
  std::string where = "tensor '" + name + "'";
  if (!value.is_object())
    return where + ": header entry is not an object";
  const Json *dtype = field(value, "dtype");
  if (!dtype || !dtype->is_string())
    return where + ": missing string \"dtype\"";
  const DtypeName *known = nullptr;
  for (const DtypeName &d : kDtypes)
    if (textOf(*dtype) == d.name)
      known = &d;
  if (!known)
    return where + ": unsupported dtype \"" + textOf(*dtype) + "\"";
  const Json *shape = field(value, "shape");
  if (!shape || !shape->is_array())
    return where + ": missing array \"shape\"";
  if (shape->size() > 16)
    return where + ": rank " + std::to_string(shape->size()) + " is too large";
  uint64_t count = 1;
  for (const Json &dim : *shape) {
    std::optional<int64_t> size = asInt(dim);
    if (!size || *size < 0)
      return where + ": shape entries must be non-negative integers";
    if (*size != 0 && count > (uint64_t(1) << 62) / uint64_t(*size))
      return where + ": shape is too large";
    count *= uint64_t(*size);
    entry.shape.push_back(*size);
  }
  const Json *offsets = field(value, "data_offsets");
  if (!offsets || !offsets->is_array() || offsets->size() != 2)
    return where + ": missing \"data_offsets\" [begin, end]";
  std::optional<uint64_t> begin = asUInt((*offsets)[0]);
  std::optional<uint64_t> end = asUInt((*offsets)[1]);
  if (!begin || !end || *begin > *end)
    return where + ": data_offsets must be integers with begin <= end";
  if (*end > dataSize)
    return where + ": data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) +
           "] run past the end of the data (" + std::to_string(dataSize) +
           " bytes; file truncated?)";
  if (*end - *begin != count * known->size)
    return where + ": data_offsets span " + std::to_string(*end - *begin) + " bytes but " +
           known->name + " " + shapeToString(entry.shape) + " needs " +
           std::to_string(count * known->size);
  entry.name = name;
  entry.dtype = known->dtype;
  entry.begin = *begin;
  entry.end = *end;
  return "";
}

xfmr_safetensors *xfmr_safetensors_open(const char *path, char *err, size_t errSize) {
  auto file = std::make_unique<xfmr_safetensors>();
  file->path = path;
  std::string prefix = std::string("weights file '") + path + "': ";
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    setError(err, errSize, prefix + "cannot open: " + std::strerror(errno));
    return nullptr;
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    setError(err, errSize, prefix + "not a regular file");
    return nullptr;
  }
  file->fileSize = static_cast<size_t>(info.st_size);
  if (file->fileSize < 8) {
    ::close(fd);
    setError(err, errSize, prefix + "too short for a safetensors header (" +
                               std::to_string(file->fileSize) + " bytes)");
    return nullptr;
  }
  file->mapping = mapOnHugePages(fd, file->fileSize);
  ::close(fd);
  if (file->mapping == MAP_FAILED) {
    file->mapping = nullptr;
    setError(err, errSize, prefix + "cannot map: " + std::strerror(errno));
    return nullptr;
  }
  const auto *bytes = static_cast<const uint8_t *>(file->mapping);
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = (headerSize << 8) | bytes[i];
  if (headerSize > file->fileSize - 8) {
    setError(err, errSize, prefix + "header length " + std::to_string(headerSize) +
                               " exceeds the file size " + std::to_string(file->fileSize) +
                               " (truncated or not a safetensors file)");
    return nullptr;
  }
  std::string jsonError;
  std::optional<Json> header =
      parseJson(std::string_view(reinterpret_cast<const char *>(bytes + 8), headerSize), jsonError);
  if (!header) {
    setError(err, errSize, prefix + "corrupt header JSON: " + jsonError);
    return nullptr;
  }
  if (!header->is_object()) {
    setError(err, errSize, prefix + "header JSON is not an object");
    return nullptr;
  }
  file->data = bytes + 8 + headerSize;
  uint64_t dataSize = file->fileSize - 8 - headerSize;
  for (const auto &[name, value] : members(*header)) {
    if (name == "__metadata__")
      continue;
    TensorEntry entry;
    std::string problem = parseEntry(name, value, dataSize, entry);
    if (!problem.empty()) {
      setError(err, errSize, prefix + problem);
      return nullptr;
    }
    file->tensors.push_back(std::move(entry));
  }
  std::vector<const TensorEntry *> byOffset;
  for (const TensorEntry &entry : file->tensors)
    byOffset.push_back(&entry);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const TensorEntry *a, const TensorEntry *b) { return a->begin < b->begin; });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i]->begin < byOffset[i - 1]->end) {
      setError(err, errSize, prefix + "tensors '" + byOffset[i - 1]->name + "' and '" +
                                 byOffset[i]->name + "' overlap");
      return nullptr;
    }
  return file.release();
}

void xfmr_safetensors_close(xfmr_safetensors *file) { delete file; }

size_t xfmr_safetensors_count(const xfmr_safetensors *file) { return file->tensors.size(); }

int xfmr_safetensors_get(const xfmr_safetensors *file, size_t index, xfmr_tensor_info *info) {
  if (index >= file->tensors.size())
    return 1;
  file->describe(file->tensors[index], info);
  return 0;
}

int xfmr_safetensors_find(const xfmr_safetensors *file, const char *name,
                          xfmr_tensor_info *info) {
  const TensorEntry *entry = file->find(name);
  if (!entry)
    return 1;
  file->describe(*entry, info);
  return 0;
}

int xfmr_safetensors_read(const xfmr_safetensors *file, const char *name, xfmr_dtype dtype,
                          int32_t rank, const int64_t *shape, void *dst, char *err,
                          size_t errSize) {
  std::string prefix = "'" + file->path + "': ";
  std::vector<int64_t> expected(shape, shape + rank);
  const TensorEntry *entry = file->find(name);
  if (!entry) {
    setError(err, errSize, prefix + "no tensor '" + name + "' (expected " +
                               xfmr_dtype_name(dtype) + " " + shapeToString(expected) + ")");
    return 1;
  }
  if (entry->shape != expected) {
    setError(err, errSize,
             prefix + "tensor '" + name + "' is " + xfmr_dtype_name(entry->dtype) + " " +
                 shapeToString(entry->shape) + ", the model needs " + xfmr_dtype_name(dtype) + " " +
                 shapeToString(expected));
    return 1;
  }
  std::string problem = convertElements(entry->dtype, file->data + entry->begin,
                                        static_cast<size_t>(elementCount(expected)), dtype, dst);
  if (!problem.empty()) {
    setError(err, errSize, prefix + "tensor '" + name + "': " + problem);
    return 1;
  }
  return 0;
}

int xfmr_safetensors_write(const char *path, const xfmr_tensor_ref *tensors, size_t count,
                           char *err, size_t errSize) {
  // Tensors whose sizes are multiples of 64 bytes first, after a header
  // padded to 64: then each starts on a cache line, as the executables use
  // the tensors of a mapped file in place only there (a vector load across
  // two lines costs two).
  auto bytesOf = [&](size_t i) {
    std::vector<int64_t> shape(tensors[i].shape, tensors[i].shape + tensors[i].rank);
    return elementCount(shape) * xfmr_dtype_size(tensors[i].dtype);
  };
  std::vector<size_t> order(count);
  for (size_t i = 0; i < count; ++i)
    order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](size_t i) { return bytesOf(i) % 64 == 0; });
  Json entries = Json::object();
  uint64_t offset = 0;
  for (size_t i : order) {
    const xfmr_tensor_ref &t = tensors[i];
    std::vector<int64_t> shape(t.shape, t.shape + t.rank);
    uint64_t bytes = elementCount(shape) * xfmr_dtype_size(t.dtype);
    std::string problem = !isValidUtf8(t.name)       ? "a tensor name is not UTF-8"
                          : entries.contains(t.name) ? "tensor '" + std::string(t.name) + "' twice"
                                                     : "";
    if (!problem.empty()) {
      setError(err, errSize, "cannot write '" + std::string(path) + "': " + problem);
      return 1;
    }
    entries[t.name] = {{"dtype", xfmr_dtype_name(t.dtype)},
                       {"shape", shape},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header = entries.dump();
  while ((8 + header.size()) % 64)
    header += ' ';
  OutputFile out(path);
  if (!out) {
    setError(err, errSize, "cannot write '" + std::string(path) + "': " + std::strerror(errno));
    return 1;
  }
  uint8_t length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<uint8_t>(uint64_t(header.size()) >> (8 * i));
  out.write(length, 8);
  out.write(header.data(), header.size());
  for (size_t i : order)
    out.write(tensors[i].data, bytesOf(i));
  if (!out.close()) {
    setError(err, errSize, "error writing '" + std::string(path) + "'");
    return 1;
  }
  return 0;
}

int xfmr_npy_write(const char *path, const xfmr_tensor_ref *tensor, char *err,
                   size_t errSize) {
  const char *descr = nullptr;
  switch (tensor->dtype) {
  case XFMR_DTYPE_F32: descr = "<f4"; break;
  case XFMR_DTYPE_F64: descr = "<f8"; break;
  case XFMR_DTYPE_F16: descr = "<f2"; break;
  case XFMR_DTYPE_I64: descr = "<i8"; break;
  case XFMR_DTYPE_I32: descr = "<i4"; break;
  case XFMR_DTYPE_I16: descr = "<i2"; break;
  case XFMR_DTYPE_I8: descr = "|i1"; break;
  case XFMR_DTYPE_U8: descr = "|u1"; break;
  case XFMR_DTYPE_BOOL: descr = "|b1"; break;
  case XFMR_DTYPE_BF16:
    setError(err, errSize, "cannot write bf16 to .npy (NumPy has no bfloat16)");
    return 1;
  default:
    setError(err, errSize,
             std::string("cannot write ") + xfmr_dtype_name(tensor->dtype) + " blocks to .npy");
    return 1;
  }
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
  for (int32_t d = 0; d < tensor->rank; ++d)
    dict += std::to_string(tensor->shape[d]) + (tensor->rank == 1 || d + 1 < tensor->rank ? "," : "");
  dict += "), }";
  // Magic (6) + version (2) + length (2) + dict + '\n' is a multiple of 64.
  while ((10 + dict.size() + 1) % 64)
    dict += ' ';
  dict += '\n';
  OutputFile out(path);
  if (!out) {
    setError(err, errSize, "cannot write '" + std::string(path) + "': " + std::strerror(errno));
    return 1;
  }
  const uint8_t preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                static_cast<uint8_t>(dict.size() & 0xFF),
                                static_cast<uint8_t>(dict.size() >> 8)};
  out.write(preamble, sizeof(preamble));
  out.write(dict.data(), dict.size());
  std::vector<int64_t> shape(tensor->shape, tensor->shape + tensor->rank);
  out.write(tensor->data, elementCount(shape) * xfmr_dtype_size(tensor->dtype));
  if (!out.close()) {
    setError(err, errSize, "error writing '" + std::string(path) + "'");
    return 1;
  }
  return 0;
}
