#!/usr/bin/env bash
# Writes the code the GPU kernels compile to - the PTX of the tensor-core,
# f32 and GEMM test inputs for sm_80, sm_90 and sm_90a, and the LLVM IR of
# their CPU emulation - into DIR, and prints one MD5 line per file. A
# refactoring of the kernels that prints the same lines before and after
# changed no instruction, so the kernels' speed cannot have moved; that is
# the check to run where no GPU can time them.
#   scripts/gpu-code-digest.sh DIR          (about 4 minutes on 2 cores)
# XFMR_BUILD_DIR: the build whose xfmrc to use (default build/).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: scripts/gpu-code-digest.sh DIR}"
xfmrc="${XFMR_BUILD_DIR:-$root/build}/bin/xfmrc"
mkdir -p "$out"
e2e="$root/test/e2e"
bf16="--entry=loss_bf16 --grad --grad-inputs=q_bf16,k_bf16,v_bf16,cq_bf16,ck_bf16,cv_bf16,lq_bf16,lk_bf16,lv_bf16,hq_bf16,hk_bf16,hv_bf16"
f16="--entry=loss_f16 --grad --grad-inputs=q_f16,k_f16,v_f16,cq_f16,ck_f16,cv_f16,lq_f16,lk_f16,lv_f16,hq_f16,hk_f16,hv_f16"
forward=(low-precision cache-attention-bf16 long-attention fused-attention cache-attention
         position-bias mma-gemm)
jobs=()
for arch in sm_80 sm_90 sm_90a; do
  for name in "${forward[@]}"; do
    jobs+=("$xfmrc $e2e/ops/$name.mlir --target=nvptx --gpu-arch=$arch --emit=ptx -o $out/$name.$arch.ptx")
  done
  jobs+=("$xfmrc $e2e/grad/low-precision.mlir $bf16 --target=nvptx --gpu-arch=$arch --emit=ptx -o $out/grad-bf16.$arch.ptx")
  jobs+=("$xfmrc $e2e/grad/low-precision.mlir $f16 --target=nvptx --gpu-arch=$arch --emit=ptx -o $out/grad-f16.$arch.ptx")
  jobs+=("$xfmrc $e2e/grad/long-attention.mlir --grad --target=nvptx --gpu-arch=$arch --emit=ptx -o $out/grad-long.$arch.ptx")
  jobs+=("$xfmrc $e2e/grad/kernels.mlir --grad --grad-inputs=q,k,v,cq,ck,cv,x,y,z --target=nvptx --gpu-arch=$arch --emit=ptx -o $out/grad-kernels.$arch.ptx")
done
for arch in sm_80 sm_90a; do
  for name in low-precision cache-attention-bf16 long-attention fused-attention mma-gemm; do
    jobs+=("$xfmrc $e2e/ops/$name.mlir --emulate-gpu-kernels --gpu-arch=$arch --emit=llvm -o $out/$name.emulated.$arch.ll")
  done
  jobs+=("$xfmrc $e2e/grad/low-precision.mlir $bf16 --emulate-gpu-kernels --reverse-gpu-threads --gpu-arch=$arch --emit=llvm -o $out/grad-bf16.emulated.$arch.ll")
  jobs+=("$xfmrc $e2e/grad/long-attention.mlir --grad --emulate-gpu-kernels --gpu-arch=$arch --emit=llvm -o $out/grad-long.emulated.$arch.ll")
done
printf '%s\n' "${jobs[@]}" | xargs -P "${XFMR_JOBS:-2}" -I{} bash -c "{}"
cd "$out" && md5sum -- *.ptx *.ll
