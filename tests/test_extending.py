"""Extending cr2 without editing it: a router added from a temporary directory runs through the pipeline.

docs/new_router.md promises that a router is one module + one catalogue entry; this test holds it to that:
the module and the catalogue live outside the repository, a config switches them on, and the real
`cr2 run` flow fits, evaluates and reports the new router next to the built-in ones.
"""
from __future__ import annotations

import textwrap

import pytest

from tests.conftest import copy_of
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.flow, pytest.mark.slow]

TOY_ROUTER = '''
import numpy as np
from cr2.routers.base import OneShotRouter


class PriorRouter(OneShotRouter):
    """p̂_m(x) = the (smoothed) train accuracy of model m, the same for every query."""

    name = "prior"

    def __init__(self, smoothing: float = 1.0):
        self.smoothing = smoothing

    def _fit(self, train, dev):
        n = len(train)
        self.prior_ = ((np.asarray(train.correct, float).sum(0) + self.smoothing) / (n + 2 * self.smoothing))

    def predict_proba(self, batch):
        self._check_batch(batch)
        return np.broadcast_to(self.prior_, (len(batch), len(self.prior_))).astype(np.float32)

    def n_params(self):
        return len(self.prior_)

    def flops_per_query(self):
        return 0

    def _state_arrays(self):
        return {"prior": self.prior_}

    def _set_state(self, arrays, extra):
        self.prior_ = np.asarray(arrays["prior"], dtype=float)
'''

CATALOGUE = """
prior:
  class: toy_router.py:PriorRouter
  kind: baseline
  learned: true
  predicts_proba: true
  display: "Prior (toy)"
  colour: "#2e86c1"
"""

# the session's small `cr2 run` config (conftest.small_cli_run) with the plugin switched on: a user adding a router
# to a warehouse they already built, so only the baselines and what reads them run again
CONFIG = """extends: {base}
baselines:
  routers: [always, knn, prior]
  catalogues: [{catalogue}]
  params: {{knn: {{k_grid: [3]}}, prior: {{smoothing: 0.5}}}}
"""


def test_a_router_from_a_temporary_directory_runs_through_the_pipeline(small_cli_run, tmp_path):
    from cr2_flows.run import run_flow

    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "toy_router.py").write_text(TOY_ROUTER)
    (plugin / "catalogue.yaml").write_text(textwrap.dedent(CATALOGUE))
    cfg = tmp_path / "toy.yaml"
    cfg.write_text(CONFIG.format(base=small_cli_run["cfg"], catalogue=plugin / "catalogue.yaml"))
    home = copy_of(small_cli_run["home"], tmp_path / "home")
    out = run_flow(config_path=str(cfg), home=str(home))
    assert out["train"]["cached"] and not out["baselines"]["cached"]  # the built warehouse's gate, a new router
    assert "prior" in out["baselines"]["routers"]
    with Warehouse(home, read_only=True) as wh:
        run_id = out["evaluate"]["run_id"]
        method = wh.df("SELECT * FROM methods WHERE run_id = ? AND method = 'prior'", [run_id])
        points = wh.df("SELECT * FROM operating_points WHERE run_id = ? AND method = 'prior' AND benchmark = 'all'",
                       [run_id])
        fixed = wh.df("SELECT DISTINCT method FROM v_fixed_accuracy WHERE run_id = ?", [run_id])
        complexity = wh.df("SELECT * FROM v_router_complexity WHERE kind = 'router:prior'")
    assert method.iloc[0]["display"] == "Prior (toy)" and bool(method.iloc[0]["learned"])
    assert len(points) == 6 and points["accuracy"].between(0, 1).all()  # the one λ grid of every method
    assert "prior" in set(fixed["method"])  # compared at fixed accuracy like every learned router
    assert int(complexity.iloc[0]["params"]) == 4
    assert "Prior (toy)" in (home / "report" / "index.html").read_text(encoding="utf-8")

    # editing the plugin module (outside the project tree) invalidates the baselines' cache
    (plugin / "toy_router.py").write_text(TOY_ROUTER.replace("smoothing: float = 1.0", "smoothing: float = 2.0"))
    again = run_flow(config_path=str(cfg), home=str(home))
    assert again["train"]["cached"] and not again["baselines"]["cached"]
