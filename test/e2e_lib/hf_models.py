#!/usr/bin/env python3
"""Whole Hugging Face models, checked against transformers itself.

For each named case: build the transformers class from a small config with
every weight random (no zero biases or unit norms to hide a swapped
tensor), `save_pretrained` it as users have it, compile the directory with
xfmrc, run the executable on random token sequences of different lengths
(a padded batch), and compare each output with the class's own forward in
float64 on the same padded batch:

    max |xfmr - hf| <= rel_tol * max |hf|     over the valid positions.

Prints one line per output: `PASS: <case> <output> max error E (limit L)`.
Runs under the oracle's virtual environment (scripts/install-oracle.sh).

  hf_models.py --xfmrc PATH --workdir DIR CASE [CASE...]
"""

import argparse
import inspect
import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np
import torch
import transformers as tf
from safetensors.numpy import load_file

torch.set_num_threads(2)
tf.logging.set_verbosity_error()

SMALL = dict(layers=2, heads=4, d_model=32, ffn=64, vocab=97, positions=40)


def gpt2_config(**overrides):
    c = dict(n_layer=SMALL["layers"], n_head=SMALL["heads"], n_embd=SMALL["d_model"],
             vocab_size=SMALL["vocab"], n_positions=SMALL["positions"],
             bos_token_id=0, eos_token_id=0)
    c.update(overrides)
    return tf.GPT2Config(**c)


def bert_config(**overrides):
    c = dict(num_hidden_layers=SMALL["layers"], num_attention_heads=SMALL["heads"],
             hidden_size=SMALL["d_model"], intermediate_size=SMALL["ffn"],
             vocab_size=SMALL["vocab"], max_position_embeddings=SMALL["positions"])
    c.update(overrides)
    return tf.BertConfig(**c)


def seq2seq_config(cls, **overrides):
    c = dict(d_model=SMALL["d_model"], encoder_layers=SMALL["layers"], decoder_layers=3,
             encoder_attention_heads=SMALL["heads"], decoder_attention_heads=2,
             encoder_ffn_dim=SMALL["ffn"], decoder_ffn_dim=48, vocab_size=SMALL["vocab"],
             max_position_embeddings=SMALL["positions"], pad_token_id=1, eos_token_id=2,
             bos_token_id=0, decoder_start_token_id=2, forced_eos_token_id=2)
    c.update(overrides)
    return cls(**c)


def t5_config(**overrides):
    c = dict(d_model=SMALL["d_model"], d_kv=SMALL["d_model"] // SMALL["heads"], d_ff=SMALL["ffn"],
             num_layers=SMALL["layers"], num_decoder_layers=3, num_heads=SMALL["heads"],
             vocab_size=SMALL["vocab"], relative_attention_num_buckets=8,
             relative_attention_max_distance=10, pad_token_id=0, eos_token_id=1,
             decoder_start_token_id=0)
    c.update(overrides)
    return tf.T5Config(**c)


def decoder_config(cls, **overrides):
    """A Llama-style decoder: 4 query heads over 2 key/value heads."""
    c = dict(num_hidden_layers=SMALL["layers"], num_attention_heads=SMALL["heads"],
             num_key_value_heads=2, hidden_size=SMALL["d_model"], intermediate_size=SMALL["ffn"],
             vocab_size=SMALL["vocab"], max_position_embeddings=SMALL["positions"],
             pad_token_id=0, bos_token_id=1, eos_token_id=2)
    c.update(overrides)
    return cls(**c)


# Rope types whose frequencies differ from the default's for sequences
# longer than original_max_position_embeddings (8 here; the cases run 12).
ROPE_LLAMA3 = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8, "rope_theta": 500.0}
ROPE_YARN = {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 8,
             "rope_theta": 1000.0}
ROPE_LINEAR = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}


def longrope(head_dim, partial=1.0):
    n = int(head_dim * partial) // 2
    return {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": partial,
            "short_factor": [1.0 + 0.1 * i for i in range(n)],
            "long_factor": [1.5 + 0.5 * i for i in range(n)],
            "original_max_position_embeddings": 8}


