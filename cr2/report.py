"""The evaluation report: the paper's §VII figures and tables from tidy result frames, as one HTML page.

Pure: pandas frames (the rows of the warehouse views, one per figure/table) in, PNG bytes and an HTML
string out. Figures are embedded as base64 PNG, so the page is self-contained and opens offline. Every
figure and table names the SQL view it was drawn from.
"""
from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from cr2.config import HEADLINE_LAMS

@dataclass(frozen=True)
class MethodStyles:
    """What the report needs to know of each evaluated method, from the run's `methods` rows (the router
    catalogue): display name, colour, which methods are learned baselines and which is the reference."""

    rows: dict = field(default_factory=dict)  # method → {display, colour, kind, learned, reference, sort_order}

    @classmethod
    def from_frame(cls, methods: pd.DataFrame) -> "MethodStyles":
        return cls({r["method"]: r for r in methods.to_dict("records")}) if len(methods) else cls()

    def label(self, method: str) -> str:
        return self.rows.get(method, {}).get("display", method)

    def color(self, method: str):
        return self.rows.get(method, {}).get("colour")

    @property
    def learned(self) -> list[str]:
        """The learned baselines, in catalogue order."""
        rows = [r for r in self.rows.values() if r["kind"] == "baseline" and r["learned"]]
        return [r["method"] for r in sorted(rows, key=lambda r: (r["sort_order"], r["method"]))]

    @property
    def reference(self) -> str:
        return next((m for m, r in self.rows.items() if r["reference"]), "knn")


@dataclass
class Figure:
    """One figure of the report: a title, the view it comes from, a caption and the PNG."""

    key: str
    title: str
    view: str
    caption: str
    png: bytes


@dataclass
class TableBlock:
    """One table of the report: the frame shown, the view it comes from and a caption."""

    key: str
    title: str
    view: str
    caption: str
    frame: pd.DataFrame


