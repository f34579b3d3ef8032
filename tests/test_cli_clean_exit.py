"""Every `cr2` command ends cleanly: run as a user runs it — a real process, on a small slice
warehouse — each command's stderr holds only its own messages: no traceback, no Prefect log line about an error
the command reports itself, no "nanobind: leaked …" lines from the DuckDB binding at interpreter exit.

Each command runs once, on a normal or an error exit (the error exits are the ones users met: a refused
calibration, a failed ingest, a refused SQL statement, …). Flow commands use the session's Prefect test API.
"""
from __future__ import annotations

import re
import socket
import subprocess

import pytest

from tests.conftest import cli_env, copy_of, cr2_process

pytestmark = [pytest.mark.flow, pytest.mark.slow]

# what a command may print on stderr: its own one-line error, and progress bars (tqdm / rich)
OWN_STDERR = re.compile(r"^(error: .+|.*\d+%\|.*|\s*)$")
NOISE = ("Traceback", "nanobind", "leaked", "| ERROR", "| WARNING", "Exception", "refleaks")


def assert_clean(res: subprocess.CompletedProcess, rc: int) -> None:
    """Exit code `rc`; stderr only the command's own lines; on an error exit exactly one `error:` line."""
    where = f"exit {res.returncode}\n--- stdout\n{res.stdout[-3000:]}\n--- stderr\n{res.stderr[-6000:]}"
    assert res.returncode == rc, where
    lines = res.stderr.replace("\r", "\n").splitlines()
    stray = [ln for ln in lines if not OWN_STDERR.match(ln)]
    assert not stray, f"stderr holds more than the command's own messages: {stray[:5]}\n{where}"
    assert not any(n in res.stderr for n in NOISE), where
    assert "Traceback" not in res.stdout and "nanobind" not in res.stdout, where
    assert sum(ln.startswith("error: ") for ln in lines) == (0 if rc == 0 else 1), where


@pytest.fixture(scope="module")
def slice_home(small_cli_run, tmp_path_factory):
    """The run's `cr2 run` process on a small slice (conftest.small_cli_run: a normal exit, checked clean here), and
    the environment for the next commands, on a copy of the warehouse it left."""
    assert_clean(small_cli_run["result"], 0)
    root = tmp_path_factory.mktemp("clean-exit")
    (root / "empty-data" / "benchmarks").mkdir(parents=True)
    bad = root / "no-data.yaml"
    bad.write_text(f"extends: default\ndata_dir: {root / 'empty-data'}\n")
    home = copy_of(small_cli_run["home"], root / "home")
    return {"root": root, "cfg": str(small_cli_run["cfg"]), "bad": str(bad), "env": cli_env(home), "home": home}


