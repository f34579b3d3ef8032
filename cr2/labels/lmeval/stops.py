"""Stop sequences checked on token ids, with the verdicts of lm-eval's text-based check.

lm-eval's hf model stops a generation on a stop string s once s appears in the text of the generation's last
len(encode(s)) + 2 tokens, decoded with special tokens kept (`MultiTokenEOSCriteria`, checked after every
step); the answer is the decoded generation (special tokens skipped) cut at the first occurrence of each stop
string in turn (`postprocess_generated_text`). Decoding the tail of every row of the batch after every step
costs milliseconds per step. `StopMatcher` returns the same verdict per row while decoding almost nothing:

- **byte-level tokenizers** (GPT-2, Llama 3, Qwen: the ByteLevel decoder, no clean-up of spaces): a window's
  text is the UTF-8 decoding, invalid bytes replaced, of its tokens' bytes. UTF-8 resynchronises at every
  character's first byte, so a stop string (valid UTF-8 without U+FFFD) that appears in the window after step
  n but did not after step n-1 must end inside the newest token's bytes: that token holds the stop string's
  last byte. Per stop string the token ids holding that byte are precomputed once per tokenizer; a row's
  window is decoded — exactly lm-eval's check, on that row alone — only when its newest token is one of them.
- **any other tokenizer** (or a stop string holding U+FFFD): every window is decoded, as lm-eval does.

`fires(tokens)` is called after every appended token and answers whether lm-eval's criterion holds after that
step; the first step it holds is where lm-eval's generation of that request alone (batch size 1) stops.
"""
from __future__ import annotations

import re
import weakref
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

REPLACEMENT_CHAR = "\ufffd"


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's bytes → printable characters map that byte-level BPE vocabularies are written in."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def is_byte_level(tokenizer: Any) -> bool:
    """Whether decoding `tokenizer` is the lossy UTF-8 decoding of its tokens' bytes (ByteLevel decoder, no clean-up)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return False
    from tokenizers import decoders

    return type(getattr(backend, "decoder", None)) is decoders.ByteLevel


def token_bytes(tokenizer: Any, vocab_size: int) -> list[bytes | None]:
    """Each id's bytes in a byte-level vocabulary (b'' for ids without a token); None where unknown (always checked)."""
    inverse = _byte_decoder()
    to_byte = {ord(c): b for c, b in inverse.items()}
    alphabet = re.compile("[" + re.escape("".join(inverse)) + "]*")
    added = {int(i): t.content for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items()}
    pieces = tokenizer.convert_ids_to_tokens(list(range(vocab_size)))
    out: list[bytes | None] = []
    for i, piece in enumerate(pieces):
        text = added.get(i, piece)
        if text is None:
            out.append(b"")  # the decoder skips ids it has no token for
        elif alphabet.fullmatch(text):
            out.append(text.translate(to_byte).encode("latin-1"))
        else:
            out.append(None)
    return out


class _Candidates:
    """Per tokenizer: for a byte value, the ids whose bytes contain it (and the ids of unknown bytes)."""

    def __init__(self, tokenizer: Any, vocab_size: int):
        pieces = token_bytes(tokenizer, vocab_size)
        self.vocab_size = vocab_size
        self.byte_level = is_byte_level(tokenizer)
        self.unknown = np.array([p is None for p in pieces], dtype=bool)
        self._pieces = pieces
        self._by_byte: dict[int, np.ndarray] = {}

    def holding(self, byte: int) -> np.ndarray:
        if byte not in self._by_byte:
            self._by_byte[byte] = self.unknown | np.array([p is not None and byte in p for p in self._pieces], dtype=bool)
        return self._by_byte[byte]


_CANDIDATES: "weakref.WeakKeyDictionary[Any, _Candidates]" = weakref.WeakKeyDictionary()


def _candidates_for(tokenizer: Any, vocab_size: int) -> _Candidates:
    """The tokenizer's byte table, built once per (tokenizer, vocabulary size) while the tokenizer lives."""
    try:
        hit = _CANDIDATES.get(tokenizer)
    except TypeError:  # not weak-referenceable: build it each time
        return _Candidates(tokenizer, vocab_size)
    if hit is None or hit.vocab_size != vocab_size:
        hit = _CANDIDATES[tokenizer] = _Candidates(tokenizer, vocab_size)
    return hit


class StopMatcher:
    """lm-eval's stop verdict for one list of stop strings, from a row's generated token ids.

    `vocab_size` is the model's output size (it may exceed the tokenizer's: such ids decode to nothing).
    `prefilter=False` decodes every window (lm-eval's own cost; the reference the token-id path is tested against).
    """

    def __init__(self, tokenizer: Any, stops: Sequence[str], vocab_size: int, prefilter: bool = True):
        self.tokenizer = tokenizer
        self.stops = list(stops)
        # lm-eval: the window is the stop string's own token count plus two
        self.windows = [len(tokenizer.encode(s, add_special_tokens=False)) + 2 for s in self.stops]
        self.vocab_size = int(vocab_size)
        self.prefiltered = bool(prefilter) and is_byte_level(tokenizer)
        self._masks: list[np.ndarray | None] = []
        if self.prefiltered:
            table = _candidates_for(tokenizer, self.vocab_size)
            for s in self.stops:
                if not s or REPLACEMENT_CHAR in s:
                    self._masks.append(None)  # '' is in every text; U+FFFD may come from any broken byte sequence
                else:
                    self._masks.append(table.holding(s.encode("utf-8")[-1]))
        else:
            self._masks = [None] * len(self.stops)
        masks = [m for m in self._masks if m is not None]
        self._any = None if len(masks) < len(self._masks) else (np.logical_or.reduce(masks) if masks else None)
        self.decoded_windows = 0  # windows decoded so far (how much text work the prefilter left)

    def fires(self, tokens: Sequence[int]) -> bool:
        """Whether, after the last of `tokens` (a row's generated ids so far), a stop string is in lm-eval's window."""
        if not tokens:
            return False
        last = int(tokens[-1])
        if self._any is not None and not (0 <= last < self.vocab_size and self._any[last]):
            return False
        for stop, window, mask in zip(self.stops, self.windows, self._masks):
            if mask is not None and not (0 <= last < self.vocab_size and mask[last]):
                continue
            self.decoded_windows += 1
            # lm-eval: tokenizer.batch_decode(window) with the decode defaults (special tokens kept)
            if stop in self.tokenizer.decode(list(tokens[-window:])):
                return True
        return False
