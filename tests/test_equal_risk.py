"""The equal-risk comparison (cr2.evaluation.equal_risk) on synthetic sweeps: the three questions' comparisons, paired savings
with bootstrap p-values, Holm per question, and the one verdict rule (cr2.evaluation.statistics.saving_verdict)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cr2.evaluation.statistics import CHEAPER, DEARER, NO_DIFFERENCE, bootstrap_p_value, holm_adjust, resample_counts, \
    resample_indices, saving_verdict
from cr2.evaluation.equal_risk import (COST, CR2_UNCERTIFIED, MEAN_SAVING, SAVING, Side, certified_side, decomposition,
                            equal_risk_rows, uncertified_side)
from cr2.evaluation.fixed_accuracy import MethodOutcomes, frontier_cost_at, saving_pct


def test_the_decomposition_names_its_sides_and_covers_every_baseline_rule_and_alpha():
    comps = decomposition(["knn", "mlp", "cr2"], ["crc", "crc-oracle"], [0.01, 0.05])
    by_q = {q: [c for c in comps if c.question == q] for q in ("gate-quality", "guarantee-price", "certified-score")}
    assert len(by_q["gate-quality"]) == 2 and len(by_q["guarantee-price"]) == 3 * 2 * 2
    assert len(by_q["certified-score"]) == 2 * 2 * 2
    g = by_q["gate-quality"][0]
    assert (g.a, g.b) == (Side(CR2_UNCERTIFIED, None), Side("knn@uncertified", None))
    c = next(c for c in by_q["certified-score"] if c.against == "mlp" and c.rule == "crc-oracle" and c.alpha == 0.05)
    assert (c.a, c.b) == (Side("cr2@crc-oracle", 0.05), Side("mlp@crc-oracle", 0.05))
    p = next(c for c in by_q["guarantee-price"] if c.router == "knn" and c.rule == "crc" and c.alpha == 0.01)
    assert (p.a, p.b, p.against) == (Side("knn@crc", 0.01), Side("knn@uncertified", None), "uncertified")
    assert uncertified_side("cr2").method == "cr2-fixed-0.5" and certified_side("knn", "crc", 0.02).alpha == 0.02


def test_bootstrap_p_value_is_the_normal_tail_of_the_standard_error():
    rng = np.random.default_rng(0)
    samples = rng.normal(2.0, 1.0, 20_000)
    assert bootstrap_p_value(2.0, samples) == pytest.approx(math.erfc(2.0 / math.sqrt(2.0)), rel=0.02)
    assert bootstrap_p_value(0.0, samples) == pytest.approx(1.0)
    assert math.isnan(bootstrap_p_value(1.0, np.array([np.nan, 1.0])))
    assert bootstrap_p_value(1.0, np.ones(5)) == 0.0 and bootstrap_p_value(0.0, np.zeros(5)) == 1.0


def test_holm_skips_undefined_p_values_and_never_lowers_one():
    p = np.array([0.01, np.nan, 0.04, 0.03])
    adj = holm_adjust(p)
    np.testing.assert_allclose(adj[[0, 2, 3]], [0.03, 0.06, 0.06])
    assert np.isnan(adj[1]) and (adj[[0, 2, 3]] >= p[[0, 2, 3]]).all()
    assert holm_adjust(np.array([])).shape == (0,)


@pytest.mark.parametrize("lower, upper, p_adj, word", [
    (0.5, 2.0, None, CHEAPER), (-2.0, -0.5, None, DEARER), (-1.0, 1.0, None, NO_DIFFERENCE),
    (0.5, 2.0, 0.2, NO_DIFFERENCE), (0.5, 2.0, 0.01, CHEAPER), (-3.0, -1.0, 0.049, DEARER),
    (float("nan"), 1.0, None, None)])
def test_the_one_saving_verdict(lower, upper, p_adj, word):
    assert saving_verdict(lower, upper, p_adj) == word


def _sweep(rng, n, k, cost_scale, flip=0.0):
    """A λ sweep of k operating points on n queries: accuracy rises with cost; cost_scale multiplies every cost."""
    base_correct = rng.random((n, 1)) < np.linspace(0.55, 0.9, k)[None, :]
    if flip:
        base_correct ^= rng.random((n, k)) < flip
    cost = np.tile(np.linspace(0.2, 1.0, k), (n, 1)) * cost_scale
    return MethodOutcomes(base_correct, cost)


def test_equal_risk_rows_pair_the_sides_and_hold_holm_per_question():
    rng = np.random.default_rng(1)
    n, k = 2_000, 12
    shared = _sweep(rng, n, k, 1.0)
    half = MethodOutcomes(shared.correct, shared.cost * 0.5)  # the same accuracy at half the cost
    outcomes = {Side(CR2_UNCERTIFIED, None): half, Side("knn@uncertified", None): shared,
                Side("cr2@crc", 0.01): shared, Side("knn@crc", 0.01): shared}
    comps = decomposition(["knn", "cr2"], ["crc"], [0.01]) + decomposition(["mlp", "cr2"], ["crc"], [0.01])  # mlp: absent
    sides = {s: (s.method.split("@")[0], None) for s in outcomes}
    targets = np.array([0.6, 0.7, 0.8, 0.95])
    counts = resample_counts(resample_indices(n, 200, np.random.default_rng(0)), n)
    rows = equal_risk_rows(outcomes, comps, sides, targets, counts)
    means = {(r["question"], r["router"], r["against"]): r for r in rows if r["metric"] == MEAN_SAVING}
    assert set(means) == {("gate-quality", "cr2", "knn"), ("guarantee-price", "cr2", "uncertified"),
                          ("guarantee-price", "knn", "uncertified"), ("certified-score", "cr2", "knn")}  # mlp skipped
    gate = means[("gate-quality", "cr2", "knn")]
    assert gate["estimate"] == pytest.approx(50.0) and gate["lower"] == pytest.approx(50.0)  # paired: exact on every resample
    assert gate["verdict"] == CHEAPER and gate["p_holm"] == 0.0
    assert means[("guarantee-price", "cr2", "uncertified")]["estimate"] == pytest.approx(-100.0)
    same = means[("certified-score", "cr2", "knn")]
    assert same["estimate"] == 0.0 and same["verdict"] == NO_DIFFERENCE
    for r in means.values():
        assert r["p_holm"] >= r["p_value"] and r["n_targets"] == 3  # 0.95 is reached by neither
    acc, cost = shared.points()
    cost_rows = [r for r in rows if r["metric"] == COST and r["method_a"] == "knn@crc"]
    np.testing.assert_allclose([r["estimate"] for r in cost_rows], frontier_cost_at(acc, cost, targets[:3]))
    per_target = [r for r in rows if r["metric"] == SAVING and r["question"] == "gate-quality"]
    np.testing.assert_allclose([r["estimate"] for r in per_target],
                               saving_pct(frontier_cost_at(*half.points(), targets[:3]), frontier_cost_at(acc, cost, targets[:3])))


def test_holm_is_applied_over_each_questions_family():
    rng = np.random.default_rng(2)
    n, k = 1_500, 10
    base = _sweep(rng, n, k, 1.0)
    noisy = {b: _sweep(rng, n, k, 1.0, flip=0.1) for b in ("b1", "b2", "b3")}
    outcomes = {Side(CR2_UNCERTIFIED, None): base, **{Side(f"{b}@uncertified", None): o for b, o in noisy.items()}}
    counts = resample_counts(resample_indices(n, 300, np.random.default_rng(0)), n)
    rows = equal_risk_rows(outcomes, decomposition(["b1", "b2", "b3", "cr2"], [], []), {}, np.array([0.6, 0.7]), counts)
    fam = [r for r in rows if r["metric"] == MEAN_SAVING]
    assert len(fam) == 3
    np.testing.assert_allclose([r["p_holm"] for r in fam], holm_adjust(np.array([r["p_value"] for r in fam])))


def test_interval_p_value_inverts_a_normal_interval():
    from cr2.evaluation.statistics import interval_p_value

    assert interval_p_value(1.96, 0.0, 3.92) == pytest.approx(0.05, rel=1e-6)
    assert interval_p_value(0.0, -1.0, 1.0) == pytest.approx(1.0)
    assert interval_p_value(5.0, 4.0, 6.0) < 1e-10
    assert math.isnan(interval_p_value(1.0, float("nan"), 2.0))
