"""Kernel times (ncu gpu__time_duration) of xfmr's GPU attention forward and
backward, bf16 matrix products and GPT-2 block next to PyTorch's on the same GPU, with each
result's error against PyTorch. Run by bench/gpu/run.sh from
build/gpu-bench (NCU: the ncu binary; SECTIONS: a comma-separated subset of
attention,attention_bf16,backward,gemm,block)."""
import glob, os, subprocess, sys
import numpy as np, torch
sys.path.insert(0, "../../test/e2e_lib"); sys.path.insert(0, "../../bench")
import safetensors_io, models
from ncu import ncu_kernels

B, H = 4, 16

def wall(cmd):
    out = subprocess.run(cmd + ["--benchmark=5"], capture_output=True, text=True, timeout=300)
    line = [l for l in (out.stderr + out.stdout).splitlines() if "benchmark:" in l]
    return line[-1] if line else out.stderr[-300:]

def cuda_ms(fn, reps=10):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record(); fn(); end.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return min(times)

SECTIONS = os.environ.get("SECTIONS", "attention,attention_bf16,backward,gemm,block").split(",")
def wanted(section):
    return section in SECTIONS

rng = np.random.default_rng(0)
print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
if wanted("attention"):
    print("attention forward, batch 4, 16 heads (FLOPs 4*B*H*S^2*D, halved when causal)")
    print(f"{'config':26} {'xfmr f32 ms':>11} {'TFLOP/s':>8} {'torch f32':>10} {'TFLOP/s':>8} {'torch bf16':>10} {'TFLOP/s':>8}  max|err|")
    for s, d in [(1024, 64), (4096, 64), (4096, 128)]:
        for causal in (True, False):
            name = f"attn_s{s}_d{d}_{'causal' if causal else 'full'}"
            q, k, v = (rng.standard_normal((B, s, H, d)).astype(np.float32) for _ in range(3))
            safetensors_io.write(f"bench/{name}.in.safetensors", dict(q=q, k=k, v=v))
            cmd = [f"bench/{name}", f"--inputs=bench/{name}.in.safetensors", f"--output=bench/{name}.out.safetensors"]
            kernels = ncu_kernels(cmd)
            attn = sum(t for n, t in kernels if "kernel" in n)
            flops = 4 * B * H * s * s * d / (2 if causal else 1)
            out = safetensors_io.read(f"bench/{name}.out.safetensors")["o"]
            tq, tk, tv = (torch.tensor(a).cuda().transpose(1, 2) for a in (q, k, v))
            ref = torch.nn.functional.scaled_dot_product_attention(tq.double(), tk.double(), tv.double(), is_causal=causal).transpose(1, 2).cpu().numpy()
            err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
            f32 = cuda_ms(lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal))
            bq, bk, bv = (t.bfloat16() for t in (tq, tk, tv))
            bf16 = cuda_ms(lambda: torch.nn.functional.scaled_dot_product_attention(bq, bk, bv, is_causal=causal))
            print(f"{name:26} {attn:11.3f} {flops / attn / 1e9:8.2f} {f32:10.3f} {flops / f32 / 1e9:8.2f} {bf16:10.3f} {flops / bf16 / 1e9:8.2f}  {err:.1e}")
            print("   kernels:", ", ".join(f"{t:.3f}" for n, t in kernels), "| wall", wall(cmd))
if wanted("attention_bf16"):
    print("attention forward bf16 (tensor cores), batch 4, 16 heads; error on batch 0, heads 0-1 vs float64 on the bf16 inputs;")
    print("xfmr: sm_90 (mma.sync), and sm_90a (wgmma) where the GPU is compute capability 9.0")
    print(f"{'config':28} {'xfmr ms':>9} {'TFLOP/s':>8} {'torch bf16':>10} {'TFLOP/s':>8} {'xfmr/torch':>10}  max|err|")
    sm90a = torch.cuda.get_device_capability() == (9, 0)
    bf16_configs = [tuple(int(x[1:]) for x in os.path.basename(f).split("_")[1:3]) for f in glob.glob("bench/attnbf16_*_causal.mlir")]
    for s, d in sorted(bf16_configs, key=lambda sd: (sd[1], sd[0])):
        for causal in (True, False):
            name = f"attnbf16_s{s}_d{d}_{'causal' if causal else 'full'}"
            q, k, v = (rng.standard_normal((B, s, H, d)).astype(np.float32) for _ in range(3))
            safetensors_io.write(f"bench/{name}.in.safetensors", dict(q=q, k=k, v=v))
            flops = 4 * B * H * s * s * d / (2 if causal else 1)
            bq, bk, bv = (torch.tensor(a).cuda().bfloat16().transpose(1, 2) for a in (q, k, v))
            t16 = cuda_ms(lambda: torch.nn.functional.scaled_dot_product_attention(bq, bk, bv, is_causal=causal))
            ref = torch.nn.functional.scaled_dot_product_attention(*(x[:1, :2].double() for x in (bq, bk, bv)), is_causal=causal).transpose(1, 2).cpu().numpy()
            del bq, bk, bv
            for variant in [name] + ([f"{name}.sm90a"] if sm90a else []):
                cmd = [f"bench/{variant}", f"--inputs=bench/{name}.in.safetensors", f"--output=bench/{variant}.out.safetensors"]
                kernels = ncu_kernels(cmd)
                attn = max(t for _, t in kernels)
                got = safetensors_io.read(f"bench/{variant}.out.safetensors")["o"][:1, :, :2]
                err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
                print(f"{variant:28} {attn:9.3f} {flops / attn / 1e9:8.1f} {t16:10.3f} {flops / t16 / 1e9:8.1f} {t16 / attn:10.2f}  {err:.1e}")
                print("   kernels:", ", ".join(f"{t:.3f}" for _, t in kernels))
            os.remove(f"bench/{name}.in.safetensors")
