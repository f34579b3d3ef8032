"""Drift of the deployment conditions away from the calibration distribution (paper §VI-F, operations).

The threshold table τ*(λ; α) is valid for queries and channel states exchangeable with its calibration
set. `drift_test` compares a reference sample (the calibration conditions) with a new one, feature by
feature, with the two-sample Kolmogorov–Smirnov test, and controls the family-wise false-alarm rate
across features with Holm's step-down correction (valid under any dependence between the features, as
between a state's distance and its rates). Drift is declared when any Holm-adjusted p-value is ≤ α;
the recommendation is then to re-calibrate on the new state distribution (`cr2 recalibrate --states`),
which relabels and recalibrates without retraining the gate.

Features. `state_features` gives distance_m, rate_ul_bps and rate_dl_bps of a set of channel states.
Gate scores at a λ are a useful extra feature when the new sample holds new queries (their embeddings);
under a change of channel-state distribution alone they cannot move, because the gate never sees ξ.

scipy is imported inside drift_test, so importing this module stays cheap.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from cr2.evaluation.statistics import holm_adjust
from cr2.core.errors import DataValidationError, UnknownNameError

CORRECTIONS = ("holm", "bonferroni")


@dataclass(frozen=True)
class FeatureDrift:
    """The KS test of one feature: reference vs new sample."""

    feature: str
    statistic: float  # KS D = sup_x |F_ref(x) − F_new(x)|, in [0, 1]
    p_value: float  # two-sided p-value of the single test
    p_adjusted: float  # p-value after the multiple-testing correction across features
    n_reference: int
    n_sample: int
    drifted: bool  # p_adjusted ≤ α


@dataclass(frozen=True)
class DriftReport:
    """Per-feature KS results and the overall verdict: drifted iff any adjusted p-value ≤ α."""

    features: tuple[FeatureDrift, ...]  # in the order of the reference dict
    alpha: float  # family-wise false-alarm level
    correction: str  # holm | bonferroni
    drifted: bool
    recommendation: str  # one line: "re-calibrate: cr2 recalibrate --states …" or "no drift detected …"

    def __getitem__(self, feature: str) -> FeatureDrift:
        for f in self.features:
            if f.feature == feature:
                return f
        raise UnknownNameError(f"no feature {feature!r} in this report; features: {[f.feature for f in self.features]}")

    def to_records(self) -> list[dict[str, Any]]:
        """Return one dict per feature (tidy, for a table or the warehouse)."""
        return [{**f.__dict__, "alpha": self.alpha, "correction": self.correction} for f in self.features]

    def lines(self) -> list[str]:
        """Return a short human-readable report: one line per feature, then the recommendation."""
        out = [f"{f.feature:<24} D = {f.statistic:.4f}  p = {f.p_value:.3g}  p_{self.correction} = {f.p_adjusted:.3g}  "
               f"(n = {f.n_reference:,} vs {f.n_sample:,}){'  DRIFT' if f.drifted else ''}" for f in self.features]
        return out + [self.recommendation]


def _feature_array(which: str, name: str, values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataValidationError(f"{which}[{name!r}] has shape {arr.shape}; every feature must be a 1-D array of samples")
    if len(arr) == 0:
        raise DataValidationError(f"{which}[{name!r}] is empty; the KS test needs at least one value per sample")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise DataValidationError(f"{which}[{name!r}] has dtype {arr.dtype}; features must be real numbers")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise DataValidationError(f"{which}[{name!r}] contains {int((~np.isfinite(arr)).sum())} NaN or ±inf value(s); "
                                  "drop or fix them before testing for drift")
    return arr


def drift_test(
    reference: Mapping[str, np.ndarray],
    sample: Mapping[str, np.ndarray],
    alpha: float = 0.05,
    *,
    correction: str = "holm",
    states: str | None = None,
) -> DriftReport:
    """Return the DriftReport of `sample` against `reference`: a two-sample KS test per feature, Holm-corrected.

    reference, sample: feature name → 1-D array of values (same names in both; sizes may differ).
    alpha: family-wise false-alarm level in (0, 1). states: the state distribution to name in the
    recommendation (the argument of `cr2 recalibrate --states`).
    """
    from scipy.stats import ks_2samp

    if not 0.0 < float(alpha) < 1.0:
        raise DataValidationError(f"α must lie in (0, 1) (the family-wise false-alarm level), got {alpha!r}")
    if correction not in CORRECTIONS:
        raise DataValidationError(f"unknown correction {correction!r}; available: {', '.join(CORRECTIONS)}")
    if not reference:
        raise DataValidationError("the reference sample has no features; pass e.g. state_features(states, comm)")
    missing, extra = [k for k in reference if k not in sample], [k for k in sample if k not in reference]
    if missing or extra:
        raise DataValidationError(f"reference and sample must have the same features: missing from the sample {missing}, "
                                  f"not in the reference {extra}")
    names = list(reference)
    ref = {k: _feature_array("reference", k, reference[k]) for k in names}
    new = {k: _feature_array("sample", k, sample[k]) for k in names}
    results = [ks_2samp(ref[k], new[k], alternative="two-sided", method="auto") for k in names]
    p = np.array([float(r.pvalue) for r in results])
    p_adj = holm_adjust(p) if correction == "holm" else np.minimum(1.0, len(p) * p)
    features = tuple(
        FeatureDrift(feature=k, statistic=float(r.statistic), p_value=float(pv), p_adjusted=float(pa),
                     n_reference=len(ref[k]), n_sample=len(new[k]), drifted=bool(pa <= alpha))
        for k, r, pv, pa in zip(names, results, p, p_adj)
    )
    drifted = [f.feature for f in features if f.drifted]
    if drifted:
        recommendation = (f"re-calibrate: cr2 recalibrate --states {states or 'FILE'}  "
                          f"(drift in {', '.join(drifted)} at α = {alpha:g}, {correction})")
    else:
        recommendation = (f"no drift detected (all {correction}-adjusted p > {alpha:g}): keep the current thresholds")
    return DriftReport(features=features, alpha=float(alpha), correction=correction, drifted=bool(drifted),
                       recommendation=recommendation)


def state_features(states: Any, comm: Any, scores: Mapping[float, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Return the drift features of channel states: distance_m, rate_ul_bps, rate_dl_bps [n] float64.

    states: cr2.system.channel.ChannelStates; comm: the config's CommunicationSpec. scores: optional
    λ → gate scores [m] (float32), added as 'score@lam=<λ>' (only informative when the queries change).
    """
    from cr2.system.channel import rates

    rate_ul, rate_dl = rates(states, comm)
    out = {"distance_m": np.asarray(states.distance_m, dtype=np.float64), "rate_ul_bps": rate_ul, "rate_dl_bps": rate_dl}
    for lam, s in (scores or {}).items():
        out[f"score@lam={float(lam):g}"] = np.asarray(s, dtype=np.float64)
    return out


__all__ = ["DriftReport", "FeatureDrift", "drift_test", "state_features"]
