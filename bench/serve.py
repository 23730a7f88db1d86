#!/usr/bin/env python3
"""Serving benchmark (not a test): xfmr's --serve against llama.cpp's
llama-server on the same GPT-2 small weights (random, transformers'
initialisation; f32 in both), 2 threads each, 16 slots each; xfmr with its KV
cache in f32 and in bf16 (llama-server keeps an f16 one). For 1, 4 and 16
concurrent clients, each sending requests one after another (a prompt of 64
token ids, 64 new tokens, greedy, streamed, the end token ignored), prints
the generated tokens per second and the p50/p99 time to first token, in the
same run.

  xfmr          xfmrc --generate --batch=16 --seq-len=32 [--cache-dtype=bf16],
                then --serve
  llama.cpp     llama-server -np 16 (continuous batching), built from the
                llama.cpp sources in the llama-cpp-python distribution
                (bench/setup-llama-server.sh), on the checkpoint written as
                GGUF (bench/generate.py's writer)

Runs under build/bench-venv (bench/setup-peers.sh). --model=llama-1b serves
bench/generate.py's Llama-3.2-1B-shaped checkpoint instead.

  serve.py [--model gpt2|llama-1b] [--cache f32|bf16|both] [--build DIR]
           [--requests N] [--threads T]
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import generate  # noqa: E402

PROMPT, NEW, SLOTS, CHUNK = 64, 64, 16, 32
CLIENTS = (1, 4, 16)
# xfmr's KV cache element types: (row, xfmrc flags); bf16 is as wide as
# llama-server's default f16 cache.
XFMR_CACHES = {"f32": ("xfmr", []), "bf16": ("xfmr, bf16 cache", ["--cache-dtype=bf16"])}


def synthetic_tokenizer(directory, vocab):
    """A byte-level tokenizer.json of `vocab` tokens, token i (from 256 on)
    spelling "<i>": the benchmark sends ids, the server decodes them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    # bytes_to_unicode as GPT-2 defines it.
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    assert set(chars.values()) == set(ByteLevel.alphabet())
    tokens = [chars[b] for b in range(256)]
    tokens += ["".join(chars[c] for c in f"<{i}>".encode()) for i in range(256, vocab)]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.save(os.path.join(directory, "tokenizer.json"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, process, seconds=300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            sys.exit(f"the server exited with {process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit("the server did not become ready")


def stream_request(port, prompt):
    """Time to first token and tokens of one streamed completion."""
    body = json.dumps({"prompt": prompt, "max_tokens": NEW, "temperature": 0,
                       "ignore_eos": True, "stream": True})
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        sys.exit(f"a request failed: {response.status} {response.read()[:200]}")
    first, tokens = None, 0
    for line in response:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("choices") and chunk["choices"][0].get("text"):
            tokens += 1
            if first is None:
                first = time.perf_counter() - start
    connection.close()
    return first, tokens


def load(port, clients, requests):
    """Generated tokens/s and times to first token of `clients` clients
    sending `requests` requests in all."""
    rng = np.random.default_rng(clients)
    prompts = [rng.integers(256, 50000, size=PROMPT).tolist() for _ in range(requests)]
    firsts, tokens, lock = [], [0], threading.Lock()
    next_request = iter(range(requests))

    def client():
        while True:
            with lock:
                index = next(next_request, None)
            if index is None:
                return
            first, count = stream_request(port, prompts[index])
            with lock:
                firsts.append(first)
                tokens[0] += count

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    firsts.sort()
    return (tokens[0] / wall, firsts[len(firsts) // 2] * 1000,
            firsts[min(len(firsts) - 1, int(len(firsts) * 0.99))] * 1000)


def run_server(command, port, args):
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, process)
        stream_request(port, list(range(300, 300 + PROMPT)))  # warm-up
        return {c: load(port, c, max(c, args.requests) if c > 1 else args.requests // 2)
                for c in CLIENTS}
    finally:
        process.terminate()
        process.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(generate.ROOT, "build"))
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", choices=sorted(generate.MODELS), default="gpt2")
    parser.add_argument("--cache", choices=("f32", "bf16", "both"), default="both",
                        help="xfmr's KV cache element type(s)")
    args = parser.parse_args()
    workdir = os.path.join(args.build, "bench-serve")
    os.makedirs(workdir, exist_ok=True)
    directory = generate.checkpoint(args, workdir)
    if not os.path.exists(os.path.join(directory, "tokenizer.json")):
        with open(os.path.join(directory, "config.json")) as f:
            synthetic_tokenizer(directory, json.load(f)["vocab_size"])
    context = PROMPT + NEW + 16

    results = {}
    for cache, (name, flags) in XFMR_CACHES.items():
        if args.cache not in ("both", cache):
            continue
        server = os.path.join(workdir, f"{args.model}-xfmr-serve-{cache}-cache")
        generate.run([os.path.join(args.build, "bin", "xfmrc"), directory, "--generate",
                      f"--batch={SLOTS}", f"--seq-len={CHUNK}", f"--max-context={context}",
                      *flags, "-o", server])
        port = free_port()
        results[name] = run_server([server, "--serve", "--port", str(port), "-t",
                                    str(args.threads), "--queue", "256"], port, args)

    llama_server = os.path.join(args.build, "llama-server", "cmake", "bin", "llama-server")
    if os.path.exists(llama_server):
        gguf = os.path.join(workdir, f"{args.model}-f32.gguf")
        if not os.path.exists(gguf):
            if args.model == "gpt2":
                generate.write_gguf(directory, gguf)
            else:
                generate.write_llama_gguf(directory, gguf, context=context)
        port = free_port()
        results["llama.cpp"] = run_server(
            [llama_server, "-m", gguf, "--host", "127.0.0.1", "--port", str(port), "-np",
             str(SLOTS), "-c", str(SLOTS * context), "-t", str(args.threads), "-tb",
             str(args.threads), "--no-webui"], port, args)
    else:
        print("llama.cpp: no build/llama-server (bench/setup-llama-server.sh); its rows are "
              "left out")

    print(f"\nServing {generate.MODELS[args.model][0]} (f32), prompts of {PROMPT} token ids, "
          f"{NEW} new tokens each, greedy, streamed; {SLOTS} slots, {args.threads} threads\n")
    print("| clients | server | tokens/s | TTFT p50 (ms) | TTFT p99 (ms) | tokens/s vs llama.cpp |")
    print("|---|---|---|---|---|---|")
    for c in CLIENTS:
        for name, result in results.items():
            speed, p50, p99 = result[c]
            ratio = (f"{speed / results['llama.cpp'][c][0]:.2f}x" if "llama.cpp" in results
                     else "")
            print(f"| {c} | {name} | {speed:.1f} | {p50:.0f} | {p99:.0f} | "
                  f"{ratio if name != 'llama.cpp' else ''} |")


if __name__ == "__main__":
    main()
