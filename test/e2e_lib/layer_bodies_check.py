#!/usr/bin/env python3
"""Layer bodies against per-layer copies: every case is compiled twice, with
one function per distinct layer (the default) and with --layer-bodies=false
(the code of each layer copied in place), run on the same random weights and
inputs, and the outputs compared: equal to the bit, as both run the same
kernels in the same order. In bf16 the copies fuse one layer's last residual
add into the next layer's norm, which reads the sum before its rounding to
bf16 (the bodies round it, as PyTorch does): there the outputs agree within
1% of their largest magnitude.

  layer_bodies_check.py --xfmrc XFMRC --workdir DIR CASE...

A case is a family (gpt2, bert, llama, gemma2, t5, bart) and a mode: forward,
bf16 (--dtype=bf16), int8 (--weights-dtype=int8), generate (greedy
--generate of 12 tokens from id prompts, comparing the logits of every step)
or grad (--grad: the training loss, with dropout, and every weight's gradient,
whose backward runs the layers' backward bodies in reverse): e.g.
gpt2-forward, llama-generate, t5-grad."""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

CONFIGS = {
    "gpt2": {"model_type": "gpt2", "n_layer": 3, "n_head": 4, "n_embd": 32, "vocab_size": 97,
             "n_positions": 32},
    "bert": {"model_type": "bert", "num_hidden_layers": 3, "num_attention_heads": 4,
             "hidden_size": 32, "intermediate_size": 64, "vocab_size": 97,
             "max_position_embeddings": 32},
    "llama": {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
              "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
              "hidden_size": 32, "intermediate_size": 64, "vocab_size": 97,
              "max_position_embeddings": 32, "tie_word_embeddings": True},
    # Alternating local and global attention: two bodies.
    "gemma2": {"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"],
               "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 8, "hidden_size": 32, "intermediate_size": 64, "vocab_size": 97,
               "max_position_embeddings": 32, "sliding_window": 4,
               "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0},
    "t5": {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "num_layers": 2,
           "num_decoder_layers": 3, "num_heads": 4, "d_model": 32, "d_kv": 8, "d_ff": 64,
           "vocab_size": 97, "decoder_start_token_id": 0},
    "bart": {"model_type": "bart", "architectures": ["BartForConditionalGeneration"],
             "encoder_layers": 2, "decoder_layers": 3, "encoder_attention_heads": 4,
             "decoder_attention_heads": 4, "d_model": 32, "encoder_ffn_dim": 64,
             "decoder_ffn_dim": 64, "vocab_size": 97, "max_position_embeddings": 32},
}
ENCODER_DECODER = {"t5", "bart"}
MODES = {"forward": [], "bf16": ["--dtype=bf16"], "int8": ["--weights-dtype=int8"],
         "generate": ["--generate", "--max-context=32"], "grad": ["--grad"]}


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def outputs(path):
    return {name: np.asarray(value) for name, value in safetensors_io.read(path).items()}


def tensor_inputs(binary, path):
    """Random inputs for every input `binary --info` lists: ids below their
    bound, masks of ones, a dropout seed."""
    rng = np.random.default_rng(11)
    tensors = {}
    for line in run([binary, "--info"]).splitlines():
        found = re.match(r"input\s+(\S+) (\w+) \[([0-9, ]*)\](?: \(ids < (\d+)\))?", line)
        if not found:
            continue
        name, dtype, dims, bound = found.groups()
        shape = [int(d) for d in dims.split(",") if d.strip()]
        if name == "dropout_seed":
            tensors[name] = np.array(7, dtype=np.int64)
        elif "mask" in name:
            tensors[name] = np.ones(shape, dtype=np.int32)
        else:
            tensors[name] = rng.integers(1, int(bound or 97), size=shape).astype(np.int32)
    safetensors_io.write(path, tensors)


def check(args, case):
    family, mode = case.rsplit("-", 1)
    workdir = os.path.join(args.workdir, case)
    os.makedirs(workdir, exist_ok=True)
    config = os.path.join(workdir, "config.json")
    with open(config, "w") as f:
        json.dump(CONFIGS[family], f)
    flags = MODES[mode] + ["--seq-len=8"] * (mode != "generate")
    weights = os.path.join(workdir, "weights.safetensors")
    run([args.xfmrc, config, "--emit=random-weights", "--seed=3", "-o", weights])
    rng = np.random.default_rng(5)
    prompts = [" ".join(str(t) for t in rng.integers(1, 97, size=n)) for n in (5, 3)]
    results = []
    for variant in ([], ["--layer-bodies=false"]):
        binary = os.path.join(workdir, "model" + ("-copies" if variant else ""))
        run([args.xfmrc, config, "--batch=2", "-o", binary] + flags + variant)
        out = binary + ".safetensors"
        if mode == "grad":
            inputs = os.path.join(workdir, "inputs.safetensors")
            tensor_inputs(binary, inputs)
            run([binary, f"--weights={weights}", f"--inputs={inputs}", f"--output={out}"])
        elif mode == "generate":
            command = [binary, "-m", weights, "--ids", "--temp", "0", "-n", "12",
                       "--ignore-eos", "--no-echo", "--save-logits", out]
            for prompt in prompts:
                command += ["-p", prompt]
            run(command)
        else:
            inputs = os.path.join(workdir, "input.txt")
            with open(inputs, "w") as f:
                for prompt in prompts:
                    f.write(f"{prompt} | {prompt}\n" if family in ENCODER_DECODER else
                            prompt + "\n")
            run([binary, f"--weights={weights}", f"--input={inputs}", f"--output={out}"])
        results.append(outputs(out))
    layered, copies = results
    if layered.keys() != copies.keys():
        return f"outputs {sorted(layered)} against {sorted(copies)}"
    for name in layered:
        if layered[name].shape != copies[name].shape:
            return f"{name}: shape {layered[name].shape} against {copies[name].shape}"
        worst = np.max(np.abs(layered[name].astype(np.float64) - copies[name]), initial=0)
        bound = 0.01 * np.max(np.abs(copies[name]), initial=0) if mode == "bf16" else 0
        if not worst <= bound:
            return f"{name}: differs by up to {worst:g} (bound {bound:g})"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xfmrc", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("cases", nargs="+")
    args = parser.parse_args()
    failed = False
    for case in args.cases:
        problem = check(args, case)
        print(f"{'FAIL' if problem else 'PASS'}: {case}" + (f": {problem}" if problem else ""),
              flush=True)
        failed |= problem is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
