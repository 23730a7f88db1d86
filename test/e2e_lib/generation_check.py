#!/usr/bin/env python3
"""Generation (xfmrc --generate) against transformers' generate() and the
model's own full forward.

  generation_check.py --xfmrc PATH --workdir DIR CASE...

gpt2-greedy: a random GPT-2 checkpoint with a byte-level BPE tokenizer
trained here; greedy generation from text prompts (a batch of different
lengths, prompts longer than a prefill chunk) must give exactly the tokens
of generate(do_sample=False), the text its decode, and at every step logits
within 1e-4 of its float64 forward.
gpt2-sampled: the same seed gives the same text; each step's logits equal
xfmr's own full-sequence forward at that position (<= 1e-5 relative).
encoder-causal-{learned,sinusoidal}: xfmr's tutorial decoder (encoder type
with causal: true), decode steps against its own full forward.
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np
import torch
import transformers as tf
from safetensors.numpy import load_file
from tokenizers import ByteLevelBPETokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizers_check import CORPUS  # noqa: E402

tf.logging.set_verbosity_error()
torch.set_num_threads(2)

PROMPTS = ["The quick brown fox", "Voilà: naïve café, résumé, Ærøskøbing, São Paulo — and then",
           "it's"]


def gpt2_checkpoint(directory, seed):
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(CORPUS.splitlines() * 3, vocab_size=300, min_frequency=1,
                                  special_tokens=["<|endoftext|>"])
    vocab = tokenizer.get_vocab_size()
    eos = tokenizer.token_to_id("<|endoftext|>")
    config = tf.GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=vocab, n_positions=128,
                           bos_token_id=eos, eos_token_id=eos)
    torch.manual_seed(seed)
    model = tf.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_((1 + 0.2 * torch.randn_like(p)) if "ln" in name and name.endswith("weight")
                    else 0.3 * torch.randn_like(p))
    model.save_pretrained(directory)
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    return model, tokenizer


def run(command, **kwargs):
    return subprocess.run(command, check=True, capture_output=True, **kwargs)


def xfmr_forward_logits(xfmrc, source, workdir, weights, tokens, vocab):
    """Logits of xfmr's own forward (inference executable) over `tokens`."""
    model = os.path.join(workdir, "forward")
    if not os.path.exists(model):
        run([xfmrc, source, "-o", model])
    line = os.path.join(workdir, "line.txt")
    with open(line, "w") as f:
        f.write(" ".join(map(str, tokens)) + "\n")
    out = os.path.join(workdir, "forward.npy")
    run([model, f"--weights={weights}", f"--input={line}", f"--output={out}"])
    return np.load(out)[0, :len(tokens), :vocab]


def check_against_forward(name, saved, forward):
    """Each step's logits against the forward at the position before it."""
    worst = 0.0
    for i in range(saved["tokens"].shape[0]):
        p, n = int(saved["prompt_lengths"][i]), int(saved["generated_lengths"][i])
        tokens = saved["tokens"][i][:p + n].tolist()
        reference = forward(tokens)
        steps = saved["logits"][i]
        for s in range(min(n + 1, steps.shape[0])):
            want = reference[p - 1 + s]
            worst = max(worst, float(np.abs(steps[s] - want).max() / np.abs(want).max()))
    ok = worst <= 1e-5
    print(f"{'PASS' if ok else 'FAIL'}: {name} decode steps against the full forward: "
          f"max relative error {worst:.2e} (limit 1e-5)", flush=True)
    return ok


