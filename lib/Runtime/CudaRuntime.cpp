//===- CudaRuntime.cpp - MLIR's mgpu* GPU ABI over the CUDA driver --------===//
//
// Host code from MLIR's gpu-to-llvm lowering and gpu.binary translation
// calls `mgpu*` functions (module loading, launches, streams, memory).
// Debian's MLIR ships no library with them, so xfmr provides this one
// (libxfmr_cuda.a), written against the CUDA driver API. libcuda is opened
// at run time rather than linked: a GPU executable starts anywhere, and on a
// machine without the driver or a GPU it stops with a clear error when the
// model first needs the GPU. Kernel images are loaded at that point too, not
// in the static constructors that register them.
//
// The ABI has no error results: a failing driver call prints the call and
// CUDA's error name, and exits with status 1.
//
//===----------------------------------------------------------------------===//

#include <cuda.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <vector>

namespace {

// The driver functions used; cuda.h maps several names to versioned symbols
// (cuMemFree -> cuMemFree_v2), which the stringized name follows.
#define XFMR_CUDA_FUNCTIONS(X)                                                                     \
  X(cuInit)                                                                                        \
  X(cuGetErrorName)                                                                                \
  X(cuDeviceGet)                                                                                   \
  X(cuDeviceGetDefaultMemPool)                                                                     \
  X(cuMemPoolSetAttribute)                                                                         \
  X(cuPointerGetAttribute)                                                                         \
  X(cuDevicePrimaryCtxRetain)                                                                      \
  X(cuCtxSetCurrent)                                                                               \
  X(cuModuleLoadData)                                                                              \
  X(cuModuleLoadDataEx)                                                                            \
  X(cuModuleUnload)                                                                                \
  X(cuModuleGetFunction)                                                                           \
  X(cuFuncSetAttribute)                                                                            \
  X(cuLaunchKernel)                                                                                \
  X(cuStreamCreate)                                                                                \
  X(cuStreamSynchronize)                                                                           \
  X(cuStreamWaitEvent)                                                                             \
  X(cuEventCreate)                                                                                 \
  X(cuEventDestroy)                                                                                \
  X(cuEventSynchronize)                                                                            \
  X(cuEventRecord)                                                                                 \
  X(cuMemAllocAsync)                                                                               \
  X(cuMemAllocManaged)                                                                             \
  X(cuMemFree)                                                                                     \
  X(cuMemFreeAsync)                                                                                \
  X(cuMemcpyAsync)                                                                                 \
  X(cuMemsetD16Async)                                                                              \
  X(cuMemsetD32Async)

#define XFMR_STRINGIZE(name) #name
#define XFMR_SYMBOL(name) XFMR_STRINGIZE(name)

struct Driver {
#define XFMR_DECLARE(name) decltype(&name) name##_ = nullptr;
  XFMR_CUDA_FUNCTIONS(XFMR_DECLARE)
#undef XFMR_DECLARE
  CUcontext context = nullptr;
};

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "%s: error: %s\n", program_invocation_name, message.c_str());
  std::exit(1);
}

/// Set once libcuda's functions are found (before cuInit, whose failure
/// check() must already be able to name).
Driver *loadedDriver = nullptr;

void check(CUresult result, const char *call) {
  if (result == CUDA_SUCCESS)
    return;
  const char *name = nullptr;
  if (loadedDriver->cuGetErrorName_(result, &name) != CUDA_SUCCESS || !name)
    name = "unknown error";
  std::string message = std::string("CUDA: ") + call + " failed: " + name;
  if (result == CUDA_ERROR_NO_DEVICE)
    message += " (this model was compiled for an NVIDIA GPU and none is visible)";
  fail(message);
}

