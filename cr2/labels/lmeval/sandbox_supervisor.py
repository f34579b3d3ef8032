"""The MBPP judge: runs one untrusted program in an isolated worker process and decides, itself, whether it passes.

Run by cr2/labels/lmeval/sandbox.py as `python -I -S -X utf8 sandbox_supervisor.py --serve FD` (standard library
only: no site packages, no cr2): a fork server that forks one judge per program (`serve`). A judge reads one job
(JSON) on stdin and prints one verdict (JSON) on stdout; that pipe is the only channel a verdict travels on,
and the program never holds it. Without --serve the module is one judge, reading its job on stdin.

How a verdict is made
- The worker (a separate process) executes the program, then, on request, MBPP's setup statements and
  the operands of each assert that need the program's names (e.g. `remove_Occ("hello", "l")`). It
  returns each value as plain data: the codec below knows only exact builtin value types (None, bool,
  int, float, complex, str, bytes, list, tuple, set, frozenset, dict, range) and a few stdlib value types
  (OrderedDict, Counter, deque, Decimal, Fraction). An object with its own `__eq__`, or any other type,
  cannot cross, so "equality tricks" fail.
- The judge (this process) evaluates literal operands itself (`ast.literal_eval`: 2,919 of MBPP's 2,922
  expected values) and applies each comparison to plain data it decoded. A program that prints a pass
  marker, exits 0 early (`os._exit(0)`), raises SystemExit or kills itself simply never answers, so it fails.

How the worker is contained (each measure reported in the verdict's `isolation`)
- its own session; a private temporary directory as cwd, HOME and TMPDIR; an environment holding nothing
  else but LC_CTYPE=C.UTF-8 (which Python's locale coercion would add anyway); stdin /dev/null,
  stdout/stderr to files; no descriptor but its socket to the judge;
- rlimits: address space, processes, file size, open files, CPU time, no core files; no_new_privs;
- when run as root: the user switch to an unprivileged account (default `nobody`);
- Linux namespaces where the platform allows them (as root, or unprivileged user namespaces otherwise):
  PID (the worker is PID 1 of its namespace: when it ends, the kernel kills every descendant, setsid
  ones included; it sees and signals no process outside), network (no interface but a downed
  loopback: no connection anywhere, 127.0.0.1 included), mount (a fresh /proc that shows only its own
  processes, and every filesystem read-only except its directory), IPC and UTS;
- always: this judge is a child subreaper, so orphaned descendants are re-parented to it and killed when
  the run ends even without a PID namespace; and it is not dumpable, so a same-user program cannot trace
  it or read its memory or descriptors.
Without namespaces (non-root where user namespaces are disabled) network access, other processes of the
same user and writes outside the directory are NOT contained; `isolation` says so and docs/labeling.md §5
tells what to do.
"""
from __future__ import annotations

import ast
import base64
import ctypes
import json
import operator
import os
import resource
import signal
import _socket as socket  # the C module: socket.py builds its enums at import, a cost paid once per program
import struct
import sys
import time

MAX_FRAME = 16 << 20  # bytes of one message from the worker
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
_MOUNT_FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME,
                "strictatime": MS_STRICTATIME}

