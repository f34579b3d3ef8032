"""Beside every validity verdict, the deployed table's own test risk: a "no violation detected"
over re-splits is a statement about the rule in expectation, while the one table a user deploys can sit above α at
many λ. `cr2 results` and `cr2 guarantees` show its test risk of the risk its rule bounds — mean over λ, how many λ
are above α, the largest with its interval — and say what the rule promises, read from the rule registry.

Built on a small hand-written warehouse (one evaluation run, its certified re-split cells and test metrics)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

RUN = "eval-1"
LAMS = (0.5, 1.0, 2.0, 4.0)
ALPHA = 0.01
# the deployed tables' test risks per λ, of each risk metric: knn@crc-avoidable bounds avoidable error (3 of 4 λ above
# α), cr2@crc-oracle oracle disagreement, knn@ltt-avoidable avoidable error with probability ≥ 1 − δ
TEST_RISK = {
    ("knn@crc-avoidable", "avoidable_risk_all"): (0.008, 0.014, 0.019, 0.011),
    ("knn@crc-avoidable", "risk_all"): (0.5, 0.5, 0.5, 0.5),  # another risk than the rule's: never read as its risk
    ("cr2@crc-oracle", "oracle_risk_all"): (0.004, 0.006, 0.009, 0.010),
    ("cr2@crc-oracle", "avoidable_risk_all"): (0.9, 0.9, 0.9, 0.9),
    ("knn@ltt-avoidable", "avoidable_risk_all"): (0.002, 0.003, 0.004, 0.005),
}


def _warehouse(home: Path, interval: bool = True) -> Path:
    from cr2_warehouse.db import Warehouse

    metrics = [{"run_id": RUN, "method": m, "lam": lam, "alpha": ALPHA, "benchmark": "all", "metric": metric,
                "value": v} for (m, metric), values in TEST_RISK.items() for lam, v in zip(LAMS, values)]
    # the certify stage's re-splits: every mean below α, so every crc row's verdict is "no violation detected"
    metrics += [{"run_id": RUN, "method": m, "lam": lam, "alpha": ALPHA, "benchmark": "all", "metric": f"resplit_{k}",
                 "value": v} for m in ("knn@crc-avoidable", "cr2@crc-oracle", "knn@ltt-avoidable") for lam in LAMS
                for k, v in (("risk_mean", 0.009), ("risk_se", 0.0005), ("risk_n", 200.0))]
    metrics += [{"run_id": RUN, "method": "knn", "lam": lam, "alpha": None, "benchmark": "all", "metric": "accuracy",
                 "value": 0.7} for lam in LAMS]
    methods = [{"run_id": RUN, "method": m, "router": m.partition("@")[0], "kind": k, "learned": True, "display": d,
                "colour": "#000000", "reference": m == "knn", "sort_order": i}
               for i, (m, k, d) in enumerate((("cr2@crc-oracle", "certified", "CR² @ crc-oracle"),
                                              ("knn@crc-avoidable", "certified", "KNN @ crc-avoidable"),
                                              ("knn@ltt-avoidable", "certified", "KNN @ ltt-avoidable"),
                                              ("cr2", "cr2", "CR²"), ("knn", "baseline", "KNN")))]
    with Warehouse(home) as wh:
        wh.insert_df("eval_runs", pd.DataFrame([{
            "run_id": RUN, "config_hash": "h", "label_source": "measured-test", "dist_id": "d", "threshold_version": 1,
            "decision_cost": "estimated", "split_seed": 0, "code_version": "t", "created_at": pd.Timestamp("2026-01-01"),
            "default_alpha": ALPHA}]))
        wh.insert_df("methods", pd.DataFrame(methods))
        wh.insert_df("metrics", pd.DataFrame(metrics))
        if interval:  # the largest test risk of knn@crc-avoidable (λ = 2) with a stored 95 % interval
            wh.insert_df("intervals", pd.DataFrame([{
                "run_id": RUN, "method": "knn@crc-avoidable", "lam": 2.0, "alpha": ALPHA, "benchmark": "all",
                "metric": "avoidable_risk_all", "target": None, "estimate": 0.019, "lower": 0.015, "upper": 0.023,
                "level": 0.95, "n_resamples": 1000, "n_targets": None, "seed": 0, "p_value": 0.001}]))
    return home


def _row(md: str, router: str, rule: str) -> list[str]:
    lines = [ln for ln in md.splitlines() if ln.startswith(f"| {router} | {rule} |")]
    assert len(lines) == 1, md
    return [c.strip() for c in lines[0].strip("|").split("|")]


def test_every_registered_risk_has_its_metric_over_all_test_rows():
    from cr2.crc import RISKS
    from cr2.evaluation.metrics import PER_QUERY_METRICS, RISK_ALL_METRICS

    assert set(RISK_ALL_METRICS) == set(RISKS)
    assert all(PER_QUERY_METRICS[m].rows == "all" for m in RISK_ALL_METRICS.values())


def test_deployed_table_risk_reads_the_risk_its_rule_bounds():
    from cr2.report.validity import deployed_table_risk

    points = pd.DataFrame([{"method": m, "lam": lam, "alpha": ALPHA, "metric": metric, "value": v, "lower": np.nan,
                            "upper": np.nan} for (m, metric), vs in TEST_RISK.items() for lam, v in zip(LAMS, vs)])
    d = deployed_table_risk(points).set_index(["router", "rule"])
    knn = d.loc[("knn", "crc-avoidable")]
    assert knn["metric"] == "avoidable_risk_all" and (knn["n_above"], knn["n_lam"]) == (3, 4)
    assert knn["mean"] == pytest.approx(np.mean(TEST_RISK[("knn@crc-avoidable", "avoidable_risk_all")]))
    assert (knn["max"], knn["max_lam"]) == (0.019, 2.0)
    cr2 = d.loc[("cr2", "crc-oracle")]
    assert cr2["metric"] == "oracle_risk_all" and cr2["n_above"] == 0 and cr2["max"] == 0.010  # = α is not above it
    assert d.loc[("knn", "ltt-avoidable"), "metric"] == "avoidable_risk_all"


def test_the_deployed_tables_lambda_by_lambda_mark_every_lambda_above_alpha():
    from cr2.report.validity import deployed_risk_per_lam

    points = pd.DataFrame([{"method": m, "lam": lam, "alpha": ALPHA, "metric": metric, "value": v,
                            "lower": 0.015 if (m, lam) == ("knn@crc-avoidable", 2.0) else np.nan,
                            "upper": 0.023 if (m, lam) == ("knn@crc-avoidable", 2.0) else np.nan}
                           for (m, metric), vs in TEST_RISK.items() for lam, v in zip(LAMS, vs)])
    t = deployed_risk_per_lam(points, ALPHA).set_index("method")
    knn = t.loc["knn@crc-avoidable"]
    assert knn["risk"] == "avoidable-error" and knn["λ = 2"] == "0.0190 [0.0150, 0.0230] > α"
    assert [c.endswith("> α") for c in knn.filter(like="λ =")] == [False, True, True, True]  # the rule's own risk only
    assert not any(c.endswith("> α") for c in t.loc["cr2@crc-oracle"].filter(like="λ ="))  # = α is not above it
    assert deployed_risk_per_lam(points, 0.05).empty or len(deployed_risk_per_lam(points, 0.05)) == 0


def test_a_rules_kind_comes_from_the_registry_not_its_name(monkeypatch):
    from cr2.crc import RULE_REGISTRY, RuleSpec
    from cr2.report.validity import promise_kind, rule_promise_note

    assert {r: promise_kind(r) for r in RULE_REGISTRY} == {
        r: ("ltt" if s.needs_delta else "crc" if s.procedure == "crc" else None) for r, s in RULE_REGISTRY.items()}
    # a rule named like crc whose spec needs δ is an ltt rule; an unknown name promises nothing
    monkeypatch.setitem(RULE_REGISTRY, "crc-lookalike", RuleSpec("crc-lookalike", "ltt", "avoidable-error", "toy"))
    assert promise_kind("crc-lookalike") == "ltt" and promise_kind("no-such-rule") is None
    crc = rule_promise_note(["crc-avoidable", "crc"])
    assert "in expectation over calibration draws" in crc and "above α" in crc and "1 − δ" not in crc.split(".")[0]
    assert "docs/guarantees.md" in crc and "ltt-avoidable" in crc  # the pointer to the rules that bound the table
    both = rule_promise_note(["crc-avoidable", "ltt-avoidable"])
    assert "with probability ≥ 1 − δ over the calibration draw, the deployed table's risk is ≤ α" in both
    assert rule_promise_note(["empirical", "fixed"]) == ""


def test_results_prints_the_deployed_tables_risk_beside_each_verdict(tmp_path):
    from cr2_cli.results import validity_markdown

    md = validity_markdown(_warehouse(tmp_path / "home"), RUN, ALPHA)
    header = [c.strip() for c in next(ln for ln in md.splitlines() if ln.startswith("| router")).strip("|").split("|")]
    knn = dict(zip(header, _row(md, "KNN", "crc-avoidable")))
    assert knn["E[risk] ≤ α at every λ: verdict (λ cells over α / tested, Holm p)"].startswith("no violation detected")
    assert knn["deployed table: test risk, mean over λ"] == "0.0130"
    assert knn["deployed table: λ with test risk > α"] == "3 of 4"
    assert knn["deployed table: largest test risk [95 % CI] (its λ)"] == "0.0190 [0.0150, 0.0230] (λ = 2)"
    cr2 = dict(zip(header, _row(md, "CR²", "crc-oracle")))
    assert cr2["deployed table: λ with test risk > α"] == "0 of 4"
    assert cr2["deployed table: largest test risk [95 % CI] (its λ)"] == "0.0100 (λ = 4)"  # no interval stored
    ltt = dict(zip(header, _row(md, "KNN", "ltt-avoidable")))
    assert ltt["deployed table: test risk, mean over λ"] == "0.0035"  # an ltt row has no verdict, but its table's risk
    # what each rule promises about that table, under the table
    note = md.split("| router")[-1].strip().splitlines()[-1]
    assert "crc-oracle, crc-avoidable — in expectation over calibration draws" in note
    assert "ltt-avoidable — with probability ≥ 1 − δ over the calibration draw" in note
    assert "docs/guarantees.md" in note


def test_results_says_when_no_interval_is_stored(tmp_path):
    from cr2_cli.results import validity_markdown

    md = validity_markdown(_warehouse(tmp_path / "home", interval=False), RUN, ALPHA)
    assert "stores no bootstrap interval for a certified router's points" in md
    assert "0.0190 (λ = 2)" in md


def test_guarantees_prints_the_same_columns_and_promise(tmp_path):
    from cr2_cli.render import console, print_guarantees

    home = _warehouse(tmp_path / "home")
    width = console.width
    console.width = 600
    try:
        with console.capture() as cap:
            print_guarantees(home, "no-validity-run", "test")
    finally:
        console.width = width
    out = cap.get()
    assert "deployed table: λ with test risk > α" in out and "3 of 4" in out
    assert "0.0190 [0.0150, 0.0230] (λ = 2)" in out
    assert "in expectation over calibration draws" in out and "docs/guarantees.md" in out
