// A row of a product of up to 16 rows (a batch's decode step) computes as the same row alone
// does (a one-sequence decode step), bit for bit: the CPU's dot-product kernel sums each output
// in one order whatever the rows, for f32, bf16 (both factors bf16, as --dtype=bf16 stores
// them: vdpbf16ps where the host has it), int8 and 4-bit weights taken as floats
// (--int8-dot=false), and, on hosts with an integer dot product, int8 and 4-bit weights on it
// (activations rounded to int8 per row or block of 32; rows in groups, each with its own
// chains). Row 15 lies in the last group of rows of the batch's product; 45 output columns end
// in a short block; the depths (100, 200, 128) end in partial vectors. A depth of 610 at 16 rows
// is swept in chunks of K (three, the last ending in a partial vector) over bands of blocks (the
// last ending in the short block): the chunked product against float64 and its row alike.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate row_invariance %t/inputs.safetensors
// RUN: xfmrc %s --int8-dot=false -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check row_invariance %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// RUN: xfmrc %s --int8-dot=false --vector-lanes=16 -o %t/model16
// RUN: %t/model16 --inputs=%t/inputs.safetensors --output=%t/outputs16.safetensors
// RUN: %python %testlib/ops.py check row_invariance %t/inputs.safetensors %t/outputs16.safetensors | FileCheck %s
// RUN: %if integer-dot %{ xfmrc %s -o %t/model-dot && %t/model-dot --inputs=%t/inputs.safetensors --output=%t/outputs-dot.safetensors && %python %testlib/ops.py check row_invariance %t/inputs.safetensors %t/outputs-dot.safetensors | FileCheck %s %}
// CHECK: PASS: f32_alike: max error 0.00e+00
// CHECK: PASS: bf16_alike: max error 0.00e+00
// CHECK: PASS: int8_alike: max error 0.00e+00
// CHECK: PASS: int4_alike: max error 0.00e+00
// CHECK: PASS: chunked_alike: max error 0.00e+00
// CHECK: PASS: chunked: max error

