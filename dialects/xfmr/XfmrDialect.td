//===- XfmrDialect.td - the xfmr dialect declaration --------*- tablegen -*-===//
//
// The xfmr dialect: transformer blocks on tensors with static shapes.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_DIALECT_TD
#define XFMR_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Xfmr_Dialect : Dialect {
  let name = "xfmr";
  let cppNamespace = "::xfmr";
  let summary = "Transformer models on tensors";
  let description = [{
    The xfmr dialect describes transformer models on ranked, statically shaped
    tensors. Its ops come in three tiers:

    * high-level ops carry the transformer vocabulary (`embedding`,
      `multi_head_attention`, `layer_norm`, `gelu`, ...): what a frontend
      emits and a person reads;
    * primitive ops (`matmul`, `transpose`, `reshape`, `reduce`, broadcasting
      `add`/`sub`/`mul`/`div`/`maximum`/`select`, `causal_mask`) express a
      graph the way an importer or tutorial code writes it. Same-shape unary
      math (exp, tanh, erf, rsqrt, ...) and comparisons use the upstream
      `math` and `arith` ops on tensors;
    * fused ops (`fused_attention`, `fused_add_layer_norm`, `fused_linear`,
      and `softmax`/`layer_norm` themselves) are what the fusion passes form
      from primitive graphs; each lowers to a single kernel.

    `xfmr-decompose` rewrites high-level ops into primitives; the fusion
    passes then find attention, softmax, layer-norm and matmul epilogues in
    that primitive form, whether it came from the decomposition or was written
    by hand.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Xfmr_Op<string mnemonic, list<Trait> traits = []>
    : Op<Xfmr_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Xfmr_Activation : I32EnumAttr<"Activation", "activation applied in a matmul epilogue", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"relu", 1>,
    I32EnumAttrCase<"gelu", 2>,
    I32EnumAttrCase<"gelu_tanh", 3>,
    I32EnumAttrCase<"silu", 4>,
    I32EnumAttrCase<"tanh", 5>,
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::xfmr";
}
def Xfmr_ActivationAttr : EnumAttr<Xfmr_Dialect, Xfmr_Activation, "activation"> {
  let assemblyFormat = "`<` $value `>`";
}

def Xfmr_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu is evaluated (PyTorch's `approximate` argument)", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"tanh", 1>,
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::xfmr";
}
def Xfmr_GeluApproximationAttr
    : EnumAttr<Xfmr_Dialect, Xfmr_GeluApproximation, "gelu_approximation"> {
  let assemblyFormat = "`<` $value `>`";
}

def Xfmr_SinusoidLayout : I32EnumAttr<"SinusoidLayout",
    "where a sinusoidal position encoding puts its sines and cosines", [
    // sin in even, cos in odd features ("Attention Is All You Need").
    I32EnumAttrCase<"interleaved", 0>,
    // sin in the first half, cos in the second (Marian, XLM-style).
    I32EnumAttrCase<"halves", 1>,
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::xfmr";
}
def Xfmr_SinusoidLayoutAttr
    : EnumAttr<Xfmr_Dialect, Xfmr_SinusoidLayout, "sinusoid_layout"> {
  let assemblyFormat = "`<` $value `>`";
}

def Xfmr_PoolMode : I32EnumAttr<"PoolMode", "how a sequence is pooled into one vector", [
    // The first token's vector (BERT's [CLS]).
    I32EnumAttrCase<"cls", 0>,
    // The mean over the tokens the mask keeps.
    I32EnumAttrCase<"mean", 1>,
    // The elementwise max over the kept tokens.
    I32EnumAttrCase<"max", 2>,
    // The sum over the kept tokens divided by the square root of their count.
    I32EnumAttrCase<"mean_sqrt_len", 3>,
    // The last kept token's vector.
    I32EnumAttrCase<"last", 4>,
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::xfmr";
}
def Xfmr_PoolModeAttr : EnumAttr<Xfmr_Dialect, Xfmr_PoolMode, "pool_mode"> {
  let assemblyFormat = "`<` $value `>`";
}

def Xfmr_ReduceKind : I32EnumAttr<"ReduceKind", "reduction combiner", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"max", 1>,
    I32EnumAttrCase<"mean", 2>,
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::xfmr";
}
def Xfmr_ReduceKindAttr : EnumAttr<Xfmr_Dialect, Xfmr_ReduceKind, "reduce_kind"> {
  let assemblyFormat = "`<` $value `>`";
}

def Xfmr_AttentionLayout : I32EnumAttr<"AttentionLayout",
    "dimension order of attention operands", [
    // [batch, seq, heads, head_dim]: heads split from a [batch, seq, d_model]
    // projection by a free reshape.
    I32EnumAttrCase<"bshd", 0>,
    // [batch, heads, seq, head_dim]: the layout of tutorial code after
    // `.transpose(1, 2)`.
    I32EnumAttrCase<"bhsd", 1>,
  ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::xfmr";
}
def Xfmr_AttentionLayoutAttr
    : EnumAttr<Xfmr_Dialect, Xfmr_AttentionLayout, "layout"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Xfmr_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
def Xfmr_IntTensor : StaticShapeTensorOf<[AnySignlessInteger]>;
def Xfmr_BoolTensor : StaticShapeTensorOf<[I1]>;
def Xfmr_AnyTensor : StaticShapeTensorOf<[AnyFloat, AnySignlessInteger]>;

#endif // XFMR_DIALECT_TD
