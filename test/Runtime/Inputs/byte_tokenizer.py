"""Writes DIR/tokenizer.json: a byte-level BPE with the 256 byte symbols, no
merges and <|endoftext|> as an added token (ids 0-256)."""
import json
import sys

table, nxt = [], 256
for b in range(256):
    printable = ord("!") <= b <= ord("~") or 0xA1 <= b <= 0xAC or b >= 0xAE
    table.append(chr(b) if printable else chr(nxt))
    nxt += 0 if printable else 1
vocab = {symbol: i for i, symbol in enumerate(table)}
vocab["<|endoftext|>"] = 256
json.dump({"version": "1.0", "added_tokens": [{"id": 256, "content": "<|endoftext|>",
                                                "special": True}],
           "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
           "model": {"type": "BPE", "vocab": vocab, "merges": []},
           "decoder": {"type": "ByteLevel"}}, open(sys.argv[1] + "/tokenizer.json", "w"))
