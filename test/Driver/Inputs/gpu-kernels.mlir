// A GEMM with a GELU epilogue, a softmax and an add + layer norm at BERT
// widths: each becomes one hand-built kernel under --target=nvptx.
func.func @forward(%x: tensor<128x768xf32> {xfmr.input = "x"}, %w: tensor<768x3072xf32> {xfmr.param = "w"},
                   %b: tensor<3072xf32> {xfmr.param = "b"}, %r: tensor<128x768xf32> {xfmr.input = "r"},
                   %g: tensor<768xf32> {xfmr.param = "g"}, %beta: tensor<768xf32> {xfmr.param = "beta"})
    -> (tensor<128x3072xf32> {xfmr.output = "h"}, tensor<128x3072xf32> {xfmr.output = "p"},
        tensor<128x768xf32> {xfmr.output = "n"}) {
  %h = xfmr.fused_linear %x, %w bias(%b) {activation = #xfmr.activation<gelu>}
       : (tensor<128x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<128x3072xf32>
  %p = xfmr.softmax %h : tensor<128x3072xf32>
  %sum, %n = xfmr.fused_add_layer_norm %x, %r, %g, %beta {epsilon = 1.0e-5 : f64}
      : (tensor<128x768xf32>, tensor<128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> (tensor<128x768xf32>, tensor<128x768xf32>)
  return %h, %p, %n : tensor<128x3072xf32>, tensor<128x3072xf32>, tensor<128x768xf32>
}
