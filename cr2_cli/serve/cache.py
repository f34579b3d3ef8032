"""An LRU cache of query embeddings for `cr2 serve`, keyed by the SHA-256 of the text the encoder reads.

A repeated query (the same router_text: question and choices) is embedded once; the encoder is
deterministic for a text encoded alone, so a hit returns what a miss would have computed (batched
encodings differ from it only by float32 rounding of the padded batch, cr2/inputs/embed.py). At most
`max_entries` embeddings are kept (`serving.embedding_cache_size`; 0 turns the cache off), the least
recently used is evicted first. Hits, misses and evictions are counted. Thread-safe.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np

from cr2.core.errors import InvalidValueError


def text_key(text: str) -> bytes:
    """The cache key of a text: SHA-256 of its UTF-8 bytes (the text itself is not kept)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    """LRU map text → e(x) [d] float32 (read-only arrays), at most `max_entries` entries."""

    def __init__(self, max_entries: int):
        if int(max_entries) < 0:
            raise InvalidValueError(f"the embedding cache size must be ≥ 0 entries, got {max_entries}")
        self.max_entries = int(max_entries)
        self.hits = self.misses = self.evictions = 0
        self._data: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, text: str) -> np.ndarray | None:
        """The cached embedding of `text` (and it becomes the most recent), or None; counts a hit or a miss."""
        key = text_key(text)
        with self._lock:
            emb = self._data.get(key)
            if emb is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return emb

    def put(self, text: str, embedding: np.ndarray) -> None:
        """Keep `embedding` [d] (or [1, d]) for `text`, evicting the least recently used entries beyond the size."""
        if self.max_entries == 0:
            return
        emb = np.array(embedding, dtype=np.float32).reshape(-1)
        emb.setflags(write=False)
        key = text_key(text)
        with self._lock:
            self._data[key] = emb
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)
                self.evictions += 1


__all__ = ["EmbeddingCache", "text_key"]
