"""Hugging Face `tokenizers` as the peer for BpeTokenizer (tests/peer/tokenizer_peer_test.cpp).

usage: hf_tokenizer.py GGUF TEXT OUT_DIR
       hf_tokenizer.py check DIR TEXTS_JSON OUT   transformers' AutoTokenizer.from_pretrained(DIR) encodes the texts
                                                  (no special tokens added) into OUT (ids and offsets as above)

Builds `tokenizers.Tokenizer`s from the GGUF file's vocabulary and merges (SmolLM2's byte-level BPE, its 17 control
tokens as special added tokens) with four pre-tokenizers: SmolLM's own (Digits(individual) + ByteLevel, as its
tokenizer.json and llama.cpp's "smollm" have it), GPT-2's (ByteLevel), Llama 3's and Qwen2's (Split + ByteLevel).
Each is saved as OUT_DIR/<name>/tokenizer.json, with OUT_DIR/<name>/ids.safetensors: the ids of every line of TEXT
(smollm only; the others the hard cases alone) and of the hard cases, concatenated ("ids") with their boundaries
("offsets"). Decoding every encoding must give the text back (checked here, in Python).
"""
import json
import os
import sys

import numpy as np
import torch
from gguf import GGUFReader
from safetensors.torch import save_file
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

HARD_CASES = [
    "", " ", "  ", "\n", "\n\n\n", "   leading and trailing   ", "tabs\tand\r\nCRLF\r\n", "a\u00a0non-breaking space",
    "Numbers: 3.14159, 1,000,000 and 2024-12-06; 12345678901234567890", "don't I'LL we'Re YOU'VE it's",
    "Unicode: naïve café, Straße, Ærøskøbing, żółć, Ελληνικά, русский, עברית, العربية, हिन्दी, 日本語のテキスト, 한국어",
    "Emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️", "Symbols: ©®™ ½ ² Ⅻ ∑∫√ → ⇒ “quotes” ‘single’ — – …",
    "Code: def f(x):\n    return x**2  # square\n\tif a != b: pass", "<|im_start|>user\nHi there<|im_end|>\n",
    "special inside<|endoftext|>text<|im_end|><|im_start|>", "<|im_start|", "    \n   \n  x", "a" * 300,
    "MIXED case WoRdS with CamelCaseIdentifiers and snake_case_names",
]
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
          r"\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
         r"\s+(?!\S)|\s+")


def field(reader, key):
    f = reader.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") if f.types[-1].name == "STRING" else int(f.parts[i][0]) for i in f.data]


def build(tokens, merges, specials, pre):
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, [tuple(m.split(" ", 1)) for m in merges]))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    split_then_bytes = lambda pattern: pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.pre_tokenizer = {
        "smollm": pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level]),
        "gpt2": byte_level,
        "llama3": split_then_bytes(LLAMA3),
        "qwen2": split_then_bytes(QWEN2),
    }[pre]
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(tokens[i], normalized=False, special=True) for i in specials])
    return tok


def main(gguf_path, text_path, out):
    reader = GGUFReader(gguf_path)
    tokens, merges = field(reader, "tokenizer.ggml.tokens"), field(reader, "tokenizer.ggml.merges")
    specials = [i for i, t in enumerate(field(reader, "tokenizer.ggml.token_type")) if t == 3]
    with open(text_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for pre in ("smollm", "gpt2", "llama3", "qwen2"):
        tok = build(tokens, merges, specials, pre)
        os.makedirs(f"{out}/{pre}", exist_ok=True)
        tok.save(f"{out}/{pre}/tokenizer.json")
        with open(f"{out}/{pre}/tokenizer_config.json", "w") as f:
            json.dump({"bos_token": tokens[1], "eos_token": tokens[2]}, f)
        texts = HARD_CASES + (lines if pre == "smollm" else [])
        ids, offsets = [], [0]
        for text in texts:
            enc = tok.encode(text, add_special_tokens=False).ids
            back = tok.decode(enc, skip_special_tokens=False)
            if back != text:
                sys.exit(f"tokenizers does not decode its own encoding of {text!r}: {back!r}")
            ids.extend(enc)
            offsets.append(len(ids))
        save_file({"ids": torch.tensor(ids, dtype=torch.int64), "offsets": torch.tensor(offsets, dtype=torch.int64)},
                  f"{out}/{pre}/ids.safetensors")
        with open(f"{out}/{pre}/texts.json", "w", encoding="utf-8") as f:
            json.dump(texts, f, ensure_ascii=False)


def check(directory, texts_path, out):
    import os
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(directory)
    with open(texts_path, encoding="utf-8") as f:
        texts = json.load(f)
    ids, offsets = [], [0]
    for text in texts:
        ids.extend(tok.encode(text, add_special_tokens=False))
        offsets.append(len(ids))
    save_file({"ids": torch.tensor(ids, dtype=torch.int64), "offsets": torch.tensor(offsets, dtype=torch.int64)}, out)


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check(*sys.argv[2:5])
    else:
        main(*sys.argv[1:4])