# name -> (model class, config factory, xfmrc flags, options)
CASES = {
    "gpt2-lm": (tf.GPT2LMHeadModel, lambda: gpt2_config(), [], {}),
    "gpt2-lm-untied": (tf.GPT2LMHeadModel,
                       lambda: gpt2_config(tie_word_embeddings=False, activation_function="relu",
                                           scale_attn_by_inverse_layer_idx=True), [], {}),
    "gpt2-base": (tf.GPT2Model, lambda: gpt2_config(n_inner=48),
                  ["--output-attentions=1"], {}),
    "gpt2-sharded": (tf.GPT2LMHeadModel, lambda: gpt2_config(), [], {"shard": "40KB"}),
    "bert-base": (tf.BertModel, lambda: bert_config(), ["--output-attentions=all"], {}),
    "bert-mlm": (tf.BertForMaskedLM, lambda: bert_config(hidden_act="gelu_new"), [], {}),
    "bert-classifier": (tf.BertForSequenceClassification,
                        lambda: bert_config(num_labels=3), [], {}),
    # A BertModel read from a BertForMaskedLM checkpoint (names under bert.).
    "bert-base-from-mlm": (tf.BertForMaskedLM, lambda: bert_config(),
                           ["--architecture=BertModel"], {"reference": tf.BertModel}),
    "marian-mt": (tf.MarianMTModel,
                  lambda: seq2seq_config(tf.MarianConfig, activation_function="swish",
                                         scale_embedding=True, decoder_start_token_id=1),
                  [], {}),
    "marian-base-separate-vocab": (tf.MarianModel,
                                   lambda: seq2seq_config(tf.MarianConfig,
                                                          share_encoder_decoder_embeddings=False,
                                                          decoder_vocab_size=61),
                                   [], {}),
    # Sequences of 12 against max_distance 10: exact, logarithmic and
    # clamped buckets all occur.
    "t5-cg": (tf.T5ForConditionalGeneration, lambda: t5_config(), [], {}),
    "t5-gated": (tf.T5ForConditionalGeneration,
                 lambda: t5_config(feed_forward_proj="gated-gelu", tie_word_embeddings=False),
                 [], {}),
    # As the hub's v1.1 and FLAN checkpoints: a head of its own, unscaled;
    # num_heads * d_kv (48) is not d_model, nor does num_heads divide it.
    "t5-separate-head": (tf.T5ForConditionalGeneration,
                         lambda: t5_config(feed_forward_proj="gated-gelu", num_heads=6, d_kv=8),
                         [], {"separate_head": True}),
    "t5-base": (tf.T5Model, lambda: t5_config(feed_forward_proj="gated-silu"),
                ["--output-attentions=0,1"], {}),
    "t5-encoder": (tf.T5EncoderModel, lambda: t5_config(num_heads=2, d_kv=24), [], {}),
    "llama-lm": (tf.LlamaForCausalLM,
                 lambda: decoder_config(tf.LlamaConfig, rope_parameters=ROPE_LLAMA3), [], {}),
    "llama-base-biases": (tf.LlamaModel,
                          lambda: decoder_config(tf.LlamaConfig, attention_bias=True,
                                                 mlp_bias=True, num_key_value_heads=1,
                                                 rope_parameters=ROPE_LINEAR),
                          ["--output-attentions=0,1"], {}),
    "mistral-lm": (tf.MistralForCausalLM,
                   lambda: decoder_config(tf.MistralConfig, sliding_window=40,
                                          rope_parameters=ROPE_YARN, tie_word_embeddings=True),
                   [], {}),
    "qwen2-lm": (tf.Qwen2ForCausalLM, lambda: decoder_config(tf.Qwen2Config), [], {}),
    "qwen3-lm": (tf.Qwen3ForCausalLM, lambda: decoder_config(tf.Qwen3Config, head_dim=16), [], {}),
    "gemma-lm": (tf.GemmaForCausalLM, lambda: decoder_config(tf.GemmaConfig, head_dim=8), [], {}),
    "phi3-lm": (tf.Phi3ForCausalLM,
                lambda: decoder_config(tf.Phi3Config, rope_parameters=longrope(8, 0.5),
                                       pad_token_id=0, eos_token_id=2), [], {}),
    # Sliding windows of 5 keys over sequences of 12.
    "mistral-window": (tf.MistralForCausalLM,
                       lambda: decoder_config(tf.MistralConfig, sliding_window=5), [],
                       {"causal_unmasked": True}),
    "gemma2-lm": (tf.Gemma2ForCausalLM,
                  lambda: decoder_config(tf.Gemma2Config, head_dim=8, num_hidden_layers=3,
                                         sliding_window=5, query_pre_attn_scalar=16,
                                         attn_logit_softcapping=2.0,
                                         final_logit_softcapping=3.0),
                  ["--output-attentions=all"], {"causal_unmasked": True}),
    "gemma3-lm": (tf.Gemma3ForCausalLM,
                  lambda: decoder_config(tf.Gemma3TextConfig, head_dim=8, num_hidden_layers=3,
                                         sliding_window=5, query_pre_attn_scalar=16,
                                         layer_types=["sliding_attention", "full_attention",
                                                      "sliding_attention"],
                                         rope_parameters={
                                             "full_attention": {"rope_type": "linear",
                                                                "factor": 2.0,
                                                                "rope_theta": 10000.0},
                                             "sliding_attention": {"rope_type": "default",
                                                                   "rope_theta": 100.0}}),
                  [], {"causal_unmasked": True}),
    "bart-cg": (tf.BartForConditionalGeneration, lambda: seq2seq_config(tf.BartConfig), [], {}),
    "bart-base": (tf.BartModel,
                  lambda: seq2seq_config(tf.BartConfig, scale_embedding=True,
                                         activation_function="gelu_new"),
                  ["--output-attentions=0,2"], {}),
}

