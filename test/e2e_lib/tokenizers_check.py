#!/usr/bin/env python3
"""xfmr's tokenizers against Hugging Face's: trains a tokenizer on a small
multilingual text, saves it as a checkpoint would, runs the runtime's
encoder and decoder on test lines (through tokenize.c, the C API) and
compares ids and decoded bytes with the reference's encode() and
decode(skip_special_tokens=False).

  tokenizers_check.py KIND WORKDIR TOKENIZE_PROGRAM

KIND: bpe (byte-level BPE: tokenizer.json, also with BART's <s> ... </s>
post-processor, and vocab.json + merges.txt against `tokenizers`), wordpiece (BERT, uncased and cased: tokenizer.json
and vocab.txt against transformers' BertTokenizer), sentencepiece (a
unigram model trained by `sentencepiece`: Marian's source.spm + vocab.json
against transformers' MarianTokenizer, spiece.model against
`sentencepiece` itself). Prints one PASS/FAIL line per file layout.
"""
import io
import json
import os
import random
import shutil
import subprocess
import sys

from tokenizers import BertWordPieceTokenizer, ByteLevelBPETokenizer, Tokenizer
from tokenizers.processors import RobertaProcessing

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
    "masked [MASK] words, [SEP] and </s> glued<pad>; >>fr<< is a language code",
    ">>fr<< bonjour, le monde",
    "",
]


class TokenizersReference:
    """A `tokenizers` Tokenizer."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def encode(self, text):
        return self.tokenizer.encode(text).ids

    def decode(self, ids):
        return self.tokenizer.decode(ids, skip_special_tokens=False)


class TransformersReference:
    """A transformers tokenizer."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def encode(self, text):
        return self.tokenizer.encode(text)

    def decode(self, ids):
        return self.tokenizer.decode(ids, skip_special_tokens=False)


class SentencePieceReference:
    """`sentencepiece` itself: its ids, then </s>."""

    def __init__(self, processor):
        self.processor = processor

    def encode(self, text):
        return self.processor.encode(text) + [self.processor.eos_id()]

    def decode(self, ids):
        return self.processor.decode(ids)


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
    reference = TokenizersReference(tokenizer)
    # BART's and RoBERTa's: <s> ... </s> around the sequence.
    roberta = Tokenizer.from_str(tokenizer._tokenizer.to_str())
    roberta.add_special_tokens(["<s>", "</s>"])
    roberta.post_processor = RobertaProcessing(("</s>", roberta.token_to_id("</s>")),
                                               ("<s>", roberta.token_to_id("<s>")))
    bart = os.path.join(workdir, "bart")
    os.makedirs(bart, exist_ok=True)
    roberta.save(os.path.join(bart, "tokenizer.json"))
    return {"tokenizer.json": (fast, reference), "vocab.json + merges.txt": (slow, reference),
            "tokenizer.json with RobertaProcessing": (bart, TokenizersReference(roberta))}


def wordpiece(workdir):
    import transformers
    transformers.logging.set_verbosity_error()
    layouts = {}
    for case in ("uncased", "cased"):
        lowercase = case == "uncased"
        trainer = BertWordPieceTokenizer(lowercase=lowercase, strip_accents=None)
        trainer.train_from_iterator(CORPUS.splitlines() * 3, vocab_size=400, min_frequency=1)
        slow = os.path.join(workdir, case, "slow")
        fast = os.path.join(workdir, case, "fast")
        os.makedirs(slow, exist_ok=True)
        trainer.save_model(slow)
        with open(os.path.join(slow, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": lowercase}, f)
        tokenizer = transformers.BertTokenizer.from_pretrained(slow)
        # transformers writes tokenizer.json with BERT's template.
        tokenizer.save_pretrained(fast)
        assert not os.path.exists(os.path.join(fast, "vocab.txt"))
        reference = TransformersReference(tokenizer)
        layouts[f"{case} tokenizer.json"] = (fast, reference)
        layouts[f"{case} vocab.txt"] = (slow, reference)
    return layouts


def sentencepiece(workdir):
    import sentencepiece as spm
    import transformers
    transformers.logging.set_verbosity_error()
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS.splitlines() * 3),
                                   model_writer=model, vocab_size=300, character_coverage=1.0,
                                   model_type="unigram", hard_vocab_limit=False,
                                   minloglevel=2)
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    # Marian: ids from vocab.json, in another order than the model's, with
    # pieces missing (they become <unk>) and a language code.
    marian = os.path.join(workdir, "marian")
    os.makedirs(marian, exist_ok=True)
    for name in ("source.spm", "target.spm"):
        with open(os.path.join(marian, name), "wb") as f:
            f.write(model.getvalue())
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    ordinary = [p for p in pieces if p not in ("<unk>", "<s>", "</s>")]
    random.Random(0).shuffle(ordinary)
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in ordinary[:-20] + [">>fr<<", "<pad>"]:
        vocab[piece] = len(vocab)
    with open(os.path.join(marian, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    tokenizer = transformers.MarianTokenizer(*(os.path.join(marian, name) for name in
                                               ("source.spm", "target.spm", "vocab.json")))
    spiece = os.path.join(workdir, "spiece")
    os.makedirs(spiece, exist_ok=True)
    with open(os.path.join(spiece, "spiece.model"), "wb") as f:
        f.write(model.getvalue())
    return {"Marian source.spm + vocab.json": (marian, TransformersReference(tokenizer)),
            "spiece.model": (spiece, SentencePieceReference(processor))}


LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def split_bpe(split, specials, ignore_merges, nfc, bos):
    """A byte-level BPE as Llama 3's and Qwen2's tokenizer.json are made:
    a regex split, bytes, and (Llama 3) a BOS template."""
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tokenizer = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, min_frequency=1, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS.splitlines() * 3, trainer)
    tokenizer.add_tokens(["<think>"])
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, tokenizer.token_to_id(bos))])
    return tokenizer


