#!/usr/bin/env python3
"""Whole-model gradients: `xfmrc --grad` of a config (its training loss:
mean cross-entropy of the logits against `labels`, -100 ignored) against
PyTorch autograd of the reference model (reference.py) in float64, on the
same random weights and batch (padded rows, ignored labels).

  grads.py --xfmrc PATH --config C --workdir DIR [--batch B] [--seq-len S]
           [--decoder-seq-len T] [--seed K] [--rel-tol 1e-4] [--dtype bf16|f16]
           [--stage all|prepare|check]

Dropout is switched off in a copy of the config (its masks are xfmr's own
counter-based RNG, which PyTorch does not reproduce; the dropout gradient is
checked per op by gradcheck.py). Prints the loss line and one PASS/FAIL line
per weight: max |xfmr - torch| <= rel_tol * max |torch| over the tensor.

With --dtype=bf16 or f16 (mixed precision: f32 weights rounded for use, the
model computed in that type, the loss in f32) the reference is the float64
model on the rounded weights, and the gradients are those of the f32 weights.

--stage=prepare writes the weights and inputs and compiles the model into
--workdir (on a machine with xfmrc); --stage=check runs what is there and
compares (on a GPU machine without LLVM: bench/gpu/prepare.sh, run.sh); the
default does both.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

import reference
import safetensors_io

DROPOUT_KEYS = ("resid_pdrop", "embd_pdrop", "attn_pdrop", "hidden_dropout_prob",
                "attention_probs_dropout_prob", "dropout", "attention_dropout",
                "activation_dropout")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xfmrc", default="xfmrc")
    parser.add_argument("--config", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=0)
    parser.add_argument("--decoder-seq-len", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rel-tol", type=float, default=1e-4)
    parser.add_argument("--dtype", choices=("f32", "bf16", "f16"), default="f32")
    parser.add_argument("--xfmrc-flag", action="append", default=[],
                        help="extra xfmrc flag (repeatable), e.g. --fuse-attention=false")
    parser.add_argument("--stage", choices=("all", "prepare", "check"), default="all")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    paths = [os.path.join(args.workdir, name) for name in
             ("config.json", "weights.safetensors", "inputs.safetensors", "grad")]
    if args.stage != "check":
        prepare(args, *paths)
    return 0 if args.stage == "prepare" else check(args, *paths)


def prepare(args, config_path, weights_path, inputs_path, model):
    """Writes the config without dropout, random weights and a batch, and
    compiles the gradient program."""

    with open(args.config) as f:
        config = json.load(f)
    for key in DROPOUT_KEYS:
        config[key] = 0.0
    with open(config_path, "w") as f:
        json.dump(config, f)
    c = reference.describe(config)
    generator = torch.Generator().manual_seed(args.seed)
    weights = reference.random_weights(c, generator)
    safetensors_io.write(weights_path, {k: v.numpy() for k, v in weights.items()})

    # A batch whose last row is padded; labels ignored on padding and at
    # random positions.
    seq = args.seq_len or c["positions"]
    dec = args.decoder_seq_len or seq
    def batch_of(length):
        ids = torch.randint(0, c["vocab"], (args.batch, length), generator=generator)
        mask = torch.ones(args.batch, length, dtype=torch.bool)
        mask[-1, length // 2:] = False
        return ids, mask
    ids, mask = batch_of(seq)
    out_len = seq
    inputs = {"input_ids": ids.int().numpy(), "attention_mask": mask.int().numpy()}
    if c["kind"] == "bert":
        inputs["token_type_ids"] = np.zeros_like(inputs["input_ids"])
    if c["kind"] == "transformer":
        tgt, tgt_mask = batch_of(dec)
        inputs["decoder_input_ids"] = tgt.int().numpy()
        inputs["decoder_attention_mask"] = tgt_mask.int().numpy()
        out_len, out_mask = dec, tgt_mask
    else:
        out_mask = mask
    labels = torch.randint(0, c["vocab"], (args.batch, out_len), generator=generator)
    labels[~out_mask] = -100
    labels[0, 0] = -100
    inputs["labels"] = labels.int().numpy()
    safetensors_io.write(inputs_path, inputs)
    subprocess.run([args.xfmrc, config_path, "--grad", f"--batch={args.batch}",
                    f"--seq-len={args.seq_len}", f"--decoder-seq-len={args.decoder_seq_len}",
                    f"--dtype={args.dtype}", "-o", model] + args.xfmrc_flag, check=True)


def check(args, config_path, weights_path, inputs_path, model):
    """Runs the compiled program on prepare()'s files against autograd."""
    with open(config_path) as f:
        c = reference.describe(json.load(f))
    weights = {k: torch.from_numpy(v.copy()) for k, v in safetensors_io.read(weights_path).items()}
    inputs = {k: torch.from_numpy(v.copy()) for k, v in safetensors_io.read(inputs_path).items()}
    ids, mask = inputs["input_ids"].long(), inputs["attention_mask"].bool()
    labels = inputs["labels"].long()
    if c["kind"] == "transformer":
        tgt, tgt_mask = inputs["decoder_input_ids"].long(), inputs["decoder_attention_mask"].bool()
    outputs_path = os.path.join(args.workdir, "outputs.safetensors")
    subprocess.run([model, f"--weights={weights_path}", f"--inputs={inputs_path}",
                    f"--output={outputs_path}"], check=True)
    got = safetensors_io.read(outputs_path)

    rounding = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    leaves = {name: value.to(rounding).to(reference.DTYPE).requires_grad_()
              for name, value in weights.items()}
    if c["kind"] == "transformer":
        logits = reference.transformer(c, leaves, ids, mask, tgt, tgt_mask)
    else:
        logits = (reference.gpt2 if c["kind"] == "gpt2" else reference.bert)(c, leaves, ids, mask)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, c["vocab"]), labels.reshape(-1),
                                             ignore_index=-100)
    loss.backward()

    failed = False
    loss_error = abs(float(got["loss"]) - loss.item())
    ok = loss_error <= args.rel_tol * max(1.0, abs(loss.item()))
    failed |= not ok
    print(f"{'PASS' if ok else 'FAIL'}: {c['kind']} loss {float(got['loss']):.6f} "
          f"(torch {loss.item():.6f})")
    largest = max(float(leaf.grad.abs().max()) for leaf in leaves.values())
    # xfmr names weights without the task classes' prefix (as the base
    # model saves them); the reference keeps the checkpoint's full names.
    def gradient_key(name):
        for prefix in ("", "bert.", "transformer.", "model."):
            if name.startswith(prefix) and "grad:" + name[len(prefix):] in got:
                return "grad:" + name[len(prefix):]
        return "grad:" + name

    for name, leaf in sorted(leaves.items()):
        key = gradient_key(name)
        if key not in got:
            print(f"FAIL: no gradient for {name}")
            failed = True
            continue
        want = leaf.grad.numpy()
        error = float(np.max(np.abs(got[key] - want)))
        scale = float(np.max(np.abs(want)))
        note = ""
        if scale < 1e-10 * largest:
            # Zero in exact arithmetic (e.g. a key bias, which shifts every
            # score of a row equally): rounding noise is measured against
            # the model's largest gradient instead.
            scale, note = largest, " (zero gradient: scale of the largest)"
        ok = np.all(np.isfinite(got[key])) and error <= args.rel_tol * scale
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'}: {name}: max error {error:.2e}, "
              f"max |torch| {scale:.2e}, ratio {error / scale:.2e}{note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
