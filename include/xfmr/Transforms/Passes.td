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

#endif // XFMR_TRANSFORMS_PASSES_TD
