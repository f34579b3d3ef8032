"""The equal-risk comparison (cr2.evaluation.equal_risk) on synthetic sweeps: the questions' comparisons, paired savings
over the validation grid with the Always-model fallback, bootstrap p-values of the same resamples, Holm per family
(question × rule × α), and the one verdict rule (cr2.evaluation.statistics.saving_verdict)."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.evaluation.statistics import (CHEAPER, DEARER, NO_DIFFERENCE, bootstrap_interval, bootstrap_p_values, holm_adjust,
                                       resample_counts, resample_indices, saving_verdict, significant, tail_rank)
from cr2.evaluation.equal_risk import (COST, CR2_UNCERTIFIED, MEAN_SAVING, SAVING, Side, certified_side, decomposition,
                                       equal_risk_rows, uncertified_side)
from cr2.evaluation.fixed_accuracy import FallbackCost, MethodOutcomes, always_outcomes, frontier_cost_at, saving_pct


def test_the_decomposition_names_its_sides_and_covers_every_baseline_rule_and_alpha():
    comps = decomposition(["knn", "mlp", "cr2"], ["crc", "crc-oracle"], [0.01, 0.05])
    by_q = {q: [c for c in comps if c.question == q]
            for q in ("gate-quality", "calibrated-vs-default", "certified-score")}
    assert len(by_q["gate-quality"]) == 2 and len(by_q["calibrated-vs-default"]) == 3 * 2 * 2
    assert len(by_q["certified-score"]) == 2 * 2 * 2
    assert {c.question for c in comps} == set(by_q)  # which router to deploy is cr2.evaluation.deploy's, not a question
    g = by_q["gate-quality"][0]
    assert (g.a, g.b) == (Side(CR2_UNCERTIFIED, None), Side("knn@uncertified", None))
    c = next(c for c in by_q["certified-score"] if c.against == "mlp" and c.rule == "crc-oracle" and c.alpha == 0.05)
    assert (c.a, c.b) == (Side("cr2@crc-oracle", 0.05), Side("mlp@crc-oracle", 0.05))
    p = next(c for c in by_q["calibrated-vs-default"] if c.router == "knn" and c.rule == "crc" and c.alpha == 0.01)
    assert (p.a, p.b, p.against) == (Side("knn@crc", 0.01), Side("knn@uncertified", None), "uncertified")
    assert uncertified_side("cr2").method == "cr2-fixed-0.5" and certified_side("knn", "crc", 0.02).alpha == 0.02


def test_bootstrap_p_value_counts_the_resamples_on_each_side_of_zero():
    s = np.array([-1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    assert bootstrap_p_values(s) == pytest.approx(2 * 2 / 10)  # two resamples ≤ 0
    assert bootstrap_p_values(-s) == pytest.approx(2 * 2 / 10)
    assert bootstrap_p_values(np.zeros(5)) == 1.0 and bootstrap_p_values(np.ones(5)) == 0.0
    np.testing.assert_allclose(bootstrap_p_values(np.stack([s, -s, np.ones(10)], axis=1)), [0.4, 0.4, 0.0])
    with pytest.raises(Exception, match="every resample"):
        bootstrap_interval(np.array([1.0, np.nan, 2.0]), 1.0)


def test_a_skewed_bootstrap_distribution_gives_interval_p_and_word_that_agree():
    """A distribution built by hand with a long left tail: its estimate sits near the 3rd percentile's side, where a
    normal approximation of |estimate| / SE would call it significant while the resamples themselves do not."""
    rng = np.random.default_rng(3)
    b = 10_000
    body = rng.normal(-5.5, 0.15, b - 600)  # most resamples just below 0 …
    tail = np.concatenate([rng.uniform(-0.05, 2.0, 520), np.zeros(80)])  # … and a tail across it
    skewed = rng.permutation(np.concatenate([body, tail]))
    iv = bootstrap_interval(skewed, -5.4)
    assert iv.n_resamples == b
    normal_z = abs(iv.estimate) / skewed.std(ddof=1)
    assert normal_z > 3.0  # a normal approximation would give p < 0.003
    assert iv.p_value == pytest.approx(2 * (skewed >= 0).sum() / b) and iv.p_value > 0.05
    assert iv.upper >= 0 and saving_verdict(iv.lower, iv.upper) == NO_DIFFERENCE  # interval, p and word agree
    # move the tail: the word flips exactly where p crosses 0.05, never one without the other
    for shift in np.linspace(0.0, 6.0, 241):
        s = skewed - shift * (skewed > -1.0)
        iv = bootstrap_interval(s, -5.4)
        assert (saving_verdict(iv.lower, iv.upper) != NO_DIFFERENCE) == significant(iv.p_value), shift


@pytest.mark.parametrize("b", [100, 999, 1_000, 1_001, 4_000, 10_000])
def test_interval_excludes_zero_exactly_where_p_is_below_one_minus_level(b):
    rng = np.random.default_rng(b)
    r = tail_rank(b)
    for k in range(max(0, r - 3), r + 4):  # k resamples ≤ 0, the rest > 0: the boundary of the test
        s = np.concatenate([-rng.random(k), rng.random(b - k) + 1e-9])
        iv = bootstrap_interval(s, 0.5)
        assert (iv.lower > 0) == significant(iv.p_value), (b, k)


def test_holm_skips_undefined_p_values_and_never_lowers_one():
    p = np.array([0.01, np.nan, 0.04, 0.03])
    adj = holm_adjust(p)
    np.testing.assert_allclose(adj[[0, 2, 3]], [0.03, 0.06, 0.06])
    assert np.isnan(adj[1]) and (adj[[0, 2, 3]] >= p[[0, 2, 3]]).all()
    assert holm_adjust(np.array([])).shape == (0,)


@pytest.mark.parametrize("lower, upper, p_adj, word", [
    (0.5, 2.0, None, CHEAPER), (-2.0, -0.5, None, DEARER), (-1.0, 1.0, None, NO_DIFFERENCE),
    (0.5, 2.0, 0.2, NO_DIFFERENCE), (0.5, 2.0, 0.01, CHEAPER), (-3.0, -1.0, 0.049, DEARER),
    (0.5, 2.0, 0.05, NO_DIFFERENCE), (float("nan"), 1.0, None, None)])
def test_the_one_saving_verdict(lower, upper, p_adj, word):
    assert saving_verdict(lower, upper, p_adj) == word


def _sweep(rng, n, k, cost_scale, flip=0.0):
    """A λ sweep of k operating points on n queries: accuracy rises with cost; cost_scale multiplies every cost."""
    base_correct = rng.random((n, 1)) < np.linspace(0.55, 0.9, k)[None, :]
    if flip:
        base_correct ^= rng.random((n, k)) < flip
    cost = np.tile(np.linspace(0.2, 1.0, k), (n, 1)) * cost_scale
    return MethodOutcomes(base_correct, cost)


def _fallback(rng, n, targets, counts):
    """Two Always-models: a cheap weak one and a dear strong one (accuracy 0.97 reaches every target here)."""
    correct = np.stack([rng.random(n) < 0.5, rng.random(n) < 0.97], axis=1)
    cost = np.tile([0.1, 3.0], (n, 1))
    return FallbackCost.of_always(always_outcomes(correct, cost), targets, counts)


def test_equal_risk_rows_pair_the_sides_and_hold_holm_per_family():
    rng = np.random.default_rng(1)
    n, k = 2_000, 12
    shared = _sweep(rng, n, k, 1.0)
    half = MethodOutcomes(shared.correct, shared.cost * 0.5)  # the same accuracy at half the cost
    outcomes = {Side(CR2_UNCERTIFIED, None): half, Side("knn@uncertified", None): shared,
                Side("cr2@crc", 0.01): shared, Side("knn@crc", 0.01): shared}
    comps = decomposition(["knn", "cr2"], ["crc"], [0.01]) + decomposition(["mlp", "cr2"], ["crc"], [0.01])  # mlp: absent
    sides = {s: (s.method.split("@")[0], None) for s in outcomes}
    targets = np.array([0.6, 0.7, 0.8, 0.95])
    grid = np.array([0.6, 0.7, 0.8])
    counts = resample_counts(resample_indices(n, 200, np.random.default_rng(0)), n)
    fallback = _fallback(rng, n, targets, counts)
    rows = equal_risk_rows(outcomes, comps, sides, targets, counts, fallback, grid)
    means = {(r["question"], r["router"], r["against"]): r for r in rows if r["metric"] == MEAN_SAVING}
    assert set(means) == {("gate-quality", "cr2", "knn"), ("calibrated-vs-default", "cr2", "uncertified"),
                          ("calibrated-vs-default", "knn", "uncertified"), ("certified-score", "cr2", "knn")}
    gate = means[("gate-quality", "cr2", "knn")]
    assert gate["estimate"] == pytest.approx(50.0) and gate["lower"] == pytest.approx(50.0)  # paired: exact on every resample
    assert gate["verdict"] == CHEAPER and gate["p_holm"] == 0.0
    assert means[("calibrated-vs-default", "cr2", "uncertified")]["estimate"] == pytest.approx(-100.0)
    same = means[("certified-score", "cr2", "knn")]
    assert same["estimate"] == 0.0 and same["verdict"] == NO_DIFFERENCE
    for r in means.values():
        assert r["p_holm"] >= r["p_value"] and r["n_targets"] == 3 and r["n_resamples"] == 200  # nothing dropped
    acc, cost = shared.points()
    cost_rows = [r for r in rows if r["metric"] == COST and r["method_a"] == "knn@crc"]
    np.testing.assert_allclose([r["estimate"] for r in cost_rows], frontier_cost_at(acc, cost, targets[:3]))  # reached only
    per_target = [r for r in rows if r["metric"] == SAVING and r["question"] == "gate-quality"]
    assert len(per_target) == 4 and all(r["n_resamples"] == 200 for r in per_target)
    np.testing.assert_allclose([r["estimate"] for r in per_target[:3]],
                               saving_pct(frontier_cost_at(*half.points(), targets[:3]), frontier_cost_at(acc, cost, targets[:3])))
    assert per_target[3]["estimate"] == 0.0  # 0.95: neither frontier reaches it, both pay the same fallback


def test_holm_is_applied_over_each_family_and_families_are_split_by_alpha():
    rng = np.random.default_rng(2)
    n, k = 1_500, 10
    base = _sweep(rng, n, k, 1.0)
    noisy = {b: _sweep(rng, n, k, 1.0, flip=0.1) for b in ("b1", "b2", "b3")}
    outcomes = {Side(CR2_UNCERTIFIED, None): base, **{Side(f"{b}@uncertified", None): o for b, o in noisy.items()}}
    for a in (0.01, 0.05):
        outcomes.update({Side(f"{r}@crc", a): o for r, o in [("cr2", base), *noisy.items()]})
    counts = resample_counts(resample_indices(n, 300, np.random.default_rng(0)), n)
    targets = np.array([0.6, 0.7])
    rows = equal_risk_rows(outcomes, decomposition(["b1", "b2", "b3", "cr2"], ["crc"], [0.01, 0.05]), {}, targets, counts,
                           _fallback(rng, n, targets, counts), targets)
    means = [r for r in rows if r["metric"] == MEAN_SAVING]
    fams = {}
    for r in means:
        fams.setdefault((r["question"], r["rule"], r["alpha"]), []).append(r)
    assert {len(f) for f in fams.values()} == {3, 4}  # 3 baselines; calibrated-vs-default: 4 routers
    assert len(fams) == 1 + 2 * 2  # gate-quality; two questions × two α
    for fam in fams.values():
        np.testing.assert_allclose([r["p_holm"] for r in fam], holm_adjust(np.array([r["p_value"] for r in fam])))


def test_the_mean_saving_leaves_out_grid_targets_no_always_model_reaches_and_stores_why():
    rng = np.random.default_rng(4)
    n, k = 1_000, 8
    shared = _sweep(rng, n, k, 1.0)
    half = MethodOutcomes(shared.correct, shared.cost * 0.5)
    outcomes = {Side(CR2_UNCERTIFIED, None): half, Side("knn@uncertified", None): shared}
    comps = decomposition(["knn", "cr2"], [], [])
    sides = {s: (s.method.split("@")[0], None) for s in outcomes}
    targets = np.array([0.6, 0.7, 0.8, 0.95, 0.99])
    counts = resample_counts(resample_indices(n, 100, np.random.default_rng(0)), n)
    correct = np.stack([rng.random(n) < 0.5, rng.random(n) < 0.9], axis=1)  # the best Always-model: about 0.9
    fallback = FallbackCost.of_always(always_outcomes(correct, np.tile([0.1, 3.0], (n, 1))), targets, counts)
    rows = equal_risk_rows(outcomes, comps, sides, targets, counts, fallback, targets)
    (mean,) = [r for r in rows if r["metric"] == MEAN_SAVING]
    assert mean["n_targets"] == 3 and "0.95, 0.99" in mean["dropped_targets"]
    per_target = [r["estimate"] for r in rows if r["metric"] == SAVING]
    assert mean["estimate"] == pytest.approx(np.mean(per_target[:3]))
    assert all(r["dropped_targets"] is None for r in rows if r["metric"] != MEAN_SAVING)
