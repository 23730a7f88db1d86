"""Compares two .safetensors files tensor by tensor, or two .npy outputs: exit 0 when every
tensor of the first agrees with the second's within `--within` times its largest magnitude."""
import argparse
import sys

import numpy as np

import safetensors_io


def load(path):
    if path.endswith(".npy"):
        return {"output": np.load(path)}
    return safetensors_io.read(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--within", type=float, required=True)
    args = parser.parse_args()
    first, second = load(args.first), load(args.second)
    if sorted(first) != sorted(second):
        sys.exit("%s and %s hold different tensors" % (args.first, args.second))
    worst_name, worst = None, 0.0
    for name in sorted(first):
        a = np.asarray(first[name], np.float64)
        b = np.asarray(second[name], np.float64)
        if a.shape != b.shape:
            sys.exit("'%s' is %s in one and %s in the other" % (name, a.shape, b.shape))
        scale = max(np.abs(b).max(initial=0.0), np.finfo(np.float32).tiny)
        error = np.abs(a - b).max(initial=0.0) / scale
        if error >= worst:
            worst_name, worst = name, error
    print("largest relative difference %.3g (%s)" % (worst, worst_name))
    if not worst <= args.within:
        print("they differ by more than %.0e" % args.within)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
