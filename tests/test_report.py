"""Report building blocks on hand-built frames (values written out)."""
from __future__ import annotations

import pandas as pd

from cr2.evaluation.metrics import risk_tolerance
from cr2.evaluation.sweep import method_rows
from cr2.report.latex import to_latex
from cr2.report.styles import MethodStyles
from cr2.report.tables import benchmark_table, risk_check_table


def test_risk_tolerance_is_three_binomial_standard_errors():
    # α = 0.01, n = 2,500: SE = sqrt(0.01·0.99/2500) = 0.00198997…; 3·SE = 0.0059699
    assert abs(risk_tolerance(0.01, 2500) - 0.0059699) < 1e-6


def test_risk_check_is_context_in_binomial_standard_errors_without_a_verdict():
    risk = pd.DataFrame({"alpha": [0.01, 0.01, 0.05], "lam": [1.0, 2.0, 1.0], "risk": [0.012, 0.02, 0.05],
                         "n_risk": [2500, 2500, 2500], "risk_mean": [0.009, 0.010, 0.049]})
    table = risk_check_table(risk).set_index("α")
    assert table.loc["0.01", "(max − α) / binomial SE"] == "+5.0"  # (0.02 − 0.01) / 0.00199
    assert table.loc["0.05", "(max − α) / binomial SE"] == "+0.0"
    assert table.loc["0.01", "max MC mean over λ"] == "0.0100"
    assert "within" not in table.columns  # one split is no verdict on a promise made in expectation


def test_benchmark_table_marks_unreachable_targets():
    rows = []
    for method, reach in (("cr2", True), ("knn", False)):
        for bench, acc in (("mmlu", 0.8), ("gpqa", 0.5), ("all", 0.75)):
            rows.append({"method": method, "target": 0.45, "reachable": reach, "benchmark": bench, "accuracy": acc})
    styles = MethodStyles.from_frame(pd.DataFrame(method_rows("run", ["cr2", "knn"])))  # names from the catalogue
    table = benchmark_table(pd.DataFrame(rows), styles)
    cr2_row = table[table["method"] == "CR² (device–edge)"].iloc[0]
    knn_row = table[table["method"] == "KNN"].iloc[0]
    assert (cr2_row["MMLU"], cr2_row["GPQA"], cr2_row["Avg"]) == ("0.800", "0.500", "0.750")
    assert knn_row["MMLU"] == "–" and knn_row["Avg"] == "–"
    tex = to_latex(table)
    assert tex.startswith(r"\begin{tabular}") and r"\bottomrule" in tex and "0.800" in tex
