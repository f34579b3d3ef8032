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


FINGERPRINT_CHARS = 16  # hex characters of every content fingerprint cr2 stores


def content_fingerprint(*meta: object, arrays: dict[str, np.ndarray] | None = None) -> str:
    """Return the fingerprint of fitted state: sha256 over the JSON of `meta`, then each named array
    (name, dtype, shape, bytes) in sorted-name order, cut to 16 hex chars.

    The one fingerprint function of cr2: torch checkpoints (state_dict as arrays), the one-shot
    routers' learned arrays and the CR² router (its parts' fingerprints as meta) all go through it.
    """
    import json

    digest = hashlib.sha256()
    if meta:
        digest.update(json.dumps(list(meta), sort_keys=True, default=str).encode())
    for key in sorted(arrays or {}):
        arr = np.ascontiguousarray(arrays[key])
        digest.update(key.encode())
        digest.update(str(arr.dtype).encode())
        digest.update(str(tuple(arr.shape)).encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()[:FINGERPRINT_CHARS]
