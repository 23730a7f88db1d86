#!/usr/bin/env python3
"""The generator's OpenAI-compatible server (--serve) through the official
`openai` client, against transformers: a random Llama checkpoint with a
Llama-3-style tokenizer and chat template (chat_check.py's), compiled with a
batch of 4 slots (8 for --load, whose steps of a few slots then take the
one-sequence and 4-row decode entries) and prefill chunks of 8 tokens.

  serve_check.py --xfmrc PATH --workdir DIR [--load | --embeddings]

- greedy /v1/completions and /v1/chat/completions, whole and streamed, give
  generate()'s text on the tokenizer's (or apply_chat_template's) ids, with
  generate()'s finish and usage counts;
- logprobs (and top logprobs) within 1e-4 of transformers' float64
  log-softmax at each step;
- a seed gives the same text again, n choices are seeds seed, seed + 1, ...;
- stop texts cut the text where they first appear, streamed or not;
- 16 mixed requests at once (long prompts read in chunks beside running
  streams) each give what they give alone;
- malformed requests are 400s with an error object, and the server keeps
  serving; --api-key turns away a client without the key; a stream closed
  midway frees its slot; SIGTERM stops the server with exit 0.
--load: 64 concurrent clients send 512 requests (mixed prompts and lengths,
some streamed, some cancelled midway, some malformed): every valid response
equals the same request alone, every malformed one is a 400, no slot is busy
afterwards; prints p50/p99 time to first token and the throughput.
--embeddings: a sentence-transformers checkpoint's /v1/embeddings (texts,
base64 and float, and token ids) against its own encode(), within 1e-4.
Prints one PASS/FAIL line per check.
"""
import argparse
import atexit
import concurrent.futures as futures
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_check import checkpoint, report  # noqa: E402
from hf_models import sentence_checkpoint  # noqa: E402

import openai  # noqa: E402

torch.set_num_threads(2)

PROMPTS = ["The quick brown fox", "it's",
           "Voilà: naïve café, résumé, Ærøskøbing, São Paulo — and then a much longer prompt "
           "that takes several prefill chunks of eight tokens to read"]


