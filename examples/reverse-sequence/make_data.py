#!/usr/bin/env python3
"""Writes the reverse-sequence task: 16 random digits | the same reversed.

usage: make_data.py OUT_DIR [--train N] [--eval N] [--seed S]

Writes OUT_DIR/train.txt and OUT_DIR/eval.txt in the trainer's format
('input ids | labels', one example per line). The held-out examples are
drawn from the same distribution but never occur in the training file.
"""
import argparse
import os
import random


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--train", type=int, default=20000)
    parser.add_argument("--eval", type=int, default=1000)
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    seen = set()

    def write(path, count):
        with open(path, "w") as out:
            while count:
                digits = tuple(rng.randrange(10) for _ in range(args.length))
                if digits in seen:
                    continue
                seen.add(digits)
                count -= 1
                out.write(" ".join(map(str, digits)) + " | " +
                          " ".join(map(str, reversed(digits))) + "\n")

    os.makedirs(args.out_dir, exist_ok=True)
    write(os.path.join(args.out_dir, "eval.txt"), args.eval)
    write(os.path.join(args.out_dir, "train.txt"), args.train)


if __name__ == "__main__":
    main()
