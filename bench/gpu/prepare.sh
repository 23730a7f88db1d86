#!/bin/bash
# Builds, on this machine (LLVM/MLIR 22), everything bench/gpu/run.sh runs on a
# GPU machine (which has CUDA and PyTorch but no LLVM): nvptx executables of
# the whole-model, per-op and gradient tests with their inputs, and the
# attention / GPT-2 block benchmark models, and training executables. From the repository root, after
# the build: bench/gpu/prepare.sh; then carry build/gpu-bench to the GPU
# machine and run bench/gpu/run.sh there.
set -e
ROOT=$(pwd)
X=$ROOT/build/bin/xfmrc
PY=/usr/bin/python3
LIB=$ROOT/test/e2e_lib
IN=$ROOT/test/e2e/Inputs
rm -rf build/gpu-bench && mkdir -p build/gpu-bench && cd build/gpu-bench
mkdir -p e2e ops bench lib
cp -L /usr/lib/llvm-22/lib/libomp.so.5 lib/
# Whole models: weights/tokens from the reference, executables for nvptx.
gen() { $PY $LIB/reference.py generate --config $IN/$1.json --weights e2e/$1.w.safetensors --tokens e2e/$1.tokens --sequences $2 --seq-len $3 --decoder-seq-len $4 --seed $5; }
gen gpt2-tiny 5 12 0 1
gen bert-tiny 5 10 0 4
gen transformer-pre-ln 4 8 10 7
$X $IN/gpt2-tiny.json --target=nvptx --batch=2 --seq-len=12 -o e2e/gpt2-tiny.all
$X $IN/gpt2-tiny.json --target=nvptx --batch=2 --seq-len=12 --fuse-attention=false -o e2e/gpt2-tiny.noattn
$X $IN/gpt2-tiny.json --target=nvptx --batch=2 --seq-len=12 --dtype=bf16 -o e2e/gpt2-tiny.bf16
$X $IN/gpt2-tiny.json --target=nvptx --batch=2 --seq-len=12 --dtype=bf16 --gpu-arch=sm_90a -o e2e/gpt2-tiny.sm90a
$X $IN/bert-tiny.json --target=nvptx --batch=2 --seq-len=10 -o e2e/bert-tiny.all
$X $IN/bert-tiny.json --target=nvptx --batch=2 --seq-len=10 --fuse-epilogues=false -o e2e/bert-tiny.noepi
$X $IN/bert-tiny.json --target=nvptx --batch=2 --seq-len=10 --dtype=bf16 -o e2e/bert-tiny.bf16
$X $IN/transformer-pre-ln.json --target=nvptx --batch=2 --seq-len=8 --decoder-seq-len=10 -o e2e/transformer-pre-ln.all
$X $IN/transformer-pre-ln.json --target=nvptx --batch=2 --seq-len=8 --decoder-seq-len=10 --dtype=f16 -o e2e/transformer-pre-ln.f16
# The object + header form with the caller's host buffers, which each call
# stages (examples/embed/run_model.c, as test/Examples/embed.test).
mkdir -p embed
$PY $LIB/reference.py generate --config $IN/gpt2-tiny.json --weights embed/w.safetensors --tokens embed/unused.txt --sequences 1 --seq-len 10
$X $IN/gpt2-tiny.json --target=nvptx --seq-len=10 --emit=obj --name=model -o embed/model.o
$X $IN/gpt2-tiny.json --target=nvptx --seq-len=10 --emit=header --name=model -o embed/model.h
clang-22 -std=c11 -Wall -Werror -Iembed -I$ROOT/include $ROOT/examples/embed/run_model.c embed/model.o $ROOT/build/lib/libxfmr_runtime.a $ROOT/build/lib/libxfmr_cuda.a -ldl -lstdc++ -lm -o embed/run_model
$X $IN/gpt2-tiny.json --target=nvptx --seq-len=10 -o embed/model
# Per-op tests.
for c in linear:linear normalization:normalization fused-attention:attention low-precision:low_precision mma-gemm:mma_gemm cache-attention:cache_attention cache-attention-bf16:cache_attention_bf16; do
  f=${c%%:*}; k=${c##*:}
  $PY $LIB/ops.py generate $k ops/$f.in.safetensors
  $X $ROOT/test/e2e/ops/$f.mlir --target=nvptx -o ops/$f
done
# int8 weights with a scale per 32 (the skinny products read them as stored).
$PY $LIB/ops.py generate int8_weights ops/int8-weights.in.safetensors
$X $ROOT/test/e2e/ops/int8-weights.mlir --target=nvptx --weights-dtype=int8 --weight-group-size=32 -o ops/int8-weights
$PY $LIB/ops.py generate backward ops/grad.in.safetensors
$X $ROOT/test/e2e/grad/kernels.mlir --target=nvptx --grad --grad-inputs=q,k,v,cq,ck,cv,x,y,z -o ops/grad
# The bf16/f16 attention forward on warpgroup MMAs (sm_90a: runs on an H100/H200 only).
for f in low-precision mma-gemm cache-attention-bf16; do $X $ROOT/test/e2e/ops/$f.mlir --target=nvptx --gpu-arch=sm_90a -o ops/$f.sm90a; done
# Whole-model gradients, f32 and mixed-precision bf16 (test/e2e/gpu/gpt2-tiny-grad.test).
for d in f32 bf16; do
  $PY $LIB/grads.py --stage prepare --xfmrc $X --xfmrc-flag=--target=nvptx --dtype $d --config $IN/gpt2-tiny.json --workdir grads/gpt2-tiny-$d --batch 2 --seq-len 9 --seed 3
done
$PY $LIB/ops.py generate backward_bf16 ops/grad-low.in.safetensors
for d in bf16 f16; do
  $X $ROOT/test/e2e/grad/low-precision.mlir --entry=loss_$d --grad --grad-inputs=q_$d,k_$d,v_$d,cq_$d,ck_$d,cv_$d,lq_$d,lk_$d,lv_$d,hq_$d,hk_$d,hv_$d --target=nvptx -o ops/grad-$d
done
# ... and the bf16 attention backward on warpgroup MMAs (sm_90a).
$X $ROOT/test/e2e/grad/low-precision.mlir --entry=loss_bf16 --grad --grad-inputs=q_bf16,k_bf16,v_bf16,cq_bf16,ck_bf16,cv_bf16,lq_bf16,lk_bf16,lv_bf16,hq_bf16,hk_bf16,hv_bf16 --target=nvptx --gpu-arch=sm_90a -o ops/grad-bf16.sm90a
# Generators (KV cache, greedy decoding) of random GPT-2, BART, Marian and T5
# checkpoints, checked there against transformers (test/e2e/generate).
GENERATE="gpt2-greedy gpt2-bf16 gpt2-bf16-cache gpt2-bf16-weights gpt2-int8 bart-greedy marian-greedy t5-greedy"
$ROOT/build/oracle-venv/bin/python $LIB/generation_check.py --stage prepare --xfmrc $X --xfmrc-flag=--target=nvptx --workdir generate $GENERATE
$ROOT/build/oracle-venv/bin/python $LIB/generation_check.py --stage prepare --xfmrc $X --xfmrc-flag=--target=nvptx --xfmrc-flag=--gpu-arch=sm_90a --workdir generate.sm90a gpt2-bf16
# GPT-2 small generators for bench/gpu/generation.py (weights written there).
$ROOT/build/oracle-venv/bin/python -c "import transformers as tf; tf.GPT2Config().save_pretrained('generate/gpt2-small')"
# With BEFORE_XFMRC (an earlier build's xfmrc) also theirs, in generate/before,
# which bench/gpu/generation.py times beside them.
for f in "f32" "bf16 --dtype=bf16" "int8 --weights-dtype=int8"; do
  set -- $f; $X generate/gpt2-small/config.json --generate --target=nvptx $2 -o generate/gpt2-small-$1
  if [ -n "${BEFORE_XFMRC:-}" ]; then
    mkdir -p generate/before
    $BEFORE_XFMRC generate/gpt2-small/config.json --generate --target=nvptx $2 -o generate/before/gpt2-small-$1
  fi
done
# Training executables: the reverse-sequence example in f32, mixed-precision
# bf16 and f16 (dynamic loss scaling), as test/Train/reverse-sequence.test.
mkdir -p train && $PY $ROOT/examples/reverse-sequence/make_data.py train > /dev/null
for d in f32 bf16 f16; do
  $X --train $ROOT/examples/reverse-sequence/model.json --target=nvptx --dtype=$d --batch=32 --lr=1e-3 --warmup-steps=100 --steps=1000 -o train/reverse-$d
done
# Benchmark models: attention forward (batch 4, 16 heads), its backward, a
# GPT-2 small block at seq 1024 in f32 and bf16.
$PY $ROOT/bench/gpu/models.py bench
for f in bench/attn_*.mlir bench/attnbf16_*.mlir bench/gemm_*.mlir; do $X $f --target=nvptx -o ${f%.mlir}; done
for f in bench/attnbf16_*.mlir bench/gemm_*.mlir bench/block1024_bf16.mlir; do $X $f --target=nvptx --gpu-arch=sm_90a -o ${f%.mlir}.sm90a; done
for f in bench/attnbwd*.mlir; do $X $f --target=nvptx --grad --grad-inputs=q,k,v --entry=loss -o ${f%.mlir}; done
for f in bench/attnbwdbf16*.mlir; do $X $f --target=nvptx --gpu-arch=sm_90a --grad --grad-inputs=q,k,v --entry=loss -o ${f%.mlir}.sm90a; done
for f in bench/block1024*.mlir; do $X $f --target=nvptx -o ${f%.mlir}; done
cd .. && tar -czf gpu-bench.tgz gpu-bench
