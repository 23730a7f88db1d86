#!/usr/bin/env python3
"""Inputs and the PyTorch reference of test/e2e/grad/train-step.mlir.

  train_step.py generate INPUTS.safetensors --step N --state adamw|sgd
      [--scaler EXPONENT,GOOD_STEPS]
  train_step.py check INPUTS OUTPUTS --optimizer adamw|sgd --lr L [--warmup W]
      [--decay D] [--min-ratio R] [--weight-decay WD] [--momentum M] [--clip C]
      [--loss-scale INITIAL --growth-interval N]

`check` runs the same model in PyTorch (float32), clips with
torch.nn.utils.clip_grad_norm_, steps torch.optim.AdamW / SGD from the given
state, and prints one PASS/FAIL line per output: max |xfmr - torch| <=
1e-5 * max |torch|, and for updated tensors also max |xfmr - torch| <=
1e-3 * max |torch - before| (the update itself, which is small next to the
weights, must match).

With --loss-scale, the step scales its loss dynamically from the state
`loss_scale.exponent` (scale INITIAL * 2^exponent) and `loss_scale.good_steps`;
the reference is torch.cuda.amp.GradScaler's algorithm (which this PyTorch
runs on CUDA only), written out: backward of loss * scale, unscale_, skip
the optimizer step if any gradient is not finite, update (x0.5 on overflow,
x2 after N finite steps in a row). A skipped step must leave every weight
and state bit-identical.
"""

import argparse
import math
import sys

import numpy as np
import torch

import safetensors_io

PARAMS = {"w1": (16, 32), "b1": (32,), "gamma": (32,), "beta": (32,), "w2": (10, 32)}
TOLERANCE = 1e-5
UPDATE_TOLERANCE = 1e-3


def generate(args):
    rng = np.random.default_rng(args.step)
    f32 = lambda *shape, scale=1.0: (rng.standard_normal(shape) * scale).astype(np.float32)
    labels = rng.integers(0, 10, (4, 8)).astype(np.int32)
    labels[1, 5:] = -100
    tensors = {"x": f32(4, 8, 16), "labels": labels, "step": np.array(args.step, dtype=np.int64)}
    if args.scaler:
        exponent, good = (float(v) for v in args.scaler.split(","))
        tensors["loss_scale.exponent"] = np.array(exponent, dtype=np.float32)
        tensors["loss_scale.good_steps"] = np.array(good, dtype=np.float32)
    for name, shape in PARAMS.items():
        tensors[name] = f32(*shape, scale=0.3) + (1.0 if name == "gamma" else 0.0)
        if args.state == "adamw":
            tensors[name + ".exp_avg"] = f32(*shape, scale=0.01)
            tensors[name + ".exp_avg_sq"] = np.abs(f32(*shape, scale=1e-4))
        else:
            tensors[name + ".momentum_buffer"] = f32(*shape, scale=0.01)
    safetensors_io.write(args.path, tensors)


