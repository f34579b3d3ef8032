"""The one family rule (cr2.evaluation.families): each stored test carries its family, the family's size, its Holm p
and the one word that p allows, and the SQL that must correct a family itself computes the same Holm p."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from cr2.evaluation.families import annotate, change_verdict, equal_risk_family, interval_family, p_resolution
from cr2.evaluation.statistics import holm_adjust, saving_verdict
from cr2.report.cells import p_cell


def _row(metric, lower, upper, p, **kw):
    return {"metric": metric, "lower": lower, "upper": upper, "p_value": p, **kw}


def test_a_family_is_decided_by_the_question_and_every_member_gets_its_holm_word():
    rows = [_row("saving_vs_knn_pct", 1.0, 5.0, 0.01, method="cr2", target=0.8),
            _row("saving_vs_knn_pct", -6.0, -1.0, 0.02, method="mlp", target=0.8),
            _row("saving_vs_knn_pct", -1.0, 3.0, 0.6, method="mlp", target=0.81),
            _row("mean_saving_vs_knn_pct", 0.5, 4.0, 0.03, method="cr2"),
            _row("mean_saving_vs_knn_pct", -3.0, 2.0, 0.4, method="mlp"),
            _row("accuracy", 0.7, 0.8, 0.0, method="cr2"),  # an estimate, not a test
            _row("saving_vs_knn_pct", float("nan"), float("nan"), float("nan"), method="cr2", target=0.99)]
    out = annotate(rows, interval_family)
    per_target, means, estimate, undefined = out[:3], out[3:5], out[5], out[6]
    assert {r["family"] for r in per_target} == {"saving-vs-knn"} and {r["family_size"] for r in per_target} == {3}
    assert [r["p_holm"] for r in per_target] == pytest.approx(holm_adjust(np.array([0.01, 0.02, 0.6])))
    # 0.01·3 = 0.03 and max(0.03, 0.02·2) = 0.04: both directions survive; the third has none
    assert [r["verdict"] for r in per_target] == ["cheaper", "dearer", "no difference detected"]
    assert [r["p_holm"] for r in means] == pytest.approx([0.06, 0.4])
    # the mean's interval excludes 0 but its Holm p does not pass: its one word is "no difference detected"
    assert means[0]["verdict"] == "no difference detected" and means[0]["verdict_uncorrected"] == "cheaper"
    assert estimate["family"] is None and estimate["verdict"] is None and estimate["p_holm"] is None
    assert undefined["family"] == "saving-vs-knn" and undefined["family_size"] is None and undefined["verdict"] is None


def test_risk_minus_alpha_tests_are_one_family_per_method_and_alpha_and_speak_of_a_change():
    rows = [_row("risk_all_minus_alpha", 0.001, 0.004, 0.001, method="cr2", alpha=0.01, lam=0.5),
            _row("oracle_risk_all_minus_alpha", -0.004, -0.001, 0.002, method="cr2", alpha=0.01, lam=0.5),
            _row("risk_all_minus_alpha", 0.001, 0.004, 0.001, method="cr2", alpha=0.05, lam=0.5),
            _row("risk_all_minus_alpha", 0.001, 0.004, 0.001, method="knn@crc", alpha=0.01, lam=0.5)]
    out = annotate(rows, interval_family)
    assert [r["family"] for r in out] == ["risk-vs-alpha/cr2/alpha=0.01", "risk-vs-alpha/cr2/alpha=0.01",
                                          "risk-vs-alpha/cr2/alpha=0.05", "risk-vs-alpha/knn@crc/alpha=0.01"]
    assert [r["family_size"] for r in out] == [2, 2, 1, 1]
    assert [r["verdict"] for r in out] == ["larger", "smaller", "larger", "larger"]
    assert change_verdict(-1.0, 1.0, 0.001) == "no difference detected" and change_verdict(None, 1.0) is None


def test_equal_risk_families_keep_means_and_per_target_savings_apart_and_costs_out():
    base = {"question": "certified-score", "rule": "crc", "alpha": 0.01}
    assert equal_risk_family({**base, "metric": "mean_saving_pct"}) == "certified-score/crc/alpha=0.01/mean"
    assert equal_risk_family({**base, "metric": "saving_pct"}) == "certified-score/crc/alpha=0.01/per-target"
    assert equal_risk_family({"question": "gate-quality", "rule": None, "alpha": None, "metric": "mean_saving_pct"}) \
        == "gate-quality/-/alpha=-/mean"
    assert equal_risk_family({**base, "question": "cost", "metric": "cost_at_accuracy"}) is None


def test_the_stored_equal_risk_rows_carry_one_word_per_test():
    """equal_risk_rows stores every comparison row with its family, size, Holm p and that word — per-target rows
    too (they were stored with their interval's uncorrected word)."""
    from cr2.evaluation.equal_risk import Comparison, Side, equal_risk_rows
    from cr2.evaluation.fixed_accuracy import FallbackCost, MethodOutcomes
    from cr2.evaluation.statistics import resample_counts, resample_indices

    rng = np.random.default_rng(0)
    n, k = 300, 6
    correct = rng.random((n, k)) < np.linspace(0.55, 0.9, k)
    cost = np.sort(rng.random((n, k)), axis=1)
    a, b = Side("a", None), Side("b", None)
    outcomes = {a: MethodOutcomes(correct, cost), b: MethodOutcomes(correct[:, ::-1].copy(), cost)}
    counts = resample_counts(resample_indices(n, 200, np.random.default_rng(1)), n)
    targets = np.array([0.6, 0.65, 0.7])
    always = MethodOutcomes(correct, cost)
    fallback = FallbackCost.of_always(always, targets, counts)
    comps = [Comparison("gate-quality", "a", "b", None, None, a, b)]
    rows = equal_risk_rows(outcomes, comps, {}, targets, counts, fallback, targets)
    tests = [r for r in rows if r["metric"] in ("saving_pct", "mean_saving_pct")]
    assert len(tests) == 4
    for r in tests:
        assert r["family"] and r["family_size"] >= 1 and r["p_holm"] >= r["p_value"] - 1e-15
        assert r["verdict"] == saving_verdict(r["lower"], r["upper"], r["p_holm"])
    assert {r["family_size"] for r in tests if r["metric"] == "saving_pct"} == {3}


def test_the_sql_holm_verdict_is_the_python_one():
    import duckdb

    from cr2_warehouse.db import MACROS_FILE

    con = duckdb.connect()
    con.execute(MACROS_FILE.read_text())
    ends = [None, float("nan"), -2.0, 0.0, 0.5]
    ps = [None, float("nan"), 0.0, 0.01, 0.05, 0.0499, 0.5]
    cases = [(lo, hi, p) for lo, hi, p in itertools.product(ends, ends, ps)
             if lo is None or hi is None or not (lo == lo and hi == hi) or lo <= hi]
    got = con.execute("SELECT saving_verdict_holm(lo, hi, p) FROM (SELECT unnest(?::DOUBLE[]) AS lo, "
                      "unnest(?::DOUBLE[]) AS hi, unnest(?::DOUBLE[]) AS p)",
                      [[c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases]]).fetchall()
    want = [None if p is None or p != p else saving_verdict(lo, hi, p) for lo, hi, p in cases]
    assert [g[0] for g in got] == want


def test_the_premise_view_corrects_each_family_over_the_study_cells_as_holm_adjust_does(tmp_path):
    """v_premise's family is corrected in SQL (cells are stored one at a time): its p_holm equals holm_adjust over
    the same family, ties included, and its verdict is the word of that p."""
    from cr2_warehouse.db import Warehouse

    rng = np.random.default_rng(3)
    cells, results = [], []
    for i, (speed, channel) in enumerate(itertools.product((0.5, 1.0, 2.0), ("near", "far"))):
        cells.append({"study_id": "s", "speed_factor": speed, "channel": channel, "dist_id": "d", "label_source": "x",
                      "mean_distance_m": 10.0, "cost_ratio_est": 1.0, "cost_ratio_realised": 1.0,
                      "device_dearer_share_est": 0.5, "n_test": 100, "n_evaluable": 90, "n_resamples": 1000,
                      "alpha": 0.01, "cell_key": f"k{i}", "cell_seconds": 1.0, "meta": None,
                      "created_at": pd.Timestamp("2026-01-01")})
        for ref in ("knn", "best-single"):
            for target in (None, 0.79, 0.80):
                p = float(rng.choice([0.0, 0.004, 0.004, 0.02, 0.3]))
                lo = float(rng.choice([-3.0, 1.0]))
                results.append({"study_id": "s", "speed_factor": speed, "channel": channel, "method": "cr2-retrain",
                                "reference": ref, "metric": "mean_saving_pct" if target is None else "saving_pct",
                                "target": target, "estimate": lo + 1.0, "lower": lo, "upper": lo + 2.0,
                                "n_resamples": 1000, "p_value": p})
    with Warehouse(tmp_path / "h") as wh:
        cols = [r[0] for r in wh.con.execute("DESCRIBE premise_results").fetchall()]
        res = pd.DataFrame(results).reindex(columns=cols)
        wh.insert_df("premise_cells", pd.DataFrame(cells), wh.con)
        wh.insert_df("premise_results", res, wh.con)
        view = wh.df("SELECT * FROM v_premise")
    assert len(view) == len(results)
    for fam, g in view.groupby("family"):
        assert (g["family_size"] == len(g)).all()
        assert g["p_holm"].to_numpy() == pytest.approx(holm_adjust(g["p_value"].to_numpy(float)))
        assert list(g["verdict"]) == [saving_verdict(lo, hi, q) for lo, hi, q in
                                      zip(g["saving_lower_pct"], g["saving_upper_pct"], g["p_holm"])]
    assert set(view["family"]) == {"cr2-retrain vs knn / mean over the grid", "cr2-retrain vs knn / paper targets",
                                   "cr2-retrain vs best-single / mean over the grid",
                                   "cr2-retrain vs best-single / paper targets"}


def test_a_zero_bootstrap_p_reads_below_its_resolution_of_two_over_b_times_the_family():
    assert p_cell(0.0, 10_000) == "< 0.0002"
    assert p_cell(0.0, 10_000, family_size=5) == "< 0.001"
    assert p_cell(0.0123, 10_000) == "0.0123" and p_cell(None, 10) == "—"
    assert p_resolution(10_000) == pytest.approx(2e-4) and p_resolution(10_000, 30) == pytest.approx(6e-3)
    assert p_resolution(None) is None


def test_knn_against_itself_and_a_target_one_side_misses_are_estimates_in_no_family():
    rows = [_row("mean_saving_vs_knn_pct", 0.0, 0.0, 1.0, method="knn", reference=True),
            _row("mean_saving_vs_knn_pct", -1.0, 2.0, 0.5, method="cr2", reference=False),
            _row("saving_vs_knn_pct", -1.0, 2.0, 0.5, method="cr2", target=0.9, reached=False),
            _row("saving_vs_knn_pct", -1.0, 2.0, 0.5, method="cr2", target=0.8, reached=True)]
    out = annotate(rows, interval_family)
    assert [r["family"] for r in out] == [None, "mean-saving-vs-knn", None, "saving-vs-knn"]
    assert [r["family_size"] for r in out] == [None, 1, None, 1] and out[0]["verdict"] is None


# ---------------------------------------------------------------- conclusions over seeds
def test_over_seeds_gives_the_t_interval_and_holm_within_each_family_and_no_word_under_two_seeds():
    from scipy.stats import t as student_t

    from cr2.evaluation.families import over_seeds

    f = pd.DataFrame({"seed_mean": [1.0, 2.0, 0.1, 5.0], "seed_sd": [0.5, 1.0, 2.0, 1.0], "n_seeds": [5, 5, 5, 1],
                      "question": ["a", "a", "b", "b"]}, index=[10, 11, 12, 13])
    out = over_seeds(f)
    # row 10 by hand: half-width t_{4, 0.975} · sd / √n, p = 2 · sf(|mean| / se, 4)
    se = 0.5 / np.sqrt(5)
    assert out.loc[10, "lo"] == pytest.approx(1.0 - student_t.ppf(0.975, 4) * se)
    assert out.loc[10, "hi"] == pytest.approx(1.0 + student_t.ppf(0.975, 4) * se)
    assert out.loc[10, "p"] == pytest.approx(2 * student_t.sf(1.0 / se, 4))
    assert list(out.index) == [10, 11, 12, 13]
    # one seed: no interval, no p, no word, and it counts in no family (3 tests, not 4)
    assert np.isnan(out.loc[13, "p"]) and out.loc[13, "verdict"] is None and np.isnan(out.loc[13, "sd"])
    np.testing.assert_allclose(out["p_holm"].iloc[:3], holm_adjust(out["p"].iloc[:3].to_numpy()))
    # families named by a column: Holm within each, so the pair in family "a" is corrected over 2 tests, not 3
    fam = over_seeds(f, ["question"])
    np.testing.assert_allclose(fam.loc[[10, 11], "p_holm"], holm_adjust(out.loc[[10, 11], "p"].to_numpy()))
    assert fam.loc[12, "p_holm"] == pytest.approx(out.loc[12, "p"])  # alone in its family: its own p
    assert (fam["p_holm"].iloc[:3] <= out["p_holm"].iloc[:3] + 1e-15).all()
    assert list(fam["verdict"].iloc[:3]) == ["cheaper", "cheaper", "no difference detected"]
    # a change (risk − α) speaks of larger / smaller, from the same interval and Holm p
    assert over_seeds(f.iloc[:2], verdict=change_verdict)["verdict"].tolist() == ["larger", "larger"]
    assert over_seeds(f.assign(seed_mean=-f["seed_mean"]).iloc[:2])["verdict"].tolist() == ["dearer", "dearer"]
    assert over_seeds(f.iloc[:0]).empty
