"""Stable hashing: randomness that depends only on names (seed, query id, …), never on process or order."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np


def stable_u64(*parts: object) -> int:
    """A 64-bit integer from blake2b over the parts joined by \\x1f (stable across processes, unlike hash())."""
    key = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


def stable_u64_array(keys: Sequence[str]) -> np.ndarray:
    """[n] uint64: blake2b of each key string."""
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(k.encode("utf-8"), digest_size=8).digest(), "little") for k in keys),
        dtype=np.uint64, count=len(keys),
    )