def gpt2_greedy(args):
    workdir = os.path.join(args.workdir, "gpt2-greedy")
    directory = os.path.join(workdir, "checkpoint")
    model, tokenizer = gpt2_checkpoint(directory, 1)
    generator = os.path.join(workdir, "generate")
    run([args.xfmrc, directory, "--generate", "--batch=3", "--seq-len=8", "-o", generator])
    saved = os.path.join(workdir, "greedy.safetensors")
    command = [generator, "-n", "20", "--temp", "0", f"--save-logits={saved}"]
    for prompt in PROMPTS:
        command += ["-p", prompt]
    printed = run(command).stdout.decode()
    got = load_file(saved)
    hf = model.double()
    ok = True
    worst = 0.0
    for i, prompt in enumerate(PROMPTS):
        ids = tokenizer.encode(prompt).ids
        with torch.no_grad():
            out = hf.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False,
                              pad_token_id=model.config.eos_token_id,
                              output_scores=True, return_dict_in_generate=True)
        want = out.sequences[0].tolist()
        p, n = int(got["prompt_lengths"][i]), int(got["generated_lengths"][i])
        mine = got["tokens"][i][:p + n].tolist()
        # generate() keeps the end-of-sequence token it stops at.
        if want[-1] == model.config.eos_token_id and len(want) - 1 == len(mine):
            want = want[:-1]
        if mine != want:
            print(f"FAIL: gpt2-greedy prompt {i + 1}: tokens {mine} != generate()'s {want}")
            ok = False
        text = tokenizer.decode(want, skip_special_tokens=False)
        if f"[{i + 1}] {text}" not in printed:
            print(f"FAIL: gpt2-greedy prompt {i + 1}: printed text lacks {text!r}")
            ok = False
        for s, scores in enumerate(out.scores[:n + 1]):
            theirs = scores[0].numpy()
            worst = max(worst, float(np.abs(got["logits"][i][s] - theirs).max()
                                     / np.abs(theirs).max()))
    ok &= worst <= 1e-4
    print(f"{'PASS' if ok else 'FAIL'}: gpt2-greedy: {len(PROMPTS)} prompts, tokens and text as "
          f"generate(), step logits within {worst:.2e} of its float64 forward (limit 1e-4)",
          flush=True)
    return ok


def gpt2_sampled(args):
    workdir = os.path.join(args.workdir, "gpt2-sampled")
    directory = os.path.join(workdir, "checkpoint")
    model, tokenizer = gpt2_checkpoint(directory, 2)
    generator = os.path.join(workdir, "generate")
    run([args.xfmrc, directory, "--generate", "--seq-len=5", "-o", generator])
    prompt = "Lorem ipsum dolor sit amet, consectetur adipiscing elit — 1234567890"
    outputs = []
    for seed in (7, 7, 8):
        saved = os.path.join(workdir, f"sampled-{seed}-{len(outputs)}.safetensors")
        text = run([generator, "-p", prompt, "-n", "40", "--temp", "1.3", "--top-k", "50",
                    "--top-p", "0.9", "--repeat-penalty", "1.2", "-s", str(seed),
                    f"--save-logits={saved}"]).stdout
        outputs.append((text, saved))
    same = outputs[0][0] == outputs[1][0]
    differs = outputs[0][0] != outputs[2][0]
    print(f"{'PASS' if same and differs else 'FAIL'}: gpt2-sampled: seed 7 twice gives the same "
          f"text, seed 8 another", flush=True)
    vocab = model.config.vocab_size
    forward = lambda tokens: xfmr_forward_logits(args.xfmrc, directory, workdir, directory,
                                                 tokens, vocab)
    return same and differs and check_against_forward("gpt2-sampled", load_file(outputs[0][1]),
                                                      forward)


def encoder_causal(args, positions):
    name = f"encoder-causal-{positions}"
    workdir = os.path.join(args.workdir, name)
    os.makedirs(workdir, exist_ok=True)
    config = os.path.join(workdir, "config.json")
    with open(config, "w") as f:
        json.dump({"model_type": "encoder", "causal": True, "vocab_size": 50, "d_model": 32,
                   "num_heads": 2, "num_layers": 2, "dim_feedforward": 64,
                   "max_position_embeddings": 48, "norm_first": positions == "learned",
                   "position_embedding": positions, "activation": "gelu"}, f)
    weights = os.path.join(workdir, "weights.safetensors")
    run([args.xfmrc, config, "--emit=random-weights", "--seed=5", "-o", weights])
    generator = os.path.join(workdir, "generate")
    run([args.xfmrc, config, "--generate", "--batch=2", "--seq-len=6", "-o", generator])
    saved = os.path.join(workdir, "steps.safetensors")
    run([generator, f"--weights={weights}", "--ids", "-p", "3 1 4 1 5 9 2 6 5 3 5 8 9",
         "-p", "2 7", "-n", "30", "--temp", "1", "-s", "1", f"--save-logits={saved}"])
    forward = lambda tokens: xfmr_forward_logits(args.xfmrc, config, workdir, weights, tokens, 50)
    return check_against_forward(name, load_file(saved), forward)


CASES = {"gpt2-greedy": gpt2_greedy, "gpt2-sampled": gpt2_sampled,
         "encoder-causal-learned": lambda a: encoder_causal(a, "learned"),
         "encoder-causal-sinusoidal": lambda a: encoder_causal(a, "sinusoidal")}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xfmrc", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("cases", nargs="+", choices=sorted(CASES))
    args = parser.parse_args()
    ok = True
    for case in args.cases:
        ok &= CASES[case](args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