if wanted("backward"):
    print("attention backward (the loss program: forward, backward kernels, loss); f32, and bf16 (forward and backward on tensor cores)")
    backward = [os.path.basename(f)[:-5].split("_") for f in glob.glob("bench/attnbwd*.mlir")]
    for prefix, s, d, mode in sorted((p, int(s[1:]), int(d[1:]), m) for p, s, d, m in backward):
        causal = mode == "causal"
        name = f"{prefix}_s{s}_d{d}_{mode}"
        arrays = {n: rng.standard_normal((B, s, H, d)).astype(np.float32) for n in "qkvw"}
        if prefix.endswith("bf16"):
            arrays = {n: torch.tensor(a).bfloat16().float().numpy() for n, a in arrays.items()}
        safetensors_io.write(f"bench/{name}.in.safetensors", arrays)
        tq, tk, tv = (torch.tensor(arrays[n]).cuda().double().transpose(1, 2).requires_grad_() for n in "qkv")
        tw = torch.tensor(arrays["w"]).cuda().double().transpose(1, 2)
        (torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal) * tw).sum().backward()
        flops = 2.5 * 4 * B * H * s * s * d / (2 if causal else 1)
        def torch_bwd(dtype):
            a = [torch.tensor(arrays[n]).cuda().to(dtype).transpose(1, 2).requires_grad_() for n in "qkv"]
            o = torch.nn.functional.scaled_dot_product_attention(*a, is_causal=causal)
            g = torch.randn_like(o)
            return cuda_ms(lambda: torch.autograd.grad(o, a, g, retain_graph=True))
        t32, t16 = torch_bwd(torch.float32), torch_bwd(torch.bfloat16)
        # bf16: sm_90 (mma.sync), and sm_90a (wgmma) on compute capability 9.0.
        sm90a = prefix.endswith("bf16") and torch.cuda.get_device_capability() == (9, 0)
        for variant in [name] + ([f"{name}.sm90a"] if sm90a else []):
            cmd = [f"bench/{variant}", f"--inputs=bench/{name}.in.safetensors", f"--output=bench/{name}.out.safetensors"]
            kernels = ncu_kernels(cmd)
            total = sum(t for n, t in kernels)
            # The three largest kernels, in launch order: the forward attention, then the backward's two.
            top = [kernels[i][1] for i in sorted(sorted(range(len(kernels)), key=lambda i: -kernels[i][1])[:3])]
            out = safetensors_io.read(f"bench/{name}.out.safetensors")
            err = max(float(np.max(np.abs(out[f"grad:{n}"] - t.grad.transpose(1, 2).cpu().numpy())) / float(t.grad.abs().max())) for n, t in zip("qkv", (tq, tk, tv)))
            print(f"{variant}: xfmr all kernels {total:.3f} ms (forward attention {top[0]:.3f}, backward {top[1]:.3f} + {top[2]:.3f}), torch bwd f32 {t32:.3f} ms, bf16 {t16:.3f} ms; backward FLOPs 2.5x forward: xfmr {flops / sum(top[1:]) / 1e9:.2f} TFLOP/s (the backward's 2 kernels), torch f32 {flops / t32 / 1e9:.2f}, bf16 {flops / t16 / 1e9:.2f}; max rel err {err:.1e}")
