"""The temporary Prefect API a flow command starts itself (cr2_cli/prefect_api.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_a_flow_command_puts_prefect_state_under_its_home_before_a_server_starts(tmp_path, monkeypatch):
    """friendly(flow=True) sets PREFECT_HOME to <home>/prefect before prestart() spawns a server on it."""
    from cr2_cli import prefect_api
    from cr2_cli.console import friendly

    monkeypatch.delenv("PREFECT_HOME", raising=False)
    seen = {}
    monkeypatch.setattr(prefect_api, "prestart", lambda *_: seen.setdefault("home", os.environ.get("PREFECT_HOME")))
    monkeypatch.setattr("cr2_cli.console.hide_cr2_tracebacks_on_console", lambda: None)

    @friendly(flow=True)
    def command(home=None):
        return "ran"

    assert command(home=tmp_path / "h") == "ran"
    assert seen["home"] == str((tmp_path / "h" / "prefect").resolve())
    assert (tmp_path / "h" / "prefect").is_dir()


SCRIPT = """
import os, sys
from pathlib import Path
from cr2_cli import prefect_api
prefect_api.prestart(Path(os.environ["CR2_TEST_TEMPLATES"]) if "CR2_TEST_TEMPLATES" in os.environ else None)
import cr2_flows.recalibrate  # the imports the server start overlaps with
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


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> Path:
    """A store folder of migrated Prefect databases for this module's flows (empty until a server leaves one)."""
    return tmp_path_factory.mktemp("prefect-db")


def _probe(prefect_home: Path, templates: Path, cwd: Path) -> subprocess.CompletedProcess:
    """SCRIPT's flow in a process of its own on a Prefect home, with the store's template folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_PROFILE")}
    env.update({"PREFECT_HOME": str(prefect_home), "PYTHONPATH": str(REPO), "CR2_TEST_TEMPLATES": str(templates)})
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=cwd, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def test_one_temporary_server_started_by_cr2_serves_the_flow(tmp_path, templates):
    """Without a configured API the command's own temporary server answers the flow; Prefect starts none. Its new
    home's fresh database is left as the template, before any run reached it."""
    from cr2_cli.prefect_api import template_path

    had_template = template_path(templates).is_file()
    out = _probe(tmp_path / "prefect", templates, tmp_path)
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
    template = template_path(templates)
    if not had_template:
        assert template.is_file() and _flow_runs(template) == 0 and (template.stat().st_mode & 0o077) == 0


def _flow_runs(db: Path) -> int:
    import sqlite3

    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM flow_run").fetchone()[0]
    finally:
        con.close()


def test_a_new_prefect_home_starts_from_the_template_the_first_one_left(tmp_path, templates):
    """A new home starts from a copy of the template a first server left (made here when no earlier test left one):
    its server takes it as its schema, and its flow's run lands in its own database, never in the template."""
    from cr2_cli.prefect_api import template_path

    template = template_path(templates)
    if not template.is_file():
        _probe(tmp_path / "first", templates, tmp_path)
    assert template.is_file()
    import sqlite3

    con = sqlite3.connect(template)  # a mark SQLite keeps and Prefect never reads: where a database came from
    try:
        con.execute("PRAGMA user_version = 4242")
        con.commit()
    finally:
        con.close()
    before = template.read_bytes()
    _probe(tmp_path / "second", templates, tmp_path)
    con = sqlite3.connect(tmp_path / "second" / "prefect.db")
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == 4242  # the home started from the template
    finally:
        con.close()
    assert _flow_runs(tmp_path / "second" / "prefect.db") == 1
    assert _flow_runs(template) == 0 and template.read_bytes() == before


