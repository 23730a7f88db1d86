#!/usr/bin/env python3
"""Runs a generator compiled over a batch (with its one-sequence prefill_row
and decode_row entries) on one prompt alone, read through prefill_row and
stepped through decode_row, and on a whole batch of prompts, read through
the batch's prefill and stepped through its decode, and checks that the
prompt's greedy tokens and every step's logits are the same bit for bit.

  row_entries_check.py GENERATOR WEIGHTS BATCH WORKDIR"""

import os
import subprocess
import sys

import numpy as np

import safetensors_io


def generate(generator, weights, prompts, path):
    command = [generator, "-m", weights, "--ids", "-n", "6", "--temp", "0", "--ignore-eos",
               "--no-echo", f"--save-logits={path}"]
    for prompt in prompts:
        command += ["-p", " ".join(str(t) for t in prompt)]
    subprocess.run(command, check=True, capture_output=True)
    saved = safetensors_io.read(path)
    tokens = saved["tokens"][0]
    return tokens[tokens >= 0], saved["logits"][0]


def main():
    generator, weights, batch, workdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    rng = np.random.default_rng(0)
    # Two chunks of 32 of the first prompt, and others of other lengths.
    prompts = [rng.integers(1, 250, size=int(n)).tolist()
               for n in [40] + list(rng.integers(3, 50, size=batch - 1))]
    alone = generate(generator, weights, prompts[:1], os.path.join(workdir, "alone.safetensors"))
    together = generate(generator, weights, prompts, os.path.join(workdir, "batch.safetensors"))
    same = all(np.array_equal(a, b) for a, b in zip(alone, together))
    difference = float(np.abs(alone[1] - together[1]).max())
    print(f"{'PASS' if same else 'FAIL'}: a sequence generated alone and in a batch of {batch}: "
          f"tokens {'equal' if np.array_equal(alone[0], together[0]) else 'differ'}, "
          f"logits differ by at most {difference:g}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
