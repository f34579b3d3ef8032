"""Stable hashing: randomness that depends only on names (seed, query id, …), never on process or order; and the
one fingerprint function of cr2 (`content_fingerprint`), with its row-content form (`fingerprint_rows`)."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


FINGERPRINT_CHARS = 16  # hex characters of every content fingerprint and cache key cr2 stores


def content_fingerprint(*meta: object, arrays: dict[str, np.ndarray] | None = None) -> str:
    """Return the fingerprint of `meta` and named arrays: sha256 over the JSON of `meta`, then each named array
    (name, dtype, shape, bytes) in sorted-name order, cut to FINGERPRINT_CHARS hex chars.

    The one fingerprint function of cr2: fitted state (torch checkpoints as state_dict arrays, the one-shot
    routers' learned arrays, the CR² router from its parts' fingerprints), cache keys (tasks/store.py: the key
    parts as meta), config digests, source and data files (their bytes as arrays) and routing rows
    (`fingerprint_rows`) all go through it.
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


def bytes_array(data: bytes) -> np.ndarray:
    """[len(data)] uint8 view of raw bytes (a file's content as one of content_fingerprint's arrays)."""
    return np.frombuffer(data, dtype=np.uint8)


def _text(values: Any) -> np.ndarray:
    return bytes_array("\x1f".join(map(str, values)).encode())


# every row field a fingerprint may cover, with the form it is hashed in (fixed dtypes: a float32 copy and a
# float64 copy of the same numbers hash alike); None hashes as an empty array marked by its name
ROW_FIELDS: dict[str, Any] = {
    "query_id": _text,
    "benchmark": _text,
    "model_ids": _text,
    "embedding": lambda a: np.asarray(a, dtype=np.float32),
    "correct": lambda a: np.asarray(a, dtype=bool),
    "cost": lambda a: np.asarray(a, dtype=np.float64),
    "cost_est": lambda a: np.asarray(a, dtype=np.float64),
    "distance_m": lambda a: np.asarray(a, dtype=np.float64),
    "decision_cost": lambda a: np.asarray(a, dtype=np.float64),  # ĉ when estimated, else c (RoutingSet.decision_cost)
}


def fingerprint_rows(*sets: Any, fields: Sequence[str]) -> str:
    """The content fingerprint of the declared `fields` of routing sets (RoutingSet attributes, ROW_FIELDS): what
    a computation that reads only those fields of those rows can depend on. Fields outside `fields` never change
    it; every declared one does."""
    unknown = sorted(set(fields) - set(ROW_FIELDS))
    if unknown:
        raise ValueError(f"unknown row fields {unknown}; known: {sorted(ROW_FIELDS)}")
    arrays = {}
    for i, data in enumerate(sets):
        for name in fields:
            value = getattr(data, name)
            if value is None:
                arrays[f"{i}.{name}:none"] = np.zeros(0, np.uint8)
            else:
                arrays[f"{i}.{name}"] = ROW_FIELDS[name](value)
    return content_fingerprint(sorted(fields), len(sets), arrays=arrays)


# ---------------------------------------------------------------- ids of stored studies (pure; fixed derivations)
def study_id(kind: str, *parts: Any) -> str:
    """The id of a stored study (a pool sweep, diagnostics, seeds, a premise study, the router study): '<kind>-' +
    sha256 over the kind and each part's string form, 24 hex chars. Not a cache key: the warehouse keeps the study's
    rows under it and every later run finds them by recomputing it, so its derivation is fixed — a new one would
    orphan every stored study (tests/test_store.py pins it)."""
    h = hashlib.sha256(kind.encode())
    for p in parts:
        h.update(b"\x1f" + str(p).encode())
    return f"{kind}-{h.hexdigest()[:24]}"


def study_file_digest(path: str | Path) -> str:
    """The content digest of a file a stored study's id is built from (a pool rule, a pre-registration): sha256 over
    its name and bytes, 16 hex chars; fixed like `study_id`, and printed beside the study as its content hash."""
    p = Path(path)
    return hashlib.sha256(p.name.encode() + p.read_bytes()).hexdigest()[:16]
