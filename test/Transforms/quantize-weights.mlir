// RUN: xfmr-opt %s --xfmr-quantize-weights --split-input-file | FileCheck %s
// RUN: xfmr-opt %s --xfmr-quantize-weights=group-size=32 --split-input-file | FileCheck %s --check-prefix=G32
// RUN: not xfmr-opt %s --xfmr-quantize-weights=group-size=48 --split-input-file 2>&1 | FileCheck %s --check-prefix=G48
// RUN: xfmr-opt %s --xfmr-quantize-weights=type=bf16 --split-input-file | FileCheck %s --check-prefix=BF16
// RUN: xfmr-opt %s --xfmr-quantize-weights='type=int4 group-size=32 mins' --split-input-file | FileCheck %s --check-prefix=INT4
// RUN: not xfmr-opt %s --xfmr-quantize-weights=type=int4 --split-input-file 2>&1 | FileCheck %s --check-prefix=INT4GROUP
// RUN: not xfmr-opt %s --xfmr-quantize-weights=mins --split-input-file 2>&1 | FileCheck %s --check-prefix=MINS
// RUN: not xfmr-opt %s --xfmr-quantize-weights=type=int2 --split-input-file 2>&1 | FileCheck %s --check-prefix=INT2
// RUN: xfmr-opt %s --xfmr-quantize-weights=embeddings --split-input-file | FileCheck %s --check-prefix=EMB
// RUN: xfmr-opt %s --xfmr-quantize-weights='group-size=32 scale-type=bf16' --split-input-file | FileCheck %s --check-prefix=BF16SCALES
// RUN: xfmr-opt %s --xfmr-quantize-weights='type=int4 group-size=32 scale-type=f16' --split-input-file | FileCheck %s --check-prefix=F16SCALES
// RUN: not xfmr-opt %s --xfmr-quantize-weights=scale-type=f64 --split-input-file 2>&1 | FileCheck %s --check-prefix=F64SCALES
// RUN: xfmr-opt %s --xfmr-quantize-weights='scale-type=bf16 per-weight=wte=int8:16,fc.weight=int4:32:mins:f16' --split-input-file | FileCheck %s --check-prefix=PERWEIGHT
// RUN: not xfmr-opt %s --xfmr-quantize-weights='per-weight=fc.weight=int4:32:f16:mins' --split-input-file 2>&1 | FileCheck %s --check-prefix=PERWEIGHTBAD
// RUN: not xfmr-opt %s --xfmr-quantize-weights='per-weight=fc.weight=bf16:f16' --split-input-file 2>&1 | FileCheck %s --check-prefix=PERWEIGHTFLOAT
// RUN: xfmr-opt %s --xfmr-quantize-weights='type=bf16 embeddings' --split-input-file | FileCheck %s --check-prefix=EMBBF16
// RUN: xfmr-opt %s --xfmr-quantize-weights=type=f32 --split-input-file | FileCheck %s --check-prefix=F32

