#!/usr/bin/env python3
"""GGUF files, checked against llama.cpp itself (llama-cpp-python).

For each named architecture: a small transformers decoder with random
weights, converted to an F16 GGUF file as llama.cpp's converter writes one
(gguf_check.py's writer) with a SentencePiece vocabulary, then quantized by
llama.cpp (`llama_model_quantize`) to Q8_0, Q4_0 and Q4_K_M. For each file:

- logits: xfmr's executable compiled from the file against llama.cpp's
  logits (`logits_all`) for the same tokens: the largest error within a
  stated fraction of the largest logit, per type (both round the
  activations of integer-group products to 8-bit blocks, llama.cpp's
  K-quants to blocks of 256, and a random model's activations that the two
  round to neighbouring levels move the logits after them, so the bound
  grows as the weights narrow);
- greedy tokens (F16 and Q8_0): 32 steps of xfmr's generator (`--ids
  --temp 0`) identical to llama.cpp's argmax decoding. The generator
  prefills 8 tokens a call, so that its Q8_0 products all take the
  activations as llama.cpp's q8_0 (the int8 dot products of skinny
  products, up to 8 rows, on hosts with integer dot products). Even so the
  two sum those products in different orders, and an activation on the edge
  between two 8-bit levels may round to either; the logits then differ
  within their bound, and where llama.cpp's two likeliest tokens are closer
  than that, either is a right choice. So Q8_0's tokens may part at such a
  near tie (llama.cpp's logits of its token and of xfmr's within the Q8_0
  logits bound of each other); they are compared up to it, and F16's all
  32 alike.

Prints `PASS: <arch> <type> ...` lines. Runs in build/bench-venv (the
benchmark peers: llama-cpp-python, transformers, gguf).

  llamacpp_check.py --xfmrc PATH --workdir DIR ARCH [ARCH...]
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import torch
import transformers as tf

import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_check import decoder, gemma3_config, write_gguf  # noqa: E402
from host_cpu import integer_dot  # noqa: E402
from tokenizers_check import add_gguf_sentencepiece, train_sentencepiece  # noqa: E402

torch.set_num_threads(2)
tf.logging.set_verbosity_error()

# The largest logit error of xfmr against llama.cpp, as a fraction of the
# largest logit, per file type.
BOUNDS = {"F16": 2e-3, "Q8_0": 3e-2, "Q4_0": 5e-2, "Q4_K_M": 6e-2}

# Q8_0's tokens agree where decode takes its activations as llama.cpp's q8_0:
# with xfmr's integer dot products.
GREEDY_TYPES = ("F16", "Q8_0") if integer_dot() else ("F16",)
STEPS, PROMPT = 32, 16
# Types whose greedy tokens may part at a near tie of llama.cpp's logits.
NEAR_TIE_TYPES = ("Q8_0",)


def architectures(vocab, ids):
    """arch -> (class, config) over `vocab` tokens and special `ids`."""
    common = dict(vocab_size=vocab, max_position_embeddings=256, **ids)
    return {
        "llama": (tf.LlamaForCausalLM, decoder(tf.LlamaConfig, **common)),
        "qwen2": (tf.Qwen2ForCausalLM, decoder(tf.Qwen2Config, **common)),
        # llama.cpp's query scale is head_dim^-0.5 (but at 27B's block count).
        "gemma2": (tf.Gemma2ForCausalLM,
                   decoder(tf.Gemma2Config, head_dim=64, query_pre_attn_scalar=64,
                           sliding_window=8, tie_word_embeddings=True, **common)),
        "gemma3": (tf.Gemma3ForCausalLM, gemma3_config(**common)),
    }


def quantize(source, target, ftype):
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    if llama_cpp.llama_model_quantize(source.encode(), target.encode(), params) != 0:
        raise RuntimeError(f"llama.cpp could not quantize {source}")


def llama(path):
    from llama_cpp import Llama
    return Llama(model_path=path, n_ctx=256, n_batch=256, n_threads=2, logits_all=True,
                 verbose=False)


def llamacpp_logits(path, tokens):
    model = llama(path)
    model.eval(tokens)
    return np.array(model.scores[:len(tokens)], dtype=np.float64)


def llamacpp_greedy(path, tokens, steps):
    """llama.cpp's argmax tokens and the logits each was chosen from."""
    model = llama(path)
    model.eval(tokens)
    out, scores = [], []
    for _ in range(steps):
        scores.append(np.array(model.scores[model.n_tokens - 1], dtype=np.float64))
        token = int(np.argmax(scores[-1]))
        out.append(token)
        model.eval([token])
    return out, scores


