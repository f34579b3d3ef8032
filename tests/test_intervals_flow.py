"""Intervals and the seed study on a real slice run (slow: a real Prefect flow in a temporary warehouse).

The intervals table is filled by the run; its estimates are the views' point values; cr2.evaluation.fixed_accuracy's
full-sample frontier cost equals v_fixed_accuracy's; the verdict column uses cr2.evaluation.statistics.saving_verdict's words;
intervals shrink as the (sub-sampled) test set grows; `cr2 study seeds --n 2` stores two seeds' results.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import copy_of
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.flow, pytest.mark.slow]


@pytest.fixture(scope="module")
def slice_run(pipeline_slice, tmp_path_factory):
    """The run's slice warehouse (conftest.pipeline_slice), copied: the seed study writes into it."""
    home = copy_of(pipeline_slice["home"], tmp_path_factory.mktemp("intervals") / "home")
    return {"cfg": pipeline_slice["cfg"], "home": home, "out": pipeline_slice["first"]}


def test_the_run_fills_the_intervals_table_for_every_point_and_learned_method(slice_run):
    out = slice_run["out"]
    assert out["intervals"]["n_resamples"] >= 1000 and not out["intervals"]["cached"]
    run_id = out["evaluate"]["run_id"]
    with Warehouse(slice_run["home"], read_only=True) as wh:
        ops = wh.df("SELECT * FROM v_operating_points_ci WHERE run_id = ? AND accuracy IS NOT NULL "
                    "AND method NOT LIKE 'ablation:%'", [run_id])
        fa = wh.df("SELECT * FROM v_fixed_accuracy_ci WHERE run_id = ?", [run_id])
        ms = wh.df("SELECT * FROM v_mean_saving_ci WHERE run_id = ?", [run_id])
    # certified routers are compared at equal risk, not point by point: their points carry no per-point interval
    certified = ops["method"].str.contains("@")
    assert certified.any() and ops.loc[certified, "accuracy_lower"].isna().all()
    ops = ops[~certified]
    assert len(ops) > 100 and ops["accuracy_lower"].notna().all() and ops["risk_upper"].notna().all()
    assert set(ops["benchmark"]) == {"all", "mmlu", "bbh", "gpqa", "mbpp"}
    for m in ("accuracy", "cost", "local_rate", "risk", "risk_all"):
        assert (ops[f"{m}_lower"] <= ops[m] + 1e-12).all() and (ops[m] <= ops[f"{m}_upper"] + 1e-12).all()
    tested = fa["method"] != "knn"  # KNN against itself is an estimate (0 by construction), in no family
    assert fa["saving_lower"].notna().all() and fa.loc[tested, "verdict"].notna().all()
    assert fa.loc[~tested, "verdict"].isna().all()
    assert {"cr2", "knn", "mlp", "embedllm", "llmrank"} <= set(ms["method"])
    knn = ms[ms["method"] == "knn"].iloc[0]  # KNN against itself: the identical method, an interval at 0
    assert knn["saving_lower"] == 0.0 == knn["saving_upper"] and pd.isna(knn["verdict"])
    assert knn["verdict_uncorrected"] == "no difference detected"


