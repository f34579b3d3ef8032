"""A real local Prefect stack for end-to-end tests: `prefect server start`, a process work pool, `prefect deploy`
from the repo's prefect.yaml, and a process worker — each in its own process group, all stopped at the end.

Everything derives from the repo root this file lives in (PYTHONPATH, CR2_REPO, the working directory), so a CI
clone with its own editable install deploys and runs its own code. Waits are generous: the test machine may be a
loaded 2-core box where a Prefect server takes half a minute to answer.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx

REPO = Path(__file__).resolve().parents[1]
PREFECT = [sys.executable, "-m", "prefect"]
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stack_env(root: Path, port: int) -> dict[str, str]:
    """The environment of every process of the stack: an isolated PREFECT_HOME, this repo on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update({
        "PREFECT_HOME": str(root / "prefect"),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_UI_ENABLED": "false",  # the API is all a test needs
        "PREFECT_LOGGING_LEVEL": "INFO",
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",  # a scheduled run shows up within seconds
        "PREFECT_SERVER_SERVICES_SCHEDULER_MAX_RUNS": "3",
        "PREFECT_WORKER_QUERY_SECONDS": "1",  # a created run is picked up within a second
        "PREFECT_WORKER_PREFETCH_SECONDS": "5",
        "DO_NOT_TRACK": "1",
        "CR2_REPO": str(REPO),
        "CR2_HOME": str(root / "home"),
        "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    })
    return env


def _descendants(proc: subprocess.Popen) -> list:
    import psutil

    try:
        return psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        return []


def stop(procs: list[subprocess.Popen], grace_s: float = 20.0) -> None:
    """Stop the processes in reverse start order — the worker (and the flow runs it started, which may have left its
    process group) before the server it reports to: a worker whose server went first retries for seconds before it
    exits. SIGTERM each process group and its descendants, wait up to `grace_s` in all, then SIGKILL what is left."""
    import psutil

    deadline = time.monotonic() + grace_s
    victims = []
    for p in reversed(procs):
        mine = _descendants(p)
        victims += mine
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGTERM)
        for v in mine:
            with contextlib.suppress(psutil.Error):
                v.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)
    _, alive = psutil.wait_procs(victims, timeout=5)
    for v in alive:
        with contextlib.suppress(psutil.Error):
            v.kill()


class PrefectStack:
    """Handles to a running stack: its API URL, environment, log folder, and a few API helpers."""

    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.env = stack_env(root, self.port)
        self.api = self.env["PREFECT_API_URL"]
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        (root / "prefect").mkdir(parents=True, exist_ok=True)
        (root / "home").mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen] = []

    def seed_database(self) -> None:
        """The stack's new Prefect home from the store's migrated database where one exists (as a `cr2` flow command
        starts a new home: cr2_cli.prefect_api.seed_database), so the server does not run every migration again."""
        from cr2_cli.prefect_api import seed_database
        from cr2_cli.options import prefect_templates

        seed_database(prefect_templates(Path(self.env["CR2_HOME"])), self.env["PREFECT_HOME"])

    # -------------------------------------------------------------- processes
    def spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "w")
        p = subprocess.Popen([*PREFECT, *args], cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)  # its own process group: stop() kills it and its children
        self.procs.append(p)
        return p

    def cli(self, *args: str, timeout_s: float = 300) -> str:
        res = subprocess.run([*PREFECT, *args], cwd=REPO, env=self.env, capture_output=True, text=True,
                             timeout=timeout_s, start_new_session=True)
        if res.returncode != 0:
            raise RuntimeError(f"`prefect {' '.join(args)}` exited {res.returncode}:\n{res.stdout}\n{res.stderr}")
        return res.stdout

    def log_tail(self, n: int = 60) -> str:
        out = []
        for f in sorted(self.logs.glob("*.log")):
            lines = f.read_text(errors="replace").splitlines()[-n:]
            out.append(f"----- {f.name}\n" + "\n".join(lines))
        return "\n".join(out)

    def wait_healthy(self, timeout_s: float = 240) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.procs and self.procs[0].poll() is not None:
                raise RuntimeError(f"prefect server exited {self.procs[0].returncode}\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.api}/health", timeout=5).status_code == 200:
                    return
            time.sleep(0.25)
        raise TimeoutError(f"prefect server not healthy after {timeout_s:.0f} s\n{self.log_tail()}")

    # -------------------------------------------------------------- API
    def client(self):
        from prefect.client.orchestration import SyncPrefectClient

        return SyncPrefectClient(self.api)

    def run_deployment(self, name: str, parameters: dict) -> str:
        """Create a flow run of deployment `flow/deployment` with `parameters`; returns its id."""
        with self.client() as c:
            dep = c.read_deployment_by_name(name)
            return str(c.create_flow_run_from_deployment(dep.id, parameters=parameters).id)

    def wait_final(self, flow_run_id: str, timeout_s: float = 300):
        """Poll a flow run until it reaches a final state; returns the flow run."""
        deadline = time.monotonic() + timeout_s
        with self.client() as c:
            while time.monotonic() < deadline:
                run = c.read_flow_run(flow_run_id)
                if run.state is not None and run.state.type.value in FINAL:
                    return run
                time.sleep(0.5)  # one cheap read: a finished run is seen within half a second
        raise TimeoutError(f"flow run {flow_run_id} not finished after {timeout_s:.0f} s "
                           f"(state {run.state.type.value if run.state else None})\n{self.log_tail()}")

    def artifacts(self, flow_run_id: str) -> dict[str, object]:
        """The artifacts a flow run published, by key."""
        from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

        with self.client() as c:
            arts = c.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
        return {a.key: a for a in arts}


@contextlib.contextmanager
def prefect_stack(root: Path, pool: str = "cr2-process") -> Iterator[PrefectStack]:
    """Server up, pool created, prefect.yaml deployed, one process worker (one flow run at a time: DuckDB
    admits one writer); everything stopped on exit, also when the body fails."""
    stack = PrefectStack(root)
    try:
        stack.seed_database()
        stack.spawn("server", "server", "start", "--host", "127.0.0.1", "--port", str(stack.port))
        stack.wait_healthy()
        stack.cli("work-pool", "create", pool, "--type", "process")
        stack.cli("--no-prompt", "deploy", "--all")
        stack.spawn("worker", "worker", "start", "--pool", pool, "--limit", "1")
        yield stack
    finally:
        stop(stack.procs)
