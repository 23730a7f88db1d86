"""Times one workload in PyTorch eager; run by bench.py in its own process so
that the thread count and the OpenMP OpenBLAS are set before torch loads.

  run_torch.py KIND SEQ BLOCKS THREADS INPUTS.safetensors OUTPUT.npy REPEATS
Prints 'torch: min M ms, median M ms, peak extra memory B bytes'.
"""

import resource
import sys
import time

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/test/e2e_lib")
import models  # noqa: E402
import safetensors_io  # noqa: E402

kind, seq, blocks, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
inputs_path, output_path, repeats = sys.argv[5], sys.argv[6], int(sys.argv[7])
torch.set_num_threads(threads)
inputs = {k: torch.from_numpy(np.array(v)) for k, v in safetensors_io.read(inputs_path).items()}


def run():
    if kind == "grad":
        # Forward + backward of sum(block(x) * r), gradients of x and weights.
        leaves = {k: v.requires_grad_(k != "r") for k, v in inputs.items()}
        for v in leaves.values():
            v.grad = None
        (models.torch_stack(leaves, 1) * leaves["r"]).sum().backward()
        return leaves["x"].grad
    with torch.no_grad():
        if kind == "attention":
            return models.torch_attention(inputs["q"], inputs["k"], inputs["v"])
        return models.torch_stack(inputs, blocks)


def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


baseline = peak()
result = run()
extra = peak() - baseline
times = []
for _ in range(repeats):
    start = time.perf_counter()
    run()
    times.append((time.perf_counter() - start) * 1e3)
times.sort()
np.save(output_path, result.numpy())
print(f"torch: min {times[0]:.3f} ms, median {times[len(times) // 2]:.3f} ms, "
      f"peak extra memory {extra} bytes")
