"""Prefect's temporary API server as a child that cannot outlive the cr2 command that started it.

`python -m cr2_cli.prefect_child PARENT_PID UVICORN_ARGS…` asks the kernel to send it SIGTERM when its parent dies
(Linux: prctl PR_SET_PDEATHSIG; elsewhere a thread that watches the parent's pid), checks that the parent is still
the one it was started by (it may have died before the request took effect), then runs uvicorn with the
remaining arguments in this process. So a `cr2 recalibrate` killed with SIGKILL — no handler, no atexit —
still takes its server down; cr2_cli/prefect_api.py stops it in the ordinary cases.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """SIGTERM to this process when `parent_pid` is no longer its parent."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl")
    except (OSError, AttributeError):  # not Linux: watch the parent instead

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, name="cr2-parent-watch", daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        sys.exit(0)


def main() -> None:
    parent_pid = int(sys.argv[1])
    die_with_parent(parent_pid)
    sys.argv = ["uvicorn", *sys.argv[2:]]
    import uvicorn.main

    uvicorn.main.main()


if __name__ == "__main__":
    main()