def add_gguf_tokenizer(writer, tokenizer, pre, bos, eos, add_bos):
    """Adds `tokenizer` (a byte-level BPE `tokenizers.Tokenizer`) to a
    GGUFWriter's metadata as llama.cpp's convert_hf_to_gguf.py stores it
    (get_vocab_base, gguf.SpecialVocab)."""
    import gguf
    vocab = tokenizer.get_vocab()
    added = tokenizer.get_added_tokens_decoder()
    tokens, types = [], []
    for token, index in sorted(vocab.items(), key=lambda item: item[1]):
        assert index == len(tokens)
        tokens.append(token)
        if index in added:
            types.append(gguf.TokenType.CONTROL if added[index].special
                         else gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    model = json.loads(tokenizer.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokenizer.token_to_id(bos))
    writer.add_eos_token_id(tokenizer.token_to_id(eos))
    writer.add_add_bos_token(add_bos)


def write_gguf_tokenizer(tokenizer, pre, bos, eos, path):
    """A GGUF file of no tensors holding `tokenizer`."""
    import gguf
    writer = gguf.GGUFWriter(path, "llama")
    add_gguf_tokenizer(writer, tokenizer, pre, bos, eos, add_bos=pre == "llama-bpe")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


class SentencePieceBosReference:
    """`sentencepiece` itself, BOS first (as llama.cpp adds it), its control
    tokens matched whole in the text (as transformers and llama.cpp's
    parse_special do; each piece between them encoded on its own); text
    decoded as transformers' tokenizer of the same GGUF file does."""

    def __init__(self, processor, path):
        import transformers
        self.processor = processor
        self.transformers = transformers.AutoTokenizer.from_pretrained(
            os.path.dirname(path), gguf_file=os.path.basename(path))

    def encode(self, text):
        import re
        control = {self.processor.id_to_piece(i): i for i in range(self.processor.get_piece_size())
                   if self.processor.is_control(i)}
        ids = [self.processor.bos_id()]
        for piece in re.split("(" + "|".join(map(re.escape, control)) + ")", text):
            if piece in control:
                ids.append(control[piece])
            elif piece:
                ids += self.processor.encode(piece)
        return ids

    def decode(self, ids):
        return self.transformers.decode(ids, skip_special_tokens=False)


def add_gguf_sentencepiece(writer, processor, respell=None, user_defined=()):
    """Adds a SentencePiece model to a GGUFWriter's metadata as llama.cpp's
    converter stores it (_create_vocab_sentencepiece): pieces, scores and
    types (the pieces `user_defined` of their own kind), no merges. Gemma's
    (`respell`): pieces of white space as that space, scores that do not
    follow the pieces' order, no space before the text."""
    import gguf
    tokens, scores, types = [], [], []
    for i in range(processor.get_piece_size()):
        piece = processor.id_to_piece(i)
        tokens.append(respell(piece) if respell else piece)
        scores.append(processor.get_score(i) if not respell else float((i * 7919) % 101))
        types.append(gguf.TokenType.UNKNOWN if processor.is_unknown(i)
                     else gguf.TokenType.CONTROL if processor.is_control(i)
                     else gguf.TokenType.UNUSED if processor.is_unused(i)
                     else gguf.TokenType.BYTE if processor.is_byte(i)
                     else gguf.TokenType.USER_DEFINED if piece in user_defined
                     else gguf.TokenType.NORMAL)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(processor.bos_id())
    writer.add_eos_token_id(processor.eos_id())
    writer.add_unk_token_id(processor.unk_id())
    if respell:
        writer.add_add_space_prefix(False)


def write_gguf_sentencepiece(processor, path, architecture="llama", respell=None,
                             user_defined=()):
    """A GGUF file of no tensors holding a SentencePiece model."""
    import gguf
    writer = gguf.GGUFWriter(path, architecture)
    add_gguf_sentencepiece(writer, processor, respell, user_defined)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def train_sentencepiece(add_dummy_prefix, symbols=(), controls=(), **options):
    """A SentencePiece BPE with byte fallback of CORPUS, spaces kept,
    `symbols` pieces of their own, `controls` control tokens."""
    import sentencepiece as spm
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS.splitlines() * 3),
                                   model_writer=model, vocab_size=500, character_coverage=1.0,
                                   model_type="bpe", byte_fallback=True,
                                   normalization_rule_name="identity",
                                   remove_extra_whitespaces=False,
                                   add_dummy_prefix=add_dummy_prefix, hard_vocab_limit=False,
                                   user_defined_symbols=list(symbols),
                                   control_symbols=list(controls), **options,
                                   minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def gemma_spaces(piece):
    """Gemma's files store a piece of only "\u2581"s as spaces."""
    return " " * len(piece) if piece and set(piece) == {"\u2581"} else piece


