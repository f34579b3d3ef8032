"""Prefect's temporary API server, started while a flow command imports its modules (issue 30).

Without PREFECT_API_URL, Prefect starts a temporary API server (a uvicorn subprocess) the first time a flow needs
one, and waits for it: 7–17 s on an idle 2-core machine, after the command has spent seconds importing torch and
the flows. `prestart()` starts that same server (Prefect's own SubprocessASGIServer singleton, so the flow reuses
it: still one start per command) in a background thread at once, so the server's start-up and the command's
imports overlap; `wait()` is called before the flow runs. With PREFECT_API_URL set (a running server, `make
prefect-up`) nothing is started.
"""
from __future__ import annotations

import os
import threading

_thread: threading.Thread | None = None


def _start(server) -> None:
    try:
        server.start()  # spawns the uvicorn subprocess and polls its /health: I/O, the GIL stays free
    except Exception:  # the flow's own start then retries and reports the error in the usual way
        pass


def prestart() -> None:
    """Start Prefect's temporary API server in the background when no API is configured (idempotent)."""
    global _thread
    if _thread is not None or os.environ.get("PREFECT_API_URL"):
        return
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():  # configured in the Prefect profile rather than the environment
        return
    # imported here, in the calling thread: importing it in the background while the flows import could
    # interleave two threads' imports of prefect's modules
    from prefect.server.api.server import SubprocessASGIServer

    _thread = threading.Thread(target=_start, args=(SubprocessASGIServer(),), name="cr2-prefect-api-start", daemon=True)
    _thread.start()


def wait() -> None:
    """Wait until a server started by prestart() answers (or its start failed: the flow will say why)."""
    if _thread is not None:
        _thread.join()