# The worker: runs the program and answers exec/eval requests with plain data. It is untrusted once the
# program ran (the program may replace any of it); the judge trusts nothing it sends but decoded data.
WORKER = r'''
import json, os, struct, sys
sys.set_int_max_str_digits(100_000)  # as the judge: big answers (factorials) cross, absurd ones do not
# fd 3 is the socket to the judge; plain os.read/os.write on it spare the socket module's import (enums
# built at import time), paid once per program

def _recvall(n):
    buf = b""
    while len(buf) < n:
        part = os.read(3, n - len(buf))
        if not part:
            raise SystemExit(0)
        buf += part
    return buf

def _send(obj):
    data = json.dumps(obj).encode()
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        view = view[os.write(3, view):]

def _encode(v, depth=0):
    if depth > 200:
        raise ValueError("nested too deeply")
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v if v == v and v not in (float("inf"), float("-inf")) else {"f": repr(v)}
    if t is list:
        return {"l": [_encode(x, depth + 1) for x in v]}
    if t is tuple:
        return {"t": [_encode(x, depth + 1) for x in v]}
    if t is set:
        return {"s": [_encode(x, depth + 1) for x in v]}
    if t is frozenset:
        return {"fs": [_encode(x, depth + 1) for x in v]}
    if t is dict:
        return {"d": [[_encode(k, depth + 1), _encode(x, depth + 1)] for k, x in v.items()]}
    if t is bytes:
        import base64
        return {"b": base64.b64encode(v).decode()}
    if t is complex:
        return {"c": [repr(v.real), repr(v.imag)]}
    if t is range:
        return {"r": [v.start, v.stop, v.step]}
    name = t.__module__ + "." + t.__qualname__
    if name == "collections.OrderedDict":
        return {"od": [[_encode(k, depth + 1), _encode(x, depth + 1)] for k, x in v.items()]}
    if name == "collections.defaultdict":
        return {"d": [[_encode(k, depth + 1), _encode(x, depth + 1)] for k, x in v.items()]}
    if name == "collections.Counter":
        return {"ctr": [[_encode(k, depth + 1), _encode(x, depth + 1)] for k, x in v.items()]}
    if name == "collections.deque":
        return {"dq": [_encode(x, depth + 1) for x in v]}
    if name == "decimal.Decimal":
        return {"dec": str(v)}
    if name == "fractions.Fraction":
        return {"fr": [v.numerator, v.denominator]}
    raise TypeError("a value of type " + name + " cannot be compared by the judge (only plain data can)")

_g = {"__name__": "__main__", "__builtins__": __builtins__}
while True:
    hdr = _recvall(4)
    msg = json.loads(_recvall(struct.unpack(">I", hdr)[0]))
    try:
        if msg["op"] == "exec":
            exec(compile(msg["src"], msg["name"], "exec"), _g)
            _send({"ok": None})
        else:
            _send({"ok": _encode(eval(compile(msg["src"], "<test>", "eval"), _g))})
    except BaseException as exc:
        _send({"error": (type(exc).__name__ + ": " + str(exc))[:500]})
'''


class WorkerGone(Exception):
    """The worker ended, timed out or sent something that is not a valid message."""


# ------------------------------------------------------------------ codec (judge side: plain data only)
def decode(v, depth: int = 0):
    """Plain data from the worker's encoding; anything unexpected raises ValueError/TypeError. (collections,
    decimal and fractions are imported by the tags that need them: most programs return none of them, and
    the imports would cost each judge a few milliseconds.)"""
    if depth > 210:
        raise ValueError("nested too deeply")
    if v is None or type(v) in (bool, int, float, str):
        return v
    if type(v) is not dict or len(v) != 1:
        raise ValueError("malformed value")
    (tag, x), = v.items()
    d = depth + 1
    if tag == "f":
        if x not in ("nan", "inf", "-inf"):
            raise ValueError("malformed float")
        return float(x)
    if tag in ("l", "t", "s", "fs", "dq"):
        if type(x) is not list:
            raise ValueError("malformed sequence")
        items = [decode(i, d) for i in x]
        if tag == "dq":
            import collections
            return collections.deque(items)
        return {"l": list, "t": tuple, "s": set, "fs": frozenset}[tag](items)
    if tag in ("d", "od", "ctr"):
        if type(x) is not list or not all(type(p) is list and len(p) == 2 for p in x):
            raise ValueError("malformed mapping")
        pairs = [(decode(k, d), decode(val, d)) for k, val in x]
        if tag == "d":
            return dict(pairs)
        import collections
        if tag == "od":
            return collections.OrderedDict(pairs)
        return collections.Counter(dict(pairs))
    if tag == "b":
        return base64.b64decode(x.encode(), validate=True)
    if tag == "c":
        return complex(float(x[0]), float(x[1]))
    if tag == "r":
        if not (type(x) is list and len(x) == 3 and all(type(i) is int for i in x)):
            raise ValueError("malformed range")
        return range(*x)
    if tag == "dec":
        import decimal
        return decimal.Decimal(str(x))
    if tag == "fr":
        if not (type(x) is list and len(x) == 2 and all(type(i) is int for i in x)):
            raise ValueError("malformed fraction")
        import fractions
        return fractions.Fraction(x[0], x[1])
    raise ValueError(f"unknown value tag {tag!r}")


