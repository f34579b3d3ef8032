"""Writing files so that a reader sees the old content or the whole new one, never a half-written file."""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cr2.core.errors import DiskFullError

# how the OS, DuckDB and SQLite (Prefect's database) word a full disk, a quota or a file-size limit
DISK_FULL_TEXT = ("No space left on device", "Disk quota exceeded", "File too large", "database or disk is full")
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` itself says a write failed for want of space (an errno or the text DuckDB and SQLite use); a
    DiskFullError already says which file."""
    if isinstance(exc, DiskFullError):
        return False
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return (isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS) or any(t in first for t in DISK_FULL_TEXT)


def disk_full_error(where: str | Path, exc: BaseException, kept: str) -> DiskFullError:
    """The one message for a write that failed for want of space: the file, the system's words, what was kept
    (`kept`: the sentence saying nothing was half-written) and what to do."""
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return DiskFullError(f"cannot write {where}: the disk holding it is full, or a quota or file-size limit is "
                         f"reached ({first}). {kept} Free space on that disk (or point --home/CR2_HOME, or "
                         "CR2_CACHE for the cache, at another one) and run the command again.")


def temp_sibling(path: str | Path) -> Path:
    """A fresh hidden name beside `path` (same folder, so a rename onto `path` is atomic): .<name>.<random>.tmp —
    never ending in the target's suffix, so a reader listing *.parquet or *.npz never sees a file being written
    (a writer that appends a suffix to a path, such as numpy's savez, is given an open file instead)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")


def atomic_write(path: str | Path, write: bytes | str | Callable[[Path], Any]) -> Path:
    """Write `path` atomically: bytes or text (UTF-8) as given, or `write(tmp)` filling a temporary sibling (a path:
    open it, or hand it to a writer that writes exactly there), then one rename.

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
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and is_disk_full(exc):
            raise disk_full_error(path, exc, f"Nothing was half-written: {path} is as it was.") from None
        raise
    return path


def temp_dir_beside(path: str | Path, mode: int = 0o700) -> Path:
    """A fresh folder beside `path` (temp_sibling's name; private unless `mode` says otherwise) to fill before
    `replace_dir` moves it there."""
    tmp = temp_sibling(path)
    tmp.mkdir(mode=mode)
    return tmp


def replace_dir(tmp: str | Path, path: str | Path) -> Path:
    """Move the finished folder `tmp` to `path` with renames only: a folder already at `path` is replaced whole, and
    put back when the move fails, so readers see the old folder or the new one, never a mix. Returns `path`."""
    tmp, path = Path(tmp), Path(path)
    if not path.exists():
        os.replace(tmp, path)
        return path
    old = temp_sibling(path)
    os.replace(path, old)
    try:
        os.replace(tmp, path)
    except OSError:
        os.replace(old, path)  # put the previous folder back
        raise
    shutil.rmtree(old, ignore_errors=True)
    return path