Driver &loadDriver() {
  static Driver loaded;
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    fail(std::string("this model was compiled for an NVIDIA GPU, but the CUDA driver "
                     "cannot be loaded: ") +
         dlerror());
#define XFMR_LOAD(name)                                                                            \
  loaded.name##_ = reinterpret_cast<decltype(&name)>(dlsym(library, XFMR_SYMBOL(name)));           \
  if (!loaded.name##_)                                                                             \
    fail("the CUDA driver has no " XFMR_SYMBOL(name) "; it is older than this program needs");
  XFMR_CUDA_FUNCTIONS(XFMR_LOAD)
#undef XFMR_LOAD
  loadedDriver = &loaded;
  return loaded;
}

#define XFMR_CHECK(call) check(driver().call, #call)

/// The driver, initialized with device 0's primary context current on this
/// thread.
Driver &driver() {
  static std::once_flag once;
  static Driver *loaded = nullptr;
  std::call_once(once, [] {
    loaded = &loadDriver();
    CUdevice device;
    check(loaded->cuInit_(0), "cuInit(0)");
    check(loaded->cuDeviceGet_(&device, 0), "cuDeviceGet(0)");
    check(loaded->cuDevicePrimaryCtxRetain_(&loaded->context, device), "cuDevicePrimaryCtxRetain");
    // Device buffers come from the stream-ordered pool; keeping what is
    // freed there (rather than returning it to the OS at every
    // synchronization) makes the next call's allocations free.
    CUmemoryPool pool;
    check(loaded->cuDeviceGetDefaultMemPool_(&pool, device), "cuDeviceGetDefaultMemPool");
    cuuint64_t keepAll = ~cuuint64_t(0);
    check(loaded->cuMemPoolSetAttribute_(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keepAll),
          "cuMemPoolSetAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)");
  });
  static thread_local bool current = false;
  if (!current) {
    check(loaded->cuCtxSetCurrent_(loaded->context), "cuCtxSetCurrent");
    current = true;
  }
  return *loaded;
}

/// A kernel image registered by a static constructor, loaded on first use.
struct LazyModule {
  const void *image;
  bool isPtx;
  int optLevel;
  CUmodule module = nullptr;
  std::once_flag loaded;
};

CUmodule loadedModule(LazyModule &lazy) {
  std::call_once(lazy.loaded, [&] {
    if (!lazy.isPtx) {
      XFMR_CHECK(cuModuleLoadData_(&lazy.module, lazy.image));
      return;
    }
    char log[8192] = {0};
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                              CU_JIT_OPTIMIZATION_LEVEL};
    void *values[] = {log, reinterpret_cast<void *>(sizeof(log)),
                      reinterpret_cast<void *>(static_cast<intptr_t>(lazy.optLevel))};
    CUresult result = driver().cuModuleLoadDataEx_(&lazy.module, lazy.image, 3, options, values);
    if (result != CUDA_SUCCESS && log[0])
      std::fprintf(stderr, "%s: PTX JIT log:\n%s\n", program_invocation_name, log);
    check(result, "cuModuleLoadDataEx (PTX JIT; was the model compiled for a newer --gpu-arch?)");
  });
  return lazy.module;
}

/// Streams given back by mgpuStreamDestroy, for the next mgpuStreamCreate.
/// The host code makes a stream for every chain of asynchronous GPU work,
/// often a single launch, and the driver's create and destroy cost more than
/// the launch itself. Work still queued on a returned stream only orders the
/// next user's after it. Never freed: the driver reclaims them at exit.
struct StreamPool {
  std::mutex mutex;
  std::vector<CUstream> idle;
};

StreamPool &streamPool() {
  static auto *pool = new StreamPool;
  return *pool;
}

} // namespace

extern "C" {

void *mgpuModuleLoad(void *image, size_t /*size*/) {
  return new LazyModule{image, /*isPtx=*/false, 0};
}

void *mgpuModuleLoadJIT(void *image, int optLevel) {
  return new LazyModule{image, /*isPtx=*/true, optLevel};
}

void mgpuModuleUnload(void *handle) {
  auto *lazy = static_cast<LazyModule *>(handle);
  // At exit the driver may already be shutting down; its answer no longer
  // matters.
  if (lazy->module)
    (void)driver().cuModuleUnload_(lazy->module);
  delete lazy;
}

CUfunction mgpuModuleGetFunction(void *handle, const char *name) {
  CUfunction function = nullptr;
  XFMR_CHECK(
      cuModuleGetFunction_(&function, loadedModule(*static_cast<LazyModule *>(handle)), name));
  return function;
}

void mgpuLaunchKernel(CUfunction function, intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                      intptr_t blockX, intptr_t blockY, intptr_t blockZ, int32_t sharedBytes,
                      CUstream stream, void **params, void **extra, size_t /*paramCount*/) {
  if (sharedBytes > 48 * 1024)
    XFMR_CHECK(cuFuncSetAttribute_(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   sharedBytes));
  XFMR_CHECK(cuLaunchKernel_(function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedBytes,
                             stream, params, extra));
}

CUstream mgpuStreamCreate() {
  StreamPool &pool = streamPool();
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (!pool.idle.empty()) {
      CUstream stream = pool.idle.back();
      pool.idle.pop_back();
      return stream;
    }
  }
  CUstream stream = nullptr;
  XFMR_CHECK(cuStreamCreate_(&stream, CU_STREAM_NON_BLOCKING));
  return stream;
}

