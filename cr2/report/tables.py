"""The report's tables: tidy frames (rows of the warehouse views) in, display frames out (values as shown, each cell
written by cr2.report.cells); `mean_saving_table` is the one table of the mean saving vs KNN.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.report.cells import ci_cell, num, p_cell, pm_cell
from cr2.report.styles import MethodStyles


def on_lams(values, lams=HEADLINE_LAMS, tol: float = 1e-9) -> list[bool]:
    """For each λ of `values`: whether it is one of `lams` (the λ a summary quotes; float tolerance)."""
    return [any(abs(float(v) - lam) < tol for lam in lams) for v in values]


def informative_targets(fixed: pd.DataFrame, pareto: pd.DataFrame) -> pd.DataFrame:
    """Targets at or above every compared method's accuracy at its own cheapest point (below it, a method's
    cost is just its minimum cost and the comparison says nothing)."""
    methods = set(fixed["method"])
    pts = pareto[pareto["method"].isin(methods)]
    floor = pts.sort_values(["cost", "accuracy"], ascending=[True, False]).groupby("method").first()["accuracy"].max()
    return fixed[fixed["target"] >= np.floor(floor * 100) / 100 - 1e-9]


def mean_saving_table(ms: pd.DataFrame, label: Callable[[str], str] = str) -> pd.DataFrame:
    """Every learned router's mean saving vs KNN over the validation target grid, its 95 % interval, the Holm p over
    its stored family and the test's stored word (rows of v_mean_saving_ci); `label` names a router (the report: its
    display name)."""
    if ms.empty:
        return pd.DataFrame()
    return pd.DataFrame({"router": [label(m) for m in ms["method"]], "targets (validation grid)": ms["n_targets"],
                         "mean saving vs KNN % [95 % CI]": [ci_cell(r.mean_saving_vs_knn_pct, r.saving_lower,
                                                                    r.saving_upper) for r in ms.itertuples()],
                         "p, Holm (family size)": [holm_cell(r) for r in ms.itertuples()],
                         "verdict": ms["verdict"].fillna("–")}).reset_index(drop=True)


def holm_cell(r) -> str:
    """'Holm p (family size)' of one stored test (a row of a view with p_holm, n_resamples, family_size)."""
    size = getattr(r, "family_size", None)
    return (f"{p_cell(getattr(r, 'p_holm', None), getattr(r, 'n_resamples', None), '.2g', size)}"
            + ("" if size is None or pd.isna(size) else f" ({int(size)})"))


def operating_point_ci_table(ops: pd.DataFrame, alpha: float, lams: tuple[float, ...], st: MethodStyles) -> pd.DataFrame:
    """CR² (at α) and every learned baseline at a few λ: accuracy, cost, local rate, risk with their intervals."""
    if ops.empty or "accuracy_lower" not in ops.columns:
        return pd.DataFrame()
    keep = ops["lam"].isin(lams) & (((ops["method"] == "cr2") & np.isclose(ops["alpha"].fillna(-1), alpha))
                                    | ops["method"].isin([st.reference, *[m for m in st.learned if m != "cr2"]]))
    d = ops[keep].sort_values(["lam", "method"])
    out = pd.DataFrame({"λ": d["lam"].map(lambda v: f"{v:g}"), "router": [st.label(m) for m in d["method"]]})
    for m in ("accuracy", "cost", "local_rate", "risk"):
        out[f"{m} [95 % CI]"] = [ci_cell(e, lo, hi, ".3f") for e, lo, hi in zip(d[m], d[f"{m}_lower"], d[f"{m}_upper"])]
    return out.reset_index(drop=True)


def realised_risk_table(rr: pd.DataFrame, alpha: float, lams=HEADLINE_LAMS) -> pd.DataFrame:
    """Per rule and λ at α, the teacher-referenced and realised risks, local accuracy, local rate and cost."""
    if rr.empty:
        return pd.DataFrame()
    d = rr[np.isclose(rr["alpha"].fillna(-1), alpha) & np.array(on_lams(rr["lam"], lams), dtype=bool)]
    d = d.sort_values(["lam", "rule"])
    f = lambda v, k=4: "–" if pd.isna(v) else f"{v:.{k}f}"  # noqa: E731
    return pd.DataFrame({"rule": d["rule"], "λ": d["lam"].map(lambda v: f"{v:g}"), "teacher disagreement": d["teacher_risk"].map(f),
                         "oracle disagreement (real labels)": d["oracle_risk"].map(f),
                         "avoidable error": d["avoidable_risk"].map(f), "local accuracy": d["local_accuracy"].map(f),
                         "local rate": d["local_rate"].map(f), "cost": d["cost"].map(f),
                         "accuracy": d["accuracy"].map(f)}).reset_index(drop=True)


def benchmark_table(at_cost: pd.DataFrame, st: MethodStyles) -> pd.DataFrame:
    """Per-benchmark accuracy at each cost target: rows (target, method), columns benchmarks + Avg; '–' if unreachable."""
    rows = []
    benches = sorted(b for b in at_cost["benchmark"].unique() if b != "all")
    order = {m: i for i, m in enumerate((*st.learned, "cr2"))}
    for (target, method), d in sorted(at_cost.groupby(["target", "method"]), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9))):
        reach = bool(d["reachable"].iloc[0])
        acc = dict(zip(d["benchmark"], d["accuracy"]))
        row = {"cost target": f"{target:.2f}", "method": st.label(method)}
        for b in benches + ["all"]:
            row[b.upper() if b != "all" else "Avg"] = f"{acc[b]:.3f}" if reach and b in acc and pd.notna(acc[b]) else "–"
        rows.append(row)
    return pd.DataFrame(rows)


def risk_check_table(risk: pd.DataFrame) -> pd.DataFrame:
    """Per α: the largest test-split risk over the λ grid, how many binomial standard errors it lies from α, and the
    largest Monte-Carlo mean over re-splits (the quantity the CRC guarantee bounds by α). Context only: one split's
    risk may exceed α without breaking a promise made in expectation; the verdict is the validity table's."""
    from cr2.evaluation.metrics import risk_tolerance

    rows = []
    for alpha, d in risk.groupby("alpha"):
        n = int(d["n_risk"].min())
        se = risk_tolerance(alpha, n, z=1.0)
        worst = float(d["risk"].max())
        rows.append({"α": f"{alpha:g}", "max test risk over λ": num(worst, ".4f"),
                     "(max − α) / binomial SE": num((worst - alpha) / se, "+.1f") if se > 0 else "— (no test rows)",
                     "max MC mean over λ": f"{d['risk_mean'].max():.4f}" if d["risk_mean"].notna().any()
                     else "— (no re-splits stored)", "N test": f"{n:,}"})
    return pd.DataFrame(rows)


