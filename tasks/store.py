"""The content-addressed store: every cache under <home>/cache (or $CR2_CACHE) is keyed, read and written here.

A cache entry is a value computed from declared inputs and kept between runs: the frozen gate's scores and the
teacher's p per gate and rows (`scores`), a fitted router's p̂ per router and rows (`router-proba`), the gate fits'
dropout masks (`dropout`, cr2.method.dropout), and the records of fitted artefacts — which checkpoint was fitted for
which inputs (`teacher-fit`, `router-fit`, `ablation-gate-fit`; the checkpoints themselves sit in <cache>/artifacts,
named by their own content fingerprint). Prefect's stage results use the same key function (`cache_key`) and persist
under <home>/prefect-results (cr2_tasks.common.Stage).

  key     `cache_key(kind, *parts)`: "<kind>-" + cr2.core.hashing.content_fingerprint of the kind and the parts
          (16 hex chars). The parts come from declarations only: a stage's `Reads`, an artefact's `Artefact`
          (cr2_tasks.common), the fingerprints of the fitted state a value is computed from.
  entry   <cache>/<kind>/<key>.<codec suffix>; codecs: "npz" (a dict of arrays) and "json" (a JSON object).
  read    `Store.get`: a missing, unreadable or rejected (`accept`) entry is a miss — a damaged entry is
          recomputed, never trusted.
  write   `Store.put`: cr2.core.files.atomic_write — a killed run never leaves a half-written entry under a key.

`Store.get_or_compute(kind, key_parts, compute, codec)` is the whole protocol: (value, hit).

Tools that keep caches of their own get a named folder here and nowhere else (`Store.tool`, `tool_dir`; TOOLS):
the ONNX export of the frozen encoder (`encoders`, keyed by the tool: weights digest and sequence length), the
packaged tokenizers (`tokenizers`), torch's compiled decode steps (`torch-compile`) and an empty, migrated Prefect
database (`prefect-db`). No code outside this module
builds a path under the cache root.
"""
from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cr2.core.files import atomic_write
# the ids of stored studies are pure hashing (cr2.core.hashing), named here too for the tasks that key studies
from cr2.core.hashing import content_fingerprint, study_file_digest, study_id  # noqa: F401


def cache_key(kind: str, *parts: Any) -> str:
    """The key of a `kind` of value computed from `parts` (each taken by its string form): '<kind>-<16 hex>'.
    Stage keys (cr2_tasks.common.Stage.key), artefact keys (cr2_tasks.common.Artefact.key) and every store entry use it."""
    return f"{kind}-{content_fingerprint(kind, *(str(p) for p in parts))}"


#: the folders tools keep their own caches in (each keys its files itself): name → what it holds
TOOLS = {"encoders": "the ONNX export of the frozen sentence encoder (cr2.inputs.embed), per weights and length",
         "tokenizers": "the packaged tokenizers, unpacked (cr2.inputs.tokenizer, cr2.labels.lmeval)",
         "torch-compile": "torch inductor's compiled decode steps of the hf labelling backend",
         "prefect-db": "an empty, migrated Prefect database per Prefect version, a new Prefect home's first state "
                       "(cr2_cli.prefect_api.seed_database)"}


def tool_dir(home: str | Path, name: str) -> Path:
    """The folder of tool `name` (TOOLS) in the store of a cr2 home, created."""
    return Store.of(home).tool(name)


def cache_dir(home: str | Path) -> Path:
    """The store's root: $CR2_CACHE, else <home>/cache (derived, re-creatable files)."""
    env = os.environ.get("CR2_CACHE")
    d = Path(env) if env else Path(home) / "cache"
    d.mkdir(parents=True, exist_ok=True)
    return d


@dataclass(frozen=True)
class Codec:
    """How one kind of value is written to and read from an entry file."""

    suffix: str
    write: Callable[[Any, Path], None]  # write(value, path)
    read: Callable[[Path], Any]  # raises OSError / ValueError / KeyError on a damaged file


def _write_npz(value: dict[str, np.ndarray], path: Path) -> None:
    with open(path, "wb") as fh:  # a file object: savez adds no suffix
        np.savez(fh, **value)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def _read_json(path: Path) -> dict:
    value = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(value, dict):
        raise ValueError(f"{path} holds no JSON object")
    return value


CODECS: dict[str, Codec] = {
    "npz": Codec(".npz", _write_npz, _read_npz),
    "json": Codec(".json", lambda value, path: path.write_text(json.dumps(value), encoding="utf-8"), _read_json),
}


def _codec(codec: str | Codec) -> Codec:
    return CODECS[codec] if isinstance(codec, str) else codec


@dataclass(frozen=True)
class Store:
    """A content-addressed store rooted at `root` (module docstring). Picklable: fit workers get it as it is."""

    root: Path

    @classmethod
    def of(cls, home: str | Path) -> "Store":
        """The store of a cr2 home (cache_dir)."""
        return cls(cache_dir(home))

    def folder(self, name: str) -> Path:
        """A folder of the store (created): <root>/<name>."""
        d = Path(self.root) / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def tool(self, name: str) -> Path:
        """The folder of tool `name` (TOOLS), created; any other name is refused."""
        if name not in TOOLS:
            from cr2.core.errors import InvalidValueError

            raise InvalidValueError(f"no tool folder {name!r} in the store; the tools are {', '.join(TOOLS)}")
        return self.folder(name)

    def path(self, kind: str, key: str, codec: str | Codec) -> Path:
        """The entry file of `key`: <root>/<kind>/<key><suffix>."""
        return Path(self.root) / kind / f"{key}{_codec(codec).suffix}"

    def get(self, kind: str, key: str, codec: str | Codec, accept: Callable[[Any], bool] | None = None) -> Any:
        """The value stored under `key`, or None when there is none, it cannot be read whole or `accept` rejects it."""
        path = self.path(kind, key, codec)
        if not path.is_file():
            return None
        try:
            value = _codec(codec).read(path)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # damaged: recomputed, never trusted
            return None
        return value if accept is None or accept(value) else None

    def put(self, kind: str, key: str, value: Any, codec: str | Codec) -> Path:
        """Store `value` under `key` (atomically: readers see the previous entry or this one, whole)."""
        c = _codec(codec)
        return atomic_write(self.path(kind, key, c), lambda tmp: c.write(value, tmp))

    def get_or_compute(self, kind: str, key_parts: Sequence[Any], compute: Callable[[], Any], codec: str | Codec,
                       accept: Callable[[Any], bool] | None = None) -> tuple[Any, bool]:
        """(value, hit): the value stored under cache_key(kind, *key_parts), or compute() stored there now."""
        key = cache_key(kind, *key_parts)
        value = self.get(kind, key, codec, accept)
        if value is not None:
            return value, True
        value = compute()
        self.put(kind, key, value, codec)
        return value, False


def store(home: str | Path) -> Store:
    """The store of a cr2 home."""
    return Store.of(home)
