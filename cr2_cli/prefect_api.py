"""Prefect's temporary API server for a flow command, started as early as possible.

Without a configured API (PREFECT_API_URL in the environment or the Prefect profile), Prefect starts a temporary
API server — a uvicorn subprocess serving `prefect.server.api.server:create_app` — the first time a flow needs
one, and waits for it: seconds on a 2-core machine, after the command has spent seconds importing torch and the
flows. `prestart()` starts that same server (Prefect's own command line and environment) as soon as the command
knows it will run a flow, without importing Prefect's server package in the command's process, so the server's
start-up and the command's imports overlap on the two cores; `wait()` waits for its /health and points this
process's Prefect settings at it. Still one temporary server per command, stopped at exit after Prefect has
flushed its logs and events to it. With an API configured nothing is started.

The server never outlives the command: it runs through cr2_cli/prefect_child.py, which has the kernel send it
SIGTERM when the command's process dies (SIGKILL included), in a session of its own (a terminal's Ctrl-C or hang-up
reaches the command, which stops it after Prefect has flushed); `handle_termination` turns SIGTERM and SIGHUP into
the same orderly exit as Ctrl-C. A server that cannot start is reported once, as a clean error naming Prefect's
home (its database) and the server's own last error line (a full disk, say), instead of being started again and
again: a new port is tried only when the port was taken, at most PORT_RETRIES times.

A new Prefect home starts from a copy of an empty, migrated database (`seed_database`): creating one runs Prefect's
whole chain of migrations, ≈ 5 s of CPU on a 2-core machine, once per home. The first server that creates one
leaves a snapshot of it in the store's `prefect-db` folder (cr2_tasks.store.TOOLS), keyed by Prefect's version;
every later new home on the same store copies it, and its server finds the schema current.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from cr2.core.errors import Cr2Error
from cr2.core.files import DISK_FULL_TEXT


_proc: subprocess.Popen | None = None
_url: str | None = None
_ready = False
_registered = False
_tail: collections.deque = collections.deque(maxlen=40)  # the server's last output lines before it was ready
_snapshot: tuple[Path, Path] | None = None  # (new database, template to leave): saved once the server answers
PORT_IN_USE_EXIT = 3  # uvicorn's exit status when it cannot start: the port is taken, or the app's start-up failed
PORT_RETRIES = 3


class PrefectServerError(Cr2Error):
    """Prefect's temporary API server could not start."""


RECEIVED: int | None = None  # the termination signal handle_termination turned into Terminated, once one arrived


def terminated_by() -> "Terminated | None":
    """The Terminated of a SIGTERM / SIGHUP this process received, or None: a library that caught the exception and
    raised its own (pydantic wraps it in a serialization error) still ends the command as that signal does."""
    return None if RECEIVED is None else Terminated(RECEIVED)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C's KeyboardInterrupt (handle_termination)."""

    def __init__(self, signum: int):
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawn(port: int) -> subprocess.Popen:
    """Prefect's temporary-server command (prefect.server.api.server.SubprocessASGIServer), spawned directly.

    Before Prefect is imported (a CLI command), the server reads its settings from the same environment, profile
    and working directory as this process would; once it is imported, this process's settings are passed on
    explicitly, as Prefect does (they may have been changed in-process)."""
    import importlib.util

    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
    if "prefect" in sys.modules:
        from prefect.settings import get_current_settings

        env.update(get_current_settings().to_environment_variables(exclude_unset=True))
    app_dir = Path(importlib.util.find_spec("prefect").origin).parent.parent  # prefect.__module_path__.parent
    _tail.clear()
    proc = subprocess.Popen([sys.executable, "-m", "cr2_cli.prefect_child", str(os.getpid()), "--app-dir",
                             str(app_dir), "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "error", "--lifespan", "on"],
                            env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    threading.Thread(target=_relay_stderr, args=(proc.stderr,), name="cr2-prefect-server-stderr", daemon=True).start()
    return proc


def _relay_stderr(stream) -> None:
    """The server's error output: kept (its last lines) until the server is ready — a failed start is reported in
    one message, not as the server's traceback —, passed on to this process's stderr after."""
    for line in iter(stream.readline, b""):  # drained to the end, whatever happens: a full pipe would block the server
        text = line.decode("utf-8", "replace")
        if not _ready:
            _tail.append(text.rstrip())
            continue
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):  # our stderr is closed or replaced (interpreter exit): the line is dropped
            pass


def _stop() -> None:
    global _proc
    if _proc is None:
        return
    proc, _proc = _proc, None
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def prestart(templates: Path | None = None) -> None:
    """Start the temporary API server in the background unless an API is configured (idempotent). templates: the
    folder of empty migrated databases (`seed_database`); None starts a new Prefect home's database from scratch."""
    global _proc, _url, _registered, _snapshot
    if _proc is not None or _url is not None or os.environ.get("PREFECT_API_URL"):
        return
    _snapshot = seed_database(templates)
    if not _registered:  # before Prefect registers its own exit handlers: runs after they flush logs and events
        atexit.register(_stop)
        _registered = True
    early = "prefect" not in sys.modules
    if early:  # spawned before importing Prefect (≈ 1 s), so the server's start-up begins at once
        port = _free_port()
        _proc, _url = _spawn(port), f"http://127.0.0.1:{port}/api"
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():  # an API configured in the Prefect profile (or a test harness): ours is not needed
        _stop()
        _url = None
        return
    if not early:
        port = _free_port()
        _proc, _url = _spawn(port), f"http://127.0.0.1:{port}/api"


def _database_path(home: str | Path | None = None) -> Path | None:
    """The SQLite file of Prefect's database under `home` (default PREFECT_HOME), or None when a connection URL is
    configured in the environment (another database: nothing to seed)."""
    home = home or os.environ.get("PREFECT_HOME")
    if not home or any(os.environ.get(k) for k in ("PREFECT_API_DATABASE_CONNECTION_URL",
                                                     "PREFECT_SERVER_DATABASE_CONNECTION_URL")):
        return None
    return Path(home).expanduser() / "prefect.db"


def template_path(templates: Path) -> Path:
    """The empty, migrated database of the installed Prefect version in `templates`."""
    from importlib.metadata import version

    return Path(templates) / f"prefect-{version('prefect')}.db"


def seed_database(templates: Path | None, home: str | Path | None = None) -> tuple[Path, Path] | None:
    """A new Prefect home (`home`, default PREFECT_HOME; no prefect.db yet) gets a copy of the template; returns
    (database, template) when the home is new and no template exists yet (the server's fresh database is saved as one
    once it answers), else None.

    The copy is linked into place only where no database exists (two commands starting on one new home: one copy
    wins, the other finds it), owner-only like the home's other state. Best effort: a copy that fails leaves the
    home as it was, and the server creates its database itself."""
    db = _database_path(home)
    if templates is None or db is None or db.exists():
        return None
    try:
        template = template_path(templates)
        if not template.is_file():
            return db, template
        from cr2.core.files import temp_sibling

        db.parent.mkdir(parents=True, exist_ok=True)  # as the server would make its home
        tmp = temp_sibling(db)
        try:
            with open(template, "rb") as src, open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as dst:
                dst.write(src.read())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, db)  # never replaces a database another command created meanwhile
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    except (OSError, ImportError):  # no room, no hard links, no Prefect metadata: the server makes its own
        pass
    return None


