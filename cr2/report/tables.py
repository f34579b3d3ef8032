"""The report's tables: tidy frames (rows of the warehouse views) in, display frames out (values as shown, each cell
written by cr2.report.cells).

The tables one evaluation run shows on several surfaces are objects (cr2.report.table.Table), so the HTML report,
`cr2 results` and the Prefect artifacts print the same words and numbers: MeanSaving, FixedAccuracySavings,
RouterComplexity, and the artifacts' CR2OperatingPoints, RoutersAtLam, DriftTest and Recalibration; the command
line's Baselines, RouteUtilities and LabelSources. A router is named
by its catalogue `short` name (cr2.routers.short_name) on every one of them.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.report.cells import DASH, EM_DASH, ci_cell, count_cell, lam_cell, num, p_cell, pm_cell
from cr2.report.styles import MethodStyles
from cr2.report.table import Table
from cr2.routers import reference_router, short_name

NOT_REACHED = "not reached"  # a fixed-accuracy cell where the router or the reference does not reach the target


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


def router_order(methods: Iterable[str]) -> list[str]:
    """`methods` in catalogue order (a name the catalogue does not hold — a variant, always-<model> — after, by name)."""
    from cr2.routers import catalogue

    order = {k: e.order for k, e in catalogue().items()}
    return sorted(set(methods), key=lambda m: (order.get(m, len(order)), m))


class MeanSaving(Table):
    """Every learned router's mean saving vs KNN over the validation target grid, its 95 % interval, the Holm p over
    its stored family and the test's stored word (rows of v_mean_saving_ci), one row per router."""

    def __init__(self, ms: pd.DataFrame, why: str = "this run has none here"):
        rows = [[short_name(r.method), count_cell(r.n_targets),
                 ci_cell(r.mean_saving_vs_knn_pct, r.saving_lower, r.saving_upper), holm_cell(r),
                 r.verdict if isinstance(r.verdict, str) else DASH] for r in ms.itertuples()]
        super().__init__(["router", "targets (validation grid)", "mean saving vs KNN % [95 % CI]",
                          "p, Holm (family size)", "verdict"], rows, why)


class FixedAccuracySavings(Table):
    """Targets × routers: each router's saving vs the reference (KNN) at the target, % — interpolated with its 95 %
    interval (v_fixed_accuracy_ci) or, with `grid`, at the best grid point (saving_vs_knn_grid_pct, no interval) — and
    the reference's own cost at the target. A router of `methods` (those that reach some target with the reference)
    without a row at a target reads NOT_REACHED."""

    def __init__(self, fa: pd.DataFrame, methods: Iterable[str] = (), grid: bool = False,
                 why: str = "this run has none here"):
        ref = reference_router()
        shown = router_order((set(fa["method"]) | set(methods)) - {ref})
        by = {(round(float(t), 2), m): r for t, m, r in zip(fa["target"], fa["method"], fa.itertuples())}
        targets = sorted({round(float(t), 2) for t in fa["target"]})

        def cell(t: float, m: str) -> str:
            r = by.get((t, m))
            if r is None:
                return NOT_REACHED
            if grid:
                return num(r.saving_vs_knn_grid_pct, ".1f")
            return ci_cell(r.saving_vs_knn_pct, getattr(r, "saving_lower", None), getattr(r, "saving_upper", None))

        ref_cost = {t: num(getattr(by[(t, ref)], "cost", None), ".3f") if (t, ref) in by else DASH for t in targets}
        super().__init__(["target accuracy", f"{short_name(ref)} cost", *map(short_name, shown)],
                         [[f"{t:.2f}", ref_cost[t], *(cell(t, m) for m in shown)] for t in targets], why)


class RouterComplexity(Table):
    """CR²'s teacher and gate and every router head: parameters, FLOPs per decision (encoder excluded) and fit time
    (v_router_complexity)."""

    def __init__(self, cx: pd.DataFrame):
        cx = cx.drop_duplicates("kind")
        cx = cx[cx["kind"].isin(["gate", "teacher"]) | cx["kind"].str.startswith("router:")]
        fit = cx["fit_seconds"] if "fit_seconds" in cx.columns else pd.Series([None] * len(cx), index=cx.index)
        super().__init__(["kind", "params", "FLOPs", "fit s"],
                         [[str(k), count_cell(p), count_cell(f), num(s, ".1f")]
                          for k, p, f, s in zip(cx["kind"], cx["params"], cx["flops"], fit)])


class CR2OperatingPoints(Table):
    """CR² at one α over λ (warehouse/queries/cr2_operating_points_at_alpha.sql): the risk α bounds (teacher
    disagreement for the paper's rule) over the solvable test rows and over all of them, the realised risks on real
    labels (oracle disagreement, avoidable error, over all rows), the device's accuracy on what it accepted, local
    rate, accuracy and cost; at `lams` only where given."""

    def __init__(self, ops: pd.DataFrame, lams: Iterable[float] | None = None):
        d = ops if lams is None else ops[on_lams(ops["lam"], tuple(lams))]
        super().__init__(["λ", "teacher risk", "…all rows", "oracle", "avoidable", "local acc.", "local", "accuracy",
                          "cost"],
                         [[lam_cell(r.lam), num(r.risk, ".4f"), num(r.risk_all, ".4f"), num(r.oracle_risk_all, ".4f"),
                           num(r.avoidable_risk_all, ".4f"),
                           num(r.local_accuracy, ".1f", 100, "%", missing_text="— (none accepted)"),
                           num(r.local_rate, ".1f", 100, "%"), num(r.accuracy, ".1f", 100, "%"), num(r.cost, ".3f")]
                          for r in d.itertuples()], "no CR² operating point at this α")


