#!/usr/bin/env python3
"""Generation (xfmrc --generate) against transformers' generate() and the
model's own full forward.

  generation_check.py --xfmrc PATH --workdir DIR [--stage all|prepare|check]
                      [--xfmrc-flag FLAG]... CASE...

--stage=prepare writes the checkpoints and compiles the generators (with the
extra --xfmrc-flag flags, e.g. --target=nvptx) on a machine with xfmrc;
--stage=check runs and checks them where they run (a GPU machine with
transformers). Only the greedy gpt2-* and {bart,marian,t5}-greedy cases take
--stage and --xfmrc-flag.

gpt2-greedy: a random GPT-2 checkpoint with a byte-level BPE tokenizer
trained here; greedy generation from text prompts (a batch of different
lengths, prompts longer than a prefill chunk) must give exactly the tokens
of generate(do_sample=False), the text its decode, and at every step logits
within 1e-4 of its float64 forward.
gpt2-bf16, gpt2-bf16-cache, gpt2-bf16-weights, gpt2-int8, gpt2-int8-g32:
--dtype=bf16, --cache-dtype=bf16 and --weights-dtype=bf16|int8 generation's
greedy step logits against the float64 forward, within bf16 or int8 bounds.
gpt2-sampled: the same seed gives the same text; each step's logits equal
xfmr's own full-sequence forward at that position (<= 1e-5 relative).
encoder-causal-{learned,sinusoidal}: xfmr's tutorial decoder (encoder type
with causal: true), decode steps against its own full forward.
transformer-seq2seq, t5-seq2seq: xfmr's tutorial encoder-decoder and T5, the
same.
{bart,marian,t5}-greedy: random translation checkpoints; a batch of sources of
different lengths decoded greedily with a repetition penalty gives exactly
generate()'s tokens, each step's logits within 1e-4 of its float64 ones.
{gpt2,llama}-short-prompts: prompts a batch-of-one generator reads a token a
decode step each (and one it reads in a chunk and two steps) give exactly
generate()'s tokens, step logits within 1e-4 of its float64 forward.
{gpt2,marian}-beams: beam search gives exactly generate(num_beams=...)'s
tokens under each early_stopping, length and repetition penalties.
"""
import argparse
import json
import os
import re
import subprocess
import sys

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np
import torch
import transformers as tf
from safetensors.numpy import load_file
from tokenizers import ByteLevelBPETokenizer, Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_models import (padded, random_sequences, randomize, seq2seq_config,  # noqa: E402
                       t5_config)
from tokenizers_check import CORPUS  # noqa: E402

tf.logging.set_verbosity_error()
torch.set_num_threads(2)

PROMPTS = ["The quick brown fox", "Voilà: naïve café, résumé, Ærøskøbing, São Paulo — and then",
           "it's"]


def decoder_kwargs(vocab, eos, **overrides):
    """A Llama-style decoder of 2 layers, 4 query heads over 2 key/value
    heads (grouped-query attention)."""
    c = dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
             intermediate_size=64, vocab_size=vocab, max_position_embeddings=128,
             bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    c.update(overrides)
    return c