def ablation_table(ab: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Rows grouped as in the paper: loss composition, w_mono sweep, CRC level α, calibration rule, deferred path."""
    if ab.empty:
        return pd.DataFrame(columns=["group", "configuration", "accuracy", "local rate", "cost", "λ"])
    at = lambda m, a=alpha: ab[(ab["method"] == m) & np.isclose(ab["alpha"].fillna(-1), a)]  # noqa: E731
    spec = [("loss composition", "sign loss only", at("ablation:sign-only")),
            ("loss composition", "+ margin loss", at("ablation:sign+margin")),
            ("loss composition", "+ margin + monotone (CR²)", at("cr2")),
            ("w_mono sweep", "w_mono = 0", at("ablation:sign+margin")),
            ("w_mono sweep", "w_mono = 0.5", at("ablation:w_mono=0.5")),
            ("w_mono sweep", "w_mono = 1 (CR²)", at("cr2")),
            ("w_mono sweep", "w_mono = 2", at("ablation:w_mono=2"))]
    spec += [("CRC level", f"α = {a:g}", at("cr2", a)) for a in sorted(ab.loc[ab["method"] == "cr2", "alpha"].dropna().unique())]
    spec += [("calibration rule", "CRC (+1 correction)", at("cr2")), ("calibration rule", "empirical (no +1)", at("cr2-empirical")),
             ("deferred path", "edge-only (CR²)", at("cr2")), ("deferred path", "inclusive", at("cr2-inclusive")),
             ("deferred path", "fallback (cheapest edge)", at("cr2-fallback"))]
    rows = []
    for group, label, d in spec:
        if len(d):
            r = d.iloc[0]
            rows.append({"group": group, "configuration": label, "accuracy": num(r["accuracy"], ".4f"),
                         "local rate": num(r["local_rate"], ".1f", 100, "%"), "cost": num(r["cost"], ".3f"),
                         "λ": num(r["lam"], "g")})
    return pd.DataFrame(rows)


def guarantee_price_table(p: pd.DataFrame) -> pd.DataFrame:
    """Each guarantee's mean test local rate, cost and accuracy beside plain CRC at the same operating point."""
    if p.empty:
        return pd.DataFrame()
    p = p.sort_values(["rule", "lam", "target"], na_position="first")
    return pd.DataFrame({
        "rule": p["rule"], "λ": p["lam"].map(lambda x: "" if pd.isna(x) else f"{x:g}"),
        "α / target": [f"α={a:g}" if pd.notna(a) else f"target {t:g}" for a, t in zip(p["alpha"], p["target"])],
        "local rate ± SE": [pm_cell(a, b, 3) for a, b in zip(p["local_rate"], p["local_rate_se"])],
        "mean cost ± SE": [pm_cell(a, b, 4) for a, b in zip(p["mean_cost"], p["mean_cost_se"])],
        "accuracy ± SE": [pm_cell(a, b, 4) for a, b in zip(p["accuracy"], p["accuracy_se"])],
        "Δ local vs CRC": p["local_rate_vs_crc"].map(lambda x: "" if pd.isna(x) else f"{x:+.3f}"),
        "Δ cost vs CRC": p["mean_cost_vs_crc"].map(lambda x: "" if pd.isna(x) else f"{x:+.4f}"),
    }).reset_index(drop=True)