# ------------------------------------------------------------------ isolation
# the interpreter's own symbols, libc's included: ctypes.util.find_library would spawn ldconfig for every program
_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def _mount(src, target, fstype, flags: int, data=None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def enter_namespaces(isolation: dict) -> None:
    """Unshare user (if not root), PID, network, IPC and UTS namespaces; record what held. (The worker
    unshares its own mount namespace: ours keeps its open files on mounts the worker makes read-only.)"""
    flags = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    root = os.geteuid() == 0
    uid, gid = os.geteuid(), os.getegid()
    try:
        _check(_libc.unshare(flags | (0 if root else CLONE_NEWUSER)), "unshare")
    except OSError as exc:
        isolation["namespaces"] = f"unavailable ({exc.strerror}): no PID, network or mount isolation"
        return
    if not root:  # map our own ids only: the program keeps no privilege once it execs
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    isolation["namespaces"] = "pid+net+ipc+uts" + ("" if root else "+user")
    isolation.update(pid_namespace=True, network_isolated=True)


def _mounts() -> list[tuple[str, set[str]]]:
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            out.append((point, set(fields[5].split(","))))
    return out


def private_filesystem(workdir: str, isolation: dict) -> None:
    """A mount namespace of the worker's own: a fresh /proc, and every mount read-only but the work directory."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(mount)")
    isolation["namespaces"] += "+mount"
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        isolation["proc"] = "private (only the worker's own processes)"
    except OSError:
        _mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=555")
        isolation["proc"] = "hidden (empty)"
    _mount(workdir, workdir, None, MS_BIND | MS_REC)
    failed = []
    for point, opts in sorted(_mounts(), key=lambda m: len(m[0])):
        if point == workdir or point.startswith(workdir + "/"):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name, bit in _MOUNT_FLAGS.items():
            if name in opts:
                flags |= bit
        try:
            _mount(None, point, None, flags)
        except OSError:
            failed.append(point)
    isolation["readonly_outside_workdir"] = not failed
    if failed:
        isolation["readonly_failed"] = failed[:10]


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as fh:
            return [int(t) for t in fh.read().split()]
    except OSError:  # no CONFIG_PROC_CHILDREN: scan every process's parent
        kids = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat") as fh:
                        if int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                            kids.append(int(name))
                except (OSError, IndexError, ValueError):
                    pass
        return kids


def sweep_children(limit_s: float = 10.0) -> bool:
    """Kill and reap every child until none is left; as a subreaper we inherit orphaned descendants (setsid
    ones included), so they go too. False if some were still alive after `limit_s`."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return True  # no child left
        time.sleep(0.005)
    return False


# ------------------------------------------------------------------ the worker process
def start_worker(job: dict, isolation: dict, sock: socket.socket, out_fd: int, err_fd: int) -> int:
    """Fork the worker; it sets up its filesystem, limits and user, reports that on a pipe, and execs Python."""
    report_r, report_w = os.pipe()  # close-on-exec: gone from the worker once it execs
    pid = os.fork()
    if pid:
        os.close(report_w)
        with os.fdopen(report_r) as fh:
            text = fh.read()
        if text:
            isolation.update(json.loads(text))
        return pid
    try:  # the child: trusted code until execve
        os.close(report_r)
        os.setsid()
        workdir = job["workdir"]
        mine: dict = {"namespaces": isolation.get("namespaces", "")}
        if isolation.get("pid_namespace"):
            try:
                private_filesystem(workdir, mine)
            except OSError as exc:
                mine["filesystem_error"] = str(exc)
        os.chdir(workdir)  # before the user switch: the folder's parent stays closed to that user
        for name, value in job["rlimits"]:
            resource.setrlimit(getattr(resource, name), (value, value))
        if job.get("uid") is not None:
            os.setgroups([])
            os.setgid(job["gid"])
            os.setuid(job["uid"])
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the user switch, which clears it
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        os.write(report_w, json.dumps(mine).encode())
        os.close(report_w)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.dup2(sock.fileno(), 3)
        os.closerange(4, 65536)
        os.execve(job["python"], [job["python"], "-I", "-S", "-X", "utf8", "-c", WORKER],
                  {"HOME": workdir, "TMPDIR": workdir, "LC_CTYPE": "C.UTF-8"})  # LC_CTYPE: Python would add it
    except BaseException as exc:  # noqa: BLE001
        try:
            os.write(err_fd, f"sandbox: worker setup failed: {exc!r}\n".encode())
        finally:
            os._exit(127)


class Channel:
    def __init__(self, sock: socket.socket, deadline: float):
        self.sock, self.deadline = sock, deadline

    def _recvall(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            try:
                part = self.sock.recv(min(n - len(buf), 1 << 20))
            except socket.timeout:
                raise TimeoutError from None
            except OSError as exc:
                raise WorkerGone(f"the program's process failed ({exc.strerror})") from None
            if not part:
                raise WorkerGone("the program's process ended before answering")
            buf += part
        return buf

    def ask(self, msg: dict):
        data = json.dumps(msg).encode()
        try:
            self.sock.settimeout(max(0.001, self.deadline - time.monotonic()))
            self.sock.sendall(struct.pack(">I", len(data)) + data)
        except socket.timeout:
            raise TimeoutError from None
        except OSError:
            raise WorkerGone("the program's process ended before answering") from None
        n = struct.unpack(">I", self._recvall(4))[0]
        if n > MAX_FRAME:
            raise WorkerGone(f"the program sent {n:,} bytes for one value (limit {MAX_FRAME:,})")
        try:
            reply = json.loads(self._recvall(n))
        except ValueError:
            raise WorkerGone("the program's process sent a malformed message") from None
        if type(reply) is not dict or len(reply) != 1 or not ({"ok", "error"} & set(reply)):
            raise WorkerGone("the program's process sent a malformed message")
        return reply


_OPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 200 else text[:200] + "…"


def judge(chan: Channel, program: str, tests: str) -> tuple[bool, str]:
    """(passed, detail): the program, then every test statement in order; asserts are decided here."""
    reply = chan.ask({"op": "exec", "src": program, "name": "program.py"})
    if "error" in reply:
        return False, f"the program raised {reply['error']}"
    try:
        statements = ast.parse(tests).body
    except SyntaxError as exc:
        return False, f"the tests do not parse: {exc}"
    n_asserts = 0

    def remote(node: ast.expr):
        r = chan.ask({"op": "eval", "src": ast.unparse(node)})
        if "error" in r:
            raise AssertionError(f"`{ast.unparse(node)}` raised {r['error']}")
        try:
            return decode(r["ok"])
        except (ValueError, TypeError, RecursionError, OverflowError, base64.binascii.Error) as exc:
            raise WorkerGone(f"the program's process sent an undecodable value ({exc})") from None

    for stmt in statements:
        src = ast.unparse(stmt)
        try:
            if not isinstance(stmt, ast.Assert):
                r = chan.ask({"op": "exec", "src": src, "name": "<test setup>"})
                if "error" in r:
                    return False, f"test setup `{src[:200]}` raised {r['error']}"
                continue
            n_asserts += 1
            test = stmt.test
            if isinstance(test, ast.Compare):
                values = []
                for operand in [test.left, *test.comparators]:
                    try:
                        values.append(ast.literal_eval(operand))  # expected values: evaluated here
                    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                        values.append(remote(operand))
                for op, a, b in zip(test.ops, values, values[1:]):
                    if not _OPS[type(op)](a, b):
                        return False, f"assert {n_asserts} failed: `{src[:300]}` — got {_short(a)} and {_short(b)}"
            elif not remote(test):
                return False, f"assert {n_asserts} failed: `{src[:300]}`"
        except AssertionError as exc:
            return False, f"assert {n_asserts}: {exc}"
        except (TypeError, ValueError, RecursionError) as exc:  # comparing decoded data of mismatched kinds
            return False, f"assert {n_asserts} failed: `{src[:300]}` ({type(exc).__name__}: {exc})"
    return True, f"{n_asserts} asserts passed"


def main() -> None:
    sys.set_int_max_str_digits(100_000)  # 4,300 by default; beyond 100k digits decoding costs too much time
    job = json.loads(sys.stdin.read())
    started = time.monotonic()
    deadline = started + job["timeout_s"]
    isolation = {"user": job.get("user_name"), "pid_namespace": False, "network_isolated": False,
                 "proc": "shared", "readonly_outside_workdir": False}
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the harness died: so do we (and, as subreaper, our orphans)
    if job.get("namespaces", True):
        enter_namespaces(isolation)  # first: writing our own uid_map needs us dumpable
    else:
        isolation["namespaces"] = "disabled by the caller"
    _prctl(PR_SET_DUMPABLE, 0)  # a same-user program cannot ptrace us or read /proc/<us>/{mem,fd,environ}
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        isolation["subreaper"] = True
    except OSError:
        isolation["subreaper"] = False
    for name, value in job["judge_rlimits"]:
        resource.setrlimit(getattr(resource, name), (value, value))
    ours, theirs = socket.socketpair()
    out_fd = os.open(job["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err_fd = os.open(job["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    pid = start_worker(job, isolation, theirs, out_fd, err_fd)
    theirs.close()
    os.close(out_fd)
    os.close(err_fd)
    verdict = {"passed": False, "timed_out": False, "detail": "", "returncode": None}
    try:
        verdict["passed"], verdict["detail"] = judge(Channel(ours, deadline), job["program"], job["tests"])
    except TimeoutError:
        verdict.update(timed_out=True, detail=f"timed out after {job['timeout_s']:g} s")
    except WorkerGone as exc:
        verdict["detail"] = str(exc)
    finally:
        ours.close()
        try:  # a worker that already ended keeps its exit status; one still running is killed
            done, status = os.waitpid(pid, os.WNOHANG)
            grace = time.monotonic() + 0.02  # a worker that read EOF exits within milliseconds
            while not done and time.monotonic() < grace:
                time.sleep(0.0005)
                done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                verdict["returncode"] = os.waitstatus_to_exitcode(status)
            else:
                os.kill(pid, signal.SIGKILL)
                os.killpg(pid, signal.SIGKILL)
        except (ChildProcessError, ProcessLookupError, PermissionError):
            pass
        isolation["all_descendants_killed"] = sweep_children()
    verdict["isolation"] = isolation
    verdict["duration_s"] = time.monotonic() - started
    sys.stdout.write(json.dumps(verdict) + "\n")
    sys.stdout.flush()


def serve(control_fd: int) -> None:
    """The fork server: for each request on `control_fd` (a folder to run in, and the judge's stdin, stdout and
    stderr as SCM_RIGHTS descriptors) fork a judge that runs `main()` there, and answer its pid. The server
    runs no program and reads no job, so every judge is a fresh single-threaded process whose memory holds
    nothing but this module's imports: what a new interpreter would hold, without paying its start-up per
    program. It ends when the caller's end of the socket closes (the caller ended)."""
    control = socket.socket(fileno=control_fd)
    fd_bytes = struct.calcsize("3i")
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:  # judges that ended
                pass
        except ChildProcessError:
            pass
        msg, ancillary, _, _ = control.recvmsg(4096, socket.CMSG_SPACE(fd_bytes))
        if not msg:
            return
        fds = [fd for level, kind, data in ancillary if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
               for fd in struct.unpack(f"{len(data) // 4}i", data[: len(data) // 4 * 4])]
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            control.sendall(b"0\n")
            continue
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                control.close()
                os.setsid()
                os.chdir(msg.decode())
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                os.closerange(3, 65536)
                main()
                code = 0
            except BaseException:  # noqa: BLE001
                import traceback

                traceback.print_exc()
                sys.stderr.flush()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        control.sendall(f"{pid}\n".encode())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]))
    else:
        main()
