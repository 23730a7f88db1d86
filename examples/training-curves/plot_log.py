#!/usr/bin/env python3
"""Plots the per-step metrics a trainer writes with --log=FILE: the training
loss (and token accuracy) and the learning-rate schedule, one panel each.

  plot_log.py LOG.csv OUT.png [--smooth=N]
"""

import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLUMNS = ("step", "loss", "token_accuracy", "lr", "grad_norm", "tokens_per_second")


def read_log(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or tuple(rows[0].keys()) != COLUMNS:
        sys.exit(f"{path}: not a trainer log (expected the columns {', '.join(COLUMNS)})")
    return {c: [float(r[c]) if r[c] else float("nan") for r in rows] for c in COLUMNS}


def smooth(values, n):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - n] if i >= n else 0.0)
        out.append(total / min(i + 1, n))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("out")
    parser.add_argument("--smooth", type=int, default=10, help="moving average over N steps")
    args = parser.parse_args()
    log = read_log(args.log)
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    top.plot(log["step"], log["loss"], alpha=0.3, color="C0")
    top.plot(log["step"], smooth(log["loss"], args.smooth), color="C0", label="loss")
    top.set_ylabel("training loss")
    accuracy = top.twinx()
    accuracy.plot(log["step"], smooth(log["token_accuracy"], args.smooth), color="C1")
    accuracy.set_ylabel("token accuracy", color="C1")
    bottom.plot(log["step"], log["lr"], color="C2")
    bottom.set_ylabel("learning rate")
    bottom.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}: {len(log['step'])} steps, loss {log['loss'][0]:.4f} -> "
          f"{log['loss'][-1]:.4f}")


if __name__ == "__main__":
    main()
