"""prefect.yaml parses, and every deployment's entrypoint resolves to a Prefect flow taking its parameters."""
from __future__ import annotations

import importlib
import inspect

import pytest
import yaml

from cr2.config import REPO_ROOT

DEPLOYMENTS = yaml.safe_load((REPO_ROOT / "prefect.yaml").read_text())["deployments"]


def test_the_expected_deployments_exist():
    assert {d["name"] for d in DEPLOYMENTS} == {"cr2-run", "cr2-evaluate", "cr2-recalibrate", "cr2-recalibrate-on-drift",
                                                "cr2-relabel", "cr2-study-seeds"}
    relabel = next(d for d in DEPLOYMENTS if d["name"] == "cr2-relabel")
    assert relabel["schedules"][0]["cron"] == "0 3 * * 1"
    on_drift = next(d for d in DEPLOYMENTS if d["name"] == "cr2-recalibrate-on-drift")
    assert on_drift["parameters"]["only_if_drift"] is True and on_drift["schedules"][0]["interval"] == 3600


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=[d["name"] for d in DEPLOYMENTS])
def test_entrypoint_is_a_flow_with_the_declared_parameters(deployment):
    from prefect import Flow

    path, name = deployment["entrypoint"].split(":")
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    flow = getattr(module, name)
    assert isinstance(flow, Flow), f"{deployment['entrypoint']} is not a Prefect flow"
    params = inspect.signature(flow.fn).parameters
    assert set(deployment.get("parameters", {})) <= set(params), deployment["name"]
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
    assert required <= set(deployment.get("parameters", {})), f"{deployment['name']} misses required {required}"
    assert deployment["work_pool"]["name"] == "cr2-process"
