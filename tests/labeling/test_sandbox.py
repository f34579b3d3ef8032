"""The MBPP sandbox: hostile programs end inside their limits and leave nothing behind.

Every hostile program here is bounded on its own (loops of at most N steps, sleeps of at most 30 s), so
even a broken sandbox could not take the shared test machine down; the sandbox's job, checked here, is
to end them early and clean up.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cr2.labeling.sandbox import SandboxLimits, check_completion, drops_privileges, run_program

FAST = SandboxLimits(timeout_s=3.0, memory_bytes=256 << 20, max_processes=8)


def _alive(pid: int) -> bool:
    """True if pid is a live process (a zombie counts as dead: it holds no resources but a table slot)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def test_correct_program_passes():
    completion = "def add(a, b):\n    return a + b\n"
    assert check_completion(completion, "assert add(2, 3) == 5\nassert add(-1, 1) == 0", FAST)


def test_wrong_program_fails_with_its_assertion():
    res = run_program("def add(a, b):\n    return a * b\nassert add(2, 3) == 5\n", FAST)
    assert not res.passed and res.returncode == 1 and "AssertionError" in res.stderr_tail


def test_exit_before_the_tests_does_not_pass():
    # a completion that exits 0 before the asserts run must not count as a pass
    completion = "import sys\ndef add(a, b):\n    return 0\nsys.exit(0)\n"
    res = run_program(completion + "assert add(2, 3) == 5\n", FAST)
    assert res.returncode == 0 and not res.passed


def test_infinite_loop_is_killed_at_the_timeout():
    limits = SandboxLimits(timeout_s=1.5, memory_bytes=256 << 20)
    t0 = time.monotonic()
    res = run_program("while True:\n    pass\n", limits)
    assert res.timed_out and not res.passed and res.returncode is None
    assert time.monotonic() - t0 < 6.0


def test_fork_bomb_attempt_is_bounded_and_cleaned_up():
    # bounded on purpose: at most 40 forks, children sleep 30 s; RLIMIT_NPROC (8) should stop it much
    # earlier, and the process-group kill must take every child down with the parent.
    program = (
        "import os, time\n"
        "pids = []\n"
        "for _ in range(40):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    pids.append(pid)\n"
        "print('PIDS', *pids, flush=True)\n"
        "time.sleep(30)\n"
    )
    limits = SandboxLimits(timeout_s=2.0, memory_bytes=256 << 20, max_processes=8)
    res = run_program(program, limits)
    assert res.timed_out and not res.passed
    line = next(ln for ln in res.stdout_tail.splitlines() if ln.startswith("PIDS"))
    pids = [int(p) for p in line.split()[1:]]
    if drops_privileges(limits) or os.geteuid() != 0:  # RLIMIT_NPROC is not enforced for root
        assert len(pids) < 8, f"RLIMIT_NPROC=8 let the program fork {len(pids)} children"
    time.sleep(0.2)
    assert not [p for p in pids if _alive(p)], "forked children outlived the sandbox"


def test_memory_hog_fails_fast_under_rlimit_as():
    program = "chunks = []\nfor _ in range(100):\n    chunks.append(bytearray(64 << 20))\nprint(len(chunks))\n"
    t0 = time.monotonic()
    res = run_program(program, SandboxLimits(timeout_s=10.0, memory_bytes=256 << 20))
    assert not res.passed and not res.timed_out and "MemoryError" in res.stderr_tail
    assert time.monotonic() - t0 < 8.0


def test_program_deleting_its_cwd_touches_nothing_outside(tmp_path):
    root = tmp_path / "sandboxes"
    root.mkdir()
    keep = tmp_path / "keep.txt"
    keep.write_text("outside the sandbox")
    repo_file = Path(__file__)
    repo_before = repo_file.read_bytes()
    program = (
        "import os, shutil\n"
        "for name in os.listdir('.'):\n"
        "    shutil.rmtree(name) if os.path.isdir(name) else os.remove(name)\n"
        "assert os.listdir('.') == []\n"
    )
    res = run_program(program, SandboxLimits(timeout_s=5.0, memory_bytes=256 << 20, tmp_root=str(root)))
    assert res.returncode == 0  # it did delete everything in its cwd (the nonce line still printed)
    assert res.passed
    assert keep.read_text() == "outside the sandbox" and repo_file.read_bytes() == repo_before
    assert list(root.iterdir()) == [], "the sandbox's temporary directory was not removed"


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root run switches to an unprivileged user")
def test_root_runs_programs_unprivileged(tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("x")
    limits = SandboxLimits(timeout_s=5.0, memory_bytes=256 << 20)
    if not drops_privileges(limits):
        pytest.skip("no usable unprivileged user/interpreter on this machine")
    res = run_program(f"import os\nprint(os.getuid())\nos.remove({str(keep)!r})\n", limits)
    assert not res.passed and res.user == "nobody"
    assert keep.exists()


def test_environment_is_minimal(monkeypatch):
    monkeypatch.setenv("CR2_TEST_SECRET", "s3cr3t")
    res = run_program("import os\nprint(sorted(os.environ))\nassert 'CR2_TEST_SECRET' not in os.environ\n", FAST)
    assert res.passed, res.stderr_tail
    assert "s3cr3t" not in res.stdout_tail