# family -> (class, config from (vocab, eos)): Llama's rope scaled past
# position 16, which prompts and generated tokens cross; Phi-3's partial;
# sliding windows of 6 keys (Mistral's every layer, Gemma 2's and 3's some),
# soft-capped scores and logits (Gemma 2).
DECODERS = {
    "gpt2": (tf.GPT2LMHeadModel,
             lambda vocab, eos: tf.GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=vocab,
                                              n_positions=128, bos_token_id=eos,
                                              eos_token_id=eos)),
    "llama": (tf.LlamaForCausalLM,
              lambda vocab, eos: tf.LlamaConfig(**decoder_kwargs(vocab, eos, rope_parameters={
                  "rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 16,
                  "rope_theta": 500.0}))),
    "mistral": (tf.MistralForCausalLM,
                lambda vocab, eos: tf.MistralConfig(**decoder_kwargs(vocab, eos,
                                                                     sliding_window=6))),
    "qwen2": (tf.Qwen2ForCausalLM, lambda vocab, eos: tf.Qwen2Config(**decoder_kwargs(vocab, eos))),
    "qwen3": (tf.Qwen3ForCausalLM,
              lambda vocab, eos: tf.Qwen3Config(**decoder_kwargs(vocab, eos, head_dim=16,
                                                                 num_key_value_heads=1))),
    "gemma": (tf.GemmaForCausalLM,
              lambda vocab, eos: tf.GemmaConfig(**decoder_kwargs(vocab, eos, head_dim=8))),
    "gemma2": (tf.Gemma2ForCausalLM,
               lambda vocab, eos: tf.Gemma2Config(**decoder_kwargs(
                   vocab, eos, head_dim=8, sliding_window=6, query_pre_attn_scalar=16,
                   attn_logit_softcapping=2.0, final_logit_softcapping=5.0))),
    "gemma3": (tf.Gemma3ForCausalLM,
               lambda vocab, eos: tf.Gemma3TextConfig(**decoder_kwargs(
                   vocab, eos, head_dim=8, num_hidden_layers=3, sliding_window=6,
                   layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                   rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0,
                                                       "rope_theta": 10000.0},
                                    "sliding_attention": {"rope_type": "default",
                                                          "rope_theta": 100.0}}))),
    "phi3": (tf.Phi3ForCausalLM,
             lambda vocab, eos: tf.Phi3Config(**decoder_kwargs(vocab, eos, rope_parameters={
                 "rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                 "short_factor": [1.0, 1.5], "long_factor": [2.0, 3.0],
                 "original_max_position_embeddings": 128}))),
}


