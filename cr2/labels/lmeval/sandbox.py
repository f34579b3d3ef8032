"""Check an untrusted Python program (a model's MBPP completion) against its tests, in a sandbox it cannot talk its
way out of.

The verdict comes from a channel the program cannot reach. `run_tests` starts a judge process
(cr2/labels/lmeval/sandbox_supervisor.py, standard library only, `python -I -S`) with the job on its stdin; the
judge forks a worker that runs the program, and asks it, over a socket, for the values the tests need
(`remove_Occ("hello", "l")`), which come back as plain data only (exact builtin value types). The judge
evaluates the expected values itself and compares; its verdict travels on its own stdout pipe, which
the worker never holds. So a completion that prints a pass marker, calls `os._exit(0)` before the
asserts, or returns an object whose `__eq__` always says True does not pass.

Containment of the worker (what held is reported in `SandboxResult.isolation`; details in the
supervisor's docstring and docs/labeling.md §5):
- a private temporary directory as cwd, HOME and TMPDIR; an environment with nothing else (but
  LC_CTYPE=C.UTF-8, which Python would add itself); no inherited
  descriptor but its socket; stdin /dev/null; stdout/stderr to files (tails kept for diagnostics);
- rlimits (RLIMIT_AS, RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_CPU, RLIMIT_CORE = 0), no_new_privs,
  a wall-clock timeout (default 10 s);
- as root: an unprivileged user (default `nobody`) — RLIMIT_NPROC is not enforced for root;
- where the platform allows (root, or unprivileged user namespaces): PID, network, mount, IPC and UTS
  namespaces — every descendant dies with the worker (setsid ones included), no network (not even
  127.0.0.1), a /proc of its own (no /proc/<ppid>/environ), every filesystem read-only but its folder;
- always: the judge is a child subreaper (orphaned descendants are killed at the end even without a PID
  namespace) and non-dumpable (a same-user program cannot trace it or read its descriptors).
No `preexec_fn` (unsafe in the threaded labeling process): all set-up happens in the judge, a fresh
single-threaded process.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cr2.core.errors import InvalidValueError

log = logging.getLogger(__name__)

_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
_TAIL_BYTES = 4096


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run."""

    timeout_s: float = 10.0  # wall clock, s
    memory_bytes: int = 1 << 30  # RLIMIT_AS, bytes of address space
    max_processes: int = 8  # RLIMIT_NPROC, processes of the (unprivileged) user
    max_file_bytes: int = 8 << 20  # RLIMIT_FSIZE, bytes per written file (stdout/stderr included)
    max_open_files: int = 64  # RLIMIT_NOFILE
    user: str | None = "nobody"  # run as this user when cr2 runs as root; None: never switch
    python: str | None = None  # interpreter; None: this one, or a system python3 the user can run
    tmp_root: str | None = None  # parent folder of the per-run temporary directories; None: the system's
    namespaces: bool = True  # use Linux namespaces where the platform allows (False: only for tests of the fallback)

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise InvalidValueError(f"SandboxLimits.timeout_s must be > 0 (got {self.timeout_s})")
        for name in ("memory_bytes", "max_processes", "max_file_bytes", "max_open_files"):
            if getattr(self, name) < 1:
                raise InvalidValueError(f"SandboxLimits.{name} must be >= 1 (got {getattr(self, name)})")


@dataclass(frozen=True)
class SandboxResult:
    """What happened to one sandboxed program."""

    passed: bool  # the judge's verdict: the program ran and every assert held on plain data
    returncode: int | None  # the worker's exit status (negative: a signal); None: still running when ended
    timed_out: bool
    duration_s: float  # wall clock, s
    stdout_tail: str  # last 4 KB
    stderr_tail: str  # last 4 KB
    user: str  # the user the program ran as
    detail: str = ""  # why it passed or failed (the failing assert and both values, the exception, …)
    isolation: dict = field(default_factory=dict)  # the containment that held (see the supervisor's docstring)


def _world_usable(path: Path) -> bool:
    """True if a user other than the owner can execute `path` (every parent traversable, file o+x)."""
    real = Path(os.path.realpath(path))
    if not real.is_file() or not real.stat().st_mode & stat.S_IXOTH:
        return False
    return all(p.stat().st_mode & stat.S_IXOTH for p in real.parents)


def _resolve_identity(limits: SandboxLimits) -> tuple[pwd.struct_passwd | None, str]:
    """(the user to switch to or None, the interpreter to run)."""
    preferred = limits.python or sys.executable
    if os.geteuid() != 0 or not limits.user:
        return None, preferred
    try:
        account = pwd.getpwnam(limits.user)
    except KeyError:
        log.warning("sandbox user %r does not exist; running MBPP programs as root without RLIMIT_NPROC", limits.user)
        return None, preferred
    for candidate in (preferred, *_SYSTEM_PYTHONS):
        if Path(candidate).exists() and _world_usable(Path(candidate)):
            return account, candidate
    log.warning(
        "no Python interpreter that user %r can run (tried %s and %s); running MBPP programs as root",
        limits.user, preferred, ", ".join(_SYSTEM_PYTHONS),
    )
    return None, preferred


