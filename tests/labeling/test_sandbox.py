"""The MBPP sandbox: a verdict no program can fake, hostile programs contained, limits kept.

Every hostile program here is bounded on its own (loops of at most N steps, sleeps of at most 30 s), so
even a broken sandbox could not take the shared test machine down.

Most properties hold on every platform (the verdict, early exits, equality tricks, descendants, the
environment, descriptors, limits) and are checked both with Linux namespaces and without them
(`namespaces=False`, the fallback of a non-root user where user namespaces are disabled). Network,
/proc and filesystem containment need namespaces or the root user switch: where this platform offers
neither, those tests skip with the reason (docs/labeling.md §5 documents the fallback).
"""
from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from cr2.labels.lmeval.sandbox import SandboxLimits, check_completion, drops_privileges, isolation_report, run_program, run_tests

FAST = SandboxLimits(timeout_s=3.0, memory_bytes=256 << 20, max_processes=8)
BOTH = pytest.mark.parametrize("ns", [True, False], ids=["namespaces", "fallback"])
ADD_TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"


def _limits(ns: bool, **kw) -> SandboxLimits:
    return SandboxLimits(**{"timeout_s": 3.0, "memory_bytes": 256 << 20, "max_processes": 8, "namespaces": ns, **kw})


@pytest.fixture(scope="module")
def isolation() -> dict:
    return isolation_report(FAST)