def _busy_port() -> tuple[socket.socket, int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, s.getsockname()[1]


# (command line with {cfg}/{bad}/{root}/{port} placeholders, exit code); one entry per command
CASES = [
    (["config", "show", "-c", "{cfg}"], 0),
    (["config", "validate", "{cfg}"], 0),
    (["ingest", "-c", "{cfg}"], 0),
    (["ingest", "-c", "{bad}", "--home", "{root}/other-home"], 2),  # a failed ingest (no benchmark files)
    (["prepare", "-c", "{cfg}"], 0),
    (["train", "-c", "{cfg}"], 0),
    (["calibrate", "-c", "{cfg}", "--group", "subset"], 2),  # refused: Mondrian groups too small
    (["calibrate", "-c", "{cfg}"], 0),
    (["recalibrate", "-c", "{cfg}", "--states", "premise-far"], 0),
    (["drift", "-c", "{cfg}", "--states", "default", "--n", "200"], 0),
    (["route", "-c", "{cfg}", "What is 2 + 2?", "--lam", "2"], 0),
    (["export-gate", "-c", "{cfg}", "{root}/gate"], 0),
    (["serve", "-c", "{cfg}", "--port", "{port}"], 2),  # the port is taken
    (["results"], 0),
    (["guarantees", "-c", "{cfg}", "--resplits", "2"], 0),
    (["simcheck", "-c", "{cfg}", "--structure-only"], 2),  # the slice has no measured MMLU-Pro files
    (["sql", "SELECT count(*) AS n FROM queries"], 0),
    (["sql", "COPY queries TO 'x.csv'"], 2),  # refused: not a read
    (["export", "queries", "--out", "{root}/export"], 0),
    (["labels", "list"], 0),
    (["labels", "import", "{root}/missing.csv", "--source", "mine"], 2),
    (["label", "-c", "{cfg}", "--models", "no-such-model", "--limit", "1"], 2),
    (["study", "seeds", "-c", "{cfg}", "--seed", "7", "--seed", "7"], 2),  # refused inside the flow
    (["study", "premise", "-c", "{cfg}", "--speeds", "fast"], 2),
    (["study", "diagnostics", "-c", "{cfg}"], 0),
    (["study", "pools", "-c", "{cfg}"], 2),  # refused: the slice's labels are simulated, a sweep needs measured ones
    (["study", "simcheck", "-c", "{cfg}", "--no-routing"], 2),  # refused for the same reason
    (["study", "routers", "--pools-home", "{root}/no-sweep", "--unit", "yi-6b"], 2),  # refused: no pool sweep there
    (["study", "level", "-c", "{cfg}", "--replicates", "2", "--resamples", "20"], 0),  # a tiny A/A on the slice run
    (["study", "routers", "--pools-home", "{root}/no-sweep", "--scenario-home", "default={root}/none",
      "--report-only"], 0),  # nothing stored: the tables say so
]


@pytest.mark.parametrize("args,rc", CASES, ids=[" ".join(a[:2]) + f" → {rc}" for a, rc in CASES])
def test_each_command_exits_cleanly(slice_home, args, rc):
    busy, port = _busy_port()
    with busy:
        values = {"cfg": slice_home["cfg"], "bad": slice_home["bad"], "root": str(slice_home["root"]), "port": port}
        res = cr2_process([a.format(**values) for a in args], slice_home["env"])
    assert_clean(res, rc)


def test_every_command_is_covered():
    """A new command joins CASES (its normal or error exit checked clean)."""
    from typer.main import get_command

    from cr2_cli.main import app

    def names(cmd, prefix=()):
        subs = getattr(cmd, "commands", None)
        if not subs:
            return {" ".join(prefix)}
        return set().union(*(names(c, prefix + (n,)) for n, c in subs.items()))

    covered = {"run"}  # the fixture's `cr2 run` (conftest.small_cli_run)
    for args, _ in CASES:
        covered |= {" ".join(args[:2]), args[0]}
    missing = sorted(n for n in names(get_command(app)) if n not in covered)
    assert not missing, f"commands without a clean-exit case: {missing}"


def test_a_full_cache_disk_is_one_clean_error_naming_the_file(small_cli_run, slice_home, tmp_path):
    """A cache write that meets a full disk (here `cr2 recalibrate` with $CR2_CACHE on one) ends the command with one
    `error:` line naming the file it could not write and what to do: no Prefect traceback, no bare "No space left
    on device". The home is the run's as `cr2 run` left it (never re-calibrated to these states, so the command
    has cache entries to write)."""
    from tests.full_disk import FullDisk

    home = copy_of(small_cli_run["home"], tmp_path / "home")
    with FullDisk(tmp_path) as disk:
        disk.fill()
        env = {**slice_home["env"], "CR2_HOME": str(home), "CR2_CACHE": str(disk.folder / "cache")}
        res = disk.run(["recalibrate", "-c", slice_home["cfg"], "--states", "premise-far"], env=env, timeout=600)
    text = " ".join(res.stdout.split())
    assert res.returncode == 2, (disk.mechanism, res.stdout[-3000:])
    errors = [ln for ln in res.stdout.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "the disk holding it is full" in errors[0], (disk.mechanism, res.stdout[-3000:])
    named = str(disk.folder) if disk.mounted else str(tmp_path)  # a file-size limit meets the home's writes too
    assert f"cannot write {named}" in text, (disk.mechanism, res.stdout[-3000:])
    assert not any(n in res.stdout for n in NOISE), (disk.mechanism, res.stdout[-3000:])


def test_a_config_of_another_pool_names_the_fix_that_keeps_the_warehouse(slice_home):
    """A command run on a home without the `-c` it was built with (here: the pool in another order) is told to pass
    that config; rebuilding with `cr2 run`, which replaces the warehouse's results, is offered only as the other
    choice, saying so."""
    from cr2.config import load_config
    from cr2.core.errors import DataValidationError
    from cr2_tasks.common import routing_args
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.routing_data import load_routing_sets

    cfg = load_config(slice_home["cfg"])
    with Warehouse(slice_home["home"], read_only=True) as wh:
        with pytest.raises(DataValidationError, match=r"pass the config this warehouse was built with \(`-c FILE`.*"
                                                      r"Only to rebuild .*replaces the warehouse's results"):
            load_routing_sets(wh, tuple(reversed([m.id for m in cfg.models])), **routing_args(cfg))
