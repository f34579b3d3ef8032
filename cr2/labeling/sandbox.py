"""Run an untrusted Python program (a model's MBPP completion plus its tests) in a resource-limited subprocess.

One subprocess per program, never in-process:
- a fresh temporary directory as its cwd (removed afterwards) and a minimal environment built from
  scratch (PATH, LANG, HOME=TMPDIR=cwd) — nothing of `os.environ`, so no tokens or keys leak in;
- `python -I -S` (isolated: no PYTHON* variables, no user or site packages), stdin from /dev/null,
  stdout/stderr to files in its cwd (a program that prints forever hits RLIMIT_FSIZE, not our memory);
- limits set with `resource.setrlimit` in the child before the program runs: RLIMIT_AS (memory),
  RLIMIT_NPROC (processes), RLIMIT_FSIZE (file size), RLIMIT_NOFILE, RLIMIT_CPU (a CPU-time backstop)
  and RLIMIT_CORE = 0;
- a wall-clock timeout (default 10 s); the program runs in its own session/process group, and that whole
  group is SIGKILLed afterwards (`os.killpg`) — also when the program exited normally, so forked children
  never outlive it. The group leader is reaped only after the kill, so its group id cannot be reused
  in between;
- when cr2 runs as root, the program runs as an unprivileged user (default `nobody`): the kernel does
  not enforce RLIMIT_NPROC for root, and an unprivileged program cannot touch the repository.

The limits are applied by a few lines of launcher code run with `python -c` inside the child, not by a
`preexec_fn`: Python documents `preexec_fn` as unsafe when the parent has threads, and the labeling
process always has them (torch, tokenizers, Prefect's thread pool). The uid/gid switch and `setsid`
happen in `subprocess`'s C code (`user=`, `group=`, `start_new_session=`), which is thread-safe.

This is resource containment, not a security boundary against a determined attacker (no namespaces or
seccomp; a program that calls `setsid()` itself leaves the process group): label on a machine or
container you are willing to let generated code run on.

A program passes only if it exits with status 0 *and* reaches its last line, which prints a random
nonce appended after the tests: a completion that calls `exit(0)` before the asserts does not pass.
"""
from __future__ import annotations

import logging
import math
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cr2.errors import InvalidValueError

log = logging.getLogger(__name__)

_LAUNCHER = """\
import resource, sys
for name, value in {limits!r}:
    resource.setrlimit(getattr(resource, name), (value, value))
sys.argv = ["program.py"]
with open("program.py", encoding="utf-8") as fh:  # relative: the parent folders may be closed to this user
    code = compile(fh.read(), "program.py", "exec")
del fh, name, value, resource
exec(code, {{"__name__": "__main__", "__builtins__": __builtins__}})
"""
_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
_MIN_PATH = "/usr/local/bin:/usr/bin:/bin"
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

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise InvalidValueError(f"SandboxLimits.timeout_s must be > 0 (got {self.timeout_s})")
        for name in ("memory_bytes", "max_processes", "max_file_bytes", "max_open_files"):
            if getattr(self, name) < 1:
                raise InvalidValueError(f"SandboxLimits.{name} must be >= 1 (got {getattr(self, name)})")


@dataclass(frozen=True)
class SandboxResult:
    """What happened to one sandboxed program."""

    passed: bool  # exit status 0 and the final nonce line printed
    returncode: int | None  # negative: killed by that signal; None: killed at the timeout
    timed_out: bool
    duration_s: float  # wall clock, s
    stdout_tail: str  # last 4 KB
    stderr_tail: str  # last 4 KB
    user: str  # the user the program ran as


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


def _wait_unreaped(pid: int, deadline: float) -> bool:
    """Wait until `pid` exits without reaping it (WNOWAIT); False if the deadline passed first."""
    delay = 0.001
    while True:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def run_program(source: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run `source` as a Python program under `limits`; returns how it ended (never raises for its failures)."""
    account, python = _resolve_identity(limits)
    nonce = secrets.token_hex(16)
    # <base>/cwd is the program's (and its user's) folder; stdout/stderr live beside it in <base>, which
    # stays root-owned, so a program that empties its cwd cannot take its own output away
    base = Path(tempfile.mkdtemp(prefix="cr2-sandbox-", dir=limits.tmp_root))
    try:
        workdir = base / "cwd"
        workdir.mkdir()
        program = workdir / "program.py"
        program.write_text(f"{source}\n\nprint({nonce!r}, flush=True)\n", encoding="utf-8")
        if account is not None:
            for p in (workdir, program):
                os.chown(p, account.pw_uid, account.pw_gid)
        env = {"PATH": _MIN_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(workdir),
               "TMPDIR": str(workdir), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
        cmd = [python, "-I", "-S", "-c", _LAUNCHER.format(limits=_rlimits(limits))]
        extra: dict = {}
        if account is not None:
            extra = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        out_path, err_path = base / "stdout", base / "stderr"
        start = time.monotonic()
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, close_fds=True, **extra,
            )
        try:
            exited = _wait_unreaped(proc.pid, start + limits.timeout_s)
        finally:
            # the leader is still unreaped here, so its process group id cannot have been reused
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        duration = time.monotonic() - start
        stdout = _tail(out_path)
        returncode = proc.returncode if exited else None
        passed = exited and returncode == 0 and stdout.rstrip().endswith(nonce)
        return SandboxResult(
            passed=bool(passed), returncode=returncode, timed_out=not exited, duration_s=duration,
            stdout_tail=stdout.replace(nonce, "<end>"), stderr_tail=_tail(err_path),
            user=account.pw_name if account is not None else pwd.getpwuid(os.geteuid()).pw_name,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


def mbpp_program(completion: str, tests: str) -> str:
    """The program that checks one MBPP completion: the completion, then the test code (setup + asserts)."""
    return f"{completion}\n\n{tests}\n"


def check_completion(completion: str, tests: str, limits: SandboxLimits = SandboxLimits()) -> bool:
    """True iff the completion passes its tests in the sandbox (pass@1 of one greedy sample)."""
    return run_program(mbpp_program(completion, tests), limits).passed
