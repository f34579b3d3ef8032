"""The one family rule: which stored tests are read together, decided once by the test's question, and the one word
each test carries on every surface (docs/guarantees.md, "One family rule").

A *test* is one stored interval with its bootstrap p (cr2.evaluation.statistics.bootstrap_p_values) of "the
statistic is 0": a saving, a mean saving, a risk minus α. Its *family* is fixed by what it answers, never by the
table that prints it:

- ``saving-vs-knn``       every learned router's saving vs KNN at every target it and KNN reach on the test set,
                          in one evaluation run (table `intervals`, metric saving_vs_knn_pct; the rows of
                          v_fixed_accuracy_ci);
- ``mean-saving-vs-knn``  every learned router's mean saving vs KNN over the validation grid of one run
                          (mean_saving_vs_knn_pct);
- ``risk-vs-alpha``       one method at one α in one run: every λ of its sweep × every risk stored against α
                          (`<risk>_minus_alpha`);
- equal-risk questions    one run × question × rule × α, the mean savings (metric mean_saving_pct) in one family and
                          the per-target savings (saving_pct) in another (`equal_risk_family`);
- ``deploy``              one run × rule × α, as cr2.evaluation.deploy assigns.

Conclusions over seeds (a t-interval per statistic over re-seeded runs) are families too, decided by the caller's
question and corrected the same way (`over_seeds`); they are computed from the stored seed spread, not stored.

Each test is stored with its family id, the family's size, the raw p, the Holm-adjusted p over the family and the
word that Holm p allows (`annotate`); every surface — the results page, `cr2 results`, the HTML report, the
Prefect artifacts and the SQL views' `verdict` columns — prints that stored word and never re-corrects a test over
another set. The interval's own, uncorrected word stays available as `verdict_uncorrected` and is never printed
as a conclusion.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from cr2.evaluation.statistics import Verdict, holm_adjust, saving_verdict

if TYPE_CHECKING:  # annotations only: the module imports pandas where it uses it
    import pandas as pd

SAVING_VS_KNN, MEAN_SAVING_VS_KNN = "saving_vs_knn_pct", "mean_saving_vs_knn_pct"
MINUS_ALPHA = "_minus_alpha"  # suffix of a risk-vs-α test's metric (cr2.evaluation.intervals.MINUS_ALPHA)

#: the families of the tests stored in `intervals`, by question (each family lies within one evaluation run)
INTERVAL_FAMILIES = {
    "saving-vs-knn": "every learned router's saving vs KNN at every target of one evaluation run",
    "mean-saving-vs-knn": "every learned router's mean saving vs KNN over the validation target grid of one run",
    "risk-vs-alpha": "one method at one α in one run: every λ of its sweep × every risk stored against α",
}


def change_verdict(lower: float, upper: float, p_adjusted: float | None = None, level: float = 0.95) -> str | None:
    """The verdict of a change rather than a saving (e.g. risk − α): saving_verdict's rule, its directions read as
    larger (interval above 0) and smaller (below 0)."""
    w = saving_verdict(lower, upper, p_adjusted, level)
    return Verdict({"cheaper": "larger", "dearer": "smaller"}.get(w, w)) if w else None


def _alpha_text(alpha: Any) -> str:
    return "-" if alpha is None or alpha != alpha else f"{float(alpha):g}"


def interval_family(row: Mapping[str, Any]) -> str | None:
    """The family id of one `intervals` row within its run, or None where the row is an estimate, not a test."""
    metric = str(row.get("metric") or "")
    if metric in (SAVING_VS_KNN, MEAN_SAVING_VS_KNN) and row.get("reference"):
        return None  # KNN against itself: 0 by construction, no test
    if metric == SAVING_VS_KNN:  # a target both frontiers reach on the test set (elsewhere two fallbacks: no test)
        return "saving-vs-knn" if row.get("reached", True) else None
    if metric == MEAN_SAVING_VS_KNN:
        return "mean-saving-vs-knn"
    if metric.endswith(MINUS_ALPHA):
        return f"risk-vs-alpha/{row.get('method')}/alpha={_alpha_text(row.get('alpha'))}"
    return None


def equal_risk_family(row: Mapping[str, Any]) -> str | None:
    """The family id of one `equal_risk` comparison row within its run: question × rule × α, mean savings and
    per-target savings apart; None for a side's own cost (an estimate, not a test)."""
    metric = str(row.get("metric") or "")
    if metric not in ("saving_pct", "mean_saving_pct"):
        return None
    part = "mean" if metric == "mean_saving_pct" else "per-target"
    return f"{row['question']}/{row.get('rule') or '-'}/alpha={_alpha_text(row.get('alpha'))}/{part}"


def _word(metric: str) -> Callable[..., str | None]:
    return change_verdict if str(metric).endswith(MINUS_ALPHA) else saving_verdict


