#!/usr/bin/env python3
"""Inputs and statistical checks of test/e2e/ops/dropout.mlir.

  dropout_stats.py generate INPUTS.safetensors
  dropout_stats.py check INPUTS OUTPUTS

Rate 0.3 over 100000 elements: the dropped fraction has a standard
deviation of 0.0014, so the bounds below (0.01 overall, 0.1 per row of 500,
0.01 on the joint fraction of two seeds) are 5-7 standard deviations wide.
"""

import sys

import numpy as np

import safetensors_io

RATE = 0.3


def generate(path):
    rng = np.random.default_rng(7)
    x = (rng.random((200, 500)) + 0.5).astype(np.float32)  # never 0: zeros mean dropped
    r = rng.standard_normal((200, 500)).astype(np.float32)
    safetensors_io.write(path, {"x": x, "r": r, "seed_a": np.array(1234567, dtype=np.int64),
                                "seed_b": np.array(1234568, dtype=np.int64)})


def check(inputs_path, outputs_path):
    inputs = safetensors_io.read(inputs_path)
    out = safetensors_io.read(outputs_path)
    x, r = inputs["x"].astype(np.float64), inputs["r"].astype(np.float64)
    a, b = out["a"].astype(np.float64), out["b"].astype(np.float64)
    dropped_a, dropped_b = a == 0, b == 0
    results = []

    def report(name, ok, detail):
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'}: {name}: {detail}")

    fraction = dropped_a.mean()
    report("dropped fraction", abs(fraction - RATE) < 0.01, f"{fraction:.4f} (rate {RATE})")
    rows = dropped_a.mean(axis=1)
    report("dropped fraction per row", np.all(np.abs(rows - RATE) < 0.1),
           f"min {rows.min():.3f}, max {rows.max():.3f}")
    kept = ~dropped_a
    error = np.max(np.abs(a[kept] - x[kept] / (1 - RATE)) / (x[kept] / (1 - RATE)))
    report("kept values scaled", error < 1e-6, f"max rel. error {error:.2e}")
    report("same seed, same mask", np.array_equal(out["a"], out["a_again"]), "a == a_again")
    joint = (dropped_a & dropped_b).mean()
    report("other seed, independent mask",
           abs(dropped_b.mean() - RATE) < 0.01 and abs(joint - RATE * RATE) < 0.01,
           f"both dropped {joint:.4f} (independent: {RATE * RATE:.4f})")
    grad = out["grad:x"].astype(np.float64)
    want = np.where(kept, r / (1 - RATE), 0.0)
    same = np.array_equal(grad == 0, dropped_a | (r == 0))
    report("backward mask", same and np.max(np.abs(grad - want)) < 1e-5,
           f"max |grad - mask * r / (1 - rate)| = {np.max(np.abs(grad - want)):.2e}")
    return 0 if all(results) else 1


def main():
    if sys.argv[1] == "generate":
        generate(sys.argv[2])
        return 0
    return check(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    sys.exit(main())
