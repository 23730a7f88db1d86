#!/usr/bin/env python3
"""xfmr's tokenizer.json components against the `tokenizers` library: builds
tokenizers in the configurations today's checkpoints ship, saves each as
tokenizer.json, runs the runtime's encoder and decoder on texts with several
scripts, emoji, accents, digits, runs of whitespace, newlines and added
tokens inside the text (through tokenize.c, the C API), and compares ids and
decoded bytes with tokenizers' encode() and decode(skip_special_tokens=False).

  tokenizer_json_check.py WORKDIR TOKENIZE_PROGRAM

Configurations: Llama 3 and Qwen2 (regular-expression Split, byte-level BPE,
ignore_merges), Llama 2 (Prepend + Replace normalizers, BPE with byte
fallback), Mistral (Metaspace "first"), Gemma (Replace, no pre-tokenizer),
T5 and ALBERT (Unigram with SentencePiece's Precompiled normalizer, from a
model the test trains, converted by transformers), a WordPiece and a
WordLevel behind other normalizers and pre-tokenizers, a BPE with
continuing-subword prefix and end-of-word suffix, every Split behavior
(also inverted), and added tokens with every flag. Prints one PASS/FAIL
line per configuration.
"""
import copy
import io
import json
import os
import shutil
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizers_check import CORPUS, TESTS, TokenizersReference, check_layouts  # noqa: E402

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

MORE_TESTS = [
    "multi\nline\n\n  text\r\nwith\ttabs \n and a final newline\n",
    "nbsp\u00a0ideographic\u3000space line\u2028separator next\u0085line zero\u200bwidth",
    "decomposed e\u0301 o\u0308 and composed \u00e9 \u00f6; ligature \ufb01 \u2460\u2461 "
    "\uff21\uff22\uff23\uff11\uff12\uff13 \u00bd \u2167",
    "I'M SHOUTING, YOU'LL SEE, THEY'VE GONE; 'Quoted' words",
    "digits 1234567 12.5% 0x1F and 3,141,592 ٣٤٥",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "glued<|eot_id|>text and <|im_start|>assistant\nhello<|im_end|>\n",
    "strip   <lstrip>   and   <rstrip>   both   <both>   end",
    "Hello World, hello world, HELLO WORLD and helloworld",
    "word words sword word. (word) _word word_ word",
    "<s> and </s> and <unk> as text, [CLS] [SEP] [MASK]",
    "   ",
    "\u2581already\u2581has\u2581metaspace \u2581 \u2581\u2581",
    "emoji 👍🏽 🏳️‍🌈 ❤️ 🤖, CJK 你好世界 and Thai ภาษาไทย",
]
TEXTS = TESTS + MORE_TESTS
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]
FLAGGED = [
    AddedToken("<lstrip>", lstrip=True, special=True),
    AddedToken("<rstrip>", rstrip=True, special=True),
    AddedToken("<both>", lstrip=True, rstrip=True, special=False, normalized=False),
    AddedToken("word", single_word=True, special=False, normalized=False),
    AddedToken("Hello World", normalized=True, special=False),
]


def trained_byte_level(pattern, ignore_merges, specials):
    tokenizer = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=1, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(CORPUS.splitlines() * 3, trainer)
    return tokenizer


def metaspace_bpe():
    """A BPE over Metaspace words, its vocabulary extended with the 256
    <0xAB> byte tokens, as Llama 2, Mistral and Gemma ship theirs."""
    trainer_tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer_tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=400, min_frequency=1, limit_alphabet=120,
                                  special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    trainer_tokenizer.train_from_iterator(CORPUS.splitlines() * 3, trainer)
    model = json.loads(trainer_tokenizer.to_str())["model"]
    vocab = dict(model["vocab"])
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    tokenizer = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True,
                                     fuse_unk=True))
    tokenizer.add_special_tokens(["<unk>", "<s>", "</s>"])
    return tokenizer


def llama2(base):
    tokenizer = Tokenizer.from_str(base.to_str())
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                                 normalizers.Replace(" ", "\u2581")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                           decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))])
    return tokenizer


def mistral(base):
    tokenizer = Tokenizer.from_str(base.to_str())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581",
                                                       prepend_scheme="first", split=False)
    tokenizer.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(
        replacement="\u2581", prepend_scheme="first", split=False)])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    return tokenizer


def gemma(base):
    tokenizer = Tokenizer.from_str(base.to_str())
    tokenizer.normalizer = normalizers.Replace(" ", "\u2581")
    tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                           decoders.Fuse()])
    tokenizer.add_special_tokens(["<start_of_turn>", "<end_of_turn>"])
    return tokenizer


def convert_sentencepiece(path, converters):
    """tokenizers.Tokenizer objects converted by transformers' `converters`
    (T5Converter, ...) from the SentencePiece model at `path`."""
    import sentencepiece as spm
    import transformers.convert_slow_tokenizer as convert
    processor = spm.SentencePieceProcessor(model_file=path)

    class Original:
        """What the converters read of a slow tokenizer."""
        vocab_file = path
        legacy = True
        add_prefix_space = True
        keep_accents = False
        do_lower_case = True
        _extra_ids = 0
        pad_token, unk_token, bos_token, eos_token = "<pad>", "<unk>", "<s>", "</s>"
        cls_token, sep_token, mask_token = "[CLS]", "[SEP]", "[MASK]"

        def convert_ids_to_tokens(self, i):
            return processor.id_to_piece(i)

        def convert_tokens_to_ids(self, token):
            return processor.piece_to_id(token)

    return {name: getattr(convert, name)(Original()).converted() for name in converters}


