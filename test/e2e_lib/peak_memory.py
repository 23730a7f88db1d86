#!/usr/bin/env python3
"""Runs a generator command under /usr/bin/time -v and checks its peak
resident memory against what it reports holding: weights (mapped and
converted), KV cache and activations, plus `--margin` MiB for the program,
its libraries and its threads' stacks.

  peak_memory.py --margin MIB -- GENERATOR ARGS..."""

import argparse
import re
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--margin", type=float, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    result = subprocess.run(["/usr/bin/time", "-v"] + command, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"FAIL: exit {result.returncode}\n{result.stderr}")
        return 1
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
               .group(1)) / 1024
    mapped, converted = (float(x) for x in re.search(
        r"([0-9.]+) MiB used where the file maps them, ([0-9.]+) MiB converted in",
        result.stderr).groups())
    cache = float(re.search(r"KV cache: .*, ([0-9.]+) MiB", result.stderr).group(1))
    activations = float(re.search(r"activations: ([0-9.]+) MiB", result.stderr).group(1))
    held = mapped + converted + cache + activations
    verdict = "PASS" if peak <= held + args.margin else "FAIL"
    print(f"{verdict}: peak {peak:.0f} MiB for weights {mapped + converted:.0f} MiB "
          f"({mapped:.0f} mapped) + KV cache {cache:.0f} MiB + activations {activations:.0f} MiB, "
          f"bound {held + args.margin:.0f} MiB")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
