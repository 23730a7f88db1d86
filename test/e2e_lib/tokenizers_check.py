#!/usr/bin/env python3
"""xfmr's tokenizers against Hugging Face `tokenizers`: trains a tokenizer
on a small multilingual text, saves it as a checkpoint would, runs the
runtime's encoder and decoder on test lines (through tokenize.c, the C API)
and compares ids and decoded bytes with `tokenizers`' own.

  tokenizers_check.py KIND WORKDIR TOKENIZE_PROGRAM

KIND: bpe (byte-level BPE: tokenizer.json, and vocab.json + merges.txt).
Prints one PASS/FAIL line per file layout.
"""
import os
import subprocess
import sys

from tokenizers import ByteLevelBPETokenizer

CORPUS = """The quick brown fox jumps over the lazy dog; it's what they'd say, isn't it?
Lorem ipsum dolor sit amet, consectetur adipiscing elit — 1234567890 and 3.14159.
Voilà: naïve café, résumé, Ærøskøbing, São Paulo, Straße, İstanbul, ñandú.
Съешь же ещё этих мягких французских булок, да выпей чаю.
Γαζέες καὶ μυρτιὲς δὲν θὰ βρῶ πιὰ στὸ χρυσαφὶ ξέφωτο.
いろはにほへと ちりぬるを 我輩は猫である。名前はまだ無い。
한국어 텍스트도 여기에 있습니다. שלום עולם. مرحبا بالعالم. नमस्ते दुनिया।
Emoji: 😀😃😄 🚀🌍 👩‍👩‍👧‍👦 🇫🇷 ✨ — and tabs\tand   runs of    spaces.
  leading spaces, trailing spaces   \n\n\nnewlines and\r\nwindows line ends
"""

TESTS = [
    "Hello, world! It's 2026 and the fox's jumps are 10x higher.",
    "naïve café résumé — Ærøskøbing; São Paulo; Straße; İstanbul",
    "Съешь ещё этих мягких булок: 我輩は猫である 😀🚀 👩‍👩‍👧‍👦 🇫🇷",
    "   runs    of\tspaces\t\t and trailing   ",
    "unseen words: xylophone quizzical zephyr 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ÅÉÎÕÜ",
    "special <|endoftext|> token<|endoftext|>glued",
    "don't can't won't we've they're I'm you'll he'd 'S 'T",
    "numbers 12345 1,234.56 ٣٤٥ ⅻ ½",
    "",
]


def bpe(workdir):
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(CORPUS.splitlines() * 3, vocab_size=420, min_frequency=1,
                                  special_tokens=["<|endoftext|>"])
    fast = os.path.join(workdir, "fast")
    slow = os.path.join(workdir, "slow")
    os.makedirs(fast, exist_ok=True)
    os.makedirs(slow, exist_ok=True)
    tokenizer.save(os.path.join(fast, "tokenizer.json"))
    tokenizer.save_model(slow)
    # The slow tokenizer's special tokens, as transformers' GPT2Tokenizer
    # writes them.
    eos = tokenizer.token_to_id("<|endoftext|>")
    with open(os.path.join(slow, "tokenizer_config.json"), "w") as f:
        f.write('{"added_tokens_decoder": {"%d": {"content": "<|endoftext|>", "special": true}}}'
                % eos)
    return tokenizer, {"tokenizer.json": fast, "vocab.json + merges.txt": slow}


def main():
    kind, workdir, program = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(workdir, exist_ok=True)
    tokenizer, layouts = {"bpe": bpe}[kind](workdir)
    text_file = os.path.join(workdir, "tests.txt")
    with open(text_file, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(TESTS) + "\n")
    failed = False
    for layout, directory in layouts.items():
        run = subprocess.run([program, directory, text_file], capture_output=True, check=True)
        lines = run.stdout.decode().splitlines()
        problems = []
        for i, text in enumerate(TESTS):
            ids = [int(x) for x in lines[2 * i].split()[1:]]
            decoded = bytes.fromhex(lines[2 * i + 1][len("text: "):])
            want = tokenizer.encode(text).ids
            if ids != want:
                problems.append(f"line {i + 1}: ids {ids} != {want}")
            if decoded != tokenizer.decode(want, skip_special_tokens=False).encode():
                problems.append(f"line {i + 1}: decoded {decoded!r}")
        failed |= bool(problems)
        print(f"{'FAIL' if problems else 'PASS'}: {kind} {layout}: {len(TESTS)} lines"
              + "".join("\n  " + p for p in problems))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
