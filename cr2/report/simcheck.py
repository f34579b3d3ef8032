"""The sim-to-real check's page (simcheck.html): frames in, one self-contained HTML string out; and its tables on
docs/results.md as objects (cr2.report.table.Table): the MMLU-Pro summary, the structure of a `cr2 study simcheck`
run, and the routers' signs out of sample.

The tables read the rows of v_simcheck with their `met` column (cr2.studies.simcheck.with_met) and the sign counts
and router savings cr2.studies.simcheck computes; they write cells only (cr2.report.cells.PAGE).
"""
from __future__ import annotations

import html
from typing import Iterable, Sequence

import pandas as pd

from cr2.report.cells import DASH, EM_DASH, PAGE, TERMINAL
from cr2.report.table import Table

V2, V1 = "simulated-irt-v2", "simulated-irt-v1"
num, span = PAGE.num, PAGE.span


def pick(rows: pd.DataFrame, source: str, statistic: str, section: str | None = None) -> pd.DataFrame:
    """The rows of one source and statistic (and section)."""
    r = rows[(rows["source"] == source) & (rows["statistic"] == statistic)]
    return r if section is None else r[r["section"] == section]


def one(rows: pd.DataFrame, source: str, statistic: str, model: str | None = None, section: str | None = None
        ) -> pd.Series | None:
    """The first row of one source and statistic (and model, section); None where there is none."""
    r = pick(rows, source, statistic, section)
    if model is not None:
        r = r[r["model"] == model]
    return None if r.empty else r.iloc[0]


def met_word(ok: pd.Series) -> str:
    """'met' / 'missed' for one target, 'k of n' for several ('–' without a tolerance)."""
    ok = ok.dropna()
    if ok.empty:
        return DASH
    if len(ok) == 1:
        return "met" if bool(ok.iloc[0]) else "missed"
    return f"{int(ok.sum())} of {len(ok)}"


def corr_cells(rows: pd.DataFrame, source: str, statistic: str = "correlation") -> tuple[str, str, str]:
    """(measured span, simulated span with the largest |difference| and its pair, met) of a pairwise statistic."""
    c = pick(rows, source, statistic)
    if c.empty:
        return DASH, DASH, DASH
    d = (c["mean"] - c["measured"]).abs()
    worst = c.loc[d.idxmax()]
    return (span(c["measured"], ".3f"),
            f"{span(c['mean'], '.3f')} (max \\|diff\\| {num(d.max(), '.3f')}, {worst.model}–{worst.other})",
            met_word(c["met"]))


def _band(a: pd.Series) -> str:
    return f"{num(a['mean'], '.3f')} [{num(a.q05, '.3f')}, {num(a.q95, '.3f')}]"


class SimcheckSummary(Table):
    """The MMLU-Pro sim-to-real run (`cr2 simcheck`): the label structure measured beside v2's and v1's means over
    seeds with the tolerance and whether each meets it, the sign of the savings vs KNN, and CR² at `lams`.
    `signs`: source → (points with the measured sign, points) (cr2.studies.simcheck.sign_counts)."""

    tight_empty = True

    def __init__(self, rows: pd.DataFrame, models: Sequence[str], signs: dict[str, tuple[int, int]],
                 lams: Sequence[float]):
        table = []

        def row(label: str, stat: str, spec: str = ".3f") -> None:
            a, b = one(rows, V2, stat, section="structure"), one(rows, V1, stat, section="structure")
            if a is None:
                return
            table.append([label, num(a.measured, spec), num(a["mean"], spec),
                          num(b["mean"], spec) if b is not None else DASH, f"± {num(a.tolerance, spec)}",
                          met_word(a.to_frame().T["met"]), met_word(b.to_frame().T["met"]) if b is not None else DASH])

        def values(v: Iterable) -> str:
            return " / ".join(num(x, ".3f") for x in v)

        row("share some model solves", "solvable_share")
        acc = {s: pick(rows, s, "accuracy", "structure").set_index("model").reindex(list(models)) for s in (V2, V1)}
        if not acc[V2].empty:
            table.append(["per-model accuracy", values(acc[V2]["measured"]), values(acc[V2]["mean"]),
                          values(acc[V1]["mean"]), "± 0.005", met_word(acc[V2]["met"]), met_word(acc[V1]["met"])])
        m2, s2, w2 = corr_cells(rows, V2)
        _, s1, w1 = corr_cells(rows, V1)
        table.append(["pairwise correctness correlations", m2, s2, s1, "each ± 0.05", w2, w1])
        a = one(rows, V2, "p_device_given_largest_wrong")
        if a is not None:
            row(f"P({a.model} right \\| {a.other} wrong)", "p_device_given_largest_wrong")
            big = {s: one(rows, s, "accuracy_on_solvable", a.other) for s in (V2, V1)}
            table.append([f"accuracy of {a.other} on solvable questions", num(big[V2].measured, ".3f"),
                          num(big[V2]["mean"], ".3f"), num(big[V1]["mean"], ".3f") if big[V1] is not None else DASH,
                          "", "", ""])
        table.append(["fixed-accuracy saving vs KNN with the measured sign, (router, target) points", "",
                      f"{signs[V2][0]} of {signs[V2][1]}", f"{signs[V1][0]} of {signs[V1][1]}", "every point",
                      *("met" if signs[s][0] == signs[s][1] else "missed" for s in (V2, V1))])
        for stat, label in (("accuracy", "CR² accuracy (solvable test)"), ("risk", "CR² test risk")):
            cells = {}
            for s in (V2, V1):
                r = pick(rows, s, stat, "routing")
                cells[s] = r[(r["model"] == "cr2") & r["lam"].isin(lams)].set_index("lam").reindex(list(lams))
            if cells[V2]["measured"].notna().any():
                table.append([f"{label} at λ = {' / '.join(f'{v:g}' for v in lams)}", values(cells[V2]["measured"]),
                              values(cells[V2]["mean"]), values(cells[V1]["mean"]), "", "", ""])
        super().__init__(["statistic", "measured", "v2 (mean over seeds)", "v1 (mean over seeds)", "tolerance", "v2",
                          "v1"], table)