def train_unigram(lines, path, vocab_size, coverage):
    """Trains a SentencePiece unigram model on `lines`, written to `path`."""
    import sentencepiece as spm
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model,
                                   vocab_size=vocab_size, character_coverage=coverage,
                                   model_type="unigram", hard_vocab_limit=False, minloglevel=2)
    with open(path, "wb") as f:
        f.write(model.getvalue())


def converted_unigram(workdir):
    """T5's and ALBERT's tokenizer.json, converted by transformers from a
    SentencePiece unigram model the test trains."""
    path = os.path.join(workdir, "unigram.model")
    train_unigram(CORPUS.splitlines() * 3, path, 300, 0.995)
    return convert_sentencepiece(path, ("T5Converter", "AlbertConverter"))


def wordpiece():
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=12))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(),
                                                 normalizers.StripAccents(), normalizers.Strip()])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True)])
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    trainer = trainers.WordPieceTrainer(vocab_size=500, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                        show_progress=False)
    tokenizer.train_from_iterator(CORPUS.splitlines() * 3, trainer)
    tokenizer.post_processor = processors.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
    tokenizer.add_tokens(FLAGGED)
    return tokenizer


def wordlevel():
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(),
                                                 normalizers.Replace(Regex(r"\d+"), "#")])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                                       pre_tokenizers.Digits()])
    trainer = trainers.WordLevelTrainer(vocab_size=300, special_tokens=["<unk>"],
                                        show_progress=False)
    tokenizer.train_from_iterator(CORPUS.splitlines() * 3, trainer)
    return tokenizer


def suffixed_bpe():
    """OpenAI GPT's and CLIP's layout: lowercase, words with an end-of-word
    suffix, pieces with a continuing-subword prefix, BPEDecoder."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##",
                                     end_of_word_suffix="</w>"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\s+"), behavior="removed"),
        pre_tokenizers.Split(Regex(r"[\p{P}\p{S}]"), behavior="isolated")])
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>"],
                                  continuing_subword_prefix="##", end_of_word_suffix="</w>",
                                  show_progress=False)
    tokenizer.train_from_iterator(CORPUS.splitlines() * 3, trainer)
    tokenizer.decoder = decoders.BPEDecoder(suffix="</w>")
    return tokenizer


def split_behaviors(base):
    """The byte-level model behind a Split of each behavior."""
    variants = {}
    for behavior in ("removed", "isolated", "merged_with_previous", "merged_with_next",
                     "contiguous"):
        for invert in (False, True):
            tokenizer = Tokenizer.from_str(base.to_str())
            tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(r"\s+|[,.;:!?]"), behavior=behavior, invert=invert),
                pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)])
            variants[f"Split {behavior}{' inverted' if invert else ''}"] = tokenizer
    # GPT-2's own pre-tokenizer, and character splits.
    gpt2 = Tokenizer.from_str(base.to_str())
    gpt2.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    variants["ByteLevel with its regex"] = gpt2
    chars = Tokenizer.from_str(base.to_str())
    chars.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.CharDelimiterSplit("o"), pre_tokenizers.Split("an", "merged_with_next"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    chars.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.Strip(left=True,
                                                                                   right=False)])
    variants["CharDelimiterSplit, String Split, NFKD, Strip"] = chars
    return variants


def main():
    workdir, program = sys.argv[1], sys.argv[2]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    llama3 = trained_byte_level(LLAMA3_PATTERN, True, LLAMA3_SPECIAL)
    llama3.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 0)])
    llama3.add_tokens(FLAGGED)
    qwen2 = trained_byte_level(QWEN2_PATTERN, False, ["<|endoftext|>", "<|im_start|>",
                                                      "<|im_end|>"])
    qwen2.normalizer = normalizers.NFC()
    metaspace = metaspace_bpe()
    tokenizers = {"Llama 3 (Split, byte-level BPE, ignore_merges, flagged added tokens)": llama3,
                  "Qwen2 (NFC, Split, byte-level BPE)": qwen2,
                  "Llama 2 (Prepend, Replace, BPE with byte fallback)": llama2(metaspace),
                  "Mistral (Metaspace first, BPE with byte fallback)": mistral(metaspace),
                  "Gemma (Replace, BPE with byte fallback)": gemma(metaspace)}
    for name, tokenizer in converted_unigram(workdir).items():
        tokenizers[f"Unigram with Precompiled ({name})"] = tokenizer
    tokenizers["WordPiece (NFD, Lowercase, StripAccents, Strip, WhitespaceSplit, Punctuation, "
               "Digits, flagged added tokens)"] = wordpiece()
    tokenizers["WordLevel (NFKC, Replace regex, Whitespace, Digits)"] = wordlevel()
    tokenizers["BPE with prefix and suffix (BPEDecoder)"] = suffixed_bpe()
    tokenizers.update(split_behaviors(qwen2))
    layouts = {}
    for i, (name, tokenizer) in enumerate(tokenizers.items()):
        directory = os.path.join(workdir, str(i))
        os.makedirs(directory)
        tokenizer.save(os.path.join(directory, "tokenizer.json"))
        # The reference reads the file back, as a checkpoint's user would.
        layouts[name] = (directory, TokenizersReference(
            Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))))
    return 0 if check_layouts("tokenizer.json", layouts, program, TEXTS, workdir) else 1


if __name__ == "__main__":
    sys.exit(main())