void mgpuStreamDestroy(CUstream stream) {
  StreamPool &pool = streamPool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.idle.push_back(stream);
}

void mgpuStreamSynchronize(CUstream stream) { XFMR_CHECK(cuStreamSynchronize_(stream)); }

void mgpuStreamWaitEvent(CUstream stream, CUevent event) {
  XFMR_CHECK(cuStreamWaitEvent_(stream, event, 0));
}

CUevent mgpuEventCreate() {
  CUevent event = nullptr;
  XFMR_CHECK(cuEventCreate_(&event, CU_EVENT_DISABLE_TIMING));
  return event;
}

void mgpuEventDestroy(CUevent event) { XFMR_CHECK(cuEventDestroy_(event)); }

void mgpuEventSynchronize(CUevent event) { XFMR_CHECK(cuEventSynchronize_(event)); }

void mgpuEventRecord(CUevent event, CUstream stream) { XFMR_CHECK(cuEventRecord_(event, stream)); }

/// `hostShared` buffers are CUDA managed memory: kernels and host code both
/// address them. Others are device memory, ordered on `stream`.
void *mgpuMemAlloc(uint64_t bytes, CUstream stream, bool hostShared) {
  if (bytes == 0)
    return nullptr;
  CUdeviceptr pointer = 0;
  if (hostShared)
    XFMR_CHECK(cuMemAllocManaged_(&pointer, bytes, CU_MEM_ATTACH_GLOBAL));
  else
    XFMR_CHECK(cuMemAllocAsync_(&pointer, bytes, stream));
  return reinterpret_cast<void *>(pointer);
}

void mgpuMemFree(void *pointer, CUstream stream) {
  if (!pointer)
    return;
  auto address = reinterpret_cast<CUdeviceptr>(pointer);
  unsigned managed = 0;
  XFMR_CHECK(cuPointerGetAttribute_(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, address));
  if (managed)
    XFMR_CHECK(cuMemFree_(address));
  else
    XFMR_CHECK(cuMemFreeAsync_(address, stream));
}

void mgpuMemcpy(void *destination, void *source, size_t bytes, CUstream stream) {
  XFMR_CHECK(cuMemcpyAsync_(reinterpret_cast<CUdeviceptr>(destination),
                            reinterpret_cast<CUdeviceptr>(source), bytes, stream));
}

void mgpuMemset32(void *destination, unsigned int value, size_t count, CUstream stream) {
  XFMR_CHECK(cuMemsetD32Async_(reinterpret_cast<CUdeviceptr>(destination), value, count, stream));
}

void mgpuMemset16(void *destination, unsigned short value, size_t count, CUstream stream) {
  XFMR_CHECK(cuMemsetD16Async_(reinterpret_cast<CUdeviceptr>(destination), value, count, stream));
}

/// Whether `pointer` is in CUDA managed memory, which the host code of
/// xfmr-gpu-managed-buffers then hands to the kernels in place instead of
/// staging it. Host memory CUDA does not know reads as not managed.
bool xfmrGpuIsManaged(intptr_t pointer) {
  unsigned managed = 0;
  CUresult result = driver().cuPointerGetAttribute_(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                                    static_cast<CUdeviceptr>(pointer));
  if (result == CUDA_ERROR_INVALID_VALUE)
    return false;
  check(result, "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_IS_MANAGED)");
  return managed != 0;
}

/// The runtime's buffers (weights, KV caches, inputs and outputs) in a GPU
/// executable: managed memory, so that the compiled functions use them in
/// place and they stay on the GPU between calls, while host code still reads
/// and writes them (ModelWeights.cpp).
void *xfmrGpuAllocShared(size_t bytes) {
  CUdeviceptr pointer = 0;
  XFMR_CHECK(cuMemAllocManaged_(&pointer, bytes ? bytes : 1, CU_MEM_ATTACH_GLOBAL));
  return reinterpret_cast<void *>(pointer);
}

void xfmrGpuFreeShared(void *pointer) {
  CUresult result = driver().cuMemFree_(reinterpret_cast<CUdeviceptr>(pointer));
  // A buffer freed by a static destructor after the driver's own teardown
  // at exit: the memory goes with the process.
  if (result != CUDA_ERROR_DEINITIALIZED)
    check(result, "cuMemFree");
}

void mgpuSetDefaultDevice(int32_t device) {
  if (device != 0)
    fail("xfmr's CUDA runtime runs on device 0 only");
}

} // extern "C"