def test_estimates_equal_the_point_values_of_the_views(slice_run):
    run_id = slice_run["out"]["evaluate"]["run_id"]
    with Warehouse(slice_run["home"], read_only=True) as wh:
        ops = wh.df("SELECT o.*, i.metric, i.estimate FROM operating_points o JOIN intervals i ON i.run_id = o.run_id "
                    "AND i.method = o.method AND i.lam = o.lam AND i.alpha IS NOT DISTINCT FROM o.alpha "
                    "AND i.benchmark = o.benchmark WHERE o.run_id = ?", [run_id])
        fa = wh.df("SELECT f.method, f.target, f.cost, f.knn_cost, f.saving_vs_knn_pct, i.estimate FROM v_fixed_accuracy f "
                   "JOIN intervals i ON i.run_id = f.run_id AND i.method = f.method "
                   "AND i.metric = 'saving_vs_knn_pct' AND abs(i.target - f.target) < 1e-9 WHERE f.run_id = ?", [run_id])
        n_fa = wh.scalar("SELECT count(*) FROM v_fixed_accuracy WHERE run_id = ?", [run_id])
        always = wh.df("SELECT accuracy, cost FROM operating_points WHERE run_id = ? AND benchmark = 'all' "
                       "AND method LIKE 'always-%'", [run_id])
    assert len(ops) > 500
    minus = "_minus_alpha"  # a risk tested against α: the same mean, less α
    point = ops.apply(lambda r: r[r["metric"][:-len(minus)]] - r["alpha"] if r["metric"].endswith(minus)
                      else r[r["metric"]], axis=1).astype(float)
    assert np.array_equal(point.to_numpy(), ops["estimate"].to_numpy())  # the same mean of the same per-query values
    assert ops["metric"].str.endswith(minus).any() and ops.loc[ops["metric"].str.endswith(minus), "alpha"].notna().all()
    assert len(fa) == n_fa > 0  # an interval for every (method, target) the view has
    # each side of a stored saving pays the lower of its frontier cost (the view's) and the cheapest Always-model
    # reaching the target (FallbackCost.charge)
    reach = always["accuracy"].to_numpy()[None, :] >= fa["target"].to_numpy()[:, None] - 1e-12
    cheapest = np.where(reach, always["cost"].to_numpy()[None, :], np.inf).min(axis=1)
    charged = 100.0 * (1.0 - np.minimum(fa["cost"], cheapest) / np.minimum(fa["knn_cost"], cheapest))
    assert len(always) >= 2 and np.allclose(fa["estimate"], charged, rtol=0, atol=1e-9)


def test_fixed_accuracy_arrays_equal_v_fixed_accuracy_on_a_real_evaluation(slice_run):
    from cr2.evaluation.fixed_accuracy import VIEW_TARGETS, frontier_cost_at, grid_cost_at

    run_id = slice_run["out"]["evaluate"]["run_id"]
    with Warehouse(slice_run["home"], read_only=True) as wh:
        # CR² at the run's one comparison α (eval_runs.default_alpha), as the view reads it
        pts = wh.df("SELECT o.method, o.accuracy, o.cost FROM operating_points o JOIN methods m USING (run_id, method) "
                    "JOIN eval_runs r USING (run_id) WHERE o.run_id = ? AND o.benchmark = 'all' AND (m.kind = 'cr2' OR "
                    "(m.kind IN ('baseline', 'baseline-variant') AND m.learned)) AND (o.alpha IS NULL OR "
                    "abs(o.alpha - r.default_alpha) < 1e-12)", [run_id])
        view = wh.df("SELECT method, target, cost, cost_grid, knn_cost FROM v_fixed_accuracy WHERE run_id = ?", [run_id])
        n_targets_view = wh.scalar("SELECT count(*) FROM range(50, 100)")
    assert len(VIEW_TARGETS) == n_targets_view
    for method, d in pts.groupby("method"):
        interp = frontier_cost_at(d["accuracy"], d["cost"], VIEW_TARGETS)
        grid = grid_cost_at(d["accuracy"], d["cost"], VIEW_TARGETS)
        v = view[view["method"] == method]
        v = v.set_index(v["target"].round(2))
        knn_reach = set(view["target"].round(2))
        for t, c, g in zip(VIEW_TARGETS.round(2), interp, grid):
            if t in v.index:
                assert c == pytest.approx(v.loc[t, "cost"], abs=1e-12) and g == pytest.approx(v.loc[t, "cost_grid"], abs=1e-12)
            elif t in knn_reach:
                assert np.isnan(c)  # the view has no row: the method does not reach this target


