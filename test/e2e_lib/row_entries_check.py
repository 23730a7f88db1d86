#!/usr/bin/env python3
"""Runs a generator compiled over a batch (with its prefill_row, decode_row
and decode_group entries) on one prompt alone (read through prefill_row,
stepped through decode_row), on three (stepped through the first group's
decode_group), on eight whose last four take a step more (the second
group's) and on a whole batch of prompts (the batch's prefill and decode),
and checks that each prompt's greedy tokens and every step's logits are the
same bit for bit whichever entries and rows computed them. Prints the
decode calls of each run.

  row_entries_check.py GENERATOR WEIGHTS BATCH WORKDIR"""

import os
import re
import subprocess
import sys

import numpy as np

import safetensors_io


def generate(generator, weights, prompts, path):
    command = [generator, "-m", weights, "--ids", "-n", "6", "--temp", "0", "--ignore-eos",
               "--no-echo", f"--save-logits={path}"]
    for prompt in prompts:
        command += ["-p", " ".join(str(t) for t in prompt)]
    run = subprocess.run(command, check=True, capture_output=True, text=True)
    calls = re.search(r"^decode calls: .*$", run.stderr, re.M)
    print(f"{len(prompts)} prompts: {calls.group(0) if calls else 'no decode calls line'}")
    saved = safetensors_io.read(path)
    return [(tokens[tokens >= 0], logits)
            for tokens, logits in zip(saved["tokens"], saved["logits"])]


def main():
    generator, weights, batch, workdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    rng = np.random.default_rng(0)
    # Two chunks of 32 of the first prompt, and others of other lengths.
    prompts = [rng.integers(1, 250, size=int(n)).tolist()
               for n in [40] + list(rng.integers(3, 50, size=batch - 1))]
    together = generate(generator, weights, prompts, os.path.join(workdir, "batch.safetensors"))
    # Prompts of one chunk, then of two: the last four start (and end) a
    # step later, that step theirs alone.
    short = [i for i, p in enumerate(prompts) if len(p) <= 32][:4]
    long = [i for i, p in enumerate(prompts) if len(p) > 32][:4]
    ok = True
    for chosen in ([0], [0, 1, 2], short + long):
        run = generate(generator, weights, [prompts[i] for i in chosen],
                       os.path.join(workdir, f"run-{len(chosen)}.safetensors"))
        for row, (i, (tokens, logits)) in enumerate(zip(chosen, run)):
            same_tokens = np.array_equal(tokens, together[i][0])
            difference = float(np.abs(logits - together[i][1]).max())
            same = same_tokens and difference == 0
            ok &= same
            print(f"{'PASS' if same else 'FAIL'}: prompt {i} generated in row {row} of "
                  f"{len(chosen)} and in a batch of {batch}: tokens "
                  f"{'equal' if same_tokens else 'differ'}, logits differ by at most "
                  f"{difference:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
