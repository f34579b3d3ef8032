"""Intervals of one evaluation (cr2.evaluation.intervals): estimates are the metrics table's values, the index is shared,
identical methods centre on 0, intervals shrink with the test set, and a row subset is a paired ratio mean."""
import numpy as np
import pytest

from cr2.evaluation.statistics import percentile_intervals, resample_counts, resample_indices, resampled_means
from cr2.core.data import Decisions, RoutingSet
from cr2.evaluation.sweep import metric_rows
from cr2.evaluation.intervals import (MEAN_SAVING, SAVING, OperatingPoint, method_outcomes, metric_intervals,
                           saving_interval_rows, always_fallback)
from cr2.evaluation.metrics import PER_QUERY_METRICS, PerQueryMetric, evaluable_mask


def _test_set(n: int, seed: int = 0) -> tuple[RoutingSet, np.ndarray]:
    rng = np.random.default_rng(seed)
    k = 4
    correct = rng.random((n, k)) < np.array([0.55, 0.7, 0.8, 0.85])
    cost = np.sort(rng.random((n, k)).astype(np.float32), axis=1)
    cost[:, -1] = 1.0
    data = RoutingSet(query_id=np.array([f"q{i}" for i in range(n)]), benchmark=rng.choice(["a", "b"], n),
                      embedding=np.zeros((n, 8), np.float32), correct=correct, cost=cost,
                      model_ids=("m0", "m1", "m2", "m3"), cost_est=cost * 1.1)
    proba = np.clip(correct + rng.normal(0, 0.3, (n, k)), 0, 1)
    return data, proba


def _points(data: RoutingSet, n_lam: int = 6, seed: int = 1, method: str = "r") -> list[OperatingPoint]:
    rng = np.random.default_rng(seed)
    pts = []
    for j, lam in enumerate(np.linspace(0.0, 4.0, n_lam)):
        # a cheaper model more often as λ grows
        chosen = np.minimum(rng.geometric(min(0.2 + 0.1 * j, 0.95), len(data)) - 1, 3)[::-1].copy()
        chosen = 3 - chosen if j < n_lam // 2 else chosen
        pts.append(OperatingPoint(method, float(lam), None, chosen.astype(np.int64), chosen == 0))
    return pts


def test_estimates_are_the_metrics_table_values_for_every_benchmark():
    data, proba = _test_set(300)
    keep = evaluable_mask(data)
    points = _points(data)
    counts = resample_counts(resample_indices(len(data), 200, np.random.default_rng(0)), len(data))
    rows = metric_intervals(points, data, proba, keep, counts)
    got = {(r["lam"], r["benchmark"], r["metric"]): r for r in rows}
    for p in points:
        dec = Decisions(chosen=p.chosen, accepted_local=p.chosen == 0, extra={"gate_accept": p.gate_accept})
        for m in metric_rows("run", p.method, p.lam, None, data, dec, proba, keep):
            if m["metric"] in PER_QUERY_METRICS:
                r = got[(p.lam, m["benchmark"], m["metric"])]
                assert r["estimate"] == m["value"]  # exactly: the same per-query values, the same mean
                assert r["lower"] <= r["estimate"] + 1e-12 and r["estimate"] <= r["upper"] + 1e-12


def test_a_registered_per_query_metric_gets_intervals_without_other_changes():
    data, proba = _test_set(200)
    points = _points(data, n_lam=2)
    counts = resample_counts(resample_indices(len(data), 200, np.random.default_rng(0)), len(data))
    extra = {**PER_QUERY_METRICS, "toy_dearer_than_half": PerQueryMetric(
        "toy_dearer_than_half", lambda q, dec: (q.data.cost[np.arange(len(q.data)), dec.chosen] > 0.5).astype(float), "all")}
    rows = metric_intervals(points, data, proba, np.ones(len(data), bool), counts, per_benchmark=False, metrics=extra)
    toy = [r for r in rows if r["metric"] == "toy_dearer_than_half"]
    assert len(toy) == 2 and all(r["lower"] <= r["estimate"] <= r["upper"] for r in toy)


