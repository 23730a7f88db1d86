#!/usr/bin/env python3
"""Generation benchmark (not a test): GPT-2 small, or with --model=llama-1b a
Llama-3.2-1B-shaped model (16 layers, width 2048, 32 query and 8 key/value
heads of 64, MLP 8192, vocabulary 128256, tied head, llama3 rope), with
random weights, batch 1, a 128-token prompt and 128 new tokens, 2 threads;
one table of xfmr against the peers people generate with, measured in the
same run:

  xfmr            xfmrc --generate of the checkpoint directory (f32;
                  --dtype=bf16: weights, activations and KV cache in bf16;
                  --weights-dtype=bf16|int8|int4: the products' weights bf16,
                  int8 with a scale per output channel or per group of 32, or
                  int4 in groups of 32 (symmetric, or with mins);
                  these keep a bf16 KV cache, as llama.cpp an f16 one;
                  one int8 row samples with the generator's defaults,
                  the others choose greedily)
  generate()      transformers on PyTorch 2.x eager (f32, SDPA), KV cache
  llama.cpp       llama-cpp-python on the same weights written as GGUF
                  (f32, f16, q8_0, q4_0 and q4_k_m, quantized by llama.cpp
                  itself), when llama_cpp is installed; with --model=llama-1b
                  also xfmr compiled from those q8_0, q4_0 and q4_k_m files
                  (their quantized weights kept as ggml's integer groups)
  roofline        weight bytes read per decoded token / the machine's
                  measured read bandwidth (bench/read_bandwidth.c)

Prompt speed is tokens/s of the prefill; decode is ms per generated token
(the 127 steps after the first). Times are the best of --repeats runs.
Runs under build/bench-venv (bench/setup-peers.sh).

  generate.py [--model gpt2|llama-1b] [--build DIR] [--repeats N] [--threads T]
              [--xfmr-flags FLAGS] [--no-peers]

--xfmr-flags adds flags to every xfmrc compile: --xfmr-flags=--mcpu=haswell
measures the AVX2 code paths on a newer host (with --int8-dot=false beside,
the f32 products they replace); --no-peers leaves out generate() and
llama.cpp.
"""

import argparse
import json
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


# --model: (description, checkpoint folder, config factory).
MODELS = {
    "gpt2": ("GPT-2 small", "gpt2-small", lambda tf: tf.GPT2Config()),
    "llama-1b": ("Llama-3.2-1B-shaped", "llama-1b", lambda tf: tf.LlamaConfig(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
        tie_word_embeddings=True, rms_norm_eps=1e-5, bos_token_id=128000, eos_token_id=128001,
        rope_parameters={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
                         "rope_theta": 500000.0})),
}


def checkpoint(args, workdir):
    """The model (transformers' own initialisation), saved as users have it."""
    import torch
    import transformers as tf
    _, folder, config = MODELS[args.model]
    directory = os.path.join(workdir, folder)
    if not os.path.exists(os.path.join(directory, "model.safetensors")):
        torch.manual_seed(0)
        tf.AutoModelForCausalLM.from_config(config(tf)).save_pretrained(directory)
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


# The generators' cache: the prompt and the new tokens (not the model's 131072
# positions).
CONTEXT = f"--max-context={PROMPT + NEW + 16}"


def xfmr_speeds(printed):
    """Prompt tokens/s and decode ms/token from a generator's closing lines."""
    prompt = re.search(r"prompt: (\d+) tokens in ([0-9.]+) ms", printed)
    decode = re.search(r"generation: (\d+) tokens in ([0-9.]+) ms", printed)
    return (int(prompt.group(1)) * 1000 / float(prompt.group(2)),
            float(decode.group(2)) / int(decode.group(1)))


def bench_xfmr(args, directory, workdir, name, flags, sampling=("--temp", "0")):
    generator = os.path.join(workdir, f"xfmr-generate-{name}")
    start = time.perf_counter()
    run([os.path.join(args.build, "bin", "xfmrc"), directory, "--generate", CONTEXT, *flags,
         *args.xfmr_flags.split(), "-o", generator])
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
    model = tf.AutoModelForCausalLM.from_pretrained(directory, attn_implementation="sdpa").eval()
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


