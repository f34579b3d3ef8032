"""The report's figures: tidy frames (rows of the warehouse views) in, PNG bytes out, one function per figure.

`axes` and `png` are the shared matplotlib frame and its PNG encoding; every page's figures are drawn with them.
"""
from __future__ import annotations

import io

import numpy as np
import pandas as pd

from cr2.report.styles import MethodStyles


def png(fig) -> bytes:
    """The figure as PNG bytes (closed afterwards)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def axes(title: str, xlabel: str, ylabel: str):
    """A titled, labelled, gridded matplotlib figure and axes (Agg backend)."""
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
    fig, ax = axes(title, "normalised deployment cost c̄ (c_ref = 1)", "routing accuracy")
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
    return png(fig)




def fixed_accuracy_figure(fixed: pd.DataFrame, st: MethodStyles) -> bytes:
    """Dumbbell: at each target accuracy both reach, CR²'s and the reference's minimum cost, labelled with the saving."""
    ref = st.label(st.reference)
    fig, ax = axes(f"Fixed-accuracy cost: CR² vs {ref}", "normalised cost at the target accuracy", "target accuracy")
    d = fixed[fixed["method"] == "cr2"].sort_values("target")
    for r in d.itertuples():
        ax.plot([r.cost, r.knn_cost], [r.target, r.target], color="#bbbbbb", lw=2, zorder=1)
        ax.annotate(f"{r.saving_vs_knn_pct:+.1f}%", (max(r.cost, r.knn_cost), r.target), textcoords="offset points",
                    xytext=(4, -3), fontsize=7)
    ax.scatter(d["cost"], d["target"], color=st.color("cr2"), label=st.label("cr2"), zorder=2, s=18)
    ax.scatter(d["knn_cost"], d["target"], color=st.color(st.reference), label=ref, zorder=2, s=18)
    ax.legend(fontsize=8)
    return png(fig)


def saving_interval_figure(fixed: pd.DataFrame, st: MethodStyles) -> bytes:
    """Each learned router's saving vs the reference at every target, with its 95 % paired bootstrap interval."""
    ref = st.label(st.reference)
    fig, ax = axes(f"Saving vs {ref} at fixed accuracy, 95 % bootstrap intervals", "target accuracy",
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
    return png(fig)


def curves_figure(df: pd.DataFrame, methods: list[str], title: str, st: MethodStyles, x: str = "cost", y: str = "accuracy",
                  xlabel: str = "normalised deployment cost c̄", ylabel: str = "routing accuracy") -> bytes:
    """One line per method over λ (sorted by x)."""
    fig, ax = axes(title, xlabel, ylabel)
    if x == "lam":
        df = df[df["lam"] > 0]  # log axis: λ = 0 (the accuracy-only end) has no place on it
    for method in methods:
        d = df[df["method"] == method].sort_values(x)
        if len(d):
            ax.plot(d[x], d[y], marker="o", ms=3, color=st.color(method), label=st.label(method))
    if x == "lam":
        ax.set_xscale("log")
    ax.legend(fontsize=8)
    return png(fig)


def risk_figure(risk: pd.DataFrame) -> bytes:
    """CR² test false-acceptance risk vs λ for each α, with the Monte-Carlo 5–95 % band and the y = α lines."""
    import matplotlib.pyplot as plt

    fig, ax = axes("Teacher-disagreement risk under CRC (the paper's risk)", "cost weight λ",
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
    return png(fig)


REALISED = (("teacher_risk", "teacher disagreement (what crc's α bounds)", "-"),
            ("oracle_risk", "oracle disagreement on real labels", "--"),
            ("avoidable_risk", "avoidable error (device wrong, an edge right)", ":"))


def realised_risk_figure(rr: pd.DataFrame, alpha: float, st: "MethodStyles") -> bytes:
    """At α, each risk vs λ under the paper's rule (cr2) and under the rules that control the realised
    risks (crc-oracle: its oracle disagreement; crc-avoidable: its avoidable error), with the y = α line."""
    fig, ax = axes(f"What α = {alpha:g} bounds, and the risks users feel", "cost weight λ", "risk (all test rows)")
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
    return png(fig)


def gate_error_figure(errors: pd.DataFrame, alpha: float) -> bytes:
    """False accepts and false defers of the gate vs λ at the default α."""
    fig, ax = axes(f"Gate-error decomposition (α = {alpha:g})", "cost weight λ", "share of test queries")
    d = errors[np.isclose(errors["alpha"], alpha) & (errors["lam"] > 0)].sort_values("lam")  # log axis
    ax.plot(d["lam"], d["false_accept"], marker="o", ms=3, color="#c0392b", label="false accepts (risk)")
    ax.plot(d["lam"], d["false_defer"], marker="o", ms=3, color="#2471a3", label="false defers")
    ax.set_xscale("log")
    ax.legend(fontsize=8)
    return png(fig)