class Server:
    def __init__(self, generator, *flags):
        self.process = subprocess.Popen([generator, "--serve", "--port", "0", *flags],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
        atexit.register(self.process.kill)
        for line in self.process.stderr:
            match = re.search(r"on http://([\d.]+):(\d+)", line)
            if match:
                self.url = f"http://{match.group(1)}:{match.group(2)}"
                break
        else:
            raise RuntimeError("the server did not start")
        threading.Thread(target=self.process.stderr.read, daemon=True).start()

    def client(self, key="none"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=120)

    def post(self, path, body):
        """(status, parsed body) of a raw POST of `body` (bytes)."""
        request = urllib.request.Request(self.url + path, data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def metric(self, name):
        """A metric's value; a counter not yet shown is 0."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as response:
            text = response.read().decode()
        match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        return float(match.group(1)) if match else 0.0

    def idle(self):
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.metric("xfmr_slots_busy") == 0 and self.metric("xfmr_queue_length") == 0:
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)


def greedy(model, ids, new, eos):
    """generate()'s greedy tokens after `ids` (without the end token) and its
    finish reason."""
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=new, do_sample=False,
                             pad_token_id=eos[0])[0, len(ids):].tolist()
    if out and out[-1] in eos:
        return out[:-1], "stop"
    return out, "length"


def complete(client, stream=False, chat=False, **kwargs):
    """(text, finish_reason, usage) of a completion or chat, streamed or whole."""
    create = client.chat.completions.create if chat else client.completions.create
    text_of = (lambda c: c.message.content) if chat else (lambda c: c.text)
    delta_of = (lambda c: c.delta.content or "") if chat else (lambda c: c.text)
    if not stream:
        r = create(model="m", **kwargs)
        return text_of(r.choices[0]), r.choices[0].finish_reason, r.usage
    text, finish, usage = "", None, None
    for chunk in create(model="m", stream=True, stream_options={"include_usage": True},
                        **kwargs):
        if chunk.choices:
            text += delta_of(chunk.choices[0])
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    return text, finish, usage


def check_greedy(server, model, tokenizer, eos):
    client = server.client()
    ok = True
    for stream in (False, True):
        for prompt in PROMPTS:
            ids = tokenizer(prompt).input_ids
            want, finish = greedy(model, ids, 12, eos)
            text, got_finish, usage = complete(client, stream, prompt=prompt, max_tokens=12,
                                               temperature=0)
            good = (text == tokenizer.decode(want) and got_finish == finish and
                    usage.prompt_tokens == len(ids) and usage.completion_tokens == len(want))
            if not good:
                print(f"  completion of {prompt!r} (stream={stream}): {text!r} {got_finish} "
                      f"{usage}, want {tokenizer.decode(want)!r} {finish} {len(ids)}+{len(want)}")
            ok &= good
    ok &= report("completions", ok, f"{len(PROMPTS)} prompts, whole and streamed, text, finish "
                 "and usage as generate()")

    ok_chat = True
    messages = [{"role": "system", "content": "  Answer in one word.  "},
                {"role": "user", "content": "What is the capital of France? "}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                        return_dict=False)
    want, finish = greedy(model, ids, 10, eos)
    for stream in (False, True):
        text, got_finish, usage = complete(client, stream, chat=True, messages=messages,
                                           max_tokens=10, temperature=0)
        good = (text == tokenizer.decode(want) and got_finish == finish and
                usage.prompt_tokens == len(ids) and usage.completion_tokens == len(want))
        if not good:
            print(f"  chat (stream={stream}): {text!r} {got_finish} {usage}, "
                  f"want {tokenizer.decode(want)!r} {finish}")
        ok_chat &= good
    return report("chat", ok_chat, "whole and streamed, apply_chat_template + generate()'s "
                  "reply") and ok


def check_logprobs(server, model, tokenizer):
    client = server.client()
    prompt = PROMPTS[0]
    r = client.completions.create(model="m", prompt=prompt, max_tokens=6, temperature=0,
                                  logprobs=3)
    lp = r.choices[0].logprobs
    ids = tokenizer(prompt).input_ids
    generated, _ = greedy(model, ids, 6, model.generation_config.eos_token_id)
    with torch.no_grad():
        logits = model(torch.tensor([ids + generated])).logits[0].double()
    ref = torch.log_softmax(logits, -1)
    worst = 0.0
    for k, token in enumerate(generated[:len(lp.token_logprobs)]):
        row = ref[len(ids) - 1 + k]
        worst = max(worst, abs(lp.token_logprobs[k] - row[token].item()))
        # Keyed by text, tokens of the same text (incomplete characters) are
        # one entry: each is one of the 3 likeliest.
        top = row.topk(3).values.tolist()
        for got in lp.top_logprobs[k].values():
            worst = max(worst, min(abs(got - want) for want in top))
    return report("logprobs", worst <= 1e-4 and len(lp.token_logprobs) == len(generated),
                  f"6 steps and their top 3 within {worst:.1e} of transformers' (<= 1e-4)")


def check_seeds(server):
    client = server.client()
    args = dict(prompt=PROMPTS[1], max_tokens=16, temperature=1.0, top_p=0.9)
    a = client.completions.create(model="m", seed=5, **args).choices[0].text
    b = client.completions.create(model="m", seed=5, **args).choices[0].text
    c = client.completions.create(model="m", seed=6, **args).choices[0].text
    both = client.completions.create(model="m", seed=5, n=2, **args).choices
    ok = a == b and a != c and both[0].text == a and both[1].text == c
    return report("seed", ok, "seed 5 twice gives the same text, seed 6 another; n=2 from seed 5 "
                  "gives seeds 5 and 6")


def check_stops(server, model, tokenizer, eos):
    client = server.client()
    ids = tokenizer(PROMPTS[0]).input_ids
    full = tokenizer.decode(greedy(model, ids, 16, eos)[0])
    stop = full[len(full) // 2:len(full) // 2 + 2]
    want = full[:full.index(stop)]
    ok = True
    for stream in (False, True):
        text, finish, _ = complete(client, stream, prompt=PROMPTS[0], max_tokens=16,
                                   temperature=0, stop=["\x00never", stop])
        ok &= text == want and finish == "stop"
    return report("stop", ok, f"text cut before {stop!r}, whole and streamed")


def check_concurrent(server, tokenizer):
    """Requests at once each give what they give alone."""
    client = server.client()
    rng = random.Random(1)
    requests = []
    for i in range(16):
        kind = rng.choice(["greedy", "seeded"])
        requests.append(dict(prompt=rng.choice(PROMPTS), max_tokens=rng.randint(1, 20),
                             temperature=0 if kind == "greedy" else 0.9, seed=i,
                             stream=rng.random() < 0.5))
    alone = [complete(client, **r)[:2] for r in requests]
    with futures.ThreadPoolExecutor(16) as pool:
        together = list(pool.map(lambda r: complete(client, **r)[:2], requests))
    same = sum(a == b for a, b in zip(alone, together))
    return report("concurrent", same == len(requests),
                  f"{same} of {len(requests)} requests at once as alone")


def check_errors(server):
    bad = {
        "not JSON": b"{bad",
        "invalid UTF-8": b'{"prompt": "\xff\xfe"}',
        "a wrong type": b'{"prompt": "hi", "temperature": "hot"}',
        "out of range": b'{"prompt": "hi", "top_p": 0}',
        "no prompt": b'{"max_tokens": 3}',
        "n 0": b'{"prompt": "hi", "n": 0}',
        "a long prompt": json.dumps({"prompt": "word " * 400}).encode(),
        "max_tokens past the context": b'{"prompt": "hi", "max_tokens": 100000}',
        "not an object": b"[1, 2]",
        "deeply nested": b'{"prompt": "hi", "x": ' + b"[" * 100000 + b"]" * 100000 + b"}",
    }
    ok, wrong = True, []
    for name, body in bad.items():
        status, error = server.post("/v1/completions", body)
        good = status == 400 and isinstance(error, dict) and "message" in error.get("error", {})
        if not good:
            wrong.append(f"{name}: {status} {error}")
        ok &= good
    status, error = server.post("/v1/chat/completions", b'{"messages": "hi"}')
    ok &= status == 400
    status, _ = server.post("/v1/nothing", b"{}")
    ok &= status == 404
    text, _, _ = complete(server.client(), prompt="hi", max_tokens=2, temperature=0)
    ok &= isinstance(text, str)
    return report("errors", ok, f"{len(bad) + 1} malformed requests are 400s with an error "
                  "object, an unknown route 404, then the server serves"
                  + "".join("; " + w for w in wrong))


def check_cancel(server):
    client = server.client()
    stream = client.completions.create(model="m", prompt=PROMPTS[0], max_tokens=100,
                                       temperature=0.9, stream=True,
                                       extra_body={"ignore_eos": True})
    for k, _ in enumerate(stream):
        if k == 2:
            break
    stream.close()
    return report("cancel", server.idle(), "a stream closed after 2 chunks frees its slot")


def check_disconnect(server):
    """A client that leaves before its whole (not streamed) response."""
    closed = 'xfmr_requests_total{path="/v1/completions",status="499"}'
    before = server.metric(closed), server.metric("xfmr_generated_tokens_total")
    body = json.dumps({"model": "m", "prompt": PROMPTS[0], "max_tokens": 100,
                       "ignore_eos": True}).encode()
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as connection:
        # Corked: the request leaves with the close, so the server reads both
        # at once.
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        connection.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: %s\r\n"
                           b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                           % (host.encode(), len(body)) + body)
    idle = server.idle()
    generated = server.metric("xfmr_generated_tokens_total") - before[1]
    ok = idle and server.metric(closed) == before[0] + 1 and generated < 100
    return report("disconnect", ok, f"a client gone before its whole response: a 499 after "
                  f"{generated:.0f} of 100 tokens, no slot busy")


def check_api_key(generator):
    server = Server(generator, "--api-key", "s3cret")
    try:
        server.client("wrong").completions.create(model="m", prompt="hi", max_tokens=1)
        refused = False
    except openai.AuthenticationError:
        refused = True
    text = server.client("s3cret").completions.create(model="m", prompt="hi",
                                                      max_tokens=1).choices[0].text
    code = server.stop()
    return report("api key", refused and isinstance(text, str) and code == 0,
                  "a wrong key is a 401, the right one served; SIGTERM exits 0")


def load_test(server):
    """64 concurrent clients, 512 requests."""
    client = server.client()
    rng = random.Random(7)
    specs = []
    for i in range(24):
        specs.append(dict(prompt=rng.choice(PROMPTS) + " " * rng.randint(0, 3),
                          max_tokens=rng.randint(1, 24), temperature=rng.choice([0, 0.8]),
                          seed=i))
    alone = [complete(client, **s)[:2] for s in specs]
    jobs = []
    for i in range(512):
        r = rng.random()
        kind = "malformed" if r < 0.08 else "cancel" if r < 0.16 else "stream" if r < 0.58 \
            else "whole"
        jobs.append((kind, rng.randrange(len(specs))))
    first_token, results = [], []
    lock = threading.Lock()

    def one(job):
        kind, index = job
        spec = specs[index]
        start = time.time()
        if kind == "malformed":
            status, _ = server.post("/v1/completions", b'{"prompt": 5}')
            return kind, index, status == 400
        if kind == "whole":
            got = complete(client, **spec)[:2]
            with lock:
                first_token.append(time.time() - start)
            return kind, index, got == alone[index]
        text, finish, seen = "", None, False
        stream = client.completions.create(model="m", stream=True, **spec)
        for k, chunk in enumerate(stream):
            if not seen:
                seen = True
                with lock:
                    first_token.append(time.time() - start)
            if kind == "cancel" and k == 1:
                stream.close()
                return kind, index, True
            if chunk.choices:
                text += chunk.choices[0].text
                finish = chunk.choices[0].finish_reason or finish
        return kind, index, (text, finish) == alone[index]

    start = time.time()
    with futures.ThreadPoolExecutor(64) as pool:
        results = list(pool.map(one, jobs))
    wall = time.time() - start
    tokens = server.metric("xfmr_generated_tokens_total")
    failed = [r for r in results if not r[2]]
    first_token.sort()
    p50 = first_token[len(first_token) // 2]
    p99 = first_token[int(len(first_token) * 0.99)]
    idle = server.idle()
    print(f"load: 512 requests from 64 clients in {wall:.2f} s; time to first token p50 "
          f"{p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms; {tokens:.0f} tokens generated in "
          "the whole run")
    return report("load", not failed and idle,
                  f"{512 - len(failed)} of 512 responses right (equal to alone, malformed 400), "
                  f"{'no slot busy' if idle else 'slots still busy'} afterwards")


def check_embeddings(args):
    """/v1/embeddings of a sentence-transformers checkpoint against its own
    encode()."""
    import numpy as np
    from sentence_transformers import SentenceTransformer
    checkpoint = sentence_checkpoint(os.path.join(args.workdir, "embeddings"), "mean", True, 4)
    model = SentenceTransformer(checkpoint, device="cpu").double().eval()
    encoder = os.path.join(args.workdir, "encoder")
    subprocess.run([args.xfmrc, checkpoint, "--batch=2", "--seq-len=16", "-o", encoder],
                   check=True)
    server = Server(encoder)
    client = server.client()
    rng = random.Random(3)
    texts = [" ".join(f"w{rng.randrange(90)}" for _ in range(rng.randint(1, 14)))
             for _ in range(5)]
    want = model.encode(texts, convert_to_numpy=True)
    worst, ok = 0.0, True
    # The client asks for base64 unless told the format, and decodes it.
    for extra in ({}, {"encoding_format": "float"}):
        r = client.embeddings.create(model="m", input=texts, **extra)
        got = np.array([d.embedding for d in r.data])
        worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max()))
        ok &= [d.index for d in r.data] == list(range(len(texts)))
        ok &= r.usage.prompt_tokens == sum(len(model.tokenizer(t).input_ids) for t in texts)
    ids = model.tokenizer(texts[0]).input_ids
    by_ids = client.embeddings.create(model="m", input=ids, encoding_format="float")
    ok &= float(np.abs(np.array(by_ids.data[0].embedding) - want[0]).max()) <= 1e-4
    ok = report("embeddings", ok and worst <= 1e-4,
                f"{len(texts)} texts (base64 and float) and token ids within {worst:.1e} of "
                "sentence-transformers' encode() (<= 1e-4 relative), usage counted")
    status, _ = server.post("/v1/embeddings", json.dumps({"input": "w1 " * 20}).encode())
    status2, _ = server.post("/v1/embeddings", b'{"input": [[]]}')
    status3, _ = server.post("/v1/completions", b'{"prompt": "w1"}')
    ok &= report("embedding errors", (status, status2, status3) == (400, 400, 404),
                 f"too long {status}, empty {status2}, completions on an encoder {status3}")
    return report("embeddings shutdown", server.stop() == 0, "SIGTERM exits 0") and ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xfmrc", default="xfmrc")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--load", action="store_true")
    parser.add_argument("--embeddings", action="store_true")
    args = parser.parse_args()
    if args.embeddings:
        sys.exit(0 if check_embeddings(args) else 1)
    directory = os.path.join(args.workdir, "checkpoint")
    model, tokenizer = checkpoint(directory)
    model = model.double()
    eos = model.generation_config.eos_token_id
    generator = os.path.join(args.workdir, "generator")
    batch = 8 if args.load else 4
    subprocess.run([args.xfmrc, directory, "--generate", "--seq-len=8", f"--batch={batch}", "-o",
                    generator], check=True)
    server = Server(generator)
    ok = True
    if args.load:
        ok &= load_test(server)
    else:
        ok &= check_greedy(server, model, tokenizer, eos)
        ok &= check_logprobs(server, model, tokenizer)
        ok &= check_seeds(server)
        ok &= check_stops(server, model, tokenizer, eos)
        ok &= check_concurrent(server, tokenizer)
        ok &= check_errors(server)
        ok &= check_cancel(server)
        ok &= check_disconnect(server)
        ok &= check_api_key(generator)
    code = server.stop()
    ok &= report("shutdown", code == 0, f"SIGTERM: exit {code}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