// Each product's weight becomes int8 values and scales of its input side:
// one scale per output channel by default, per group of 32 inputs with
// group-size=32. A weight stored [in, out] is kept transposed, [out, in],
// its groups along its rows, and reaches the product through
// xfmr.transpose. A table used by an embedding and as the tied output
// projection keeps its f32 argument for the embedding; the bias, a
// vector, stays f32.
// CHECK-LABEL: func @forward
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<2x4xi32>
// CHECK-SAME: %[[TABLE:[^:]*]]: tensor<50x64xf32> {xfmr.param = "wte"}
// CHECK-SAME: %[[BIAS:[^:]*]]: tensor<96xf32> {xfmr.param = "fc.bias"}
// CHECK-SAME: %[[HEADQ:[^:]*]]: tensor<50x64xi8> {xfmr.param = "wte", xfmr.quantized = {axis = 1 : i64, group_size = 64 : i64, part = "values"}}
// CHECK-SAME: %[[HEADS:[^:]*]]: tensor<50x1xf32> {xfmr.param = "wte", xfmr.quantized = {axis = 1 : i64, group_size = 64 : i64, part = "scales"}}
// CHECK-SAME: %[[FCQ:[^:]*]]: tensor<96x64xi8> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, group_size = 64 : i64, part = "values", transposed}}
// CHECK-SAME: %[[FCS:[^:]*]]: tensor<96x1xf32> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, group_size = 64 : i64, part = "scales", transposed}}
// CHECK-NOT: tensor<64x96xf32> {xfmr.param
// CHECK: %[[HEAD:.*]] = xfmr.dequantize %[[HEADQ]], %[[HEADS]] {axis = 1 : i64, group_size = 64 : i64}
// CHECK: %[[FCT:.*]] = xfmr.dequantize %[[FCQ]], %[[FCS]] {axis = 1 : i64, group_size = 64 : i64} : (tensor<96x64xi8>, tensor<96x1xf32>) -> tensor<96x64xf32>
// CHECK: %[[FC:.*]] = xfmr.transpose %[[FCT]] {permutation = array<i64: 1, 0>} : (tensor<96x64xf32>) -> tensor<64x96xf32>
// CHECK: xfmr.embedding %[[IDS]], %[[TABLE]]
// CHECK: xfmr.linear %{{.*}}, %[[FC]], %[[BIAS]]
// CHECK: xfmr.matmul %{{.*}}, %[[HEAD]] {transpose_rhs}
// G32: tensor<50x2xf32> {xfmr.param = "wte", xfmr.quantized = {axis = 1 : i64, group_size = 32 : i64, part = "scales"}}
// G32-SAME: tensor<96x64xi8> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, group_size = 32 : i64, part = "values", transposed}}
// G32-SAME: tensor<96x2xf32> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, group_size = 32 : i64, part = "scales", transposed}}
// With type=bf16, one bf16 argument per weight, widened for the products;
// one stored [in, out] is kept transposed, as int8 values are.
// BF16-LABEL: func @forward
// BF16-SAME: %[[TABLE:[^:]*]]: tensor<50x64xf32> {xfmr.param = "wte"}
// BF16-SAME: %[[HEAD:[^:]*]]: tensor<50x64xbf16> {xfmr.param = "wte", xfmr.quantized = {part = "bf16"}}
// BF16-SAME: %[[FC:[^:]*]]: tensor<96x64xbf16> {xfmr.param = "fc.weight", xfmr.quantized = {part = "bf16", transposed}}
// BF16-DAG: %[[FCT:.*]] = xfmr.transpose %[[FC]] {permutation = array<i64: 1, 0>} : (tensor<96x64xbf16>) -> tensor<64x96xbf16>
// BF16-DAG: %[[FCW:.*]] = arith.extf %[[FCT]] : tensor<64x96xbf16> to tensor<64x96xf32>
// BF16-DAG: %[[HEADW:.*]] = arith.extf %[[HEAD]] : tensor<50x64xbf16> to tensor<50x64xf32>
// BF16: xfmr.embedding %{{.*}}, %[[TABLE]]
// BF16: xfmr.linear %{{.*}}, %[[FCW]]
// BF16: xfmr.matmul %{{.*}}, %[[HEADW]] {transpose_rhs}
// BF16-LABEL: func @untouched
// BF16-NOT: xfmr.quantized
// With embeddings, the table is int8 too, in groups along its rows: the
// tied head and the embedding read one int8 copy, and the f32 argument goes.
// EMB-LABEL: func @forward
// EMB-NOT: tensor<50x64xf32> {xfmr.param
// EMB-SAME: %[[TABLEQ:[^:]*]]: tensor<50x64xi8> {xfmr.param = "wte", xfmr.quantized = {axis = 1 : i64, group_size = 64 : i64, part = "values"}}
// EMB-SAME: %[[TABLES:[^:]*]]: tensor<50x1xf32> {xfmr.param = "wte", xfmr.quantized = {axis = 1 : i64, group_size = 64 : i64, part = "scales"}}
// EMB: %[[TABLE:.*]] = xfmr.dequantize %[[TABLEQ]], %[[TABLES]] {axis = 1 : i64, group_size = 64 : i64}
// EMB: xfmr.embedding %{{.*}}, %[[TABLE]]
// EMB: xfmr.matmul %{{.*}}, %[[TABLE]] {transpose_rhs}
// EMBBF16-LABEL: func @forward
// EMBBF16-NOT: tensor<50x64xf32> {xfmr.param
// EMBBF16: %[[TABLE:.*]] = arith.extf %{{.*}} : tensor<50x64xbf16> to tensor<50x64xf32>
// EMBBF16: xfmr.embedding %{{.*}}, %[[TABLE]]
// BF16SCALES: tensor<96x64xi8> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, group_size = 32 : i64, part = "values", transposed}}
// BF16SCALES-SAME: tensor<96x2xbf16> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, group_size = 32 : i64, part = "scales", transposed}}
// BF16SCALES: xfmr.dequantize %{{.*}}, %{{.*}} {axis = 1 : i64, group_size = 32 : i64} : (tensor<96x64xi8>, tensor<96x2xbf16>) -> tensor<96x64xf32>
// F16SCALES: tensor<96x32xi8> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "values", transposed}}
// F16SCALES-SAME: tensor<96x2xf16> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "scales", transposed}}
// F16SCALES: xfmr.dequantize %{{.*}}, %{{.*}} {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : (tensor<96x32xi8>, tensor<96x2xf16>) -> tensor<96x64xf32>
// F64SCALES: error: xfmr-quantize-weights: scales are f32, bf16 or f16, got 'f64'
// per-weight storages (a GGUF file's): each weight its own type, groups,
// mins and scale type (scale-type's where the entry names none).
// PERWEIGHT-LABEL: func @forward
// PERWEIGHT-SAME: tensor<50x64xi8> {xfmr.param = "wte", xfmr.quantized = {axis = 1 : i64, group_size = 16 : i64, part = "values"}}
// PERWEIGHT-SAME: tensor<50x4xbf16> {xfmr.param = "wte", xfmr.quantized = {axis = 1 : i64, group_size = 16 : i64, part = "scales"}}
// PERWEIGHT-SAME: tensor<96x32xi8> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "values", transposed}}
// PERWEIGHT-SAME: tensor<96x2xf16> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "scales", transposed}}
// PERWEIGHT-SAME: tensor<96x2xf16> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "mins", transposed}}
// PERWEIGHTBAD: error: xfmr-quantize-weights: per-weight 'fc.weight=int4:32:f16:mins': expected name=int8|int4:<group>[:mins][:<scale type>] or name=<float type>
// PERWEIGHTFLOAT: error: xfmr-quantize-weights: per-weight 'fc.weight=bf16:f16': the group size is not a number
// With type=int4, two values a byte (the stored input side halved), a scale
// and with `mins` a minimum per group of 32.
// INT4-LABEL: func @forward
// INT4-SAME: %[[HEADQ:[^:]*]]: tensor<50x32xi8> {xfmr.param = "wte", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "values"}}
// INT4-SAME: %[[HEADS:[^:]*]]: tensor<50x2xf32> {xfmr.param = "wte", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "scales"}}
// INT4-SAME: %[[HEADM:[^:]*]]: tensor<50x2xf32> {xfmr.param = "wte", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "mins"}}
// INT4-SAME: tensor<96x32xi8> {xfmr.param = "fc.weight", xfmr.quantized = {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64, part = "values", transposed}}
// INT4: %[[HEAD:.*]] = xfmr.dequantize %[[HEADQ]], %[[HEADS]], %[[HEADM]] {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : (tensor<50x32xi8>, tensor<50x2xf32>, tensor<50x2xf32>) -> tensor<50x64xf32>
// INT4: xfmr.matmul %{{.*}}, %[[HEAD]] {transpose_rhs}
// INT4GROUP: error: xfmr-quantize-weights: int4 groups are whole blocks of 32 values (group-size 32, 64, 128, ...), got 0
// MINS: error: xfmr-quantize-weights: mins apply to type=int4
// INT2: error: xfmr-quantize-weights: type must be int8, int4, bf16, f16 or f32, got 'int2'
// G48: error: weight 'wte': its input side (64) is not a multiple of the group size 48
// With the weights' own type, only a weight stored [in, out] changes: it is
// kept transposed, nothing widened; the tied head, read [out, in], stays.
// F32-LABEL: func @forward
// F32-SAME: %[[TABLE:[^:]*]]: tensor<50x64xf32> {xfmr.param = "wte"}
// F32-SAME: %[[BIAS:[^:]*]]: tensor<96xf32> {xfmr.param = "fc.bias"}
// F32-SAME: %[[FC:[^:]*]]: tensor<96x64xf32> {xfmr.param = "fc.weight", xfmr.quantized = {part = "f32", transposed}}
// F32-NOT: xfmr.quantized
// F32-NOT: arith.extf
// F32: %[[FCW:.*]] = xfmr.transpose %[[FC]] {permutation = array<i64: 1, 0>} : (tensor<96x64xf32>) -> tensor<64x96xf32>
// F32: xfmr.linear %{{.*}}, %[[FCW]], %[[BIAS]]
// F32: xfmr.matmul %{{.*}}, %[[TABLE]] {transpose_rhs}
func.func @forward(%ids: tensor<2x4xi32> {xfmr.input = "input_ids"},
                   %wte: tensor<50x64xf32> {xfmr.param = "wte"},
                   %w: tensor<64x96xf32> {xfmr.param = "fc.weight"},
                   %b: tensor<96xf32> {xfmr.param = "fc.bias"})
    -> (tensor<2x4x96xf32>, tensor<2x4x50xf32>) {
  %x = xfmr.embedding %ids, %wte : (tensor<2x4xi32>, tensor<50x64xf32>) -> tensor<2x4x64xf32>
  %h = xfmr.linear %x, %w, %b : (tensor<2x4x64xf32>, tensor<64x96xf32>, tensor<96xf32>) -> tensor<2x4x96xf32>
  %l = xfmr.matmul %x, %wte {transpose_rhs} : (tensor<2x4x64xf32>, tensor<50x64xf32>) -> tensor<2x4x50xf32>
  return %h, %l : tensor<2x4x96xf32>, tensor<2x4x50xf32>
}

