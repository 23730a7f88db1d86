"""Times one workload in what people run today, PyTorch 2.x from PyPI (in
build/bench-venv, bench/setup-peers.sh); run by bench.py in its own process
per engine, so that each one's thread count and memory are its own.

  run_peers.py ENGINE KIND SEQ BLOCKS THREADS INPUTS.safetensors OUTPUT.npy REPEATS

ENGINE: eager    the computation of transformers' GPT2Block with
                 scaled_dot_product_attention (its default attention)
        compile  torch.compile of the same (forward, or forward + backward)
        ort      ONNX Runtime on the exported forward after
                 onnxruntime.transformers.optimizer (layer norm, residual
                 and GELU fusions)
Prints 'ENGINE: min M ms, median M ms, peak extra memory B bytes'.
"""

import os
import resource
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "test", "e2e_lib"))
import models  # noqa: E402
import safetensors_io  # noqa: E402

engine, kind = sys.argv[1], sys.argv[2]
seq, blocks, threads = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
inputs_path, output_path, repeats = sys.argv[6], sys.argv[7], int(sys.argv[8])
torch.set_num_threads(threads)
inputs = {k: torch.from_numpy(np.array(v)) for k, v in safetensors_io.read(inputs_path).items()}


class Stack(torch.nn.Module):
    """The GPT-2 blocks with their weights as parameters (for export)."""

    def __init__(self):
        super().__init__()
        self.weights = torch.nn.ParameterDict(
            {k.replace(".", "_"): torch.nn.Parameter(v, requires_grad=kind == "grad")
             for k, v in inputs.items() if k not in ("x", "r", "q", "k", "v")})

    def forward(self, x):
        w = {k: self.weights[k.replace(".", "_")] for k in inputs if k not in ("x", "r")}
        w["x"] = x
        return models.torch_stack(w, blocks)


def make_runner():
    if kind == "attention":
        function = torch.compile(models.torch_attention) if engine == "compile" else models.torch_attention
        if engine == "ort":
            sys.exit("ort: attention alone is not a model ONNX Runtime's optimizer fuses")

        def run():
            with torch.no_grad():
                return function(inputs["q"], inputs["k"], inputs["v"])
        return run
    stack = Stack().eval()
    if engine == "ort":
        import onnxruntime
        from onnxruntime.transformers import optimizer
        if kind == "grad":
            sys.exit("ort: training is not measured (ONNX Runtime's inference optimizer)")
        exported = output_path + ".onnx"
        torch.onnx.export(stack, (inputs["x"],), exported, input_names=["x"],
                          output_names=["y"], dynamo=False)
        # The optimizer's "gpt2" fusions fail on this graph (a reshape they
        # expect after each Gemm); its "bert" ones fuse the layer norms, the
        # residual adds into them and the GELU (not the SDPA attention).
        optimized = optimizer.optimize_model(exported, model_type="bert",
                                             num_heads=models.HEADS, hidden_size=models.D)
        optimized.save_model_to_file(exported)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(exported, options,
                                               providers=["CPUExecutionProvider"])
        x = inputs["x"].numpy()
        return lambda: torch.from_numpy(session.run(None, {"x": x})[0])
    module = torch.compile(stack) if engine == "compile" else stack
    if kind == "grad":
        x = inputs["x"].clone().requires_grad_(True)

        def run():
            x.grad = None
            for p in stack.parameters():
                p.grad = None
            (module(x) * inputs["r"]).sum().backward()
            return x.grad
        return run

    def run():
        with torch.no_grad():
            return module(inputs["x"])
    return run


def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


baseline = peak()
runner = make_runner()
result = runner()
result = runner()  # torch.compile's first calls compile and autotune
extra = peak() - baseline
times = []
for _ in range(repeats):
    start = time.perf_counter()
    runner()
    times.append((time.perf_counter() - start) * 1e3)
times.sort()
np.save(output_path, result.detach().numpy())
print(f"{engine}: min {times[0]:.3f} ms, median {times[len(times) // 2]:.3f} ms, "
      f"peak extra memory {extra} bytes")