def _alive_with(token: str) -> list[int]:
    """Live processes whose command line contains `token` (zombies excluded)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmd and state not in ("Z", "X"):
            found.append(int(name))
    return found


# ------------------------------------------------------------------ the verdict
@BOTH
def test_correct_program_passes_and_a_wrong_one_fails_naming_the_assert(ns):
    assert check_completion("def add(a, b):\n    return a + b\n", ADD_TESTS, _limits(ns))
    res = run_tests("def add(a, b):\n    return a * b\n", ADD_TESTS, _limits(ns))
    assert not res.passed and "assert 1 failed" in res.detail and "got 6 and 5" in res.detail


@BOTH
@pytest.mark.parametrize("cheat", [
    "print('PASS', flush=True)\nimport os\nos._exit(0)\n",  # a pass marker, then exit 0 before the asserts
    "import sys\nsys.exit(0)\n",
    "raise SystemExit(0)\n",
    "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "import builtins\nbuiltins.AssertionError = type('Never', (Exception,), {})\n",  # asserts are not run here
    "import os\nfor fd in range(0, 64):\n    try:\n        os.write(fd, b'{\"passed\": true, \"ok\": true}\\n')\n"
    "    except OSError:\n        pass\n",  # a forged verdict on every descriptor it has
])
def test_a_program_cannot_fake_a_pass(ns, cheat):
    completion = "def add(a, b):\n    return 0\n" + cheat
    res = run_tests(completion, ADD_TESTS, _limits(ns))
    assert not res.passed, res


@BOTH
@pytest.mark.parametrize("value", [
    "type('Any', (), {'__eq__': lambda s, o: True, '__hash__': lambda s: 0})()",
    "type('I', (int,), {'__eq__': lambda s, o: True, '__hash__': lambda s: 0})(0)",
    "type('S', (str,), {'__eq__': lambda s, o: True, '__hash__': lambda s: 0})('x')",
    "type('L', (list,), {'__eq__': lambda s, o: True})()",
    "__import__('unittest.mock', fromlist=['ANY']).ANY",
])
def test_equality_tricks_fail(ns, value):
    res = run_tests(f"def add(a, b):\n    return {value}\n", ADD_TESTS, _limits(ns))
    assert not res.passed and "cannot be compared" in res.detail, res.detail


def test_plain_data_of_stdlib_value_types_compares_as_python_does():
    completion = ("from collections import Counter, OrderedDict, deque\nfrom fractions import Fraction\n"
                  "def f(k):\n    return {'c': Counter('aab'), 'o': OrderedDict(a=1), 'q': deque([1]), 'fr': Fraction(1, 2),"
                  " 'set': {(1, 2)}, 'b': b'x', 'z': 1 + 2j, 'nan': float('inf'), 'r': range(3)}[k]\n")
    tests = ("assert f('c') == {'a': 2, 'b': 1}\nassert f('o') == {'a': 1}\nassert f('fr') == 0.5\n"
             "assert f('set') == {(1, 2)}\nassert f('b') == b'x'\nassert f('z') == 1 + 2j\nassert f('nan') > 1e308\n"
             "assert f('r') == range(0, 3)\nassert f('q') != [1]\n")
    res = run_tests(completion, tests, FAST)
    assert res.passed, res.detail


def test_big_integers_cross_as_in_python():
    import math
    import sys

    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        expected = str(math.factorial(2000))  # 5,736 digits: over Python's default conversion limit of 4,300
    finally:
        sys.set_int_max_str_digits(old)
    completion = "import math\ndef f(n):\n    return math.factorial(n)\n"
    res = run_tests(completion, f"assert f(2000) == {expected}\n", FAST)
    assert res.passed, res.detail


def test_mbpp_setup_code_and_non_literal_expected_values_run_like_the_plain_program():
    completion = "import sys\nclass Node:\n    def __init__(self, v):\n        self.v, self.left = v, None\n" \
                 "def depth(n):\n    return 0 if n is None else 1 + depth(n.left)\n"
    tests = "root = Node(1)\nroot.left = Node(2)\nassert depth(root) == 2\nassert sys.getsizeof(()) == sys.getsizeof(())\n"
    assert check_completion(completion, tests, FAST)


# ------------------------------------------------------------------ containment
@BOTH
def test_setsid_daemon_does_not_outlive_the_run(ns):
    token = f"cr2-daemon-{uuid.uuid4().hex}"
    program = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)', {token!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "def add(a, b):\n    return a + b\n"
    )
    res = run_tests(program, ADD_TESTS, _limits(ns, timeout_s=5.0))
    assert res.passed, res.detail
    time.sleep(0.3)
    assert not _alive_with(token), "a setsid grandchild outlived the sandbox"


def test_infinite_loop_is_killed_at_the_timeout():
    t0 = time.monotonic()
    res = run_program("while True:\n    pass\n", SandboxLimits(timeout_s=1.5, memory_bytes=256 << 20))
    assert res.timed_out and not res.passed
    assert time.monotonic() - t0 < 8.0


def test_fork_bomb_attempt_is_bounded_and_cleaned_up():
    token = f"cr2-forkbomb-{uuid.uuid4().hex}"
    program = (
        "import os, sys, time\n"
        "n = 0\n"
        "for _ in range(40):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)', {token!r}])\n"
        "    n += 1\n"
        "print('FORKED', n, flush=True)\n"
        "time.sleep(30)\n"
    )
    limits = SandboxLimits(timeout_s=2.0, memory_bytes=256 << 20, max_processes=8)
    res = run_program(program, limits)
    assert res.timed_out and not res.passed
    forked = int(next(ln for ln in res.stdout_tail.splitlines() if ln.startswith("FORKED")).split()[1])
    if drops_privileges(limits) or os.geteuid() != 0:  # RLIMIT_NPROC is not enforced for root
        assert forked < 8, f"RLIMIT_NPROC=8 let the program fork {forked} children"
    time.sleep(0.3)
    assert not _alive_with(token), "forked children outlived the sandbox"


def test_memory_hog_fails_fast_under_rlimit_as():
    program = "chunks = []\nfor _ in range(100):\n    chunks.append(bytearray(64 << 20))\n"
    t0 = time.monotonic()
    res = run_program(program, SandboxLimits(timeout_s=10.0, memory_bytes=256 << 20))
    assert not res.passed and not res.timed_out and "MemoryError" in res.detail
    assert time.monotonic() - t0 < 8.0


def test_a_flood_of_returned_data_fails_without_hurting_the_judge():
    res = run_tests("def add(a, b):\n    return [0] * 6_000_000\n", ADD_TESTS,
                    SandboxLimits(timeout_s=20.0, memory_bytes=1 << 30))
    assert not res.passed and "judge gave no verdict" not in res.detail
    assert "bytes for one value" in res.detail or "MemoryError" in res.detail or res.timed_out, res.detail


@BOTH
def test_cwd_and_home_are_a_private_folder_the_environment_empty_and_no_descriptor_inherited(ns, monkeypatch):
    monkeypatch.setenv("CR2_TEST_SECRET", "s3cr3t")
    keep = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(keep, True)  # even an inheritable descriptor of the caller must not reach the program
    try:
        program = ("import os\nENV = dict(os.environ)\nCWD = os.getcwd()\nFDS = sorted(int(f) for f in os.listdir('/dev/fd'))\n"
                   "open('mine.txt', 'w').write('ok')\n")
        tests = ("assert sorted(ENV) == ['HOME', 'LC_CTYPE', 'TMPDIR']\nassert ENV['HOME'] == CWD == ENV['TMPDIR']\n"
                 "assert os.listdir(CWD) == ['mine.txt']\nassert FDS[:4] == [0, 1, 2, 3] and len(FDS) <= 5\n")
        res = run_tests(program, tests, _limits(ns))
    finally:
        os.close(keep)
    assert res.passed, res.detail


def test_program_deleting_its_cwd_touches_nothing_outside(tmp_path):
    root = tmp_path / "sandboxes"
    root.mkdir()
    keep = tmp_path / "keep.txt"
    keep.write_text("outside the sandbox")
    program = (
        "import os, shutil\n"
        "for name in os.listdir('.'):\n"
        "    shutil.rmtree(name) if os.path.isdir(name) else os.remove(name)\n"
        "assert os.listdir('.') == []\n"
    )
    res = run_program(program, SandboxLimits(timeout_s=5.0, memory_bytes=256 << 20, tmp_root=str(root)))
    assert res.passed, res.detail
    assert keep.read_text() == "outside the sandbox"
    assert list(root.iterdir()) == [], "the sandbox's temporary directory was not removed"


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root run switches to an unprivileged user")
def test_root_runs_programs_unprivileged(tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("x")
    limits = SandboxLimits(timeout_s=5.0, memory_bytes=256 << 20, namespaces=False)
    if not drops_privileges(limits):
        pytest.skip("no usable unprivileged user/interpreter on this machine")
    res = run_program(f"import os\nassert os.getuid() != 0\nos.remove({str(keep)!r})\n", limits)
    assert not res.passed and res.user == "nobody" and "PermissionError" in res.detail
    assert keep.exists()


def _needs(isolation: dict, key: str) -> None:
    if not isolation.get(key):
        pytest.skip(f"this platform gives the sandbox no {key} (namespaces: {isolation.get('namespaces')}); "
                    "docs/labeling.md §5")


def test_namespaces_are_used_where_the_platform_allows(isolation):
    if "unavailable" in str(isolation.get("namespaces")):
        pytest.skip(f"no namespaces here: {isolation['namespaces']}")
    assert isolation["pid_namespace"] and isolation["network_isolated"] and isolation["subreaper"]
    if "filesystem_error" in isolation:
        pytest.skip(f"namespaces, but no private mounts here: {isolation['filesystem_error']}")
    assert isolation["readonly_outside_workdir"] and isolation["proc"] != "shared"


def test_socket_to_loopback_is_refused(isolation):
    _needs(isolation, "network_isolated")
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    got: list = []

    def accept():
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and not got:
            try:
                got.append(srv.accept())
            except socket.timeout:
                pass

    t = threading.Thread(target=accept)
    t.start()
    program = ("import socket\ns = socket.socket()\ns.settimeout(2)\ntry:\n"
               f"    s.connect(('127.0.0.1', {port}))\n    s.sendall(b'POST /v1/chat/completions')\n    R = 'connected'\n"
               "except OSError as e:\n    R = type(e).__name__\n")
    res = run_tests(program, "assert R == 'connected'\n", FAST)
    t.join()
    srv.close()
    assert not got, "the program reached a loopback service"
    assert not res.passed and "connected" in res.detail


def test_caller_environment_is_out_of_reach(isolation, monkeypatch):
    if isolation.get("proc") == "shared" and not drops_privileges(FAST):
        pytest.skip("without namespaces or a user switch a same-user program can read /proc/<pid>/environ "
                    "(docs/labeling.md §5)")
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    monkeypatch.setenv("CR2_TEST_SECRET", secret)
    program = (
        "import os\nFOUND = []\n"
        "for pid in ['self', str(os.getppid()), '1'] + os.listdir('/proc'):\n"
        "    try:\n"
        "        FOUND.append(open('/proc/%s/environ' % pid, 'rb').read())\n"
        "    except Exception:\n"
        "        pass\n"
        "print(b''.join(FOUND)[-2000:])\n"
    )
    res = run_tests(program, "assert not any(b'CR2_TEST_SECRET' in f for f in FOUND)\n", FAST)
    assert res.passed, res.detail
    assert secret not in res.stdout_tail


def test_writes_outside_the_private_folder_fail(isolation, tmp_path):
    _needs(isolation, "readonly_outside_workdir")
    target = tmp_path / "outside"
    target.mkdir()
    target.chmod(0o777)  # writable for anyone: only the sandbox can stop the write
    token = uuid.uuid4().hex
    paths = [str(target / "x.txt"), f"/tmp/cr2-escape-{token}", f"/dev/shm/cr2-escape-{token}"]
    program = ("WROTE = []\n"
               f"for p in {paths!r}:\n"
               "    try:\n        open(p, 'w').write('escaped')\n        WROTE.append(p)\n"
               "    except OSError:\n        pass\n")
    res = run_tests(program, "assert WROTE == []\n", FAST)
    assert res.passed, res.detail
    assert not any(Path(p).exists() for p in paths)


@pytest.mark.slow
def test_every_mbpp_reference_solution_gets_the_plain_programs_verdict():
    """The judge changes no honest verdict: MBPP's own solutions pass exactly when `solution + tests` runs clean
    (973 of 974 always; task 123 runs close to the 10 s limit, so whether it times out depends on the machine's
    speed and load — it may pass or time out, nothing else may fail)."""
    from concurrent.futures import ThreadPoolExecutor

    import pandas as pd

    from cr2.labels.lmeval.docs import mbpp_reference
    from tests.conftest import DATA

    df = pd.read_parquet(DATA / "benchmarks" / "mbpp.parquet")
    limits = SandboxLimits(timeout_s=10.0)
    with ThreadPoolExecutor(2) as ex:
        verdicts = list(ex.map(lambda r: run_tests(r.target, mbpp_reference(list(r.tests), r.test_setup), limits),
                               df.itertuples()))
    failed = [(q, v.detail) for q, v in zip(df["query_id"], verdicts) if not v.passed]
    assert {q for q, _ in failed} <= {"mbpp/123"}, failed
