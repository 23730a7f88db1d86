#!/usr/bin/env python3
"""Gradient checks of compiled xfmr gradients against central finite
differences of the compiled loss, in float64.

  gradcheck.py CASE --loss EXE --grad EXE --workdir DIR

CASE names a generator of random inputs (below) for the `@loss` function of
one test file; EXE are that file compiled by `xfmrc` as is (--entry=loss)
and with `--grad`. For every input the gradient executable differentiates
(its `grad:<name>` outputs), along random unit directions u:

    | (L(x + h u) - L(x - h u)) / 2h  -  <grad L(x), u> |  <=  tol * max(1, |<grad L, u>|)

and prints one PASS/FAIL line per input. Directional checks (PyTorch's
gradcheck fast mode) cover every element at the cost of two loss
evaluations per direction.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

import safetensors_io

RNG = np.random.default_rng(2024)
STEP = 1e-5
TOLERANCE = 1e-6
DIRECTIONS = 3


def randn(*shape, scale=1.0):
    return RNG.standard_normal(shape) * scale


def ids(high, *shape):
    return RNG.integers(0, high, shape).astype(np.int32)


def case_elementwise():
    return dict(a=randn(3, 4, 5), b=randn(4, 1), c=randn(3, 4, 5), d=randn(3, 4, 5),
                m=randn(2, 3, 4, 6), n=randn(2, 3, 6, 5), k=randn(7, 4), l=randn(7, 6),
                mask=RNG.random((3, 4, 5)) < 0.5, seed=np.array(1234567, dtype=np.int64),
                r1=randn(3, 4, 5), r2=randn(3, 4, 1), r3=randn(2, 3, 4, 5), r4=randn(4, 6),
                r5=randn(5, 4, 3), r6=randn(3, 4, 5), r7=randn(3, 4, 5), r8=randn(3, 4, 5))


def case_normalization():
    x = randn(4, 6, 16, scale=2.0)
    x[0] += 30.0  # a large mean
    return dict(x=x, y=randn(4, 6, 16), gamma=1.0 + randn(16, scale=0.2), beta=randn(16),
                s=randn(2, 5, 9), r1=randn(4, 6, 16), r2=randn(4, 6, 16), r3=randn(4, 6, 16),
                r4=randn(4, 6, 16), r5=randn(2, 5, 9), r6=randn(2, 5, 9))


def case_attention():
    pad = np.ones((2, 70), dtype=np.bool_)
    pad[1, 50:] = False
    return dict(q=randn(2, 70, 3, 8), k=randn(2, 70, 3, 8), v=randn(2, 70, 3, 8), pad=pad,
                cq=randn(1, 2, 20, 8), ck=randn(1, 2, 36, 8), cv=randn(1, 2, 36, 8),
                bias=randn(1, 2, 20, 36), r1=randn(2, 70, 3, 8), r2=randn(1, 2, 20, 8),
                x=randn(2, 10, 16), mem=randn(2, 7, 16), wqkv=randn(16, 48, scale=0.3),
                bqkv=randn(48, scale=0.1), wo=randn(16, 16, scale=0.3), bo=randn(16, scale=0.1),
                wq=randn(16, 16, scale=0.3), wk=randn(16, 16, scale=0.3),
                wv=randn(16, 16, scale=0.3), xpad=np.array([[1] * 7, [1] * 5 + [0] * 2]) != 0,
                r3=randn(2, 10, 16), r4=randn(2, 10, 16))


def case_transformer():
    targets = ids(11, 2, 6)
    targets[0, :2] = -100
    return dict(ids=ids(11, 2, 6), table=randn(11, 8), pos=randn(9, 8), x=randn(2, 6, 8),
                w=randn(8, 12, scale=0.4), wt=randn(12, 8, scale=0.4), bias=randn(12, scale=0.2),
                res=randn(2, 6, 12), targets=targets, logits=randn(2, 6, 11, scale=2.0),
                r1=randn(2, 6, 8), r2=randn(2, 6, 8), r3=randn(2, 6, 12), r4=randn(2, 6, 12),
                r5=randn(2, 6, 12), r6=randn(2, 6, 12), wg=randn(12, 8, scale=0.4),
                bg=randn(12, scale=0.2), r7=randn(2, 6, 12), wg2=randn(8, 12, scale=0.4),
                r8=randn(2, 6, 12))


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def run(exe, inputs_path, output_path):
    subprocess.run([exe, f"--inputs={inputs_path}", f"--output={output_path}"], check=True)
    return safetensors_io.read(output_path)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--loss", required=True)
    parser.add_argument("--grad", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    inputs = CASES[args.case]()
    base = os.path.join(args.workdir, "inputs.safetensors")
    safetensors_io.write(base, inputs)
    grads = run(args.grad, base, os.path.join(args.workdir, "grads.safetensors"))
    loss = run(args.loss, base, os.path.join(args.workdir, "loss.safetensors"))["loss"]
    if abs(float(grads["loss"]) - float(loss)) > 1e-12 * max(1.0, abs(float(loss))):
        print(f"FAIL: the gradient executable's loss {float(grads['loss'])} differs from {float(loss)}")
        return 1

    failed = False
    perturbed = os.path.join(args.workdir, "perturbed.safetensors")
    for key in sorted(k for k in grads if k.startswith("grad:")):
        name = key[5:]
        grad = grads[key]
        worst = 0.0
        for _ in range(DIRECTIONS):
            direction = RNG.standard_normal(inputs[name].shape)
            direction /= np.linalg.norm(direction)
            values = []
            for sign in (1.0, -1.0):
                moved = dict(inputs)
                moved[name] = inputs[name] + sign * STEP * direction
                safetensors_io.write(perturbed, moved)
                values.append(float(run(args.loss, perturbed,
                                        os.path.join(args.workdir, "moved.safetensors"))["loss"]))
            numeric = (values[0] - values[1]) / (2 * STEP)
            analytic = float(np.sum(grad * direction))
            worst = max(worst, abs(numeric - analytic) / max(1.0, abs(analytic)))
        ok = worst <= TOLERANCE and np.all(np.isfinite(grad)) and np.any(grad != 0)
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'}: {name}: |grad|max {np.max(np.abs(grad)):.3e}, "
              f"worst directional error {worst:.2e} (tolerance {TOLERANCE:g})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
