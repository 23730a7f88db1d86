#!/usr/bin/env python3
"""Scale benchmark (not a test): what depth and size cost. For each model
shape, random bf16 weights are written tensor by tensor as a checkpoint
directory (no float32 model in memory), then measured in one run:

  compile        seconds of `xfmrc DIR --generate --dtype=bf16` (one body per
                 distinct layer), and with --copies the same with
                 --layer-bodies=false (a copy of the code per layer)
  exe            the generator's size
  repack         seconds of `xfmrc --quantize` writing the weights as the
                 kernels read them (GPT-2's Conv1D weights transposed), once
  load           seconds the generator took to load its weights (mapped in
                 place, checked finite), page cache warm, as it reports them
  peak           peak resident memory of that run (/usr/bin/time), against
                 weights + KV cache + activations as the generator reports
                 them
  prompt, decode prompt tokens/s (32 tokens) and decode ms/token (64 tokens),
                 greedy, and the decode roofline: weight bytes per token over
                 the measured read bandwidth (bench/read_bandwidth.c)

and, for the Llama shapes where llama_cpp is installed (bench/setup-peers.sh),
llama.cpp on the same bf16 weights written as its GGUF: load seconds (page
cache warm), peak memory, prompt tokens/s and decode ms/token.

  scale.py [--models gpt2,gpt2-xl,llama-1b,llama-3b] [--copies] [--threads T]
           [--build DIR] [--workdir DIR]
"""

import argparse
import json
import os
import re
import struct
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from generate import read_bandwidth, run, write_llama_gguf  # noqa: E402

GPT2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257,
        "n_positions": 1024}
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 128256,
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
         "rope_theta": 500000.0, "head_dim": 64,
         "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
MODELS = {
    "gpt2": ("GPT-2 small", dict(GPT2, n_embd=768, n_layer=12, n_head=12)),
    "gpt2-xl": ("GPT-2 XL shape", dict(GPT2, n_embd=1600, n_layer=48, n_head=25)),
    "llama-1b": ("Llama-3.2-1B shape", dict(LLAMA, hidden_size=2048, intermediate_size=8192,
                                            num_hidden_layers=16, num_attention_heads=32,
                                            num_key_value_heads=8)),
    "llama-3b": ("Llama-3.2-3B shape", dict(LLAMA, hidden_size=3072, intermediate_size=8192,
                                            num_hidden_layers=28, num_attention_heads=24,
                                            num_key_value_heads=8, head_dim=128)),
}
PROMPT, NEW = 32, 64


def tensors(config):
    """(name, shape, init) of each weight, as transformers names them."""
    if config["model_type"] == "gpt2":
        d, v = config["n_embd"], config["vocab_size"]
        yield "wte.weight", [v, d], "normal"
        yield "wpe.weight", [config["n_positions"], d], "normal"
        for i in range(config["n_layer"]):
            p = f"h.{i}."
            for norm in ("ln_1", "ln_2"):
                yield p + norm + ".weight", [d], "ones"
                yield p + norm + ".bias", [d], "zeros"
            for name, shape in (("attn.c_attn", [d, 3 * d]), ("attn.c_proj", [d, d]),
                                ("mlp.c_fc", [d, 4 * d]), ("mlp.c_proj", [4 * d, d])):
                yield p + name + ".weight", shape, "normal"
                yield p + name + ".bias", shape[1:], "zeros"
        yield "ln_f.weight", [d], "ones"
        yield "ln_f.bias", [d], "zeros"
        return
    d, inner, hd = config["hidden_size"], config["intermediate_size"], config["head_dim"]
    q, kv = config["num_attention_heads"] * hd, config["num_key_value_heads"] * hd
    yield "model.embed_tokens.weight", [config["vocab_size"], d], "normal"
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", [d], "ones"
        yield p + "post_attention_layernorm.weight", [d], "ones"
        for name, shape in (("self_attn.q_proj", [q, d]), ("self_attn.k_proj", [kv, d]),
                            ("self_attn.v_proj", [kv, d]), ("self_attn.o_proj", [d, q]),
                            ("mlp.gate_proj", [inner, d]), ("mlp.up_proj", [inner, d]),
                            ("mlp.down_proj", [d, inner])):
            yield p + name + ".weight", shape, "normal"
    yield "model.norm.weight", [d], "ones"


