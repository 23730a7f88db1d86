//===- SafetensorsFuzzer.cpp - the safetensors reader ---------------------===//
//
// A weights file or an --inputs file: the header (JSON, dtypes, shapes,
// offsets), then every tensor read as the runtime reads it (floats as f32,
// integers as i32).
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "xfmr-rt/xfmr_runtime.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path =
      xfmr::fuzz::writeScratchFile("model.safetensors", xfmr::fuzz::asText(data, size));
  char err[512];
  xfmr_safetensors *file = xfmr_safetensors_open(path.c_str(), err, sizeof(err));
  if (!file)
    return 0;
  for (size_t i = 0; i < xfmr_safetensors_count(file); ++i) {
    xfmr_tensor_info info;
    if (xfmr_safetensors_get(file, i, &info) != 0)
      __builtin_trap();
    xfmr_dtype as = info.dtype;
    if (as == XFMR_DTYPE_F64 || as == XFMR_DTYPE_F16 || as == XFMR_DTYPE_BF16)
      as = XFMR_DTYPE_F32;
    else if (as == XFMR_DTYPE_I64 || as == XFMR_DTYPE_I16 || as == XFMR_DTYPE_I8)
      as = XFMR_DTYPE_I32;
    uint64_t elements = 1;
    for (int32_t d = 0; d < info.rank; ++d)
      elements *= uint64_t(info.shape[d]);
    // The header was checked against the file size, so this is bounded.
    std::vector<uint8_t> buffer(elements * xfmr_dtype_size(as) + 1);
    xfmr_safetensors_read(file, info.name, as, info.rank, info.shape, buffer.data(), err,
                          sizeof(err));
  }
  xfmr_safetensors_close(file);
  return 0;
}
