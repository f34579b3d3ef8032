"""cr2.studies.simcheck read back from a stored run's rows (v_simcheck): met / missed against the tolerance, and the
sign of the savings vs KNN per (router, target) point and per router."""
from __future__ import annotations

import pandas as pd

from cr2.studies.simcheck import router_savings, sign_counts, with_met


def _savings() -> pd.DataFrame:
    return pd.DataFrame({"source": ["v2"] * 4 + ["v1"] * 2, "statistic": ["saving_vs_knn_pct"] * 6,
                         "model": ["cr2", "cr2", "mlp", "mlp", "cr2", "mlp"],
                         "measured": [-5.0, 2.0, 1.0, 3.0, -5.0, 1.0], "mean": [-4.0, -1.0, 0.5, 2.0, 5.0, -1.0]})


def test_signs_are_counted_per_point_and_per_router():
    rows = _savings()
    assert sign_counts(rows, "v2") == (3, 4) and sign_counts(rows, "v1") == (0, 2) and sign_counts(rows, "x") == (0, 0)
    r = router_savings(rows, "v2")
    assert r.loc["cr2"].to_dict() == {"n": 2, "same": 1, "measured": -1.5, "simulated": -2.5}
    assert (r.loc["mlp", "n"], r.loc["mlp", "same"]) == (2, 2)


def test_met_is_within_the_tolerance_and_undefined_without_one():
    rows = with_met(pd.DataFrame({"mean": [0.52, 0.53], "measured": [0.50, 0.50], "tolerance": [0.02, None]}))
    assert rows["met"].iloc[0] == True and pd.isna(rows["met"].iloc[1])  # noqa: E712  (0.02 ≤ 0.02: float slack)
