#!/usr/bin/env python3
"""Whole-model gradients of Hugging Face decoder checkpoints against
transformers itself: `xfmrc DIR --grad` (mean cross-entropy of the logits
against `labels`, -100 ignored) against PyTorch autograd of the class's own
float64 forward on the same padded batch, every weight:

    max |xfmr - torch| <= rel_tol * max |torch|

Then `xfmrc DIR --train` from the same checkpoint: a few steps on a small
corpus must lower the loss.

  hf_grads.py --xfmrc PATH --workdir DIR [--xfmrc-flag FLAG]... [--gradients-only]
              CASE [CASE...]

--xfmrc-flag adds a flag to both compilations (--emulate-gpu-kernels: the
GPU kernels, their thread blocks run as loops on the CPU).

Runs under the oracle's virtual environment (scripts/install-oracle.sh).
"""

import argparse
import os
import re
import subprocess
import sys

import numpy as np
import torch
import transformers as tf
from safetensors.numpy import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_models import ROPE_LLAMA3, decoder_config, padded, random_sequences, randomize  # noqa: E402

torch.set_num_threads(2)
tf.logging.set_verbosity_error()

CASES = {
    "llama": (tf.LlamaForCausalLM,
              lambda: decoder_config(tf.LlamaConfig, rope_parameters=ROPE_LLAMA3, mlp_bias=True)),
    "qwen3": (tf.Qwen3ForCausalLM, lambda: decoder_config(tf.Qwen3Config, head_dim=16)),
    "gemma": (tf.GemmaForCausalLM, lambda: decoder_config(tf.GemmaConfig, head_dim=8)),
    # A sliding window of 5 keys over 12.
    "mistral": (tf.MistralForCausalLM, lambda: decoder_config(tf.MistralConfig, sliding_window=5)),
    # Soft-capped scores (about where these random ones reach) and logits,
    # alternating windowed and full layers.
    "gemma2": (tf.Gemma2ForCausalLM,
               lambda: decoder_config(tf.Gemma2Config, head_dim=8, sliding_window=5,
                                      query_pre_attn_scalar=16, attn_logit_softcapping=2.0,
                                      final_logit_softcapping=5.0)),
}


def gradients(args, case, cls, model, directory, workdir):
    rng = np.random.default_rng(args.seed)
    seq_len, vocab = 12, model.config.vocab_size
    sources = random_sequences(rng, 2, seq_len, vocab)
    ids, mask = padded(sources, seq_len, 0)
    labels = torch.tensor(rng.integers(0, vocab, size=ids.shape))
    labels[mask == 0] = -100
    labels[0, 0] = -100
    inputs = os.path.join(workdir, "inputs.safetensors")
    save_file({"input_ids": ids.int().numpy(), "attention_mask": mask.int().numpy(),
               "labels": labels.int().numpy()}, inputs)
    program = os.path.join(workdir, "grad")
    subprocess.run([args.xfmrc, *args.xfmrc_flag, directory, "--grad", "--batch=2", f"--seq-len={seq_len}",
                    "-o", program], check=True)
    outputs = os.path.join(workdir, "grads.safetensors")
    subprocess.run([program, f"--inputs={inputs}", f"--output={outputs}"], check=True)
    got = load_file(outputs)

    hf = cls.from_pretrained(directory)
    hf.set_attn_implementation("eager")
    hf = hf.double().train()
    # Without the mask where transformers' sliding window would leave padded
    # rows with nothing to see (NaN); the valid rows are the same.
    windowed = getattr(hf.config, "sliding_window", None)
    logits = hf(input_ids=ids, attention_mask=None if windowed else mask).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1),
                                             ignore_index=-100)
    loss.backward()
    ok = abs(float(got["loss"]) - loss.item()) <= args.rel_tol * max(1.0, abs(loss.item()))
    print(f"{'PASS' if ok else 'FAIL'}: {case} loss {float(got['loss']):.6f} "
          f"(transformers {loss.item():.6f})", flush=True)
    worst = 0.0
    for name, parameter in hf.named_parameters():
        key = next((k for k in ("grad:" + name, "grad:" + name.removeprefix("model."))
                    if k in got), None)
        if key is None:
            if name == "lm_head.weight" and hf.config.tie_word_embeddings:
                continue
            print(f"FAIL: {case}: no gradient for {name}")
            ok = False
            continue
        want = parameter.grad.numpy()
        error = float(np.max(np.abs(got[key] - want))) / float(np.max(np.abs(want)))
        worst = max(worst, error)
        if not (error <= args.rel_tol and np.all(np.isfinite(got[key]))):
            print(f"FAIL: {case} {name}: relative error {error:.2e}")
            ok = False
    print(f"{'PASS' if ok else 'FAIL'}: {case} gradients of {len(list(hf.parameters()))} "
          f"weights within {worst:.2e} of transformers' autograd (limit {args.rel_tol:g})",
          flush=True)
    return ok


def training(args, case, directory, workdir):
    """Fine-tuning the checkpoint: 60 AdamW steps on counting sequences
    (each token the one before it plus 1) at least halve the loss."""
    rng = np.random.default_rng(args.seed + 1)
    data = os.path.join(workdir, "train.txt")
    with open(data, "w") as f:
        for start in rng.integers(3, 60, size=64):
            f.write(" ".join(str(start + i) for i in range(12)) + "\n")
    trainer = os.path.join(workdir, "train")
    subprocess.run([args.xfmrc, *args.xfmrc_flag, "--train", directory, "--batch=8", "--seq-len=12", "--lr=1e-2",
                    "--warmup-steps=5", "--steps=60", "-o", trainer], check=True)
    log = subprocess.run([trainer, f"--train={data}", "--log-every=10", "--threads=2",
                          f"--weights={os.path.join(directory, 'model.safetensors')}"],
                         check=True, capture_output=True, text=True).stdout
    losses = [float(x) for x in re.findall(r"loss\s+([0-9.]+)", log)]
    ok = len(losses) >= 2 and losses[-1] < 0.5 * losses[0]
    print(f"{'PASS' if ok else 'FAIL'}: {case} fine-tuning: loss {losses[0] if losses else 'none'} "
          f"-> {losses[-1] if losses else 'none'} over 60 steps", flush=True)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xfmrc", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rel-tol", type=float, default=1e-4)
    parser.add_argument("--xfmrc-flag", action="append", default=[])
    parser.add_argument("--gradients-only", action="store_true",
                        help="skip the fine-tuning run")
    parser.add_argument("cases", nargs="+", choices=sorted(CASES))
    args = parser.parse_args()
    ok = True
    for case in args.cases:
        cls, make_config = CASES[case]
        workdir = os.path.join(args.workdir, case)
        directory = os.path.join(workdir, "checkpoint")
        os.makedirs(workdir, exist_ok=True)
        model = cls(make_config()).eval()
        randomize(model, torch.Generator().manual_seed(args.seed))
        model.save_pretrained(directory)
        ok &= gradients(args, case, cls, model, directory, workdir)
        if not args.gradients_only:
            ok &= training(args, case, directory, workdir)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