def test_identical_methods_give_a_saving_interval_at_zero_and_a_different_one_is_detected():
    data, _ = _test_set(800)
    keep = evaluable_mask(data)
    counts = resample_counts(resample_indices(len(data), 500, np.random.default_rng(2)), len(data))
    ref = _points(data, n_lam=8, method="knn")
    same = [OperatingPoint("same", p.lam, p.alpha, p.chosen.copy(), p.gate_accept.copy()) for p in ref]
    outcomes = {"knn": method_outcomes(ref, data, keep), "same": method_outcomes(same, data, keep)}
    targets = np.arange(50, 100) / 100.0
    grid = targets[10:30]
    fallback = always_fallback(data, keep, targets, counts)
    rows = saving_interval_rows(outcomes, "knn", targets, counts, fallback, grid)
    same_rows = [r for r in rows if r["method"] == "same"]
    assert same_rows and all(r["estimate"] == 0.0 and r["lower"] == 0.0 == r["upper"] for r in same_rows)
    assert all(r["n_resamples"] == 500 and r["p_value"] == 1.0 for r in same_rows)  # every resample, p of the same ones
    mean = [r for r in same_rows if r["metric"] == MEAN_SAVING][0]
    assert mean["n_targets"] == len(grid) and sum(r["metric"] == SAVING for r in same_rows) == len(targets)
    # the same choices at 80 % of the cost everywhere: 20 % cheaper, and the interval says so
    cheap = method_outcomes(ref, data, keep)
    cheaper = type(cheap)(cheap.correct, cheap.cost * 0.8, rows=cheap.rows)
    mean = [r for r in saving_interval_rows({"knn": outcomes["knn"], "cheaper": cheaper}, "knn", targets, counts,
                                            fallback, grid)
            if r["method"] == "cheaper" and r["metric"] == MEAN_SAVING][0]
    assert mean["lower"] > 0 and mean["p_value"] == 0.0


def test_row_subset_means_are_paired_ratio_means():
    rng = np.random.default_rng(3)
    x = rng.random(400)
    rows = rng.random(400) < 0.7
    idx = resample_indices(400, 300, np.random.default_rng(4))
    sub = resampled_means(x, idx, rows)
    counts = resample_counts(idx, 400)
    # by hand: the drawn rows of the subset on each resample
    manual = np.array([x[r][rows[r]].mean() for r in idx])
    assert np.allclose(sub, manual)
    assert np.allclose(resampled_means(x, None, rows, counts=counts), sub)
    assert np.allclose(resampled_means(x, idx), np.array([x[r].mean() for r in idx]))


def test_vectorised_intervals_match_the_scalar_ones_and_drop_missing_resamples():
    from cr2.evaluation.statistics import percentile_interval

    rng = np.random.default_rng(5)
    s = rng.normal(size=(500, 3))
    s[:40, 2] = np.nan
    lo, hi, p, n_ok = percentile_intervals(s, np.zeros(3))
    for j in range(3):
        iv = percentile_interval(s[:, j], 0.0)
        assert lo[j] == pytest.approx(iv.lower) and hi[j] == pytest.approx(iv.upper) and n_ok[j] == iv.n_resamples
        assert p[j] == pytest.approx(iv.p_value)
    assert n_ok.tolist() == [500, 500, 460]


def test_operating_point_intervals_shrink_as_the_test_set_grows():
    widths = []
    for n in (150, 600, 2400):
        data, proba = _test_set(n, seed=n)
        counts = resample_counts(resample_indices(n, 1000, np.random.default_rng(n)), n)
        rows = metric_intervals(_points(data, seed=7), data, proba, evaluable_mask(data), counts, per_benchmark=False,
                                metrics={"accuracy": PER_QUERY_METRICS["accuracy"]})
        widths.append(np.mean([r["upper"] - r["lower"] for r in rows]))
    assert widths[0] > widths[1] > widths[2]
    assert widths[1] / widths[0] == pytest.approx(0.5, rel=0.35)  # ∝ 1/√n, within 35 %


def test_seed_overrides_reseed_the_split_the_training_and_every_seeded_baseline():
    from cr2.config import load_config
    from cr2_flows.study_seeds import seed_overrides

    base = load_config()
    cfg = load_config(overrides=seed_overrides(base, 3))
    assert (cfg.seed, cfg.splits.seed, cfg.teacher.seed, cfg.gate.seed) == (3, 3, 3, 3)
    assert {"mlp", "embedllm", "llmrank"} <= set(cfg.baselines.params)
    assert all(p["seed"] == 3 for p in cfg.baselines.params.values())
    assert cfg.labels.simulator.seed == base.labels.simulator.seed and cfg.channel.seed == base.channel.seed  # data stays
