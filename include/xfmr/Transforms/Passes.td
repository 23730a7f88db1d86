//===- Passes.td - xfmr transform passes -------------------*- tablegen -*-===//
//
// The catalogue of passes that rewrite xfmr IR. Each pass lives in one file
// of lib/Transforms and has one lit test in test/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_TRANSFORMS_PASSES_TD
#define XFMR_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def XfmrDecompose : Pass<"xfmr-decompose"> {
  let summary = "Rewrite high-level xfmr ops into xfmr primitives";
  let description = [{
    Expands `multi_head_attention` (projections, head split, scaled scores,
    masks, softmax, value product, head merge, output projection) and
    `linear` (matmul and bias add) into the primitive form an importer or
    tutorial code produces. The fusion passes run next and form the fused
    kernels again from this form, so they are exercised on every model, and
    with a fusion switched off the primitive graph is what gets lowered.
    `softmax` and `layer_norm` are kept: each is already one kernel. Other ops
    are left alone.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def XfmrFuseSoftmax : Pass<"xfmr-fuse-softmax"> {
  let summary = "Form xfmr.softmax from max / sub / exp / sum / div chains";
  let description = [{
    Rewrites `div(exp(sub(x, reduce_max(x, a))), reduce_sum(exp(..), a))` --
    softmax as tutorial code writes it -- and the form without the max
    subtraction into one `xfmr.softmax` along `a`, which lowers to a single
    numerically safe kernel. Does nothing when an intermediate value of the
    chain has another use, or when the reductions disagree on the axis.
  }];
}

def XfmrFuseAttention : Pass<"xfmr-fuse-attention"> {
  let summary = "Form xfmr.fused_attention from scaled dot-product attention";
  let description = [{
    Finds `matmul(softmax(mask(scale * matmul(q, k^T))), v)` with rank-4
    operands, where softmax is `xfmr.softmax` or its primitive chain along
    the last axis, the scale a positive constant multiplying (or dividing)
    the scores or the queries, and the masks any of: `select` with a
    `causal_mask`, with a [batch, 1, 1, seq_k] padding mask (either
    polarity), with any other boolean mask (which becomes an additive bias),
    or an `add` of a float bias; masked entries must be -inf or at most
    -1e30. When q, k and v are all `transpose(x, [0, 2, 1, 3])` of
    [batch, seq, heads, head_dim] tensors the fused op takes x directly
    (`bshd` layout) and absorbs the output's transpose back, so the head
    split and merge cost nothing. Does nothing when an intermediate value is
    used elsewhere or the softmax is not over the keys. A fused attention's
    `attn_bias` made by `relative_position_bias` becomes that op's band form,
    taken as `position_bias`: the kernels read it per diagonal.
  }];
}

def XfmrFuseLayerNorm : Pass<"xfmr-fuse-layer-norm"> {
  let summary = "Form layer norms from primitive chains and fuse residual adds into them";
  let description = [{
    Rewrites `(x - mean(x)) * rsqrt(mean((x - mean(x))^2) + eps)` (or a
    division by `sqrt`), optionally followed by `* gamma + beta` with [d]
    vectors, over the last axis into `xfmr.layer_norm`; and
    `layer_norm(a + b)` with same-shaped `a` and `b` into
    `xfmr.fused_add_layer_norm`, whose first result replaces the sum
    wherever else it is used (the residual stream of pre-LN blocks). Does
    nothing for reductions over other axes, broadcasting adds, or chains
    whose intermediates have other uses.
  }];
}

def XfmrQuantizeWeights : Pass<"xfmr-quantize-weights", "::mlir::ModuleOp"> {
  let summary = "Store the weights of products as decoding reads them: int8, bf16, or transposed";
  let description = [{
    Every f32 rank-2 `xfmr.param` argument used as the weight of a product
    (`linear`, the right side of `matmul`, the projections of
    `multi_head_attention`) is given to those uses as `xfmr.dequantize` of
    two new arguments: its int8 values and their scales (f32, or bf16 or
    f16 with `scale-type`), one per `group-size` values along the weight's input
    side (0: one per output channel). `per-weight` entries give single
    weights another storage (a GGUF file's tensors keep their own). With
    `type=int4` the values are
    4-bit, two a byte in xfmr.dequantize's block order, in groups of
    `group-size` (a multiple of 32); with `mins` each group also has a
    minimum (w = q * scale + min) instead of being symmetric. With a float
    `type` (bf16, f16, f32)
    it is one new argument of that type instead, widened by `arith.extf`
    where it is narrower; a weight of that type already changes only where
    it is stored [in, out]. The new arguments keep the weight's `xfmr.param`
    name and say what they are in `xfmr.quantized` ({part = "values" |
    "scales", axis, group_size, transposed?} or {part = <type>,
    transposed?}), so that the runtime quantizes, rounds or transposes the
    checkpoint's tensor into them as it loads it. A weight stored [in, out]
    is kept transposed, [out, in] (`transposed`; int8 groups along axis 1),
    and reaches its uses through `xfmr.transpose` (widened after it): every
    output's values are then contiguous, as skinny products and integer dot
    products read them. Other uses (an embedding whose table is also the
    tied output projection) keep the original argument; an argument left
    without uses goes. With `embeddings`, the tables of `xfmr.embedding` are
    narrowed too, with groups along a row (the tied output projection's
    input side, so that both read one int8 copy). Fails, naming the weight,
    where the group size does not divide the input side.
  }];
  let options = [
    Option<"weightType", "type", "std::string", /*default=*/"\"int8\"",
           "int8 or int4 (values and scales), bf16, f16 or f32">,
    Option<"groupSize", "group-size", "int64_t", /*default=*/"0",
           "int8: values per scale along the input side (0: one scale per output channel)">,
    Option<"embeddings", "embeddings", "bool", /*default=*/"false",
           "Narrow the tables of xfmr.embedding too">,
    Option<"scaleType", "scale-type", "std::string", /*default=*/"\"f32\"",
           "int8 and int4: the scales' type, f32, bf16 or f16 (rounded before the values are)">,
    Option<"mins", "mins", "bool", /*default=*/"false",
           "int4: a minimum per group (q * scale + min) rather than symmetric groups">,
    ListOption<"perWeight", "per-weight", "std::string",
               "Weights stored otherwise than `type` says: "
               "name=int8|int4:<group>[:mins][:<scale type>] (scale-type's by default) or "
               "name=<float type>">
  ];
}

def XfmrOutlineLayers : Pass<"xfmr-outline-layers", "::mlir::ModuleOp"> {
  let summary = "Compile each distinct layer body once: xfmr.layer to calls";
  let description = [{
    Replaces every `xfmr.layer` with a `func.call` of a private function
    taking the values the layer reads from above and returning what it
    yields. Layers whose functions have the same type and equivalent bodies
    call one function, named after the first of them
    (`@<function>_<layer name>`, dots as underscores: `@decode_h_0`), so code size and compile time follow the
    number of distinct layers, not the depth. Constants, and values computed
    from weights (`xfmr.param` arguments) alone, are recomputed inside the
    body from the weights, so that the kernels still see a weight's
    dequantization or transpose beside the product reading it. A result is
    written into a destination the caller passes (`tensor.empty`), except
    an updated cache (`xfmr.cache_update` of an argument), which is the
    argument itself, updated in place.
  }];
  let options = [
    Option<"copies", "copies", "bool", /*default=*/"false",
           "Inline each layer where it stands instead: a copy of its code per layer">
  ];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::tensor::TensorDialect"];
}

def XfmrFuseEpilogues : Pass<"xfmr-fuse-epilogues"> {
  let summary = "Fuse bias, activation, residual add and gating into the products";
  let description = [{
    Rewrites `matmul(x, w)` with a 2-D weight followed by any prefix of
    `add([out] bias)`, `gelu`/`relu`, `add(residual)` into one
    `xfmr.fused_linear`, whose lowering applies them to each output tile
    while it is in registers. Does nothing when the matmul's result (or an
    intermediate of the epilogue) has another use, for batched matmuls, or
    when there is no epilogue to fuse. Then a gated MLP,
    `mul(activation(x Wg + bg), x Wu + bu)` with both products of one input
    (SwiGLU, GeGLU), becomes one `xfmr.gated_linear`.
  }];
}

def XfmrAutodiff : Pass<"xfmr-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of a loss function";
  let description = [{
    Adds `<function>_grad` beside the function `function`, whose first
    result must be a rank-0 float loss (further results are passed through).
    The new function takes the same arguments and returns the loss, the
    pass-through results, then the gradient of every `xfmr.param` argument
    (and of the float `xfmr.input`s named in `wrt-inputs`, `*` meaning all of
    them), in argument order;
    results are named `xfmr.output = "loss"` and `"grad:<name>"`. With
    `loss-scale` it takes one more argument, the loss scale, and returns the
    gradients of the loss times it: the backward starts from the scale
    instead of 1, so that it runs on scaled values (f16 training).

    The forward part is kept; the backward part is built by walking the ops
    in reverse and asking each op (DifferentiableOpInterface) for its
    operands' gradients, adding up gradients of values used several times.
    `multi_head_attention` is first decomposed; `fused_attention` gets its
    logsumexp result so that its backward recomputes probabilities instead
    of storing them. An `xfmr.layer`'s backward is an `xfmr.layer` of its
    own, `<name>.grad`, which yields the gradients of the active values the
    layer reads from above; the forward layer then also yields what its
    backward reads of its inside, so that identical layers stay identical
    forward and backward. Fails, naming the op, when a value that depends on
    a parameter reaches an op without an adjoint.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"loss\"",
           "Name of the function to differentiate">,
    ListOption<"wrtInputs", "wrt-inputs", "std::string",
               "Inputs (xfmr.input names, or * for all float inputs) to also differentiate">,
    Option<"lossScale", "loss-scale", "bool", /*default=*/"false",
           "Add a last argument, the rank-0 loss scale (xfmr.input = \"loss_scale\"), and "
           "return the gradients of the loss times it (the loss itself unscaled): "
           "dynamic loss scaling for f16 training">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect", "::mlir::func::FuncDialect"];
}

def XfmrTrainStep : Pass<"xfmr-train-step", "::mlir::ModuleOp"> {
  let summary = "A training step from a loss function and its gradient";
  let description = [{
    From `<function>_grad` (built by xfmr-autodiff) adds `@train_step`,
    which computes the loss and gradients, the step's learning rate
    (`xfmr.learning_rate`: linear warm-up, cosine decay), optionally the
    global gradient norm for clipping, and one optimizer update
    (`xfmr.adamw_update` or `xfmr.sgd_update`) per weight.

    Its arguments are those of the gradient function, then the optimizer
    state of every weight (`xfmr.state = "<weight>.exp_avg"`, ...:
    AdamW's two moments or SGD's momentum buffer, zero before the first
    step) and the 0-based `step` (an i64 input). It returns the loss, the
    loss function's other results, the learning rate (`"lr"`), and the new
    value of every weight and state, each marked `xfmr.updates = "<name>"`:
    callers may pass the weight's own buffer as that output, since every
    update reads only its own weight and state, after all gradients are
    computed.

    With `loss-scale`, the step scales its loss dynamically, as
    `torch.cuda.amp.GradScaler` does: the gradient function's `loss_scale`
    argument becomes `xfmr.loss_scale` of the state
    `"loss_scale.exponent"`, the updates unscale the gradients and skip the
    step when they overflowed (their global norm, always computed then, is
    not finite), and `xfmr.loss_scale_update` advances the state
    (`"loss_scale.exponent"`, `"loss_scale.good_steps"`, both f32 and 0 at
    the start). The step also returns the scale it used (`"loss_scale"`);
    its `"grad_norm"` is that of the unscaled gradients, not finite on a
    skipped step.

    With `data-parallel`, each process of a job computes the gradients of
    its share of the batch and the step takes an f32 input
    `"gradient_weight"` (before `step`): that share's part of the job's labelled positions
    (1 with one process). Every gradient becomes its `xfmr.all_reduce` with
    that weight, the gradient of the whole batch's mean loss, before the
    norm and the updates, so every process applies the same update.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"loss\"",
           "The loss function (its gradient is <function>_grad)">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "adamw or sgd">,
    Option<"learningRate", "lr", "double", /*default=*/"1.0e-3", "Peak learning rate">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Steps of linear warm-up">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "Step at which the cosine decay ends (0: no decay)">,
    Option<"minLrRatio", "min-lr-ratio", "double", /*default=*/"0.0",
           "Learning rate at the end of the decay, relative to the peak">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1.0e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "Decoupled (AdamW) or L2 (SGD) weight decay">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9", "SGD momentum">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"0.0",
           "Clip gradients to this global norm (0: no clipping)">,
    Option<"lossScale", "loss-scale", "double", /*default=*/"0.0",
           "Initial scale of dynamic loss scaling (0: none); the gradient function must "
           "take it (xfmr-autodiff{loss-scale})">,
    Option<"lossScaleGrowthInterval", "loss-scale-growth-interval", "int64_t",
           /*default=*/"2000", "Finite steps in a row after which the loss scale doubles">,
    Option<"dataParallel", "data-parallel", "bool", /*default=*/"false",
           "Combine the gradients of the processes of a data-parallel job (xfmr.all_reduce, "
           "weighted by the input \"gradient_weight\") before clipping and updating">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::func::FuncDialect"];
}

def XfmrOverlapAllReduce : Pass<"xfmr-overlap-all-reduce"> {
  let summary = "Reduce each gradient while the backward computes the earlier ones";
  let description = [{
    Splits each `xfmr.all_reduce` into an `xfmr.all_reduce_start` right
    after the last op of its block that its operands need (the gradient's
    producer and its other readers there) and an `xfmr.all_reduce_wait` in
    its place, so that in a data-parallel train step the reduction of the
    last layers' gradients overlaps the backward of the first layers. A
    reduction whose operand is computed right before it stays whole.
  }];
}

def XfmrComputeInF32 : Pass<"xfmr-compute-in-f32"> {
  let summary = "Compute bf16 and f16 xfmr ops in f32, keeping their results in bf16/f16";
  let description = [{
    Rewrites each xfmr op with bf16 or f16 tensors into the same op on f32
    tensors: the low-precision operands are extended (`arith.extf`) and the
    results rounded back (`arith.truncf`). Every product then accumulates
    and every softmax and layer-norm statistic is taken in f32, while the
    values between ops are stored as they are in PyTorch's bf16/f16 models,
    and the f32 kernels (CPU vector kernels, GPU kernels) apply unchanged.
    Ops that only move data (`reshape`, `transpose`, `select`) keep their
    types. Integer and i1 operands (token ids, masks) are left alone.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def XfmrCollapseLinalgDims : Pass<"xfmr-collapse-linalg-dims"> {
  let summary = "Merge loop dimensions of linalg.generic that are contiguous in every operand";
  let description = [{
    An elementwise op on a [32, 16, 32] tensor becomes one on [16384] (a
    tensor.collapse_shape of each operand, which bufferizes to a view, and
    an expand_shape of the result). Its loop nest is then one long loop
    that LLVM vectorizes, instead of a nest whose short innermost loop LLVM
    unrolls into scalar code. Adjacent dimensions merge when they have the
    same iterator type and are adjacent, in order, in every indexing map
    (so broadcasts and reductions keep the dimensions they need). Ops with
    a constant in an indexing map (broadcast through a unit dim) are left
    alone.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"];
}

def XfmrDistributeLinalg : Pass<"xfmr-distribute-linalg"> {
  let summary = "Run the linalg ops that have enough work on the CPU's threads";
  let description = [{
    The ops no kernel covers (elementwise chains, reductions such as a bias
    gradient's column sums, the layer-norm backward, the optimizer's
    update) lower to loops on one thread while the others wait. This pass
    tiles the outermost parallel loop of each linalg op on tensors with at
    least `min-points` iterations into an `scf.forall` of at most `tiles`
    tiles (upstream `scf::tileUsingSCF`), which the pipeline maps to OpenMP
    threads. Ops with dynamic shapes, with no parallel loop of two or more
    iterations, or already inside an `scf.forall` are left alone.
  }];
  let options = [
    Option<"minPoints", "min-points", "int64_t", /*default=*/"16384",
           "Fewest iterations an op needs to be distributed">,
    Option<"tiles", "tiles", "int64_t", /*default=*/"8",
           "Most tiles of the distributed loop">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect",
                           "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect"];
}

def XfmrMergeParallelRegions : Pass<"xfmr-merge-parallel-regions"> {
  let summary = "Run consecutive OpenMP parallel regions as one team";
  let description = [{
    scf-to-openmp gives every parallel loop an `omp.parallel` of its own, so
    a training step of a small model forks and joins the thread team about
    eighty times (each fork-join about twice a barrier's cost). This pass
    merges a run of `omp.parallel` ops of one block into one region: their
    worksharing loops follow each other, each one's implicit barrier
    ordering it before the next. Between two of them, ops free of memory
    effects are hoisted before the run, and the others (serial loops,
    stores, copies) with the pure ops on their results run in an
    `omp.single`, whose implicit barrier orders them likewise. A run ends
    where a value computed in such an omp.single would be used outside it,
    at an op holding OpenMP ops, at a call (but for calls of functions
    declared `xfmr.main_thread_only`, the runtime's gradient reductions,
    which run in an `omp.master` followed by an `omp.barrier`), and at a
    parallel region with clauses (threads, privates, reductions, ...) or
    whose body does not end in a worksharing loop that waits.
  }];
  let dependentDialects = ["::mlir::omp::OpenMPDialect"];
}

def XfmrPlanBuffers : Pass<"xfmr-plan-buffers", "::mlir::ModuleOp"> {
  let summary = "Give a function's temporary buffers places planned at compile time";
  let description = [{
    After bufferization and deallocation, every temporary is a
    `memref.alloc` freed by a `memref.dealloc`: hundreds of mallocs a call,
    many inside parallel loops. This pass removes them:

    - With `parallel-loop-scopes` (the bodies of scf.forall loops become
      allocation scopes downstream, as scf-to-openmp makes each OpenMP
      loop body), a temporary directly in such a body (static shape, at
      most `max-stack-bytes` per body, freed there) becomes a
      `memref.alloca`: each thread takes it from its stack and gives it back
      at the iteration's end.
    - The temporaries of a function's body (static shape, freed in the body,
      never returned, passed to a call or carried into a region as a
      memref) become `memref.view`s of one arena at offsets planned from
      their live ranges in the body (first fit, largest first): buffers
      whose ranges do not overlap share bytes. The arena is one allocation
      per call, or with `global-arena` a module global (no allocation at
      all; calls of one function must then not overlap, as in the
      executables xfmrc builds).

    Each function with an arena records its size in bytes as its
    `xfmr.arena_bytes` attribute, which the executables' manifests report
    as the memory their activations take.
  }];
  let options = [
    Option<"globalArena", "global-arena", "bool", /*default=*/"false",
           "Keep each function's arena in a module global instead of allocating it per call">,
    Option<"parallelLoopScopes", "parallel-loop-scopes", "bool", /*default=*/"false",
           "scf.forall bodies become allocation scopes downstream (OpenMP loops)">,
    Option<"maxStackBytes", "max-stack-bytes", "int64_t", /*default=*/"65536",
           "Most bytes of an scf.forall body's temporaries moved to the stack">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect"];
}

#endif // XFMR_TRANSFORMS_PASSES_TD