class SimcheckStructure(Table):
    """The structure and diagnostics of one `cr2 study simcheck` run: measured, v2 [5–95 % over seeds], tolerance,
    met (and v1's where `with_v1`)."""

    def __init__(self, rows: pd.DataFrame, with_v1: bool = True):
        head = ["statistic", "measured", "v2 mean [5–95 % over seeds]", "tolerance", "v2"]
        head += ["v1 mean", "v1"] if with_v1 else []
        table = []

        def add(label: str, r2: pd.DataFrame, r1: pd.DataFrame, sim: str, meas: str, tol: str) -> None:
            v1 = [span(r1["mean"], ".3f"), met_word(r1["met"])] if with_v1 else []
            table.append([label, meas, sim, tol, met_word(r2["met"]), *v1])

        r2, r1 = pick(rows, V2, "accuracy", "structure"), pick(rows, V1, "accuracy", "structure")
        add("accuracy per model", r2, r1, span(r2["mean"]), span(r2["measured"]), "± 0.005")
        r2, r1 = pick(rows, V2, "solvable_share"), pick(rows, V1, "solvable_share")
        if len(r2):
            a = r2.iloc[0]
            add("share some model solves", r2, r1, _band(a), num(a.measured, ".3f"), "± 0.02")
        m, s, _ = corr_cells(rows, V2)
        add("pairwise correctness correlation", pick(rows, V2, "correlation"), pick(rows, V1, "correlation"), s, m,
            "each ± 0.05")
        r2, r1 = pick(rows, V2, "p_device_given_largest_wrong"), pick(rows, V1, "p_device_given_largest_wrong")
        if len(r2):
            a = r2.iloc[0]
            add(f"P({a.model} right \\| {a.other} wrong)", r2, r1, _band(a), num(a.measured, ".3f"), "± 0.03")
        for stat, label in (("knn_auc_correct", "20-NN AUC of correctness from e(x), per model"),
                            ("knn_auc_disagree", "20-NN AUC of a pair's disagreement")):
            r2, r1 = pick(rows, V2, stat), pick(rows, V1, stat)
            if len(r2):
                d = r2["mean"] - r2["measured"]
                add(label, r2, r1, f"{span(r2['mean'])} (simulated − measured: {span(d)})", span(r2["measured"]),
                    EM_DASH)
        big = one(rows, V2, "p_device_given_largest_wrong")
        if big is not None:
            pair = lambda r: r[(r["model"] == big.model) & (r["other"] == big.other)]  # noqa: E731
            r2, r1 = pair(pick(rows, V2, "knn_auc_disagree")), pair(pick(rows, V1, "knn_auc_disagree"))
            if len(r2):
                a = r2.iloc[0]
                add(f"20-NN AUC of {big.model} ≠ {big.other}", r2, r1, _band(a), num(a.measured, ".3f"), EM_DASH)
        super().__init__(head, table)


