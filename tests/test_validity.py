"""The validity verdict (cr2.evaluation.validity) and its tables (cr2.report.validity): one test per cell, Holm over
the cells of one guarantee, the words "no violation detected" / "violation detected", and the family it controls."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cr2.evaluation.validity import NO_VIOLATION, VIOLATION, cell_p_values, validity_verdict


def test_one_cell_over_its_bound_is_a_violation_alone_but_not_among_many_cells():
    # z = (0.0105 − 0.01) / 0.0002 = 2.5: one-sided p = 0.0062
    alone = validity_verdict([0.0105], [0.0002], 0.01)
    assert alone.verdict == VIOLATION and alone.p == pytest.approx(0.00621, abs=1e-5) and alone.n_violated == 1
    # the same cell among 28 λ cells that keep the bound: Holm's first step, 28 × 0.0062 = 0.17 > 0.05
    cells = np.r_[np.full(27, 0.008), 0.0105]
    family = validity_verdict(cells, np.full(28, 0.0002), 0.01)
    assert family.verdict == NO_VIOLATION and family.worst == 27 and family.p_holm == pytest.approx(28 * 0.00621, rel=1e-2)
    # 4 SE over (the MMLU-Pro crc cell, 0.0108 ± 0.0002 at α = 0.01) stays a violation among 28 cells: 28 × 3.2e-5
    issue = validity_verdict(np.r_[np.full(27, 0.009), 0.0108], np.full(28, 0.0002), 0.01)
    assert issue.verdict == VIOLATION and issue.p_holm < 1e-3 and issue.value == pytest.approx(0.0108)


def test_the_verdict_controls_the_family_wise_error_over_its_cells():
    """Families of 40 cells exactly at their bound (the null's worst case), each mean noisy by one SE: Holm reports a
    violation in at most 5 % of the families (one-sided tolerance: 3 binomial SEs over 2,000 families); a rule
    that flags any cell beyond 2 SE — uncorrected — exceeds it many times over, so the check can fail."""
    rng = np.random.default_rng(7)
    n_fam, n_cells, se = 2000, 40, 0.0003
    means = 0.01 + se * rng.standard_normal((n_fam, n_cells))
    flagged = np.mean([validity_verdict(m, np.full(n_cells, se), 0.01).verdict == VIOLATION for m in means])
    assert flagged <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / n_fam)
    uncorrected = np.mean((means > 0.01 + 2 * se).any(axis=1))
    assert uncorrected > 0.4


def test_a_share_is_tested_exactly_and_edge_cases_are_words_not_errors():
    # 15 of 100 re-splits over α at δ = 0.1: P(Bin(100, 0.1) ≥ 15) = 0.073; 20 of 100: 0.0020
    p = cell_p_values([0.15, 0.20, 0.0], None, 0.1, kind="share", n_resplits=100)
    np.testing.assert_allclose(p, [0.0726, 0.00198, 1.0], atol=5e-4)
    assert validity_verdict([0.15], None, 0.1, kind="share", n_resplits=100).verdict == NO_VIOLATION
    assert validity_verdict([0.20], None, 0.1, kind="share", n_resplits=100).verdict == VIOLATION
    # se = 0 (every re-split gave the same risk): above the bound is a violation, at the bound is not
    assert validity_verdict([0.02], [0.0], 0.01).verdict == VIOLATION
    assert validity_verdict([0.01], [0.0], 0.01).verdict == NO_VIOLATION
    none = validity_verdict([np.nan], [0.1], 0.01)
    assert none.verdict is None and none.n_cells == 0 and none.worst == -1
    from cr2.core.errors import InvalidValueError

    with pytest.raises(InvalidValueError, match="number of re-splits"):
        validity_verdict([0.1], None, 0.1, kind="share")


def test_certified_verdicts_are_one_per_router_rule_and_alpha():
    from cr2.report.validity import certified_display, certified_verdicts

    lams = [0.5, 1.0, 2.0]
    rows = []
    for method, means in (("knn@crc", [0.004, 0.0049, 0.0045]), ("cr2@crc-avoidable", [0.004, 0.009, 0.0045]),
                          ("knn@ltt", [0.001, 0.001, 0.001])):
        rows += [{"method": method, "lam": lam, "alpha": 0.005, "risk_mean": m, "risk_se": 0.0005, "n_resplits": 200}
                 for lam, m in zip(lams, means)]
    v = certified_verdicts(pd.DataFrame(rows)).set_index(["router", "rule"])
    assert v.loc[("knn", "crc"), "verdict"] == NO_VIOLATION and v.loc[("knn", "crc"), "risk"] == "teacher disagreement"
    bad = v.loc[("cr2", "crc-avoidable")]
    assert bad["verdict"] == VIOLATION and bad["worst_lam"] == 1.0 and bad["risk"] == "avoidable error"
    assert bad["n_violated"] == 1 and bad["n_cells"] == 3 and bad["n_resplits"] == 200
    ltt = v.loc[("knn", "ltt")]  # its promise is over all λ at once: no per-λ verdict, and the row says why
    assert pd.isna(ltt["verdict"]) and "ltt" in ltt["note"]
    shown = certified_display(certified_verdicts(pd.DataFrame(rows)))
    text = shown.to_string()
    assert "violation detected (1/3" in text and "nan" not in text.lower() and "holds" not in text


def test_deployed_verdicts_test_each_promise_and_leave_context_and_crc_means_out():
    from cr2.report.validity import deployed_display, deployed_verdicts

    base = {"delta": 0.1, "target": None, "n_resplits": 100, "n_calib": 50}
    cells = pd.DataFrame([
        {**base, "rule": "ltt", "check_name": "ltt_any_violation", "metric": "share_any_lam_over_alpha_pool",
         "lam": None, "alpha": 0.01, "group": None, "value": 0.2, "se": 0.04, "bound": 0.1},
        {**base, "rule": "mondrian-crc", "check_name": "mondrian_mean_risk", "metric": "mean_test_risk", "lam": 1.0,
         "alpha": 0.01, "group": "benchmark=a", "value": 0.009, "se": 0.001, "bound": 0.01},
        {**base, "rule": "mondrian-crc", "check_name": "mondrian_mean_risk", "metric": "mean_test_risk", "lam": 1.0,
         "alpha": 0.01, "group": "benchmark=b", "value": 0.0101, "se": 0.001, "bound": 0.01},
        {**base, "rule": "crc", "check_name": "crc_group_mean_risk", "metric": "mean_test_risk", "lam": 1.0,
         "alpha": 0.01, "group": "benchmark=b", "value": 0.05, "se": 0.001, "bound": 0.01},
        {**base, "rule": "crc", "check_name": "crc_mean_risk", "metric": "mean_test_risk", "lam": 1.0,
         "alpha": 0.01, "group": None, "value": 0.05, "se": 0.001, "bound": 0.01},  # an older run's: not a source
        {**base, "rule": "target-accuracy", "check_name": "target_miss", "metric": "share_missing_target_pool",
         "lam": None, "alpha": None, "group": None, "value": 0.05, "se": 0.02, "bound": 0.1, "target": 0.7},
    ])
    v = deployed_verdicts(cells).set_index(["rule", "check"])
    assert v.loc[("ltt", "ltt_any_violation"), "verdict"] == VIOLATION  # 20 of 100 over δ = 0.1
    m = v.loc[("mondrian-crc", "mondrian_mean_risk")]
    assert m["verdict"] == NO_VIOLATION and m["n_cells"] == 2 and m["worst_group"] == "benchmark=b"
    ctx = v.loc[("crc", "crc_group_mean_risk")]
    assert pd.isna(ctx["verdict"]) and "context" in ctx["note"]
    assert ("crc", "crc_mean_risk") not in v.index  # the certify stage's re-splits are the one source of those
    assert v.loc[("target-accuracy", "target_miss"), "target"] == 0.7
    text = deployed_display(deployed_verdicts(cells)).to_string()
    assert "target 0.7" in text and "nan" not in text.lower()


def test_a_certified_family_flagged_by_its_screening_resplits_is_decided_by_a_confirmatory_recheck(tmp_path):
    """The certify stage re-checks a (method, α) whose screening re-splits say "violation detected" on an independent
    stream with 10× the re-splits, and that verdict is the one reported, the screening one shown beside it."""
    from types import SimpleNamespace

    import pandas as pd

    from cr2.evaluation.sweep import confirm_flagged
    from cr2.evaluation.validity import NO_VIOLATION, VIOLATION
    from cr2.report.validity import certified_display, certified_verdicts

    rng = np.random.default_rng(0)
    n = 400
    pooled = (rng.random(n), (rng.random(n) < 0.3).astype(float))  # any score, a 0/1 loss: CRC keeps E[risk] ≤ α
    table = SimpleNamespace(alphas=[0.1])
    unlucky = 0.5 + 0.001 * rng.standard_normal((40, 1))  # a screening stream far above α: flagged
    nan = np.full(1, np.nan)  # no exact expectation: only the promise test can flag
    rows = confirm_flagged("cr2@crc", "crc", table, [(0.5, pooled, None, unlucky, nan), (2.0, pooled, None, unlucky, nan)],
                           200, 40, 7, "run")
    got = pd.DataFrame(rows).pivot_table(index="lam", columns="metric", values="value")
    assert list(got.index) == [0.5, 2.0] and (got["resplit_confirm_risk_n"] == 400).all()  # 10 × 40
    assert (got["resplit_confirm_risk_mean"] < 0.1 + 4 * got["resplit_confirm_risk_se"]).all()
    # a family the screening does not flag is not re-checked
    fine = 0.05 + 0.001 * rng.standard_normal((40, 1))
    assert confirm_flagged("cr2@crc", "crc", table, [(0.5, pooled, None, fine, nan)], 200, 40, 7, "run") == []
    assert confirm_flagged("cr2@ltt", "ltt", table, [(0.5, pooled, None, unlucky, nan)], 200, 40, 7, "run") == []
    cells = pd.DataFrame({"method": "cr2@crc", "lam": [0.5, 2.0], "alpha": 0.1, "risk_mean": unlucky[:2, 0],
                          "risk_se": 0.0002, "n_resplits": 40, "exact_mean": np.nan,
                          "confirm_mean": got["resplit_confirm_risk_mean"].to_numpy(),
                          "confirm_se": got["resplit_confirm_risk_se"].to_numpy(),
                          "confirm_n": got["resplit_confirm_risk_n"].to_numpy()})
    v = certified_verdicts(cells).iloc[0]
    assert v["verdict"] == NO_VIOLATION and v["screening_verdict"] == VIOLATION and v["n_resplits"] == 400
    shown = certified_display(certified_verdicts(cells)).iloc[0, 7]
    assert "confirmatory, 400 re-splits" in shown and "the screening 40 said violation detected" in shown
    # without a re-check stored, the screening verdict stands
    assert certified_verdicts(cells.drop(columns=["confirm_mean", "confirm_se", "confirm_n"])).iloc[0]["verdict"] \
        == VIOLATION
    # the stored run is read back with its re-check: every surface reads certified_validity, so the confirmatory
    # verdict decides there too
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import certified_validity

    screening = [{"run_id": "run", "method": "cr2@crc", "lam": lam, "alpha": 0.1, "benchmark": "all",
                  "metric": f"resplit_risk_{m}", "value": value}
                 for lam, mean in zip((0.5, 2.0), unlucky[:2, 0]) for m, value in (("mean", mean), ("se", 0.0002),
                                                                                   ("n", 40.0))]
    with Warehouse(tmp_path) as wh:
        wh.insert_df("metrics", pd.DataFrame(screening + rows))
        stored = certified_validity(wh, "run")
    v = certified_verdicts(stored).iloc[0]
    assert v["verdict"] == NO_VIOLATION and v["screening_verdict"] == VIOLATION and v["n_resplits"] == 400


def test_a_family_whose_means_differ_from_their_exact_expectation_is_rechecked_too():
    """The software check flags a family at its level by chance too: the certify stage re-splits it again on the
    independent stream, and the exact-expectation verdict is read from those cells."""
    from types import SimpleNamespace

    import pandas as pd

    from cr2.evaluation.sweep import confirm_flagged
    from cr2.evaluation.validity import MATCHES_EXACT
    from cr2.report.validity import CONFIRMED, certified_verdicts

    from cr2.crc import expected_resplit_risk

    rng = np.random.default_rng(1)
    n = 300
    pooled = (rng.random(n), (rng.random(n) < 0.3).astype(float))
    exact = expected_resplit_risk(*pooled, 150, np.array([0.1]), rule="crc")
    off = exact[0] - 0.01 + 0.0001 * rng.standard_normal((40, 1))  # under α, but 100 SEs off its expectation
    rows = confirm_flagged("knn@crc", "crc", SimpleNamespace(alphas=[0.1]), [(0.5, pooled, None, off, exact)],
                           150, 40, 3, "run")
    got = pd.DataFrame(rows).pivot_table(index="lam", columns="metric", values="value")
    assert (got["resplit_confirm_risk_n"] == 400).all()
    cells = pd.DataFrame({"method": "knn@crc", "lam": [0.5], "alpha": 0.1, "risk_mean": off[:1, 0], "risk_se": 1e-5,
                          "n_resplits": 40, "exact_mean": exact[:1],
                          "confirm_mean": got["resplit_confirm_risk_mean"].to_numpy(),
                          "confirm_se": got["resplit_confirm_risk_se"].to_numpy(),
                          "confirm_n": got["resplit_confirm_risk_n"].to_numpy()})
    v = certified_verdicts(cells).iloc[0]
    assert v["exact_verdict"] == MATCHES_EXACT and v["exact_note"] == CONFIRMED
