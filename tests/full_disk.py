"""A full disk for the tests, made by the kernel, not by a mock.

Where this process may mount (root), `FullDisk` is a small tmpfs filled to its last few KiB: writes there fail with
ENOSPC ("No space left on device"), as on a real full disk. Elsewhere (a CI runner without root) the folder is an
ordinary one and the command under test runs with RLIMIT_FSIZE set to a few KiB (SIGXFSZ ignored): a write beyond
that fails with EFBIG ("File too large") in the command and in every process it starts — the same failed write,
reported with the other errno. Commands run in a subprocess (`run`), so the limit never touches the test process.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

LEFT_BYTES = 4096  # what the filled disk (or the file-size limit) leaves for writes


def _can_mount() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and Path("/bin/mount").exists()


class FullDisk:
    """`folder`: where the command under test finds a full disk once `fill()` was called (a context manager)."""

    def __init__(self, root: Path, size_bytes: int = 8 << 20):
        self.folder = Path(root) / "disk"
        self.folder.mkdir(parents=True)
        self.mounted = _can_mount() and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(self.folder)],
            capture_output=True).returncode == 0
        self.filled = False

    @property
    def mechanism(self) -> str:
        return "tmpfs ENOSPC" if self.mounted else "RLIMIT_FSIZE EFBIG"

    def fill(self) -> None:
        """Take all but LEFT_BYTES of the tmpfs (without one, the file-size limit of `run` does the same)."""
        self.filled = True
        if not self.mounted:
            return
        st = os.statvfs(self.folder)
        with open(self.folder / ".filler", "wb") as fh:
            fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - LEFT_BYTES))

    def run(self, args: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """`cr2 ARGS` in a subprocess that meets the full disk; stdout and stderr together, as text."""
        return self.python(["-c", "from cr2_cli.main import main; main()", *map(str, args)], env, timeout)

    def python(self, args: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """`python ARGS` in a subprocess that meets the full disk; stdout and stderr together, as text."""

        def limit() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death; kept across exec
            resource.setrlimit(resource.RLIMIT_FSIZE, (LEFT_BYTES, LEFT_BYTES))

        preexec = limit if self.filled and not self.mounted else None
        return subprocess.run([sys.executable, *args], env=env, preexec_fn=preexec, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)

    def __enter__(self) -> "FullDisk":
        return self

    def __exit__(self, *exc) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.folder)], capture_output=True)