// -----

// Negative: inputs, vectors, weights used only elsewhere, and weights that
// are already narrow stay as they are.
// CHECK-LABEL: func @untouched
// CHECK-NOT: xfmr.dequantize
// CHECK-NOT: xfmr.quantized
func.func @untouched(%x: tensor<4x64xf32> {xfmr.input = "x"}, %w: tensor<64x64xf32> {xfmr.input = "w"},
                     %t: tensor<64x64xf32> {xfmr.param = "t"}, %n: tensor<64x64xbf16> {xfmr.param = "n"})
    -> (tensor<4x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) {
  %y = xfmr.matmul %x, %w : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  %z = xfmr.add %t, %t : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %e = arith.extf %n : tensor<64x64xbf16> to tensor<64x64xf32>
  return %y, %z, %e : tensor<4x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// A bf16 model with type=bf16: as with f32 and type=f32, only the weight
// stored [in, out] changes, transposed; nothing is widened.
// BF16-LABEL: func @bf16_model
// BF16-SAME: %[[TABLE:[^:]*]]: tensor<50x64xbf16> {xfmr.param = "wte"}
// BF16-SAME: %[[W:[^:]*]]: tensor<96x64xbf16> {xfmr.param = "fc.weight", xfmr.quantized = {part = "bf16", transposed}}
// BF16-NOT: arith.extf
// BF16: %[[WT:.*]] = xfmr.transpose %[[W]] {permutation = array<i64: 1, 0>} : (tensor<96x64xbf16>) -> tensor<64x96xbf16>
// BF16: xfmr.matmul %{{.*}}, %[[WT]] :
// BF16: xfmr.matmul %{{.*}}, %[[TABLE]] {transpose_rhs}
// F32-LABEL: func @bf16_model
// F32-NOT: xfmr.quantized
func.func @bf16_model(%x: tensor<4x64xbf16> {xfmr.input = "x"},
                      %wte: tensor<50x64xbf16> {xfmr.param = "wte"},
                      %w: tensor<64x96xbf16> {xfmr.param = "fc.weight"})
    -> (tensor<4x96xbf16>, tensor<4x50xbf16>) {
  %h = xfmr.matmul %x, %w : (tensor<4x64xbf16>, tensor<64x96xbf16>) -> tensor<4x96xbf16>
  %l = xfmr.matmul %x, %wte {transpose_rhs} : (tensor<4x64xbf16>, tensor<50x64xbf16>) -> tensor<4x50xbf16>
  return %h, %l : tensor<4x96xbf16>, tensor<4x50xbf16>
}

// -----

// The weights of fused products written by hand (fused_linear; a gated
// MLP's gate and up) are quantized as a linear's are.
// CHECK-LABEL: func @fused_products
// CHECK-SAME: tensor<32x64xi8> {xfmr.param = "mlp.gate_proj.weight", xfmr.quantized = {axis = 1 : i64, group_size = 64 : i64, part = "values"}}
// CHECK-SAME: tensor<32x64xi8> {xfmr.param = "mlp.up_proj.weight", xfmr.quantized = {axis = 1 : i64, group_size = 64 : i64, part = "values"}}
// CHECK-SAME: tensor<64x32xi8> {xfmr.param = "mlp.down_proj.weight", xfmr.quantized = {axis = 1 : i64, group_size = 32 : i64, part = "values"}}
// CHECK-DAG: %[[G:.*]] = xfmr.dequantize {{.*}} -> tensor<32x64xf32>
// CHECK-DAG: %[[U:.*]] = xfmr.dequantize {{.*}} -> tensor<32x64xf32>
// CHECK-DAG: %[[D:.*]] = xfmr.dequantize {{.*}} -> tensor<64x32xf32>
// CHECK: %[[H:.*]] = xfmr.gated_linear %{{.*}}, %[[G]], %[[U]]
// CHECK: xfmr.fused_linear %[[H]], %[[D]]
func.func @fused_products(%x: tensor<4x64xf32> {xfmr.input = "x"},
                          %wg: tensor<32x64xf32> {xfmr.param = "mlp.gate_proj.weight"},
                          %wu: tensor<32x64xf32> {xfmr.param = "mlp.up_proj.weight"},
                          %wd: tensor<64x32xf32> {xfmr.param = "mlp.down_proj.weight"}) -> tensor<4x64xf32> {
  %h = xfmr.gated_linear %x, %wg, %wu {activation = #xfmr.activation<silu>, transpose_weight}
       : (tensor<4x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<4x32xf32>
  %y = xfmr.fused_linear %h, %wd residual(%x) {transpose_weight}
       : (tensor<4x32xf32>, tensor<64x32xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}
