"""Writing files so that a reader sees the old content or the whole new one, never a half-written file."""
from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any


def temp_sibling(path: str | Path) -> Path:
    """A fresh hidden name beside `path` (same folder, so a rename onto `path` is atomic) that keeps its suffix
    (writers that add a suffix, such as numpy's savez, write exactly there): .<stem>.<random>.tmp<suffix>."""
    path = Path(path)
    return path.with_name(f".{path.stem}.{uuid.uuid4().hex[:12]}.tmp{path.suffix}")


def atomic_write(path: str | Path, write: bytes | str | Callable[[Path], Any]) -> Path:
    """Write `path` atomically: bytes or text as given, or `write(tmp)` filling a temporary sibling, then one rename.

    A failure or a killed process leaves `path` as it was (a failed write removes its temporary file); concurrent
    writers of the same content each rename a whole file. Creates the parent folder. Returns `path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    try:
        if isinstance(write, bytes):
            tmp.write_bytes(write)
        elif isinstance(write, str):
            tmp.write_text(write, encoding="utf-8")
        else:
            write(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path
