#!/usr/bin/env python3
"""GGUF files, checked against transformers' own GGUF loader.

For each named case: a small transformers decoder with random weights is
converted to a GGUF file as llama.cpp's convert_hf_to_gguf.py writes one (the
`gguf` package's writer and tensor names, Llama's query/key rows permuted for
ggml's rope, Gemma's norms stored plus one, the keys each architecture's
converter writes), each weight in one of ggml's types, cycling through F32, F16,
BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (quantized by the `gguf` package) and
Q4_K, Q5_K, Q6_K (random blocks with finite scales). Then:

- weights: `xfmrc FILE --quantize` writes every tensor as the executable
  loads it (decoded to f32, under transformers' names); each must equal, bit
  for bit, the tensor transformers' GGUF loader (`from_pretrained(...,
  gguf_file=...)`, which decodes with the `gguf` package and undoes the
  permutation and the plus one) makes of it; for Gemma 1, which that loader
  does not read, what its Gemma 2 steps make of it;
- logits: the executable compiled from the file with f32 activations
  (--int8-dot=false) against the float64 forward of the original config's
  model over those weights on a padded batch (max error <= 1e-4 x max); with
  --int8-dot, where the products of integer groups take int8
  activations (integer dot products), against that forward with those activations
  quantized alike: >= 30% of positions within 1e-4 x max (a rounding
  that f32 and float64 take to neighbouring levels moves the positions after
  it; a product that differs, every one). The original config, because what the file leaves out
  transformers' loader fills with its class's defaults (Gemma 2's
  query_pre_attn_scalar and soft caps, Phi-3's rope factors) where llama.cpp
  derives it (xfmr does as llama.cpp).

Prints `PASS: <case> <what> ...` lines. Runs under the oracle's environment.

  gguf_check.py --xfmrc PATH --workdir DIR CASE [CASE...]
"""

import argparse
import contextlib
import math
import os
import subprocess
import sys

import numpy as np
import tokenizers
import torch
import transformers as tf
from safetensors.numpy import load_file
from transformers.pytorch_utils import Conv1D

import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dequantize_weights import four_bit_levels  # noqa: E402
from hf_models import compare, padded, position_mask, random_sequences, randomize  # noqa: E402
from host_cpu import integer_dot  # noqa: E402

torch.set_num_threads(2)
tf.logging.set_verbosity_error()

# 256 wide: the K-quants' blocks are 256 values along a row.
WIDTH = 256


def decoder(cls, **overrides):
    c = dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             hidden_size=WIDTH, intermediate_size=WIDTH, vocab_size=97,
             max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
             rope_theta=10000.0, tie_word_embeddings=False)
    c.update(overrides)
    return cls(**{key: value for key, value in c.items() if value is not None or key != "rope_theta"})


# Llama 3's rope, scaled past 8 positions (the cases run 12).
ROPE_LLAMA3 = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8, "rope_theta": 500.0}

def gemma3_config(**overrides):
    """Six layers, the last attending fully (Gemma 3's pattern), its rope
    scaled linearly; the windowed ones at the base llama.cpp fixes."""
    ropes = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
             "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    return decoder(tf.Gemma3TextConfig, num_hidden_layers=6, head_dim=64,
                   query_pre_attn_scalar=64, sliding_window=4, tie_word_embeddings=True,
                   rope_theta=None, rope_parameters=ropes, **overrides)


