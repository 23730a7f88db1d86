#!/usr/bin/env python3
"""xfmr CPU benchmark: one table of xfmr against the peers people run today
(PyTorch 2.x eager with scaled_dot_product_attention, torch.compile, ONNX
Runtime after its transformers optimizer; fp32) and the machine's FMA peak,
measured in the same run.

  bench.py [--build DIR] [--quick] [--only NAME,...]

Workloads: GPT-2 small block forward at seq 128/512/2048, the 12-block stack
at seq 128, causal attention (12 heads x 64) at seq 512/2048/4096, forward +
backward of one GPT-2 small block at seq 128/512 (xfmrc --grad against
PyTorch autograd; the row also gives the ratio to xfmr's own forward), and
the training step of examples/reverse-sequence (the compiled trainer against
the same model, optimizer and batches in PyTorch). FLOPs are 2*M*N*K per
matmul, 3x the forward for forward + backward; attention counts the full
seq^2 (causal work is half).
The peers run from build/bench-venv (bench/setup-peers.sh), each engine in
its own process (bench/run_peers.py); ONNX Runtime runs the forward only.
Outputs are cross-checked against eager. Times are the minimum over the
repeats; "vs best" is the best peer's time over xfmr's.
"""

import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "e2e_lib"))
import models  # noqa: E402
import safetensors_io  # noqa: E402

PEERS_PYTHON = os.path.join("bench-venv", "bin", "python")
PEERS = ("eager", "compile", "ort")
TIMING = re.compile(r"min ([0-9.]+) ms, median ([0-9.]+) ms, peak extra memory (-?[0-9]+) bytes")


REVERSE = os.path.join(ROOT, "examples", "reverse-sequence")
# Forward FLOPs of the reverse-sequence model per step (batch 32 x 16 tokens,
# d 32, 2 blocks with FFN 128, 2 heads of 16, a 10-way head).
REVERSE_TOKENS = 32 * 16
REVERSE_FLOPS = 2 * REVERSE_TOKENS * (2 * (4 * 32 * 32 + 2 * 32 * 128) + 32 * 10) + 2 * 4 * 32 * 2 * 16 * 16 * 16


def block_flops(seq):
    return 2 * seq * models.D * (3 * models.D + models.D + 2 * models.INNER) + attention_flops(seq)


def attention_flops(seq):
    return 4 * seq * seq * models.HEADS * 64