class RoutersAtLam(Table):
    """Every evaluated method at one λ (warehouse/queries/methods_at_lam.sql; CR² and its variants at α), cheapest
    first."""

    def __init__(self, compare: pd.DataFrame):
        super().__init__(["router", "λ", "α", "accuracy", "norm. cost", "local rate", "risk"],
                         [[short_name(r.method), lam_cell(r.lam), lam_cell(r.alpha), num(r.accuracy, ".4f"),
                           num(r.cost, ".4f"), num(r.local_rate, ".4f"), num(r.risk, ".4f")]
                          for r in compare.itertuples()], "no method evaluated at this λ")


class DriftTest(Table):
    """The drift test per state feature (cr2.deploy.drift): KS statistic, Holm-adjusted p, whether it drifted."""

    def __init__(self, drift: pd.DataFrame):
        super().__init__(["feature", "KS D", "p (Holm)", "drift"],
                         [[str(r.feature), num(r.statistic, ".4f"), num(r.p_adjusted, ".3g"), str(bool(r.drifted))]
                          for r in drift.itertuples()], "no state feature tested")


class Recalibration(Table):
    """CR² before (old thresholds) and after (re-calibrated) on the new states at α, per λ
    (warehouse/queries/recalibration_before_after.sql); at `lams` only where given."""

    def __init__(self, both: pd.DataFrame, lams: Iterable[float] | None = None):
        d = both if lams is None else both[on_lams(both["lam"], tuple(lams))]
        pct = lambda v: num(v, ".1f", 100, "%")  # noqa: E731
        super().__init__(["λ", "risk before", "risk after", "local before", "local after", "acc before", "acc after",
                          "cost before", "cost after"],
                         [[lam_cell(r.lam), num(r.risk_before, ".4f"), num(r.risk_after, ".4f"), pct(r.local_rate_before),
                           pct(r.local_rate_after), pct(r.accuracy_before), pct(r.accuracy_after),
                           num(r.cost_before, ".3f"), num(r.cost_after, ".3f")] for r in d.itertuples()],
                         "no operating point on both sides")


class Baselines(Table):
    """Each fitted baseline (`routers`: name → its fit summary: params, flops, fit_seconds): size, fit time and test
    accuracy / cost at λ = 0 and λ = 2 (`points`: warehouse/queries baseline_points rows); '—' where missing."""

    def __init__(self, routers: dict[str, dict], points: pd.DataFrame):
        at = {(r.method, float(r.lam)): r for r in points.itertuples()}
        pct = lambda v: num(v, ".1f", 100, "%", EM_DASH)  # noqa: E731

        def cells(name: str, b: dict) -> list[str]:
            a0, a2 = at.get((name, 0.0)), at.get((name, 2.0))
            return [short_name(name), count_cell(b.get("params"), EM_DASH), count_cell(b.get("flops"), EM_DASH),
                    num(b.get("fit_seconds"), ".1f", missing_text=EM_DASH),
                    pct(a0.accuracy) if a0 else "— (not evaluated at λ = 0)",
                    f"{pct(a2.accuracy)} / {num(a2.cost, '.3f', missing_text=EM_DASH)}" if a2
                    else "— (not evaluated at λ = 2)"]

        super().__init__(["router", "params", "FLOPs/query", "fit s", "acc λ=0", "acc / cost λ=2"],
                         [cells(name, b) for name, b in routers.items()], "no baseline fitted")


class RouteUtilities(Table):
    """One routing decision's utilities û = p − λ·c per model (`models`: cr2.deploy's route output, one dict a model),
    the chosen model marked ◀."""

    def __init__(self, models: list[dict], chosen: str):
        super().__init__(["model", "p(correct)", "norm. cost", "latency s", "energy J", "utility"],
                         [[m["model_id"] + (" ◀" if m["model_id"] == chosen else ""), num(m["p_correct"], ".3f"),
                           num(m["cost_norm"], ".3f"), num(m["latency_s"], ".3f"), num(m["energy_j"], ".2f"),
                           num(m["utility"], "+.3f")] for m in models], "no model to route to")


class LabelSources(Table):
    """`cr2 labels list`: one row per label source (rows, models, queries, accuracy, backend); '—' where missing."""

    def __init__(self, df: pd.DataFrame):
        super().__init__(["source", "rows", "models", "queries", "accuracy", "backend"],
                         [[str(r.source), count_cell(r.rows, EM_DASH), str(r.models), count_cell(r.queries, EM_DASH),
                           num(r.accuracy, ".1f", 100, "%", EM_DASH), str(r.backend)] for r in df.itertuples()],
                         "no label source stored")


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
