"""Per-λ conformal risk control of the local-acceptance threshold, and the rules it is compared with (paper §VI-F).

Risk: r_i(λ) = 1[m_full*(x_i, ξ_i; λ) ≠ m0]; loss ℓ_i(τ) = r_i·1[s_i ≥ τ]; d_τ = #{i : s_i ≥ τ, r_i = 1}.
CRC picks τ*(λ; α) = inf{τ : (d_τ + 1)/(N + 1) ≤ α} and accepts locally iff s ≥ τ*.

How thresholds are represented and compared
-------------------------------------------
d_τ only changes at the calibration scores, and {τ : d_τ ≤ k} = (v_{k+1}, ∞) where v_{k+1} is the
(k+1)-th largest risky score: the feasible set is open at its left end, so its infimum is not
attained. A threshold returned here is therefore the smallest number of the scores' own dtype that is
strictly above v_{k+1} (np.nextafter in that dtype). It is exactly representable in that dtype (and in
float64), so `scores >= tau` gives the same answer whether tau is a Python float, np.float32 or np.float64,
as long as `scores` keep the dtype they were calibrated in. Callers must compute the deployment scores
in the calibration dtype (cr2.method.gate returns float32) and compare with `>=`, e.g. via `accept()`.
±inf are the two degenerate thresholds: −inf accepts everything, +inf accepts nothing.

Rules (each one function in cr2/crc/rules.py; docs/guarantees.md says which to choose)
------------------------------------------------------------------------
- crc        E[risk] ≤ α for each λ separately, in expectation over calibration sets (paper eq. crc_tau).
- empirical  d_τ/N ≤ α without the +1 correction (an ablation; no guarantee).
- ltt        Learn-then-Test (Angelopoulos et al., 2021): P(every λ of the grid has risk ≤ α) ≥ 1 − δ, per α.
- fixed      τ = 0.5 for every λ (uncalibrated; the ablation's comparison rule).
- rate       each α read as a local rate f: the smallest τ accepting at most ⌊f·N⌋ (uncalibrated).
- Mondrian   crc or ltt within each group (benchmark by default): calibrate_group_tables().
Every rule ends in the same form — "accept at most k risky calibration points" — so every threshold is
the same exact next-score-above v_{k+1}; the rules differ only in k (max_risky_count / ltt_max_risky_count).

The package (only numpy is imported, so the calibration, evaluation and device paths stay light):
    registry.py    RULE_REGISTRY and RISKS: every rule's name, procedure and the risk it controls
    rules.py       one function per rule: (scores, risks, α) → τ; LTT p-values; minimum calibration sizes
    table.py       ThresholdTable (the shipped artefact) and calibrate_table (any registered rule)
    mondrian.py    GroupedThresholdTable, calibrate_group_tables, and table_from_records: the one loader
                   of stored threshold records, pooled or Mondrian
Argument mistakes (a bad α, δ, shape or rule/table combination) raise InvalidValueError; bad data (NaN
scores, an empty calibration set, incomplete stored records) raise DataValidationError.
"""
from __future__ import annotations

from cr2.crc.registry import (  # noqa: F401
    FIXED_THRESHOLD,
    LAM_RTOL,
    RISKS,
    RULES,
    RULE_REGISTRY,
    TABLE_RULES,
    RiskSpec,
    Rule,
    RuleSpec,
    rule_for,
    risk_spec,
    rule_risk,
    rule_spec,
)
from cr2.crc.exact import expected_resplit_risk  # noqa: F401
from cr2.crc.table import calibrated_lams  # noqa: F401
from cr2.crc.rules import (  # noqa: F401
    accept,
    binomial_cdf,
    binomial_tail_pvalue,
    calibrate_threshold,
    calibrate_thresholds,
    crc_min_n_calib,
    empirical_threshold,
    false_acceptance_risk,
    fixed_threshold,
    hoeffding_bentkus_pvalue,
    ltt_delta_per_lam,
    ltt_max_risky_count,
    ltt_min_n_calib,
    ltt_threshold,
    max_risky_count,
    min_n_calib,
    rate_threshold,
)
from cr2.crc.table import (  # noqa: F401
    ThresholdTable,
    calibrate_table,
    grid_text,
)
from cr2.crc.mondrian import (  # noqa: F401
    SMALL_GROUP_POLICIES,
    GroupedThresholdTable,
    calibrate_group_tables,
    group_key,
    table_from_records,
)

__all__ = [
    "FIXED_THRESHOLD",
    "LAM_RTOL",
    "RISKS",
    "RULES",
    "RULE_REGISTRY",
    "TABLE_RULES",
    "RiskSpec",
    "Rule",
    "RuleSpec",
    "rule_for",
    "rule_risk",
    "rule_spec",
    "accept",
    "expected_resplit_risk",
    "binomial_cdf",
    "binomial_tail_pvalue",
    "calibrate_threshold",
    "calibrate_thresholds",
    "crc_min_n_calib",
    "empirical_threshold",
    "false_acceptance_risk",
    "fixed_threshold",
    "hoeffding_bentkus_pvalue",
    "ltt_delta_per_lam",
    "ltt_max_risky_count",
    "ltt_min_n_calib",
    "ltt_threshold",
    "max_risky_count",
    "min_n_calib",
    "rate_threshold",
    "ThresholdTable",
    "calibrate_table",
    "grid_text",
    "SMALL_GROUP_POLICIES",
    "GroupedThresholdTable",
    "calibrate_group_tables",
    "group_key",
    "table_from_records",
]