def run(command, env=None, **kwargs):
    result = subprocess.run(command, env=env, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"command failed: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result


def fma_peak(workdir, threads):
    binary = os.path.join(workdir, "fma_peak")
    if not os.path.exists(binary):
        run(["clang-22", "-O2", "-march=native", "-fopenmp", os.path.join(HERE, "fma_peak.c"),
             "-o", binary, "-L/usr/lib/llvm-22/lib", "-Wl,-rpath,/usr/lib/llvm-22/lib"])
    best = 0.0
    for _ in range(3):
        out = run([binary], env=dict(os.environ, OMP_NUM_THREADS=str(threads))).stdout
        best = max(best, float(out.split()[0]))
    return best


class Workload:
    def __init__(self, name, kind, seq, blocks, flops, repeats):
        self.name, self.kind, self.seq, self.blocks = name, kind, seq, blocks
        self.flops, self.repeats = flops, repeats

    def prepare(self, xfmrc, workdir):
        stem = os.path.join(workdir, self.name)
        flags = []
        if self.kind == "attention":
            source = models.attention_mlir(self.seq)
        elif self.kind == "grad":
            source, _ = models.gpt2_block_loss_mlir(self.seq)
            flags = ["--grad", "--grad-inputs=x"]
        else:
            source, _ = models.gpt2_stack_mlir(self.seq, self.blocks)
        with open(stem + ".mlir", "w") as f:
            f.write(source)
        self.inputs = stem + ".inputs.safetensors"
        safetensors_io.write(self.inputs, models.random_inputs(self.kind, self.seq, self.blocks))
        self.binary = stem
        start = time.perf_counter()
        run([xfmrc, stem + ".mlir", "-o", self.binary] + flags)
        self.compile_seconds = time.perf_counter() - start
        self.stem = stem

    def time_xfmr(self, threads):
        out = self.stem + f".xfmr{threads}.safetensors"
        result = run([self.binary, f"--inputs={self.inputs}", f"--weights={self.inputs}", f"--output={out}",
                      f"--benchmark={self.repeats}", f"--threads={threads}"])
        minimum, _, extra = TIMING.search(result.stderr).groups()
        self.xfmr_output = safetensors_io.read(out)
        return float(minimum), int(extra)

    def engines(self):
        return PEERS if self.kind == "block" else ("eager", "compile")

    def time_peer(self, python, engine, threads):
        """ms and extra bytes of `engine`; its output is checked against
        eager's (or, for eager, against xfmr's)."""
        out = self.stem + f".{engine}{threads}.npy"
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        result = run([python, os.path.join(HERE, "run_peers.py"), engine, self.kind,
                      str(self.seq), str(self.blocks), str(threads), self.inputs, out,
                      str(self.repeats)], env=env)
        minimum, _, extra = TIMING.search(result.stdout).groups()
        output = np.load(out)
        if engine == "eager":
            self.eager_output = output
        elif relative_error(output, self.eager_output) > 1e-3:
            sys.exit(f"{self.name}: {engine} differs from eager by "
                     f"{relative_error(output, self.eager_output):.1e}")
        return float(minimum), int(extra)

    def discrepancy(self):
        got = self.xfmr_output["grad:x"] if self.kind == "grad" else next(iter(self.xfmr_output.values()))
        return relative_error(got, self.eager_output)


def relative_error(got, want):
    return float(np.max(np.abs(got - want)) / max(1e-30, np.max(np.abs(want))))


def reverse_task(xfmrc, python, workdir, threads, steps=600):
    """ms per training step of examples/reverse-sequence: the compiled trainer
    and PyTorch 2.x eager, each the mean over `steps` steps, and each one's
    held-out token accuracy after them."""
    data = os.path.join(workdir, "reverse-data")
    trainer = os.path.join(workdir, "reverse-train")
    if not os.path.exists(data):
        run(["/usr/bin/python3", os.path.join(REVERSE, "make_data.py"), data])
    # Compiled every run: a trainer of an older xfmrc would measure that one.
    run([xfmrc, "--train", os.path.join(REVERSE, "model.json"), "--batch=32", "--lr=1e-3",
         "--warmup-steps=100", f"--steps={steps}", "-o", trainer])
    out = run([trainer, f"--train={data}/train.txt", f"--eval={data}/eval.txt", f"--steps={steps}",
               f"--log-every={steps}", f"--threads={threads}"]).stdout
    xfmr_ms = float(re.search(r"([0-9.]+) ms/step", out).group(1))
    xfmr_acc = float(re.search(r"token accuracy ([0-9.]+)%", out).group(1))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = run([python, os.path.join(HERE, "reverse_torch.py"), f"{data}/train.txt",
               f"{data}/eval.txt", str(steps), str(threads)], env=env).stdout
    torch_ms = float(re.search(r"mean ([0-9.]+) ms", out).group(1))
    torch_acc = float(re.search(r"token accuracy ([0-9.]+)%", out).group(1))
    return xfmr_ms, torch_ms, xfmr_acc, torch_acc


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--quick", action="store_true", help="fewer, smaller workloads")
    parser.add_argument("--only", default="", help="comma-separated workload names (and/or "
                        "'reverse-train', 'compile')")
    args = parser.parse_args()
    xfmrc = os.path.join(args.build, "bin", "xfmrc")
    workdir = os.path.join(args.build, "bench")
    os.makedirs(workdir, exist_ok=True)
    python = os.path.join(args.build, PEERS_PYTHON)
    if not os.path.exists(python):
        sys.exit(f"{python} missing: run bench/setup-peers.sh (or bench/run.sh)")

    workloads = [Workload("block-128", "block", 128, 1, block_flops(128), 20),
                 Workload("block-512", "block", 512, 1, block_flops(512), 5),
                 Workload("block-2048", "block", 2048, 1, block_flops(2048), 2),
                 Workload("stack12-128", "block", 128, 12, 12 * block_flops(128), 3),
                 Workload("attention-512", "attention", 512, 0, attention_flops(512), 5),
                 Workload("attention-2048", "attention", 2048, 0, attention_flops(2048), 2),
                 Workload("attention-4096", "attention", 4096, 0, attention_flops(4096), 1),
                 Workload("block-grad-128", "grad", 128, 1, 3 * block_flops(128), 10),
                 Workload("block-grad-512", "grad", 512, 1, 3 * block_flops(512), 3)]
    only = set(filter(None, args.only.split(",")))
    if args.quick:
        only = {"block-128", "attention-512", "reverse-train"}
    if only:
        workloads = [w for w in workloads if w.name in only]
    forward_ms = {}

    peaks = {t: fma_peak(workdir, t) for t in (1, 2)}
    print(f"fp32 FMA peak: {peaks[1]:.1f} GFLOP/s (1 thread), {peaks[2]:.1f} GFLOP/s (2 threads)")

    if not only or "compile" in only:
        # Compile time of the full 12-layer GPT-2 small model from its config.
        config = os.path.join(workdir, "gpt2-small.json")
        with open(config, "w") as f:
            f.write('{"model_type": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768, '
                    '"vocab_size": 50257, "n_positions": 1024}\n')
        start = time.perf_counter()
        run([xfmrc, config, "--seq-len=128", "-o", os.path.join(workdir, "gpt2-small")])
        print(f"compile GPT-2 small (12 layers, seq 128, config.json -> executable): "
              f"{time.perf_counter() - start:.1f} s")

    header = (f"{'workload':<16}{'thr':>4}{'GFLOP':>8}{'xfmr ms':>10}{'eager ms':>10}"
              f"{'compile':>10}{'ort ms':>10}{'vs best':>9}{'xfmr %pk':>10}{'best %pk':>10}"
              f"{'xfmr MiB':>10}{'eager MiB':>10}{'rel.err':>9}")
    print(header)
    print("-" * len(header))
    for w in workloads:
        w.prepare(xfmrc, workdir)
        for threads in (2, 1):
            xfmr_ms, xfmr_mem = w.time_xfmr(threads)
            peers = {engine: w.time_peer(python, engine, threads) for engine in w.engines()}
            best = min(ms for ms, _ in peers.values())
            if w.kind == "block":
                forward_ms[(w.seq, w.blocks, threads)] = xfmr_ms
            gflop = w.flops * 1e-9
            cells = "".join(f"{peers[e][0]:>10.2f}" if e in peers else f"{'-':>10}" for e in PEERS)
            print(f"{w.name:<16}{threads:>4}{gflop:>8.2f}{xfmr_ms:>10.2f}{cells}"
                  f"{best / xfmr_ms:>8.2f}x"
                  f"{100 * gflop / xfmr_ms * 1e3 / peaks[threads]:>9.1f}%"
                  f"{100 * gflop / best * 1e3 / peaks[threads]:>9.1f}%"
                  f"{xfmr_mem / 2**20:>10.1f}{peers['eager'][1] / 2**20:>10.1f}"
                  f"{w.discrepancy():>9.1e}", flush=True)
            if w.kind == "grad" and (w.seq, 1, threads) in forward_ms:
                print(f"{'':<16}    forward + backward = {xfmr_ms / forward_ms[(w.seq, 1, threads)]:.2f}x "
                      f"xfmr's forward ({threads} thr)")
        print(f"{'':<16}    (compiled in {w.compile_seconds:.1f} s)")
    if not only or "reverse-train" in only:
        print("reverse-sequence training step (examples/reverse-sequence, batch 32, mean over 600 "
              "steps; PyTorch 2.x eager)")
        for threads in (2, 1):
            xfmr_ms, torch_ms, xfmr_acc, torch_acc = reverse_task(xfmrc, python, workdir, threads)
            gflop = 3 * REVERSE_FLOPS * 1e-9
            print(f"{'reverse-train':<16}{threads:>4}{gflop:>8.3f}{xfmr_ms:>10.2f}{torch_ms:>10.2f}"
                  f"{'-':>10}{'-':>10}{torch_ms / xfmr_ms:>8.2f}x"
                  f"{100 * gflop / xfmr_ms * 1e3 / peaks[threads]:>9.1f}%"
                  f"{100 * gflop / torch_ms * 1e3 / peaks[threads]:>9.1f}%"
                  f"   held-out token accuracy: xfmr {xfmr_acc:.2f}%, torch {torch_acc:.2f}%",
                  flush=True)


if __name__ == "__main__":
    main()