def test_verdicts_use_the_bootstrap_module_words(slice_run):
    from cr2.evaluation.statistics import saving_verdict

    with Warehouse(slice_run["home"], read_only=True) as wh:
        fa = wh.df("SELECT saving_vs_knn_pct, saving_lower, saving_upper, p_holm, verdict, verdict_uncorrected "
                   "FROM v_fixed_accuracy_ci")
    assert fa["p_holm"].notna().any()
    for r in fa.itertuples():  # the stored word is the Holm p's; the interval's own word is named uncorrected
        assert r.verdict_uncorrected == saving_verdict(r.saving_lower, r.saving_upper)
        if pd.notna(r.p_holm):
            assert r.verdict == saving_verdict(r.saving_lower, r.saving_upper, r.p_holm)


def test_intervals_shrink_as_the_test_set_grows_on_the_warehouse(slice_run):
    """The run's own decisions, half of the test queries vs all of them: the mean interval width shrinks."""
    from cr2.evaluation.statistics import resample_counts, resample_indices
    from cr2.config import load_config
    from cr2.evaluation.intervals import metric_intervals
    from cr2.evaluation.metrics import PER_QUERY_METRICS, evaluable_mask
    from cr2.evaluation.decisions import operating_points
    from cr2_tasks.inputs import load_sets
    from cr2_warehouse.repository import run_decisions

    config = load_config(slice_run["cfg"])
    home = slice_run["home"]
    test = load_sets(config, home)["test"]
    with Warehouse(home, read_only=True) as wh:
        points = operating_points(run_decisions(wh, slice_run["out"]["evaluate"]["run_id"]), test.query_id, test.model_ids)
    points = [p for p in points if p.method in ("cr2", "knn", "mlp")]
    proba = np.full((len(test), test.n_models), 0.5)  # accuracy and cost do not use p
    widths = []
    for rows in (np.arange(len(test)) % 2 == 0, np.ones(len(test), bool)):
        sub = test.subset(np.flatnonzero(rows))
        pts = [type(p)(p.method, p.lam, p.alpha, p.chosen[rows], p.gate_accept[rows]) for p in points]
        counts = resample_counts(resample_indices(len(sub), 1000, np.random.default_rng(0)), len(sub))
        iv = metric_intervals(pts, sub, proba[rows], evaluable_mask(sub), counts, per_benchmark=False,
                              metrics={"accuracy": PER_QUERY_METRICS["accuracy"]})
        widths.append(np.mean([r["upper"] - r["lower"] for r in iv]))
    assert widths[1] < widths[0]


def test_study_seeds_on_the_slice(slice_run):
    from typer.testing import CliRunner

    from cr2_cli.main import app

    res = CliRunner().invoke(app, ["study", "seeds", "--n", "2", "-c", str(slice_run["cfg"]),
                                   "--home", str(slice_run["home"])])
    assert res.exit_code == 0, res.output
    assert "spread across seeds" in res.output
    with Warehouse(slice_run["home"], read_only=True) as wh:
        runs = wh.df("SELECT * FROM seed_runs ORDER BY seed")
        spread = wh.df("SELECT * FROM v_seed_spread WHERE metric = 'mean_saving_vs_knn_pct'")
        newest = wh.scalar("SELECT run_id FROM eval_runs ORDER BY created_at DESC LIMIT 1")
    assert runs["seed"].tolist() == [0, 1] and runs["home"].tolist() == [".", "studies/seeds/seed-1"]
    assert runs["run_id"].nunique() == 2  # another split and training: another evaluation run
    assert runs["run_id"].iloc[0] == slice_run["out"]["evaluate"]["run_id"]  # the base seed is the pipeline's run
    assert newest == runs["run_id"].iloc[0]  # the study never replaces this warehouse's newest run
    cr2 = spread[spread["method"] == "cr2"].iloc[0]
    assert cr2["n_seeds"] == 2 and cr2["seed_min"] <= cr2["seed_mean"] <= cr2["seed_max"]
    assert cr2["base_lower"] <= cr2["base_value"] <= cr2["base_upper"]
    res = CliRunner().invoke(app, ["results", "--home", str(slice_run["home"])])
    assert res.exit_code == 0, res.output
    assert "Seed variability" in res.output and "[95 % CI]" in res.output
