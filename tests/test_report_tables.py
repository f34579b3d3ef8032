"""Tables as objects (cr2.report.table, cr2.report.pools): one set of cells, rendered as markdown, rich, a Prefect
artifact and HTML alike; verdict words only through the caller's `word`; numbers through cr2.report.cells."""
from __future__ import annotations

import io

import pandas as pd

from cr2.report.cells import EM_DASH, PAGE, TERMINAL, counts_cell
from cr2.report.pools import (AcrossPoolEqualRisk, PoolDiagnostics, PoolSavings, PoolVerdictCounts, SignedRankTests,
                              across_pool_equal_risk_markdown)
from cr2.report.table import Table


def _savings() -> pd.DataFrame:
    rows = []
    for pool, (e, lo, hi), p_holm in (("p1", (-3.0, -6.0, -0.5), 0.01), ("p2", (1.0, -1.0, 3.0), 0.6)):
        for m, est in (("cr2", (e, lo, hi)), ("full-information", (40.0, 35.0, 45.0))):
            rows.append({"pool": pool, "method": m, "reference": "knn", "mean_saving_pct": est[0],
                         "lower_pct": est[1], "upper_pct": est[2], "p_value": p_holm, "p_holm": p_holm,
                         "family_size": 1})
    return pd.DataFrame(rows)


def test_one_table_renders_the_same_cells_every_way():
    t = Table(["pool", "P(a \\| b)", "saving"], [["p1", "0.5", "−3.0 [−6.0, −0.5]"]])
    assert t.markdown() == "| pool | P(a \\| b) | saving |\n| --- | --- | --- |\n| p1 | 0.5 | −3.0 [−6.0, −0.5] |\n"
    assert t.artifact() == [{"pool": "p1", "P(a | b)": "0.5", "saving": "−3.0 [−6.0, −0.5]"}]
    assert "<td>−3.0 [−6.0, −0.5]</td>" in t.html() and "<th>P(a | b)</th>" in t.html()
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=200).print(t.rich())
    assert "−3.0 [−6.0, −0.5]" in out.getvalue()  # an interval's brackets are text, not rich markup
    assert Table(["a"], [], why="none stored").markdown() == "_(no rows: none stored)_\n"


def test_pool_savings_words_come_from_the_callers_word_and_numbers_from_one_style():
    said = []

    def word(v):
        said.append(v)
        return f"<{v}>"

    t = PoolSavings(_savings(), "knn", {"p1": 2.0, "p2": 0.5}, ("cr2",), word=word)
    assert t.head == ["pool", "c_dev/c_edge", "cr2 vs knn", "full-information vs knn"]
    assert t.rows[0] == ["p1", "2.00", "-3.0 [-6.0, -0.5] <dearer>", "+40.0 [+35.0, +45.0]"]
    assert t.rows[1][2] == "+1.0 [-1.0, +3.0] <no difference detected>"
    assert said == ["dearer", "no difference detected"]  # the oracle is a bound: no word asked for
    plain = PoolSavings(_savings(), "knn", {}, ("cr2",), style=TERMINAL)
    assert plain.rows[0][1:3] == [EM_DASH, "-3.0 [-6.0, -0.5]"]  # no word without `word`; the terminal's dash
    counts = PoolVerdictCounts(_savings(), "knn", ("cr2",))
    assert counts.rows == [["cr2", "2", counts_cell(["dearer", "no difference detected"])]] == [["cr2", "2", "0 / 1 / 1"]]