SENTENCE_CASES = {"st-mean-normalized": ("mean", True), "st-cls": ("cls", False),
                  "st-max": ("max", False), "st-mean-sqrt-len": ("mean_sqrt_len_tokens", True)}


def randomize(model, generator, scale=0.1):
    """Every floating parameter and saved buffer random: norms' scales near 1.
    Buffers a checkpoint does not hold (rotary frequencies) stay as they are."""
    saved = model.state_dict()
    with torch.no_grad():
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if not tensor.is_floating_point() or name not in saved:
                continue
            noise = torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype)
            if "norm" in name.lower() and name.endswith("weight"):
                tensor.copy_(1 + 0.2 * noise)
            elif "embed_positions" in name and "Sinusoidal" in type(
                    model.get_submodule(name.rsplit(".", 1)[0])).__name__:
                continue  # fixed sinusoids
            else:
                tensor.copy_(scale * noise)


def separate_head(directory, config, generator):
    """Gives a saved T5 checkpoint a head of its own and an untied config."""
    from safetensors.torch import load_file as load_torch, save_file
    path = os.path.join(directory, "model.safetensors")
    weights = load_torch(path)
    weights["lm_head.weight"] = 0.1 * torch.randn((config.vocab_size, config.d_model),
                                                  generator=generator)
    save_file(weights, path, metadata={"format": "pt"})
    config_path = os.path.join(directory, "config.json")
    with open(config_path) as f:
        saved = json.load(f)
    saved["tie_word_embeddings"] = False
    saved.pop("scale_decoder_outputs", None)
    with open(config_path, "w") as f:
        json.dump(saved, f)


def random_sequences(rng, count, length, vocab):
    """`count` id lists of lengths in [1, length], the first one full."""
    lengths = [length] + [int(rng.integers(1, length + 1)) for _ in range(count - 1)]
    return [rng.integers(0, vocab, size=n).tolist() for n in lengths]


def padded(sequences, length, pad):
    ids = torch.full((len(sequences), length), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), length), dtype=torch.long)
    for i, seq in enumerate(sequences):
        ids[i, :len(seq)] = torch.tensor(seq)
        mask[i, :len(seq)] = 1
    return ids, mask


