#!/usr/bin/env python3
"""Generation benchmark (not a test): GPT-2 small with random weights, batch 1,
a 128-token prompt and 128 new tokens, 2 threads; one table of xfmr against
the peers people generate with, measured in the same run:

  xfmr            xfmrc --generate of the checkpoint directory (f32;
                  --dtype=bf16: weights, activations and KV cache in bf16;
                  --weights-dtype=bf16|int8: the products' weights bf16, or
                  int8 with a scale per output channel or per group of 32;
                  these keep a bf16 KV cache, as llama.cpp an f16 one;
                  one int8 row samples with the generator's defaults,
                  the others choose greedily)
  generate()      transformers on PyTorch 2.x eager (f32, SDPA), KV cache
  llama.cpp       llama-cpp-python on the same weights written as GGUF
                  (f32, f16 and q8_0, quantized by llama.cpp itself)
  roofline        weight bytes read per decoded token / the machine's
                  measured read bandwidth (bench/read_bandwidth.c)

Prompt speed is tokens/s of the prefill; decode is ms per generated token
(the 127 steps after the first). Times are the best of --repeats runs.
Runs under build/bench-venv (bench/setup-peers.sh).

  generate.py [--build DIR] [--repeats N] [--threads T]
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
PROMPT, NEW = 128, 128


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"command failed: {' '.join(command)}\n{result.stdout}{result.stderr}")
    return result


def checkpoint(workdir):
    """GPT-2 small (transformers' own initialisation), saved as users have it."""
    import torch
    import transformers as tf
    directory = os.path.join(workdir, "gpt2-small")
    if not os.path.exists(os.path.join(directory, "model.safetensors")):
        torch.manual_seed(0)
        tf.GPT2LMHeadModel(tf.GPT2Config()).save_pretrained(directory)
    return directory


def read_bandwidth(workdir, threads):
    binary = os.path.join(workdir, "read_bandwidth")
    run(["clang-22", "-O3", "-march=native", "-ffast-math", "-fopenmp",
         os.path.join(HERE, "read_bandwidth.c"), "-o", binary, "-L/usr/lib/llvm-22/lib",
         "-Wl,-rpath,/usr/lib/llvm-22/lib"])
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return float(run([binary], env=env).stdout)


def prompt_ids():
    return np.random.default_rng(0).integers(0, 50000, size=PROMPT).tolist()


def xfmr_speeds(printed):
    """Prompt tokens/s and decode ms/token from a generator's closing lines."""
    prompt = re.search(r"prompt: (\d+) tokens in ([0-9.]+) ms", printed)
    decode = re.search(r"generation: (\d+) tokens in ([0-9.]+) ms", printed)
    return (int(prompt.group(1)) * 1000 / float(prompt.group(2)),
            float(decode.group(2)) / int(decode.group(1)))


def bench_xfmr(args, directory, workdir, name, flags, sampling=("--temp", "0")):
    generator = os.path.join(workdir, f"xfmr-generate-{name}")
    start = time.perf_counter()
    run([os.path.join(args.build, "bin", "xfmrc"), directory, "--generate", *flags,
         "-o", generator])
    compile_s = time.perf_counter() - start
    best = None
    ids = " ".join(map(str, prompt_ids()))
    for _ in range(args.repeats):
        err = run([generator, "--ids", "-p", ids, "-n", str(NEW), *sampling, "--ignore-eos",
                   "--no-echo", "-t", str(args.threads)]).stderr
        result = xfmr_speeds(err)
        best = result if best is None else (max(best[0], result[0]), min(best[1], result[1]))
    return best + (compile_s,)


def bench_transformers(args, directory):
    import torch
    import transformers as tf
    torch.set_num_threads(args.threads)
    model = tf.GPT2LMHeadModel.from_pretrained(directory, attn_implementation="sdpa").eval()
    ids = torch.tensor([prompt_ids()])
    best_prompt, best_decode = 0.0, float("inf")
    with torch.no_grad():
        for _ in range(args.repeats):
            # generate()'s own prefill: logits of the last position only.
            start = time.perf_counter()
            model(ids, use_cache=True, logits_to_keep=1)
            prefill = time.perf_counter() - start
            start = time.perf_counter()
            model.generate(ids, max_new_tokens=1, min_new_tokens=1, do_sample=False)
            one = time.perf_counter() - start
            start = time.perf_counter()
            model.generate(ids, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False)
            all_tokens = time.perf_counter() - start
            best_prompt = max(best_prompt, PROMPT / prefill)
            best_decode = min(best_decode, (all_tokens - one) * 1000 / (NEW - 1))
    return best_prompt, best_decode


def write_gguf(directory, path):
    """The checkpoint as llama.cpp's GPT-2 GGUF (the tensor layout and names
    of its convert_hf_to_gguf.py): Conv1D weights transposed, the output
    tied to the token embedding; a placeholder vocabulary of the right size
    (the benchmark feeds token ids)."""
    import gguf
    from safetensors.numpy import load_file
    weights = load_file(os.path.join(directory, "model.safetensors"))
    writer = gguf.GGUFWriter(path, "gpt2")
    writer.add_context_length(1024)
    writer.add_embedding_length(768)
    writer.add_feed_forward_length(3072)
    writer.add_block_count(12)
    writer.add_head_count(12)
    writer.add_layer_norm_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list([f"<t{i}>" for i in range(50257)])
    writer.add_token_types([gguf.TokenType.NORMAL] * 50257)
    writer.add_token_merges(["<t0> <t1>"])
    writer.add_bos_token_id(50256)
    writer.add_eos_token_id(50256)
    names = {"wte": "token_embd", "wpe": "position_embd", "ln_f": "output_norm"}
    parts = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
             "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    for name, value in weights.items():
        name = name.removeprefix("transformer.")
        stem, kind = name.rsplit(".", 1)
        if stem.startswith("h."):
            _, layer, rest = stem.split(".", 2)
            target = f"blk.{layer}.{parts[rest]}"
            if kind == "weight" and rest in ("attn.c_attn", "attn.c_proj", "mlp.c_fc",
                                             "mlp.c_proj"):
                value = np.ascontiguousarray(value.T)
        else:
            target = names[stem]
        writer.add_tensor(f"{target}.{kind}", value.astype(np.float32))
        if stem == "wte":
            writer.add_tensor("output.weight", value.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def quantize(source, target, ftype):
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    if llama_cpp.llama_model_quantize(source.encode(), target.encode(), params) != 0:
        sys.exit(f"llama.cpp could not quantize {source}")


def bench_llama(args, path):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=path, n_ctx=PROMPT + NEW + 16, n_batch=PROMPT,
                          n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    ids = prompt_ids()
    best_prompt, best_decode = 0.0, float("inf")
    for _ in range(args.repeats):
        llm.reset()
        start = time.perf_counter()
        llm.eval(ids)
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        for i in range(NEW):
            llm.eval([ids[i % PROMPT]])
        decode = time.perf_counter() - start
        best_prompt = max(best_prompt, PROMPT / prefill)
        best_decode = min(best_decode, decode * 1000 / NEW)
    return best_prompt, best_decode


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    workdir = os.path.join(args.build, "bench-generate")
    os.makedirs(workdir, exist_ok=True)
    directory = checkpoint(workdir)
    from safetensors.numpy import load_file
    weights = load_file(os.path.join(directory, "model.safetensors"))
    # A decode step reads every weight once, the token embedding as the LM
    # head; of the position table, one row.
    params = sum(v.size for k, v in weights.items() if not k.endswith("wpe.weight"))
    bandwidth = read_bandwidth(workdir, args.threads)

    rows = []
    prompt, decode, compile_s = bench_xfmr(args, directory, workdir, "f32", [])
    rows.append(("xfmr f32", prompt, decode, 4))
    rows.append(("xfmr bf16",) + bench_xfmr(args, directory, workdir, "bf16",
                                            ["--dtype=bf16"])[:2] + (2,))
    # The narrow weights' rows keep a bf16 KV cache, as llama.cpp keeps an f16
    # one in all its rows.
    rows.append(("xfmr bf16 weights",) + bench_xfmr(args, directory, workdir, "bf16-weights",
                                                    ["--weights-dtype=bf16", "--cache-dtype=bf16"])[:2]
                + (2,))
    # int8 values and an f32 scale per output channel (768 or 3072 values)
    # or per group of 32.
    rows.append(("xfmr int8 (scale per channel)",)
                + bench_xfmr(args, directory, workdir, "int8",
                             ["--weights-dtype=int8", "--cache-dtype=bf16"])[:2]
                + (1 + 4 / 768,))
    rows.append(("xfmr int8 (scale per 32)",)
                + bench_xfmr(args, directory, workdir, "int8-g32",
                             ["--weights-dtype=int8", "--weight-group-size=32",
                              "--cache-dtype=bf16"])[:2]
                + (1 + 4 / 32,))
    # The generator's default sampling (temperature 0.8, top-k 40, top-p
    # 0.95) instead of greedy choice: what sampling adds to a token.
    rows.append(("xfmr int8 (per channel), sampled",)
                + bench_xfmr(args, directory, workdir, "int8",
                             ["--weights-dtype=int8", "--cache-dtype=bf16"], sampling=("-s", "1"))[:2]
                + (1 + 4 / 768,))
    rows.append(("transformers generate() f32",) + bench_transformers(args, directory) + (4,))
    f32 = os.path.join(workdir, "gpt2-f32.gguf")
    if not os.path.exists(f32):
        write_gguf(directory, f32)
    for name, ftype, bytes_per in (("f32", None, 4), ("f16", 1, 2), ("q8_0", 7, 34 / 32)):
        path = f32 if ftype is None else os.path.join(workdir, f"gpt2-{name}.gguf")
        if ftype is not None and not os.path.exists(path):
            quantize(f32, path, ftype)
        rows.append((f"llama.cpp {name}",) + bench_llama(args, path) + (bytes_per,))

    print(f"GPT-2 small (124 M parameters), batch 1, prompt {PROMPT} + {NEW} new tokens, "
          f"{args.threads} threads; read bandwidth {bandwidth:.1f} GB/s; "
          f"xfmrc --generate compiles in {compile_s:.1f} s")
    print(f"| {'system':30} | prompt tok/s | decode ms/token | roofline ms/token | "
          f"decode / roofline | xfmr f32 decode speed-up |")
    print("|" + "---|" * 6)
    xfmr_decode = rows[0][2]
    for name, prompt, decode, bytes_per in rows:
        roofline = params * bytes_per / bandwidth / 1e6
        print(f"| {name:30} | {prompt:12.1f} | {decode:15.2f} | {roofline:17.2f} | "
              f"{decode / roofline:17.2f} | {decode / xfmr_decode:24.2f} |")


if __name__ == "__main__":
    main()