def test_the_diagnostics_signed_rank_and_across_pool_tables():
    d = pd.DataFrame([{"pool": "p1", "headroom_vs_knn_pct": 12.0, "headroom_lower_pct": -1.0, "headroom_upper_pct": 20.0,
                       "device_accuracy": 0.4, "ref_accuracy": float("nan"), "p_device_right_given_ref_wrong": 0.2,
                       "phi_device_ref": -0.1, "phi_mean": 0.3, "auc_device_correct": 0.6, "auc_ref_correct": 0.6,
                       "auc_disagree_device_ref": 0.55, "auc_disagree_mean": 0.5}])
    assert PoolDiagnostics(d).rows[0][:5] == ["p1", "12.0 [-1.0, 20.0]", "0.400", EM_DASH, "0.200"]
    page = PoolDiagnostics(d, label="ladder", style=PAGE, headroom_spec="+.1f")
    assert page.head[0] == "ladder" and page.rows[0][1] == "+12.0 [-1.0, +20.0]" and page.rows[0][5] == "-0.10"
    tests = pd.DataFrame([{"baseline": "mlp", "pools": 5, "median": -1.25, "w_plus": 3.0, "w_minus": 12.0, "p": 0.31,
                           "method": "exact", "error": None},
                          {"baseline": "knn", "pools": 1, "median": None, "w_plus": None, "w_minus": None, "p": None,
                           "method": None, "error": "fewer than 2 pools"}])
    sr = SignedRankTests(tests, style=TERMINAL)
    assert sr.rows == [["mlp", "5", "-1.2", "3", "12", "0.31", "exact"], ["knn", "1", *[EM_DASH] * 4, "fewer than 2 pools"]]
    from cr2.studies.pools import AcrossPools

    c = AcrossPools("cr2@crc", "knn@crc", 3, 2.5, 1000, None, 1, 0, 2, 0)
    assert AcrossPoolEqualRisk([c]).rows == [["cr2@crc", "knn@crc", 3, "+2.5", "1,000", EM_DASH, "1 / 0 / 2"]]
    text = across_pool_equal_risk_markdown([("gate-quality", "crc", [c])])
    assert text.startswith("**gate-quality, crc** (across pools)") and "No verdict word across pools" in text
    assert across_pool_equal_risk_markdown(None).startswith("(no equal-risk rows")


def test_the_level_table_prints_each_rows_stored_verdict_through_word():
    from cr2.report.level import LevelTable
    from cr2.studies.level import stored_level_verdicts

    rows = pd.DataFrame([{"question": "gate-quality", "rule": None, "alpha": float("nan"), "n_tests": 3, "rate": 0.04,
                          "rate_se": 0.0139, "n_rejections": 8, "n_replicates": 200, "rate_upper": 0.071,
                          "p_above": 0.62, "p_above_holm": 1.0, "n_test_rejections": 9, "p_threshold": 0.05 / 3,
                          "p_se": 0.0016, "p_relative_se": 0.09, "page_resamples": 10000, "p_tail_resamples": 83.3},
                         {"question": "certified-score", "rule": "ltt", "alpha": 0.05, "n_tests": 2, "rate": 0.2,
                          "rate_se": 0.028, "n_rejections": 40, "n_replicates": 200, "rate_upper": 0.25,
                          "p_above": 1e-12, "p_above_holm": 2e-12, "n_test_rejections": 41, "p_threshold": 0.025,
                          "p_se": 0.002, "p_relative_se": 0.08, "page_resamples": 10000, "p_tail_resamples": 125.0}])
    t = LevelTable(rows, stored_level_verdicts(rows), word=lambda v: f"<{v}>")
    assert t.rows[0][:6] == ["gate-quality", "3", "4.0 % ± 1.4 (8/200)", "7.1 %", "0.62, 1", "<not detectably above the nominal 5 %>"]
    assert t.rows[0][6:] == ["9/600", "0.0167 ± 0.0016 (9 %; B = 10,000)", "83"]
    assert t.rows[1][0] == "certified-score · ltt · α = 0.05" and t.rows[1][5] == "<above the nominal 5 %>"


def test_the_pooled_frontier_is_cut_into_runs_of_one_method():
    from cr2.evaluation.fixed_accuracy import frontier_segments

    points = pd.DataFrame({"method": ["a", "b", "a", "b", "a", "b"], "accuracy": [0.5, 0.4, 0.6, 0.7, 0.65, 0.7],
                           "cost": [0.1, 0.1, 0.2, 0.3, 0.4, 0.5]})
    # b at 0.1 is below a's 0.5; a's 0.65 at 0.4 is below b's 0.7 at 0.3; b's 0.7 at 0.5 adds nothing
    assert frontier_segments(points) == [("a", 0.1, 0.2), ("b", 0.3, 0.3)]
    assert frontier_segments(points.iloc[:0]) == []


