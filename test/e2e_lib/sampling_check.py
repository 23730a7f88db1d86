#!/usr/bin/env python3
"""xfmr's sampling filters against transformers' own logits processors
(RepetitionPenalty, Temperature, TopK, TopP, in generate()'s order): the
probabilities the next token is drawn from, for random logits and histories;
half the vocabularies past 256 tokens, where top-p alone sorts only the
highest tokens it may keep.

  sampling_check.py SAMPLING_PROGRAM
"""
import subprocess
import sys

import numpy as np
import torch
from transformers.generation.logits_process import (LogitsProcessorList,
                                                    RepetitionPenaltyLogitsProcessor,
                                                    TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

SETTINGS = [  # temperature, top_k, top_p, repetition penalty
    (1.0, 0, 1.0, 1.0), (0.7, 10, 1.0, 1.0), (1.3, 0, 0.8, 1.0), (0.9, 40, 0.95, 1.3),
    (2.0, 5, 0.5, 0.8), (0.5, 1, 1.0, 1.0), (1.0, 0, 0.05, 1.0), (1.0, 0, 0.99, 1.1)]


def reference(logits, history, temperature, top_k, top_p, penalty):
    processors = LogitsProcessorList()
    if penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(penalty))
    processors.append(TemperatureLogitsWarper(temperature))
    if top_k:
        processors.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        processors.append(TopPLogitsWarper(top_p))
    ids = torch.tensor([history], dtype=torch.long)
    scores = processors(ids, torch.tensor(logits, dtype=torch.float64)[None])
    return torch.softmax(scores, dim=-1)[0].numpy()


def main():
    program = sys.argv[1]
    rng = np.random.default_rng(11)
    worst, cases = 0.0, 0
    for temperature, top_k, top_p, penalty in SETTINGS:
        inputs, expected = [], []
        for i in range(20):
            vocab = int(rng.integers(2, 300) if i % 2 else rng.integers(300, 6000))
            logits = (rng.standard_normal(vocab) * rng.uniform(0.5, 6)).astype(np.float32)
            history = rng.integers(0, vocab, size=int(rng.integers(1, 30))).tolist()
            inputs.append(f"{vocab} {' '.join(repr(float(x)) for x in logits)} "
                          f"{len(history)} {' '.join(map(str, history))}")
            expected.append(reference(logits, history, temperature, top_k, top_p, penalty))
        out = subprocess.run([program, str(temperature), str(top_k), str(top_p), str(penalty), "0"],
                             input="\n".join(inputs) + "\n", capture_output=True, text=True,
                             check=True).stdout.splitlines()
        for line, want in zip(out, expected):
            got = np.array([float(x) for x in line.split()])
            worst = max(worst, float(np.abs(got - want).max()))
            cases += 1
    ok = worst <= 1e-5 and cases == 20 * len(SETTINGS)
    print(f"{'PASS' if ok else 'FAIL'}: sampling probabilities of {cases} cases against "
          f"transformers' logits processors: max error {worst:.2e} (limit 1e-5)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
