"""What every cr2 task shares: cache keys from content fingerprints, result storage, the warehouse epoch.

Prefect's default cache policy includes the flow-run id, so it caches only within one run. cr2 tasks
instead take an explicit `key` parameter that the flow computes from
  - the content fingerprint of the task's inputs (files, warehouse tables),
  - the hash of the config sections the task reads,
  - the hash of the source code of the modules it runs (cr2 library + the task module),
  - the warehouse's epoch (a random id written when the warehouse file is created, so a deleted or
    replaced warehouse never reuses results computed for another one),
and `cache_key_fn` returns it. Results (small JSON-able summaries) persist under <home>/prefect-results.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import os
import uuid
from pathlib import Path
from typing import Any

from prefect import Task

from warehouse.db import Warehouse


def key_from_parameters(context: Any, parameters: dict[str, Any]) -> str:
    """cache_key_fn: the task's explicit `key` parameter."""
    return str(parameters["key"])


def make_key(stage: str, *parts: Any) -> str:
    """A cache key: sha256 over the stage name and the string form of each part."""
    h = hashlib.sha256(stage.encode())
    for p in parts:
        h.update(b"\x1f" + str(p).encode())
    return f"{stage}-{h.hexdigest()[:24]}"


@functools.lru_cache(maxsize=None)
def code_hash(*module_names: str) -> str:
    """Hash of the source of the named modules (a code change invalidates the tasks that run it)."""
    h = hashlib.sha256()
    for name in sorted(module_names):
        module = importlib.import_module(name)
        h.update(inspect.getsource(module).encode())
    return h.hexdigest()[:16]


def file_hash(*paths: Path) -> str:
    """Content hash of files (missing files hash as 'missing', so they surface as errors in the task)."""
    h = hashlib.sha256()
    for p in paths:
        h.update(str(Path(p).name).encode())
        h.update(Path(p).read_bytes() if Path(p).is_file() else b"missing")
    return h.hexdigest()[:16]


def warehouse_epoch(wh: Warehouse) -> str:
    """The warehouse's random epoch id, created on first use."""
    row = wh.scalar("SELECT value FROM meta WHERE key = 'epoch'")
    if row is None:
        row = uuid.uuid4().hex
        with wh.transaction() as con:
            con.execute("INSERT INTO meta VALUES ('epoch', ?)", [row])
    return str(row)


def cache_dir(home: Path) -> Path:
    """Derived, re-creatable files (converted tokenizer, checkpoints): $CR2_CACHE or <home>/cache."""
    env = os.environ.get("CR2_CACHE")
    d = Path(env) if env else Path(home) / "cache"
    d.mkdir(parents=True, exist_ok=True)
    return d


def home_relative(home: str | Path, path: str | Path) -> str:
    """How the warehouse records a file: relative to the home when it lies inside it (so a copied or moved home
    works on its own), absolute otherwise (e.g. under $CR2_CACHE)."""
    p, h = Path(path).resolve(), Path(home).resolve()
    try:
        return p.relative_to(h).as_posix()
    except ValueError:
        return str(p)


def in_home(home: str | Path, stored: str | Path) -> Path:
    """The file a recorded path names: relative paths are relative to the home."""
    p = Path(stored)
    return p if p.is_absolute() else Path(home) / p


def results_dir(home: Path) -> Path:
    d = Path(home) / "prefect-results"
    d.mkdir(parents=True, exist_ok=True)
    return d


def bind(task: Task, home: Path) -> Task:
    """The task with its persisted-result cache under <home>/prefect-results."""
    return task.with_options(
        cache_key_fn=key_from_parameters, persist_result=True, result_storage=results_dir(home)
    )