def xfmr_logits(args, path, tokens, workdir):
    executable = os.path.join(workdir, "forward")
    subprocess.run([args.xfmrc, path, f"--seq-len={len(tokens)}", "-o", executable], check=True)
    ids = os.path.join(workdir, "tokens.txt")
    with open(ids, "w") as f:
        f.write(" ".join(map(str, tokens)) + "\n")
    out = os.path.join(workdir, "logits.safetensors")
    subprocess.run([executable, f"--input={ids}", f"--output={out}"], check=True)
    from safetensors.numpy import load_file
    return load_file(out)["logits"][0].astype(np.float64)


def xfmr_greedy(args, path, tokens, steps, workdir):
    generator = os.path.join(workdir, "generator")
    subprocess.run([args.xfmrc, path, "--generate", "--seq-len=8", "-o", generator],
                   check=True)
    result = subprocess.run([generator, "--ids", "--temp", "0", "--ignore-eos", "--no-echo",
                             "-n", str(steps), "-p", " ".join(map(str, tokens))],
                            check=True, capture_output=True)
    return [int(t) for t in result.stdout.split()]


def run_arch(args, arch, processor):
    workdir = os.path.join(args.workdir, arch)
    os.makedirs(workdir, exist_ok=True)
    ids = dict(bos_token_id=processor.bos_id(), eos_token_id=processor.eos_id(), pad_token_id=0)
    cls, config = architectures(processor.get_piece_size(), ids)[arch]
    torch.manual_seed(args.seed)
    model = cls(config).eval()
    # Decisive logits: layers that move the residual stream.
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 0.2 if "norm" in name else 0.05 if "embed" in name else 0.1
            p.copy_(scale * torch.randn_like(p))
    f16 = os.path.join(workdir, "F16.gguf")
    write_gguf(model, config, arch, f16, np.random.default_rng(args.seed), types=[Q.F16],
               metadata=lambda writer: add_gguf_sentencepiece(writer, processor))
    import llama_cpp
    files = {"F16": f16}
    for name, ftype in (("Q8_0", llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0),
                        ("Q4_0", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0),
                        ("Q4_K_M", llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M)):
        files[name] = os.path.join(workdir, name + ".gguf")
        quantize(f16, files[name], ftype)

    rng = np.random.default_rng(args.seed)
    tokens = [processor.bos_id()] + rng.integers(3, processor.get_piece_size(),
                                                 PROMPT - 1).tolist()
    ok = True
    for name, path in files.items():
        ours = xfmr_logits(args, path, tokens, workdir)
        theirs = llamacpp_logits(path, tokens)
        error = float(np.max(np.abs(ours - theirs)))
        scale = float(np.max(np.abs(theirs)))
        agree = float(np.mean(ours.argmax(-1) == theirs.argmax(-1)))
        good = error <= BOUNDS[name] * scale
        ok &= good
        print(f"{'PASS' if good else 'FAIL'}: {arch} {name} logits max error {error:.3g} "
              f"(limit {BOUNDS[name] * scale:.3g}, {error / scale:.2e} of the largest), "
              f"argmax agrees at {agree:.0%} of positions", flush=True)
        if name not in GREEDY_TYPES:
            continue
        ours = xfmr_greedy(args, path, tokens, STEPS, workdir)
        theirs, scores = llamacpp_greedy(path, tokens, STEPS)
        if ours == theirs:
            print(f"PASS: {arch} {name} greedy {STEPS} tokens identical", flush=True)
            continue
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
                     min(len(ours), len(theirs)))
        margin = bound = None
        if name in NEAR_TIE_TYPES and first < min(len(ours), len(theirs)):
            margin = scores[first][theirs[first]] - scores[first][ours[first]]
            bound = BOUNDS[name] * np.max(np.abs(scores[first]))
        if margin is not None and margin <= bound:
            print(f"PASS: {arch} {name} greedy tokens identical for {first} steps, then a near "
                  f"tie: llama.cpp's logits of its token {theirs[first]} and of {ours[first]} "
                  f"differ by {margin:.3g} (limit {bound:.3g})", flush=True)
            continue
        ok = False
        print(f"FAIL: {arch} {name} greedy {STEPS} tokens differ from step {first}: "
              f"{ours} != {theirs}", flush=True)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xfmrc", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("archs", nargs="+", choices=sorted(architectures(2, {})))
    args = parser.parse_args()
    processor = train_sentencepiece(True)
    ok = True
    for arch in args.archs:
        ok &= run_arch(args, arch, processor)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
