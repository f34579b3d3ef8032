"""Prefect's temporary API server for a flow command, started as early as possible.

Without a configured API (PREFECT_API_URL in the environment or the Prefect profile), Prefect starts a temporary
API server — a uvicorn subprocess serving `prefect.server.api.server:create_app` — the first time a flow needs
one, and waits for it: seconds on a 2-core machine, after the command has spent seconds importing torch and the
flows. `prestart()` starts that same server (Prefect's own command line and environment) as soon as the command
knows it will run a flow, without importing Prefect's server package in the command's process, so the server's
start-up and the command's imports overlap on the two cores; `wait()` waits for its /health and points this
process's Prefect settings at it. Still one temporary server per command, stopped at exit after Prefect has
flushed its logs and events to it. With an API configured nothing is started; if the server cannot start, Prefect
falls back to starting its own in the usual way (and reports any error).
"""
from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import time
from pathlib import Path


_proc: subprocess.Popen | None = None
_url: str | None = None
_ready = False
_registered = False
PORT_IN_USE_EXIT = 3  # uvicorn's exit status when it cannot bind


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
    return subprocess.Popen([sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir),
                             "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "error", "--lifespan", "on"], env=env)


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


def prestart() -> None:
    """Start the temporary API server in the background unless an API is configured (idempotent)."""
    global _proc, _url, _registered
    if _proc is not None or _url is not None or os.environ.get("PREFECT_API_URL"):
        return
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


def wait() -> None:
    """Wait until the server started by prestart() answers, then make it this process's Prefect API. A server that
    does not come up is stopped; the flow then starts Prefect's own temporary server as it would have."""
    global _proc, _url, _ready
    if _proc is None or _ready:
        return
    import httpx
    from prefect.context import refresh_global_settings_context
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    deadline = time.monotonic() + float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
    with httpx.Client() as client:
        while time.monotonic() < deadline:
            if _proc.poll() is not None:
                if _proc.returncode != PORT_IN_USE_EXIT:
                    break
                port = _free_port()  # the port was taken in between: another one
                _proc, _url = _spawn(port), f"http://127.0.0.1:{port}/api"
                continue
            try:
                if client.get(f"{_url}/health").status_code == 200:
                    os.environ["PREFECT_API_URL"] = _url
                    refresh_global_settings_context()  # Prefect's settings re-read from the environment
                    _ready = True
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    _stop()
    _url = None