def drops_privileges(limits: SandboxLimits | None = None) -> bool:
    """True if programs will run as an unprivileged user (cr2 runs as root and the user is usable)."""
    account, _ = _resolve_identity(limits or SandboxLimits())
    return account is not None


def _rlimits(limits: SandboxLimits) -> list[tuple[str, int]]:
    return [
        ("RLIMIT_AS", int(limits.memory_bytes)),
        ("RLIMIT_NPROC", int(limits.max_processes)),
        ("RLIMIT_FSIZE", int(limits.max_file_bytes)),
        ("RLIMIT_NOFILE", int(limits.max_open_files)),
        ("RLIMIT_CPU", int(math.ceil(limits.timeout_s)) + 1),
        ("RLIMIT_CORE", 0),
    ]


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - _TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


SUPERVISOR = Path(__file__).with_name("sandbox_supervisor.py")
JUDGE_VERSION = "2-judge-process"  # 1: exit 0 + a printed nonce; 2: the judge compares plain data (part of run ids)
_JUDGE_MEMORY_BYTES = 2 << 30  # the judge decodes at most 16 MiB per value


def run_tests(program: str, tests: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run `program` in the sandbox, then `tests` (setup statements and asserts) against it; the verdict is the
    judge's (cr2/labels/lmeval/sandbox_supervisor.py), never the program's. Never raises for the program's failures."""
    account, python = _resolve_identity(limits)
    # <base> stays cr2's (0711: others may pass through to cwd, not list it); it holds the worker's stdout/stderr
    # (0600); <base>/cwd is the program's folder (cwd, HOME, TMPDIR)
    base = Path(tempfile.mkdtemp(prefix="cr2-sandbox-", dir=limits.tmp_root))
    try:
        base.chmod(0o711)
        workdir = base / "cwd"
        workdir.mkdir(mode=0o700)
        if account is not None:
            os.chown(workdir, account.pw_uid, account.pw_gid)
        job = {
            "program": program, "tests": tests, "timeout_s": float(limits.timeout_s), "workdir": str(workdir),
            "stdout": str(base / "stdout"), "stderr": str(base / "stderr"), "python": python,
            "rlimits": _rlimits(limits), "namespaces": limits.namespaces,
            "judge_rlimits": [("RLIMIT_AS", max(_JUDGE_MEMORY_BYTES, int(limits.memory_bytes))),
                              ("RLIMIT_CPU", int(math.ceil(limits.timeout_s)) + 10), ("RLIMIT_CORE", 0)],
            "uid": account.pw_uid if account else None, "gid": account.pw_gid if account else None,
            "user_name": account.pw_name if account else pwd.getpwuid(os.geteuid()).pw_name,
        }
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-X", "utf8", str(SUPERVISOR)], cwd=base, env={},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            close_fds=True,
        )
        try:
            out, err = proc.communicate(json.dumps(job).encode(), timeout=limits.timeout_s + 15)
        except subprocess.TimeoutExpired:  # the judge itself hung: end it (and, with it, its worker)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        duration = time.monotonic() - start
        try:
            verdict = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
        except (IndexError, ValueError):
            verdict = {"passed": False, "timed_out": duration >= limits.timeout_s, "returncode": None, "isolation": {},
                       "detail": "the judge gave no verdict: " + err.decode("utf-8", "replace")[-_TAIL_BYTES:]}
        return SandboxResult(
            passed=verdict["passed"] is True, returncode=verdict.get("returncode"),
            timed_out=bool(verdict.get("timed_out")), duration_s=duration, stdout_tail=_tail(base / "stdout"),
            stderr_tail=_tail(base / "stderr"), user=job["user_name"], detail=str(verdict.get("detail", "")),
            isolation=verdict.get("isolation", {}),
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_program(source: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run `source` alone (no tests): `passed` means it ran to its end without raising. For resource limits
    and containment; a verdict on a completion comes from run_tests / check_completion."""
    return run_tests(source, "", limits)


def check_completion(completion: str, tests: str, limits: SandboxLimits = SandboxLimits()) -> bool:
    """True iff the completion passes its tests (MBPP setup code + asserts) in the sandbox (pass@1 of one sample)."""
    return run_tests(completion, tests, limits).passed


def isolation_report(limits: SandboxLimits = SandboxLimits(timeout_s=5.0)) -> dict:
    """What the sandbox contains on this machine (namespaces, network, /proc, read-only filesystem, user)."""
    return run_program("pass", limits).isolation
