"""The temporary Prefect API a flow command starts itself (cr2_cli/prefect_api.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_flow_command_puts_prefect_state_under_its_home_before_a_server_starts(tmp_path, monkeypatch):
    """friendly(flow=True) sets PREFECT_HOME to <home>/prefect before prestart() spawns a server on it."""
    from cr2_cli import prefect_api
    from cr2_cli.console import friendly

    monkeypatch.delenv("PREFECT_HOME", raising=False)
    seen = {}
    monkeypatch.setattr(prefect_api, "prestart", lambda: seen.setdefault("home", os.environ.get("PREFECT_HOME")))
    monkeypatch.setattr("cr2_cli.console.hide_cr2_tracebacks_on_console", lambda: None)

    @friendly(flow=True)
    def command(home=None):
        return "ran"

    assert command(home=tmp_path / "h") == "ran"
    assert seen["home"] == str((tmp_path / "h" / "prefect").resolve())
    assert (tmp_path / "h" / "prefect").is_dir()


SCRIPT = """
import os, sys
from cr2_cli import prefect_api
prefect_api.prestart()
import flows.recalibrate  # the imports the server start overlaps with
prefect_api.wait()
from prefect import flow, task

@task
def one():
    return 1

@flow(name="cr2-api-probe")
def probe():
    return one() + 1

assert probe() == 2
import prefect.server.api.server as srv  # imported only now, to look: Prefect never started a server of its own
print("api", os.environ["PREFECT_API_URL"], "prefect-servers", len(srv.SubprocessASGIServer._instances))
"""


def test_one_temporary_server_started_by_cr2_serves_the_flow(tmp_path):
    """Without a configured API the command's own temporary server answers the flow; Prefect starts none."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_PROFILE")}
    env.update({"PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONPATH": str(REPO)})
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("api ")][-1]
    assert line.startswith("api http://127.0.0.1:") and line.endswith("prefect-servers 0"), line
    import sqlite3

    con = sqlite3.connect(tmp_path / "prefect" / "prefect.db")  # the run is in the server's DB under PREFECT_HOME
    try:
        runs = con.execute("SELECT count(*) FROM flow_run fr JOIN flow f ON f.id = fr.flow_id "
                           "WHERE f.name = 'cr2-api-probe'").fetchone()[0]
    finally:
        con.close()
    assert runs == 1


PROFILE_SCRIPT = """
from cr2_cli import prefect_api
prefect_api.prestart()
prefect_api.wait()
import os
print("proc", prefect_api._proc, "url", prefect_api._url, "env", os.environ.get("PREFECT_API_URL"))
"""


def test_an_api_configured_in_the_prefect_profile_is_used_and_no_server_kept(tmp_path):
    """A profile that names an API wins: the server spawned before Prefect could read the profile is stopped at once
    and Prefect's settings are left alone."""
    home = tmp_path / "prefect"
    home.mkdir()
    (home / "profiles.toml").write_text('active = "ops"\n\n[profiles.ops]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH")}
    env.update({"PREFECT_HOME": str(home), "PYTHONPATH": str(REPO)})
    out = subprocess.run([sys.executable, "-c", PROFILE_SCRIPT], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "proc None url None env None", out.stdout