def write_llama_gguf(directory, path, weights=None, context=PROMPT + NEW + 16):
    """The checkpoint as llama.cpp's Llama GGUF (names, and the q/k rows
    permuted to its rope layout, as its convert_hf_to_gguf.py does; the
    llama3 rope factors left out: they change no work), the output tied to
    the token embedding, a placeholder vocabulary. `weights` (name: array)
    replaces model.safetensors: uint16 arrays are bf16 bits, kept as BF16
    matrices (vectors widened to F32, as llama.cpp keeps its norms)."""
    import gguf
    import transformers as tf
    from safetensors.numpy import load_file
    config = tf.AutoConfig.from_pretrained(directory)
    if weights is None:
        weights = load_file(os.path.join(directory, "model.safetensors"))
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_context_length(context)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    bf16 = any(value.dtype == np.uint16 for value in weights.values())
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if bf16 else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("llama-bpe")
    writer.add_token_list([f"<t{i}>" for i in range(config.vocab_size)])
    writer.add_token_types([gguf.TokenType.NORMAL] * config.vocab_size)
    writer.add_token_merges(["<t0> <t1>"])
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    parts = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
             "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}

    def permute(w, heads):
        return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2) \
            .reshape(w.shape)

    for name, value in weights.items():
        stem, kind = name.removeprefix("model.").rsplit(".", 1)
        if stem.startswith("layers."):
            _, layer, rest = stem.split(".", 2)
            if rest == "self_attn.q_proj":
                value = permute(value, config.num_attention_heads)
            elif rest == "self_attn.k_proj":
                value = permute(value, config.num_key_value_heads)
            target = f"blk.{layer}.{parts[rest]}"
        else:
            target = {"embed_tokens": "token_embd", "norm": "output_norm"}[stem]
        if value.dtype != np.uint16:
            writer.add_tensor(f"{target}.{kind}", np.ascontiguousarray(value, dtype=np.float32))
        elif value.ndim == 1:
            writer.add_tensor(f"{target}.{kind}", (value.astype(np.uint32) << 16).view(np.float32))
        else:
            writer.add_tensor(f"{target}.{kind}", np.ascontiguousarray(value),
                              raw_dtype=gguf.GGMLQuantizationType.BF16)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# Bytes a weight of each ggml type as llama.cpp reads it, and as xfmr keeps
# it (docs/gguf.md: integer groups with the blocks' f16 scales, f32 ones for the
# K-quants; floats decoded to f32).
LLAMA_CPP_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "Q8_0": 34 / 32, "Q5_0": 22 / 32,
                   "Q5_1": 24 / 32, "Q4_0": 18 / 32, "Q4_1": 20 / 32, "Q4_K": 144 / 256,
                   "Q5_K": 176 / 256, "Q6_K": 210 / 256}
XFMR_BYTES = {"F32": 4, "F16": 4, "BF16": 4, "Q8_0": 1.0625, "Q5_0": 1.0625, "Q5_1": 1.125,
              "Q4_0": 0.5625, "Q4_1": 0.625, "Q4_K": 0.75, "Q5_K": 1.25, "Q6_K": 1.25}


def gguf_bytes_per_weight(path, params, sizes):
    """The bytes a decode step reads per weight of a GGUF file's model: its
    matrices (the tied embedding as the head), each at `sizes` of its type."""
    import gguf
    reader = gguf.GGUFReader(path)
    total = sum(int(t.n_elements) * sizes[t.tensor_type.name] for t in reader.tensors
                if len(t.shape) == 2)
    return total / params


def quantize(source, target, ftype):
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    if llama_cpp.llama_model_quantize(source.encode(), target.encode(), params) != 0:
        sys.exit(f"llama.cpp could not quantize {source}")


def llama_speeds(llm, ids, new):
    """llama.cpp's prompt tokens/s reading `ids` in one batch and its ms per
    token of `new` single-token steps after them."""
    llm.reset()
    start = time.perf_counter()
    llm.eval(ids)
    prefill = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(new):
        llm.eval([ids[i % len(ids)]])
    decode = time.perf_counter() - start
    return len(ids) / prefill, decode * 1000 / new


