#!/usr/bin/env python3
"""Tokenizer benchmark (not a test): encoding throughput of a 1 MB
multilingual text, one thread, xfmr's runtime (through its C API) against
the `tokenizers` library (Rust) that transformers uses, for

  byte-level BPE   Llama 3's layout: its regular-expression Split, then
                   byte-level BPE (32k merges trained on the text)
  Unigram          T5's layout: SentencePiece's Precompiled normalizer,
                   Metaspace, Unigram (8k pieces, a SentencePiece model
                   trained on the text, converted by transformers)

xfmr encodes the whole text as one sequence; tokenizers both so (the ids
are checked to be equal) and line by line with encode_batch_fast (one
thread: RAYON_NUM_THREADS=1), and its faster way is the one compared.
Times are the best of --repeats.
Runs under build/bench-venv (bench/setup-peers.sh).

  tokenizer_speed.py [--build DIR] [--repeats N]
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "e2e_lib"))
from tokenizer_json_check import LLAMA3_PATTERN, TEXTS, convert_sentencepiece, train_unigram  # noqa: E402,E501
from tokenizers_check import CORPUS  # noqa: E402

SIZE = 1 << 20


def multilingual_text():
    """1 MB of the tests' sentences (Latin with accents, Cyrillic, Greek,
    Japanese, Korean, Hebrew, Arabic, Devanagari, emoji, digits, code-like
    and whitespace runs), shuffled into paragraphs with words reordered."""
    rng = random.Random(0)
    lines = [line for line in CORPUS.splitlines() + TEXTS if line.strip()]
    out, size = [], 0
    while size < SIZE:
        words = rng.choice(lines).split(" ")
        rng.shuffle(words)
        line = " ".join(words) + rng.choice(["\n", " ", "\n\n", ". "])
        out.append(line)
        size += len(line.encode())
    return "".join(out).encode()[:SIZE].decode(errors="ignore")


def byte_level_bpe(text):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tokenizer = Tokenizer(models.BPE(ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=32000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(text.splitlines(), trainer)
    return tokenizer


def unigram(text, workdir):
    path = os.path.join(workdir, "unigram.model")
    train_unigram(text.splitlines(), path, 8000, 0.9995)
    return convert_sentencepiece(path, ("T5Converter",))["T5Converter"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    workdir = tempfile.mkdtemp(prefix="xfmr-tokenize-bench-")
    program = os.path.join(workdir, "tokenize_bench")
    lib = os.path.join(args.build, "lib")
    subprocess.run(["cc", "-O2", "-I" + os.path.join(ROOT, "include"),
                    os.path.join(HERE, "tokenize_bench.c"),
                    os.path.join(lib, "libxfmr_sentencepiece.a"), "-lsentencepiece",
                    os.path.join(lib, "libxfmr_runtime.a"), "-lpcre2-8", "-lutf8proc",
                    "-lstdc++", "-lm", "-o", program], check=True)
    text = multilingual_text()
    text_path = os.path.join(workdir, "text.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write(text)
    megabytes = len(text.encode()) / 1e6
    print(f"| tokenizer (1 MB, 1 thread) | tokens | xfmr MB/s | tokenizers MB/s | xfmr / tokenizers |")
    print("|---|---|---|---|---|")
    for name, tokenizer in (("byte-level BPE (Llama 3 split)", byte_level_bpe(text)),
                            ("Unigram (T5, Precompiled)", unigram(text, workdir))):
        directory = os.path.join(workdir, name.split()[0])
        os.makedirs(directory, exist_ok=True)
        tokenizer.save(os.path.join(directory, "tokenizer.json"))
        from tokenizers import Tokenizer
        reference = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
        lines = text.splitlines(keepends=True)
        best = float("inf")
        for _ in range(args.repeats):
            for encode in (lambda: reference.encode(text),
                           lambda: reference.encode_batch_fast(lines)):
                start = time.perf_counter()
                encode()
                best = min(best, (time.perf_counter() - start) * 1e3)
        ids = reference.encode(text).ids
        ids_path = os.path.join(directory, "ids.txt")
        ms = float(subprocess.run([program, directory, text_path, str(args.repeats), ids_path],
                                  capture_output=True, text=True, check=True).stdout)
        with open(ids_path) as f:
            ours = [int(line) for line in f]
        if ours != ids:
            sys.exit(f"{name}: xfmr's ids differ from tokenizers' "
                     f"({len(ours)} against {len(ids)} tokens)")
        print(f"| {name} | {len(ids)} | {megabytes / ms * 1e3:.2f} | {megabytes / best * 1e3:.2f} "
              f"| {best / ms:.2f} |")


if __name__ == "__main__":
    main()
