"""Routers decide before any model runs: with the pre-execution cost ĉ (estimated output length), never with
the realised cost c, which is used only to account the chosen model (paper §IV-C)."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.config import load_config
from cr2.system.cost import device_dearer_share, estimated_output_tokens, output_token_estimates
from cr2.core.data import Decisions, RoutingSet
from cr2.core.errors import InvalidValueError
from cr2.evaluation.sweep import Evaluation, evaluate_baseline
from cr2.evaluation.metrics import mean_cost
from cr2.routers.base import one_shot_choice

CFG = load_config()


def _set(cost, cost_est):
    n, m = cost.shape
    return RoutingSet(query_id=np.array([f"q{i}" for i in range(n)]), benchmark=np.array(["mmlu"] * n),
                      embedding=np.zeros((n, 4), dtype=np.float32), correct=np.ones((n, m), dtype=bool),
                      cost=cost.astype(np.float32), model_ids=tuple(f"m{j}" for j in range(m)),
                      cost_est=None if cost_est is None else cost_est.astype(np.float32))


def test_output_length_estimate_is_the_train_mean_per_benchmark_and_model():
    bench = np.array(["mmlu", "mmlu", "bbh", "bbh", "mmlu"])
    out = np.array([[10, 100], [20, 300], [5, 50], [7, 70], [1000, 1000]], dtype=float)
    train = np.array([True, True, True, True, False])  # the test row's realised length never enters
    est = output_token_estimates(bench, out, train, CFG.cost)
    assert est == {"bbh": [6.0, 60.0], "mmlu": [15.0, 200.0]}
    assert estimated_output_tokens(np.array(["bbh", "mmlu"]), est, 2).tolist() == [[6.0, 60.0], [15.0, 200.0]]
    with pytest.raises(InvalidValueError, match="no output-length estimate"):
        estimated_output_tokens(np.array(["gpqa"]), est, 2)


def test_a_benchmark_without_train_rows_falls_back_to_the_configured_default():
    est = output_token_estimates(np.array(["gpqa"]), np.array([[9.0, 9.0]]), np.array([False]), CFG.cost)
    assert est["gpqa"] == [float(CFG.cost.default_output_tokens["gpqa"])] * 2


def test_routers_decide_with_the_estimate_and_account_the_realised_cost():
    # realised: model 1 is cheap; estimated: model 1 is dear — the router must follow the estimate
    cost = np.array([[0.5, 0.1, 1.0]])
    cost_est = np.array([[0.5, 0.9, 1.0]])
    data = _set(cost, cost_est)
    p_hat = np.array([[0.5, 0.6, 0.62]])
    chosen = one_shot_choice(p_hat, data.decision_cost, lam=1.0)
    assert chosen.tolist() == [0]  # 0.5 − 0.5 = 0 beats 0.6 − 0.9 and 0.62 − 1.0 (realised c would pick model 1)
    ev = Evaluation(run_id="r", test=data, proba=p_hat, keep=np.array([True]))
    evaluate_baseline(ev, "probe", [1.0], p_hat=p_hat)
    rows = {r["metric"]: r["value"] for r in ev.metrics if r["benchmark"] == "all"}
    assert rows["cost"] == pytest.approx(0.5)  # accounted at the realised cost of the chosen model
    dec = Decisions(chosen=np.array([1]), accepted_local=np.array([False]))
    assert mean_cost(data, dec) == pytest.approx(0.1)  # realised, not 0.9


def test_without_an_estimate_the_realised_cost_is_the_decision_cost():
    data = _set(np.array([[0.2, 1.0]]), None)
    assert data.decision_cost is data.cost
    assert data.subset(np.array([0])).cost_est is None


def test_device_dearer_share_counts_rows_where_m0_costs_more_than_the_cheapest_edge_model():
    cost = np.array([[0.3, 0.2, 1.0], [0.1, 0.2, 1.0], [0.25, 0.25, 1.0], [0.9, 0.5, 1.0]])
    assert device_dearer_share(cost) == pytest.approx(0.5)
