#!/usr/bin/env python3
"""GPU generation benchmark (not a test), run by bench/gpu/run.sh from
build/gpu-bench: GPT-2 small with random weights (transformers' own
initialisation, written there), batch 1, a 128-token prompt and 128 new
tokens, greedy. xfmr's nvptx generators (bench/gpu/prepare.sh compiles them
from the config: f32, --dtype=bf16, --weights-dtype=int8) against
transformers' generate() on the same GPU (eager, SDPA, KV cache; f32 and
bf16). Prompt speed is tokens/s of the prefill; decode is ms per generated
token (the 127 steps after the first); the best of REPEATS runs. With NCU
set (the ncu binary), then where xfmr's prompt and decode step go: kernel
times by kernel (decode_profile) next to their wall times. Where generate/before holds generators of
the same names built by an earlier xfmrc (bench/gpu/prepare.sh with
BEFORE_XFMRC set), they are timed too, each run alternating with its
counterpart's, as "(before)" rows."""
import collections
import os
import subprocess
import sys
import time

import torch
import transformers as tf

sys.path.insert(0, "../../bench")
from generate import NEW, PROMPT, prompt_ids, xfmr_speeds  # noqa: E402
from ncu import ncu_kernels  # noqa: E402

REPEATS = 3
PROFILE_STEPS = 8
GENERATORS = [("xfmr f32", "generate/gpt2-small-f32"),
              ("xfmr bf16 (--dtype=bf16)", "generate/gpt2-small-bf16"),
              ("xfmr int8 weights", "generate/gpt2-small-int8")]


def checkpoint(directory):
    if not os.path.exists(os.path.join(directory, "model.safetensors")):
        torch.manual_seed(0)
        tf.GPT2LMHeadModel(tf.GPT2Config()).save_pretrained(directory)
    return directory


def generator_command(generator, directory, prompt, new):
    return [generator, f"--weights={directory}", "--ids", "-p", " ".join(map(str, prompt)), "-n",
            str(new), "--temp", "0", "--ignore-eos", "--no-echo"]


def print_largest(title, kernels):
    print(f"{title}; the largest:")
    for kernel, ms in sorted(kernels.items(), key=lambda item: -item[1])[:8]:
        print(f"  {ms:8.3f} ms  {kernel[:100]}")


def decode_profile(name, generator, directory, prompt_tokens_per_s, decode_ms):
    """Kernel milliseconds by kernel name of the prompt and of one decode
    step. The prompt: the last launch of each kernel of a run that decodes
    one token (its warm-up call launches the same kernels first, the first
    to touch the weights on the GPU). A step: a run that decodes
    PROFILE_STEPS more tokens, the difference divided by them (ncu's times
    of the same kernel vary from run to run by more than two steps take)."""
    runs = [collections.Counter(), collections.Counter()]
    launches = [0, 0]
    prompt = {}
    for i, (run, new) in enumerate(zip(runs, (1, 1 + PROFILE_STEPS))):
        for kernel, ms in ncu_kernels(generator_command(generator, directory, prompt_ids(), new)):
            run[kernel] += ms
            launches[i] += 1
            if i == 0 and "prefill" in kernel:
                prompt[kernel] = ms
    print_largest(f"{name}: the prompt's kernels {sum(prompt.values()):.3f} ms ({len(prompt)} "
                  f"kernels) of its {PROMPT * 1000 / prompt_tokens_per_s:.3f} ms", prompt)
    step = {kernel: (runs[1][kernel] - runs[0][kernel]) / PROFILE_STEPS for kernel in runs[1]}
    print_largest(f"{name}: a decode step's kernels {sum(step.values()):.3f} ms "
                  f"({(launches[1] - launches[0]) / PROFILE_STEPS:.0f} launches) of its "
                  f"{decode_ms:.3f} ms", step)


def bench_xfmr(generators, directory):
    """The best prompt tok/s and decode ms/token of each generator, their
    runs alternating; None for one that failed."""
    best = [(0.0, float("inf"))] * len(generators)
    for _ in range(REPEATS):
        for i, generator in enumerate(generators):
            if best[i] is None:
                continue
            result = subprocess.run(generator_command(generator, directory, prompt_ids(), NEW),
                                    capture_output=True, text=True, timeout=300)
            if result.returncode != 0:
                best[i] = None
                continue
            prompt, decode = xfmr_speeds(result.stderr)
            best[i] = (max(best[i][0], prompt), min(best[i][1], decode))
    return best


def bench_transformers(directory, dtype):
    model = tf.GPT2LMHeadModel.from_pretrained(directory, attn_implementation="sdpa",
                                               dtype=dtype).cuda().eval()
    ids = torch.tensor([prompt_ids()]).cuda()

    def timed(fn):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - start

    best = (0.0, float("inf"))
    with torch.no_grad():
        for _ in range(REPEATS + 1):  # the first warms up
            prefill = timed(lambda: model(ids, use_cache=True, logits_to_keep=1))
            one = timed(lambda: model.generate(ids, max_new_tokens=1, min_new_tokens=1,
                                               do_sample=False))
            all_tokens = timed(lambda: model.generate(ids, max_new_tokens=NEW,
                                                      min_new_tokens=NEW, do_sample=False))
            best = (max(best[0], PROMPT / prefill),
                    min(best[1], (all_tokens - one) * 1000 / (NEW - 1)))
    return best


def main():
    directory = checkpoint("generate/gpt2-small")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, transformers "
          f"{tf.__version__}; GPT-2 small, batch 1, {PROMPT}-token prompt, {NEW} new tokens")
    rows = []
    for name, generator in GENERATORS:
        before = generator.replace("generate/", "generate/before/")
        if os.path.exists(before):
            after, earlier = bench_xfmr([generator, before], directory)
            rows += [(name, after), (f"{name} (before)", earlier)]
        else:
            rows.append((name, bench_xfmr([generator], directory)[0]))
    rows += [(f"transformers generate() {name}", bench_transformers(directory, dtype))
             for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16))]
    print(f"| {'system':34} | prompt tok/s | decode ms/token |")
    print(f"|{'-' * 36}|--------------|-----------------|")
    for name, result in rows:
        cells = "failed" if result is None else f"{result[0]:12.1f} | {result[1]:15.3f}"
        print(f"| {name:34} | {cells} |")
    if os.environ.get("NCU"):
        # PROFILE: a comma-separated subset of the generators' names to
        # profile (ncu replays every kernel: about a minute a generator).
        chosen = os.environ.get("PROFILE")
        results = dict(rows)
        for name, generator in GENERATORS:
            if results.get(name) and (not chosen or any(c in name for c in chosen.split(","))):
                decode_profile(name, generator, directory, *results[name])


if __name__ == "__main__":
    main()
