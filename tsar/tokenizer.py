"""Text to token ids and back with a checkpoint's own vocabulary (GGUF ``tokenizer.ggml.*``).

Two vocabularies are understood:

* ``gpt2`` (byte-level BPE: Llama 3, BitNet b1.58 2B4T): every byte is a printable character
  (bytes ``!``..``~``, ``¡``..``¬``, ``®``..``ÿ`` stand for themselves, the other 68 for
  ``U+0100`` on, in byte order), text is split into words (letters with one leading space, digits,
  runs of other characters, white space) and each word's characters are merged pairwise by the
  rank of the pair in ``tokenizer.ggml.merges``, lowest first;
* ``llama`` (SentencePiece: ``▁`` for a space, ``<0xNN>`` byte tokens): the longest vocabulary
  entry at each position, bytes for what no entry covers.

Pre-tokenization is a simplification of the runtimes' regular expressions (no contractions or
digit groups of three): a prompt may split into other (equally valid) tokens than llama.cpp's, which
changes nothing in a comparison of kernels on the same ids.
"""

from __future__ import annotations

import re
from functools import cache
from itertools import pairwise

_WORD = re.compile(r" ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+")
_SPACE = "\u2581"


@cache
def byte_chars() -> tuple[str, ...]:
    """The character that stands for each byte 0..255 in a byte-level BPE vocabulary."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(0x100 + extra)
            extra += 1
    return tuple(chars[b] for b in range(256))


class Tokenizer:
    """Encode and decode with ``tokens`` (id -> text) and, for BPE, ``merges`` ("a b" by rank)."""

    def __init__(self, model: str, tokens: tuple[str, ...], merges: tuple[str, ...] = ()) -> None:
        if not tokens:
            raise ValueError("the checkpoint has no vocabulary (tokenizer.ggml.tokens)")
        self.model = model
        self.tokens = tokens
        self.ids = {t: i for i, t in reversed(list(enumerate(tokens)))}
        self.ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(merges) if " " in m}
        self._bytes = {c: b for b, c in enumerate(byte_chars())}

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` (no BOS)."""
        if self.model == "gpt2":
            return [i for word in _WORD.findall(text) for i in self._bpe(word)]
        return self._longest(_SPACE + text.replace(" ", _SPACE))

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids`` (invalid UTF-8 replaced)."""
        pieces = [self.tokens[i] for i in ids]
        if self.model == "gpt2":
            data = bytes(self._bytes[c] for p in pieces for c in p if c in self._bytes)
            return data.decode("utf-8", errors="replace")
        out = bytearray()
        for p in pieces:
            if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", p):
                out.append(int(p[3:5], 16))
            else:
                out += p.replace(_SPACE, " ").encode()
        return out.decode("utf-8", errors="replace")

    def _bpe(self, word: str) -> list[int]:
        chars = byte_chars()
        parts = [chars[b] for b in word.encode()]
        while len(parts) > 1:
            ranked = [(self.ranks.get(pair, len(self.ranks)), i)
                      for i, pair in enumerate(pairwise(parts))]
            rank, i = min(ranked)
            if rank == len(self.ranks):
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        out = []
        for part in parts:
            if part in self.ids:
                out.append(self.ids[part])
            else:  # a piece the vocabulary lacks: its characters (each byte is in a BPE vocabulary)
                out += [self.ids[c] for c in part if c in self.ids]
        return out

    def _longest(self, text: str) -> list[int]:
        out, i, longest = [], 0, max(map(len, self.ids))
        while i < len(text):
            for n in range(min(longest, len(text) - i), 0, -1):
                if text[i:i + n] in self.ids:
                    out.append(self.ids[text[i:i + n]])
                    i += n
                    break
            else:
                out += [self.ids[b] for b in (f"<0x{x:02X}>" for x in text[i].encode()) if b in self.ids]
                i += 1
        return out