@dataclass
class ReportInputs:
    """The frames of every view the report shows, for one evaluation run, and the run's header facts."""

    header: dict
    pareto: pd.DataFrame
    fixed_accuracy: pd.DataFrame
    calibration_rules: pd.DataFrame
    risk_vs_alpha: pd.DataFrame
    local_rate: pd.DataFrame
    variants: pd.DataFrame
    gate_errors: pd.DataFrame
    benchmark_at_cost: pd.DataFrame
    complexity: pd.DataFrame
    default_alpha: float
    ablation: pd.DataFrame = field(default_factory=pd.DataFrame)
    methods: pd.DataFrame = field(default_factory=pd.DataFrame)
    extra_tables: list[TableBlock] = field(default_factory=list)
    guarantees: pd.DataFrame = field(default_factory=pd.DataFrame)  # v_guarantees rows of the newest validity run
    guarantee_price: pd.DataFrame = field(default_factory=pd.DataFrame)  # v_guarantee_price rows of that run
    realised_risk: pd.DataFrame = field(default_factory=pd.DataFrame)  # v_realised_risk rows of the run (issue 26)
    mean_saving: pd.DataFrame = field(default_factory=pd.DataFrame)  # v_mean_saving_ci rows of the run (issue 25)
    operating_points_ci: pd.DataFrame = field(default_factory=pd.DataFrame)  # v_operating_points_ci, 'all', the run


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def _axes(title: str, xlabel: str, ylabel: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return fig, ax


def _frontier(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["on_frontier"]].sort_values("cost")


def pareto_figure(pareto: pd.DataFrame, zoom: tuple[float, float] | None, simulated: bool, st: MethodStyles,
                  labels_kind: str | None = None) -> bytes:
    """Accuracy vs normalised cost: each learned method's frontier, CR²'s envelope over α, Always-m points."""
    kind = labels_kind or ("SIMULATED" if simulated else None)
    title = "Accuracy–cost Pareto" + (" (zoomed)" if zoom else " (full range)") + (f" — {kind} labels" if kind else "")
    fig, ax = _axes(title, "normalised deployment cost c̄ (c_ref = 1)", "routing accuracy")
    for method in ("cr2", *st.learned):
        f = _frontier(pareto[pareto["method"] == method])
        if len(f):  # CR² drawn on top
            ax.plot(f["cost"], f["accuracy"], marker="o", ms=3, lw=2.2 if method == "cr2" else 1.2,
                    color=st.color(method), label=st.label(method), zorder=4 if method == "cr2" else 2)
    always = pareto[pareto["method"].str.startswith("always-")].groupby("method")[["cost", "accuracy"]].mean()
    for name, row in always.iterrows():
        ax.scatter(row["cost"], row["accuracy"], marker="s", color="black", s=22, zorder=5)
        ax.annotate("Always-" + name[len("always-"):],
                    (row["cost"], row["accuracy"]), textcoords="offset points", xytext=(4, -10), fontsize=8)
    if zoom:
        ax.set_xlim(*zoom)
        inside = pareto[(pareto["cost"] >= zoom[0]) & (pareto["cost"] <= zoom[1])]
        if len(inside):
            ax.set_ylim(inside["accuracy"].min() - 0.01, inside["accuracy"].max() + 0.01)
    ax.legend(fontsize=8, loc="lower right")
    return _png(fig)


def informative_targets(fixed: pd.DataFrame, pareto: pd.DataFrame) -> pd.DataFrame:
    """Targets at or above every compared method's accuracy at its own cheapest point (below it, a method's
    cost is just its minimum cost and the comparison says nothing)."""
    methods = set(fixed["method"])
    pts = pareto[pareto["method"].isin(methods)]
    floor = pts.sort_values(["cost", "accuracy"], ascending=[True, False]).groupby("method").first()["accuracy"].max()
    return fixed[fixed["target"] >= np.floor(floor * 100) / 100 - 1e-9]


def fixed_accuracy_figure(fixed: pd.DataFrame, st: MethodStyles) -> bytes:
    """Dumbbell: at each target accuracy both reach, CR²'s and the reference's minimum cost, labelled with the saving."""
    ref = st.label(st.reference)
    fig, ax = _axes(f"Fixed-accuracy cost: CR² vs {ref}", "normalised cost at the target accuracy", "target accuracy")
    d = fixed[fixed["method"] == "cr2"].sort_values("target")
    for r in d.itertuples():
        ax.plot([r.cost, r.knn_cost], [r.target, r.target], color="#bbbbbb", lw=2, zorder=1)
        ax.annotate(f"{r.saving_vs_knn_pct:+.1f}%", (max(r.cost, r.knn_cost), r.target), textcoords="offset points",
                    xytext=(4, -3), fontsize=7)
    ax.scatter(d["cost"], d["target"], color=st.color("cr2"), label=st.label("cr2"), zorder=2, s=18)
    ax.scatter(d["knn_cost"], d["target"], color=st.color(st.reference), label=ref, zorder=2, s=18)
    ax.legend(fontsize=8)
    return _png(fig)


def saving_interval_figure(fixed: pd.DataFrame, st: MethodStyles) -> bytes:
    """Each learned router's saving vs the reference at every target, with its 95 % paired bootstrap interval."""
    ref = st.label(st.reference)
    fig, ax = _axes(f"Saving vs {ref} at fixed accuracy, 95 % bootstrap intervals", "target accuracy",
                    f"cost saving vs {ref}, %")
    d = fixed[fixed["method"] != st.reference]
    methods = [m for m in dict.fromkeys(d["method"]) if m in set(d["method"])]
    width = 0.008 / max(len(methods), 1)
    for i, m in enumerate(methods):
        r = d[d["method"] == m].sort_values("target")
        x = r["target"].to_numpy() + (i - (len(methods) - 1) / 2) * width
        lo = (r["saving_vs_knn_pct"] - r["saving_lower"]).clip(lower=0).fillna(0).to_numpy()
        hi = (r["saving_upper"] - r["saving_vs_knn_pct"]).clip(lower=0).fillna(0).to_numpy()
        ax.errorbar(x, r["saving_vs_knn_pct"], yerr=[lo, hi], fmt="o", ms=3, lw=0.8, capsize=1.5, color=st.color(m),
                    label=st.label(m))
    ax.axhline(0.0, color="#555555", lw=0.8, ls="--")
    if methods:
        ax.legend(fontsize=7)
    return _png(fig)


def ci_text(estimate: float, lower: float, upper: float, fmt: str = "+.1f") -> str:
    """'estimate [lower, upper]' for a table cell ('–' without an estimate, the estimate alone without bounds)."""
    if estimate is None or pd.isna(estimate):
        return "–"
    if lower is None or upper is None or pd.isna(lower) or pd.isna(upper):
        return format(float(estimate), fmt)
    return f"{format(float(estimate), fmt)} [{format(float(lower), fmt)}, {format(float(upper), fmt)}]"


def mean_saving_table(ms: pd.DataFrame, st: MethodStyles) -> pd.DataFrame:
    """Mean saving vs the reference over the targets both reach, its interval and the verdict, per learned router."""
    if ms.empty:
        return pd.DataFrame()
    return pd.DataFrame({"router": [st.label(m) for m in ms["method"]], "targets both reach": ms["n_targets"],
                         "mean saving % [95 % CI]": [ci_text(r.mean_saving_vs_knn_pct, r.saving_lower, r.saving_upper)
                                                     for r in ms.itertuples()],
                         "verdict": ms["verdict"].fillna("–")}).reset_index(drop=True)


def operating_point_ci_table(ops: pd.DataFrame, alpha: float, lams: tuple[float, ...], st: MethodStyles) -> pd.DataFrame:
    """CR² (at α) and every learned baseline at a few λ: accuracy, cost, local rate, risk with their intervals."""
    if ops.empty or "accuracy_lower" not in ops.columns:
        return pd.DataFrame()
    keep = ops["lam"].isin(lams) & (((ops["method"] == "cr2") & np.isclose(ops["alpha"].fillna(-1), alpha))
                                    | ops["method"].isin([st.reference, *[m for m in st.learned if m != "cr2"]]))
    d = ops[keep].sort_values(["lam", "method"])
    out = pd.DataFrame({"λ": d["lam"].map(lambda v: f"{v:g}"), "router": [st.label(m) for m in d["method"]]})
    for m in ("accuracy", "cost", "local_rate", "risk"):
        out[f"{m} [95 % CI]"] = [ci_text(e, lo, hi, ".3f") for e, lo, hi in zip(d[m], d[f"{m}_lower"], d[f"{m}_upper"])]
    return out.reset_index(drop=True)


def curves_figure(df: pd.DataFrame, methods: list[str], title: str, st: MethodStyles, x: str = "cost", y: str = "accuracy",
                  xlabel: str = "normalised deployment cost c̄", ylabel: str = "routing accuracy") -> bytes:
    """One line per method over λ (sorted by x)."""
    fig, ax = _axes(title, xlabel, ylabel)
    if x == "lam":
        df = df[df["lam"] > 0]  # log axis: λ = 0 (the accuracy-only end) has no place on it
    for method in methods:
        d = df[df["method"] == method].sort_values(x)
        if len(d):
            ax.plot(d[x], d[y], marker="o", ms=3, color=st.color(method), label=st.label(method))
    if x == "lam":
        ax.set_xscale("log")
    ax.legend(fontsize=8)
    return _png(fig)


def risk_figure(risk: pd.DataFrame) -> bytes:
    """CR² test false-acceptance risk vs λ for each α, with the Monte-Carlo 5–95 % band and the y = α lines."""
    import matplotlib.pyplot as plt

    fig, ax = _axes("Teacher-disagreement risk under CRC (the paper's risk)", "cost weight λ",
                    "false-acceptance risk (teacher disagreement)")
    risk = risk[risk["lam"] > 0]  # log axis; at λ = 0 CR² defers everything (risk 0)
    colors = plt.cm.viridis(np.linspace(0, 0.9, risk["alpha"].nunique()))
    for c, (alpha, d) in zip(colors, risk.sort_values("lam").groupby("alpha")):
        ax.plot(d["lam"], d["risk"], marker="o", ms=3, color=c, label=f"α = {alpha:g} (test split)")
        if d["risk_q05"].notna().all():
            ax.fill_between(d["lam"], d["risk_q05"], d["risk_q95"], color=c, alpha=0.15)
            ax.plot(d["lam"], d["risk_mean"], ls=":", color=c, lw=1)
        ax.axhline(alpha, color=c, ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.legend(fontsize=7, title="dashed: y = α; band: 5–95 % over re-splits", title_fontsize=7)
    return _png(fig)


REALISED = (("teacher_risk", "teacher disagreement (what crc's α bounds)", "-"),
            ("oracle_risk", "oracle disagreement on real labels", "--"),
            ("avoidable_risk", "avoidable error (device wrong, an edge right)", ":"))


def realised_risk_figure(rr: pd.DataFrame, alpha: float, st: "MethodStyles") -> bytes:
    """Issue 26: at α, each risk vs λ under the paper's rule (cr2) and under the rules that control the realised
    risks (crc-oracle: its oracle disagreement; crc-avoidable: its avoidable error), with the y = α line."""
    fig, ax = _axes(f"What α = {alpha:g} bounds, and the risks users feel", "cost weight λ", "risk (all test rows)")
    rr = rr[(rr["lam"] > 0) & np.isclose(rr["alpha"].fillna(-1), alpha)].sort_values("lam")
    base = rr[rr["method"] == "cr2"]
    for col, label, ls in REALISED:
        if len(base) and base[col].notna().any():
            ax.plot(base["lam"], base[col], ls=ls, marker="o", ms=3, color=st.color("cr2"), label=f"CR² ({base['rule'].iloc[0]}): {label}")
    for method, col in (("cr2-crc-oracle", "oracle_risk"), ("cr2-crc-avoidable", "avoidable_risk")):
        d = rr[rr["method"] == method]
        if len(d):
            ls = dict((c, s) for c, _, s in REALISED)[col]
            ax.plot(d["lam"], d[col], ls=ls, marker="s", ms=3, color=st.color(method), label=f"{st.label(method)}: its own risk")
    ax.axhline(alpha, color="k", ls="--", lw=0.8, label="y = α")
    ax.set_xscale("log")
    ax.legend(fontsize=6)
    return _png(fig)


def realised_risk_table(rr: pd.DataFrame, alpha: float, lams=HEADLINE_LAMS) -> pd.DataFrame:
    """Issue 26: per rule and λ at α, the teacher-referenced and realised risks, local accuracy, local rate and cost."""
    if rr.empty:
        return pd.DataFrame()
    d = rr[np.isclose(rr["alpha"].fillna(-1), alpha) & rr["lam"].apply(lambda v: any(abs(v - x) < 1e-9 for x in lams))]
    d = d.sort_values(["lam", "rule"])
    f = lambda v, k=4: "–" if pd.isna(v) else f"{v:.{k}f}"  # noqa: E731
    return pd.DataFrame({"rule": d["rule"], "λ": d["lam"].map(lambda v: f"{v:g}"), "teacher disagreement": d["teacher_risk"].map(f),
                         "oracle disagreement (real labels)": d["oracle_risk"].map(f),
                         "avoidable error": d["avoidable_risk"].map(f), "local accuracy": d["local_accuracy"].map(f),
                         "local rate": d["local_rate"].map(f), "cost": d["cost"].map(f),
                         "accuracy": d["accuracy"].map(f)}).reset_index(drop=True)


def gate_error_figure(errors: pd.DataFrame, alpha: float) -> bytes:
    """False accepts and false defers of the gate vs λ at the default α."""
    fig, ax = _axes(f"Gate-error decomposition (α = {alpha:g})", "cost weight λ", "share of test queries")
    d = errors[np.isclose(errors["alpha"], alpha) & (errors["lam"] > 0)].sort_values("lam")  # log axis
    ax.plot(d["lam"], d["false_accept"], marker="o", ms=3, color="#c0392b", label="false accepts (risk)")
    ax.plot(d["lam"], d["false_defer"], marker="o", ms=3, color="#2471a3", label="false defers")
    ax.set_xscale("log")
    ax.legend(fontsize=8)
    return _png(fig)


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
            row[b.upper() if b != "all" else "Avg"] = f"{acc[b]:.3f}" if reach and b in acc else "–"
        rows.append(row)
    return pd.DataFrame(rows)


def risk_check_table(risk: pd.DataFrame) -> pd.DataFrame:
    """Per α: the largest test-split risk over the λ grid against α + 3 binomial standard errors, and the
    largest Monte-Carlo mean over re-splits (the quantity the CRC guarantee bounds by α)."""
    from cr2.metrics import risk_tolerance

    rows = []
    for alpha, d in risk.groupby("alpha"):
        n = int(d["n_risk"].min())
        tol = risk_tolerance(alpha, n)
        worst = float(d["risk"].max())
        rows.append({"α": f"{alpha:g}", "max test risk over λ": f"{worst:.4f}", "tolerance α + 3·SE": f"{alpha + tol:.4f}",
                     "within": "yes" if worst <= alpha + tol else "NO",
                     "max MC mean over λ": f"{d['risk_mean'].max():.4f}" if d["risk_mean"].notna().any() else "–",
                     "N test": f"{n:,}"})
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
            rows.append({"group": group, "configuration": label, "accuracy": f"{r['accuracy']:.4f}",
                         "local rate": f"{100 * r['local_rate']:.1f}%", "cost": f"{r['cost']:.3f}", "λ": f"{r['lam']:g}"})
    return pd.DataFrame(rows)


def _pm(value: float, se: float | None, digits: int = 4) -> str:
    """value ± Monte-Carlo SE as text."""
    if se is None or (isinstance(se, float) and np.isnan(se)):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} ± {se:.{digits}f}"


def guarantee_validity_table(v: pd.DataFrame) -> pd.DataFrame:
    """One row per promise (rule, α or target, group): the worst cell over λ against its bound, ± MC SE."""
    v = v[v["bound"].notna()].copy()
    if v.empty:
        return pd.DataFrame()
    from cr2.crc import RULE_CATALOGUE, rule_risk

    promise = {"crc_mean_risk": "E[{r}] ≤ α, each λ", "ltt_any_violation": "P(any λ: {r} > α) ≤ δ",
               "mondrian_mean_risk": "E[{r} | group] ≤ α, each λ", "target_miss": "P(miss target) ≤ δ"}

    def risk_words(rule: str) -> str:  # issue 26: name the risk each rule controls
        base = rule.removeprefix("mondrian-")
        return rule_risk(base).display if base in RULE_CATALOGUE and rule_risk(base) else "risk"

    v["promise"] = [promise.get(c, c).format(r=risk_words(r)) for c, r in zip(v["check_name"], v["rule"])]
    v["at"] = [f"α={a:g}" if pd.notna(a) else f"target {t:g}" for a, t in zip(v["alpha"], v["target"])]
    out = pd.DataFrame({
        "rule": v["rule"], "promise": v["promise"], "at": v["at"], "group": v["group"].fillna("all"),
        "worst over λ ± SE": [_pm(a, b) for a, b in zip(v["worst_value"], v["se_at_worst"])],
        "bound": v["bound"].map(lambda b: f"{b:g}"), "holds (3 SE)": v["holds"].map({True: "yes", False: "NO"}),
    })
    return out.sort_values(["rule", "group", "at"]).reset_index(drop=True)


def guarantee_price_table(p: pd.DataFrame) -> pd.DataFrame:
    """Each guarantee's mean test local rate, cost and accuracy beside plain CRC at the same operating point."""
    if p.empty:
        return pd.DataFrame()
    p = p.sort_values(["rule", "lam", "target"], na_position="first")
    return pd.DataFrame({
        "rule": p["rule"], "λ": p["lam"].map(lambda x: "" if pd.isna(x) else f"{x:g}"),
        "α / target": [f"α={a:g}" if pd.notna(a) else f"target {t:g}" for a, t in zip(p["alpha"], p["target"])],
        "local rate ± SE": [_pm(a, b, 3) for a, b in zip(p["local_rate"], p["local_rate_se"])],
        "mean cost ± SE": [_pm(a, b, 4) for a, b in zip(p["mean_cost"], p["mean_cost_se"])],
        "accuracy ± SE": [_pm(a, b, 4) for a, b in zip(p["accuracy"], p["accuracy_se"])],
        "Δ local vs CRC": p["local_rate_vs_crc"].map(lambda x: "" if pd.isna(x) else f"{x:+.3f}"),
        "Δ cost vs CRC": p["mean_cost_vs_crc"].map(lambda x: "" if pd.isna(x) else f"{x:+.4f}"),
    }).reset_index(drop=True)


def guarantee_tables(inp: ReportInputs) -> list[TableBlock]:
    """The issue-21 tables (docs/guarantees.md), when a validity run (`cr2 guarantees`) is in the warehouse."""
    if inp.guarantees.empty:
        return []
    head = inp.guarantees.iloc[0]
    where = f"{head['source']}, {int(head['n_resplits'])} re-splits, N_calib = {int(head['n_calib'])}"
    out = [TableBlock("guarantees_validity", "Does each guarantee hold? (random calibration/test re-splits)", "v_guarantees",
                      f"{where}. Worst cell over λ of each promise, with its Monte-Carlo standard error; LTT and target "
                      "shares are against the pool's exact risk. docs/guarantees.md says what each rule promises.",
                      guarantee_validity_table(inp.guarantees))]
    if not inp.guarantee_price.empty:
        out.append(TableBlock("guarantees_price", "What each guarantee costs beside plain CRC", "v_guarantee_price",
                              f"{where}. Mean over re-splits of the test local rate, cost and accuracy; target rows compare "
                              "the certified choice with the CRC point an oracle would pick on the test set itself.",
                              guarantee_price_table(inp.guarantee_price)))
    return out


def _img(png: bytes) -> str:
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def build_figures(inp: ReportInputs) -> list[Figure]:
    """Every figure of the report from its view's rows."""
    sim = bool(inp.header.get("labels_simulated"))
    st = MethodStyles.from_frame(inp.methods)
    kind = "SIMULATED" if sim else ("MEASURED" if str(inp.header.get("labels", "")).startswith("MEASURED") else None)
    a = inp.default_alpha
    at_alpha = lambda df: df[df["alpha"].isna() | np.isclose(df["alpha"].fillna(-1), a)]  # noqa: E731
    lo = inp.pareto["cost"].min()
    figs = [
        Figure("pareto_full", "Accuracy–cost Pareto curves (full range)", "v_pareto",
               "Frontier of each learned router over its λ sweep; CR² pools every α of the grid (its envelope). "
               "Squares: Always-m.", pareto_figure(inp.pareto, None, sim, st, kind)),
        Figure("pareto_zoom", "Accuracy–cost Pareto curves (zoomed operating region)", "v_pareto",
               "The same points in the low-cost operating region.", pareto_figure(inp.pareto, (max(0.0, lo - 0.02), 0.6), sim, st, kind)),
        Figure("fixed_accuracy", "Fixed-accuracy cost comparison", "v_fixed_accuracy",
               "At each target accuracy both reach: the minimum cost of CR² and of KNN (best operating point with "
               "accuracy ≥ target, no interpolation) and CR²'s saving versus KNN, for targets every method must work "
               "for (at or above each one's accuracy at its cheapest point).",
               fixed_accuracy_figure(informative_targets(inp.fixed_accuracy, inp.pareto), st)),
        *([Figure("saving_intervals", "Saving versus KNN with 95 % intervals", "v_fixed_accuracy_ci",
                  "Each learned router's fixed-accuracy saving versus KNN (interpolated frontier) at the informative "
                  "targets, with its 95 % paired bootstrap interval over the test queries (training, calibration and "
                  "split held fixed). An interval that crosses the dashed line is 'no difference detected'.",
                  saving_interval_figure(informative_targets(inp.fixed_accuracy, inp.pareto), st))]
          if "saving_lower" in inp.fixed_accuracy.columns and inp.fixed_accuracy["saving_lower"].notna().any() else []),
        Figure("calibration_rules", "Accuracy–cost curves for threshold-selection rules", "v_calibration_rules",
               f"The same gate with CRC (α = {a:g}), the empirical rule without the +1 correction (α = {a:g}) and a "
               "fixed threshold 0.5.", curves_figure(at_alpha(inp.calibration_rules.rename(columns={"rule": "method"})),
                                                    ["cr2", "cr2-empirical", "cr2-fixed-0.5"], "Threshold-selection rules", st)),
        Figure("risk_control", "Marginal false-acceptance risk (teacher disagreement) under CRC-calibrated thresholds",
               "v_risk_vs_alpha",
               "Test risk on the fixed split per α; band and dotted line: 5–95 % and mean over random "
               "calibration/test re-splits; dashed: y = α. The guarantee is pointwise in λ, not simultaneous. This "
               "risk is agreement with the teacher (a learned selector), not the error rate of local answers: see "
               "the next figure.",
               risk_figure(inp.risk_vs_alpha)),
        *([Figure("realised_risk", "Teacher-referenced vs realised risks", "v_realised_risk",
                  f"At α = {a:g}: CR²'s three risks on the test split — teacher disagreement (what the paper's rule "
                  "bounds), oracle disagreement on the real labels and avoidable errors — and the rules crc-oracle / "
                  "crc-avoidable that bound the latter two on the calibration split's real labels (docs/guarantees.md)."
                  + (" The labels are SIMULATED." if sim else ""),
                  realised_risk_figure(inp.realised_risk, a, st))] if not inp.realised_risk.empty else []),
        Figure("local_selection", "Local-model selection rate", "v_local_rate",
               f"Fraction of test queries answered on the device (CR² at α = {a:g}).",
               curves_figure(at_alpha(inp.local_rate), ["cr2", "full-info", *st.learned], "Local selection rate vs λ", st,
                             x="lam", y="local_rate", xlabel="cost weight λ", ylabel="local rate")),
        Figure("variants", "Deferred-branch variants", "v_variants",
               f"CR² edge-only (default), inclusive and fallback deferred branches at α = {a:g}, against the "
               "full-information reference.", curves_figure(at_alpha(inp.variants),
                                                            ["cr2", "cr2-inclusive", "cr2-fallback", "full-info"],
                                                            "Deferred-branch variants", st)),
        Figure("gate_errors", "Gate-error decomposition", "v_gate_errors",
               "False accepts (gate accepts while an edge model is teacher-preferred) and false defers.",
               gate_error_figure(inp.gate_errors, a)),
    ]
    return figs


def build_tables(inp: ReportInputs) -> list[TableBlock]:
    st = MethodStyles.from_frame(inp.methods)
    fa = informative_targets(inp.fixed_accuracy, inp.pareto)
    fa = fa.assign(cell=[ci_text(r.saving_vs_knn_pct, getattr(r, "saving_lower", None), getattr(r, "saving_upper", None))
                         for r in fa.itertuples()])
    fixed = fa[fa["method"] != st.reference].pivot_table(index="target", columns="method", values="cell",
                                                         aggfunc="first")
    fixed = fixed.fillna("–").rename(columns=st.label)
    fixed.insert(0, f"{st.label(st.reference)} cost", fa[fa["method"] == st.reference].set_index("target")["cost"].round(3))
    fixed = fixed.reset_index().rename(columns={"target": "target accuracy"})
    fixed.columns.name = None
    cx = inp.complexity.drop_duplicates("kind")[["kind", "params", "flops", "fit_seconds"]]
    cx = cx[cx["kind"].isin(["gate", "teacher"]) | cx["kind"].str.startswith("router:")]
    return [
        TableBlock("per_benchmark_by_cost", "Per-benchmark accuracy at representative cost targets", "v_benchmark_at_cost",
                   "Nearest reachable operating point to each pooled cost target; '–': unreachable. Avg is pooled.",
                   benchmark_table(inp.benchmark_at_cost, st)),
        TableBlock("fixed_accuracy_savings", "Cost saving versus KNN at matched accuracy (%) [95 % CI]",
                   "v_fixed_accuracy_ci",
                   "Positive: cheaper than KNN at the same target accuracy (each method's interpolated monotone "
                   "frontier). Brackets: 95 % paired bootstrap interval over the test queries; a saving is a win "
                   "only where the interval excludes 0.", fixed),
        *([TableBlock("mean_saving", "Mean saving versus KNN over the targets both reach (%)", "v_mean_saving_ci",
                      "Mean of the per-target savings over every target the router and KNN reach; 95 % paired "
                      "bootstrap interval; 'cheaper'/'dearer' only where it excludes 0, else 'no difference detected'.",
                      mean_saving_table(inp.mean_saving, st))] if len(inp.mean_saving) else []),
        *([TableBlock("operating_points_ci", "Operating points with 95 % intervals", "v_operating_points_ci",
                      f"CR² at α = {inp.default_alpha:g} and the learned baselines at λ ∈ {{{', '.join(f'{v:g}' for v in HEADLINE_LAMS)}}}, all test "
                      "benchmarks; 95 % paired bootstrap intervals over the test queries.",
                      operating_point_ci_table(inp.operating_points_ci, inp.default_alpha, HEADLINE_LAMS, st))]
          if len(inp.operating_points_ci) else []),
        TableBlock("router_complexity", "Router-head parameters and FLOPs (encoder excluded)", "v_router_complexity",
                   "CR² runs the gate on the device (and the teacher's heads only for deferred queries).",
                   cx.reset_index(drop=True)),
        TableBlock("risk_check", "Risk control on the test split", "v_risk_vs_alpha",
                   "CRC bounds the expected false-acceptance risk by α at each λ; a single test split fluctuates around "
                   "it, so the check allows 3 binomial standard errors.", risk_check_table(inp.risk_vs_alpha)),
        TableBlock("ablation", "Ablation at c̄ = 0.45", "v_ablation",
                   "Each configuration's operating point nearest the cost anchor; local rate = share accepted by the gate.",
                   ablation_table(inp.ablation, inp.default_alpha)),
        *([TableBlock("realised_risk", "What α bounds and what users feel", "v_realised_risk",
                      f"CR² at α = {inp.default_alpha:g} under each rule: teacher disagreement (the paper's risk), oracle "
                      "disagreement on the real labels and avoidable error, over all test rows; local accuracy, local "
                      "rate, cost and accuracy over the solvable rows.",
                      realised_risk_table(inp.realised_risk, inp.default_alpha))] if not inp.realised_risk.empty else []),
        *guarantee_tables(inp),
        *inp.extra_tables,
    ]


def render_html(inp: ReportInputs, figures: list[Figure], tables: list[TableBlock]) -> str:
    """The self-contained report page."""
    h = inp.header
    esc = html.escape
    banner = ""
    if h.get("labels_simulated"):
        banner = ('<div class="sim"><b>SIMULATED LABELS.</b> Every number on this page is computed on correctness '
                  f"labels from the simulator <code>{esc(str(h['label source']))}</code> (docs/labels.md), not on measured "
                  "model outputs. They describe the simulator's assumptions as much as the routers; do not read them "
                  "as a reproduction of the paper.</div>")
    elif str(h.get("labels", "")).startswith("MEASURED"):
        banner = ('<div class="measured"><b>MEASURED LABELS.</b> Every number on this page is computed on per-query '
                  f"correctness measured from real model outputs: {esc(str(h['labels']))}"
                  + (f" ({esc(str(h['label origin']))})" if h.get("label origin") else "") + ".</div>")
    facts = "".join(f"<tr><th>{esc(k)}</th><td>{esc(str(v))}</td></tr>" for k, v in h.items() if k != "labels_simulated")
    # sql-text: shown to the user, never run (the page tells readers which `cr2 sql` reproduces a table)
    parts = [f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>cr2 report</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}}
