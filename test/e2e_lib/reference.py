#!/usr/bin/env python3
"""PyTorch reference for xfmr's end-to-end tests.

Independent of xfmr: the architectures are written here from their
definitions (Hugging Face GPT-2 / BERT-for-masked-LM semantics, and the
original encoder-decoder transformer with BART/Marian tensor names), or, for
`encoder`, are PyTorch's own nn.TransformerEncoder, and are evaluated in
float64, so the reference is more accurate than the fp32 code under test.

  reference.py generate --config C --weights W.safetensors --tokens T.txt
               [--sequences N] [--seed S] [--seq-len L] [--decoder-seq-len L]
      random weights (named as the Hugging Face checkpoint) and token
      sequences of random lengths (padding exercised)
  reference.py check --config C --weights W --tokens T --output O.npy
               [--rel-tol 1e-4]
      recomputes the logits and compares the valid positions:
      max |xfmr - torch| <= rel_tol * max |torch|
"""

import argparse
import json
import math
import sys

import numpy as np
import torch

import safetensors_io

torch.set_num_threads(2)
DTYPE = torch.float64


def read_weights(path):
    return {name: torch.tensor(array, dtype=DTYPE)
            for name, array in safetensors_io.read(path).items()}


# --------------------------------------------------------------------------
# Configuration, as each architecture's Hugging Face config reads it

def first(config, keys, default=None):
    for key in keys:
        if key in config:
            return config[key]
    if default is None:
        raise KeyError(keys[0])
    return default


def describe(config):
    kind = config["model_type"]
    if kind == "gpt2":
        d = first(config, ["n_embd", "hidden_size"])
        return dict(kind=kind, d=d, layers=first(config, ["n_layer", "num_hidden_layers"]),
                    heads=first(config, ["n_head", "num_attention_heads"]),
                    vocab=config["vocab_size"],
                    positions=first(config, ["n_positions", "max_position_embeddings"]),
                    inner=config.get("n_inner") or 4 * d,
                    eps=config.get("layer_norm_epsilon", 1e-5),
                    act=config.get("activation_function", "gelu_new"))
    if kind == "bert":
        d = config["hidden_size"]
        return dict(kind=kind, d=d, layers=config["num_hidden_layers"],
                    heads=config["num_attention_heads"], vocab=config["vocab_size"],
                    positions=config["max_position_embeddings"],
                    inner=config.get("intermediate_size", 4 * d),
                    types=config.get("type_vocab_size", 2),
                    eps=config.get("layer_norm_eps", 1e-12), act=config.get("hidden_act", "gelu"))
    if kind == "transformer":
        d = config["d_model"]
        enc_layers = config["encoder_layers"]
        enc_heads = config["encoder_attention_heads"]
        enc_ffn = config.get("encoder_ffn_dim", 4 * d)
        return dict(kind=kind, d=d, vocab=config["vocab_size"],
                    positions=config["max_position_embeddings"],
                    enc_layers=enc_layers, dec_layers=config.get("decoder_layers", enc_layers),
                    enc_heads=enc_heads, dec_heads=config.get("decoder_attention_heads", enc_heads),
                    enc_ffn=enc_ffn, dec_ffn=config.get("decoder_ffn_dim", enc_ffn),
                    eps=config.get("layer_norm_eps", 1e-5),
                    act=config.get("activation_function", "relu"),
                    pre_ln=config.get("normalize_before", False),
                    scale_embedding=config.get("scale_embedding", True),
                    tied=config.get("tie_word_embeddings", True))
    if kind == "encoder":
        d = first(config, ["d_model", "hidden_size"])
        vocab = config["vocab_size"]
        return dict(kind=kind, d=d, vocab=vocab,
                    layers=first(config, ["num_layers", "num_hidden_layers"]),
                    heads=first(config, ["num_heads", "num_attention_heads"]),
                    positions=first(config, ["max_position_embeddings", "n_positions"]),
                    ffn=first(config, ["dim_feedforward", "intermediate_size"], 4 * d),
                    labels=config.get("num_labels", vocab), eps=config.get("layer_norm_eps", 1e-5),
                    act=config.get("activation", "relu"), norm_first=config.get("norm_first", True),
                    scale_embedding=config.get("scale_embedding", False),
                    learned=config.get("position_embedding", "learned") == "learned")
    raise ValueError("unknown model_type " + kind)


