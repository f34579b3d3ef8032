"""The headline tables of `cr2 results` as objects (cr2.report.headline, cr2.report.validity): built from small
hand-made frames, their markdown and rich renderings show the same cells, routers by their short names."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from cr2.report.headline import (Ablation, CostAtTarget, EqualRiskQuestion, LocalAtCost, OperatingPointsCI,
                                 PaperFixedSavings, SeedSpread, SweepExtremes, VerdictPerTarget, points_table)
from cr2.report.table import Table


def rich_cells(t: Table, **kw) -> list[list[str]]:
    """The body rows a rich rendering of `t` prints (a wide console, one line a row), split into cells."""
    from rich import box
    from rich.console import Console

    out = io.StringIO()
    r = t.rich(**kw)
    r.box = box.ASCII
    Console(file=out, width=1000).print(r)
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("|") and not set(ln) <= set("|-+ ")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[1:]]


def markdown_cells(t: Table) -> list[list[str]]:
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in t.markdown().splitlines()[2:]]


def agree(t: Table, **kw) -> None:
    assert markdown_cells(t) == rich_cells(t, **kw) == t.rows


def test_operating_points_name_routers_and_write_intervals_through_cells():
    df = pd.DataFrame({"method": ["cr2", "knn"], "lam": [0.5, 2.0], "accuracy": [0.79141, 0.7],
                       "accuracy_lower": [0.7733, None], "accuracy_upper": [0.8086, None],
                       "risk_all": [0.0074381, np.nan]})
    t = OperatingPointsCI(df, ("method", "lam"))
    assert t.head == ["method", "lam", "accuracy [95 % CI]", "risk_all"]
    assert t.rows == [["CR²", "0.5", "0.7914 [0.7733, 0.8086]", "0.007438"], ["KNN", "2", "0.7000", "–"]]
    agree(t)
    assert list(points_table(df, ("lam",)).columns) == ["lam", "accuracy [95 % CI]", "risk_all"]


def test_stored_rows_write_every_number_to_four_digits_and_keep_text():
    lac = pd.DataFrame({"alpha": [0.002, 0.01], "lam": [0.25831, 0.2], "local_rate": [0.0050378, 1.0]})
    t = LocalAtCost(lac)
    assert t.rows == [["0.002", "0.2583", "0.005038"], ["0.01", "0.2", "1"]]
    agree(t)
    ab = pd.DataFrame({"method": ["cr2", "ablation:sign-only", "cr2-rate-0.1"], "alpha": [0.01, 0.01, None],
                       "lam": [0.2583, 0.2583, 0.2], "accuracy": [0.806, 0.8076, 0.801], "cost": [0.43, 0.4295, 0.4473],
                       "local_rate": [0.02, 0.019, 0.1], "extra": [1, 2, 3]})
    t = Ablation(ab)
    assert t.head == ["method", "alpha", "lam", "accuracy", "cost", "local_rate"]
    assert [r[0] for r in t.rows] == ["ablation:sign-only", "CR²", "cr2-rate-0.1"] and t.rows[2][1] == "–"
    agree(t)
    sw = SweepExtremes(pd.DataFrame({"method": ["mlp"], "max_local_rate": [1.0], "n": [np.int64(12345)]}))
    assert sw.rows == [["MLP", "1", "12345"]]
    assert LocalAtCost(lac.iloc[:0]).markdown() == "_(no rows: this run has none here)_\n"


def test_verdict_per_target_and_seed_spread():
    fa = pd.DataFrame({"method": ["cr2", "cr2", "knn"], "target": [0.79, 0.8, 0.8], "saving_vs_knn_pct": [-3.2, 1.0, 0.0],
                       "saving_lower": [-16.6, None, 0], "saving_upper": [7.2, None, 0], "p_holm": [1.0, None, None],
                       "family_size": [175, None, None], "verdict": ["no difference detected", None, None]})
    t = VerdictPerTarget(fa)
    assert t.head[1] == "CR² saving vs KNN % [95 % CI]"
    assert [r[0] for r in t.rows] == ["0.79", "0.80"] and t.rows[0][1] == "-3.2 [-16.6, +7.2]" and t.rows[1][3] == "–"
    agree(t)
    sp = pd.DataFrame({"method": ["llmrank-bench"], "target": [0.8], "lam": [2.0], "metric": ["risk"], "n_seeds": [5],
                       "seed_mean": [0.1], "seed_sd": [3.4], "seed_min": [-4.5], "seed_max": [4.4], "base_value": [0.7],
                       "base_lower": [-3.4], "base_upper": [3.6]})
    assert SeedSpread(sp, "method").rows == [["LLMRank + benchmark id", "5", "+0.1 ± 3.4", "-4.5 – +4.4",
                                              "+0.7 [-3.4, +3.6]"]]
    assert SeedSpread(sp, "target").rows[0][0] == "0.80"
    t = SeedSpread(sp, "lam", ".4f")
    assert t.head[:2] == ["λ", "metric"] and t.rows[0][:4] == ["2", "risk", "5", "0.1000 ± 3.4000"]
    agree(t)


def test_equal_risk_tables_render_alike():
    rows = pd.DataFrame([{"question": "cost", "router": "cr2", "rule": "crc", "alpha": 0.01, "target": 0.8,
                          "estimate": 0.4, "lower": 0.35, "upper": 0.45}])
    reach = pd.DataFrame({"method": ["cr2@crc"], "alpha": [0.01], "max_accuracy": [0.85]})
    t = CostAtTarget(rows, reach, 0.8, label=lambda r: r.upper())
    assert t.head == ["router", "uncertified", "crc α=0.01"] and t.rows[0][:1] == ["CR2"]
    agree(t)
    assert CostAtTarget(rows.iloc[:0], reach.iloc[:0], 0.8).markdown() == "_(no rows: no certified router in this run)_\n"
    q = pd.DataFrame({"sides": ["a vs b", "a vs b", "c vs d"], "alpha": [0.05, 0.01, 0.01], "cell": ["x", "y", "z"],
                      "n_targets": [22, 22, 22], "p_value": [0.04912, 0.5, 0.2], "p_holm": [0.1964, 1.0, 0.4]})
    t = EqualRiskQuestion(q, "calibrated-vs-default")
    assert t.head == ["a vs b", "α = 0.01", "α = 0.05"]
    assert t.rows == [["a vs b", "y", "x"], ["c vs d", "z", "— (no target both sides reach)"]]
    agree(t)
    g = EqualRiskQuestion(q, "gate-quality")
    assert g.rows[0] == ["a vs b", "x", "22", "0.0491", "0.196"]
    agree(g)


@pytest.mark.parametrize("verdict", [False, True])
def test_paper_fixed_savings_puts_the_word_after_ours(verdict):
    fa = pd.DataFrame({"method": ["cr2", "knn", "mlp"], "target": [0.79] * 3, "saving_vs_knn_pct": [-3.2, 0.0, 1.0],
                       "saving_lower": [-16.6, 0.0, -1.0], "saving_upper": [7.2, 0.0, 2.0],
                       "saving_vs_knn_grid_pct": [-3.1, 0.0, 0.5], "verdict": ["no difference detected", None, None]})
    t = PaperFixedSavings(fa, verdict)
    assert t.head[2] == "ours CR² vs KNN % (interp.) [95 % CI]"
    assert ("verdict" in t.head) == verdict and t.head[-1] == "ours MLP vs KNN % (interp.) [95 % CI]"
    assert t.rows[0][0] == "0.79" and t.rows[1][2] == "not reached"
    agree(t)


def test_validity_tables_justify_text_left_in_a_terminal():
    from cr2.report.validity import CertifiedValidity

    assert CertifiedValidity(pd.DataFrame()).markdown() == \
        "_(no rows: this run stores no re-splits of a certified router)_\n"
    t = Table(["router", "α"], [["CR²", "0.01"]])
    r = t.rich(justify="right", left=("router",))
    assert [c.justify for c in r.columns] == ["left", "right"]


def test_baselines_and_route_utilities_render_alike():
    from cr2.report.tables import Baselines, RouteUtilities

    points = pd.DataFrame({"method": ["mlp", "mlp"], "lam": [0.0, 2.0], "accuracy": [0.8123, None], "cost": [0.5, 0.3]})
    t = Baselines({"mlp": {"params": 235204, "flops": 469800, "fit_seconds": 10.94},
                   "knn": {"params": 0, "flops": 11907072, "fit_seconds": 1.9}}, points)
    assert t.rows == [["MLP", "235,204", "469,800", "10.9", "81.2%", "— / 0.300"],
                      ["KNN", "0", "11,907,072", "1.9", "— (not evaluated at λ = 0)", "— (not evaluated at λ = 2)"]]
    agree(t, justify="right")
    r = RouteUtilities([{"model_id": "a", "p_correct": 0.5, "cost_norm": 0.2, "latency_s": 0.1234, "energy_j": 1.234,
                         "utility": -0.1}, {"model_id": "b", "p_correct": 0.9, "cost_norm": 1.0, "latency_s": 1.0,
                                            "energy_j": 10.0, "utility": 0.3}], chosen="b")
    assert r.rows[1] == ["b ◀", "0.900", "1.000", "1.000", "10.00", "+0.300"] and r.rows[0][-1] == "-0.100"
    agree(r, justify="right")


def test_label_sources_and_simcheck_points_render_alike():
    from cr2.report.simcheck import SimcheckPoints
    from cr2.report.tables import LabelSources

    t = LabelSources(pd.DataFrame({"source": ["simulated-irt-v2"], "rows": [12345], "models": [4], "queries": [3000],
                                   "accuracy": [None], "backend": ["sim"]}))
    assert t.rows == [["simulated-irt-v2", "12,345", "4", "3,000", "—", "sim"]]
    agree(t)
    s = SimcheckPoints(pd.DataFrame({"source": ["v2"], "statistic": ["accuracy"], "model": ["a"], "other": ["b"],
                                     "measured": [0.5], "mean": [np.nan], "q05": [0.4], "q95": [0.6],
                                     "tolerance": [0.005], "meets_target": [False]}))
    assert s.rows == [["v2", "accuracy", "a ~ b", "0.500", "—", "[0.400, 0.600]", "±0.005", "NO"]]
    agree(s)