.sim{{background:#fdecea;border:2px solid #c0392b;padding:.8em 1em;margin:1em 0;font-size:1.05em}}
.measured{{background:#eaf4fd;border:2px solid #2c6fad;padding:.8em 1em;margin:1em 0;font-size:1.05em}}
table{{border-collapse:collapse;margin:.5em 0 1.5em}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
th{{background:#f4f4f4}}figure{{margin:1.5em 0}}img{{max-width:100%}}figcaption,.cap{{color:#555;font-size:.9em}}
code{{background:#f4f4f4;padding:0 3px}}</style></head><body>
<h1>CR² evaluation report</h1>{banner}<table>{facts}</table>
<p>Every figure and table names the warehouse view it was drawn from: run
<code>cr2 sql "SELECT * FROM &lt;view&gt; WHERE run_id = '{esc(str(h.get('run_id')))}'"</code> to get its numbers.</p>"""]
    parts.append("<h2>Figures</h2>")
    for f in figures:
        parts.append(f'<figure id="{f.key}"><h3>{esc(f.title)}</h3>{_img(f.png)}<figcaption>{esc(f.caption)} '
                     f"View: <code>{f.view}</code>.</figcaption></figure>")
    parts.append("<h2>Tables</h2>")
    for t in tables:
        parts.append(f'<section id="{t.key}"><h3>{esc(t.title)}</h3><p class="cap">{esc(t.caption)} View: '
                     f'<code>{t.view}</code>; also <a href="tables/{t.key}.csv">tables/{t.key}.csv</a> and '
                     f'<a href="tables/{t.key}.tex">tables/{t.key}.tex</a>.</p>'
                     + t.frame.to_html(index=False, border=0, na_rep="–", escape=True) + "</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def to_latex(frame: pd.DataFrame) -> str:
    """A booktabs LaTeX tabular of the frame (values as shown in the report)."""
    cols = list(frame.columns)
    esc = lambda v: str(v).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")  # noqa: E731
    lines = [r"\begin{tabular}{" + "l" * 1 + "r" * (len(cols) - 1) + "}", r"\toprule",
             " & ".join(esc(c) for c in cols) + r" \\", r"\midrule"]
    lines += [" & ".join(esc("–" if pd.isna(v) else v) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the premise map (issue 25, view v_premise)
def premise_grid(df: pd.DataFrame, method: str, reference: str, sign: float = 1.0) -> tuple[pd.DataFrame, ...]:
    """(estimate, lower, upper, cost ratio) grids, speed factor × channel (channels near → far), of the mean saving
    of `method` vs `reference` over the targets both reach; sign −1 turns a saving into a loss (bounds swapped)."""
    sel = df[(df["method"] == method) & (df["reference"] == reference) & df["mean_over_targets"]]
    order = sel.groupby("channel")["mean_distance_m"].mean().sort_values().index
    grids = []
    for col in ("saving_pct", "saving_lower_pct", "saving_upper_pct", "cost_ratio_est"):
        g = sel.pivot_table(index="speed_factor", columns="channel", values=col).reindex(columns=order)
        grids.append(g * (sign if col != "cost_ratio_est" else 1.0))
    est, lo, hi, ratio = grids
    if sign < 0:
        lo, hi = hi, lo
    return est, lo, hi, ratio


def premise_heatmap(df: pd.DataFrame, method: str, reference: str, title: str, sign: float = 1.0,
                    cbar: str = "mean saving over targets, %") -> bytes:
    """A speed × channel heatmap of a paired difference with its 95 % interval; '*' where it excludes 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    est, lo, hi, ratio = premise_grid(df, method, reference, sign)
    fig, ax = plt.subplots(figsize=(1.9 * max(3, est.shape[1]) + 1.5, 0.85 * max(3, est.shape[0]) + 1.5))
    vals = est.to_numpy(dtype=float)
    # colours saturate at ±50 % so that one extreme cell does not wash out the rest (the numbers are exact)
    vmax = min(50.0, float(np.nanmax(np.abs(vals)))) if vals.size and np.isfinite(vals).any() else 1.0
    vmax = max(vmax, 1.0)
    # blue = good for CR² (a saving; for a loss, sign < 0, a negative loss), red = bad
    im = ax.imshow(est.to_numpy(dtype=float), cmap="RdBu" if sign > 0 else "RdBu_r", vmin=-vmax, vmax=vmax,
                   aspect="auto", origin="lower")
    for i in range(est.shape[0]):
        for j in range(est.shape[1]):
            e, a, b = est.iat[i, j], lo.iat[i, j], hi.iat[i, j]
            if not np.isfinite(e):
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=7)
                continue
            star = "*" if np.isfinite(a) and np.isfinite(b) and (a > 0 or b < 0) else ""
            ax.text(j, i, f"{e + 0.0:+.1f}{star}\n[{a + 0.0:+.1f}, {b + 0.0:+.1f}]\nr={ratio.iat[i, j]:.2f}", ha="center",
                    va="center", fontsize=7, color="white" if abs(e) > 0.6 * vmax else "black")
    ax.set_xticks(range(est.shape[1]), [str(c) for c in est.columns], rotation=20, fontsize=8)
    ax.set_yticks(range(est.shape[0]), [f"×{v:g}" for v in est.index], fontsize=8)
    ax.set_xlabel("channel (near → far)")
    ax.set_ylabel("device speed factor (F and W × f)")
    ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, label=cbar)
    return _png(fig)


def premise_figures(df: pd.DataFrame) -> list[Figure]:
    """The premise map's two heatmaps from v_premise rows (one study)."""
    sim = bool(df["labels_simulated"].any()) if len(df) else False
    tag = " (SIMULATED labels)" if sim else ""
    return [
        Figure("premise_saving_vs_knn", f"CR² (gate retrained on the cell) vs KNN{tag}", "v_premise",
               "Mean fixed-accuracy saving of CR² against KNN over every target both reach, %, positive: CR² cheaper; "
               "[95 % paired-bootstrap interval over test queries]; * where it excludes 0; r = E[ĉ_device] / "
               "E[min edge ĉ] in the cell.", premise_heatmap(df, "cr2-retrain", "knn", "CR² saving vs KNN" + tag)),
        Figure("premise_recal_loss", f"What re-calibration alone loses against retraining{tag}", "v_premise",
               "Mean extra cost of CR² with the base gate re-calibrated on the cell (no retraining) over CR² with the "
               "gate re-distilled on the cell's costs, %, positive: re-calibration only is dearer; [95 % interval]; "
               "* where it excludes 0.",
               premise_heatmap(df, "cr2-recal", "cr2-retrain", "loss of re-calibration only vs retraining" + tag,
                               sign=-1.0, cbar="mean extra cost over targets, %")),
    ]


def premise_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per cell: cost ratio, CR²'s savings vs KNN and vs the best single model (mean over targets) with intervals."""
    if df.empty:
        return df
    sel = df[df["mean_over_targets"]]
    fmt = lambda r: f"{r.saving_pct:+.1f} [{r.saving_lower_pct:+.1f}, {r.saving_upper_pct:+.1f}] {r.verdict}"  # noqa: E731
    out = sel.drop_duplicates(["speed_factor", "channel"])[["speed_factor", "channel", "mean_distance_m",
                                                             "cost_ratio_est"]].set_index(["speed_factor", "channel"])
    for (method, reference), col in {("cr2-retrain", "knn"): "CR² retrained vs KNN",
                                     ("cr2-recal", "knn"): "CR² re-calibrated vs KNN",
                                     ("cr2-retrain", "best-single"): "CR² retrained vs best single",
                                     ("cr2-recal", "cr2-retrain"): "re-calibrated vs retrained"}.items():
        part = sel[(sel["method"] == method) & (sel["reference"] == reference)].set_index(["speed_factor", "channel"])
        out[col] = part.apply(fmt, axis=1)
        if reference == "knn" and method == "cr2-retrain":
            out["CR² risk max (α)"] = part["risk_max"].round(4)
    return out.reset_index().sort_values(["speed_factor", "mean_distance_m"]).round({"mean_distance_m": 0,
                                                                                     "cost_ratio_est": 3})


def premise_page(df: pd.DataFrame, study_id: str) -> str:
    """The premise map's self-contained HTML page: banner, the two heatmaps and the per-cell table."""
    esc = html.escape
    sim = bool(df["labels_simulated"].any()) if len(df) else False
    banner = ('<div class="sim"><b>SIMULATED LABELS.</b> Every number on this page is computed on simulated '
              "correctness labels (docs/labels.md), not on measured model outputs.</div>") if sim else ""
    parts = [f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>cr2 premise map</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}
.sim{{background:#fdecea;border:2px solid #c0392b;padding:.8em 1em;margin:1em 0}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 6px;font-size:.85em}}
figcaption{{color:#555;font-size:.9em}}img{{max-width:100%}}</style></head><body>
<h1>When does CR² pay? The premise map</h1>{banner}
<p>Study <code>{esc(study_id)}</code>. Each cell re-prices every (query, state) with the device platform's prefill
throughput and memory bandwidth × the speed factor and states from the named channel distribution. Intervals:
95 % paired bootstrap over test queries (training and calibration held fixed). View: <code>v_premise</code>.</p>"""]
    if len(df):
        for f in premise_figures(df):
            parts.append(f'<figure id="{f.key}"><h3>{esc(f.title)}</h3>{_img(f.png)}<figcaption>{esc(f.caption)} '
                         f"View: <code>{f.view}</code>.</figcaption></figure>")
        parts.append("<h2>Per cell</h2>" + premise_table(df).to_html(index=False, border=0, na_rep="–"))
    parts.append("</body></html>")
    return "\n".join(parts)
