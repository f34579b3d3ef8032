"""The deploy rule (cr2.evaluation.deploy): a router, "no device" or "undecided" — never a recommendation from absence
of evidence, never a candidate any test calls dearer, and the rule's text is the one docs/guarantees.md states."""
import math
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from cr2.evaluation.deploy import (ALWAYS_EDGE, CHEAPEST, DEPLOY, MARGIN_PCT, NO_DEVICE_ANSWER, NON_INFERIOR, OUT,
                                   PAIR_METRIC, RULE_SHA, RULE_TEXT, UNDECIDED, RouterHead,
                                   deploy_candidates, deploy_decision, grid_log_cost, noninferiority_p,
                                   one_sided_upper)
from cr2.evaluation.statistics import DEARER

RULE, ALPHA, B = "crc-avoidable", 0.01, 4000
HEADS = {"cr2": RouterHead(flops_choose=789_504, flops_gate=207_104, params_choose=197_376, params_gate=51_457),
         "knn": RouterHead(flops_choose=13_209_600), "mlp": RouterHead(flops_choose=469_800)}


def _candidates():
    return deploy_candidates(RULE, ["cr2", "knn", "mlp"], HEADS)


def _costs(mean_cost: dict[str, float], sd: float, seed: int = 0, b: int = B):
    """L per candidate: log of its mean cost, resampled with a shared component and an independent one of sd."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0.0, sd, b)
    return {n: (math.log(c), math.log(c) + shared + rng.normal(0.0, sd, b)) for n, c in mean_cost.items()}


def _all(**costs):
    base = {ALWAYS_EDGE: 0.60, "cr2@no-device": 0.55, "knn@no-device": 0.55, "mlp@no-device": 0.56,
            f"cr2@{RULE}": 0.40, f"knn@{RULE}": 0.40, f"mlp@{RULE}": 0.41}
    base.update({k.replace("_at", f"@{RULE}").replace("_nd", "@no-device"): v for k, v in costs.items()})
    return base


def _dearer_words(rows):
    return {(r["method_a"], r["method_b"]) for r in rows if r["metric"] == PAIR_METRIC and r["verdict"] == DEARER} | \
        {(r["method_b"], r["method_a"]) for r in rows if r["metric"] == PAIR_METRIC and r["verdict"] == "cheaper"}


def test_the_whole_decision_cost_ranks_cr2_by_gate_plus_teacher_and_the_device_first():
    c = {x.name: x for x in _candidates()}
    assert c[f"cr2@{RULE}"].flops_worst == 207_104 + 789_504  # every deferral needs the teacher's p̂
    assert c["cr2@no-device"].flops_worst == 789_504 and c["cr2@no-device"].flops_device == 0
    assert c[f"mlp@{RULE}"].flops_worst == 469_800 < c[f"cr2@{RULE}"].flops_worst
    order = [x.name for x in sorted(c.values(), key=lambda x: x.complexity)]
    assert order[0] == ALWAYS_EDGE and all(n.endswith("@no-device") for n in order[1:4])  # no device model first
    assert order[4:] == [f"mlp@{RULE}", f"cr2@{RULE}", f"knn@{RULE}"]
    with pytest.raises(Exception, match="no stored FLOPs"):
        deploy_candidates(RULE, ["cr2", "llmrank"], HEADS)


def test_high_power_recommends_the_cheapest_and_says_which_test_shows_it():
    costs = _all(cr2_at=0.30)  # CR² 25 % cheaper than every other candidate
    d, rows = deploy_decision(_candidates(), _costs(costs, sd=0.005), RULE, ALPHA)
    assert (d.answer, d.recommended, d.undecided_with) == (DEPLOY, f"cr2@{RULE}", ())
    assert d.status[f"cr2@{RULE}"] == CHEAPEST and d.status[f"mlp@{RULE}"] == OUT
    assert d.n_pairs == math.comb(7, 2) == sum(r["metric"] == PAIR_METRIC for r in rows)  # one test per unordered pair
    assert d.rule_sha == RULE_SHA and d.margin_pct == MARGIN_PCT


def test_low_power_says_undecided_and_names_both_never_one():
    costs = _all(cr2_at=0.38)  # 5 % cheaper, but the resamples cannot tell
    d, rows = deploy_decision(_candidates(), _costs(costs, sd=0.2), RULE, ALPHA)
    assert d.answer == UNDECIDED and d.recommended == f"cr2@{RULE}" and len(d.undecided_with) >= 1
    assert set(d.undecided_with) <= {c.name for c in _candidates()} - {d.recommended}
    assert len(d.names) >= 2


def test_a_simpler_router_shown_within_the_margin_is_preferred_and_one_outside_it_is_not():
    # MLP 1 % dearer than CR² (inside Δ = 2 %), tightly measured: the simpler MLP is shown non-inferior
    d, _ = deploy_decision(_candidates(), _costs(_all(cr2_at=0.30, mlp_at=0.303, knn_at=0.40), sd=0.001), RULE, ALPHA)
    assert d.cheapest == f"cr2@{RULE}" and d.status[f"mlp@{RULE}"] in (NON_INFERIOR, OUT)
    # MLP non-inferior but also detectably dearer than CR²: out — the rule never picks a router called dearer
    if d.status[f"mlp@{RULE}"] == OUT:
        assert d.recommended == f"cr2@{RULE}"
    else:
        assert d.recommended == f"mlp@{RULE}"
    # 10 % dearer: never non-inferior, so CR² stays
    d, _ = deploy_decision(_candidates(), _costs(_all(cr2_at=0.30, mlp_at=0.33), sd=0.001), RULE, ALPHA)
    assert d.recommended == f"cr2@{RULE}" and d.answer == DEPLOY


def test_non_inferiority_within_the_margin_without_a_detected_difference_prefers_the_simpler():
    # equal costs, tight resamples: no pair is detectably different, and MLP is shown within Δ of CR²
    mean = _all(cr2_at=0.30, mlp_at=0.30, knn_at=0.45)
    rng = np.random.default_rng(3)
    log_cost = {n: (math.log(c), math.log(c) + rng.normal(0.0, 0.004, B)) for n, c in mean.items()}
    log_cost[f"cr2@{RULE}"] = (math.log(0.2999), log_cost[f"cr2@{RULE}"][1])
    d, _ = deploy_decision(_candidates(), log_cost, RULE, ALPHA)
    assert d.cheapest == f"cr2@{RULE}" and d.status[f"mlp@{RULE}"] == NON_INFERIOR
    assert d.recommended == f"mlp@{RULE}" and d.answer == DEPLOY


def test_no_device_is_an_answer_when_switching_the_device_off_is_cheapest():
    costs = _all(knn_nd=0.30)  # KNN with the device off beats every candidate with one
    d, _ = deploy_decision(_candidates(), _costs(costs, sd=0.003), RULE, ALPHA)
    assert d.answer == NO_DEVICE_ANSWER and d.recommended == "knn@no-device"
    costs = {n: 0.6 if n != ALWAYS_EDGE else 0.2 for n in _all()}
    d, _ = deploy_decision(_candidates(), _costs(costs, sd=0.003), RULE, ALPHA)
    assert d.answer == NO_DEVICE_ANSWER and d.recommended == ALWAYS_EDGE


@pytest.mark.parametrize("seed", range(12))
def test_the_recommendation_is_never_called_dearer_by_any_test(seed):
    rng = np.random.default_rng(seed)
    costs = {n: float(rng.uniform(0.3, 0.6)) for n in _all()}
    sd = float(rng.choice([0.002, 0.02, 0.2]))
    dearer_elsewhere = {f"cr2@{RULE}": [f"knn@{RULE}"]} if seed % 2 else None
    d, rows = deploy_decision(_candidates(), _costs(costs, sd, seed), RULE, ALPHA, dearer_elsewhere=dearer_elsewhere)
    for name in d.names[:1] if d.answer != UNDECIDED else ():
        assert not any(a == name for a, _ in _dearer_words(rows))
        assert not (dearer_elsewhere and name == f"cr2@{RULE}")
    assert d.answer in (DEPLOY, NO_DEVICE_ANSWER, UNDECIDED)


def test_pair_estimand_is_antisymmetric_and_its_interval_and_p_agree():
    log_cost = _costs(_all(cr2_at=0.35), sd=0.05, seed=7)
    d, rows = deploy_decision(_candidates(), log_cost, RULE, ALPHA)
    for r in (r for r in rows if r["metric"] == PAIR_METRIC):
        la, lb = log_cost[r["method_a"]][0], log_cost[r["method_b"]][0]
        assert r["estimate"] == pytest.approx(100 * (1 - math.exp(la - lb)))
        assert (r["lower"] > 0 or r["upper"] < 0) == (r["p_value"] < 0.05)  # one test: interval and p agree
    pairs = {(r["method_a"], r["method_b"]) for r in rows if r["metric"] == PAIR_METRIC}
    assert not any((b, a) in pairs for a, b in pairs)


@pytest.mark.parametrize("b", [99, 1000, 1001, 4000])
def test_one_sided_bound_and_p_are_one_test(b):
    rng = np.random.default_rng(b)
    for _ in range(200):
        d = rng.normal(rng.uniform(-0.05, 0.05), 0.02, b)
        m = float(rng.uniform(-0.02, 0.06))
        assert (one_sided_upper(d) < m) == (noninferiority_p(d, m) < 0.05)


def test_costs_must_exist_on_every_resample_and_be_positive():
    with pytest.raises(Exception, match="finite and positive"):
        grid_log_cost(np.array([0.3, np.nan]), np.full((3, 2), 0.3), np.array([0, 1]))
    with pytest.raises(Exception, match="≥ 2 candidates"):
        deploy_decision(_candidates()[:1], {ALWAYS_EDGE: (0.0, np.zeros(3))}, RULE, ALPHA)


def test_the_rule_text_is_the_one_docs_guarantees_states_before_any_run():
    docs = (Path(__file__).resolve().parents[1] / "docs" / "guarantees.md").read_text(encoding="utf-8")
    assert RULE_TEXT in docs, "docs/guarantees.md must state cr2.evaluation.deploy.RULE_TEXT verbatim"
    assert RULE_SHA in docs, "docs/guarantees.md must name the rule's hash"


def test_every_pair_is_in_the_family_once():
    cands = _candidates()
    d, rows = deploy_decision(cands, _costs(_all(), sd=0.05), RULE, ALPHA)
    tested = {frozenset((r["method_a"], r["method_b"])) for r in rows if r["metric"] == PAIR_METRIC}
    assert tested == {frozenset((a.name, b.name)) for a, b in combinations(cands, 2)}