def learning_rate(args, step):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    if args.decay <= args.warmup:
        return args.lr
    progress = min(1.0, (step - args.warmup) / (args.decay - args.warmup))
    return args.lr * (args.min_ratio + (1 - args.min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def check(args):
    inputs = safetensors_io.read(args.inputs)
    outputs = safetensors_io.read(args.outputs)
    step = int(inputs["step"])
    params = {n: torch.tensor(inputs[n], requires_grad=True) for n in PARAMS}
    x, labels = torch.tensor(inputs["x"]), torch.tensor(inputs["labels"]).long()
    h = torch.nn.functional.gelu(x @ params["w1"] + params["b1"])
    n = torch.nn.functional.layer_norm(h, (32,), params["gamma"], params["beta"], 1e-5)
    logits = n @ params["w2"].T
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 10), labels.reshape(-1),
                                             ignore_index=-100)
    lr = learning_rate(args, step)
    ordered = list(params.values())
    expected = {"loss": loss.detach().numpy(), "lr": np.float32(lr)}
    skipped = False
    if args.loss_scale:
        exponent = float(inputs["loss_scale.exponent"])
        good = float(inputs["loss_scale.good_steps"])
        scale = torch.tensor(args.loss_scale * 2.0**exponent, dtype=torch.float32)
        (loss * scale).backward()
        for p in ordered:
            p.grad.mul_(1.0 / scale)
        skipped = not all(bool(torch.isfinite(p.grad).all()) for p in ordered)
        expected["loss_scale"] = scale.numpy()
        if skipped:
            exponent, good = exponent - 1, 0.0
        else:
            good += 1
            if good == args.growth_interval:
                exponent, good = exponent + 1, 0.0
        expected["new:loss_scale.exponent"] = np.float32(exponent)
        expected["new:loss_scale.good_steps"] = np.float32(good)
        # The norm of the unscaled gradients, even without clipping.
        norm = torch.nn.utils.clip_grad_norm_(ordered, args.clip if args.clip > 0 else math.inf)
        expected["grad_norm"] = norm.numpy()
    else:
        loss.backward()
        if args.clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(ordered, args.clip)
            expected["grad_norm"] = norm.numpy()
    if args.optimizer == "adamw":
        optimizer = torch.optim.AdamW(ordered, lr=lr, weight_decay=args.weight_decay)
        for name, p in params.items():
            optimizer.state[p] = {"step": torch.tensor(float(step)),
                                  "exp_avg": torch.tensor(inputs[name + ".exp_avg"]),
                                  "exp_avg_sq": torch.tensor(inputs[name + ".exp_avg_sq"])}
        states = ("exp_avg", "exp_avg_sq")
    else:
        optimizer = torch.optim.SGD(ordered, lr=lr, momentum=args.momentum,
                                    weight_decay=args.weight_decay)
        for name, p in params.items():
            optimizer.state[p] = {"momentum_buffer": torch.tensor(inputs[name + ".momentum_buffer"])}
        states = ("momentum_buffer",)
    if not skipped:
        optimizer.step()
    print(f"{'skipped' if skipped else 'applied'} step")
    for name, p in params.items():
        expected["new:" + name] = p.detach().numpy()
        for state in states:
            expected[f"new:{name}.{state}"] = optimizer.state[p][state].numpy()

    failed = False
    for name, want in expected.items():
        if name not in outputs:
            print(f"FAIL: {name}: missing from the outputs")
            failed = True
            continue
        got = np.asarray(outputs[name], dtype=np.float64)
        want = np.asarray(want, dtype=np.float64)
        if not np.all(np.isfinite(want)):
            ok = not np.any(np.isfinite(got[~np.isfinite(want)]))
            failed |= not ok
            print(f"{'PASS' if ok else 'FAIL'}: {name} (overflow): not finite")
            continue
        if skipped and name.startswith("new:") and not name.startswith("new:loss_scale."):
            ok = np.array_equal(got, inputs[name[4:]])
            failed |= not ok
            print(f"{'PASS' if ok else 'FAIL'}: {name} (skipped): unchanged")
            continue
        error = float(np.max(np.abs(got - want)))
        bound = TOLERANCE * float(np.max(np.abs(want)))
        if name.startswith("new:"):
            change = float(np.max(np.abs(want - inputs[name[4:]])))
            bound = min(bound, UPDATE_TOLERANCE * change) if change > 0 else bound
        label = name
        if name == "grad_norm" and args.clip > 0:
            label += " (clipped)" if float(want) > args.clip else " (not clipped)"
        ok = got.shape == want.shape and error <= bound
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'}: {label}: max abs err {error:.3g} (bound {bound:.3g})")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("path")
    gen.add_argument("--step", type=int, required=True)
    gen.add_argument("--state", choices=("adamw", "sgd"), required=True)
    gen.add_argument("--scaler", help="EXPONENT,GOOD_STEPS: loss-scaling state")
    chk = sub.add_parser("check")
    chk.add_argument("inputs")
    chk.add_argument("outputs")
    chk.add_argument("--optimizer", choices=("adamw", "sgd"), required=True)
    chk.add_argument("--lr", type=float, required=True)
    chk.add_argument("--warmup", type=int, default=0)
    chk.add_argument("--decay", type=int, default=0)
    chk.add_argument("--min-ratio", type=float, default=0.0)
    chk.add_argument("--weight-decay", type=float, default=0.0)
    chk.add_argument("--momentum", type=float, default=0.9)
    chk.add_argument("--clip", type=float, default=0.0)
    chk.add_argument("--loss-scale", type=float, default=0.0)
    chk.add_argument("--growth-interval", type=int, default=2000)
    args = parser.parse_args()
    if args.command == "generate":
        generate(args)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
