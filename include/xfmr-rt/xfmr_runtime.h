/*===- xfmr_runtime.h - the xfmr runtime C API ---------------------------===*
 *
 * The runtime is plain C++ with a C interface and no MLIR or LLVM dependency:
 * a program that embeds a compiled model (the object + header that
 * `xfmrc --emit=obj` and `--emit=header` write) links only this library
 * (libxfmr_runtime.a) and, for OpenMP-parallel models, libomp.
 *
 * Errors: functions that can fail return NULL or a non-zero value and write a
 * one-line message (naming the file and tensor at fault) into `err`.
 *
 *===----------------------------------------------------------------------===*/

#ifndef XFMR_RT_XFMR_RUNTIME_H
#define XFMR_RT_XFMR_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xfmr_dtype {
  XFMR_DTYPE_F32 = 0,
  XFMR_DTYPE_F64,
  XFMR_DTYPE_F16,
  XFMR_DTYPE_BF16,
  XFMR_DTYPE_I64,
  XFMR_DTYPE_I32,
  XFMR_DTYPE_I16,
  XFMR_DTYPE_I8,
  XFMR_DTYPE_U8,
  XFMR_DTYPE_BOOL,
} xfmr_dtype;

/* Bytes per element of `dtype`. */
size_t xfmr_dtype_size(xfmr_dtype dtype);
/* The safetensors spelling ("F32", "BF16", ...). */
const char *xfmr_dtype_name(xfmr_dtype dtype);

typedef struct xfmr_tensor_info {
  const char *name;
  xfmr_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  const void *data; /* may be unaligned: use xfmr_safetensors_read */
  uint64_t num_bytes;
} xfmr_tensor_info;

/*===--- Reading safetensors ---------------------------------------------===*/

typedef struct xfmr_safetensors xfmr_safetensors;

/* Opens `path` read-only (memory-mapped) and validates its header: the JSON
 * parses, every entry has a known dtype, a non-negative shape and
 * data_offsets inside the file that match the shape, and no two tensors
 * overlap. Returns NULL on failure. */
xfmr_safetensors *xfmr_safetensors_open(const char *path, char *err, size_t err_size);
void xfmr_safetensors_close(xfmr_safetensors *file);
size_t xfmr_safetensors_count(const xfmr_safetensors *file);
/* Fills `info` for the index-th tensor (header order); 0 on success. */
int xfmr_safetensors_get(const xfmr_safetensors *file, size_t index, xfmr_tensor_info *info);
/* Fills `info` for the tensor called `name`; 0 on success, non-zero if absent. */
int xfmr_safetensors_find(const xfmr_safetensors *file, const char *name,
                          xfmr_tensor_info *info);
/* Copies `name` into `dst` as `dtype`, checking that it has exactly the
 * `rank` dims in `shape`. Converts F64/F16/BF16 to F32, any integer type to
 * I32 (values must fit) and U8 to BOOL; other dtypes must match. 0 on
 * success. */
int xfmr_safetensors_read(const xfmr_safetensors *file, const char *name, xfmr_dtype dtype,
                          int32_t rank, const int64_t *shape, void *dst, char *err,
                          size_t err_size);

/*===--- Reading a model's weights --------------------------------------===*/

/* The tensors of a checkpoint, which may span several safetensors files. */
typedef struct xfmr_weights xfmr_weights;

/* Opens `path`: a .safetensors file, a Hugging Face checkpoint directory
 * (its model.safetensors, or the shards its model.safetensors.index.json
 * lists) or such an index file. Every file is validated as
 * xfmr_safetensors_open does. Returns NULL on failure. */
xfmr_weights *xfmr_weights_open(const char *path, char *err, size_t err_size);
void xfmr_weights_close(xfmr_weights *weights);
size_t xfmr_weights_count(const xfmr_weights *weights);
/* As xfmr_safetensors_get, _find and _read, over all files. */
int xfmr_weights_get(const xfmr_weights *weights, size_t index, xfmr_tensor_info *info);
int xfmr_weights_find(const xfmr_weights *weights, const char *name, xfmr_tensor_info *info);
int xfmr_weights_read(const xfmr_weights *weights, const char *name, xfmr_dtype dtype, int32_t rank,
                      const int64_t *shape, void *dst, char *err, size_t err_size);

/*===--- Writing tensors -------------------------------------------------===*/

typedef struct xfmr_tensor_ref {
  const char *name;
  xfmr_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  const void *data;
} xfmr_tensor_ref;

/* Writes `count` tensors to a .safetensors file. 0 on success. */
int xfmr_safetensors_write(const char *path, const xfmr_tensor_ref *tensors, size_t count,
                           char *err, size_t err_size);
/* Writes one tensor as a NumPy .npy file (format 1.0, little-endian, C order). */
int xfmr_npy_write(const char *path, const xfmr_tensor_ref *tensor, char *err,
                   size_t err_size);

/*===--- The model runner ------------------------------------------------===*/

/* The command line of compiled model executables (see `--help`): loads the
 * weights named in `manifest_json`, reads token sequences, calls `entry` (a
 * model's `<name>_packed` function) per batch and writes the logits. Returns
 * the process exit code. */
int xfmr_runner_main(int argc, char **argv, const char *manifest_json,
                     void (*entry)(void **args));

/* The command line of compiled training executables (see `--help`):
 * initialises or loads the weights, runs `train_step` (a model's
 * `<prefix>_train_step_packed`) on shuffled batches of a token file,
 * evaluates with `evaluate` and saves the weights. Returns the process exit
 * code. */
int xfmr_trainer_main(int argc, char **argv, const char *train_step_manifest,
                      void (*train_step)(void **args), const char *evaluate_manifest,
                      void (*evaluate)(void **args));

#ifdef __cplusplus
}
#endif

#endif /* XFMR_RT_XFMR_RUNTIME_H */
