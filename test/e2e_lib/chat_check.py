#!/usr/bin/env python3
"""Chat generation (xfmrc --generate on a chat checkpoint) against transformers'
apply_chat_template() and generate(): a random Llama checkpoint with a
Llama-3-style tokenizer (regular-expression split, byte-level BPE, header and
end-of-turn tokens) and chat template.

  chat_check.py --xfmrc PATH --workdir DIR

- `-p` with `--system` goes through the checkpoint's template (which trims
  messages): the greedy reply is generate()'s on apply_chat_template's ids;
- `--no-chat-template` passes `-p` as it is, with the tokenizer's BOS;
- `--chat` with `--chat-template` (ChatML, which keeps messages as they
  are) and a repetition penalty: two turns on standard input. The first prefills its rendering, the
  second only the tokens of the text the rendering adds after the first
  turn's prompt and reply (the KV cache keeps the rest), and its reply is
  generate()'s on the first prompt, the first reply and those tokens, the
  penalty over all of them.
Prints one PASS/FAIL line per check.
"""
import argparse
import json
import os
import re
import subprocess
import sys

import torch
import transformers as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generation_check import decoder_kwargs  # noqa: E402
from tokenizer_json_check import LLAMA3_PATTERN, trained_byte_level  # noqa: E402

tf.logging.set_verbosity_error()
torch.set_num_threads(2)

SPECIAL = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
           "<|im_start|>", "<|im_end|>"]
LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] | trim %}"
    "{%- set messages = messages[1:] %}"
    "{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{%- if system_message %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' + system_message + '<|eot_id|>' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}")
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
NEW = 8


def run(command, **kwargs):
    return subprocess.run(command, check=True, capture_output=True, **kwargs)


def checkpoint(directory):
    tokenizer = trained_byte_level(LLAMA3_PATTERN, True, SPECIAL)
    from tokenizers import processors
    bos = tokenizer.token_to_id("<|begin_of_text|>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
    eot, im_end = tokenizer.token_to_id("<|eot_id|>"), tokenizer.token_to_id("<|im_end|>")
    torch.manual_seed(3)
    config = tf.LlamaConfig(**decoder_kwargs(tokenizer.get_vocab_size(), eot, bos_token_id=bos))
    model = tf.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_((1 + 0.2 * torch.randn_like(p)) if "norm" in name else 0.3 * torch.randn_like(p))
    model.generation_config.eos_token_id = [eot, im_end]
    model.save_pretrained(directory)
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
                   "eos_token": "<|eot_id|>", "chat_template": LLAMA3_TEMPLATE}, f)
    return model, tf.PreTrainedTokenizerFast.from_pretrained(directory)


def reply(model, ids, **kwargs):
    """generate()'s greedy reply to `ids`, without the end token it stops at."""
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=NEW, do_sample=False,
                             pad_token_id=model.config.eos_token_id,
                             **kwargs)[0, len(ids):].tolist()
    if out and out[-1] in model.generation_config.eos_token_id:
        out = out[:-1]
    return out


def prompt_counts(stderr):
    return [int(n) for n in re.findall(r"^prompt: (\d+) tokens", stderr, re.M)]


def report(name, ok, detail):
    print(f"{'PASS' if ok else 'FAIL'}: {name}: {detail}", flush=True)
    return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xfmrc", default="xfmrc")
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    directory = os.path.join(args.workdir, "checkpoint")
    model, tokenizer = checkpoint(directory)
    model = model.double()
    generator = os.path.join(args.workdir, "chat")
    run([args.xfmrc, directory, "--generate", "--seq-len=8", "-o", generator])
    common = [generator, "--temp", "0", "-n", str(NEW)]
    ok = True

    # -p through the checkpoint's template.
    system, user = "  Answer in one word.  ", "What is the capital of France? "
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                        return_dict=False)
    want = tokenizer.decode(reply(model, ids), skip_special_tokens=False)
    result = run(common + ["--system", system, "-p", user])
    got = result.stdout.decode()
    ok &= report("chat template prompt", got == want + "\n" and
                 prompt_counts(result.stderr.decode()) == [len(ids)],
                 f"{len(ids)} prompt tokens from apply_chat_template, reply {got!r} "
                 f"(generate(): {want!r})")

    # -p as it is.
    ids = tokenizer(user).input_ids
    want = tokenizer.decode(ids + reply(model, ids), skip_special_tokens=False)
    got = run(common + ["--no-chat-template", "-p", user]).stdout.decode()
    ok &= report("--no-chat-template", got == want + "\n",
                 f"text {got!r} (generate(): {want!r})")

    # Two turns of --chat with ChatML.
    chatml = os.path.join(args.workdir, "chatml.jinja")
    with open(chatml, "w") as f:
        f.write(CHATML_TEMPLATE)
    turns = ["Hello there! How are you?", "Tell me about São Paulo 🌎."]
    # The repetition penalty looks back over the whole conversation, as
    # generate()'s over its input.
    penalty = 1.5
    result = run(common + ["--chat", "--chat-template", chatml, "--repeat-penalty", str(penalty),
                           "--repeat-last-n", "0"], input="\n".join(turns).encode() + b"\n")
    conversation = [{"role": "user", "content": turns[0]}]
    first = tokenizer.apply_chat_template(conversation, add_generation_prompt=True,
                                          tokenize=False, chat_template=CHATML_TEMPLATE)
    first_ids = tokenizer.encode(first, add_special_tokens=False)
    first_reply = reply(model, first_ids, repetition_penalty=penalty)
    first_text = tokenizer.decode(first_reply, skip_special_tokens=False)
    conversation += [{"role": "assistant", "content": first_text},
                     {"role": "user", "content": turns[1]}]
    second = tokenizer.apply_chat_template(conversation, add_generation_prompt=True,
                                           tokenize=False, chat_template=CHATML_TEMPLATE)
    cached = first + first_text
    added = tokenizer.encode(second[len(cached):], add_special_tokens=False)
    second_reply = reply(model, first_ids + first_reply + added, repetition_penalty=penalty)
    want = first_text + "\n" + tokenizer.decode(second_reply, skip_special_tokens=False) + "\n"
    got = result.stdout.decode()
    counts = prompt_counts(result.stderr.decode())
    ok &= report("--chat", second.startswith(cached) and got == want and
                 counts == [len(first_ids), len(added)],
                 f"turn 1 prefilled {counts[0] if counts else '?'} tokens ({len(first_ids)}), "
                 f"turn 2 {counts[1] if len(counts) > 1 else '?'} ({len(added)} new of "
                 f"{len(tokenizer.encode(second, add_special_tokens=False))}); replies as "
                 f"generate(): {got == want}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
