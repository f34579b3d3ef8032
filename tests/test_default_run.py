"""The whole `cr2 run` on the shipped default set (slow: embeds all 21,501 queries, ≈ 5–7 min on 2 cores).

What `make run` does, in a temporary warehouse, checked for the properties users rely on: every query
lands, the simulated labels hit their targets, CRC holds the false-acceptance risk within α plus a stated
Monte-Carlo tolerance for every α of the grid, the learned baselines beat the device-only policy, the report
is built, and a second run does no work.
"""
from __future__ import annotations

import numpy as np
import pytest

from cr2.config import load_config
from cr2.evaluation.metrics import risk_tolerance
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.slow, pytest.mark.flow, pytest.mark.fullsize]  # `make test-full`


@pytest.fixture(scope="module")
def default_run(prefect_harness, tmp_path_factory):
    from cr2_flows.run import run_flow

    home = tmp_path_factory.mktemp("default") / "home"
    return home, run_flow(home=str(home))


def test_every_query_lands_and_labels_hit_their_targets(default_run):
    home, summary = default_run
    assert {b: r["queries"] for b, r in summary["ingest"]["benchmarks"].items()} == {
        "mmlu": 14_042, "bbh": 6_511, "gpqa": 448, "mbpp": 500}
    cfg = load_config()
    with Warehouse(home, read_only=True) as wh:
        acc = wh.df("SELECT benchmark, model_id, accuracy FROM model_summary")
    assert len(acc) == 16
    from cr2.labels.simulator import load_accuracy_targets

    goal = load_accuracy_targets(cfg.data_path / cfg.labels.simulator.accuracy_file, cfg.models)
    for r in acc.itertuples():
        assert abs(r.accuracy - goal[(r.model_id, r.benchmark)]) <= 0.01, (r.model_id, r.benchmark)


def test_crc_holds_the_risk_for_every_alpha(default_run):
    home, summary = default_run
    with Warehouse(home, read_only=True) as wh:
        risk = wh.df("SELECT * FROM v_risk_vs_alpha WHERE run_id = ?", [summary["evaluate"]["run_id"]])
    assert set(np.round(risk["alpha"], 6)) == {0.002, 0.005, 0.01, 0.02, 0.05}
    for alpha, d in risk.groupby("alpha"):
        # one split, many λ: each test-split risk within α + 3 binomial SE; the re-split mean within α + 3 MC SE
        tol = risk_tolerance(alpha, int(d["n_risk"].min()))
        assert d["risk"].max() <= alpha + tol, (alpha, d["risk"].max(), tol)
        mc = d[d["lam"] > 0]  # λ = 0 defers everything (risk 0 exactly): no re-split bands there
        assert (mc["risk_mean"] <= alpha + 3 * mc["risk_se"] + 1e-12).all(), alpha


def test_learned_baselines_beat_device_only_and_report_is_built(default_run):
    home, summary = default_run
    with Warehouse(home, read_only=True) as wh:
        at0 = wh.df("SELECT method, accuracy FROM operating_points WHERE run_id = ? AND benchmark = 'all' AND lam = 0",
                    [summary["evaluate"]["run_id"]]).set_index("method")["accuracy"]
    for name in ("knn", "mlp", "embedllm", "llmrank"):
        assert at0[name] > at0["always-qwen3-1.7b"] + 0.05, name
    page = open(summary["report"]["path"], encoding="utf-8").read()
    assert "SIMULATED LABELS" in page and page.count("data:image/png;base64,") == 8


def test_second_run_does_no_work(default_run):
    from cr2_flows.run import run_flow

    home, first = default_run
    again = run_flow(home=str(home))
    # every cached stage; the Prefect artifacts (a list of keys) are published again by each run, by design
    stages = {k: v for k, v in again.items() if k not in ("prepare", "artifacts")}
    assert all(v["cached"] for v in stages.values()), {k: v["cached"] for k, v in stages.items()}
    assert all(v["cached"] for v in again["prepare"].values())