def activation(name, x):
    if name == "relu":
        return torch.relu(x)
    if name == "gelu":
        return torch.nn.functional.gelu(x)
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return torch.nn.functional.gelu(x, approximate="tanh")
    raise ValueError(name)


# --------------------------------------------------------------------------
# Weights: names and shapes of each architecture's checkpoint

def weight_shapes(c):
    d, shapes = c["d"], {}
    if c["kind"] == "gpt2":
        shapes["wte.weight"] = (c["vocab"], d)
        shapes["wpe.weight"] = (c["positions"], d)
        for i in range(c["layers"]):
            p = f"h.{i}."
            for ln in ("ln_1", "ln_2"):
                shapes[p + ln + ".weight"] = (d,)
                shapes[p + ln + ".bias"] = (d,)
            shapes[p + "attn.c_attn.weight"] = (d, 3 * d)
            shapes[p + "attn.c_attn.bias"] = (3 * d,)
            shapes[p + "attn.c_proj.weight"] = (d, d)
            shapes[p + "attn.c_proj.bias"] = (d,)
            shapes[p + "mlp.c_fc.weight"] = (d, c["inner"])
            shapes[p + "mlp.c_fc.bias"] = (c["inner"],)
            shapes[p + "mlp.c_proj.weight"] = (c["inner"], d)
            shapes[p + "mlp.c_proj.bias"] = (d,)
        shapes["ln_f.weight"] = (d,)
        shapes["ln_f.bias"] = (d,)
    elif c["kind"] == "bert":
        e = "bert.embeddings."
        shapes[e + "word_embeddings.weight"] = (c["vocab"], d)
        shapes[e + "position_embeddings.weight"] = (c["positions"], d)
        shapes[e + "token_type_embeddings.weight"] = (c["types"], d)
        shapes[e + "LayerNorm.weight"] = (d,)
        shapes[e + "LayerNorm.bias"] = (d,)
        for i in range(c["layers"]):
            p = f"bert.encoder.layer.{i}."
            linears = {"attention.self.query": (d, d), "attention.self.key": (d, d),
                       "attention.self.value": (d, d), "attention.output.dense": (d, d),
                       "intermediate.dense": (c["inner"], d), "output.dense": (d, c["inner"])}
            for name, shape in linears.items():
                shapes[p + name + ".weight"] = shape
                shapes[p + name + ".bias"] = (shape[0],)
            for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
                shapes[p + ln + ".weight"] = (d,)
                shapes[p + ln + ".bias"] = (d,)
        t = "cls.predictions."
        shapes[t + "transform.dense.weight"] = (d, d)
        shapes[t + "transform.dense.bias"] = (d,)
        shapes[t + "transform.LayerNorm.weight"] = (d,)
        shapes[t + "transform.LayerNorm.bias"] = (d,)
        shapes[t + "bias"] = (c["vocab"],)
    else:
        shapes["model.shared.weight"] = (c["vocab"], d)
        shapes["final_logits_bias"] = (1, c["vocab"])
        if not c["tied"]:
            shapes["lm_head.weight"] = (c["vocab"], d)

        def attention(p):
            for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                shapes[p + proj + ".weight"] = (d, d)
                shapes[p + proj + ".bias"] = (d,)

        def layer_norm(name):
            shapes[name + ".weight"] = (d,)
            shapes[name + ".bias"] = (d,)

        for side, layers, ffn in (("encoder", c["enc_layers"], c["enc_ffn"]),
                                  ("decoder", c["dec_layers"], c["dec_ffn"])):
            for i in range(layers):
                p = f"model.{side}.layers.{i}."
                attention(p + "self_attn.")
                layer_norm(p + "self_attn_layer_norm")
                if side == "decoder":
                    attention(p + "encoder_attn.")
                    layer_norm(p + "encoder_attn_layer_norm")
                shapes[p + "fc1.weight"] = (ffn, d)
                shapes[p + "fc1.bias"] = (ffn,)
                shapes[p + "fc2.weight"] = (d, ffn)
                shapes[p + "fc2.bias"] = (d,)
                layer_norm(p + "final_layer_norm")
            if c["pre_ln"]:
                layer_norm(f"model.{side}.layer_norm")
    return shapes