def _port_taken(url: str) -> bool:
    """Whether the port of `url` is in use (another process bound it after _free_port chose it)."""
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _failed(what: str) -> PrefectServerError:
    """The error for a server that could not start: what happened, its last error line, where its database is."""
    from prefect.settings import PREFECT_HOME

    home = Path(str(PREFECT_HOME.value())).expanduser()
    lines = [ln.strip() for ln in _tail if ln.strip()]
    said = next((ln for ln in reversed(lines) if any(t in ln for t in DISK_FULL_TEXT)), None)
    if said is not None:
        return PrefectServerError(f"Prefect's temporary API server could not start: the disk holding its database "
                                  f"{home / 'prefect.db'} is full ({said[:200]}). Free space there (or set PREFECT_HOME "
                                  "to a folder on another disk) and run the command again.")
    last = next((ln for ln in reversed(lines) if not ln.startswith(("File ", "Traceback", "^", "~"))), None)
    return PrefectServerError(f"Prefect's temporary API server {what}" + (f" ({last[:200]})" if last else "")
                              + f"; its state and database are under PREFECT_HOME={home}. Check that folder is "
                              "writable and its disk has space, or point PREFECT_API_URL at a running Prefect "
                              "server.")


def _import_quietly(modules: tuple[str, ...]) -> None:
    """Import `modules` (a failure is left to the flow's own import, which reports it)."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (reported where the flow imports it)
            continue


def wait(warm: tuple[str, ...] = ()) -> None:
    """Wait until the server started by prestart() answers, then make it this process's Prefect API.

    warm: modules the flow will import (GX, torch: seconds each). While this waits for the server (its start-up
    runs on the other core), a background thread imports them, so their import leaves the critical path instead
    of following the server's start; the flow's own import of them then finds them loaded (or waits for the thread
    under the import lock).

    A server that exits without answering is started again on another port only when its port was taken (at most
    PORT_RETRIES times); otherwise — it failed to start, or did not answer within Prefect's start-up limit — it is
    stopped and a PrefectServerError says why, once."""
    global _proc, _url, _ready
    if _proc is None or _ready:
        return
    if warm:
        threading.Thread(target=_import_quietly, args=(tuple(warm),), name="cr2-warm-imports", daemon=True).start()
    import httpx
    from prefect.context import refresh_global_settings_context
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    limit_s = float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
    deadline = time.monotonic() + limit_s
    retries = 0
    with httpx.Client() as client:
        while time.monotonic() < deadline:
            if _proc.poll() is not None:
                if _proc.returncode != PORT_IN_USE_EXIT or retries >= PORT_RETRIES or not _port_taken(_url):
                    code = _proc.returncode
                    time.sleep(0.1)  # its last lines reach the tail
                    error = _failed(f"exited with status {code} before it answered")
                    _proc, _url = None, None
                    raise error
                retries += 1
                port = _free_port()  # the port was taken in between: another one
                _proc, _url = _spawn(port), f"http://127.0.0.1:{port}/api"
                continue
            try:
                if client.get(f"{_url}/health").status_code == 200:
                    os.environ["PREFECT_API_URL"] = _url
                    refresh_global_settings_context()  # Prefect's settings re-read from the environment
                    _ready = True
                    if _snapshot is not None:  # a new home's database, migrated by this server: the next home's start
                        from cr2_warehouse.prefect_state import save_template

                        save_template(*_snapshot)
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    _stop()
    _url = None
    raise _failed(f"did not answer within {limit_s:g} s (PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)")


def handle_termination():
    """SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, as Ctrl-C does, so a flow command ends the
    same orderly way — Prefect records the run's end, the temporary server is stopped at exit — instead of dying
    with its server left running. Returns a function that restores the previous handlers (a no-op off the main
    thread, where handlers cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum, frame):
        global RECEIVED
        RECEIVED = signum
        raise Terminated(signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, interrupt)

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