def annotate(rows: Iterable[dict[str, Any]], family_of: Callable[[Mapping[str, Any]], str | None],
             level: float = 0.95) -> list[dict[str, Any]]:
    """The rows, each test given (in place) its family id, the family's size (its tests with a finite p), its
    Holm-adjusted p over the family and the one word that p allows (`verdict`), beside the interval's own word
    (`verdict_uncorrected`). A row that is not a test (family None) keeps p_holm and both words None; a test
    without a finite p (no interval) is counted in no family and carries no word."""
    rows = list(rows)
    families: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        fam = family_of(r)
        r["family"] = fam
        r["family_size"], r["p_holm"], r["verdict"], r["verdict_uncorrected"] = None, None, None, None
        if fam is not None:
            p = r.get("p_value")
            if p is not None and np.isfinite(float(p)):
                families.setdefault(fam, []).append(r)
            word = _word(r.get("metric", ""))
            r["verdict_uncorrected"] = word(r.get("lower"), r.get("upper"), None, level)
    for members in families.values():
        adjusted = holm_adjust(np.array([float(r["p_value"]) for r in members], dtype=np.float64))
        for r, q in zip(members, adjusted):
            r["family_size"], r["p_holm"] = len(members), float(q)
            r["verdict"] = _word(r.get("metric", ""))(r.get("lower"), r.get("upper"), float(q), level)
    return rows


def over_seeds(frame: "pd.DataFrame", family_columns: Sequence[str] = (), *, mean: str = "seed_mean",
               sd: str = "seed_sd", n: str = "n_seeds", verdict: Callable[..., str | None] = saving_verdict,
               level: float = 0.95) -> "pd.DataFrame":
    """The conclusion over seeds of each row of `frame` (a statistic over independent re-runs, summarised by its
    mean, sample sd and number of seeds, as v_seed_spread stores it): a frame on the same index with n, mean and sd
    as the t-interval reads them (sd NaN under two seeds), the Student-t interval over seeds (lo, hi), the
    one-sample t-test p of "the mean is 0" (p), its Holm adjustment within each family (p_holm) and the one word
    the t-interval and p_holm allow (`verdict`: saving_verdict, or change_verdict for a change such as risk − α).

    A family is the rows sharing the values of family_columns (all the rows when none are named), the tests read
    together; rows under two seeds have no p and count in no family. Unit of resampling: the seed (split, teacher,
    gate and learned baselines re-seeded); nothing about test-query noise within one seed."""
    import pandas as pd

    from cr2.evaluation.statistics import t_interval

    ivs = [t_interval(m, s, k, level) for m, s, k in zip(frame[mean], frame[sd], frame[n])]
    out = pd.DataFrame({"n": [i.n for i in ivs], "mean": [i.mean for i in ivs], "sd": [i.sd for i in ivs],
                        "lo": [i.lower for i in ivs], "hi": [i.upper for i in ivs],
                        "p": [i.p_value for i in ivs]}, index=frame.index)
    out = out.astype({"n": int, "mean": float, "sd": float, "lo": float, "hi": float, "p": float})
    p = out["p"].to_numpy(np.float64)
    p_holm = np.full(len(out), np.nan)
    if family_columns:
        groups = frame.reset_index(drop=True).groupby(list(family_columns), sort=False).indices.values()
    else:
        groups = [np.arange(len(out))]
    for rows in groups:
        p_holm[rows] = holm_adjust(p[rows])
    out["p_holm"] = p_holm
    out["verdict"] = pd.Series([verdict(lo, hi, q, level) for lo, hi, q in zip(out["lo"], out["hi"], p_holm)],
                               index=out.index, dtype=object)  # None (no interval) stays None, not NaN
    return out


def stored_word(lower: float, upper: float, p_holm: float | None, stored: Any, level: float = 0.95) -> str | None:
    """The word of a stored test as the verdict function's own object: the word its stored Holm p allows, which must
    be the word stored beside it (`stored`; a warehouse edited by hand is refused). None where the row has no Holm p
    (no test)."""
    if p_holm is None or p_holm != p_holm:
        return None
    word = saving_verdict(lower, upper, float(p_holm), level)
    if (word or None) != (stored if isinstance(stored, str) else None):
        raise ValueError(f"the stored word {stored!r} is not the word of its stored Holm p ({word!r}): the warehouse "
                         "was edited by hand")
    return word


def p_resolution(n_resamples: int | None, family_size: int | None = None) -> float | None:
    """The smallest non-zero p a bootstrap p of B resamples can take, 2 / B (two-sided: twice the smaller tail
    share), and of its Holm adjustment in a family of m, m · 2 / B; None where B is unknown."""
    if n_resamples is None or not n_resamples or n_resamples != n_resamples:
        return None
    return 2.0 * max(int(family_size or 1), 1) / float(n_resamples)


__all__ = ["INTERVAL_FAMILIES", "MEAN_SAVING_VS_KNN", "MINUS_ALPHA", "SAVING_VS_KNN", "annotate", "change_verdict",
           "equal_risk_family", "interval_family", "over_seeds", "p_resolution", "stored_word"]