def encoder_shapes(c):
    d, ffn, shapes = c["d"], c["ffn"], {"embedding.weight": (c["vocab"], c["d"])}
    if c["learned"]:
        shapes["position_embedding.weight"] = (c["positions"], d)
    for i in range(c["layers"]):
        p = f"encoder.layers.{i}."
        shapes.update({p + "self_attn.in_proj_weight": (3 * d, d), p + "self_attn.in_proj_bias": (3 * d,),
                       p + "self_attn.out_proj.weight": (d, d), p + "self_attn.out_proj.bias": (d,),
                       p + "linear1.weight": (ffn, d), p + "linear1.bias": (ffn,),
                       p + "linear2.weight": (d, ffn), p + "linear2.bias": (d,)})
        for norm in ("norm1", "norm2"):
            shapes[p + norm + ".weight"] = (d,)
            shapes[p + norm + ".bias"] = (d,)
    if c["norm_first"]:
        shapes["encoder.norm.weight"] = (d,)
        shapes["encoder.norm.bias"] = (d,)
    shapes["head.weight"] = (c["labels"], d)
    shapes["head.bias"] = (c["labels"],)
    return shapes


def random_weights(c, generator):
    weights = {}
    shapes = encoder_shapes(c) if c["kind"] == "encoder" else weight_shapes(c)
    for name, shape in shapes.items():
        if name.endswith("LayerNorm.weight") or "ln_" in name and name.endswith(".weight") \
                or "layer_norm" in name and name.endswith(".weight") or "norm" in name and len(shape) == 1 \
                and name.endswith(".weight"):
            value = 1.0 + 0.1 * torch.randn(shape, generator=generator)
        elif len(shape) == 1 or name == "final_logits_bias":
            value = 0.1 * torch.randn(shape, generator=generator)
        elif "embed" in name or name in ("wte.weight", "wpe.weight", "model.shared.weight"):
            value = 0.5 * torch.randn(shape, generator=generator)
        else:
            fan_in = shape[0] if name.endswith("c_attn.weight") or ".c_fc." in name or \
                ".c_proj." in name else shape[1]
            value = torch.randn(shape, generator=generator) / math.sqrt(fan_in)
        weights[name] = value.to(torch.float32)
    return weights


# --------------------------------------------------------------------------
# Models (float64)

def layer_norm(x, w, name, eps):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], w[name + ".weight"],
                                          w[name + ".bias"], eps)


def attend(q, k, v, heads, keep):
    """Scaled dot-product attention: softmax(q k^T / sqrt(dh) masked) v.
    q [B,Sq,D], k/v [B,Sk,D], keep [B,Sq,Sk] bool."""
    b, sq, d = q.shape
    dh = d // heads
    split = lambda t: t.view(b, t.shape[1], heads, dh).transpose(1, 2)
    scores = split(q) @ split(k).transpose(-1, -2) / math.sqrt(dh)
    scores = scores.masked_fill(~keep[:, None], float("-inf"))
    out = torch.softmax(scores, dim=-1) @ split(v)
    return out.transpose(1, 2).reshape(b, sq, d)


def padding_keep(mask_q, mask_k):
    return mask_k[:, None, :].expand(mask_k.shape[0], mask_q.shape[1], mask_k.shape[1])


def causal_keep(mask):
    s = mask.shape[1]
    return padding_keep(mask, mask) & torch.tril(torch.ones(s, s, dtype=torch.bool))


def gpt2(c, w, ids, mask):
    x = w["wte.weight"][ids] + w["wpe.weight"][: ids.shape[1]]
    keep = causal_keep(mask)
    d = c["d"]
    for i in range(c["layers"]):
        p = f"h.{i}."
        h = layer_norm(x, w, p + "ln_1", c["eps"])
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        a = attend(qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:], c["heads"], keep)
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = layer_norm(x, w, p + "ln_2", c["eps"])
        h = activation(c["act"], h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layer_norm(x, w, "ln_f", c["eps"])
    return x @ w["wte.weight"].T


def linear(x, w, name):
    return torch.nn.functional.linear(x, w[name + ".weight"], w[name + ".bias"])


def bert(c, w, ids, mask):
    e = "bert.embeddings."
    x = (w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][: ids.shape[1]]
         + w[e + "token_type_embeddings.weight"][torch.zeros_like(ids)])
    x = layer_norm(x, w, e + "LayerNorm", c["eps"])
    keep = padding_keep(mask, mask)
    for i in range(c["layers"]):
        p = f"bert.encoder.layer.{i}."
        s = p + "attention.self."
        a = attend(linear(x, w, s + "query"), linear(x, w, s + "key"), linear(x, w, s + "value"),
                   c["heads"], keep)
        x = layer_norm(linear(a, w, p + "attention.output.dense") + x, w,
                       p + "attention.output.LayerNorm", c["eps"])
        h = activation(c["act"], linear(x, w, p + "intermediate.dense"))
        x = layer_norm(linear(h, w, p + "output.dense") + x, w, p + "output.LayerNorm", c["eps"])
    t = "cls.predictions."
    h = activation(c["act"], linear(x, w, t + "transform.dense"))
    h = layer_norm(h, w, t + "transform.LayerNorm", c["eps"])
    return h @ w[e + "word_embeddings.weight"].T + w[t + "bias"]


