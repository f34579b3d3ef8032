"""Each rule's own risk against α: which risk a rule calibrates, and its stored test against α over all test rows.

The test itself is stored by the intervals stage (cr2.evaluation.intervals.RISKS_VS_ALPHA: the interval of
risk − α over every test row, its p from that difference's own bootstrap resamples) with its family and Holm p
(cr2.evaluation.families: the method at α, every λ of its sweep × every risk); here each row of a per-rule table is
matched with the one test of the risk its rule bounds. Nothing is re-corrected.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

RISK_OF_RULE = {"": "teacher_risk", "oracle": "oracle_risk", "avoidable": "avoidable_risk"}  # rule suffix → its risk

#: the stored test of a risk against α over all rows (cr2.evaluation.intervals.RISKS_VS_ALPHA), per own risk
MINUS_ALPHA = {"teacher_risk": "risk_all_minus_alpha", "oracle_risk": "oracle_risk_all_minus_alpha",
               "avoidable_risk": "avoidable_risk_all_minus_alpha"}


def own_risk(rule: str) -> str:
    """The risk a rule calibrates: crc / ltt the teacher disagreement, *-oracle / *-avoidable their real-label risk."""
    suffix = rule.split("-", 1)[1] if "-" in rule else ""
    return RISK_OF_RULE.get(suffix, "teacher_risk")


def vs_alpha(rr: pd.DataFrame, alpha: float, tests: pd.DataFrame) -> pd.DataFrame:
    """Per row: its own risk − α over all test rows with the interval and p of that difference's own bootstrap
    resamples (stored: intervals metric '<risk>_all_minus_alpha') and its stored Holm-adjusted p over its family
    (cr2.evaluation.families: the method at α, every λ of its sweep × every risk) with the family's size."""
    out = rr.copy()
    out["own"] = out["rule"].map(own_risk)
    key = tests.assign(lam=tests["lam"].round(9), alpha=tests["alpha"].round(12)).set_index(
        ["method", "lam", "alpha", "metric"])
    found = [key.loc[(r.method, round(float(r.lam), 9), round(float(alpha), 12), MINUS_ALPHA[r.own])]
             if (r.method, round(float(r.lam), 9), round(float(alpha), 12), MINUS_ALPHA[r.own]) in key.index else None
             for r in out.itertuples()]
    if any(f is None for f in found):
        raise ValueError("the run stores no test of a risk against α (intervals '*_minus_alpha', schema 8): run "
                         "`cr2 run` on the warehouse again")
    out["d"] = [float(f["estimate"]) for f in found]
    out["d_lower"] = [float(f["lower"]) for f in found]
    out["d_upper"] = [float(f["upper"]) for f in found]
    out["p"] = [float(f["p_value"]) for f in found]
    out["p_holm"] = [float(f["p_holm"]) if pd.notna(f.get("p_holm")) else np.nan for f in found]
    out["family_size"] = [int(f["family_size"]) if pd.notna(f.get("family_size")) else 0 for f in found]
    if out["p_holm"].isna().any():
        raise ValueError("the run stores its risk-vs-α tests without their family and Holm p (schema < 9): run "
                         "`cr2 run` on the warehouse again")
    return out
