"""End to end on a real Prefect server, as an operator runs cr2 (docs/operations.md): `prefect server start`,
a process work pool, `prefect deploy --all` from prefect.yaml, a process worker; flow runs created through the
API and waited for; the warehouse and the published artifacts checked; a scheduled deployment fires by itself.

Everything it starts runs in its own process group and is stopped at the end, also when a step fails
(tests/prefect_stack.py).

In `make test-full`, not in `make test` (CI): a server, a worker and six flow-run processes, each importing the whole
pipeline, take ≈ 2¼ min of the 2-core machine (136 s of 1,450 s summed over `make test`'s files, a sixth of it).
`make test` keeps what changes with cr2's code: every deployment's entrypoint loads and takes its declared parameters
(tests/test_deployments.py), and the same flows run through the session's Prefect API (tests/test_pipeline_flow.py:
run, recalibrate, evaluate; tests/test_cli_clean_exit.py: every command). Run this module (`make test-full`, or
`pytest tests/test_prefect_server.py`) after changing prefect.yaml, the worker set-up or docs/operations.md.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from cr2.config import load_config
from tests.conftest import copy_of
from tests.prefect_stack import REPO, prefect_stack
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.slow, pytest.mark.full]  # make test-full only: the module docstring says why

RUN_TIMEOUT_S = 420  # one flow run, worst case on a loaded 2-core machine (a fresh process imports torch & co.)


@pytest.fixture(scope="module")
def stack(small_cli_run, tmp_path_factory):
    """The stack, on a copy of the session's small `cr2 run` home (conftest.small_cli_run) and its config: the
    deployed `cr2-run` finds every stage result in the shared cache (what is tested here is the server, the
    deployments, the worker and the artifacts, not the stages), and recalibrate / evaluate do their own work."""
    root = tmp_path_factory.mktemp("prefect-e2e")
    copy_of(small_cli_run["home"], root / "stack" / "home")  # the stack's CR2_HOME (tests/prefect_stack.stack_env)
    t0 = time.monotonic()
    with prefect_stack(root / "stack") as s:
        s.cfg, s.home = str(small_cli_run["cfg"]), s.env["CR2_HOME"]
        assert Path(s.home) == root / "stack" / "home"
        s.cfg_more_bands = root / "more-bands.yaml"  # only the evaluation section differs: a new evaluation run
        s.cfg_more_bands.write_text(f"extends: {s.cfg}\nevaluation: {{n_resplits: 30}}\n")
        yield s
    print(f"\nreal-server e2e: {time.monotonic() - t0:.0f} s wall (server start to everything stopped)")


def _run(stack, name: str, **params) -> tuple[str, object]:
    run_id = stack.run_deployment(name, {"config_path": stack.cfg, "home": stack.home, **params})
    run = stack.wait_final(run_id, RUN_TIMEOUT_S)
    assert run.state.type.value == "COMPLETED", f"{name}: {run.state.type.value} {run.state.message}\n{stack.log_tail()}"
    return run_id, run


def _versions(home) -> list[tuple[int, str]]:
    with Warehouse(home, read_only=True) as wh:
        df = wh.df("SELECT version, any_value(dist_id) AS dist_id FROM thresholds WHERE router = 'cr2' "
                   "GROUP BY version ORDER BY version")  # CR²'s tables; certified routers have their own
    return [(int(v), d) for v, d in zip(df["version"], df["dist_id"])]


def test_deploy_registers_every_deployment_of_prefect_yaml(stack):
    declared = {d["name"] for d in yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]}
    with stack.client() as c:
        deployed = {d.name for d in c.read_deployments()}
    assert declared <= deployed


def test_run_recalibrate_and_evaluate_through_the_api(stack):
    run_id, _ = _run(stack, "cr2-run/cr2-run")
    arts = stack.artifacts(run_id)
    assert {"cr2-summary", "cr2-operating-points", "cr2-router-comparison", "cr2-report"} <= set(arts), sorted(arts)
    source = load_config(stack.cfg).labels.source  # the default (simulated) label source, whichever version
    assert source.startswith("simulated-") and "SIMULATED LABELS" in arts["cr2-summary"].data
    assert f"`{source}`" in arts["cr2-summary"].data
    ops = arts["cr2-operating-points"].data
    ops = json.loads(ops) if isinstance(ops, str) else ops  # table data come back as JSON text
    assert len(ops) >= 3 and {"λ", "teacher risk", "local", "accuracy", "cost"} <= set(ops[0])  # CR2OperatingPoints
    assert arts["cr2-report"].data.startswith("[") and "index.html" in arts["cr2-report"].data
    (v1, _default_dist), = _versions(stack.home)

    rid, _ = _run(stack, "cr2-recalibrate/cr2-recalibrate", states="far-rician", only_if_drift=False)
    versions = _versions(stack.home)
    assert len(versions) == 2 and versions[-1][0] > v1 and versions[-1][1].startswith("far-rician@")
    arts = stack.artifacts(rid)
    assert {"cr2-recalibrate-summary", "cr2-drift", "cr2-recalibration"} <= set(arts), sorted(arts)
    assert "SIMULATED LABELS" in arts["cr2-recalibrate-summary"].data

    with Warehouse(stack.home, read_only=True) as wh:
        before = set(wh.df("SELECT run_id FROM eval_runs")["run_id"])
    eid, _ = _run(stack, "cr2-evaluate/cr2-evaluate", config_path=str(stack.cfg_more_bands))
    with Warehouse(stack.home, read_only=True) as wh:
        runs = wh.df("SELECT run_id, threshold_version FROM eval_runs")
        new = runs[~runs["run_id"].isin(before)]
        bands = wh.scalar("SELECT count(*) FROM metrics WHERE run_id = ? AND method = 'cr2-resplit'", [new["run_id"].iloc[0]])
    assert len(new) == 1 and int(new["threshold_version"].iloc[0]) == v1  # its config's (default-state) thresholds
    assert bands > 0
    arts = stack.artifacts(eid)
    assert {"cr2-summary", "cr2-operating-points", "cr2-router-comparison"} <= set(arts), sorted(arts)
    assert new["run_id"].iloc[0] in arts["cr2-summary"].data


def test_drift_triggered_recalibration_skips_without_drift_and_runs_with_it(stack):
    if len(_versions(stack.home)) < 2:
        pytest.skip("needs the recalibration of the previous test")
    deployed = _versions(stack.home)[-1][1]  # far-rician: the newest thresholds' distribution
    assert deployed.startswith("far-rician@")
    n = len(_versions(stack.home))
    rid, _ = _run(stack, "cr2-recalibrate/cr2-recalibrate-on-drift", states="far-rician")
    assert len(_versions(stack.home)) == n  # no drift: thresholds kept
    arts = stack.artifacts(rid)
    assert "No drift detected" in arts["cr2-recalibrate-summary"].data and "cr2-recalibration" not in arts
    near = stack.root / "near-cell.yaml"  # a distribution never calibrated before: users close to the edge
    near.write_text("name: near-cell\nversion: 1\ndistance: {kind: uniform, low_m: 5.0, high_m: 40.0}\n"
                    "fading: {kind: rayleigh}\npath_loss: {k0_db: -43.3, exponent: 4.0, d0_m: 1.0}\n")
    rid, _ = _run(stack, "cr2-recalibrate/cr2-recalibrate-on-drift", states=str(near))
    assert len(_versions(stack.home)) == n + 1 and _versions(stack.home)[-1][1].startswith("near-cell@")
    arts = stack.artifacts(rid)
    assert "cr2-recalibration" in arts and "No drift detected" not in arts["cr2-recalibrate-summary"].data


def _sqlalchemy_2_1() -> bool:
    import sqlalchemy

    return tuple(int(p) for p in sqlalchemy.__version__.split(".")[:2]) >= (2, 1)


@pytest.mark.skipif(_sqlalchemy_2_1(), reason="Prefect 3.8.8's scheduler creates no run under SQLAlchemy 2.1 "
                    "(\"Can't evaluate bulk DML statement\"); pyproject pins sqlalchemy==2.0.58 — reinstall (make test)")
def test_a_scheduled_deployment_fires_by_itself(stack):
    """A test-only deployment of the drift check on a 10-s interval: the server's scheduler creates the run,
    the worker picks it up, and it completes — nobody calls the API to start it."""
    from datetime import timedelta

    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.schedules import IntervalSchedule

    with stack.client() as c:
        base = c.read_deployment_by_name("cr2-recalibrate/cr2-recalibrate-on-drift")
        dep_id = c.create_deployment(
            flow_id=base.flow_id, name="scheduled-drift-check-test", entrypoint=base.entrypoint,
            work_pool_name=base.work_pool_name, pull_steps=base.pull_steps, path=base.path,
            parameters={**base.parameters, "config_path": stack.cfg, "home": stack.home},
            schedules=[DeploymentScheduleCreate(schedule=IntervalSchedule(interval=timedelta(seconds=10)), active=True)])
    try:
        deadline, done = time.monotonic() + RUN_TIMEOUT_S + 120, None
        while time.monotonic() < deadline and done is None:
            with stack.client() as c:
                runs = c.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[dep_id])))
            done = next((r for r in runs if r.state and r.state.type.value == "COMPLETED"), None)
            failed = [r for r in runs if r.state and r.state.type.value in ("FAILED", "CRASHED")]
            assert not failed, f"{failed[0].state.message}\n{stack.log_tail()}"
            time.sleep(1)
        assert done is not None, f"no scheduled run completed\n{stack.log_tail()}"
        assert done.auto_scheduled and done.parameters["only_if_drift"] is True
    finally:
        with stack.client() as c:  # stop the schedule before the stack goes down
            c.delete_deployment(dep_id)