def test_seeding_copies_the_template_only_into_a_new_home(tmp_path, monkeypatch):
    from cr2_cli import prefect_api

    templates = tmp_path / "templates"
    templates.mkdir()
    monkeypatch.delenv("PREFECT_API_DATABASE_CONNECTION_URL", raising=False)
    monkeypatch.delenv("PREFECT_SERVER_DATABASE_CONNECTION_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    db = tmp_path / "home" / "prefect.db"
    # no template yet: the home's own new database is to be saved as one
    assert prefect_api.seed_database(templates) == (db, prefect_api.template_path(templates))
    assert not db.exists()
    prefect_api.template_path(templates).write_bytes(b"template")
    assert prefect_api.seed_database(templates) is None and db.read_bytes() == b"template"
    assert (db.stat().st_mode & 0o077) == 0 and not list(db.parent.glob(".*.tmp"))
    db.write_bytes(b"the home's own")  # an existing database is never replaced
    assert prefect_api.seed_database(templates) is None and db.read_bytes() == b"the home's own"
    assert prefect_api.seed_database(None) is None
    other = tmp_path / "other"  # a home named outright, not through PREFECT_HOME (a stack's own server)
    assert prefect_api.seed_database(templates, other) is None and (other / "prefect.db").read_bytes() == b"template"
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://db/prefect")
    db.unlink()
    assert prefect_api.seed_database(templates) is None and not db.exists()  # another database: nothing to seed


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


# ------------------------------------------------------------------ the temporary server never outlives its command
def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _is_server(pid: int) -> bool:
    """Whether process `pid` is the temporary Prefect server (cr2_cli/prefect_child.py)."""
    try:
        return b"cr2_cli.prefect_child" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _flow_command_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_HOME")}
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGKILL", "SIGHUP"])
def test_p10_a_killed_flow_command_takes_its_temporary_server_down(tmp_path, signame):
    """Before: SIGKILL or SIGTERM of `cr2 recalibrate` left Prefect's temporary server (≈ 220 MB) running, reparented
    to init. Now SIGTERM / SIGHUP end the command as Ctrl-C does (it stops its server at exit), and the server dies
    with its parent whatever kills it (PR_SET_PDEATHSIG, or a watchdog)."""
    import signal
    import time

    home = tmp_path / "home"
    home.mkdir()
    (home / "cr2.duckdb").touch()  # enough for the command to start its server; the flow never gets that far
    cli = subprocess.Popen([sys.executable, "-c", "from cr2_cli.main import main; main()", "recalibrate", "--states",
                            "default", "--home", str(home)], env=_flow_command_env(tmp_path), cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    servers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not servers and time.monotonic() < deadline and cli.poll() is None:
            servers = [p for p in _children(cli.pid) if _is_server(p)]  # not the validation helper beside it
            time.sleep(0.05)
        assert servers, "the command started no temporary server"
        time.sleep(1.0)  # the command is importing its flow, the server starting
        os.kill(cli.pid, getattr(signal, signame))
        output = cli.communicate(timeout=60)[0].decode()
        deadline = time.monotonic() + 20
        while any(_alive(p) for p in servers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in servers), f"the temporary server outlived `cr2 recalibrate` ({signame})"
        if signame != "SIGKILL":
            assert cli.returncode == 128 + getattr(signal, signame) and "terminated by" in output, output[-500:]
            assert "Traceback" not in output
    finally:
        for pid in servers:  # a regression: do not leave it running
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def test_p11_a_full_disk_under_prefect_home_ends_the_command_once_with_a_clean_error(tmp_path):
    """Before: `cr2 recalibrate` with its Prefect home on a full disk restarted the temporary server in a loop (64
    tracebacks) and had not exited after 300 s; now the server's failure is reported once and the command exits 2."""
    from tests.full_disk import FullDisk

    with FullDisk(tmp_path) as disk:
        home = disk.folder / "home"
        home.mkdir()
        (home / "cr2.duckdb").touch()
        disk.fill()
        try:
            out = disk.run(["recalibrate", "--states", "default", "--home", home], env=_flow_command_env(tmp_path),
                           timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`cr2 recalibrate` on a full disk ({disk.mechanism}) did not exit within 120 s")
    text = " ".join(out.stdout.split())
    assert out.returncode == 2, (disk.mechanism, text[-1500:])
    assert "Prefect's temporary API server" in text and str(home / "prefect") in text, (disk.mechanism, text[-1500:])
    assert "Traceback" not in out.stdout and "bug" not in text


WARM_SCRIPT = """
import sys, threading
from cr2_cli import prefect_api
prefect_api.prestart()
before = "great_expectations" in sys.modules
prefect_api.wait(warm=("no_such_module_for_cr2", "great_expectations"))
for t in threading.enumerate():
    if t.name == "cr2-warm-imports":
        t.join(120)
print("before", before, "after", "great_expectations" in sys.modules)
"""


def test_the_modules_a_flow_will_import_load_while_the_server_starts(tmp_path):
    """wait(warm=…) imports the flow's heavy modules in a background thread while it waits for the server; a module
    that cannot be imported is left to the flow's own import (no error here)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_PROFILE")}
    env.update({"PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONPATH": str(REPO)})
    out = subprocess.run([sys.executable, "-c", WARM_SCRIPT], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "before False after True", out.stdout


def test_a_signal_a_library_rewrapped_still_ends_the_command_as_that_signal(monkeypatch, capsys):
    """SIGTERM / SIGHUP raise Terminated; a library that catches it mid-call and raises its own error (pydantic wraps it
    in a PydanticSerializationError while Prefect serialises a result) must not turn the signal into "a bug in cr2":
    the command still exits 128 + signal with the signal's one line."""
    import signal

    import typer

    from cr2_cli import prefect_api
    from cr2_cli.console import friendly

    @friendly
    def command():
        raise ValueError("Error calling function `_ser_model`: Terminated: terminated by SIGHUP")

    monkeypatch.setattr(prefect_api, "RECEIVED", None)
    with pytest.raises(typer.Exit) as plain:
        command()
    assert plain.value.exit_code == 1 and "this is a bug in cr2" in capsys.readouterr().err
    monkeypatch.setattr(prefect_api, "RECEIVED", int(signal.SIGHUP))
    with pytest.raises(typer.Exit) as ended:
        command()
    err = capsys.readouterr().err
    assert ended.value.exit_code == 128 + signal.SIGHUP and "terminated by SIGHUP" in err and "bug" not in err


@pytest.mark.parametrize("error", ["warehouse", "os"])
def test_an_error_met_while_a_signal_arrives_ends_the_command_as_that_signal(monkeypatch, capsys, error):
    """A flow command that meets its own error (here: a warehouse file that is not one, or a refused path) while a
    SIGTERM / SIGHUP is arriving ends as the signal does (exit 128 + signal, its one line), not with the error's exit 2:
    seen in `make test` as test_p10[SIGHUP] exiting 2 with 'not a valid warehouse file' after 'terminated by SIGHUP'."""
    import signal

    import typer

    from cr2.core.errors import WarehouseError
    from cr2_cli import prefect_api
    from cr2_cli.console import friendly

    @friendly
    def command():
        if error == "warehouse":
            raise WarehouseError("cr2.duckdb is not a valid warehouse file")
        raise PermissionError(13, "Permission denied", "/nowhere")

    monkeypatch.setattr(prefect_api, "RECEIVED", None)
    with pytest.raises(typer.Exit) as plain:
        command()
    assert plain.value.exit_code == 2 and "terminated" not in capsys.readouterr().err
    monkeypatch.setattr(prefect_api, "RECEIVED", int(signal.SIGHUP))
    with pytest.raises(typer.Exit) as ended:
        command()
    err = capsys.readouterr().err
    assert ended.value.exit_code == 128 + signal.SIGHUP and "terminated by SIGHUP" in err and "valid" not in err
