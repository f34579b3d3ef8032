"""Check an untrusted Python program (a model's MBPP completion) against its tests, in a sandbox it cannot talk its
way out of.

The verdict comes from a channel the program cannot reach. `run_tests` starts a judge process
(cr2/labels/lmeval/sandbox_supervisor.py, standard library only, `python -I -S`; forked, with its imports done, from
one fork server per process that runs no program and reads no job) with the job on its stdin; the
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
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
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


class _JudgeServer:
    """Starts judges for this process: a fork server (`sandbox_supervisor.py --serve`, started on first use, one
    per process) forks each from an interpreter that has done the judge's imports and nothing else, instead of
    starting a new interpreter per program (a third of a program's CPU time). A judge is still a fresh
    single-threaded process of its own session, with its own stdin, stdout and stderr pipes to the caller;
    it sees no other job. The server ends when this process does (its socket closes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = 0  # the pid that started the server: a forked child starts its own
        self._proc: subprocess.Popen | None = None
        self._control: socket.socket | None = None

    def _stop(self) -> None:
        if self._control is not None:
            self._control.close()
        if self._proc is not None and self._owner == os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
        self._proc = self._control = None

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-X", "utf8", str(SUPERVISOR), "--serve", str(theirs.fileno())],
                cwd="/", env={}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                start_new_session=True, close_fds=True,
            )
        finally:
            theirs.close()
        self._control, self._owner = ours, os.getpid()

    def _fork_judge(self, workdir: Path, fds: tuple[int, int, int]) -> int:
        with self._lock:
            for _ in range(2):  # a server that died (killed from outside) is replaced once
                if self._proc is None or self._owner != os.getpid() or self._proc.poll() is not None:
                    self._stop()
                    self._start()
                try:
                    socket.send_fds(self._control, [str(workdir).encode()], list(fds))
                    reply = b""
                    while not reply.endswith(b"\n"):
                        part = self._control.recv(64)
                        if not part:
                            raise ConnectionError("the judge server ended")
                        reply += part
                    pid = int(reply)
                    if pid > 0:
                        return pid
                except (OSError, ValueError):
                    pass
                self._stop()
        raise OSError("could not start an MBPP judge (the judge server failed twice)")

    def judge(self, workdir: Path, job: bytes, timeout_s: float) -> tuple[bytes, bytes]:
        """The judge's (stdout, stderr) for `job`, run in `workdir`; a judge still running after `timeout_s` is
        killed (and, with it, its worker)."""
        job_r, job_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            pid = self._fork_judge(workdir, (job_r, out_w, err_w))
        except BaseException:
            for fd in (job_w, out_r, err_r):
                os.close(fd)
            raise
        finally:
            for fd in (job_r, out_w, err_w):
                os.close(fd)
        got, timed_out = _exchange(job, job_w, out_r, err_r, time.monotonic() + timeout_s)
        if timed_out:  # the judge itself hung: end it, then read what it left
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            got, _ = _exchange(b"", None, out_r, err_r, None, got)
        return got[out_r], got[err_r]


def _exchange(job: bytes, job_w: int | None, out_r: int, err_r: int, deadline: float | None,
              got: dict[int, bytes] | None = None) -> tuple[dict[int, bytes], bool]:
    """Write `job` to job_w and read out_r and err_r to their ends (closing each fd when done), until `deadline`
    (None: no limit); returns ({fd: bytes read}, timed out)."""
    got = dict(got or {out_r: b"", err_r: b""})
    view = memoryview(job)
    with selectors.DefaultSelector() as sel:
        if job_w is not None:
            os.set_blocking(job_w, False)
            sel.register(job_w, selectors.EVENT_WRITE)
        sel.register(out_r, selectors.EVENT_READ)
        sel.register(err_r, selectors.EVENT_READ)
        while sel.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                if job_w is not None and job_w in sel.get_map():
                    os.close(job_w)
                return got, True
            for key, _ in sel.select(left):
                fd = key.fd
                if fd == job_w:
                    try:
                        view = view[os.write(fd, view[:1 << 16]):]
                    except BrokenPipeError:
                        view = view[:0]
                    if not view:
                        sel.unregister(fd)
                        os.close(fd)
                    continue
                data = os.read(fd, 1 << 16)
                if data:
                    got[fd] += data
                else:
                    sel.unregister(fd)
                    os.close(fd)
    return got, False


_JUDGES = _JudgeServer()


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
        out, err = _JUDGES.judge(base, json.dumps(job).encode(), limits.timeout_s + 15)
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
