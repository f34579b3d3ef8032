"""HTTP fuzz of `cr2 serve` from its own OpenAPI schema (schemathesis; issue 28): on a small budget, valid
and invalid requests to every operation, and none is answered 500 — every answer is 2xx, 4xx, 502, 503
or 504, and an error carries a one-line JSON `detail`. The router is the stub of tests/test_serve_faults.py;
/v1/chat/completions forwards to the fault upstream in its plain mode.
"""
from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from cr2.config import load_config
from cr2_cli.serve import create_app
from tests.fault_upstream import FaultUpstream
from tests.serve_helpers import free_port, running
from tests.test_serve_faults import ALLOWED, FaultRouter

UPSTREAM_PORT = free_port()


def _app():
    cfg = load_config()
    serving = cfg.serving.model_copy(update={"endpoints": {cfg.models[1].id: f"http://127.0.0.1:{UPSTREAM_PORT}/v1",
                                                           cfg.models[2].id: f"http://127.0.0.1:{UPSTREAM_PORT}/v1"},
                                             "timeout_s": 2.0, "max_body_bytes": 64 * 1024, "max_concurrency": 4})
    return create_app(cfg.model_copy(update={"serving": serving}), "unused",
                      router=FaultRouter([m.id for m in cfg.models]))


APP = _app()
schema = schemathesis.openapi.from_dict(APP.openapi())


def _stub_route_by_target(config, home, question, choices, target_accuracy, budget, distance_m=None,
                          benchmark="mmlu", seed=0, router=None):
    """Target mode needs a deployed warehouse (tests/test_targets.py); here it routes at one fixed point."""
    out = router.route(question, choices, 1.0, 0.1, distance_m, benchmark, seed)
    return {**out, "target_choice": {"target": target_accuracy if budget is None else budget}}


@pytest.fixture(scope="module")
def base_url():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("cr2_cli.targets.route_by_target", _stub_route_by_target)
        with running(FaultUpstream(), port=UPSTREAM_PORT), running(APP) as base:
            yield base


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_fuzzed_requests_are_never_a_500(case, base_url):
    response = case.call(base_url=base_url, timeout=10)
    assert response.status_code in ALLOWED, (case.method, case.path, case.body, response.status_code, response.text[:300])
    if response.status_code >= 400:
        detail = json.loads(response.text)["detail"]
        assert isinstance(detail, str) and "Traceback" not in detail