def sinusoidal(length, d):
    position = torch.arange(length, dtype=DTYPE)[:, None]
    div = torch.exp(torch.arange(0, d, 2, dtype=DTYPE) * (-math.log(10000.0) / d))
    pe = torch.zeros(length, d, dtype=DTYPE)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)
    return pe


def encoder(c, w, ids, mask):
    """PyTorch's nn.TransformerEncoder (batch_first) with the checkpoint loaded
    by its state_dict names, between the embedding and the token head."""
    layer = torch.nn.TransformerEncoderLayer(
        c["d"], c["heads"], c["ffn"], dropout=0.0, activation=lambda x: activation(c["act"], x),
        layer_norm_eps=c["eps"], batch_first=True, norm_first=c["norm_first"])
    norm = torch.nn.LayerNorm(c["d"], eps=c["eps"]) if c["norm_first"] else None
    stack = torch.nn.TransformerEncoder(layer, c["layers"], norm=norm, enable_nested_tensor=False)
    stack.load_state_dict({k[len("encoder."):]: v for k, v in w.items() if k.startswith("encoder.")})
    stack = stack.to(DTYPE).train()  # train(): the reference math path, not the fused fast path
    scale = math.sqrt(c["d"]) if c["scale_embedding"] else 1.0
    x = w["embedding.weight"][ids] * scale
    length = ids.shape[1]
    x = x + (w["position_embedding.weight"][:length] if c["learned"] else sinusoidal(length, c["d"]))
    with torch.no_grad():
        h = stack(x, src_key_padding_mask=~mask)
    return h @ w["head.weight"].T + w["head.bias"]


def transformer(c, w, src, src_mask, tgt, tgt_mask):
    d = c["d"]
    scale = math.sqrt(d) if c["scale_embedding"] else 1.0
    shared = w["model.shared.weight"]

    def embed(ids):
        return shared[ids] * scale + sinusoidal(ids.shape[1], d)

    def mha(x, memory, p, heads, keep):
        return linear(attend(linear(x, w, p + "q_proj"), linear(memory, w, p + "k_proj"),
                             linear(memory, w, p + "v_proj"), heads, keep), w, p + "out_proj")

    def residual(x, norm, sublayer):
        if c["pre_ln"]:
            return x + sublayer(layer_norm(x, w, norm, c["eps"]))
        return layer_norm(x + sublayer(x), w, norm, c["eps"])

    def ffn(x, p):
        return linear(activation(c["act"], linear(x, w, p + "fc1")), w, p + "fc2")

    memory = embed(src)
    for i in range(c["enc_layers"]):
        p = f"model.encoder.layers.{i}."
        memory = residual(memory, p + "self_attn_layer_norm",
                          lambda x: mha(x, x, p + "self_attn.", c["enc_heads"],
                                        padding_keep(src_mask, src_mask)))
        memory = residual(memory, p + "final_layer_norm", lambda x: ffn(x, p))
    if c["pre_ln"]:
        memory = layer_norm(memory, w, "model.encoder.layer_norm", c["eps"])
    y = embed(tgt)
    for i in range(c["dec_layers"]):
        p = f"model.decoder.layers.{i}."
        y = residual(y, p + "self_attn_layer_norm",
                     lambda x: mha(x, x, p + "self_attn.", c["dec_heads"], causal_keep(tgt_mask)))
        y = residual(y, p + "encoder_attn_layer_norm",
                     lambda x: mha(x, memory, p + "encoder_attn.", c["dec_heads"],
                                   padding_keep(tgt_mask, src_mask)))
        y = residual(y, p + "final_layer_norm", lambda x: ffn(x, p))
    if c["pre_ln"]:
        y = layer_norm(y, w, "model.decoder.layer_norm", c["eps"])
    head = shared if c["tied"] else w["lm_head.weight"]
    return y @ head.T + w["final_logits_bias"][0]