def bench_llama(args, path):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=path, n_ctx=PROMPT + NEW + 16, n_batch=PROMPT,
                          n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    best_prompt, best_decode = 0.0, float("inf")
    for _ in range(args.repeats):
        prompt, decode = llama_speeds(llm, prompt_ids(), NEW)
        best_prompt, best_decode = max(best_prompt, prompt), min(best_decode, decode)
    return best_prompt, best_decode


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default="gpt2")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--xfmr-flags", default="")
    parser.add_argument("--no-peers", action="store_true")
    args = parser.parse_args()
    workdir = os.path.join(args.build, "bench-generate")
    os.makedirs(workdir, exist_ok=True)
    directory = checkpoint(args, workdir)
    from safetensors import safe_open
    # A decode step reads every weight once, the token embedding as the LM
    # head; of the position table, one row.
    with safe_open(os.path.join(directory, "model.safetensors"), "np") as f:
        params = sum(int(np.prod(f.get_slice(k).get_shape())) for k in f.keys()
                     if not k.endswith("wpe.weight"))
    bandwidth = read_bandwidth(workdir, args.threads)

    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    width = config.get("hidden_size") or config["n_embd"]  # per-channel scales: one per width
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
    # int8 values and an f32 scale per output channel (at least `width`
    # values) or per group of 32.
    rows.append(("xfmr int8 (scale per channel)",)
                + bench_xfmr(args, directory, workdir, "int8",
                             ["--weights-dtype=int8", "--cache-dtype=bf16"])[:2]
                + (1 + 4 / width,))
    # Groups of 32 with an f16 scale (and min) each: llama.cpp's Q8_0, Q4_0
    # and Q4_1 bytes.
    rows.append(("xfmr int8 (f16 scale per 32)",)
                + bench_xfmr(args, directory, workdir, "int8-g32",
                             ["--weights-dtype=int8", "--weight-group-size=32",
                              "--weight-scales-dtype=f16", "--cache-dtype=bf16"])[:2]
                + (1 + 2 / 32,))
    rows.append(("xfmr int4 (f16 scale per 32)",)
                + bench_xfmr(args, directory, workdir, "int4",
                             ["--weights-dtype=int4", "--weight-scales-dtype=f16",
                              "--cache-dtype=bf16"])[:2]
                + (0.5 + 2 / 32,))
    rows.append(("xfmr int4 (f16 scale, min per 32)",)
                + bench_xfmr(args, directory, workdir, "int4-mins",
                             ["--weights-dtype=int4", "--weight-mins", "--weight-scales-dtype=f16",
                              "--cache-dtype=bf16"])[:2]
                + (0.5 + 4 / 32,))
    # The generator's default sampling (temperature 0.8, top-k 40, top-p
    # 0.95) instead of greedy choice: what sampling adds to a token.
    rows.append(("xfmr int8 (per channel), sampled",)
                + bench_xfmr(args, directory, workdir, "int8",
                             ["--weights-dtype=int8", "--cache-dtype=bf16"], sampling=("-s", "1"))[:2]
                + (1 + 4 / width,))
    llama_cpp = None
    if not args.no_peers:
        rows.append(("transformers generate() f32",) + bench_transformers(args, directory) + (4,))
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            print("llama.cpp: llama_cpp is not installed (bench/setup-peers.sh); its rows are "
                  "left out")
    f32 = os.path.join(workdir, f"{args.model}-f32.gguf")
    if llama_cpp and not os.path.exists(f32):
        (write_gguf if args.model == "gpt2" else write_llama_gguf)(directory, f32)
    for name, ftype in (("f32", None), ("f16", 1), ("q8_0", 7), ("q4_0", 2), ("q4_k_m", 15)):
        if not llama_cpp:
            break
        path = f32 if ftype is None else os.path.join(workdir, f"{args.model}-{name}.gguf")
        if ftype is not None and not os.path.exists(path):
            quantize(f32, path, ftype)
        rows.append((f"llama.cpp {name}",) + bench_llama(args, path)
                    + (gguf_bytes_per_weight(path, params, LLAMA_CPP_BYTES),))
        # xfmr on llama.cpp's own file (the Llama family), its quantized
        # weights kept as ggml's integer groups.
        if args.model != "gpt2" and ftype in (7, 2, 15):
            rows.append((f"xfmr on llama.cpp's {name} file",)
                        + bench_xfmr(args, path, workdir, f"gguf-{name}", ["--cache-dtype=bf16"])[:2]
                        + (gguf_bytes_per_weight(path, params, XFMR_BYTES),))

    print(f"{MODELS[args.model][0]} ({params / 1e6:.0f} M parameters), batch 1, "
          f"prompt {PROMPT} + {NEW} new tokens, "
          f"{args.threads} threads; read bandwidth {bandwidth:.1f} GB/s; "
          f"xfmrc flags: {args.xfmr_flags or 'none'}; "
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