func.func @forward(%x: tensor<16x100xf32> {xfmr.input = "x"}, %w: tensor<45x100xf32> {xfmr.input = "w"},
                   %xb: tensor<16x200xf32> {xfmr.input = "xb"}, %wb: tensor<45x200xf32> {xfmr.input = "wb"},
                   %q: tensor<45x100xi8> {xfmr.input = "q"}, %s: tensor<45x1xf32> {xfmr.input = "s"},
                   %x4: tensor<16x128xf32> {xfmr.input = "x4"}, %q4: tensor<45x64xi8> {xfmr.input = "q4"},
                   %s4: tensor<45x4xf32> {xfmr.input = "s4"},
                   %xc: tensor<16x610xf32> {xfmr.input = "xc"}, %wc: tensor<45x610xf32> {xfmr.input = "wc"})
    -> (tensor<1x45xf32> {xfmr.output = "f32_alike"}, tensor<1x45xf32> {xfmr.output = "bf16_alike"},
        tensor<1x45xf32> {xfmr.output = "int8_alike"}, tensor<1x45xf32> {xfmr.output = "int4_alike"},
        tensor<16x45xf32> {xfmr.output = "chunked"}, tensor<1x45xf32> {xfmr.output = "chunked_alike"}) {
  %f32_all = xfmr.linear %x, %w {transpose_weight} : (tensor<16x100xf32>, tensor<45x100xf32>) -> tensor<16x45xf32>
  %f32_row = tensor.extract_slice %x[15, 0] [1, 100] [1, 1] : tensor<16x100xf32> to tensor<1x100xf32>
  %f32_one = xfmr.linear %f32_row, %w {transpose_weight} : (tensor<1x100xf32>, tensor<45x100xf32>) -> tensor<1x45xf32>
  %f32_last = tensor.extract_slice %f32_all[15, 0] [1, 45] [1, 1] : tensor<16x45xf32> to tensor<1x45xf32>
  %f32_alike = xfmr.sub %f32_one, %f32_last : (tensor<1x45xf32>, tensor<1x45xf32>) -> tensor<1x45xf32>
  %xbn = arith.truncf %xb : tensor<16x200xf32> to tensor<16x200xbf16>
  %wbn = arith.truncf %wb : tensor<45x200xf32> to tensor<45x200xbf16>
  %xbw = arith.extf %xbn : tensor<16x200xbf16> to tensor<16x200xf32>
  %wbw = arith.extf %wbn : tensor<45x200xbf16> to tensor<45x200xf32>
  %bf16_all = xfmr.linear %xbw, %wbw {transpose_weight} : (tensor<16x200xf32>, tensor<45x200xf32>) -> tensor<16x45xf32>
  %bf16_rown = tensor.extract_slice %xbn[15, 0] [1, 200] [1, 1] : tensor<16x200xbf16> to tensor<1x200xbf16>
  %bf16_row = arith.extf %bf16_rown : tensor<1x200xbf16> to tensor<1x200xf32>
  %bf16_one = xfmr.linear %bf16_row, %wbw {transpose_weight} : (tensor<1x200xf32>, tensor<45x200xf32>) -> tensor<1x45xf32>
  %bf16_last = tensor.extract_slice %bf16_all[15, 0] [1, 45] [1, 1] : tensor<16x45xf32> to tensor<1x45xf32>
  %bf16_alike = xfmr.sub %bf16_one, %bf16_last : (tensor<1x45xf32>, tensor<1x45xf32>) -> tensor<1x45xf32>
  %w8 = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 100 : i64} : (tensor<45x100xi8>, tensor<45x1xf32>) -> tensor<45x100xf32>
  %int8_all = xfmr.linear %x, %w8 {transpose_weight} : (tensor<16x100xf32>, tensor<45x100xf32>) -> tensor<16x45xf32>
  %int8_row = tensor.extract_slice %x[15, 0] [1, 100] [1, 1] : tensor<16x100xf32> to tensor<1x100xf32>
  %int8_one = xfmr.linear %int8_row, %w8 {transpose_weight} : (tensor<1x100xf32>, tensor<45x100xf32>) -> tensor<1x45xf32>
  %int8_last = tensor.extract_slice %int8_all[15, 0] [1, 45] [1, 1] : tensor<16x45xf32> to tensor<1x45xf32>
  %int8_alike = xfmr.sub %int8_one, %int8_last : (tensor<1x45xf32>, tensor<1x45xf32>) -> tensor<1x45xf32>
  %w4 = xfmr.dequantize %q4, %s4 {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : (tensor<45x64xi8>, tensor<45x4xf32>) -> tensor<45x128xf32>
  %int4_all = xfmr.linear %x4, %w4 {transpose_weight} : (tensor<16x128xf32>, tensor<45x128xf32>) -> tensor<16x45xf32>
  %int4_row = tensor.extract_slice %x4[15, 0] [1, 128] [1, 1] : tensor<16x128xf32> to tensor<1x128xf32>
  %int4_one = xfmr.linear %int4_row, %w4 {transpose_weight} : (tensor<1x128xf32>, tensor<45x128xf32>) -> tensor<1x45xf32>
  %int4_last = tensor.extract_slice %int4_all[15, 0] [1, 45] [1, 1] : tensor<16x45xf32> to tensor<1x45xf32>
  %int4_alike = xfmr.sub %int4_one, %int4_last : (tensor<1x45xf32>, tensor<1x45xf32>) -> tensor<1x45xf32>
  %chunked = xfmr.linear %xc, %wc {transpose_weight} : (tensor<16x610xf32>, tensor<45x610xf32>) -> tensor<16x45xf32>
  %chunked_row = tensor.extract_slice %xc[15, 0] [1, 610] [1, 1] : tensor<16x610xf32> to tensor<1x610xf32>
  %chunked_one = xfmr.linear %chunked_row, %wc {transpose_weight} : (tensor<1x610xf32>, tensor<45x610xf32>) -> tensor<1x45xf32>
  %chunked_last = tensor.extract_slice %chunked[15, 0] [1, 45] [1, 1] : tensor<16x45xf32> to tensor<1x45xf32>
  %chunked_alike = xfmr.sub %chunked_one, %chunked_last : (tensor<1x45xf32>, tensor<1x45xf32>) -> tensor<1x45xf32>
  return %f32_alike, %bf16_alike, %int8_alike, %int4_alike, %chunked, %chunked_alike : tensor<1x45xf32>, tensor<1x45xf32>, tensor<1x45xf32>, tensor<1x45xf32>, tensor<16x45xf32>, tensor<1x45xf32>
}