# --------------------------------------------------------------------------
# Token files: one sequence per line; encoder-decoder lines 'src | tgt'

def read_tokens(path):
    sequences = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            sequences.append([[int(t) for t in part.split()] for part in line.split("|")])
    return sequences


def pad(rows, length):
    ids = torch.zeros(len(rows), length, dtype=torch.long)
    mask = torch.zeros(len(rows), length, dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = True
    return ids, mask


def reference_logits(c, w, sequences):
    """[N, S_out, V] float64 and the valid length of each output row."""
    if c["kind"] == "transformer":
        src, src_mask = pad([s[0] for s in sequences], max(len(s[0]) for s in sequences))
        tgt, tgt_mask = pad([s[1] for s in sequences], max(len(s[1]) for s in sequences))
        return transformer(c, w, src, src_mask, tgt, tgt_mask), [len(s[1]) for s in sequences]
    ids, mask = pad([s[0] for s in sequences], max(len(s[0]) for s in sequences))
    model = {"gpt2": gpt2, "bert": bert, "encoder": encoder}[c["kind"]]
    return model(c, w, ids, mask), [len(s[0]) for s in sequences]


# --------------------------------------------------------------------------

def generate(args):
    with open(args.config) as f:
        c = describe(json.load(f))
    generator = torch.Generator().manual_seed(args.seed)
    safetensors_io.write(args.weights, {k: v.numpy() for k, v in random_weights(c, generator).items()})
    seq_len = args.seq_len or c["positions"]
    dec_len = args.decoder_seq_len or seq_len
    lines = []
    for n in range(args.sequences):
        def sample(limit):
            # The first sequence is full length; the others are padded.
            length = limit if n == 0 else int(torch.randint(1, limit + 1, (1,), generator=generator))
            return " ".join(str(int(t)) for t in torch.randint(0, c["vocab"], (length,),
                                                                generator=generator))
        line = sample(seq_len)
        if c["kind"] == "transformer":
            line += " | " + sample(dec_len)
        lines.append(line)
    with open(args.tokens, "w") as f:
        f.write("\n".join(lines) + "\n")


def check(args):
    with open(args.config) as f:
        c = describe(json.load(f))
    weights = read_weights(args.weights)
    sequences = read_tokens(args.tokens)
    expected, lengths = reference_logits(c, weights, sequences)
    actual = np.load(args.output)
    if actual.shape[0] != len(sequences) or actual.shape[2] != expected.shape[2]:
        print(f"FAIL: output shape {actual.shape}, expected [{len(sequences)}, *, "
              f"{expected.shape[2]}]")
        return 1
    worst, scale = 0.0, 0.0
    for n, length in enumerate(lengths):
        want = expected[n, :length].numpy()
        got = actual[n, :length]
        if not np.all(np.isfinite(got)):
            print(f"FAIL: sequence {n} has non-finite logits")
            return 1
        worst = max(worst, float(np.max(np.abs(got - want))))
        scale = max(scale, float(np.max(np.abs(want))))
        if np.any(actual[n, length:] != 0):
            print(f"FAIL: sequence {n}: padding positions are not zero")
            return 1
    ratio = worst / scale
    status = "PASS" if ratio <= args.rel_tol else "FAIL"
    print(f"{status}: {c['kind']} {len(sequences)} sequences, max|xfmr-torch| = {worst:.3e}, "
          f"max|torch| = {scale:.3e}, ratio = {ratio:.3e} (tolerance {args.rel_tol:g})")
    return 0 if status == "PASS" else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--config", required=True)
    g.add_argument("--weights", required=True)
    g.add_argument("--tokens", required=True)
    g.add_argument("--sequences", type=int, default=3)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--seq-len", type=int, default=0)
    g.add_argument("--decoder-seq-len", type=int, default=0)
    k = sub.add_parser("check")
    k.add_argument("--config", required=True)
    k.add_argument("--weights", required=True)
    k.add_argument("--tokens", required=True)
    k.add_argument("--output", required=True)
    k.add_argument("--rel-tol", type=float, default=1e-4)
    args = parser.parse_args()
    return generate(args) if args.command == "generate" else check(args)


if __name__ == "__main__":
    sys.exit(main())
