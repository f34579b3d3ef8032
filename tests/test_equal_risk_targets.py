"""`cr2 results --equal-risk` on a user's pool: a default target the certified routers reach (not a
fixed 0.80 a pool may never reach), every requested target kept — one cost table each — or refused with its reason,
and every comparison named by its two sides with their guarantees (certified at α / uncertified), so "CR² vs KNN" at
−1.7, −1.5 and +0.9 % in three tables can be told apart.

Built on a small hand-written warehouse: one evaluation run, its side reach and its equal-risk rows."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

RUN = "eval-1"
# per (method, α): the highest test accuracy over its λ sweep — every certified router reaches 0.78 under some rule
# and α (KNN tops out at 0.783), none reaches 0.80; the uncertified sides reach higher and must not set the default
REACH = {("cr2@crc-avoidable", 0.01): 0.787, ("cr2@crc-avoidable", 0.05): 0.790,
         ("knn@crc-avoidable", 0.01): 0.781, ("knn@crc-avoidable", 0.05): 0.783,
         ("cr2-fixed-0.5", None): 0.805, ("knn@uncertified", None): 0.801, ("knn", None): 0.801,
         ("knn@no-device", None): 0.812}


def _saving(question, router, against, rule, alpha, a, b, estimate, verdict="no difference detected"):
    return {"question": question, "router": router, "against": against, "rule": rule, "alpha": alpha, "method_a": a,
            "method_b": b, "metric": "mean_saving_pct", "target": None, "estimate": estimate, "lower": estimate - 0.8,
            "upper": estimate + 0.8, "n_targets": 20, "p_value": 0.01, "p_holm": 0.02, "verdict": verdict}


def _cost(router, rule, alpha, method, target, estimate):
    return {"question": "cost", "router": router, "against": None, "rule": rule, "alpha": alpha, "method_a": method,
            "method_b": None, "metric": "cost_at_accuracy", "target": target, "estimate": estimate,
            "lower": estimate - 0.02, "upper": estimate + 0.02, "n_targets": None, "p_value": None, "p_holm": None,
            "verdict": None}


def _warehouse(home: Path) -> Path:
    from cr2_warehouse.db import Warehouse

    metrics = [{"run_id": RUN, "method": m, "lam": lam, "alpha": a, "benchmark": "all", "metric": "accuracy",
                "value": top - 0.01 * i} for (m, a), top in REACH.items() for i, lam in enumerate((2.0, 1.0, 0.5))]
    display = {"cr2": "CR²", "knn": "KNN"}
    methods = [{"run_id": RUN, "method": m, "router": r, "kind": k, "learned": True, "display": d, "colour": "#000000",
                "reference": m == "knn", "sort_order": i}
               for i, (m, r, k, d) in enumerate((("cr2", "cr2", "cr2", "CR²"), ("knn", "knn", "baseline", "KNN"),
                                                 ("cr2-fixed-0.5", "cr2", "uncalibrated", "fixed τ = 0.5"),
                                                 ("knn@uncertified", "knn", "uncertified-router", "KNN @ uncertified"),
                                                 ("cr2@crc-avoidable", "cr2", "certified", "CR² @ crc-avoidable"),
                                                 ("knn@crc-avoidable", "knn", "certified", "KNN @ crc-avoidable")))]
    rule = "crc-avoidable"
    rows = [_cost(r, rule, a, f"{r}@{rule}", t, c) for r in display for a in (0.01, 0.05)
            for t, c in ((0.75, 0.30), (0.78, 0.42))]
    rows += [_cost(r, None, None, m, t, c) for r, m in (("cr2", "cr2-fixed-0.5"), ("knn", "knn@uncertified"))
             for t, c in ((0.75, 0.28), (0.78, 0.40))]
    rows += [
        _saving("gate-quality", "cr2", "knn", None, None, "cr2-fixed-0.5", "knn@uncertified", -1.7, "dearer"),
        _saving("calibrated-vs-default", "cr2", "uncertified", rule, 0.01, "cr2@crc-avoidable", "cr2-fixed-0.5", -1.5),
        _saving("calibrated-vs-default", "knn", "uncertified", rule, 0.01, "knn@crc-avoidable", "knn@uncertified", -0.3),
        _saving("certified-score", "cr2", "knn", rule, 0.01, "cr2@crc-avoidable", "knn@crc-avoidable", 0.9),
        _saving("certified-score", "cr2", "knn", rule, 0.05, "cr2@crc-avoidable", "knn@crc-avoidable", 1.1),
        # the deploy decision's tests: rendered with the deploy decision, never in this comparison
        _saving("pairwise", "knn", "cr2", rule, 0.01, "knn@crc-avoidable", "cr2@crc-avoidable", 4.2),
    ]
    frame = pd.DataFrame(rows).assign(run_id=RUN, level=0.95, n_resamples=1000, seed=0)
    with Warehouse(home) as wh:
        wh.insert_df("eval_runs", pd.DataFrame([{
            "run_id": RUN, "config_hash": "h", "label_source": "measured-test", "dist_id": "d", "threshold_version": 1,
            "decision_cost": "estimated", "split_seed": 0, "code_version": "t", "created_at": pd.Timestamp("2026-01-01"),
            "default_alpha": 0.01}]))
        wh.insert_df("methods", pd.DataFrame(methods))
        wh.insert_df("metrics", pd.DataFrame(metrics))
        wh.insert_df("equal_risk", frame)
    return home


@pytest.fixture()
def pool_home(tmp_path) -> Path:
    return _warehouse(tmp_path / "home")


def _line_with(md: str, text: str) -> str:
    lines = [ln for ln in md.splitlines() if text in ln]
    assert len(lines) == 1, (text, md)
    return lines[0]


def test_the_default_target_is_the_highest_every_certified_router_reaches(pool_home):
    from cr2_cli.results import equal_risk_markdown

    md = equal_risk_markdown(pool_home)
    assert "Target: 0.78, the highest every certified router reaches under some rule and α" in md
    assert "CR² 0.790" in md and "KNN 0.783" in md  # why: each router's highest accuracy
    assert "**Cost at accuracy 0.78" in md and "**Cost at accuracy 0.80" not in md
    assert "0.420 [0.400, 0.440]" in md.split("**Cost at accuracy 0.78")[1].split("**")[1]


@pytest.mark.parametrize("top, expected", [
    ({("a@crc", 0.01): 0.45, ("b@crc", 0.01): 0.62}, 0.50),  # not every router reaches the grid: its lowest, said
    ({("a@crc", 0.01): 1.0, ("b@ltt", 0.1): 0.995}, 0.99),  # above the grid: its highest
    ({("a@uncertified", None): 0.9, ("a@no-device", 0.01): 0.9}, 0.50),  # no certified sweep at all
])
def test_the_default_target_stays_on_the_views_grid_and_says_why(top, expected):
    from cr2_cli.results import default_equal_risk_target

    reach = pd.DataFrame([{"method": m, "alpha": a, "max_accuracy": x} for (m, a), x in top.items()])
    target, why = default_equal_risk_target(reach)
    assert target == expected and why.startswith(f"Target: {expected:.2f}")


def test_every_requested_target_gets_its_cost_table(pool_home):
    from typer.testing import CliRunner

    from cr2_cli.main import app

    res = CliRunner().invoke(app, ["results", "--equal-risk", "--targets", "0.75,0.78", "--home", str(pool_home)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "Targets: 0.75, 0.78 (--targets)" in out
    assert out.index("**Cost at accuracy 0.75") < out.index("**Cost at accuracy 0.78")
    assert "0.300 [0.280, 0.320]" in out.split("**Cost at accuracy 0.75")[1].split("**Cost at accuracy 0.78")[0]
    # a target off the view's grid is refused with its reason, never dropped in silence
    res = CliRunner().invoke(app, ["results", "--equal-risk", "--targets", "0.75,0.785", "--home", str(pool_home)])
    assert res.exit_code != 0 and "steps of 0.01" in res.output


def test_every_comparison_names_its_sides(pool_home):
    from cr2_cli.results import equal_risk_markdown

    md = equal_risk_markdown(pool_home, targets=(0.78,))
    assert "CR² uncertified (gate at s ≥ 0.5) vs KNN uncertified (its one-shot argmax)" in _line_with(md, "-1.7 [")
    assert "CR² @ crc-avoidable (certified at α) vs CR² uncertified (gate at s ≥ 0.5)" in _line_with(md, "-1.5 [")
    assert "KNN @ crc-avoidable (certified at α) vs KNN uncertified (its one-shot argmax)" in _line_with(md, "-0.3 [")
    both = _line_with(md, "+0.9 [")
    assert "CR² @ crc-avoidable (certified at α) vs KNN @ crc-avoidable (certified at α)" in both and "+1.1 [" in both
    header = md[:md.index(both)].splitlines()[-2]  # the table's header row: the α of each column
    assert "α = 0.01" in header and "α = 0.05" in header
    # the deploy rule's pairwise tests are not part of this comparison
    assert "+4.2" not in md and "Every certified router vs every other" not in md