def gguf_files(workdir):
    """Llama 3's and Qwen2's kinds of byte-level BPE, in GGUF files,
    against the tokenizer.json each was converted from; a SentencePiece BPE
    with byte fallback (Llama 2's and Mistral's kind) against `sentencepiece`
    itself; Phi-3's and Gemma's files of that kind against transformers'
    tokenizer of the file."""
    import transformers
    # As Llama 2's: no normalization, spaces kept, a space before the text.
    processor = train_sentencepiece(add_dummy_prefix=True)
    path = os.path.join(workdir, "sentencepiece.gguf")
    write_gguf_sentencepiece(processor, path)
    layouts = {"sentencepiece.gguf": (path, SentencePieceBosReference(processor, path))}
    # Phi-3's and Gemma's, against transformers' tokenizer of the same file.
    # Gemma's has <pad> and <mask>, which transformers' GemmaTokenizer adds
    # where missing.
    spaces = ["\u2581\u2581", "\u2581\u2581\u2581"]
    gemma = train_sentencepiece(False, spaces, ["<pad>", "<mask>"])
    files = {"phi3.gguf": (processor, "phi3", None, ()),
             "gemma.gguf": (gemma, "gemma2", gemma_spaces, spaces)}
    for name, (model, architecture, respell, user_defined) in files.items():
        path = os.path.join(workdir, name)
        write_gguf_sentencepiece(model, path, architecture, respell, user_defined)
        reference = transformers.AutoTokenizer.from_pretrained(workdir, gguf_file=name)
        layouts[name] = (path, TransformersReference(reference))
    kinds = {
        "llama-bpe": (LLAMA3_SPLIT, ["<|begin_of_text|>", "<|end_of_text|>"], True, False,
                      "<|begin_of_text|>", "<|end_of_text|>"),
        "qwen2": (QWEN2_SPLIT, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], False, True,
                  None, "<|endoftext|>"),
    }
    for pre, (split, specials, ignore_merges, nfc, bos, eos) in kinds.items():
        tokenizer = split_bpe(split, specials, ignore_merges, nfc, bos)
        path = os.path.join(workdir, pre + ".gguf")
        write_gguf_tokenizer(tokenizer, pre, bos or eos, eos, path)
        layouts[f"{pre}.gguf"] = (path, TokenizersReference(tokenizer))
    return layouts


def write_texts(path, texts):
    """The texts for tokenize.c, each ending in a NUL byte."""
    with open(path, "wb") as f:
        for text in texts:
            f.write(text.encode() + b"\0")


def check_layouts(kind, layouts, program, texts, workdir):
    """Runs `program` on each layout's directory and compares ids and
    decoded bytes with its reference; prints a PASS/FAIL line per layout and
    returns whether all passed."""
    text_file = os.path.join(workdir, "tests.txt")
    write_texts(text_file, texts)
    passed = True
    for layout, (directory, reference) in layouts.items():
        run = subprocess.run([program, directory, text_file], capture_output=True)
        lines = run.stdout.decode().splitlines()
        problems = [] if run.returncode == 0 else [run.stderr.decode().strip()]
        for i, text in enumerate(texts if not problems else []):
            want = reference.encode(text)
            if lines[2 * i].startswith("error:"):
                problems.append(f"text {i + 1}: {lines[2 * i]}")
                lines.insert(2 * i + 1, "text: ")
                continue
            ids = [int(x) for x in lines[2 * i].split()[1:]]
            decoded = bytes.fromhex(lines[2 * i + 1][len("text: "):])
            if ids != want:
                problems.append(f"text {i + 1} {text!r}: ids {ids} != {want}")
            if decoded != reference.decode(want).encode():
                problems.append(f"text {i + 1}: decoded {decoded.decode(errors='replace')!r} != "
                                f"{reference.decode(want)!r}")
        passed &= not problems
        print(f"{'PASS' if not problems else 'FAIL'}: {kind} {layout}: {len(texts)} texts"
              + "".join("\n  " + p for p in problems[:8]))
    return passed


def main():
    kind, workdir, program = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    layouts = {"bpe": bpe, "wordpiece": wordpiece, "sentencepiece": sentencepiece,
               "gguf": gguf_files}[kind](workdir)
    return 0 if check_layouts(kind, layouts, program, TESTS, workdir) else 1


if __name__ == "__main__":
    sys.exit(main())