def compare(case, name, ours, theirs, valid, rel_tol):
    """Max error over the entries `valid` (a boolean array) selects."""
    theirs = theirs.detach().numpy()
    if ours.shape != theirs.shape:
        print(f"FAIL: {case} {name} shape {ours.shape} != transformers' {theirs.shape}")
        return False
    error = float(np.max(np.abs(ours - theirs)[valid]))
    limit = rel_tol * float(np.max(np.abs(theirs)[valid]))
    verdict = "PASS" if error <= limit else "FAIL"
    print(f"{verdict}: {case} {name} max error {error:.3g} (limit {limit:.3g})", flush=True)
    return error <= limit


def position_mask(lengths, shape):
    """True at [sequence, position < length, ...] of an output of `shape`."""
    valid = np.zeros(shape, dtype=bool)
    for i, n in enumerate(lengths):
        valid[i, :n] = True
    return valid


def attention_mask_for(lengths_q, lengths_k, shape):
    valid = np.zeros(shape, dtype=bool)
    for i, (q, k) in enumerate(zip(lengths_q, lengths_k)):
        valid[i, :, :q, :k] = True
    return valid


def run_xfmr(args, directory, flags, tokens, workdir, batch, seq_len, decoder_len):
    model = os.path.join(workdir, "model")
    command = [args.xfmrc, directory, f"--batch={batch}", f"--seq-len={seq_len}", "-o", model]
    if decoder_len:
        command.append(f"--decoder-seq-len={decoder_len}")
    subprocess.run(command + flags + args.xfmrc_flag, check=True)
    output = os.path.join(workdir, "out.safetensors")
    # The executable's weights default to the checkpoint it was compiled from.
    subprocess.run([model, f"--input={tokens}", f"--output={output}"], check=True)
    return load_file(output)


def run_case(args, case):
    cls, make_config, flags, options = CASES[case]
    workdir = os.path.join(args.workdir, case)
    directory = os.path.join(workdir, "checkpoint")
    os.makedirs(workdir, exist_ok=True)
    generator = torch.Generator().manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    config = make_config()
    model = cls(config).eval()
    randomize(model, generator)
    save = {"safe_serialization": True}
    if "shard" in options:
        save["max_shard_size"] = options["shard"]
    model.save_pretrained(directory, **save)
    if "shard" in options:
        assert os.path.exists(os.path.join(directory, "model.safetensors.index.json"))
    if options.get("separate_head"):
        separate_head(directory, config, generator)

    # T5EncoderModel's config is an encoder-decoder's.
    seq2seq = "decoder_input_ids" in inspect.signature(cls.forward).parameters
    seq_len, decoder_len, batch = 12, (9 if seq2seq else 0), 2
    vocab = config.vocab_size
    sources = random_sequences(rng, 5, seq_len, vocab)
    targets = random_sequences(rng, 5, decoder_len,
                               getattr(config, "decoder_vocab_size", None) or vocab) \
        if seq2seq else None
    tokens = os.path.join(workdir, "tokens.txt")
    with open(tokens, "w") as f:
        for i, src in enumerate(sources):
            line = " ".join(map(str, src))
            if seq2seq:
                line += " | " + " ".join(map(str, targets[i]))
            f.write(line + "\n")
    ours = run_xfmr(args, directory, flags, tokens, workdir, batch, seq_len, decoder_len)

    reference = options.get("reference", cls)
    reload = reference is not cls or options.get("separate_head")
    hf = reference.from_pretrained(directory) if reload else model
    hf.set_attn_implementation("eager")
    hf = hf.double().eval()
    pad = config.pad_token_id if config.pad_token_id is not None else 0
    ids, mask = padded(sources, seq_len, pad)
    inputs = {"input_ids": ids, "attention_mask": mask}
    if options.get("causal_unmasked"):
        # transformers' sliding-window masks leave padded rows with no visible
        # key, whose NaNs reach valid rows through 0 * NaN; a causal model's
        # valid (leading) positions never see the padding, so its forward
        # without the mask is the same there.
        inputs["attention_mask"] = torch.ones_like(mask)
    if seq2seq:
        inputs["decoder_input_ids"], inputs["decoder_attention_mask"] = padded(
            targets, decoder_len, pad)
    wants_attentions = any(k.endswith("attentions." + k.split(".")[-1]) for k in ours)
    with torch.no_grad():
        out = hf(**inputs, output_attentions=wants_attentions)

    src_lengths = [len(s) for s in sources]
    tgt_lengths = [len(t) for t in targets] if seq2seq else src_lengths
    ok = True
    for name, value in sorted(ours.items()):
        if name == "lengths":
            continue
        if "." in name:
            group, layer = name.rsplit(".", 1)
            theirs = getattr(out, group)[int(layer)]
            queries = src_lengths if group == "encoder_attentions" else tgt_lengths
            keys = tgt_lengths if group == "decoder_attentions" else src_lengths
            valid = attention_mask_for(queries, keys, value.shape)
        else:
            theirs = getattr(out, name)
            lengths = src_lengths if name.startswith("encoder_") else tgt_lengths
            valid = position_mask(lengths, value.shape) if value.ndim == 3 else \
                np.ones(value.shape, dtype=bool)
        ok &= compare(case, name, value, theirs, valid, args.rel_tol)
    return ok


