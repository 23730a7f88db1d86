#!/bin/bash
# On a GPU machine, from the repository root, with build/gpu-bench made by
# bench/gpu/prepare.sh: the whole models against the float64 reference,
# generation against transformers and its speed (bench/gpu/generation.py),
# the per-op and gradient tests against PyTorch, then bench/gpu/bench.py
# (kernel times by ncu, PyTorch's on the same GPU), then training runs.
# Writes bench.txt and generate.txt into $OUT when that is set.
[ -d build/gpu-bench ] || tar -xzf build/gpu-bench.tgz -C build
cd build/gpu-bench
LIB=../../test/e2e_lib
IN=../../test/e2e/Inputs
export PYTHONUNBUFFERED=1
# The OpenMP runtime the executables link, which a machine without LLVM lacks.
export LD_LIBRARY_PATH=$(pwd)/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
echo "== whole models on the GPU vs the float64 reference"
# Tolerances as test/e2e/low-precision.test's (bf16 8, f16 11 significant bits).
for exe in e2e/*.all e2e/*.noattn e2e/*.noepi e2e/*.bf16 e2e/*.f16; do
  cfg=$(basename ${exe%.*}); tol=1e-4; case $exe in *.bf16) tol=2e-2;; *.f16) tol=4e-3;; esac
  timeout 60 ./$exe --weights=e2e/$cfg.w.safetensors --input=e2e/$cfg.tokens --output=$exe.npy || { echo "FAIL: $exe did not run"; continue; }
  echo -n "$exe: "; python3 $LIB/reference.py check --config $IN/$cfg.json --weights e2e/$cfg.w.safetensors --tokens e2e/$cfg.tokens --output $exe.npy --rel-tol $tol
done
echo "== the object + header form (the caller's host buffers, staged at each call) vs the executable"
./embed/run_model embed/w.safetensors 5 17 42 96 0 3 > embed/embedded.txt && echo "5 17 42 96 0 3" | ./embed/model --weights=embed/w.safetensors --top=5 > embed/runner.txt && diff embed/embedded.txt embed/runner.txt && echo "PASS: embedded gpt2-tiny prints the executable's top logits"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
echo "== generation on the GPU vs transformers (bounds as test/e2e/generate's)"
timeout 120 python3 $LIB/generation_check.py --stage check --workdir generate gpt2-greedy gpt2-bf16 gpt2-bf16-cache gpt2-bf16-weights gpt2-int8 bart-greedy marian-greedy t5-greedy
[ "$cc" = 9.0 ] && timeout 60 python3 $LIB/generation_check.py --stage check --workdir generate.sm90a gpt2-bf16
echo "== generation speed"
NCU=$NCU timeout 420 python3 ../../bench/gpu/generation.py 2>&1 | tee ${OUT:-.}/generate.txt
echo "== per-op tests on the GPU vs PyTorch"
for c in linear:linear normalization:normalization fused-attention:attention low-precision:low_precision mma-gemm:mma_gemm cache-attention:cache_attention cache-attention-bf16:cache_attention_bf16; do
  f=${c%%:*}; k=${c##*:}
  timeout 60 ./ops/$f --inputs=ops/$f.in.safetensors --output=ops/$f.out.safetensors && python3 $LIB/ops.py check $k ops/$f.in.safetensors ops/$f.out.safetensors
done
timeout 60 ./ops/int8-weights --inputs=ops/int8-weights.in.safetensors --weights=ops/int8-weights.in.safetensors --output=ops/int8-weights.out.safetensors && python3 $LIB/ops.py check int8_weights_32 ops/int8-weights.in.safetensors ops/int8-weights.out.safetensors
if [ "$cc" = 9.0 ]; then
  echo "sm_90a (warpgroup MMA attention forward and backward, GEMMs):"
  timeout 60 ./e2e/gpt2-tiny.sm90a --weights=e2e/gpt2-tiny.w.safetensors --input=e2e/gpt2-tiny.tokens --output=e2e/gpt2-tiny.sm90a.npy && echo -n "e2e/gpt2-tiny.sm90a (bf16): " && python3 $LIB/reference.py check --config $IN/gpt2-tiny.json --weights e2e/gpt2-tiny.w.safetensors --tokens e2e/gpt2-tiny.tokens --output e2e/gpt2-tiny.sm90a.npy --rel-tol 2e-2
  for c in low-precision:low_precision mma-gemm:mma_gemm cache-attention-bf16:cache_attention_bf16; do
    f=${c%%:*}; k=${c##*:}
    timeout 60 ./ops/$f.sm90a --inputs=ops/$f.in.safetensors --output=ops/$f.sm90a.out.safetensors && python3 $LIB/ops.py check $k ops/$f.in.safetensors ops/$f.sm90a.out.safetensors
  done
  timeout 60 ./ops/grad-bf16.sm90a --inputs=ops/grad-low.in.safetensors --output=ops/grad-bf16.sm90a.out.safetensors && python3 $LIB/ops.py check backward_bf16 ops/grad-low.in.safetensors ops/grad-bf16.sm90a.out.safetensors
fi
timeout 60 ./ops/grad --inputs=ops/grad.in.safetensors --weights=ops/grad.in.safetensors --output=ops/grad.out.safetensors && python3 $LIB/ops.py check backward ops/grad.in.safetensors ops/grad.out.safetensors
for d in bf16 f16; do
  timeout 60 ./ops/grad-$d --inputs=ops/grad-low.in.safetensors --output=ops/grad-$d.out.safetensors && python3 $LIB/ops.py check backward_$d ops/grad-low.in.safetensors ops/grad-$d.out.safetensors
done
echo "== whole-model gradients on the GPU vs float64 autograd (tolerances as the lit tests')"
for d in f32 bf16; do
  tol=1e-4; [ $d = bf16 ] && tol=5e-2
  timeout 60 python3 $LIB/grads.py --stage check --dtype $d --rel-tol $tol --config $IN/gpt2-tiny.json --workdir grads/gpt2-tiny-$d > grads/$d.txt
  echo "gpt2-tiny $d: $(grep -c '^PASS' grads/$d.txt) PASS, $(grep -c '^FAIL' grads/$d.txt) FAIL"; grep -E ' loss |^FAIL' grads/$d.txt
done
echo "== timings"
NCU=$NCU timeout ${BENCH_TIMEOUT:-420} python3 ../../bench/gpu/bench.py 2>&1 | tee ${OUT:-.}/bench.txt
echo "== training the reverse-sequence example on the GPU, 300 steps (expect >= 99% held-out token accuracy)"
for d in f32 bf16 f16; do
  echo "$d:"; timeout 90 ./train/reverse-$d --steps=300 --train=train/train.txt --eval=train/eval.txt --log-every=100 | tail -3
done
