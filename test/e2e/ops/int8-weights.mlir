// Weights stored narrow (xfmrc --weights-dtype: int8 with a scale per output channel or per
// group of 32, int4, or bf16; the runtime converts the f32 tensors as it loads them) against float64
// products of the same stored weights: skinny products (decode steps) and full GEMMs, both
// weight layouts, bias and activation epilogues, column and depth tails; and a hand-written
// xfmr.dequantize whose groups run along a square weight's output side (scales per input row,
// not per channel).
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate int8_weights %t/inputs.safetensors
// RUN: xfmrc %s --weights-dtype=int8 --int8-dot=false -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check int8_weights %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// RUN: xfmrc %s --weights-dtype=int8 --weight-group-size=32 --vector-lanes=16 --int8-dot=false -o %t/model16
// RUN: %t/model16 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs16.safetensors
// RUN: %python %testlib/ops.py check int8_weights_32 %t/inputs.safetensors %t/outputs16.safetensors | FileCheck %s
// With --int8-dot (the default) on a host with an integer dot product, products of weights in
// groups of 32 take their activations as llama.cpp's q8_0 (a scale per block of 32, rounded to
// f16), as the reference int8_weights_32_dot does; the f32-activation reference rejects them.
// RUN: xfmrc %s --weights-dtype=int8 --weight-group-size=32 -o %t/model32
// RUN: %t/model32 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs32.safetensors
// RUN: %if integer-dot %{ %python %testlib/ops.py check int8_weights_32_dot %t/inputs.safetensors %t/outputs32.safetensors | FileCheck %s %} %else %{ %python %testlib/ops.py check int8_weights_32 %t/inputs.safetensors %t/outputs32.safetensors | FileCheck %s %}
// RUN: %if integer-dot %{ not %python %testlib/ops.py check int8_weights_32 %t/inputs.safetensors %t/outputs32.safetensors > /dev/null %}
// bf16 scales (the values quantized with the rounded scales), 8 and 16 lanes.
// RUN: xfmrc %s --weights-dtype=int8 --weight-group-size=32 --weight-scales-dtype=bf16 -o %t/model-bf16-scales
// RUN: %t/model-bf16-scales --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-bf16-scales.safetensors
// RUN: %if integer-dot %{ %python %testlib/ops.py check int8_weights_32_bf16_scales_dot %t/inputs.safetensors %t/outputs-bf16-scales.safetensors | FileCheck %s %} %else %{ %python %testlib/ops.py check int8_weights_32_bf16_scales %t/inputs.safetensors %t/outputs-bf16-scales.safetensors | FileCheck %s %}
// RUN: xfmrc %s --weights-dtype=int8 --weight-group-size=32 --weight-scales-dtype=f16 -o %t/model-f16-scales
// RUN: %t/model-f16-scales --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-f16-scales.safetensors
// RUN: %if integer-dot %{ %python %testlib/ops.py check int8_weights_32_f16_scales_dot %t/inputs.safetensors %t/outputs-f16-scales.safetensors | FileCheck %s %} %else %{ %python %testlib/ops.py check int8_weights_32_f16_scales %t/inputs.safetensors %t/outputs-f16-scales.safetensors | FileCheck %s %}
// RUN: %if integer-dot %{ not %python %testlib/ops.py check int8_weights_32_bf16_scales_dot %t/inputs.safetensors %t/outputs-f16-scales.safetensors > /dev/null %} %else %{ not %python %testlib/ops.py check int8_weights_32_bf16_scales %t/inputs.safetensors %t/outputs-f16-scales.safetensors > /dev/null %}
// RUN: xfmrc %s --weights-dtype=int8 --weight-scales-dtype=bf16 --vector-lanes=16 --int8-dot=false -o %t/model-bf16-scales16
// RUN: %t/model-bf16-scales16 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-bf16-scales16.safetensors
// RUN: %python %testlib/ops.py check int8_weights_bf16_scales %t/inputs.safetensors %t/outputs-bf16-scales16.safetensors | FileCheck %s
// With --int8-dot (the default) on a host with an integer dot product, products of weights with a scale per
// channel take their activations quantized to int8 (skinny ones a scale per row, GEMMs a scale
// per block of 32), as the reference int8_weights_dot does; the f32-activation reference rejects
// them.
// RUN: %if integer-dot %{ xfmrc %s --weights-dtype=int8 -o %t/model-dot %}
// RUN: %if integer-dot %{ %t/model-dot --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-dot.safetensors %}
// RUN: %if integer-dot %{ %python %testlib/ops.py check int8_weights_dot %t/inputs.safetensors %t/outputs-dot.safetensors | FileCheck %s %}
// RUN: %if integer-dot %{ not %python %testlib/ops.py check int8_weights %t/inputs.safetensors %t/outputs-dot.safetensors > /dev/null %}
// RUN: %if integer-dot %{ xfmrc %s --weights-dtype=int8 --weight-scales-dtype=bf16 -o %t/model-dot-bf16-scales %}
// RUN: %if integer-dot %{ %t/model-dot-bf16-scales --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-dot-bf16-scales.safetensors %}
// RUN: %if integer-dot %{ %python %testlib/ops.py check int8_weights_bf16_scales_dot %t/inputs.safetensors %t/outputs-dot-bf16-scales.safetensors | FileCheck %s %}
// Rounding the scales shows: the f32-scale reference rejects these outputs.
// RUN: not %python %testlib/ops.py check int8_weights_32 %t/inputs.safetensors %t/outputs-bf16-scales.safetensors > /dev/null
// The GPU kernels, their thread blocks run as loops on the CPU: skinny products read the int8
// values and scales as stored (a scale per group of 32, or per channel); full GEMMs take the
// dequantized weights (the linalg lowering of xfmr.dequantize).
// RUN: xfmrc %s --weights-dtype=int8 --weight-group-size=32 --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check int8_weights_32 %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// RUN: xfmrc %s --weights-dtype=int8 --emulate-gpu-kernels --reverse-gpu-threads -o %t/gpu-emulated-channel
// RUN: %t/gpu-emulated-channel --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-gpu-channel.safetensors
// RUN: %python %testlib/ops.py check int8_weights %t/inputs.safetensors %t/outputs-gpu-channel.safetensors | FileCheck %s
// --weights-dtype=bf16: the weights rounded to bf16, widened as the products read them.
// RUN: xfmrc %s --weights-dtype=bf16 -o %t/model-bf16
// RUN: %t/model-bf16 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-bf16.safetensors
// RUN: %python %testlib/ops.py check bf16_weights %t/inputs.safetensors %t/outputs-bf16.safetensors | FileCheck %s
// RUN: xfmrc %s --weights-dtype=bf16 --emulate-gpu-kernels -o %t/gpu-emulated-bf16
// RUN: %t/gpu-emulated-bf16 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-gpu-bf16.safetensors
// RUN: %python %testlib/ops.py check bf16_weights %t/inputs.safetensors %t/outputs-gpu-bf16.safetensors | FileCheck %s
// --weights-dtype=int4: two values a byte in groups of 32, symmetric (Q4_0's scale) or with a
// minimum (Q4_1's), scales f32, f16 or bf16, 8 and 16 lanes; the emulated GPU kernels read them
// dequantized. Each reference rejects the other's outputs. With --int8-dot on a host with
// an integer dot product the products take int8 activations, as the _dot references do.
// RUN: xfmrc %s --weights-dtype=int4 --int8-dot=false -o %t/model-int4
// RUN: %t/model-int4 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-int4.safetensors
// RUN: %python %testlib/ops.py check int4_weights_32 %t/inputs.safetensors %t/outputs-int4.safetensors | FileCheck %s
// RUN: not %python %testlib/ops.py check int4_weights_32_mins %t/inputs.safetensors %t/outputs-int4.safetensors > /dev/null
// RUN: xfmrc %s --weights-dtype=int4 --weight-mins --vector-lanes=16 --int8-dot=false -o %t/model-int4-mins
// RUN: %t/model-int4-mins --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-int4-mins.safetensors
// RUN: %python %testlib/ops.py check int4_weights_32_mins %t/inputs.safetensors %t/outputs-int4-mins.safetensors | FileCheck %s
// RUN: not %python %testlib/ops.py check int4_weights_32 %t/inputs.safetensors %t/outputs-int4-mins.safetensors > /dev/null
// RUN: xfmrc %s --weights-dtype=int4 --weight-mins --weight-scales-dtype=bf16 --int8-dot=false -o %t/model-int4-bf16
// RUN: %t/model-int4-bf16 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-int4-bf16.safetensors
// RUN: %python %testlib/ops.py check int4_weights_32_mins_bf16 %t/inputs.safetensors %t/outputs-int4-bf16.safetensors | FileCheck %s
// RUN: xfmrc %s --weights-dtype=int4 --weight-scales-dtype=f16 --int8-dot=false -o %t/model-int4-f16
// RUN: %t/model-int4-f16 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-int4-f16.safetensors
// RUN: %python %testlib/ops.py check int4_weights_32_f16 %t/inputs.safetensors %t/outputs-int4-f16.safetensors | FileCheck %s
// RUN: not %python %testlib/ops.py check int4_weights_32 %t/inputs.safetensors %t/outputs-int4-f16.safetensors > /dev/null
// RUN: xfmrc %s --weights-dtype=int4 --vector-lanes=16 --emulate-gpu-kernels -o %t/gpu-emulated-int4
// RUN: %t/gpu-emulated-int4 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-gpu-int4.safetensors
// RUN: %python %testlib/ops.py check int4_weights_32 %t/inputs.safetensors %t/outputs-gpu-int4.safetensors | FileCheck %s
// RUN: xfmrc %s --weights-dtype=int4 --weight-scales-dtype=f16 --emulate-gpu-kernels -o %t/gpu-emulated-int4-f16
// RUN: %t/gpu-emulated-int4-f16 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-gpu-int4-f16.safetensors
// RUN: %python %testlib/ops.py check int4_weights_32_f16 %t/inputs.safetensors %t/outputs-gpu-int4-f16.safetensors | FileCheck %s
// RUN: %if integer-dot %{ xfmrc %s --weights-dtype=int4 -o %t/model-int4-dot %}
// RUN: %if integer-dot %{ %t/model-int4-dot --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-int4-dot.safetensors %}
// RUN: %if integer-dot %{ %python %testlib/ops.py check int4_weights_32_dot %t/inputs.safetensors %t/outputs-int4-dot.safetensors | FileCheck %s %}
// RUN: %if integer-dot %{ not %python %testlib/ops.py check int4_weights_32 %t/inputs.safetensors %t/outputs-int4-dot.safetensors > /dev/null %}
// RUN: %if integer-dot %{ xfmrc %s --weights-dtype=int4 --weight-mins -o %t/model-int4-mins-dot %}
// RUN: %if integer-dot %{ %t/model-int4-mins-dot --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-int4-mins-dot.safetensors %}
// RUN: %if integer-dot %{ %python %testlib/ops.py check int4_weights_32_mins_dot %t/inputs.safetensors %t/outputs-int4-mins-dot.safetensors | FileCheck %s %}
// RUN: %if integer-dot %{ xfmrc %s --weights-dtype=int4 --weight-scales-dtype=f16 -o %t/model-int4-f16-dot %}
// RUN: %if integer-dot %{ %t/model-int4-f16-dot --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-int4-f16-dot.safetensors %}
// RUN: %if integer-dot %{ %python %testlib/ops.py check int4_weights_32_f16_dot %t/inputs.safetensors %t/outputs-int4-f16-dot.safetensors | FileCheck %s %}
// RUN: %if integer-dot %{ xfmrc %s --weights-dtype=int4 --weight-mins --weight-scales-dtype=f16 -o %t/model-int4-mins-f16-dot %}
// RUN: %if integer-dot %{ %t/model-int4-mins-f16-dot --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-int4-mins-f16-dot.safetensors %}
// RUN: %if integer-dot %{ %python %testlib/ops.py check int4_weights_32_mins_f16_dot %t/inputs.safetensors %t/outputs-int4-mins-f16-dot.safetensors | FileCheck %s %}
// RUN: %if integer-dot %{ not %python %testlib/ops.py check int4_weights_32_mins_dot %t/inputs.safetensors %t/outputs-int4-mins-f16-dot.safetensors > /dev/null %}
// RUN: xfmrc %s --weights-dtype=int4 --weight-mins --emit=mlir -o - | FileCheck %s --check-prefix=INT4
// INT4: tensor<96x32xi8> {xfmr.param = "w_kn", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "values", transposed}}
// INT4-SAME: tensor<96x2xf32> {xfmr.param = "w_kn", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "scales", transposed}}
// INT4-SAME: tensor<96x2xf32> {xfmr.param = "w_kn", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "mins", transposed}}
// INT4: xfmr.dequantize %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : (tensor<96x32xi8>, tensor<96x2xf32>, tensor<96x2xf32>) -> tensor<96x64xf32>
// The weights the executable takes: int8 values and their scales, read by the products; w_kn
// kept transposed, its rows the outputs.
// RUN: xfmrc %s --weights-dtype=int8 --weight-group-size=32 --emit=mlir -o - | FileCheck %s --check-prefix=IR
// IR: tensor<96x64xi8> {xfmr.param = "w_kn", xfmr.quantized = {axis = 1 : i64, group_size = 32 : i64, part = "values", transposed}}
// IR-SAME: tensor<96x2xf32> {xfmr.param = "w_kn", xfmr.quantized = {axis = 1 : i64, group_size = 32 : i64, part = "scales", transposed}}
// IR-SAME: tensor<100x64xi8> {xfmr.param = "w_nk", xfmr.quantized = {axis = 1 : i64, group_size = 32 : i64, part = "values"}}
// IR-SAME: tensor<100x2xf32> {xfmr.param = "w_nk", xfmr.quantized = {axis = 1 : i64, group_size = 32 : i64, part = "scales"}}
// IR-NOT: tensor<64x96xf32> {xfmr.param
// CHECK: PASS: skinny_kn
// CHECK: PASS: skinny_nk
// CHECK: PASS: skinny_tail
// CHECK: PASS: skinny_rows
// CHECK: PASS: square_rows
// CHECK: PASS: gemm_kn
// CHECK: PASS: gemm_nk
// CHECK: PASS: gemm_tail