def decoder_checkpoint(family, directory, seed, stage="all"):
    """A random `family` checkpoint with a byte-level BPE tokenizer trained here."""
    cls, make_config = DECODERS[family]
    if stage == "check":
        return (cls.from_pretrained(directory).eval(),
                Tokenizer.from_file(os.path.join(directory, "tokenizer.json")))
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(CORPUS.splitlines() * 3, vocab_size=300, min_frequency=1,
                                  special_tokens=["<|endoftext|>"])
    vocab = tokenizer.get_vocab_size()
    eos = tokenizer.token_to_id("<|endoftext|>")
    torch.manual_seed(seed)
    model = cls(make_config(vocab, eos)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            norm = "ln" in name or "norm" in name
            p.copy_((1 + 0.2 * torch.randn_like(p)) if norm and name.endswith("weight")
                    else 0.3 * torch.randn_like(p))
    model.save_pretrained(directory)
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    return model, tokenizer


def gpt2_checkpoint(directory, seed, stage="all"):
    return decoder_checkpoint("gpt2", directory, seed, stage)


def run(command, **kwargs):
    return subprocess.run(command, check=True, capture_output=True, **kwargs)


def compile_generator(args, directory, generator, *flags):
    """xfmrc --generate on the checkpoint, unless in the check stage; returns
    whether the case goes on to run and check it."""
    if args.stage != "check":
        run([args.xfmrc, directory, "--generate", *flags, *args.xfmrc_flag, "-o", generator])
    return args.stage != "prepare"


def xfmr_forward_logits(xfmrc, source, workdir, weights, tokens, vocab, encoded=None):
    """Logits of xfmr's own forward (inference executable) over `tokens`
    (an encoder-decoder's decoder tokens over the source `encoded`)."""
    model = os.path.join(workdir, "forward")
    if not os.path.exists(model):
        run([xfmrc, source, "-o", model])
    line = os.path.join(workdir, "line.txt")
    with open(line, "w") as f:
        if encoded is not None:
            f.write(" ".join(map(str, encoded)) + " | ")
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
        reference = forward(i, tokens)
        steps = saved["logits"][i]
        for s in range(min(n + 1, steps.shape[0])):
            want = reference[p - 1 + s]
            worst = max(worst, float(np.abs(steps[s] - want).max() / np.abs(want).max()))
    ok = worst <= 1e-5
    print(f"{'PASS' if ok else 'FAIL'}: {name} decode steps against the full forward: "
          f"max relative error {worst:.2e} (limit 1e-5)", flush=True)
    return ok


def add_end_token(model, tokenizer, directory):
    """Makes the third token generate() picks for the first prompt a second
    end-of-sequence token in generation_config.json (as Llama 3 lists
    several), so that generation must stop there."""
    ids = torch.tensor([tokenizer.encode(PROMPTS[0]).ids])
    with torch.no_grad():
        third = model.generate(ids, max_new_tokens=3, do_sample=False,
                               pad_token_id=model.config.eos_token_id)[0, -1].item()
    model.generation_config.eos_token_id = [model.config.eos_token_id, third]
    model.generation_config.save_pretrained(directory)


def greedy(args, family):
    name = f"{family}-greedy"
    workdir = os.path.join(args.workdir, name)
    directory = os.path.join(workdir, "checkpoint")
    model, tokenizer = decoder_checkpoint(family, directory, 1, args.stage)
    if family == "llama" and args.stage != "check":
        add_end_token(model, tokenizer, directory)
    generator = os.path.join(workdir, "generate")
    if not compile_generator(args, directory, generator, "--batch=3", "--seq-len=8"):
        return True
    saved = os.path.join(workdir, "greedy.safetensors")
    command = [generator, f"--weights={directory}", "-n", "20", "--temp", "0",
               f"--save-logits={saved}"]
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
        ends = model.generation_config.eos_token_id
        ends = ends if isinstance(ends, list) else [ends]
        if want[-1] in ends and len(want) - 1 == len(mine):
            want = want[:-1]
        if mine != want:
            print(f"FAIL: {name} prompt {i + 1}: tokens {mine} != generate()'s {want}")
            ok = False
        text = tokenizer.decode(want, skip_special_tokens=False)
        if f"[{i + 1}] {text}" not in printed:
            print(f"FAIL: {name} prompt {i + 1}: printed text lacks {text!r}")
            ok = False
        for s, scores in enumerate(out.scores[:n + 1]):
            theirs = scores[0].numpy()
            worst = max(worst, float(np.abs(got["logits"][i][s] - theirs).max()
                                     / np.abs(theirs).max()))
    ok &= worst <= 1e-4
    print(f"{'PASS' if ok else 'FAIL'}: {name}: {len(PROMPTS)} prompts, tokens and text as "
          f"generate(), step logits within {worst:.2e} of its float64 forward (limit 1e-4)",
          flush=True)
    return ok


def gpt2_narrow(args, name, flags, max_limit, mean_limit, family="gpt2", bf16_factor=None):
    """Generation with narrow storage (`flags`): each greedy step's logits
    against transformers' float64 forward over the same tokens, within
    bounds relative to the largest logit: fixed ones, or with `bf16_factor`
    that many times the error of transformers' own bfloat16 forward of the
    model over the same tokens (how sensitive its logits are to rounding)."""
    workdir = os.path.join(args.workdir, name)
    directory = os.path.join(workdir, "checkpoint")
    model, tokenizer = decoder_checkpoint(family, directory, 1, args.stage)
    generator = os.path.join(workdir, "generate")
    if not compile_generator(args, directory, generator, *flags, "--batch=3", "--seq-len=8"):
        return True
    saved = os.path.join(workdir, "greedy.safetensors")
    command = [generator, f"--weights={directory}", "-n", "20", "--temp", "0", "--ignore-eos",
               f"--save-logits={saved}"]
    for prompt in PROMPTS:
        command += ["-p", prompt]
    run(command)
    got = load_file(saved)
    narrow = [0.0, 0.0]
    worst, total, count = 0.0, 0.0, 0
    for i in range(len(PROMPTS)):
        p, n = int(got["prompt_lengths"][i]), int(got["generated_lengths"][i])
        tokens = torch.tensor([got["tokens"][i][:p + n].tolist()])
        with torch.no_grad():
            reference = model.double()(tokens).logits[0].numpy()
            if bf16_factor:
                bf16 = model.to(torch.bfloat16)(tokens).logits[0].double().numpy()
        for s in range(n):
            want, mine = reference[p - 1 + s], got["logits"][i][s]
            error = np.abs(mine - want) / np.abs(want).max()
            worst, total, count = max(worst, float(error.max())), total + float(error.mean()), count + 1
            if bf16_factor:
                theirs = np.abs(bf16[p - 1 + s] - want) / np.abs(want).max()
                narrow = [max(narrow[0], float(theirs.max())), narrow[1] + float(theirs.mean())]
    mean = total / count
    if bf16_factor:
        max_limit, mean_limit = bf16_factor * narrow[0], bf16_factor * narrow[1] / count
    ok = worst <= max_limit and mean <= mean_limit
    print(f"{'PASS' if ok else 'FAIL'}: {name}: {count} greedy steps, logits within {worst:.2e} "
          f"(mean {mean:.2e}) of the float64 forward, relative to the largest (limits "
          f"{max_limit:g}, mean {mean_limit:g})", flush=True)
    return ok


def gpt2_bf16(args):
    """--dtype=bf16: weights, activations and KV cache in bf16, each op in f32."""
    return gpt2_narrow(args, "gpt2-bf16", ["--dtype=bf16"], 5e-2, 1e-2)


def gpt2_bf16_cache(args):
    """--cache-dtype=bf16: f32 weights and activations, keys and values
    rounded to bf16 in the cache."""
    return gpt2_narrow(args, "gpt2-bf16-cache", ["--cache-dtype=bf16"], 1e-2, 2e-3)


def gpt2_int8(args):
    """--weights-dtype=int8: the products' weights (the LM head too) int8 with
    a scale per output channel, activations (but decode's with integer dot
    products: int8, a scale per row) and KV cache f32."""
    return gpt2_narrow(args, "gpt2-int8", ["--weights-dtype=int8"], 5e-2, 1e-2)


def gpt2_bf16_weights(args):
    """--weights-dtype=bf16: the products' weights in bf16, activations and
    KV cache f32."""
    return gpt2_narrow(args, "gpt2-bf16-weights", ["--weights-dtype=bf16"], 2e-2, 4e-3)


def gpt2_int8_groups(args):
    """--weights-dtype=int8 with a scale per group of 32 inputs; with integer
    dot products decode's activations int8 too, a scale per block of 32 as llama.cpp's
    q8_0 (observed max 5.2e-2, mean 5.6e-3 of the largest logit; f32
    activations 4.8e-2, 5.2e-3)."""
    return gpt2_narrow(args, "gpt2-int8-g32", ["--weights-dtype=int8", "--weight-group-size=32"],
                       6e-2, 1e-2)


def sampled(args, family):
    name = f"{family}-sampled"
    workdir = os.path.join(args.workdir, name)
    directory = os.path.join(workdir, "checkpoint")
    model, tokenizer = decoder_checkpoint(family, directory, 2)
    generator = os.path.join(workdir, "generate")
    run([args.xfmrc, directory, "--generate", "--seq-len=5", "-o", generator])
    prompt = "Lorem ipsum dolor sit amet, consectetur adipiscing elit — 1234567890"
    outputs = []
    # The second run skips the warm-up run of the entries, which must leave
    # the cache as it was.
    for seed, extra in ((7, []), (7, ["--no-warmup"]), (8, [])):
        saved = os.path.join(workdir, f"sampled-{seed}-{len(outputs)}.safetensors")
        text = run([generator, "-p", prompt, "-n", "40", "--temp", "1.3", "--top-k", "50",
                    "--top-p", "0.9", "--repeat-penalty", "1.2", "-s", str(seed),
                    f"--save-logits={saved}", *extra]).stdout
        outputs.append((text, saved))
    same = outputs[0][0] == outputs[1][0]
    differs = outputs[0][0] != outputs[2][0]
    print(f"{'PASS' if same and differs else 'FAIL'}: {name}: seed 7 twice (once with "
          f"--no-warmup) gives the same text, seed 8 another", flush=True)
    vocab = model.config.vocab_size
    forward = lambda i, tokens: xfmr_forward_logits(args.xfmrc, directory, workdir, directory,
                                                    tokens, vocab)
    return same and differs and check_against_forward(name, load_file(outputs[0][1]), forward)


def short_prompts(args, family):
    """A batch-of-one generator reads prompts of up to a sixteenth of its
    chunk (2 of 32) a token a decode step each, and so a longer prompt's
    last 2 tokens: tokens exactly generate()'s, step logits within 1e-4 of
    its float64 ones, whichever entry read the prompt."""
    name = f"{family}-short-prompts"
    workdir = os.path.join(args.workdir, name)
    directory = os.path.join(workdir, "checkpoint")
    model, _ = decoder_checkpoint(family, directory, 3)
    generator = os.path.join(workdir, "generate")
    run([args.xfmrc, directory, "--generate", "--seq-len=32", "-o", generator])
    vocab = model.config.vocab_size
    rng = np.random.default_rng(3)
    hf = model.double()
    # Without an end token generate() neither stops nor masks it, as
    # --ignore-eos reads every logit.
    hf.generation_config.eos_token_id = None
    ok, worst = True, 0.0
    for length, decoded in ((1, 1), (2, 2), (3, 0), (34, 2)):
        ids = rng.integers(0, vocab, size=length).tolist()
        saved = os.path.join(workdir, f"prompt-{length}.safetensors")
        printed = run([generator, f"--weights={directory}", "--ids", "-p",
                       " ".join(map(str, ids)), "-n", "6", "--temp", "0", "--ignore-eos",
                       f"--save-logits={saved}"]).stderr.decode()
        steps = re.search(r"prompt: (\d+) tokens read a decode step each", printed)
        if "up to 2 tokens a decode step each" not in printed or \
                (int(steps.group(1)) if steps else 0) != decoded:
            print(f"FAIL: {name} a prompt of {length}: not {decoded} of its tokens a decode step "
                  f"each: {printed}")
            ok = False
        got = load_file(saved)
        with torch.no_grad():
            out = hf.generate(torch.tensor([ids]), attention_mask=torch.ones(1, length,
                                                                             dtype=torch.long),
                              max_new_tokens=6, do_sample=False,
                              pad_token_id=model.config.eos_token_id, output_logits=True,
                              return_dict_in_generate=True)
        want = out.sequences[0].tolist()
        mine = got["tokens"][0][:length + int(got["generated_lengths"][0])].tolist()
        if mine != want:
            print(f"FAIL: {name} a prompt of {length}: tokens {mine} != generate()'s {want}")
            ok = False
        for step, logits in enumerate(out.logits):
            theirs = logits[0].numpy()
            worst = max(worst, float(np.abs(got["logits"][0][step] - theirs).max()
                                     / np.abs(theirs).max()))
    ok &= worst <= 1e-4
    print(f"{'PASS' if ok else 'FAIL'}: {name}: prompts of 1, 2, 3 and 34 tokens, tokens as "
          f"generate(), step logits within {worst:.2e} of its float64 forward (limit 1e-4)",
          flush=True)
    return ok


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
    forward = lambda i, tokens: xfmr_forward_logits(args.xfmrc, config, workdir, weights, tokens,
                                                    50)
    return check_against_forward(name, load_file(saved), forward)


def seq2seq_against_forward(args, name, model):
    """An encoder-decoder config of xfmr's (random weights): decode steps
    against its own full forward over the same source."""
    workdir = os.path.join(args.workdir, name)
    os.makedirs(workdir, exist_ok=True)
    config = os.path.join(workdir, "config.json")
    with open(config, "w") as f:
        json.dump(model, f)
    weights = os.path.join(workdir, "weights.safetensors")
    run([args.xfmrc, config, "--emit=random-weights", "--seed=3", "-o", weights])
    generator = os.path.join(workdir, "generate")
    run([args.xfmrc, config, "--generate", "--batch=2", "--seq-len=16", "--decoder-seq-len=4",
         "-o", generator])
    sources = [[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9], [2, 7]]
    saved = os.path.join(workdir, "steps.safetensors")
    command = [generator, f"--weights={weights}", "--ids", "-n", "30", "--temp", "1", "-s", "1",
               "--ignore-eos", f"--save-logits={saved}"]
    for source in sources:
        command += ["-p", " ".join(map(str, source))]
    run(command)
    forward = lambda i, tokens: xfmr_forward_logits(args.xfmrc, config, workdir, weights, tokens,
                                                    model["vocab_size"], sources[i])
    return check_against_forward(name, load_file(saved), forward)


def transformer_seq2seq(args):
    """xfmr's tutorial encoder-decoder."""
    return seq2seq_against_forward(args, "transformer-seq2seq", {
        "model_type": "transformer", "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
        "encoder_attention_heads": 4, "vocab_size": 50, "max_position_embeddings": 40,
        "pad_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 1})


def t5_seq2seq(args):
    """T5, its decoder's position bias over the cache past max_distance;
    heads of 12 whose 4 make 48 projected features from d_model 32."""
    return seq2seq_against_forward(args, "t5-seq2seq", {
        "model_type": "t5", "d_model": 32, "num_heads": 4, "d_kv": 12, "d_ff": 64,
        "num_layers": 2, "num_decoder_layers": 2, "vocab_size": 50,
        "relative_attention_num_buckets": 8, "relative_attention_max_distance": 10,
        "feed_forward_proj": "gated-gelu", "n_positions": 40, "pad_token_id": 0,
        "eos_token_id": 1, "decoder_start_token_id": 0})


def seq2seq_checkpoint(directory, family, seed, eos_bias=0.0, stage="all"):
    """A random Marian or BART translation checkpoint (an untied output
    projection: a tied one mostly repeats the last token), its end of
    sequence eos_bias likelier, with the token rules the published ones
    have in generation_config.json: BART's forced first and last tokens,
    Marian's forced last token and never the padding."""
    if stage == "check":
        return tf.AutoModelForSeq2SeqLM.from_pretrained(directory).eval()
    if family == "t5":
        # T5 has no token rules; its position buckets (max_distance 10) go
        # logarithmic, then clamp, as the decoder's cache grows. (generate()
        # sizes its cache by num_layers: the decoder has as many.)
        # Its scores are unscaled: weights of 0.6 would make them so sharp that
        # float32 rounding shows in the logits. Heads as FLAN-T5's: num_heads
        # * d_kv (48) is not d_model, nor does num_heads divide it.
        model = tf.T5ForConditionalGeneration(
            t5_config(num_decoder_layers=2, num_heads=6, d_kv=8)).eval()
        randomize(model, torch.Generator().manual_seed(seed), scale=0.3)
        model.save_pretrained(directory)
        return model
    cls, config_cls = {"bart": (tf.BartForConditionalGeneration, tf.BartConfig),
                       "marian": (tf.MarianMTModel, tf.MarianConfig)}[family]
    config = seq2seq_config(config_cls, forced_eos_token_id=None, tie_word_embeddings=False,
                            **({"scale_embedding": True, "decoder_start_token_id": 1}
                               if family == "marian" else {}))
    model = cls(config).eval()
    randomize(model, torch.Generator().manual_seed(seed), scale=0.6)
    with torch.no_grad():
        model.final_logits_bias[0, config.eos_token_id] += eos_bias
    rules = model.generation_config
    rules.forced_eos_token_id = config.eos_token_id
    if family == "bart":
        rules.forced_bos_token_id = config.bos_token_id
    else:
        rules.bad_words_ids = [[config.pad_token_id]]
    model.save_pretrained(directory)
    with open(os.path.join(directory, "generation_config.json")) as f:
        saved = json.load(f)
    assert saved["forced_eos_token_id"] == config.eos_token_id, saved
    return model


def hf_generate(model, sources, pad, **kwargs):
    """generate()'s token lists for each source (an encoder-decoder's
    sources padded into one batch, with each step's logits; a decoder's one
    at a time)."""
    with torch.no_grad():
        if model.config.is_encoder_decoder:
            ids, mask = padded(sources, max(map(len, sources)), pad)
            out = model.generate(ids, attention_mask=mask, output_logits=True,
                                 return_dict_in_generate=True, **kwargs)
            return [row.tolist() for row in out.sequences], out.logits
        return [model.generate(torch.tensor([s]), pad_token_id=pad, **kwargs)[0].tolist()
                for s in sources], None


def trim(tokens, eos, pad):
    """Tokens up to the first end of sequence (dropped), no padding."""
    tokens = [t for t in tokens if t != pad] if pad != eos else tokens
    return tokens[:tokens.index(eos)] if eos in tokens else tokens


def seq2seq_greedy(args, family):
    name = f"{family}-greedy"
    workdir = os.path.join(args.workdir, name)
    directory = os.path.join(workdir, "checkpoint")
    model = seq2seq_checkpoint(directory, family, 6, stage=args.stage)
    config = model.config
    generator = os.path.join(workdir, "generate")
    if not compile_generator(args, directory, generator, "--batch=3", "--seq-len=12"):
        return True
    rng = np.random.default_rng(4)
    sources = random_sequences(rng, 3, 12, config.vocab_size)
    saved = os.path.join(workdir, "greedy.safetensors")
    command = [generator, f"--weights={directory}", "--ids", "-n", "16", "--temp", "0", "--repeat-penalty", "2",
               "--repeat-last-n", "0", f"--save-logits={saved}"]
    for source in sources:
        command += ["-p", " ".join(map(str, source))]
    run(command)
    got = load_file(saved)
    want, logits = hf_generate(model.double(), sources, config.pad_token_id, max_new_tokens=16,
                               do_sample=False, num_beams=1, repetition_penalty=2.0)
    ok, worst, ended = True, 0.0, 0
    for i in range(len(sources)):
        p, n = int(got["prompt_lengths"][i]), int(got["generated_lengths"][i])
        mine = got["tokens"][i][:p + n].tolist()
        theirs = [want[i][0]] + trim(want[i][1:], config.eos_token_id, config.pad_token_id)
        ended += len(theirs) < 16  # before the forced last token
        if mine != theirs:
            print(f"FAIL: {name} source {i + 1}: tokens {mine} != generate()'s {theirs}")
            ok = False
        for s in range(min(n + 1, len(logits))):
            reference = logits[s][i].numpy()
            worst = max(worst, float(np.abs(got["logits"][i][s] - reference).max()
                                     / np.abs(reference).max()))
    ok &= worst <= 1e-4
    print(f"{'PASS' if ok else 'FAIL'}: {name}: {len(sources)} sources, tokens as generate() "
          f"({ended} ended early), step logits within {worst:.2e} of its float64 forward "
          f"(limit 1e-4)", flush=True)
    return ok


def beams(args, family):
    """Beam search against generate(num_beams=...) under each
    early_stopping, a few length penalties, with and without a repetition
    penalty."""
    name = f"{family}-beams"
    workdir = os.path.join(args.workdir, name)
    directory = os.path.join(workdir, "checkpoint")
    if family == "gpt2":
        model, _ = gpt2_checkpoint(directory, 5)
        sources = [[5, 17, 3], [200, 4], [9]]
    else:
        model = seq2seq_checkpoint(directory, family, 6, eos_bias=2.0)
        sources = random_sequences(np.random.default_rng(7), 3, 9, model.config.vocab_size)
    config = model.config
    generator = os.path.join(workdir, "generate")
    run([args.xfmrc, directory, "--generate", "--batch=4", "--seq-len=9", "-o", generator])
    model = model.double()
    ok, runs = True, 0
    ended = 0
    for early, penalty, count, repeat in [("false", 1.0, 4, 1.0), ("true", 1.0, 3, 1.5),
                                          ("never", 2.0, 4, 1.0), ("false", -0.5, 2, 1.5)]:
        # A decoder's searches share one run: beside each other where the
        # batch holds their beams, queued where it does not.
        groups = [[s] for s in sources] if config.is_encoder_decoder else [sources]
        for group in groups:
            prompts = [flag for s in group for flag in ("-p", " ".join(map(str, s)))]
            printed = run([generator, "--ids", "--no-echo", *prompts, "-n", "10",
                           f"--num-beams={count}", f"--early-stopping={early}",
                           f"--length-penalty={penalty}", f"--repeat-penalty={repeat}",
                           "--repeat-last-n=0"]).stdout.decode()
            lines = [printed] if len(group) == 1 else \
                [line.split("] ", 1)[1] for line in printed.splitlines() if line.startswith("[")]
            for source, line in zip(group, lines):
                mine = [int(t) for t in line.split()]
                hf_early = {"true": True, "false": False, "never": "never"}[early]
                want, _ = hf_generate(model, [source], config.pad_token_id, max_new_tokens=10,
                                      do_sample=False, num_beams=count, early_stopping=hf_early,
                                      length_penalty=penalty, repetition_penalty=repeat)
                start = 1 if config.is_encoder_decoder else len(source)
                theirs = trim(want[0][start:], config.eos_token_id, config.pad_token_id)
                runs += 1
                ended += len(theirs) < 9  # before the forced last token
                if mine != theirs:
                    print(f"FAIL: {name} {count} beams, early_stopping={early}, length_penalty="
                          f"{penalty}, repetition_penalty={repeat}, source {source}: {mine} != "
                          f"generate()'s {theirs}")
                    ok = False
            ok &= len(lines) == len(group)
    print(f"{'PASS' if ok else 'FAIL'}: {name}: {runs} searches as generate(num_beams=...) "
          f"({ended} ended early)", flush=True)
    return ok


CASES = {"gpt2-greedy": lambda a: greedy(a, "gpt2"), "gpt2-sampled": lambda a: sampled(a, "gpt2"),
         "gpt2-bf16": gpt2_bf16, "gpt2-bf16-cache": gpt2_bf16_cache,
         "gpt2-int8": gpt2_int8, "gpt2-int8-g32": gpt2_int8_groups,
         "gpt2-bf16-weights": gpt2_bf16_weights,
         "bart-greedy": lambda a: seq2seq_greedy(a, "bart"),
         "marian-greedy": lambda a: seq2seq_greedy(a, "marian"),
         "t5-greedy": lambda a: seq2seq_greedy(a, "t5"), "t5-seq2seq": t5_seq2seq,
         "gpt2-beams": lambda a: beams(a, "gpt2"),
         "gpt2-short-prompts": lambda a: short_prompts(a, "gpt2"),
         "llama-short-prompts": lambda a: short_prompts(a, "llama"), "marian-beams": lambda a: beams(a, "marian"),
         "t5-beams": lambda a: beams(a, "t5"),
         "encoder-causal-learned": lambda a: encoder_causal(a, "learned"),
         "encoder-causal-sinusoidal": lambda a: encoder_causal(a, "sinusoidal"),
         "transformer-seq2seq": transformer_seq2seq}
for _family in DECODERS:
    if _family != "gpt2":
        CASES[f"{_family}-greedy"] = lambda a, f=_family: greedy(a, f)
        CASES[f"{_family}-sampled"] = lambda a, f=_family: sampled(a, f)
# Narrow Llama generation within twice (int8: three times) the error of
# transformers' own bfloat16 forward.
for _name, _flag, _factor in (("bf16", "--dtype=bf16", 2), ("bf16-cache", "--cache-dtype=bf16", 2),
                              ("bf16-weights", "--weights-dtype=bf16", 2),
                              ("int8", "--weights-dtype=int8", 3)):
    CASES[f"llama-{_name}"] = lambda a, n=_name, f=_flag, k=_factor: gpt2_narrow(
        a, f"llama-{n}", [f], None, None, family="llama", bf16_factor=k)

STAGED = {"gpt2-greedy", "llama-greedy", "gpt2-bf16", "gpt2-bf16-cache", "gpt2-bf16-weights", "gpt2-int8",
          "gpt2-int8-g32", "bart-greedy", "marian-greedy", "t5-greedy"}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xfmrc", default="xfmrc")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--stage", choices=("all", "prepare", "check"), default="all")
    parser.add_argument("--xfmrc-flag", action="append", default=[],
                        help="extra xfmrc flag of the generators (repeatable)")
    parser.add_argument("cases", nargs="+", choices=sorted(CASES))
    args = parser.parse_args()
    if (args.stage != "all" or args.xfmrc_flag) and not set(args.cases) <= STAGED:
        parser.error(f"--stage and --xfmrc-flag are for {', '.join(sorted(STAGED))}")
    ok = True
    for case in args.cases:
        ok &= CASES[case](args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
