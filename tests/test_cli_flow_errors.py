"""A Cr2Error raised inside a flow: the CLI prints one clear message, exits 2, and no traceback reaches the
console — while the Prefect flow run still records the failure (state and logged traceback via the API)."""
from __future__ import annotations

import logging
import sys

import pytest

from cr2.core.errors import ConfigError
from cr2_cli.console import HideCr2Tracebacks


def _record(exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException:
        return logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1, "Encountered exception", None,
                                 sys.exc_info())


def test_the_console_filter_drops_cr2_errors_only():
    f = HideCr2Tracebacks()
    assert not f.filter(_record(ConfigError("bad states file")))
    try:  # a Cr2Error wrapped by Prefect (raised from) is still cr2's
        try:
            raise ConfigError("inner")
        except ConfigError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as wrapped:
        assert not f.filter(_record(wrapped))
    assert f.filter(_record(ValueError("a bug keeps its traceback")))
    assert f.filter(logging.LogRecord("prefect", logging.WARNING, __file__, 1, "plain", None, None))


def test_the_console_filter_drops_prefect_failed_state_lines_of_cr2_errors_only():
    """Prefect's task engine logs a failed run as one ERROR line without exc_info, naming the exception's class."""
    f = HideCr2Tracebacks()

    def line(msg: str, level: int = logging.ERROR) -> logging.LogRecord:
        return logging.LogRecord("prefect.task_runs", level, __file__, 1, msg, None, None)

    assert not f.filter(line("Finished in state Failed('Task run encountered an exception DataValidationError: "
                             "LLMRank needs at least n_clusters=48 training queries, got 45')"))
    assert not f.filter(line("Finished in state Failed('Flow run encountered an exception. GroupTooSmallError: x')"))
    assert f.filter(line("Finished in state Failed('Task run encountered an exception ValueError: a bug')"))
    assert f.filter(line("Finished in state Completed()", logging.INFO))


def test_a_cr2_error_releases_the_frames_it_passed_through():
    """What the error's frames held (a warehouse connection) is freed when the command ends, not at interpreter
    exit, where the DuckDB binding reports it as leaked."""
    import gc
    import weakref

    import typer

    from cr2_cli.console import friendly

    class Held:  # stands in for a Warehouse a failing frame had open
        pass

    refs, kept = [], []

    def failing():
        held = Held()
        refs.append(weakref.ref(held))
        raise ConfigError("refused")

    @friendly
    def command():
        try:
            failing()
        except ConfigError as exc:
            kept.append(exc)  # as Prefect keeps a failed run's exception in its state
            raise

    with pytest.raises(typer.Exit):
        command()
    gc.collect()
    assert kept and refs[0]() is None


@pytest.mark.flow
@pytest.mark.parametrize("case", ["missing", "malformed"])
def test_cr2_error_inside_a_flow_prints_one_message_and_exits_2(prefect_harness, tmp_path, case):
    """The real `cr2` process (Prefect configures its logging lazily there), against the session's test API."""
    import os
    import subprocess

    from prefect import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.settings import PREFECT_API_URL

    from cr2.config import REPO_ROOT

    from cr2_warehouse.db import Warehouse

    with Warehouse(tmp_path / "home"):  # recalibrate works on a warehouse another command built (an empty one here)
        pass
    states = tmp_path / f"{case}.yaml"
    if case == "malformed":
        states.write_text("name: broken\ndistance_m: [1, 2\n")
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "CR2_HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-m", "cr2_cli.main", "recalibrate", "--states", str(states)], env=env,
                         capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    console = res.stdout + res.stderr
    assert res.returncode == 2, console
    assert states.name in console and console.count("error:") == 1, console
    assert "Traceback" not in console, console

    with get_client(sync_client=True) as client:  # the flow run still records the failure
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["cr2-recalibrate"])))
    failed = [r for r in runs if r.state and r.state.is_failed() and states.name in (r.state.message or "")]
    assert failed, [(r.state.type, r.state.message) for r in runs]