def sentence_checkpoint(workdir, mode, normalize, seed):
    """A sentence-transformers checkpoint in workdir/checkpoint: a random
    BertModel with a WordPiece vocabulary of words w0 ..., `mode` pooling,
    normalized or not."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    base = os.path.join(workdir, "bert")
    directory = os.path.join(workdir, "checkpoint")
    os.makedirs(base, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + \
        [f"w{i}" for i in range(SMALL["vocab"] - 5)]
    with open(os.path.join(base, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    tf.BertTokenizer(os.path.join(base, "vocab.txt")).save_pretrained(base)
    bert = tf.BertModel(bert_config()).eval()
    randomize(bert, torch.Generator().manual_seed(seed))
    bert.save_pretrained(base)
    transformer = Transformer(base, max_seq_length=16)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling_mode=mode)]
    if normalize:
        modules.append(Normalize())
    SentenceTransformer(modules=modules).save(directory)
    return directory


def run_sentence_case(args, case):
    """A sentence-transformers checkpoint: BertModel, pooling, normalize."""
    from sentence_transformers import SentenceTransformer
    mode, normalize = SENTENCE_CASES[case]
    workdir = os.path.join(args.workdir, case)
    directory = sentence_checkpoint(workdir, mode, normalize, args.seed)
    rng = np.random.default_rng(args.seed)

    seq_len = 12
    sources = random_sequences(rng, 5, seq_len, SMALL["vocab"])
    tokens = os.path.join(workdir, "tokens.txt")
    with open(tokens, "w") as f:
        for src in sources:
            f.write(" ".join(map(str, src)) + "\n")
    ours = run_xfmr(args, directory, [], tokens, workdir, 2, seq_len, 0)

    st = SentenceTransformer(directory, device="cpu").double().eval()
    ids, mask = padded(sources, seq_len, 0)
    with torch.no_grad():
        theirs = st({"input_ids": ids, "attention_mask": mask,
                     "token_type_ids": torch.zeros_like(ids)})["sentence_embedding"]
    value = ours["sentence_embedding"]
    return compare(case, "sentence_embedding", value, theirs,
                   np.ones(value.shape, dtype=bool), args.rel_tol)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xfmrc", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rel-tol", type=float, default=1e-4)
    parser.add_argument("--xfmrc-flag", action="append", default=[],
                        help="extra xfmrc flag for every case (repeatable), e.g. "
                        "--fuse-attention=false")
    parser.add_argument("cases", nargs="+", choices=sorted(CASES) + sorted(SENTENCE_CASES))
    args = parser.parse_args()
    ok = True
    for case in args.cases:
        ok &= (run_sentence_case if case in SENTENCE_CASES else run_case)(args, case)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
