//===- XfmrOps.td - xfmr operations -------------------------*- tablegen -*-===//

#ifndef XFMR_OPS_TD
#define XFMR_OPS_TD

include "XfmrDialect.td"
include "XfmrInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.td"

//===----------------------------------------------------------------------===//
// High-level ops
//===----------------------------------------------------------------------===//

def Xfmr_EmbeddingOp : Xfmr_Op<"embedding",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "token embedding lookup";
  let description = [{
    Gathers rows of `table` ([vocab, d_model]) by the integer token ids in
    `ids`; the result has the shape of `ids` with `d_model` appended. `scale`
    multiplies the gathered rows (the original transformer scales by
    sqrt(d_model)). Ids outside [0, vocab) are undefined behaviour here: the
    runtime rejects them before a kernel runs. Row `padding_idx`, if given,
    gets no gradient (torch.nn.Embedding's padding_idx).

    ```mlir
    %x = xfmr.embedding %ids, %wte : (tensor<2x8xi32>, tensor<100x64xf32>) -> tensor<2x8x64xf32>
    %y = xfmr.embedding %ids, %wte {padding_idx = 0 : i64} : (tensor<2x8xi32>, tensor<100x64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_IntTensor:$ids, Xfmr_FloatTensor:$table,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$padding_idx);
  let results = (outs Xfmr_FloatTensor:$result);
  let builders = [
    OpBuilder<(ins "::mlir::Value":$ids, "::mlir::Value":$table, "::mlir::FloatAttr":$scale), [{
      build($_builder, $_state, ids, table, scale, ::mlir::IntegerAttr());
    }]>];
  let assemblyFormat = "$ids `,` $table attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Xfmr_SinusoidalPositionEncodingOp : Xfmr_Op<"sinusoidal_position_encoding",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "adds the fixed sinusoidal position encoding";
  let description = [{
    Adds the encoding of "Attention Is All You Need" to `input`
    ([..., seq, d_model], d_model even), positions starting at 0. With
    angle(p, i) = p / 10000^(2i/d_model) for i < d_model/2, the `interleaved`
    layout (default) puts sin(angle(p, i)) in feature 2i and cos in 2i+1;
    `halves` (Marian's) puts the sines in features 0 .. d_model/2 - 1 and
    the cosines after them. With `positions` ([batch] i32, `input` [batch,
    seq, d_model]) sequence b starts at position positions[b].

    ```mlir
    %y = xfmr.sinusoidal_position_encoding %x : tensor<2x8x64xf32>
    %z = xfmr.sinusoidal_position_encoding %x {layout = #xfmr.sinusoid_layout<halves>} : tensor<2x8x64xf32>
    %c = xfmr.sinusoidal_position_encoding %x positions(%p : tensor<2xi32>) : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Optional<Xfmr_IntTensor>:$positions,
                   DefaultValuedAttr<Xfmr_SinusoidLayoutAttr,
                                     "SinusoidLayout::interleaved">:$layout);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`positions` `(` $positions^ `:` type($positions) `)`)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Xfmr_LearnedPositionEncodingOp : Xfmr_Op<"learned_position_encoding",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "adds learned position embeddings";
  let description = [{
    Adds rows `offset .. offset+seq-1` of `table` ([max_positions, d_model])
    to `input` ([..., seq, d_model]); `offset + seq` must not exceed
    `max_positions`. BART's tables start with two unused rows: offset 2.

    With `positions` ([batch] i32, `input` [batch, seq, d_model]) sequence b
    starts at position positions[b] (a chunk of a longer sequence being
    generated): it reads rows offset + positions[b] + t, clamped to the
    table.

    ```mlir
    %y = xfmr.learned_position_encoding %x, %wpe : tensor<2x8x64xf32>, tensor<1024x64xf32>
    %z = xfmr.learned_position_encoding %x, %wpe {offset = 2 : i64} : tensor<2x8x64xf32>, tensor<1026x64xf32>
    %c = xfmr.learned_position_encoding %x, %wpe positions(%p : tensor<2xi32>) : tensor<2x8x64xf32>, tensor<1024x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$table,
                   Optional<Xfmr_IntTensor>:$positions,
                   ConfinedAttr<DefaultValuedAttr<I64Attr, "0">, [IntNonNegative]>:$offset);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $table (`positions` `(` $positions^ `:` type($positions) `)`)? attr-dict `:`
    type($input) `,` type($table)
  }];
  let hasVerifier = 1;
}

def Xfmr_RotaryEmbeddingOp : Xfmr_Op<"rotary_embedding",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotates query or key heads by their positions (RoPE)";
  let description = [{
    Rotary position embedding as transformers applies it (`rotate_half`):
    `input` is [batch, seq, heads, head_dim]; with n = size(inv_freq), the
    first 2n features of each head are rotated (n < head_dim / 2 for
    `partial_rotary_factor` < 1; the rest pass through). Token t of sequence
    b stands at position p = t (+ positions[b] when `positions`, [batch]
    i32, is given: a chunk or decode step over a KV cache), and for i < n,
    with angle = p * inv_freq[i] (f32, as transformers computes it),
    c = attention_scaling * cos(angle) and s = attention_scaling * sin(angle):

        out[i]     = x[i] * c - x[i + n] * s
        out[i + n] = x[i + n] * c + x[i] * s

    `inv_freq` (the rope type's frequencies: default, linear, llama3, yarn,
    longrope ...) is fixed at compile time. With `transpose` the rotation
    is by -angle, the transpose of the forward one (its adjoint).

    ```mlir
    %r = xfmr.rotary_embedding %q {inv_freq = array<f64: 1.0, 0.1>} : tensor<2x8x4x4xf32>
    %c = xfmr.rotary_embedding %k positions(%p : tensor<2xi32>)
           {inv_freq = array<f64: 1.0, 0.1>, attention_scaling = 1.2 : f64} : tensor<2x1x4x8xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Optional<Xfmr_IntTensor>:$positions,
                   DenseF64ArrayAttr:$inv_freq,
                   DefaultValuedAttr<F64Attr, "1.0">:$attention_scaling,
                   UnitAttr:$transpose);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`positions` `(` $positions^ `:` type($positions) `)`)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Xfmr_LinearOp : Xfmr_Op<"linear",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "affine map over the last dimension";
  let description = [{
    `result = input @ weight (+ bias)` over the last dimension of `input`
    ([..., in]). `weight` is [in, out] (GPT-2's Conv1D layout) or, with
    `transpose_weight`, [out, in] (torch.nn.Linear's layout); `bias` is [out].

    ```mlir
    %y = xfmr.linear %x, %w, %b : (tensor<2x8x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<2x8x256xf32>
    %z = xfmr.linear %x, %w2 {transpose_weight} : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x32xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$weight,
                   Optional<Xfmr_FloatTensor>:$bias, UnitAttr:$transpose_weight);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Xfmr_MultiHeadAttentionOp : Xfmr_Op<"multi_head_attention",
    [Pure, AttrSizedOperandSegments,
     InferTypeOpAdaptor]> {
  let summary = "multi-head attention with input and output projections";
  let description = [{
    Multi-head scaled dot-product attention of `query` ([batch, seq_q,
    d_model]) over `key_value` ([batch, seq_k, d_kv]; absent for
    self-attention, where keys and values come from `query`).

    Input projections are either one fused QKV weight [d_model, 3*inner]
    (self-attention only) or three weights (Q, K, V: [d_model or d_kv,
    inner]), each with an optional bias, and the output projection is
    [inner, d_model]; with `transpose_weights` all weights are in [out, in]
    layout. The projected width `inner` (usually d_model) is read from the
    output weight; `num_heads` must divide it. The scores are scaled by
    `scale` (default 1/sqrt(inner/num_heads)).

    Masks combine: `causal` hides keys after the query position (aligned to
    the bottom right when seq_k > seq_q); `padding_mask` ([batch, seq_k], i1,
    true = attend) hides padded keys; `attn_bias` is added to the scores and
    must broadcast to [batch, num_heads, seq_q, seq_k] (an additive mask uses
    -inf or a large negative value). A query row whose keys are all masked
    yields zeros.

    With `return_probabilities` the op also returns the attention
    probabilities ([batch, num_heads, seq_q, seq_k], Hugging Face's
    `output_attentions`); such an attention is computed unfused, since the
    fused kernel never forms them.

    ```mlir
    %y = xfmr.multi_head_attention %x in_proj(%wqkv) in_bias(%bqkv)
           out_proj(%wo, %bo) padding_mask(%m) {num_heads = 4 : i64, causal}
           : (tensor<2x8x64xf32>, tensor<64x192xf32>, tensor<192xf32>,
              tensor<64x64xf32>, tensor<64xf32>, tensor<2x8xi1>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins
    Xfmr_FloatTensor:$query,
    Optional<Xfmr_FloatTensor>:$key_value,
    Variadic<Xfmr_FloatTensor>:$in_weights,
    Variadic<Xfmr_FloatTensor>:$in_biases,
    Xfmr_FloatTensor:$out_weight,
    Optional<Xfmr_FloatTensor>:$out_bias,
    Optional<Xfmr_BoolTensor>:$padding_mask,
    Optional<Xfmr_FloatTensor>:$attn_bias,
    ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
    UnitAttr:$causal,
    UnitAttr:$transpose_weights,
    OptionalAttr<F64Attr>:$scale,
    UnitAttr:$return_probabilities);
  let results = (outs Xfmr_FloatTensor:$result, Optional<Xfmr_FloatTensor>:$probabilities);
  let assemblyFormat = [{
    $query (`kv` `(` $key_value^ `)`)?
    `in_proj` `(` $in_weights `)` (`in_bias` `(` $in_biases^ `)`)?
    `out_proj` `(` $out_weight (`,` $out_bias^)? `)`
    (`padding_mask` `(` $padding_mask^ `)`)? (`attn_bias` `(` $attn_bias^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The width the heads split: num_heads * head_dim, the output
    /// projection's input side (d_model unless the projections narrow or
    /// widen it, as T5's d_kv may).
    int64_t getInnerDim();
    /// Head dimension inner / num_heads.
    int64_t getHeadDim();
    /// The scale applied to the scores, defaulted to 1/sqrt(head_dim).
    double getScaleOrDefault();
    bool hasFusedInProjection() { return getInWeights().size() == 1; }
  }];
}

def Xfmr_SoftmaxOp : Xfmr_Op<"softmax", [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "softmax along one axis, lowered as one fused kernel";
  let description = [{
    `exp(x - max(x)) / sum(exp(x - max(x)))` along `axis` (negative counts
    from the end). The lowering reads each row once for an online max+sum and
    once to write the output, so it is safe at logits of +/-1e4; this is the
    op `xfmr-fuse-softmax` forms from max/sub/exp/sum/div chains.

    ```mlir
    %p = xfmr.softmax %s {axis = -1 : i64} : tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The axis as a non-negative dimension index.
    int64_t getNormalizedAxis();
  }];
}

def Xfmr_LayerNormOp : Xfmr_Op<"layer_norm", [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AttrSizedOperandSegments]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * gamma + beta` over the last dimension
    (biased variance, as torch.nn.LayerNorm). `gamma` and `beta` ([d]) are
    both present (affine) or both absent. One kernel: the lowering reads the
    row once for mean and variance and writes it once.

    ```mlir
    %y = xfmr.layer_norm %x, %g, %b {epsilon = 1.0e-05 : f64}
           : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Optional<Xfmr_FloatTensor>:$gamma,
                   Optional<Xfmr_FloatTensor>:$beta,
                   DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`,` $gamma^)? (`,` $beta^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Xfmr_GeluOp : Xfmr_Op<"gelu", [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>,
    DeclareOpInterfaceMethods<Xfmr_ActivationOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `x * 0.5 * (1 + erf(x / sqrt(2)))`, or with `approximate = tanh`
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` (GPT-2's
    "gelu_new").

    ```mlir
    %y = xfmr.gelu %x {approximate = #xfmr.gelu_approximation<tanh>} : tensor<2x8x256xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input,
                   DefaultValuedAttr<Xfmr_GeluApproximationAttr,
                                     "GeluApproximation::none">:$approximate);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

/// An activation without options: `activation` names its `Activation` case.
class Xfmr_SimpleActivationOp<string mnemonic, string activation, string what,
                              string formula>
    : Xfmr_Op<mnemonic, [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>,
                         Xfmr_ActivationOpInterface, Pure, SameOperandsAndResultType]> {
  let summary = what;
  let description = formula # [{

    ```mlir
    %y = xfmr.}] # mnemonic # [{ %x : tensor<2x8x256xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let extraClassDeclaration = [{
    ::xfmr::Activation getActivation() { return ::xfmr::Activation::}] # activation # [{; }
  }];
}

def Xfmr_ReluOp : Xfmr_SimpleActivationOp<"relu", "relu", "rectified linear unit",
                                          "`max(x, 0)`.">;
def Xfmr_SiluOp : Xfmr_SimpleActivationOp<"silu", "silu", "sigmoid linear unit (swish)",
                                          "`x * sigmoid(x)` (Hugging Face's \"silu\" and \"swish\").">;
def Xfmr_TanhOp : Xfmr_SimpleActivationOp<"tanh", "tanh", "hyperbolic tangent",
                                          "`tanh(x)` (BERT's pooler).">;

def Xfmr_DropoutOp : Xfmr_Op<"dropout", [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "dropout: the identity at inference, a seeded random mask in training";
  let description = [{
    Without `seed` (inference) this is the identity. With a rank-0 i64
    `seed` (training) each element is kept with probability 1 - `rate` and
    scaled by 1/(1 - rate); whether element i is kept is a counter-based
    hash of (seed, i), so the same seed gives the same mask -- which is how
    the backward pass, `dropout(grad)` with the same seed, drops the same
    elements without storing a mask.

    ```mlir
    %y = xfmr.dropout %x {rate = 1.000000e-01 : f64} : tensor<2x8x64xf32>
    %z = xfmr.dropout %x seed(%s : tensor<i64>) {rate = 1.000000e-01 : f64} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Optional<StaticShapeTensorOf<[I64]>>:$seed,
                   DefaultValuedAttr<F64Attr, "0.0">:$rate);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`seed` `(` $seed^ `:` type($seed) `)`)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Xfmr_CrossEntropyOp : Xfmr_Op<"cross_entropy",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "mean cross-entropy of logits against integer targets";
  let description = [{
    `mean over targets != ignore_index of (logsumexp(logits[t]) -
    logits[t, target[t]])` with `logits` [..., vocab] and `targets` [...]
    (the semantics of torch.nn.functional.cross_entropy with
    `ignore_index`). The result is a rank-0 tensor; it is 0 when every target
    is ignored.

    ```mlir
    %l = xfmr.cross_entropy %logits, %t : (tensor<2x8x100xf32>, tensor<2x8xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$logits, Xfmr_IntTensor:$targets,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Primitive ops
//===----------------------------------------------------------------------===//

class Xfmr_BroadcastBinaryOp<string mnemonic, string what>
    : Xfmr_Op<mnemonic, [Pure, InferTypeOpAdaptor,
                         DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>]> {
  let summary = "elementwise " # what # " with numpy broadcasting";
  let description = [{
    Elementwise }] # what # [{ of two tensors of one element type whose
    shapes broadcast numpy-style (aligned at the right; a dimension of size 1
    or a missing dimension stretches).

    ```mlir
    %r = xfmr.}] # mnemonic # [{ %a, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$lhs, Xfmr_FloatTensor:$rhs);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &results) {
      return inferBroadcastBinaryType(loc, adaptor.getLhs(), adaptor.getRhs(), results);
    }
  }];
}

def Xfmr_AddOp : Xfmr_BroadcastBinaryOp<"add", "addition">;
def Xfmr_SubOp : Xfmr_BroadcastBinaryOp<"sub", "subtraction">;
def Xfmr_MulOp : Xfmr_BroadcastBinaryOp<"mul", "multiplication">;
def Xfmr_DivOp : Xfmr_BroadcastBinaryOp<"div", "division">;
def Xfmr_MaximumOp : Xfmr_BroadcastBinaryOp<"maximum", "maximum">;

def Xfmr_SelectOp : Xfmr_Op<"select",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise choice with numpy broadcasting";
  let description = [{
    `condition ? true_value : false_value` elementwise, all three operands
    broadcast together; how tutorial code writes `masked_fill`.

    ```mlir
    %r = xfmr.select %mask, %scores, %ninf
           : (tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Xfmr_BoolTensor:$condition, Xfmr_FloatTensor:$true_value,
                   Xfmr_FloatTensor:$false_value);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:` functional-type(operands, results)
  }];
}

def Xfmr_MatmulOp : Xfmr_Op<"matmul",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "batched matrix product";
  let description = [{
    `lhs` [..., M, K] (or [..., K, M] with `transpose_lhs`) times `rhs`
    [..., K, N] (or [..., N, K] with `transpose_rhs`). Batch dimensions
    broadcast numpy-style, so a rank-2 `rhs` applies to every batch of
    `lhs`.

    ```mlir
    %s = xfmr.matmul %q, %k {transpose_rhs} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$lhs, Xfmr_FloatTensor:$rhs, UnitAttr:$transpose_rhs,
                   UnitAttr:$transpose_lhs);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

def Xfmr_TransposeOp : Xfmr_Op<"transpose",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "permutes dimensions";
  let description = [{
    `result.shape[i] = input.shape[permutation[i]]`.

    ```mlir
    %t = xfmr.transpose %x {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Xfmr_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Xfmr_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Xfmr_ReshapeOp : Xfmr_Op<"reshape", [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure]> {
  let summary = "reinterprets the shape, keeping row-major element order";
  let description = [{
    ```mlir
    %h = xfmr.reshape %x : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
    ```
  }];
  let arguments = (ins Xfmr_AnyTensor:$input);
  let results = (outs Xfmr_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Xfmr_ReduceOp : Xfmr_Op<"reduce",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "reduces one axis, keeping it with size 1";
  let description = [{
    Sum, max or mean along `axis` (negative counts from the end); the reduced
    dimension stays with size 1 (keepdim) so the result broadcasts against
    the input.

    ```mlir
    %m = xfmr.reduce %x {kind = #xfmr.reduce_kind<max>, axis = -1 : i64} : (tensor<2x8xf32>) -> tensor<2x1xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_ReduceKindAttr:$kind,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    int64_t getNormalizedAxis();
  }];
}

def Xfmr_CausalMaskOp : Xfmr_Op<"causal_mask", [Pure]> {
  let summary = "lower-triangular attention mask";
  let description = [{
    A [seq_q, seq_k] i1 tensor, true where key `j` may be attended from query
    `i`: `j <= i + (seq_k - seq_q)` (bottom-right aligned, so a query block
    appended to a KV cache sees all earlier keys).

    ```mlir
    %m = xfmr.causal_mask : tensor<8x8xi1>
    ```
  }];
  let results = (outs Xfmr_BoolTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Xfmr_CacheUpdateOp : Xfmr_Op<"cache_update",
    [Pure, AllTypesMatch<["cache", "result"]>]> {
  let summary = "writes new rows into a key/value cache";
  let description = [{
    `cache` ([batch, capacity, ...]) with row positions[b] + t of sequence b
    replaced by `values`[b, t] ([batch, chunk, ...]) for each t that `mask`
    ([batch, chunk] i1, default all) keeps; `positions` is [batch] i32. Rows
    past the capacity are dropped, and a masked row leaves the cache as it
    was: a chunk's padding never overwrites what another call wrote. The
    lowering writes the chunk's rows in place, so a cache that is a
    function's argument and result is updated without a copy.

    ```mlir
    %c2 = xfmr.cache_update %c, %k, %p
            : (tensor<1x1024x12x64xf32>, tensor<1x1x12x64xf32>, tensor<1xi32>) -> tensor<1x1024x12x64xf32>
    %c3 = xfmr.cache_update %c, %k, %p mask(%m)
            : (tensor<2x1024x12x64xf32>, tensor<2x64x12x64xf32>, tensor<2xi32>, tensor<2x64xi1>)
            -> tensor<2x1024x12x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$cache, Xfmr_FloatTensor:$values,
                   Xfmr_IntTensor:$positions, Optional<Xfmr_BoolTensor>:$mask);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $cache `,` $values `,` $positions (`mask` `(` $mask^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Xfmr_LayerOp : Xfmr_Op<"layer",
    [RecursiveMemoryEffects, SingleBlock, NoRegionArguments]> {
  let summary = "one layer of a stack, compiled once per distinct body";
  let description = [{
    The ops of one layer of a model (a decoder block, an encoder block),
    run once where the op stands; `name` says which (`h.3`, `encoder.0`).
    The body reads values from above (the layer's weights, the hidden
    state, masks, positions, caches) and yields its results. It marks the
    unit of code reuse: `xfmr-outline-layers` turns each layer into a call
    of a private function, one function per distinct body, so a stack of
    identical layers is compiled once however deep it is.

    ```mlir
    %h, %cache = xfmr.layer "h.0" -> (tensor<1x8x64xf32>, tensor<1x64x4x16xf32>) {
      ...
      xfmr.yield %y, %c : tensor<1x8x64xf32>, tensor<1x64x4x16xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$name (`->` `(` type($results)^ `)`)? attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Moves the body's ops in front of the op, which it replaces.
    void inlineBody();
  }];
}

def Xfmr_YieldOp : Xfmr_Op<"yield", [Pure, Terminator, HasParent<"LayerOp">]> {
  let summary = "the results of an xfmr.layer";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, mlir::ValueRange()); }]>];
}

def Xfmr_PoolOp : Xfmr_Op<"pool", [Pure, InferTypeOpAdaptor]> {
  let summary = "pools the token vectors of each sequence into one";
  let description = [{
    Reduces `input` ([batch, seq, d]) over its tokens to [batch, d], counting
    only the tokens `mask` ([batch, seq], i1, true = token) keeps: `cls`
    takes token 0, `last` the last kept token (token 0 if none: what a
    language model's next token comes from), `mean` the mean of the kept
    tokens, `max` their elementwise max, `mean_sqrt_len` their sum over the
    square root of their count (sentence-transformers' pooling modes; a
    sequence without tokens divides by 1e-9 and has a max of -inf).

    ```mlir
    %e = xfmr.pool %h, %m {mode = #xfmr.pool_mode<mean>}
           : (tensor<2x8x64xf32>, tensor<2x8xi1>) -> tensor<2x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_BoolTensor:$mask,
                   Xfmr_PoolModeAttr:$mode);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input `,` $mask attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Xfmr_L2NormalizeOp : Xfmr_Op<"l2_normalize", [Pure, SameOperandsAndResultType]> {
  let summary = "scales vectors to unit Euclidean length";
  let description = [{
    `x / max(||x||, epsilon)` along the last dimension
    (torch.nn.functional.normalize).

    ```mlir
    %y = xfmr.l2_normalize %x {epsilon = 1.0e-12 : f64} : tensor<2x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input,
                   DefaultValuedAttr<F64Attr, "1.0e-12">:$epsilon);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Xfmr_RmsNormOp : Xfmr_Op<"rms_norm",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "root-mean-square normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * gamma` over the last dimension, `gamma`
    ([d]) its scale: no mean is subtracted and there is no bias (T5's
    T5LayerNorm). The mean of squares is computed in f32 whatever the
    element type, as transformers does.

    ```mlir
    %y = xfmr.rms_norm %x, %g {epsilon = 1.0e-06 : f64}
           : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$gamma,
                   DefaultValuedAttr<F64Attr, "1.0e-6">:$epsilon);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Xfmr_DequantizeOp : Xfmr_Op<"dequantize", [Pure]> {
  let summary = "int8 or int4 weights with a scale per group, as floats";
  let description = [{
    `values` times the scale of each value's group: groups of `group_size`
    consecutive values along dimension `axis` (the weight's input side,
    which a product reduces over) share one entry of `scales`, whose shape
    is the result's with that dimension divided by `group_size` (f32, bf16
    or f16). A group as long as the dimension is one scale per output channel.
    Products whose weight this is read the narrow values and widen them in
    registers (the CPU kernels); no float copy of the weight exists.

    With `bits = 8` (the default) `values` is the result's shape of i8, each
    value q standing for q * scale, or with `mins` (the shape of `scales`)
    q * scale + min. With `bits = 4` two values share a byte:
    `values` is [rows, cols / 2] i8, groups lie along dimension 1 and hold
    whole blocks of 32 values, and byte j of block b (bytes 16 b .. 16 b +
    15 of a row) holds value 32 b + j in its low nibble and 32 b + j + 16 in
    its high one (ggml's Q4_0 order: a vector of 16 or fewer values is one
    load, shift and mask). A nibble q in [0, 15] stands for (q - 8) * scale,
    or with `mins` (the shape of `scales`) for q * scale + min.

    ```mlir
    %w = xfmr.dequantize %q, %s {axis = 0 : i64, group_size = 32 : i64}
           : (tensor<768x3072xi8>, tensor<24x3072xf32>) -> tensor<768x3072xf32>
    %v = xfmr.dequantize %p, %s, %m {axis = 1 : i64, group_size = 32 : i64, bits = 4 : i64}
           : (tensor<3072x384xi8>, tensor<3072x24xf32>, tensor<3072x24xf32>)
           -> tensor<3072x768xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[I8]>:$values, Xfmr_FloatTensor:$scales,
                   Optional<Xfmr_FloatTensor>:$mins,
                   ConfinedAttr<I64Attr, [IntMinValue<0>, IntMaxValue<1>]>:$axis,
                   ConfinedAttr<I64Attr, [IntPositive]>:$group_size,
                   DefaultValuedAttr<I64Attr, "8">:$bits);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $values `,` $scales (`,` $mins^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Xfmr_RelativePositionBiasOp : Xfmr_Op<"relative_position_bias", [Pure]> {
  let summary = "T5's bucketed relative-position attention bias";
  let description = [{
    The additive attention bias [batch, heads, seq_q, seq_k] of T5: entry
    (b, h, i, j) is `table`[bucket(j - p), h] ([num_buckets, heads]), where
    p = i + `query_offset`[b] is query i's position (without `query_offset`,
    [batch] i32 as `fused_attention`'s, p = i + seq_k - seq_q and batch is
    1). Buckets as transformers' `_relative_position_bucket`: with
    `bidirectional` half the buckets are for keys after the query; the first
    half of a direction's buckets are exact distances, the rest grow
    logarithmically up to `max_distance`, beyond which all share the last.
    The logarithmic buckets are computed at compile time in f32, exactly as
    transformers computes them.

    With `seq_q` the result is the band [1 | batch, heads, seq_q + seq_k -
    1] that `fused_attention` takes as `position_bias`: entry (b, h, t) is
    the bias of every query i and key j with j - i = t - (seq_q - 1), a
    diagonal of the [seq_q, seq_k] bias, which then never exists.

    ```mlir
    %b = xfmr.relative_position_bias %t {max_distance = 128 : i64, bidirectional}
           : (tensor<32x8xf32>) -> tensor<1x8x16x16xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$table, Optional<Xfmr_IntTensor>:$query_offset,
                   ConfinedAttr<I64Attr, [IntPositive]>:$max_distance,
                   UnitAttr:$bidirectional,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$seq_q);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $table (`query_offset` `(` $query_offset^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The bucket of each distance 0..max_distance in one direction
    /// (`bidirectional` halves the buckets), as transformers computes it.
    static llvm::SmallVector<int32_t> distanceBuckets(int64_t buckets, int64_t maxDistance);
    /// The queries and keys of the attention the bias is for.
    int64_t getNumQueries();
    int64_t getNumKeys();
  }];
}

//===----------------------------------------------------------------------===//
// Fused ops
//===----------------------------------------------------------------------===//

def Xfmr_FusedAttentionOp : Xfmr_Op<"fused_attention",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AttrSizedOperandSegments, AllTypesMatch<["query", "result"]>]> {
  let summary = "scaled dot-product attention as one tiled kernel";
  let description = [{
    `softmax(scale * query @ key^T + mask) @ value` per batch and head,
    computed FlashAttention-style: key/value blocks stream through an online
    softmax (running max, running sum, rescaled accumulator), causal blocks
    above the diagonal are skipped, and no [seq_q, seq_k] buffer exists.
    Operands are rank 4 in `layout` (`bshd` = [batch, seq, heads, head_dim],
    `bhsd` = [batch, heads, seq, head_dim]). Masks as in
    `multi_head_attention`; `attn_bias` broadcasts to [batch, heads, seq_q,
    seq_k]. Fully masked query rows produce zeros. The optional second result
    is the per-row log-sum-exp of the masked, scaled scores ([batch, heads,
    seq_q], -inf for fully masked rows), which the backward pass uses to
    recompute probabilities. It is f32 whatever the element type: a bf16
    log-sum-exp of 8 would be off by up to 1/32, each recomputed probability
    by 3%.

    Over a KV cache the key range is known only at run time: with
    `query_offset` ([batch] i32) query i of sequence b stands at position
    query_offset[b] + i, so that `causal` lets it see keys j <= that position
    (without it, query_offset is seq_k - seq_q: bottom-right aligned); with
    `key_length` ([batch] i32) keys j >= key_length[b] are masked and never
    read. The kernels clamp both to [0, seq_k].

    Grouped-query (and multi-query) attention: `key` and `value` may have
    fewer heads than `query`, a divisor of its count; query head h then reads
    key/value head h / (query heads / key heads) in place, never a repeated
    copy.

    With `window` (causal only) query i sees only the `window` keys up to its
    own position, j > position - window (sliding-window attention); the
    kernels read no key tile wholly outside it. With `softcap` the scaled
    scores are soft-capped, softcap * tanh(score / softcap), before the
    masks and biases are applied (Gemma 2).

    A bias that depends only on the distance between key and query (T5's
    relative positions) is `position_bias` ([1 | batch, heads, seq_q + seq_k
    - 1]): query i and key j add position_bias[b, h, j - i + seq_q - 1]. The
    kernels read it along each score row's diagonals, so no [seq_q, seq_k]
    bias exists either; it excludes `attn_bias`.

    ```mlir
    %o = xfmr.fused_attention %q, %k, %v padding_mask(%m)
           {causal, scale = 2.500000e-01 : f64, layout = #xfmr.layout<bshd>}
           : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8xi1>)
           -> tensor<2x8x4x16xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$query, Xfmr_FloatTensor:$key,
                   Xfmr_FloatTensor:$value,
                   Optional<Xfmr_BoolTensor>:$padding_mask,
                   Optional<Xfmr_FloatTensor>:$attn_bias,
                   Optional<Xfmr_FloatTensor>:$position_bias,
                   Optional<Xfmr_IntTensor>:$query_offset,
                   Optional<Xfmr_IntTensor>:$key_length,
                   F64Attr:$scale, UnitAttr:$causal,
                   DefaultValuedAttr<Xfmr_AttentionLayoutAttr,
                                     "AttentionLayout::bshd">:$layout,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$window,
                   OptionalAttr<F64Attr>:$softcap);
  let results = (outs Xfmr_FloatTensor:$result, Optional<F32Tensor>:$logsumexp);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`padding_mask` `(` $padding_mask^ `)`)?
    (`attn_bias` `(` $attn_bias^ `)`)? (`position_bias` `(` $position_bias^ `)`)?
    (`query_offset` `(` $query_offset^ `)`)?
    (`key_length` `(` $key_length^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Positions of the batch, heads, sequence and head-dim dimensions.
    AttentionDims getDims();
    /// Query heads that share one key/value head (1 without grouping).
    int64_t getQueryHeadsPerKeyHead();
  }];
}

def Xfmr_FusedAddLayerNormOp : Xfmr_Op<"fused_add_layer_norm",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AttrSizedOperandSegments]> {
  let summary = "residual add followed by layer normalization, one kernel";
  let description = [{
    `sum = input + residual; result = layer_norm(sum)` over the last
    dimension. Both are returned because pre-LN blocks carry `sum` on as the
    residual stream. One read of each input row, one write of each output.

    ```mlir
    %sum, %y = xfmr.fused_add_layer_norm %x, %r, %g, %b {epsilon = 1.0e-05 : f64}
                 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>)
                 -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>)
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$residual,
                   Optional<Xfmr_FloatTensor>:$gamma, Optional<Xfmr_FloatTensor>:$beta,
                   DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Xfmr_FloatTensor:$sum, Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $residual (`,` $gamma^)? (`,` $beta^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Xfmr_FusedLinearOp : Xfmr_Op<"fused_linear",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AttrSizedOperandSegments,
     InferTypeOpAdaptor]> {
  let summary = "matmul with bias, activation and residual fused into its store";
  let description = [{
    `result = activation(input @ weight + bias) + residual`, the epilogue
    applied to each output tile while it is still in registers. Weight layout
    as in `linear`; `bias` [out] and `residual` (the result's shape) are
    optional.

    ```mlir
    %y = xfmr.fused_linear %x, %w bias(%b) {activation = #xfmr.activation<gelu_tanh>}
           : (tensor<2x8x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<2x8x256xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$weight,
                   Optional<Xfmr_FloatTensor>:$bias, Optional<Xfmr_FloatTensor>:$residual,
                   DefaultValuedAttr<Xfmr_ActivationAttr, "Activation::none">:$activation,
                   UnitAttr:$transpose_weight);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `)`)? (`residual` `(` $residual^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Xfmr_GatedLinearOp : Xfmr_Op<"gated_linear",
    [DeclareOpInterfaceMethods<Xfmr_DifferentiableOpInterface>, Pure, AttrSizedOperandSegments,
     InferTypeOpAdaptor]> {
  let summary = "gated MLP product: activation(x @ gate + b) * (x @ up + c)";
  let description = [{
    `result = activation(input @ gate + gate_bias) * (input @ up + up_bias)`,
    the gated MLPs of SwiGLU (silu) and GeGLU (gelu_tanh). The CPU kernels
    apply the activation in the gate product's epilogue and multiply each
    output of up's by its gate in up's, with no elementwise pass between.
    `gate` and `up` have one type and the layout of `linear`'s weight; the
    biases [out] are optional.

    ```mlir
    %h = xfmr.gated_linear %x, %wg, %wu {activation = #xfmr.activation<silu>, transpose_weight}
           : (tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<256x64xf32>) -> tensor<2x8x256xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$gate, Xfmr_FloatTensor:$up,
                   Optional<Xfmr_FloatTensor>:$gate_bias, Optional<Xfmr_FloatTensor>:$up_bias,
                   DefaultValuedAttr<Xfmr_ActivationAttr, "Activation::none">:$activation,
                   UnitAttr:$transpose_weight);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gate `,` $up (`gate_bias` `(` $gate_bias^ `)`)? (`up_bias` `(` $up_bias^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Backward ops (what adjoints are built from)
//===----------------------------------------------------------------------===//

def Xfmr_SoftmaxBackwardOp : Xfmr_Op<"softmax_backward",
    [Pure, AllTypesMatch<["output", "grad", "result"]>]> {
  let summary = "gradient of softmax from its output";
  let description = [{
    `output * (grad - sum(grad * output, axis))`, the input gradient of
    `softmax(x, axis)` given its output and the output gradient. One row
    kernel, like softmax.

    ```mlir
    %dx = xfmr.softmax_backward %y, %dy {axis = -1 : i64} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$output, Xfmr_FloatTensor:$grad,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($output)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNormalizedAxis();
  }];
}

def Xfmr_LayerNormBackwardOp : Xfmr_Op<"layer_norm_backward", [Pure]> {
  let summary = "gradients of layer norm over the last dimension";
  let description = [{
    From the forward input, gamma (absent for a non-affine norm) and the
    output gradient, recomputes each row's mean and 1/std and returns the
    input gradient and the [d] gradients of gamma and beta (zero for a
    non-affine norm). One row kernel for the input gradient.

    ```mlir
    %dx, %dg, %db = xfmr.layer_norm_backward %x, %dy gamma(%g) {epsilon = 1.0e-05 : f64}
        : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$grad,
                   Optional<Xfmr_FloatTensor>:$gamma,
                   DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Xfmr_FloatTensor:$grad_input, Xfmr_FloatTensor:$grad_gamma,
                      Xfmr_FloatTensor:$grad_beta);
  let assemblyFormat = [{
    $input `,` $grad (`gamma` `(` $gamma^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Xfmr_ActivationBackwardOp : Xfmr_Op<"activation_backward",
    [Pure, AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "gradient of an activation at its input";
  let description = [{
    `grad * activation'(input)` elementwise, for every `Activation`.

    ```mlir
    %dz = xfmr.activation_backward %z, %dy {activation = #xfmr.activation<gelu_tanh>} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_FloatTensor:$grad,
                   Xfmr_ActivationAttr:$activation);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($input)";
}

def Xfmr_EmbeddingBackwardOp : Xfmr_Op<"embedding_backward", [Pure]> {
  let summary = "gradient of an embedding table";
  let description = [{
    Scatter-adds `scale * grad[..., :]` into row `ids[...]` of a zero
    [vocab, d_model] table: the gradient of `embedding(ids, table)`. The
    result type gives the vocabulary size.

    ```mlir
    %dw = xfmr.embedding_backward %ids, %dy : (tensor<2x8xi32>, tensor<2x8x64xf32>) -> tensor<100x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_IntTensor:$ids, Xfmr_FloatTensor:$grad,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$ids `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Xfmr_CrossEntropyBackwardOp : Xfmr_Op<"cross_entropy_backward",
    [Pure, AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of cross_entropy at its logits";
  let description = [{
    `grad * (softmax(logits) - onehot(target)) / count` on rows whose target
    is not `ignore_index` (0 on the others), `count` being the number of
    such rows: the logits gradient of the mean cross-entropy scaled by the
    rank-0 `grad`.

    ```mlir
    %dl = xfmr.cross_entropy_backward %logits, %t, %g : (tensor<2x8x100xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x100xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$logits, Xfmr_IntTensor:$targets, Xfmr_FloatTensor:$grad,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Xfmr_FusedAttentionBackwardOp : Xfmr_Op<"fused_attention_backward",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "gradients of fused_attention, recomputing probabilities tile by tile";
  let description = [{
    FlashAttention-2's backward pass: from q, k, v, the forward output, its
    per-row log-sum-exp and the output gradient, returns the gradients of q,
    k and v. Probabilities are recomputed per (query block, key block) tile
    from the log-sum-exp, so no [seq_q, seq_k] buffer exists. Masks, scale,
    layout, window and soft cap as in `fused_attention`: under a soft cap c
    the score gradients are multiplied by the cap's slope, 1 - tanh^2(s / c)
    of the scaled score s.

    ```mlir
    %dq, %dk, %dv = xfmr.fused_attention_backward %q, %k, %v, %o, %lse, %do {causal, scale = 2.500000e-01 : f64}
        : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>,
           tensor<2x4x8xf32>, tensor<2x8x4x16xf32>)
        -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>)
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$query, Xfmr_FloatTensor:$key, Xfmr_FloatTensor:$value,
                   Xfmr_FloatTensor:$output, F32Tensor:$logsumexp,
                   Xfmr_FloatTensor:$grad_output,
                   Optional<Xfmr_BoolTensor>:$padding_mask,
                   Optional<Xfmr_FloatTensor>:$attn_bias,
                   F64Attr:$scale, UnitAttr:$causal,
                   DefaultValuedAttr<Xfmr_AttentionLayoutAttr,
                                     "AttentionLayout::bshd">:$layout,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$window,
                   OptionalAttr<F64Attr>:$softcap);
  let results = (outs Xfmr_FloatTensor:$grad_query, Xfmr_FloatTensor:$grad_key,
                      Xfmr_FloatTensor:$grad_value);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $logsumexp `,` $grad_output
    (`padding_mask` `(` $padding_mask^ `)`)? (`attn_bias` `(` $attn_bias^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    AttentionDims getDims();
  }];
}

//===----------------------------------------------------------------------===//
// Training: learning-rate schedule, gradient norm, optimizer updates
//===----------------------------------------------------------------------===//

def Xfmr_ScalarStep : 0DTensorOf<[I64]>;
def Xfmr_ScalarFloat : 0DTensorOf<[AnyFloat]>;

def Xfmr_LearningRateOp : Xfmr_Op<"learning_rate", [Pure]> {
  let summary = "learning rate of a step: linear warm-up, then cosine decay";
  let description = [{
    For 0-based `step`: `peak * (step + 1) / warmup_steps` during the
    `warmup_steps` first steps, then
    `peak * (min_ratio + (1 - min_ratio) * (1 + cos(pi * p)) / 2)` with
    `p = min(1, (step - warmup_steps) / (decay_steps - warmup_steps))`:
    a cosine from `peak` down to `min_ratio * peak` at step `decay_steps`,
    constant after. `decay_steps = 0` keeps `peak` after the warm-up.

    ```mlir
    %lr = xfmr.learning_rate %step {peak = 1.0e-03 : f64, warmup_steps = 100 : i64,
                                    decay_steps = 1000 : i64, min_ratio = 0.1 : f64}
        : tensor<i64> -> tensor<f32>
    ```
  }];
  let arguments = (ins Xfmr_ScalarStep:$step, F64Attr:$peak,
                   DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
                   DefaultValuedAttr<I64Attr, "0">:$decay_steps,
                   DefaultValuedAttr<F64Attr, "0.0">:$min_ratio);
  let results = (outs Xfmr_ScalarFloat:$result);
  let assemblyFormat = "$step attr-dict `:` type($step) `->` type($result)";
  let hasVerifier = 1;
}

def Xfmr_GlobalNormOp : Xfmr_Op<"global_norm", [Pure]> {
  let summary = "Euclidean norm of several tensors taken together";
  let description = [{
    `sqrt(sum over inputs of sum(x^2))`, the norm gradient clipping by global
    norm scales by. Squares are summed in f64.

    ```mlir
    %n = xfmr.global_norm %g0, %g1 : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Xfmr_FloatTensor>:$inputs);
  let results = (outs Xfmr_ScalarFloat:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

// The reductions over the processes of a data-parallel job: they read and
// write their input's buffer in place, which is their result's (each op's
// `bufferize` calls the runtime).
class Xfmr_InPlaceReductionOp<string mnemonic>
    : Xfmr_Op<mnemonic, [AllTypesMatch<["input", "result"]>,
        DeclareOpInterfaceMethods<BufferizableOpInterface, ["bufferizesToMemoryRead",
            "bufferizesToMemoryWrite", "getAliasingValues", "bufferize"]>]> {
  let extraClassDefinition = [{
    bool $cppClass::bufferizesToMemoryRead(::mlir::OpOperand &,
        const ::mlir::bufferization::AnalysisState &) {
      return true;
    }
    bool $cppClass::bufferizesToMemoryWrite(::mlir::OpOperand &operand,
        const ::mlir::bufferization::AnalysisState &) {
      return operand.get() == getInput();
    }
    ::mlir::bufferization::AliasingValueList $cppClass::getAliasingValues(
        ::mlir::OpOperand &operand, const ::mlir::bufferization::AnalysisState &) {
      if (operand.get() != getInput())
        return {};
      return {{getResult(), ::mlir::bufferization::BufferRelation::Equivalent}};
    }
  }];
}

def Xfmr_AllReduceOp : Xfmr_InPlaceReductionOp<"all_reduce"> {
  let summary = "weighted sum of a tensor over the processes of a data-parallel job";
  let description = [{
    `sum over processes p of weight_p * input_p`, the same on every process:
    how a data-parallel training step combines its gradients, each process
    weighting its own by its share of the job's batch. With one process it
    is `weight * input`.

    It communicates, so it is not `Pure`: it is neither moved nor merged
    nor dropped. It bufferizes in place into a call of the runtime's
    `xfmr_all_reduce_f32(float *data, int64_t count, float weight)`, which
    the trainer backs with MPI under `mpirun`.

    ```mlir
    %g = xfmr.all_reduce %grad, %weight : tensor<64x64xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_ScalarFloat:$weight);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight)";
  let hasVerifier = 1;
}

def Xfmr_AllReduceStartOp : Xfmr_InPlaceReductionOp<"all_reduce_start"> {
  let summary = "starts an `xfmr.all_reduce` that `xfmr.all_reduce_wait` completes";
  let description = [{
    The first half of `xfmr.all_reduce`, split so that the reduction of a
    gradient runs while the backward computes the gradients of earlier
    layers (`xfmr-overlap-all-reduce`). Its result is the reduction in
    flight: its one use is the `xfmr.all_reduce_wait` that yields the sum,
    and nothing may read or write the buffer in between. It bufferizes in
    place into a call of the runtime's `xfmr_all_reduce_start_f32(float
    *data, int64_t count, float weight)`; a strided view is reduced at once
    (through a contiguous copy) and its wait is a no-op.

    ```mlir
    %inflight = xfmr.all_reduce_start %grad, %weight : tensor<64x64xf32>, tensor<f32>
    ...
    %g = xfmr.all_reduce_wait %inflight : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$input, Xfmr_ScalarFloat:$weight);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight)";
  let hasVerifier = 1;
}

def Xfmr_AllReduceWaitOp : Xfmr_InPlaceReductionOp<"all_reduce_wait"> {
  let summary = "waits for the reduction an `xfmr.all_reduce_start` started";
  let description = [{
    The sum of the started reduction, in place of its buffer: a call of the
    runtime's `xfmr_all_reduce_wait_f32(float *data)`.
  }];
  let arguments = (ins Xfmr_FloatTensor:$input);
  let results = (outs Xfmr_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Xfmr_LossScaleOp : Xfmr_Op<"loss_scale", [Pure]> {
  let summary = "the loss scale of dynamic loss scaling, from its state";
  let description = [{
    `initial * 2^exponent`: the factor a mixed-precision training step
    multiplies the loss by before differentiating it, so that small f16
    gradients do not flush to zero (dynamic loss scaling, as
    `torch.cuda.amp.GradScaler` does). `exponent` is training state, an
    integer held in a float, 0 at the start and kept by
    `xfmr.loss_scale_update`; powers of two make scaling and unscaling
    exact.

    ```mlir
    %s = xfmr.loss_scale %e {initial = 6.553600e+04 : f64} : tensor<f32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Xfmr_ScalarFloat:$exponent, F64Attr:$initial);
  let results = (outs Xfmr_ScalarFloat:$result);
  let assemblyFormat = "$exponent attr-dict `:` type($exponent) `->` type($result)";
  let hasVerifier = 1;
}

def Xfmr_LossScaleUpdateOp : Xfmr_Op<"loss_scale_update",
    [Pure, AllTypesMatch<["exponent", "good_steps", "new_exponent", "new_good_steps"]>]> {
  let summary = "the next state of dynamic loss scaling";
  let description = [{
    From `grad_norm`, the global norm of the gradients of the scaled loss:
    when it is finite, `good_steps` (finite steps in a row) goes up by one,
    and on reaching `growth_interval` the exponent goes up by one (the scale
    doubles) and `good_steps` restarts at 0; when it is not (the gradients
    overflowed, and the optimizer updates skip the step) the exponent goes
    down by one (the scale halves) and `good_steps` restarts at 0. This is
    `GradScaler.update` with growth factor 2 and backoff factor 0.5.

    ```mlir
    %e1, %n1 = xfmr.loss_scale_update %e, %n, %norm {growth_interval = 2000 : i64}
        : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
    ```
  }];
  let arguments = (ins Xfmr_ScalarFloat:$exponent, Xfmr_ScalarFloat:$good_steps,
                   Xfmr_ScalarFloat:$grad_norm,
                   DefaultValuedAttr<I64Attr, "2000">:$growth_interval);
  let results = (outs Xfmr_ScalarFloat:$new_exponent, Xfmr_ScalarFloat:$new_good_steps);
  let assemblyFormat = [{
    $exponent `,` $good_steps `,` $grad_norm attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class Xfmr_OptimizerOp<string mnemonic, list<string> tensors>
    : Xfmr_Op<mnemonic, [Pure, AttrSizedOperandSegments, AllTypesMatch<tensors>]> {
  code clippingDescription = [{
    With `grad_norm` (the global norm of all gradients), the gradient is
    first scaled by `min(1, max_grad_norm / (grad_norm + 1e-6))`, as
    `torch.nn.utils.clip_grad_norm_` does.

    With `loss_scale`, `grad` is the gradient of the loss times
    `loss_scale` (dynamic loss scaling) and `grad_norm`, which must be
    given, its global norm: both are divided by `loss_scale` first, and
    when `grad_norm` is not finite (an overflow) the step is skipped: the
    parameter and state are returned unchanged, as `GradScaler.step` skips
    the optimizer. `max_grad_norm = 0` then means no clipping.
  }];
}

def Xfmr_AdamWUpdateOp : Xfmr_OptimizerOp<"adamw_update",
    ["param", "grad", "exp_avg", "exp_avg_sq", "new_param", "new_exp_avg", "new_exp_avg_sq"]> {
  let summary = "one AdamW step of a parameter, as torch.optim.AdamW";
  let description = [{
    With `t = step + 1` (0-based `step`) and the first and second moment
    estimates `exp_avg`, `exp_avg_sq`:

        p = p * (1 - lr * weight_decay)
        m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + epsilon)

    returning the new parameter and moments (one pass over the four
    tensors). }] # clippingDescription # [{

    ```mlir
    %p1, %m1, %v1 = xfmr.adamw_update %p, %g, %m, %v lr(%lr : tensor<f32>) step(%s : tensor<i64>)
        grad_norm(%n : tensor<f32>) {max_grad_norm = 1.0 : f64, weight_decay = 0.01 : f64} : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$param, Xfmr_FloatTensor:$grad, Xfmr_FloatTensor:$exp_avg,
                   Xfmr_FloatTensor:$exp_avg_sq, Xfmr_ScalarFloat:$lr, Xfmr_ScalarStep:$step,
                   Optional<Xfmr_ScalarFloat>:$grad_norm,
                   Optional<Xfmr_ScalarFloat>:$loss_scale,
                   DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                   DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                   DefaultValuedAttr<F64Attr, "1.0e-8">:$epsilon,
                   DefaultValuedAttr<F64Attr, "0.01">:$weight_decay,
                   DefaultValuedAttr<F64Attr, "1.0">:$max_grad_norm);
  let results = (outs Xfmr_FloatTensor:$new_param, Xfmr_FloatTensor:$new_exp_avg,
                      Xfmr_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `lr` `(` $lr `:` type($lr) `)`
    `step` `(` $step `:` type($step) `)` (`grad_norm` `(` $grad_norm^ `:` type($grad_norm) `)`)?
    (`loss_scale` `(` $loss_scale^ `:` type($loss_scale) `)`)? attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

def Xfmr_SgdUpdateOp : Xfmr_OptimizerOp<"sgd_update",
    ["param", "grad", "momentum_buffer", "new_param", "new_momentum_buffer"]> {
  let summary = "one SGD step with momentum of a parameter, as torch.optim.SGD";
  let description = [{
    `g = g + weight_decay * p; buf = momentum * buf + g; p = p - lr * buf`
    (torch.optim.SGD without dampening or Nesterov; a zero initial buffer
    makes the first step plain SGD, as torch's first step is), returning
    the new parameter and momentum buffer. }] # clippingDescription # [{

    ```mlir
    %p1, %b1 = xfmr.sgd_update %p, %g, %b lr(%lr : tensor<f32>) {momentum = 0.9 : f64} : tensor<64xf32>
    ```
  }];
  let arguments = (ins Xfmr_FloatTensor:$param, Xfmr_FloatTensor:$grad,
                   Xfmr_FloatTensor:$momentum_buffer, Xfmr_ScalarFloat:$lr,
                   Optional<Xfmr_ScalarFloat>:$grad_norm,
                   Optional<Xfmr_ScalarFloat>:$loss_scale,
                   DefaultValuedAttr<F64Attr, "0.9">:$momentum,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                   DefaultValuedAttr<F64Attr, "1.0">:$max_grad_norm);
  let results = (outs Xfmr_FloatTensor:$new_param, Xfmr_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `lr` `(` $lr `:` type($lr) `)`
    (`grad_norm` `(` $grad_norm^ `:` type($grad_norm) `)`)?
    (`loss_scale` `(` $loss_scale^ `:` type($loss_scale) `)`)? attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

#endif // XFMR_OPS_TD