def write_checkpoint(config, directory):
    """config.json and model.safetensors (bf16), one tensor at a time."""
    path = os.path.join(directory, "model.safetensors")
    if os.path.exists(path):
        return path
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    entries = list(tensors(config))
    header, offset = {}, 0
    for name, shape, _ in entries:
        size = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    rng = np.random.default_rng(0)
    with open(path + ".part", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape, init in entries:
            if init == "normal":
                values = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            else:
                values = np.full(shape, 1.0 if init == "ones" else 0.0, dtype=np.float32)
            bits = values.view(np.uint32)
            # Round to nearest even, then keep the high half: bf16.
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            f.write(bits.astype(np.uint16).tobytes())
    os.rename(path + ".part", path)
    return path


def read_bf16(path):
    """The tensors of a bf16 safetensors file as uint16 arrays (mapped)."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint16, mode="r", offset=8 + size)
    return {name: data[begin // 2:end // 2].reshape(entry["shape"])
            for name, entry in header.items() if name != "__metadata__"
            for begin, end in [entry["data_offsets"]]}


# llama.cpp's run, in a process of its own for /usr/bin/time: load, a prompt
# of PROMPT tokens in one batch, NEW single-token steps; prints JSON.
LLAMA_CPP_RUN = """
import json, sys, time
sys.path.insert(0, sys.argv[5])
import llama_cpp
from generate import llama_speeds
path, threads, prompt, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
start = time.perf_counter()
llm = llama_cpp.Llama(model_path=path, n_ctx=prompt + new + 16, n_batch=prompt, n_threads=threads,
                      n_threads_batch=threads, verbose=False)
load = time.perf_counter() - start
ids = [(7 * i + 11) % 50000 for i in range(prompt)]
prompt_speed, decode = llama_speeds(llm, ids, new)
print(json.dumps({"load": load, "prompt": prompt_speed, "decode": decode}))
"""


def bench_llama_cpp(directory, source, workdir, key, threads):
    """llama.cpp on the checkpoint's bf16 weights: (load s, peak bytes,
    prompt tok/s, decode ms/token)."""
    path = os.path.join(workdir, f"{key}-bf16.gguf")
    if not os.path.exists(path):
        write_llama_gguf(directory, path + ".part", read_bf16(source), PROMPT + NEW + 16)
        os.rename(path + ".part", path)
    with open(path, "rb") as f:  # a warm page cache, as for xfmr
        while f.read(1 << 24):
            pass
    command = [sys.executable, "-c", LLAMA_CPP_RUN, path, str(threads), str(PROMPT), str(NEW),
               HERE]
    _, peak, result = timed(command)
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    return measured["load"], peak, measured["prompt"], measured["decode"]


def timed(command):
    start = time.perf_counter()
    result = run(["/usr/bin/time", "-v"] + command)
    seconds = time.perf_counter() - start
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr).group(1))
    return seconds, peak * 1024, result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gpt2,gpt2-xl,llama-1b")
    parser.add_argument("--copies", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench-scale"))
    args = parser.parse_args()
    xfmrc = os.path.join(args.build, "bin", "xfmrc")
    os.makedirs(args.workdir, exist_ok=True)
    bandwidth = read_bandwidth(args.workdir, args.threads)
    try:
        import llama_cpp  # noqa: F401
        peers = True
    except ImportError:
        print("llama.cpp: llama_cpp is not installed (bench/setup-peers.sh); its rows are left out")
        peers = False
    rows, llama_rows = [], []
    for key in args.models.split(","):
        title, config = MODELS[key]
        directory = os.path.join(args.workdir, key)
        source = write_checkpoint(config, directory)
        flags = ["--generate", "--dtype=bf16", f"--seq-len={PROMPT}",
                 f"--max-context={PROMPT + NEW + 16}"]
        generator = os.path.join(args.workdir, f"{key}-generate")
        start = time.perf_counter()
        run([xfmrc, directory, *flags, "-o", generator])
        compile_s = time.perf_counter() - start
        copies_s = None
        if args.copies:
            start = time.perf_counter()
            run([xfmrc, directory, *flags, "--layer-bodies=false", "-o", generator + "-copies"])
            copies_s = time.perf_counter() - start
        weights = os.path.join(args.workdir, f"{key}-bf16.safetensors")
        start = time.perf_counter()
        run([xfmrc, directory, *flags, "--quantize", "-o", weights])
        repack_s = time.perf_counter() - start
        with open(weights, "rb") as f:  # a warm page cache
            while f.read(1 << 24):
                pass
        common = [generator, "-m", weights, "--ids", "--temp", "0", "--ignore-eos", "--no-echo",
                  "-t", str(args.threads)]
        _, peak, first = timed(common + ["--no-warmup", "-p", "1", "-n", "1"])
        load_s = float(re.search(r"converted in ([0-9.]+) s", first.stderr).group(1))
        mapped, converted = (float(x) for x in re.search(
            r"([0-9.]+) MiB used where the file maps them, ([0-9.]+) MiB converted in",
            first.stderr).groups())
        cache = float(re.search(r"KV cache: .*, ([0-9.]+) MiB", first.stderr).group(1))
        activations = float(re.search(r"activations: ([0-9.]+) MiB", first.stderr).group(1))
        ids = " ".join(str(i) for i in np.random.default_rng(1).integers(0, 50000, PROMPT))
        speeds = run(common + ["-p", ids, "-n", str(NEW)]).stderr
        prompt = re.search(r"prompt: (\d+) tokens in ([0-9.]+) ms", speeds)
        decode = re.search(r"generation: (\d+) tokens in ([0-9.]+) ms", speeds)
        # Decoding reads every weight but the embedding table once a token
        # (a tied head reads the table as the head).
        weight_bytes = os.path.getsize(source)
        rows.append((title, config.get("n_layer", config.get("num_hidden_layers")), compile_s,
                     copies_s, os.path.getsize(generator) / 1e6, repack_s, load_s,
                     peak / 2**30, (mapped + converted + cache + activations) / 1024, mapped / 1024,
                     int(prompt.group(1)) * 1000 / float(prompt.group(2)),
                     float(decode.group(2)) / int(decode.group(1)),
                     weight_bytes / bandwidth / 1e6))
        if peers and config["model_type"] == "llama":
            llama_rows.append((title, rows[-1]) + bench_llama_cpp(directory, source, args.workdir,
                                                                  key, args.threads))
    print(f"\nxfmr generators, --dtype=bf16, {args.threads} threads; read bandwidth "
          f"{bandwidth:.1f} GB/s\n")
    print("| model | layers | compile s | copies s | exe MB | repack s | load s | peak GiB | "
          "held GiB (mapped) | prompt tok/s | decode ms/tok | roofline ms/tok |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (title, layers, compile_s, copies_s, exe, repack_s, load_s, peak, held, mapped, prompt,
         decode, roofline) in rows:
        copies = f"{copies_s:.1f}" if copies_s is not None else "-"
        print(f"| {title} | {layers} | {compile_s:.1f} | {copies} | {exe:.1f} | {repack_s:.1f} | "
              f"{load_s:.2f} | {peak:.2f} | {held:.2f} ({mapped:.2f}) | {prompt:.0f} | "
              f"{decode:.1f} | {roofline:.1f} |")
    if llama_rows:
        print("\nllama.cpp on the same weights (BF16 GGUF), same threads; xfmr's figures beside\n")
        print("| model | load s | peak GiB | prompt tok/s | decode ms/tok | xfmr load s | "
              "xfmr peak GiB | xfmr prompt tok/s | xfmr decode ms/tok |")
        print("|---|---|---|---|---|---|---|---|---|")
        for title, xfmr, load_s, peak, prompt, decode in llama_rows:
            print(f"| {title} | {load_s:.2f} | {peak / 2**30:.2f} | {prompt:.0f} | {decode:.1f} | "
                  f"{xfmr[6]:.2f} | {xfmr[7]:.2f} | {xfmr[10]:.0f} | {xfmr[11]:.1f} |")


if __name__ == "__main__":
    main()
