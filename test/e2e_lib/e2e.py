#!/usr/bin/env python3
"""One end-to-end comparison: random weights and token sequences for a
config, the model compiled by xfmrc with every fusion on and then with each
fusion off in turn, each executable's logits checked against the float64
PyTorch reference (reference.py check). Prints one PASS/FAIL line per
compilation.

  e2e.py --xfmrc PATH --config C --workdir DIR [--batch B] [--seq-len S]
         [--decoder-seq-len T] [--sequences N] [--seed K] [--xfmrc-flag F]...
         [--rel-tol R] [--all-fusions-only]
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FUSIONS = ["attention", "softmax", "layer-norm", "epilogues"]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xfmrc", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=0)
    parser.add_argument("--decoder-seq-len", type=int, default=0)
    parser.add_argument("--sequences", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--xfmrc-flag", action="append", default=[],
                        help="extra xfmrc flag for every compilation (e.g. --target=nvptx)")
    parser.add_argument("--rel-tol", default="1e-4",
                        help="max |xfmr - torch| <= rel-tol * max |torch| (reference.py check)")
    parser.add_argument("--all-fusions-only", action="store_true",
                        help="only the compilation with every fusion on")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    weights = os.path.join(args.workdir, "weights.safetensors")
    tokens = os.path.join(args.workdir, "tokens.txt")
    reference = [sys.executable, os.path.join(HERE, "reference.py")]
    subprocess.run(reference + ["generate", "--config", args.config, "--weights", weights,
                                "--tokens", tokens, "--sequences", str(args.sequences),
                                "--seq-len", str(args.seq_len), "--decoder-seq-len",
                                str(args.decoder_seq_len), "--seed", str(args.seed)], check=True)
    variants = [("all fusions", [])]
    if not args.all_fusions_only:
        variants += [(f"--fuse-{f}=false", [f"--fuse-{f}=false"]) for f in FUSIONS]
    failed = False
    for name, flags in variants:
        model = os.path.join(args.workdir, "model-" + str(len(flags) and flags[0][7:-6]))
        logits = model + ".npy"
        subprocess.run([args.xfmrc, args.config, f"--batch={args.batch}",
                        f"--seq-len={args.seq_len}", f"--decoder-seq-len={args.decoder_seq_len}",
                        "-o", model] + args.xfmrc_flag + flags, check=True)
        subprocess.run([model, f"--weights={weights}", f"--input={tokens}",
                        f"--output={logits}"], check=True)
        check = subprocess.run(reference + ["check", "--config", args.config, "--weights",
                                            weights, "--tokens", tokens, "--output", logits,
                                            "--rel-tol", args.rel_tol],
                               capture_output=True, text=True)
        print(f"[{name}] {check.stdout.strip()}", flush=True)
        failed |= check.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