def phi3_config():
    """Phi-3's longrope: the cases run 12 positions, past the original 8,
    so the long factors apply. Three layers: every type appears."""
    rope = {"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 8,
            "short_factor": np.linspace(1.0, 2.0, WIDTH // 8).tolist(),
            "long_factor": np.linspace(1.0, 6.0, WIDTH // 8).tolist()}
    return decoder(tf.Phi3Config, num_hidden_layers=3, original_max_position_embeddings=8,
                   sliding_window=None, rope_theta=None, rope_parameters=rope)


CASES = {
    "llama": (tf.LlamaForCausalLM, lambda: decoder(tf.LlamaConfig), "llama"),
    # Stored as llama.cpp does, a tensor of per-frequency factors, which
    # transformers' GGUF loader ignores: the reference is the model of the
    # original config over the weights that loader decodes.
    "llama3-rope": (tf.LlamaForCausalLM,
                    lambda: decoder(tf.LlamaConfig, rope_parameters=ROPE_LLAMA3), "llama"),
    "llama-tied": (tf.LlamaForCausalLM, lambda: decoder(tf.LlamaConfig, tie_word_embeddings=True,
                                                        num_key_value_heads=1), "llama"),
    "qwen2": (tf.Qwen2ForCausalLM, lambda: decoder(tf.Qwen2Config), "qwen2"),
    # 4 heads of 128 over a width of 256 (attention.key_length); 128 because
    # transformers' GGUF loader leaves Qwen3's head_dim at its default.
    "qwen3": (tf.Qwen3ForCausalLM, lambda: decoder(tf.Qwen3Config, head_dim=128), "qwen3"),
    # Heads of 64, not the width / heads llama.cpp assumes without key_length.
    "gemma": (tf.GemmaForCausalLM,
              lambda: decoder(tf.GemmaConfig, head_dim=64, tie_word_embeddings=True), "gemma"),
    # Soft caps that bite, a window of 4 on the first layer.
    "gemma2": (tf.Gemma2ForCausalLM,
               lambda: decoder(tf.Gemma2Config, head_dim=64, query_pre_attn_scalar=64,
                               attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
                               sliding_window=4, tie_word_embeddings=True), "gemma2"),
    "gemma3": (tf.Gemma3ForCausalLM, gemma3_config, "gemma3"),
    "phi3": (tf.Phi3ForCausalLM, phi3_config, "phi3"),
    # Untied, as the converter writes GPT-2: a head of its own (`output`).
    # 1024 positions, because transformers' loader leaves n_positions at
    # its default.
    "gpt2": (tf.GPT2LMHeadModel,
             lambda: tf.GPT2Config(n_layer=2, n_head=4, n_embd=WIDTH, vocab_size=97,
                                   n_positions=1024, tie_word_embeddings=False, pad_token_id=0,
                                   bos_token_id=1, eos_token_id=2), "gpt2"),
}
# GPT-2's Conv1D weights, [in, out], which the converter stores transposed.
CONV1D = (".c_attn.weight", ".c_proj.weight", ".c_fc.weight")
GEMMAS = ("gemma", "gemma2", "gemma3")
# Logits within this fraction of the largest (1e-4 where not named). One
# position of the Gemma case is ill-conditioned (a logit the small
# difference of large terms): there transformers' own float32 forward is off
# by 0.95e-4 of the largest logit, xfmr by 2.8e-4.
TOLERANCE = {"gemma": 5e-4}
# Logits with int8 activations (--int8-dot on hosts with an integer dot product)
# against the float64 forward that quantizes the same activations: the share
# of positions that must agree, and within what fraction of the largest.
INT8_ACTIVATIONS_TOLERANCE = 1e-4
INT8_ACTIVATIONS_AGREE = 0.3

TYPES = [Q.F32, Q.Q8_0, Q.Q4_K, Q.F16, Q.Q4_0, Q.Q5_K, Q.BF16, Q.Q4_1, Q.Q6_K, Q.Q5_0, Q.Q5_1]
K_SCALES = {Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,)}
# The block types whose scales (and mins) xfmr keeps as their f16 fields.
F16_SCALED = {Q.Q8_0, Q.Q5_0, Q.Q5_1, Q.Q4_0, Q.Q4_1}


def encode(values, qtype, rng):
    """`values` (f32, rows x K) as ggml's `qtype`: the gguf package's
    quantizer, or, for K-quants it lacks, random blocks with small scales."""
    if qtype in K_SCALES:
        size, nbytes = gguf.GGML_QUANT_SIZES[qtype]
        blocks = rng.integers(0, 256, size=(values.size // size, nbytes), dtype=np.uint8)
        for at in K_SCALES[qtype]:
            scale = rng.uniform(2e-4, 2e-3, size=len(blocks)).astype(np.float16)
            blocks[:, at:at + 2] = scale.view(np.uint8).reshape(-1, 2)
        return blocks.reshape(values.shape[0], -1)
    return gguf.quants.quantize(values, qtype)


def permute(weights, heads, kv_heads):
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    if kv_heads is not None and heads != kv_heads:
        heads = kv_heads
    return (weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def llama3_rope_factors(config, dim):
    """convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors."""
    rope = config.rope_parameters
    base, factor = rope["rope_theta"], rope["factor"]
    low, high = rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            factors.append(1)
        elif wavelen > old / low:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def token_ids(config):
    """The special tokens of a model without a tokenizer."""
    return lambda writer: (writer.add_bos_token_id(config.bos_token_id),
                           writer.add_eos_token_id(config.eos_token_id),
                           writer.add_pad_token_id(config.pad_token_id))


def write_gguf(model, config, arch, path, rng, types=TYPES, metadata=None):
    """`model` as llama.cpp's converter writes it, its matrices cycling
    through `types`; `metadata` adds the tokenizer's. Returns the ggml type
    of each matrix, by its name in `model`."""
    writer = gguf.GGUFWriter(path, arch)
    (metadata or token_ids(config))(writer)
    if arch == "gpt2":
        # convert_hf_to_gguf.py's GPT2Model. transformers' loader takes
        # GPT-2's vocabulary size from the tokens alone.
        writer.add_token_list([f"<{i}>" for i in range(config.vocab_size)])
        writer.add_context_length(config.n_positions)
        writer.add_embedding_length(config.n_embd)
        writer.add_feed_forward_length(4 * config.n_embd)
        writer.add_block_count(config.n_layer)
        writer.add_head_count(config.n_head)
        writer.add_layer_norm_eps(config.layer_norm_epsilon)
        return write_tensors(writer, model, config, arch, rng, types)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    rope = config.rope_parameters.get("full_attention", config.rope_parameters)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    if arch not in ("gemma", "gemma2"):
        writer.add_rope_freq_base(rope["rope_theta"])
    if arch not in GEMMAS:
        writer.add_rope_dimension_count(head_dim)
    if arch in GEMMAS or head_dim != config.hidden_size // config.num_attention_heads:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    if arch == "gemma2":
        writer.add_attn_logit_softcapping(config.attn_logit_softcapping)
        writer.add_final_logit_softcapping(config.final_logit_softcapping)
    if arch in ("gemma2", "gemma3"):
        writer.add_sliding_window(config.sliding_window)
    if rope.get("rope_type") == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(rope["factor"])
    writer.add_vocab_size(config.vocab_size)
    if rope.get("rope_type") == "llama3":
        writer.add_tensor("rope_freqs.weight", llama3_rope_factors(config, head_dim))
    if arch == "phi3":
        # convert_hf_to_gguf.py's Phi3MiniModel.
        original = rope["original_max_position_embeddings"]
        writer.add_rope_scaling_orig_ctx_len(original)
        writer.add_sliding_window(config.sliding_window or 0)
        scale = config.max_position_embeddings / original
        writer.add_rope_scaling_attn_factors(
            math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1 else 1.0)
        writer.add_tensor("rope_factors_long.weight", np.array(rope["long_factor"], np.float32))
        writer.add_tensor("rope_factors_short.weight", np.array(rope["short_factor"], np.float32))
    return write_tensors(writer, model, config, arch, rng, types)


def write_tensors(writer, model, config, arch, rng, types):
    """The tensors of `model` as the converter changes them, its matrices
    cycling through `types`; returns the type of each matrix by name."""
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], config.num_hidden_layers)
    matrices = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        values = tensor.float().numpy()
        if arch in GEMMAS and name.endswith("norm.weight"):
            values = values + 1
        if arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
            kv = config.num_key_value_heads if "k_proj" in name else None
            values = permute(values, config.num_attention_heads, kv)
        if arch == "gpt2" and name.endswith(CONV1D):
            values = np.ascontiguousarray(values.T)
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert gguf_name, name
        if values.ndim == 1:
            writer.add_tensor(gguf_name, values)
            continue
        qtype = matrices[name] = types[len(matrices) % len(types)]
        if qtype == Q.F32:
            writer.add_tensor(gguf_name, values)
        else:
            writer.add_tensor(gguf_name, encode(values, qtype, rng), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return matrices


def gemma2_steps(path, model, config):
    """A Gemma 1 file decoded as transformers' GGUF loader decodes Gemma 2
    (Gemma2TensorProcessor): the `gguf` package's dequantize, one taken off
    each norm in float32."""
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA, config.num_hidden_layers)
    to_hf = {names.get_name(name, try_suffixes=(".weight", ".bias")): name
             for name in model.state_dict()}
    expected = {}
    for tensor in gguf.GGUFReader(path).tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        if "norm.weight" in tensor.name:
            values = values - 1
        expected[to_hf[tensor.name]] = values.reshape([int(n) for n in reversed(tensor.shape)])
    expected["lm_head.weight"] = expected["model.embed_tokens.weight"]
    return expected


def integer_groups(parts, name, shape):
    """Weight `name` ([out, in] `shape`) from the integer groups xfmr stores
    (docs/quantization.md): level * scale (+ min), rounded in float32 as ggml
    rounds its blocks. 4-bit levels are two a byte, values j and j + 16 of
    each block of 32 in byte j's low and high nibbles, offset by 8 without
    mins."""
    values, scales = parts[name + ":values"], parts[name + ":scales"]
    mins = parts.get(name + ":mins")
    group = shape[1] // scales.shape[1]
    if values.shape[1] * 2 == shape[1]:
        levels = four_bit_levels(values, mins)
    else:
        levels = values.astype(np.float32)
    out = levels * np.repeat(scales, group, axis=1)
    if mins is not None:
        out = out + np.repeat(mins, group, axis=1)
    return out


def run_case(args, case):
    cls, make_config, arch = CASES[case]
    workdir = os.path.join(args.workdir, case)
    os.makedirs(workdir, exist_ok=True)
    generator = torch.Generator().manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    config = make_config()
    model = cls(config).eval()
    randomize(model, generator)
    path = os.path.join(workdir, "model.gguf")
    matrix_types = write_gguf(model, config, arch, path, rng)
    matrices = len(matrix_types)
    assert matrices >= len(TYPES), "every type appears"

    if arch == "gemma":
        expected = gemma2_steps(path, model, config)
    else:
        hf = cls.from_pretrained(workdir, gguf_file="model.gguf").eval()
        expected = {k: v.float().numpy() for k, v in hf.state_dict().items()}
    ok = True

    # The weights as the executable loads them: decoded (--weights-dtype=model), and by
    # default the quantized ones kept as ggml's integer groups (values, scales, mins).
    for variant, flags in (("decoded", ["--weights-dtype=model"]), ("kept", [])):
        stored = os.path.join(workdir, f"weights-{variant}.safetensors")
        subprocess.run([args.xfmrc, path, "--quantize", *flags, "-o", stored], check=True)
        ours = load_file(stored)
        if variant == "kept":
            kept = ours
        good, narrow, half_scales = True, 0, 0
        for name, theirs in sorted(expected.items()):
            if name == "lm_head.weight" and config.tie_word_embeddings:
                continue
            # --quantize names weights without the checkpoint's prefix, in
            # the file's layout (GPT-2's Conv1D weights [out, in]).
            short = name.removeprefix("model.").removeprefix("transformer.")
            if arch == "gpt2" and name.endswith(CONV1D):
                theirs = theirs.T
            mine = ours.get(name, ours.get(short))
            if short + ":values" in ours:
                mine = integer_groups(ours, short, theirs.shape)
                narrow += 1
                # The blocks' own f16 scales stay f16; a K-quant's d * sc is f32.
                half = ours[short + ":scales"].dtype == np.float16
                half_scales += half
                if half != (matrix_types.get(name) in F16_SCALED):
                    print(f"FAIL: {case} {variant} weight {name} ({matrix_types.get(name)!r}) "
                          f"has {ours[short + ':scales'].dtype} scales")
                    good = False
            same = mine is not None and mine.shape == theirs.shape and np.array_equal(mine, theirs)
            if not same:
                print(f"FAIL: {case} {variant} weight {name} differs from transformers' decoding")
                good = False
        ok &= good
        print(f"{'PASS' if good else 'FAIL'}: {case} weights {variant} ({len(expected)} tensors, "
              f"{matrices} matrices over {len(TYPES)} types, {narrow} as integer groups, "
              f"{half_scales} with f16 scales) bit for bit")

    # Logits of a padded batch.
    seq_len, batch = 12, 2
    sources = random_sequences(rng, 5, seq_len, config.vocab_size)
    tokens = os.path.join(workdir, "tokens.txt")
    with open(tokens, "w") as f:
        for src in sources:
            f.write(" ".join(map(str, src)) + "\n")
    hf = cls(config).eval()
    hf.load_state_dict({name: torch.from_numpy(values) for name, values in expected.items()})
    hf.set_attn_implementation("eager")
    hf = hf.double()
    # Without the padding mask: transformers' sliding-window masks leave
    # padded rows with no visible key, whose NaNs reach valid rows, and a
    # causal model's valid (leading) positions never see the padding.
    ids, _ = padded(sources, seq_len, config.pad_token_id)
    with torch.no_grad():
        theirs = hf(input_ids=ids).logits
    with torch.no_grad(), int8_activations(hf, kept, config):
        theirs_int8 = hf(input_ids=ids).logits
    for int8_dot in (False, True):
        executable = os.path.join(workdir, "model")
        subprocess.run([args.xfmrc, path, f"--batch={batch}", f"--seq-len={seq_len}",
                        f"--int8-dot={str(int8_dot).lower()}", "-o", executable], check=True)
        output = os.path.join(workdir, "out.safetensors")
        subprocess.run([executable, f"--input={tokens}", f"--output={output}"], check=True)
        logits = load_file(output)["logits"]
        valid = position_mask([len(s) for s in sources], logits.shape)
        if int8_dot:
            ok &= compare_positions(case, logits, theirs_int8, valid)
        else:
            ok &= compare(case, "logits", logits, theirs, valid, TOLERANCE.get(case, 1e-4))
    return ok


def compare_positions(case, ours, theirs, valid):
    """The share of valid positions whose logits all lie within
    INT8_ACTIVATIONS_TOLERANCE x the largest of `theirs`: at least
    INT8_ACTIVATIONS_AGREE. An activation that f32 and float64 round to
    neighbouring int8 levels moves its position and the later ones of its
    sequence (in a random model, by up to a few percent); a product that
    differs moves every position."""
    theirs = theirs.detach().numpy()
    positions = valid.any(axis=-1)
    error = np.abs(ours - theirs).max(axis=-1)[positions]
    share = float(np.mean(error <= INT8_ACTIVATIONS_TOLERANCE * np.abs(theirs)[valid].max()))
    good = share >= INT8_ACTIVATIONS_AGREE
    print(f"{'PASS' if good else 'FAIL'}: {case} logits, int8 activations: {share:.0%} of "
          f"positions within {INT8_ACTIVATIONS_TOLERANCE:g} of the largest (at least "
          f"{INT8_ACTIVATIONS_AGREE:.0%})", flush=True)
    return good


@contextlib.contextmanager
def int8_activations(model, kept, config):
    """On hosts with an integer dot product, the inputs of `model`'s linear layers
    whose weights xfmr keeps (`kept`) as integer groups of 16 or 32 (or a
    multiple) quantized as its integer products take them, as llama.cpp's q8_0: per
    block of 32 in float32, rounded to even at 127 / the largest magnitude,
    the scale largest / 127 rounded to float16."""
    def quantize(module, inputs):
        x = inputs[0]
        blocks = x.float().reshape(*x.shape[:-1], -1, 32)
        largest = blocks.abs().amax(dim=-1, keepdim=True)
        inverse = torch.where(largest > 0, 127 / largest, torch.zeros_like(largest))
        scale = (largest / 127).half().double()
        return (torch.round(blocks * inverse).double() * scale).reshape(x.shape), *inputs[1:]

    handles = []
    for name, module in model.named_modules() if integer_dot() else ():
        if isinstance(module, torch.nn.Linear):
            in_features = module.in_features
        elif isinstance(module, Conv1D):
            in_features = module.weight.shape[0]
        else:
            continue
        if name == "lm_head" and config.tie_word_embeddings:
            name = "model.embed_tokens"
        short = name.removeprefix("model.").removeprefix("transformer.") + ".weight"
        scales = kept.get(short + ":scales")
        # As the kernels choose (GemmKernel.cpp's takesIntegerDot): groups
        # of 16 (int8) or of a multiple of 32, a depth a multiple of 32.
        group = in_features // scales.shape[1] if scales is not None else 0
        if group and (group == 16 or group % 32 == 0) and in_features % 32 == 0:
            handles.append(module.register_forward_pre_hook(quantize))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def run_chat(args):
    """A chat model's GGUF file (chat_check.py's Llama checkpoint, weights
    F32, Q8_0 and F16, its Llama-3-style tokenizer and chat template):
    `--system S -p U` renders through the file's template and replies as
    generate() does on apply_chat_template's ids, transformers reading the
    model, the tokenizer and the template from the same file."""
    from chat_check import LLAMA3_TEMPLATE, NEW, checkpoint, prompt_counts, reply
    from tokenizers_check import add_gguf_tokenizer
    workdir = os.path.join(args.workdir, "chat")
    os.makedirs(workdir, exist_ok=True)
    model, _ = checkpoint(os.path.join(workdir, "checkpoint"))
    backend = tokenizers.Tokenizer.from_file(
        os.path.join(workdir, "checkpoint", "tokenizer.json"))

    def metadata(writer):
        add_gguf_tokenizer(writer, backend, "llama-bpe", "<|begin_of_text|>", "<|eot_id|>",
                           add_bos=True)
        writer.add_chat_template(LLAMA3_TEMPLATE)

    path = os.path.join(workdir, "model.gguf")
    write_gguf(model, model.config, "llama", path, np.random.default_rng(args.seed),
               types=[Q.F32, Q.Q8_0, Q.F16], metadata=metadata)
    generator = os.path.join(workdir, "generator")
    subprocess.run([args.xfmrc, path, "--generate", "--seq-len=8", "-o", generator], check=True)
    system, user = "  Answer in one word.  ", "What is the capital of France? "
    result = subprocess.run([generator, "--temp", "0", "-n", str(NEW), "--system", system, "-p",
                             user], check=True, capture_output=True)

    hf = tf.LlamaForCausalLM.from_pretrained(workdir, gguf_file="model.gguf").double().eval()
    # llama.cpp's end-of-generation tokens: the file's EOS, and <|im_end|>,
    # which it knows by its text.
    hf.generation_config.eos_token_id = [backend.token_to_id(t) for t in ("<|eot_id|>",
                                                                          "<|im_end|>")]
    tokenizer = tf.AutoTokenizer.from_pretrained(workdir, gguf_file="model.gguf")
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                        return_dict=False)
    want = tokenizer.decode(reply(hf, ids), skip_special_tokens=False)
    got = result.stdout.decode()
    counts = prompt_counts(result.stderr.decode())
    ok = got == want + "\n" and counts == [len(ids)]
    print(f"{'PASS' if ok else 'FAIL'}: chat {len(ids)} prompt tokens through the file's "
          f"template (xfmr: {counts}), reply {got!r} (generate(): {want!r})")
    return ok


# Gemma 2's template (its -it checkpoints' tokenizer_config.json).
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}")


def run_gemma_chat(args):
    """A Gemma 2 chat file (weights F32, Q8_0 and F16, a window of 8 keys,
    soft caps): its SentencePiece tokenizer as Gemma's files store it
    (tokenizers_check.py's), its template; `-p U` replies as generate() does
    on apply_chat_template's ids, ending at <end_of_turn> as llama.cpp does
    although the file's EOS is <eos>. The reference: the original config's
    model over the weights transformers' loader decodes, its tokenizer and
    template from the same file."""
    from chat_check import NEW, prompt_counts, reply
    from tokenizers_check import add_gguf_sentencepiece, gemma_spaces, train_sentencepiece
    workdir = os.path.join(args.workdir, "gemma-chat")
    os.makedirs(workdir, exist_ok=True)
    spaces = ["\u2581\u2581", "\u2581\u2581\u2581"]
    processor = train_sentencepiece(False, spaces,
                                    ["<pad>", "<mask>", "<start_of_turn>", "<end_of_turn>"],
                                    bos_piece="<bos>", eos_piece="<eos>")
    torch.manual_seed(3)
    config = tf.Gemma2Config(
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, hidden_size=64,
        intermediate_size=128, head_dim=32, query_pre_attn_scalar=32, sliding_window=8,
        vocab_size=processor.get_piece_size(), max_position_embeddings=128,
        bos_token_id=processor.bos_id(), eos_token_id=processor.eos_id(),
        pad_token_id=processor.piece_to_id("<pad>"), tie_word_embeddings=True)
    model = tf.Gemma2ForCausalLM(config).eval()
    # Embeddings small beside the layers' outputs (Gemma scales them by
    # sqrt(width)), or the tied head repeats the last token.
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 0.2 if "norm" in name else 0.05 if "embed" in name else 0.6
            p.copy_(scale * torch.randn_like(p))

    def metadata(writer):
        add_gguf_sentencepiece(writer, processor, gemma_spaces, spaces)
        writer.add_pad_token_id(config.pad_token_id)
        writer.add_add_bos_token(True)
        writer.add_chat_template(GEMMA_TEMPLATE)

    path = os.path.join(workdir, "model.gguf")
    write_gguf(model, config, "gemma2", path, np.random.default_rng(args.seed),
               types=[Q.F32, Q.Q8_0, Q.F16], metadata=metadata)
    generator = os.path.join(workdir, "generator")
    subprocess.run([args.xfmrc, path, "--generate", "--seq-len=8", "-o", generator], check=True)
    user = "  Name  the capital of France,  please. "
    result = subprocess.run([generator, "--temp", "0", "-n", str(NEW), "-p", user], check=True,
                            capture_output=True)

    decoded = tf.Gemma2ForCausalLM.from_pretrained(workdir, gguf_file="model.gguf")
    hf = tf.Gemma2ForCausalLM(config).eval()
    hf.load_state_dict(decoded.state_dict())
    hf = hf.double()
    hf.generation_config.eos_token_id = [processor.eos_id(),
                                         processor.piece_to_id("<end_of_turn>")]
    tokenizer = tf.AutoTokenizer.from_pretrained(workdir, gguf_file="model.gguf")
    ids = tokenizer.apply_chat_template([{"role": "user", "content": user}],
                                        add_generation_prompt=True, tokenize=True,
                                        return_dict=False)
    want = tokenizer.decode(reply(hf, ids), skip_special_tokens=False)
    got = result.stdout.decode()
    counts = prompt_counts(result.stderr.decode())
    ends = f"generation ends at: {processor.eos_id()} '<eos>', " \
           f"{processor.piece_to_id('<end_of_turn>')} '<end_of_turn>'"
    ok = got == want + "\n" and counts == [len(ids)] and ends in result.stderr.decode()
    print(f"{'PASS' if ok else 'FAIL'}: gemma-chat {len(ids)} prompt tokens through the file's "
          f"template (xfmr: {counts}), reply {got!r} (generate(): {want!r}), {ends!r}")
    return ok


CHATS = {"chat": run_chat, "gemma-chat": run_gemma_chat}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xfmrc", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("cases", nargs="+", choices=sorted(CASES) + sorted(CHATS))
    args = parser.parse_args()
    ok = True
    for case in args.cases:
        ok &= CHATS[case](args) if case in CHATS else run_case(args, case)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