class SimcheckRouterSigns(Table):
    """Out of sample, per router (rows) and ladder: at how many fixed-accuracy targets its simulated saving vs KNN
    has the measured sign, and the mean saving measured / simulated (cr2.studies.simcheck.router_savings per
    ladder)."""

    def __init__(self, savings: dict[str, pd.DataFrame], routers: Iterable[str]):
        names = list(savings)
        head = ["router"] + [c for n in names for c in (f"{n}: targets with the measured sign",
                                                        f"{n}: mean saving vs KNN, measured / v2 (%)")]
        table = []
        for r in routers:
            cells = [r]
            for n in names:
                t = savings[n]
                if r in t.index:
                    x = t.loc[r]
                    cells += [f"{int(x.same)} of {int(x.n)}", f"{num(x.measured, '+.1f')} / {num(x.simulated, '+.1f')}"]
                else:
                    cells += [DASH, DASH]
            table.append(cells)
        super().__init__(head, table)

from cr2.report.figures import axes, png
from cr2.report.page import banner, facts_table, img, page, table_html


class SimcheckPoints(Table):
    """`cr2 simcheck`'s terminal table (v_simcheck rows): each label statistic measured beside the simulator's mean and
    5–95 % band over seeds, the target tolerance and whether it is met; '—' where a value is missing."""

    def __init__(self, df: pd.DataFrame):
        t = TERMINAL.num
        super().__init__(["source", "statistic", "pair", "measured", "simulated", "band", "target", "ok"],
                         [[str(r.source), str(r.statistic), f"{r.model}{' ~ ' + r.other if r.other else ''}",
                           t(r.measured, ".3f"), t(r.mean, ".3f"), f"[{t(r.q05, '.3f')}, {t(r.q95, '.3f')}]",
                           f"±{r.tolerance:g}", "yes" if r.meets_target else "NO"] for r in df.itertuples()],
                         "no simcheck rows")


def frontier_figure(points: pd.DataFrame, source: str) -> bytes:
    """Accuracy vs cost per router (mean over seeds of each λ point) under one label source."""
    fig, ax = axes(f"Accuracy–cost per router — {source} labels", "mean normalised cost", "accuracy (solvable test)")
    for router, g in points[points["source"] == source].groupby("model"):
        g = g.sort_values("cost")
        ax.plot(g["cost"], g["accuracy"], marker="o", ms=3, lw=1.2, label=router)
    ax.legend(fontsize=8)
    return png(fig)


def render_simcheck_html(meta: dict, structure: pd.DataFrame, savings: pd.DataFrame, cr2_curve: pd.DataFrame,
                         points: pd.DataFrame, fit: pd.DataFrame) -> str:
    """The page: a SIMULATED-vs-MEASURED banner, the run facts, the fitted shape, structure and routing tables."""
    esc = html.escape
    figs = [f"<figure>{img(frontier_figure(points, source), f'frontier {source}')}</figure>"
            for source in (sorted(points["source"].unique()) if len(points) else [])]

    def table(frame: pd.DataFrame) -> str:
        return table_html(frame, float_format=lambda v: f"{v:.4g}")

    top = banner("sim", "SIMULATED and MEASURED labels side by side.", """Columns <code>measured</code> are real model
outputs (data/measured/, MMLU-Pro authors' published 5-shot CoT outputs); every other number is computed on labels
from the named simulator, matched to the measured accuracy of every (model, category), on the same questions.""")
    # sql-text: shown to the user, never run
    return page("cr2 sim-to-real check", f"""<h1>Sim-to-real check: SIMULATED vs MEASURED labels (MMLU-Pro)</h1>
{top}
{facts_table(meta)}
<p>Numbers: <code>cr2 sql "SELECT * FROM v_simcheck WHERE run_id = '{esc(str(meta.get('run_id')))}'"</code>;
mean, sd and 5–95 % band over simulator seeds. docs/labels.md explains the check.</p>
<h2>Fitted shape of simulated-irt-v2 (fresh fit on these data)</h2>{table(fit)}
<h2>Label structure</h2>{table(structure)}
<h2>Fixed-accuracy saving vs KNN (%), at targets measured and simulated labels both reach</h2>{table(savings)}
<h2>CR²: test risk and local rate vs λ (α as configured)</h2>{table(cr2_curve)}
<h2>Accuracy–cost points per router</h2>{''.join(figs)}""")