func.func @forward(%x: tensor<3x64xf32> {xfmr.input = "x"}, %xl: tensor<70x64xf32> {xfmr.input = "xl"},
                   %xt: tensor<2x160xf32> {xfmr.input = "xt"}, %w_tail: tensor<40x160xf32> {xfmr.param = "w_tail"},
                   %w_kn: tensor<64x96xf32> {xfmr.param = "w_kn"},
                   %w_nk: tensor<100x64xf32> {xfmr.param = "w_nk"}, %b: tensor<100xf32> {xfmr.param = "b"},
                   %sq: tensor<64x64xi8> {xfmr.input = "sq"}, %ss: tensor<64x1xf32> {xfmr.input = "ss"},
                   %xs16: tensor<16x160xf32> {xfmr.input = "xs16"}, %xlt: tensor<17x160xf32> {xfmr.input = "xlt"})
    -> (tensor<3x96xf32> {xfmr.output = "skinny_kn"}, tensor<3x100xf32> {xfmr.output = "skinny_nk"},
        tensor<70x96xf32> {xfmr.output = "gemm_kn"}, tensor<70x100xf32> {xfmr.output = "gemm_nk"},
        tensor<3x64xf32> {xfmr.output = "square_rows"}, tensor<2x40xf32> {xfmr.output = "skinny_tail"},
        tensor<16x40xf32> {xfmr.output = "skinny_rows"}, tensor<17x40xf32> {xfmr.output = "gemm_tail"}) {
  %a = xfmr.matmul %x, %w_kn : (tensor<3x64xf32>, tensor<64x96xf32>) -> tensor<3x96xf32>
  %c = xfmr.linear %x, %w_nk, %b {transpose_weight} : (tensor<3x64xf32>, tensor<100x64xf32>, tensor<100xf32>) -> tensor<3x100xf32>
  %d = xfmr.matmul %xl, %w_kn : (tensor<70x64xf32>, tensor<64x96xf32>) -> tensor<70x96xf32>
  %e = xfmr.linear %xl, %w_nk, %b {transpose_weight} : (tensor<70x64xf32>, tensor<100x64xf32>, tensor<100xf32>) -> tensor<70x100xf32>
  %f = xfmr.relu %e : tensor<70x100xf32>
  %w = xfmr.dequantize %sq, %ss {axis = 1 : i64, group_size = 64 : i64} : (tensor<64x64xi8>, tensor<64x1xf32>) -> tensor<64x64xf32>
  %g = xfmr.matmul %x, %w : (tensor<3x64xf32>, tensor<64x64xf32>) -> tensor<3x64xf32>
  %h = xfmr.linear %xt, %w_tail {transpose_weight} : (tensor<2x160xf32>, tensor<40x160xf32>) -> tensor<2x40xf32>
  %r = xfmr.linear %xs16, %w_tail {transpose_weight} : (tensor<16x160xf32>, tensor<40x160xf32>) -> tensor<16x40xf32>
  %i = xfmr.linear %xlt, %w_tail {transpose_weight} : (tensor<17x160xf32>, tensor<40x160xf32>) -> tensor<17x40xf32>
  return %a, %c, %d, %f, %g, %h, %r, %i : tensor<3x96xf32>, tensor<3x100xf32>, tensor<70x96xf32>, tensor<70x100xf32>, tensor<3x64xf32>, tensor<2x40xf32>, tensor<16x40xf32>, tensor<17x40xf32>
}