if wanted("gemm"):
    print("bf16 matrix products C = A B (f32 accumulation), FLOPs 2*M*N*K; xfmr sm_90 (mma.sync), and sm_90a (wgmma) on compute capability 9.0")
    for m, n, k in [(1024, 3072, 768), (4096, 4096, 4096)]:
        name = f"gemm_bf16_{m}x{n}x{k}"
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        safetensors_io.write(f"bench/{name}.in.safetensors", dict(a=a, b=b))
        ta, tb = (torch.tensor(x).cuda().bfloat16() for x in (a, b))
        ref = (ta.double() @ tb.double()).cpu().numpy()
        t16 = cuda_ms(lambda: ta @ tb)
        fa, fb = ta.float(), tb.float()
        t32 = cuda_ms(lambda: fa @ fb)
        flops = 2 * m * n * k
        for variant in [name] + ([f"{name}.sm90a"] if torch.cuda.get_device_capability() == (9, 0) else []):
            cmd = [f"bench/{variant}", f"--inputs=bench/{name}.in.safetensors", f"--output=bench/{variant}.out.safetensors"]
            kernels = ncu_kernels(cmd)
            gemm = max(t for n_, t in kernels)
            got = safetensors_io.read(f"bench/{variant}.out.safetensors")["c"]
            err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
            print(f"{variant}: xfmr mma kernel {gemm:.3f} ms {flops / gemm / 1e9:.1f} TFLOP/s (all kernels {sum(t for _, t in kernels):.3f} ms), "
                  f"torch bf16 {t16:.3f} ms {flops / t16 / 1e9:.1f} TFLOP/s, torch f32 {t32:.3f} ms {flops / t32 / 1e9:.1f} TFLOP/s; max rel err vs float64 {err:.1e}")
            print("   kernels:", ", ".join(f"{t:.3f}" for _, t in kernels), "| wall", wall(cmd))
if wanted("block"):
    print("GPT-2 small block forward, seq 1024, batch 1: f32, and bf16 (weights rounded at load; "
          "PyTorch eager with bf16 weights)")
    inputs = models.random_inputs("block", 1024, 1)
    safetensors_io.write("bench/block.in.safetensors", inputs)
    def torch_block(w):
        x = w["x"]; D = 768; seq = 1024; p = "h.0."
        h = torch.nn.functional.layer_norm(x, (D,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = torch.addmm(w[p + "attn.c_attn.bias"], h.view(-1, D), w[p + "attn.c_attn.weight"])
        q, k, v = (t.view(1, seq, 12, 64).transpose(1, 2) for t in qkv.split(D, dim=-1))
        sc = (q @ k.transpose(-1, -2) * 0.125).masked_fill(~torch.ones(seq, seq, dtype=torch.bool, device="cuda").tril(), float("-inf"))
        a = (torch.softmax(sc, -1) @ v).transpose(1, 2).reshape(seq, D)
        x = x + torch.addmm(w[p + "attn.c_proj.bias"], a, w[p + "attn.c_proj.weight"]).view(1, seq, D)
        h = torch.nn.functional.layer_norm(x, (D,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = torch.nn.functional.gelu(torch.addmm(w[p + "mlp.c_fc.bias"], h.view(-1, D), w[p + "mlp.c_fc.weight"]), approximate="tanh")
        return x + torch.addmm(w[p + "mlp.c_proj.bias"], h, w[p + "mlp.c_proj.weight"]).view(1, seq, D)
    w32 = {n: torch.tensor(a).cuda() for n, a in inputs.items()}
    ref = torch_block(w32).cpu().numpy()
    variants = [("", torch.float32), ("_bf16", torch.bfloat16)]
    if torch.cuda.get_device_capability() == (9, 0):
        variants.append(("_bf16.sm90a", torch.bfloat16))
    for suffix, dtype in variants:
        cmd = [f"bench/block1024{suffix}", "--inputs=bench/block.in.safetensors", "--weights=bench/block.in.safetensors", f"--output=bench/block{suffix}.out.safetensors"]
        kernels = ncu_kernels(cmd)
        total = sum(t for n, t in kernels)
        got = next(iter(safetensors_io.read(f"bench/block{suffix}.out.safetensors").values()))
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        w = {n: t.to(dtype) for n, t in w32.items()}
        tb = cuda_ms(lambda: torch_block(w))
        print(f"block1024{suffix}: xfmr kernels {total:.3f} ms over {len(kernels)} kernels, torch eager {dtype} {tb:.3f} ms, ratio torch/xfmr {tb / total:.2f}; max rel err vs torch f32 {err:.1e}")
        for n, t in sorted(kernels, key=lambda x: -x[1])[:6]:
            print(f"   {t:8.3f} ms  {n[:60]}")
        print("   wall", wall(cmd))
