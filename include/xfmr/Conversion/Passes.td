//===- Passes.td - xfmr conversion passes ------------------*- tablegen -*-===//

#ifndef XFMR_CONVERSION_PASSES_TD
#define XFMR_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertXfmrToLinalg : Pass<"convert-xfmr-to-linalg"> {
  let summary = "Lower every xfmr op to linalg, tensor, arith and math on tensors";
  let description = [{
    Fused ops (`fused_attention`, `softmax`, `layer_norm`,
    `fused_add_layer_norm`, `fused_linear`) each become one kernel: a tiled
    loop nest (attention: an `scf.forall` over batch, heads and query blocks
    around an `scf.for` over key blocks with an online softmax, no
    [seq_q, seq_k] buffer) or a short chain of linalg ops over one row.
    Primitive ops become linalg named or generic ops with numpy broadcasting
    encoded in indexing maps. High-level ops without a direct lowering
    (`multi_head_attention`, `linear`) are first decomposed with the
    `xfmr-decompose` patterns. Fails, naming the op, if any xfmr op is left,
    but for `xfmr.all_reduce`, which bufferizes itself.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"];
}

def ConvertXfmrToGpuKernels : Pass<"convert-xfmr-to-gpu-kernels"> {
  let summary = "Lower fused xfmr ops to hand-built GPU kernels, one launch each";
  let description = [{
    Rewrites f32 ops into one `gpu.launch` each, with shared (workgroup)
    memory as `memref.global`s and `gpu.barrier`s between phases:

    - `fused_attention`: FlashAttention style, a thread block per (query
      tile, head, batch), one thread per query row. The block streams the
      keys and values through shared memory a tile at a time, loaded
      cooperatively and coalesced; each thread keeps its scaled query, its
      output accumulator and the online-softmax state private. Causal key
      tiles past the block's last row are never loaded; rows whose keys are
      all masked give 0 (and a log-sum-exp of -inf), never NaN. No
      [seq_q, seq_k] buffer exists.
    - `fused_attention_backward` (FlashAttention-2): two launches, so that
      each gradient row has one writer and no atomics are needed. dK and dV
      with a thread per key row, streaming the query tiles that see the
      block's keys (scaled Q, dO, lse and rowsum(dO * O) in shared memory);
      then dQ with a thread per query row, streaming key and value tiles.
      Probabilities are recomputed from the forward's log-sum-exp.
    - `fused_linear` and `matmul` with a 2-D weight (either operand
      transposed): a block per 64 x 64 tile of the result, 16 x 16 threads
      with a 4 x 4 register tile each, A and B staged through shared memory
      16 deep, products by `math.fma`; bias, activation and residual applied
      to the accumulators before the one store. When both factors are
      `arith.extf` of bf16 or f16 values (what `xfmr-compute-in-f32` makes
      of a low-precision product), the kernel reads them narrow and
      multiplies on tensor cores instead: `mma.sync.m16n8k16` with f32
      accumulators, 128 x 128 tiles with 4 warps of 64 x 64 where there are
      enough of them to occupy a GPU, else 64 x 64 with 4 of 32 x 32;
      stages 32 deep in four shared buffers as the factors lie in memory,
      copied 16 bytes at a time by `cp.async` (when aligned) three stages
      ahead, their fragments by `ldmatrix` (`.trans` for rows along K).
      With `warpgroup-mma` (sm_90a), the 4 warps are one warpgroup that
      multiplies by `wgmma.mma_async` from shared memory, the factors
      staged as 8 x 8 core matrices.
    - `fused_attention` of bf16 or f16 q, k and v (each `arith.extf` of
      them), whose head dim fits: FlashAttention-2 on tensor cores, a block
      per 128 query rows (4 warps of 32 up to head dim 128, 8 of 16 above),
      both products by `mma.sync` (K and V fragments by `ldmatrix`), the
      probabilities rounded to the narrow type and repacked from the score
      accumulators into the second product's operands in registers, the
      row max combined over a row's lanes by `gpu.shuffle`, base-2
      exponentials (`math.exp2` with fastmath `afn`). K and V tiles are
      staged row-major in two shared stages, copied 16 bytes at a time by
      `cp.async` a tile ahead where the operands' layout allows (checked at
      run time). With `warpgroup-mma` (sm_90a), two warpgroups of 64 rows
      multiply by `wgmma.mma_async` instead, Q, K and V staged as 8 x 8
      core matrices that the tensor cores read from shared memory, 128 keys
      a tile up to head dim 128 (64 above).
    - `fused_attention_backward` of such q, k and v (the output and its
      gradient read narrow too when they widen values of q's type): the
      same two launches on tensor cores, dQ first (a block per 64 query
      rows, 4 warps; it also writes rowsum(dO * O) for the second), then dK
      and dV (a block per 64 key rows); probabilities and score gradients
      rounded to the narrow type as factors. With `warpgroup-mma`, each
      kernel's 4 warps are one warpgroup and every product a
      `wgmma.mma_async`, the streamed tiles and the block's rows (A by
      descriptor) staged as core matrices.
    - Low-precision ops computed in f32 (`xfmr-compute-in-f32`) keep their
      bf16/f16 values in memory: a kernel reads operands that are
      `arith.extf` of bf16 or f16 values (a bias, a residual, a row
      kernel's input, gamma and beta) narrow, widening them as it loads,
      and a result whose one use is an `arith.truncf` to bf16 or f16 it
      writes so rounded itself: no widening or rounding kernels around it.
    - `softmax` over the last axis, `layer_norm` and `fused_add_layer_norm`:
      a block per row, each thread a strided part of the row, statistics
      combined by a tree through shared memory (online max and sum for
      softmax; shifted mean, then centred second moment, for layer norm).

    Other element types, softmax over other axes and batched products are
    left for `convert-xfmr-to-linalg`.

    With `emulate-threads`, the same kernels are built for the CPU instead:
    blocks become loops, and each stretch between two barriers a loop over
    the block's threads, with per-thread state in arrays indexed by thread.
    That is how the kernels' arithmetic is tested where no GPU exists. With
    `warpgroup-mma` too, the emulated products read their shared operands
    where the warpgroup MMAs' matrix descriptors say the tensor cores would.
    `reverse-threads` runs each phase's threads last to first: a thread
    reading what another writes in the same phase (a missing barrier) sees
    the write in one order and not in the other, so testing both orders
    catches such races.
  }];
  let options = [
    Option<"emulateThreads", "emulate-threads", "bool", /*default=*/"false",
           "Build the kernels as CPU loops over blocks and threads (for testing)">,
    Option<"reverseThreads", "reverse-threads", "bool", /*default=*/"false",
           "With emulate-threads, run each phase's threads last to first">,
    Option<"warpgroupMma", "warpgroup-mma", "bool", /*default=*/"false",
           "Multiply the bf16/f16 GEMMs' and attentions' tiles by sm_90a's "
           "warpgroup MMA (wgmma.mma_async)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::cf::ControlFlowDialect", "::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect", "::mlir::vector::VectorDialect",
  ];
}

def ConvertXfmrToCpuKernels : Pass<"convert-xfmr-to-cpu-kernels"> {
  let summary = "Lower fused xfmr ops to vectorized CPU kernels";
  let description = [{
    Rewrites `fused_linear` and `matmul` with a 2-D weight into a
    register-tiled GEMM whose epilogue (bias, activation, residual) is
    applied in registers; `fused_attention` into a flash-attention kernel
    (online softmax over key blocks, causal blocks skipped, no
    [seq_q, seq_k] buffer); `softmax` over the last axis, `layer_norm` and
    `fused_add_layer_norm` into row kernels (one sweep for the statistics,
    one for the output). Ops on other element types than f32, and softmax
    over another axis, are left for `convert-xfmr-to-linalg`. Kernels are loop nests over memrefs with vector
    arithmetic, parallel over `scf.forall` (OpenMP), embedded in the tensor
    program through `bufferization.to_buffer read_only` and
    `bufferization.to_tensor`; inputs are read through strided views, so
    slices and head splits are never copied.
  }];
  let options = [
    Option<"lanes", "lanes", "int64_t", /*default=*/"8",
           "f32 lanes per vector register (8: AVX2, 16: AVX-512)">,
    Option<"registers", "registers", "int64_t", /*default=*/"16",
           "vector registers (16: AVX2, 32: AVX-512)">,
    Option<"int8Dot", "int8-dot", "std::string", /*default=*/"\"none\"",
           "The target's int8 dot product: none, madd (vpmaddubsw + vpmaddwd: AVX2, "
           "AVX-512BW), vnni (vpdpbusd: AVX-VNNI, AVX-512 VNNI) or portable (vpdpbusd's "
           "arithmetic in plain vector ops, any target: tests)">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "With 16 lanes: the target has AVX-512 BF16's dot product (vdpbf16ps), which "
           "products of bf16 factors take (GEMMs, and decoding's rows against a B^T)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect", "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect",
    "::mlir::vector::VectorDialect"];
}

def XfmrApproximateVectorMath : Pass<"xfmr-approximate-vector-math"> {
  let summary = "Evaluate exp, tanh, erf and log on vectors with polynomials";
  let description = [{
    Rewrites `math.exp`, `math.tanh`, `math.erf` and `math.log` on f32
    vectors into MLIR's polynomial approximations (a few ulp), which stay
    vectorized; the LLVM lowering would otherwise call libm once per lane.
    Scalar f32 `math.tanh` and `math.erf` (GELU and its derivative in
    linalg loops) are rewritten too, so that LLVM vectorizes their loops;
    they saturate at +-1, so no input range needs care. Other scalar math
    (exp and log, exact at the infinities of masked scores) is left to libm.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def XfmrDestinationPassingEntry : Pass<"xfmr-destination-passing-entry", "::mlir::ModuleOp"> {
  let summary = "Give public functions caller-allocated result buffers";
  let description = [{
    Rewrites each public function on tensors into one on memrefs that writes
    its results into extra trailing memref arguments (destination-passing
    style), so that one-shot bufferization writes results in place and the C
    ABI is `void f(in..., out...)` with caller-owned buffers. Argument and
    result attributes move with them (results' attributes land on the new
    arguments). A result marked `xfmr.updates = "<name>"` of the argument
    it replaces (a weight or a KV cache) is computed in its output buffer,
    which first receives a copy of the argument unless the caller passed the
    argument's own buffer: then the update happens in place (a call of
    `@xfmr_copy_unless_same`, one private function per buffer type, keeps
    the entry free of a branch per cache). Does nothing to private
    functions.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"];
}

def XfmrExpandStridedCopies : Pass<"xfmr-expand-strided-copies"> {
  let summary = "Rewrite memref.copy of non-contiguous buffers into loops";
  let description = [{
    The LLVM lowering turns `memref.copy` between contiguous buffers into a
    memcpy, but copies involving strided views into calls to
    `memrefCopy` from MLIR's runner utilities, which neither Debian nor the
    xfmr runtime ships. This pass rewrites those copies (and only those) into
    loops: static copies whose innermost dimension is contiguous in both
    buffers and at most 64 elements long into a loop nest copying a vector
    of it at a time, others into `linalg.copy`. Runs after bufferization.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"];
}

def XfmrEmitPackedEntry : Pass<"xfmr-emit-packed-entry", "::mlir::ModuleOp"> {
  let summary = "Add `<f>_packed(void **args)` wrappers to LLVM functions";
  let description = [{
    For each public LLVM-dialect function marked `xfmr.entry`, adds
    `void <name>_packed(void **args)` that loads one pointer per parameter
    from `args` and calls `<name>`. A generic runner (lib/Runtime) calls
    models of any signature through this one function type. Also drops the
    entries' `xfmr.input`/`xfmr.param`/`xfmr.output` argument attributes,
    which LLVM IR has no place for. Runs after the lowering to the LLVM
    dialect with the bare-pointer memref convention.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

//===----------------------------------------------------------------------===//
// GPU (NVPTX)
//===----------------------------------------------------------------------===//

def XfmrGpuManagedBuffers : Pass<"xfmr-gpu-managed-buffers", "::mlir::ModuleOp"> {
  let summary = "Place bufferized functions' buffers where the GPU kernels address them";
  let description = [{
    Runs on bufferized functions whose loops are about to become GPU kernels.
    Every `memref.alloc` becomes `gpu.alloc host_shared` (CUDA managed memory,
    addressable by the kernels and by whatever host code remains between
    them) and every `memref.dealloc` a `gpu.dealloc`; constants read with
    `memref.get_global` are copied into managed buffers at entry. The
    caller's arguments keep the CPU build's ABI (host pointers). An argument
    in CUDA managed memory (`xfmrGpuIsManaged`, libxfmr_cuda; the runtime's
    weights, caches, inputs and outputs in GPU executables) is used in place:
    it stays on the GPU from one call to the next. Any other is copied into a
    managed buffer at entry, and copied back before returning where the
    function writes it. Those copies are `gpu.memcpy` (the copy engine), so
    the kernels find staged data already in GPU memory. Copies between
    buffers inside the function become `linalg.copy`, so they run as kernels
    too. Fails on `memref.alloca` outside loops, which a kernel could not
    address.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::linalg::LinalgDialect", "::mlir::scf::SCFDialect"];
}

def XfmrGpuDeviceBuffers : Pass<"xfmr-gpu-device-buffers", "::mlir::func::FuncOp"> {
  let summary = "Move managed buffers that no host code touches to device memory";
  let description = [{
    Runs after `gpu-async-region`, on the stream-ordered `gpu.alloc async
    host_shared` buffers (CUDA managed memory) of `xfmr-gpu-managed-buffers`.
    A buffer whose every use, through views, is a kernel launch, a
    `gpu.memcpy`, `gpu.memset` or `gpu.dealloc`, or an op that reads only
    its shape becomes device memory, still allocated in stream order (from
    the driver's memory pool): kernels then never take page faults on it.
    Buffers that host code reads or writes stay managed; since managed
    memory cannot be allocated in stream order, the host waits for the GPU
    work before such an allocation and the work after it starts a new
    stream.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def XfmrGpuReductionsInnermost : Pass<"xfmr-gpu-reductions-innermost", "::mlir::func::FuncOp"> {
  let summary = "Move linalg ops' reduction loops inside their parallel loops";
  let description = [{
    Interchanges every linalg op that has a reduction loop outside a parallel
    one (a column sum: iterators `[reduction, parallel]`) into a
    `linalg.generic` whose parallel loops come first, then its reductions,
    each group in its original order. `convert-linalg-to-parallel-loops`
    then gives one `scf.parallel` with the reduction as an `scf.for` inside,
    one GPU kernel whose threads each reduce, instead of a host loop that
    launches a kernel per reduced row. Each output still sums its inputs in
    the same order.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def XfmrGpuHoistParallelLoops : Pass<"xfmr-gpu-hoist-parallel-loops", "::mlir::func::FuncOp"> {
  let summary = "Move an scf.parallel out of the scf.for around it where columns are owned";
  let description = [{
    An `scf.for` over rows whose body computes row views and ends in an
    `scf.parallel` over the row's elements (the embedding gradient adding
    each token's gradient row into its table row) would be a host loop
    launching one kernel per row. Where every access in the parallel body
    is a load or store at exactly its induction variables, of a buffer
    defined outside the row loop or of a row of one (a subview keeping whole
    trailing dimensions), iteration `i` only ever touches column `i` of each
    buffer, so the loops interchange: one `scf.parallel` around the row
    loop, each iteration visiting the rows in their original order. Row
    loops that carry values, read what the parallel body writes, or write a
    buffer through two views are left alone.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

def XfmrGpuMapParallelLoops : Pass<"xfmr-gpu-map-parallel-loops", "::mlir::func::FuncOp"> {
  let summary = "Tile outermost scf.parallel loops into GPU blocks and threads";
  let description = [{
    Tiles every outermost `scf.parallel` so that its innermost dimensions
    form a thread block of at most `block-size` threads (the innermost
    dimension on `threadIdx.x`, so neighbouring threads touch neighbouring
    addresses) and maps the tile loops to `blockIdx` x/y/z, innermost first.
    Tiles have constant bounds guarded by a bounds check, so
    `convert-parallel-loops-to-gpu` can size the launch. Dimensions beyond
    three, and block dimensions over the grid's y/z limit, stay sequential
    loops inside the kernel.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block (a power of two)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect"];
}

def XfmrGpuMergeKernelModules : Pass<"xfmr-gpu-merge-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "Gather the outlined kernels into one gpu.module";
  let description = [{
    `gpu-kernel-outlining` gives each kernel its own `gpu.module`, which
    would become one PTX image (and one module load at start-up) per kernel.
    This pass moves every `gpu.func` into a single `gpu.module` named
    `module-name`, renaming kernels whose names clash, and updates the
    `gpu.launch_func` references. A kernel's dynamic shared memory (a
    private zero-length `memref.global` in workgroup memory, no initial value)
    becomes a public declaration there: LLVM then sees an external array, as
    CUDA's `extern __shared__`, whose accesses beyond its zero length are
    defined.
  }];
  let options = [
    Option<"moduleName", "module-name", "std::string", /*default=*/"\"xfmr_kernels\"",
           "Name of the merged gpu.module">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def XfmrGpuKernelMath : Pass<"xfmr-gpu-kernel-math", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Self-contained math in GPU kernels: polynomials and PTX sqrt";
  let description = [{
    Rewrites the math ops of kernels so that the PTX needs no libdevice (the
    CUDA toolkit's bitcode library) and PTX emission works with LLVM alone:
    `math.powf` and friends are expanded, `exp`, `log`, `tanh`, `erf`,
    `sin`, `cos` and the like become MLIR's polynomial approximations (a few
    ulp, as on the CPU), and `math.sqrt` / `math.rsqrt` on f32 become PTX's
    correctly rounded `sqrt.rn.f32` (and a division). Fails, naming the op,
    if a math op is left that would need libdevice.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::math::MathDialect", "::mlir::vector::VectorDialect"];
}

#endif // XFMR_CONVERSION_PASSES_TD