def test_the_measured_tables_write_every_number_through_cells():
    from cr2.report.measured import LocalRate, ModelSummary, RiskVsAlpha

    m = ModelSummary(pd.DataFrame({"model_id": ["dev"], "accuracy": [float("nan")], "mean_cost_norm": [0.25],
                                   "mean_latency_s": [1.234], "mean_energy_j": [12.34]}))
    assert m.rows == [["dev", "–", "0.250", "1.23", "12.3"]]  # a missing value is '–', never 'nan'
    r = RiskVsAlpha(pd.DataFrame({"lam": [2.0, 2.0, 3.0], "alpha": [0.1, 0.05, 0.1], "risk": [0.04, 0.03, 0.0],
                                  "risk_mean": [0.05, float("nan"), 0.0], "risk_se": [0.001, 0.0, 0.0],
                                  "risk_q05": [0.01, float("nan"), 0.0], "risk_q95": [0.09, 0.0, 0.0]}), (2.0,))
    assert r.rows == [["2", "0.05", "0.0300", "–", "–"], ["2", "0.1", "0.0400", "0.0500 ± 0.0010", "0.0100–0.0900"]]
    lr = LocalRate(pd.DataFrame({"method": ["cr2", "cr2", "knn"], "alpha": [0.1, 0.05, None], "lam": [1.0, 1.0, 1.0],
                                 "local_rate": [0.123, 0.5, 0.9]}), 0.1)
    assert lr.rows == [["1", "12.3%"]]


def test_the_price_table_writes_mean_and_se_through_cells():
    from cr2.report.risks import GuaranteePrice

    p = pd.DataFrame([{"lam": 2.0, "rule": "crc", "local_rate": 0.5, "local_rate_se": 0.01, "mean_cost": 0.25,
                       "mean_cost_se": float("nan"), "accuracy": 0.7, "teacher_risk": 0.1, "oracle_risk": float("nan"),
                       "avoidable_risk": 0.02}])
    assert GuaranteePrice(p).rows == [["2", "crc", "0.5000 ± 0.0100", "0.2500", "0.7000", "0.1000", "–", "0.0200"]]


def test_the_certified_validity_table_reports_the_confirmatory_verdict_of_a_flagged_family():
    """A family whose screening re-splits said "violation detected" and that the certify stage re-checked is shown
    with the confirmatory verdict, its cell and the screening word beside it — never the screening word alone."""
    import numpy as np

    from cr2.evaluation.validity import NO_VIOLATION, VIOLATION
    from cr2.report.equal_risk import CertifiedValidityAt

    lam = np.array([0.5, 2.0])
    cells = pd.DataFrame({"method": "cr2@crc-oracle", "lam": lam, "alpha": 0.01,
                          "risk_mean": [0.0112, 0.0095], "risk_se": 0.0003, "n_resplits": 200.0,
                          "exact_mean": np.nan, "confirm_mean": [0.0100, 0.0094], "confirm_se": 0.0001,
                          "confirm_n": 2000.0})
    row = CertifiedValidityAt(cells, 0.01).artifact()[0]
    shown = row["E[risk] ≤ α = 0.01 at every λ"]
    assert shown.startswith(NO_VIOLATION) and f"the screening 200 said {VIOLATION}" in shown and "2,000" in shown
    assert row["mean risk over re-splits there ± MC se"].startswith("0.0100")
    screening_only = CertifiedValidityAt(cells.drop(columns=["confirm_mean", "confirm_se", "confirm_n"]), 0.01)
    assert screening_only.artifact()[0]["E[risk] ≤ α = 0.01 at every λ"] == VIOLATION
