"""The headline tables of one evaluation run (`cr2 results`, docs/results.md): stored rows in, table objects out
(cr2.report.table.Table: built once, rendered as markdown, rich, artifact or HTML), every cell written by
cr2.report.cells and every router named by its catalogue short name (cr2.routers.short_name).

The verdict per target (VerdictPerTarget), the operating points with their intervals (OperatingPointsCI), the stored
rows shown as they are (LocalAtCost, RealisedRisk, SweepExtremes, Ablation), the spread across seeds (SeedSpread), the
equal-risk tables (CostAtTarget, EqualRiskQuestion), and the paper's numbers beside ours (Paper*; PAPER_*: copied
from the paper, §VII; the .tex line of each in brackets).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.evaluation.fixed_accuracy import PAPER_TARGETS, VIEW_TARGETS
from cr2.report.cells import DASH, ci_cell, count_cell, mean_sd_cell, missing, num, pct
from cr2.report.table import Table
from cr2.report.tables import NOT_REACHED, holm_cell
from cr2.routers import method_router, reference_router, routers_tagged, short_name

TARGETS = PAPER_TARGETS
VIEW_TARGET_RANGE = (float(VIEW_TARGETS[0]), float(VIEW_TARGETS[-1]))  # the targets v_fixed_accuracy evaluates
NO_MEAN_SAVING = ("no learned method reaches a target together with KNN, or the run has no intervals "
                  "(`cr2 run` stores them)")
COST_ANCHOR = 0.45  # the paper's operating-point anchor c̄ ≈ 0.45
LAMS = HEADLINE_LAMS  # the λ the summary quotes (cr2.config)


def share_cell(share, spec: str = ".1f") -> str:
    """A share as 'x.y %', or why there is none."""
    return pct(share, spec, "— (no rows)")


def default_targets(reached: pd.DataFrame, method: str | None = None) -> tuple[tuple[float, ...], str]:
    """The targets `cr2 results` shows when none are given, and a line saying why.

    The paper's four targets (0.79–0.82) where CR² and KNN both reach 0.82; otherwise the four consecutive
    targets ending at the highest one both reach (a pool whose routers top out lower still gets a comparison).
    `method`: the router whose reach decides (None: the method under study, cr2.routers.method_router)."""
    top = reached.loc[reached["method"] == (method or method_router()), "max_target"]
    if top.empty or pd.isna(top.iloc[0]):
        return PAPER_TARGETS, (f"Targets: the paper's {target_span(PAPER_TARGETS)}; CR² and KNN reach no common target in "
                               f"{VIEW_TARGET_RANGE[0]:.2f} … {VIEW_TARGET_RANGE[1]:.2f} in this run.")
    highest = round(float(top.iloc[0]), 2)
    if highest >= PAPER_TARGETS[-1] - 1e-9:
        return PAPER_TARGETS, (f"Targets: the paper's {target_span(PAPER_TARGETS)} (CR² and KNN both reach up to "
                               f"{highest:.2f}; `--targets` picks others).")
    targets = tuple(round(highest - 0.01 * i, 2) for i in range(len(PAPER_TARGETS) - 1, -1, -1)
                    if highest - 0.01 * i >= VIEW_TARGET_RANGE[0] - 1e-9)
    return targets, (f"Targets: {target_span(targets)}, the four highest CR² and KNN both reach — not the paper's "
                     f"{target_span(PAPER_TARGETS)}, which they do not both reach (highest common target {highest:.2f}); "
                     "`--targets` picks others.")


def which_targets(targets) -> str:
    return "the paper's targets" if tuple(targets) == PAPER_TARGETS else f"the targets {target_span(targets)}"


def target_span(targets) -> str:
    t = sorted(targets)
    return f"{t[0]:.2f}–{t[-1]:.2f}" if len(t) > 1 else f"{t[0]:.2f}"


def why_no_target(reached: pd.DataFrame, targets) -> str:
    """Why a fixed-accuracy table has no rows at `targets`: what the methods reach instead."""
    top = reached.loc[reached["method"] == method_router(), "max_target"].dropna()
    where = (f"the highest target CR² and KNN both reach is {float(top.iloc[0]):.2f}" if len(top)
             else "CR² and KNN reach no common target in this run")
    return f"no method reaches the targets {target_span(targets)} together with KNN — {where}; pass --targets"


class VerdictPerTarget(Table):
    """One router's saving vs KNN per target with the Holm p over its stored family and the test's stored word
    (v_fixed_accuracy_ci); None: the method under study (cr2.routers.method_router)."""

    def __init__(self, fa: pd.DataFrame, method: str | None = None, why: str = "this run has none here"):
        method = method or method_router()
        d = fa[fa["method"] == method]
        super().__init__(["target", f"{short_name(method)} saving vs KNN % [95 % CI]", "p, Holm (family size)", "verdict"],
                         [[num(r.target, ".2f"), ci_cell(r.saving_vs_knn_pct, r.saving_lower, r.saving_upper),
                           holm_cell(r), r.verdict if isinstance(r.verdict, str) else DASH] for r in d.itertuples()],
                         why)


def stored_cell(column: str, value: Any) -> str:
    """A stored value as the headline tables write it: a router (a `method` column) by its short name, other text as
    stored, an integer as is, any other number to 4 significant digits, '–' where missing."""
    if missing(value):
        return DASH
    if column == "method":
        return short_name(str(value))
    if isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    return num(value, ".4g")


class StoredRows(Table):
    """Stored rows shown as they are (stored_cell): `columns` in order (None: every column of the frame), sorted by
    `order` where given. A subclass names its view's columns."""

    columns: tuple[str, ...] | None = None
    order: tuple[str, ...] = ()

    def __init__(self, df: pd.DataFrame, why: str = "this run has none here"):
        cols = list(df.columns) if self.columns is None else list(self.columns)
        d = df[cols].sort_values(list(self.order)) if self.order and len(df) else df[cols]
        super().__init__(cols, [[stored_cell(c, v) for c, v in zip(cols, r)] for r in d.itertuples(index=False)], why)


class LocalAtCost(StoredRows):
    """CR²'s operating point nearest the cost anchor c̄ per α: λ, cost, accuracy, local rate, risk (operating_points)."""


class RealisedRisk(StoredRows):
    """CR² at one α under each rule: the risk each rule bounds and what users feel (v_realised_risk)."""


class SweepExtremes(StoredRows):
    """Per router: the largest local rate and the cost and accuracy range over the λ sweep (operating_points)."""


class Ablation(StoredRows):
    """Each configuration's operating point nearest the cost anchor (v_ablation), by method then α."""

    columns = ("method", "alpha", "lam", "accuracy", "cost", "local_rate")
    order = ("method", "alpha")


CI_METRICS = (("accuracy", ".4f"), ("cost", ".4f"), ("local_rate", ".4f"), ("risk", ".4f"), ("oracle_risk_all", ".4f"),
              ("avoidable_risk_all", ".4f"))


class OperatingPointsCI(Table):
    """Operating points (v_operating_points_ci): the `first` columns (a router by its short name), each metric as
    'estimate [lower, upper]', then risk_all, local_accuracy and false_defer where stored."""

    def __init__(self, df: pd.DataFrame, first: tuple[str, ...], why: str = "this run has none here"):
        metrics = [(m, spec) for m, spec in CI_METRICS if m in df.columns]
        extras = [c for c in ("risk_all", "local_accuracy", "false_defer") if c in df.columns]
        rows = [[*(stored_cell(c, r[c]) for c in first),
                 *(ci_cell(r[m], r.get(m + "_lower"), r.get(m + "_upper"), spec) for m, spec in metrics),
                 *(stored_cell(c, r[c]) for c in extras)] for _, r in df.iterrows()]
        super().__init__([*first, *(m + " [95 % CI]" for m, _ in metrics), *extras], rows, why)


def points_table(df: pd.DataFrame, first: tuple[str, ...]) -> pd.DataFrame:
    """OperatingPointsCI's cells as a frame (the results page's operating-point table)."""
    return OperatingPointsCI(df, first).frame()


def resamples_text(f: dict) -> str:
    ms = f.get("mean_saving", pd.DataFrame())
    ops = f.get("operating_points", pd.DataFrame())
    if "n_resamples" in ops.columns and ops["n_resamples"].notna().any():
        return f"{int(ops['n_resamples'].max()):,}"
    return f"{int(ms['n_resamples'].max()):,}" if len(ms) and ms["n_resamples"].notna().any() else "–"


# The paper's comparable numbers (../paper/cr2-paper.tex, §VII; line numbers of the .tex in brackets). The
# paper gives fixed-accuracy savings against KNN only (fig:dumbbell_cost_saving, L998–1002).
PAPER_SAVING_VS_KNN = {0.79: 4.8, 0.80: 5.6, 0.81: 16.9, 0.82: 16.2}
PAPER_LOCAL_AT_045 = {0.002: (0.8201, 0.023), 0.010: (0.8197, 0.043), 0.050: (0.8180, 0.094)}  # tab:ablation (acc, local)
PAPER_FIXED_RATE = {0.10: (0.8167, 0.106), 0.20: (0.7970, 0.219)}  # tab:ablation L1117–1118
PAPER_GATE_ERRORS = {0.35: (3.56, 4.9), 0.55: (0.78, 1.9)}  # fig:misdefer L1131: false defers %, total gate error %
# tab:router_complexity (params, FLOPs per decision), keyed by the paper's own names: a baseline by its catalogue `short`
# name, CR²'s two networks by their `complexity` kind. The rows shown are the catalogue's paper baselines, not these.
PAPER_COMPLEXITY = {"MLP": (235_204, "469.2 k"), "KNN": (None, "13.826 M"), "EmbedLLM": (90_714, "717.4 k"),
                    "LLMRank": (608_516, "1.215 M"), "teacher": (398_340, "789.5 k"), "gate": (104_706, "207.1 k")}
CR2_NETWORKS = ("teacher", "gate")  # CR²'s rows of the complexity table (`complexity` kinds)


QUESTION_TITLES = {
    "gate-quality": "Gate quality — CR² uncertified (gate at s ≥ 0.5) vs the baseline uncertified (its one-shot argmax)",
    "calibrated-vs-default": "Calibrated vs default threshold — each router certified at α vs itself with its default "
                             "threshold (a change of rule, not a price at equal risk)",
    "certified-score": "Which score certifies cheaper — CR²@rule vs baseline@rule at the same α",
}


def equal_risk_cell(r) -> str:
    """'estimate [lower, upper] word (Holm p)' of one equal-risk row: the test's stored word and the Holm p over its
    stored family it rests on."""
    word = r["verdict"] if isinstance(r.get("verdict"), str) else "–"
    return f"{ci_cell(r['estimate'], r['lower'], r['upper'])} {word} (Holm p {holm_cell(pd.Series(r))})"


class EqualRiskQuestion(Table):
    """One equal-risk question's comparisons (rows of `equal_risk`, mean_saving_pct, with `cell` — equal_risk_cell —
    and `sides` — 'a vs b' — added): gate-quality one row per pair with its p and Holm p; the others one column per α."""

    def __init__(self, q: pd.DataFrame, question: str):
        if question == "gate-quality":
            super().__init__(["a vs b", "mean saving of a vs b, % [95 % CI]", "n_targets", "p_value", "p_holm"],
                             [[r.sides, r.cell, count_cell(r.n_targets), num(r.p_value, ".3g"), num(r.p_holm, ".3g")]
                              for r in q.itertuples()])
            return
        alphas = list(dict.fromkeys(sorted(q["alpha"].dropna())))
        by: dict = {}
        for s, a, c in zip(q["sides"], q["alpha"], q["cell"]):
            by.setdefault((s, a), c)
        super().__init__(["a vs b", *(f"α = {a:g}" for a in alphas)],
                         [[s, *(by.get((s, a), "— (no target both sides reach)") for a in alphas)]
                          for s in dict.fromkeys(q["sides"])])


def side_label(rule, alpha) -> str:
    return ("uncertified" if rule is None or pd.isna(rule) else str(rule)) + ("" if alpha is None or pd.isna(alpha)
                                                                              else f" α={float(alpha):g}")


class CostAtTarget(Table):
    """The equal-risk cost table at `target`: one row per certified router (named by `label`), one column per side
    (uncertified, then each rule × α the run certified), every cell the cost [95 % CI] or why there is none; and
    `notes`, one per column that no router reaches (with the highest accuracy any of them reaches there).

    rows: the run's `equal_risk` rows; reach: side_reach (the highest accuracy of every method and α)."""

    def __init__(self, rows: pd.DataFrame, reach: pd.DataFrame, target: float, label: Callable[[str], str] = str,
                 why: str = "no certified router in this run"):
        out, self.notes = _cost_at_target(rows, reach, target, label)
        Table.__init__(self, [], [], why)
        if out:
            self.set_records(out, why)


def _cost_at_target(rows: pd.DataFrame, reach: pd.DataFrame, target: float,
                    label: Callable[[str], str]) -> tuple[list[dict], list[str]]:
    from cr2.evaluation.equal_risk import uncertified_side
    from cr2.routers.certify import UNCERTIFIED, certified_name

    sides = rows[rows["question"] == "cost"] if len(rows) else rows
    # every certified side the run evaluated, whether or not its frontier reaches any target (a side that reaches none
    # has no cost row at all, and would otherwise vanish from the table without a word)
    certified = reach[reach["method"].str.contains("@", regex=False)]
    split = certified["method"].str.split("@", n=1, expand=True) if len(certified) else pd.DataFrame(columns=[0, 1])
    routers = sorted(set(split[0]) | set(sides["router"] if len(sides) else []))
    if not routers:
        return [], []
    pairs = {(str(rule), float(a)) for rule, a in zip(split[1], certified["alpha"]) if rule != UNCERTIFIED and pd.notna(a)}
    if len(sides):
        pairs |= {(str(r), float(a)) for r, a in sides[["rule", "alpha"]].itertuples(index=False)
                  if pd.notna(r) and pd.notna(a)}
    columns = [(None, None), *sorted(pairs)]
    at = sides[(sides["target"] - target).abs() < 1e-9] if len(sides) else sides
    top = {(str(m), None if pd.isna(a) else round(float(a), 9)): float(x)
           for m, a, x in reach[["method", "alpha", "max_accuracy"]].itertuples(index=False) if pd.notna(x)}
    out, short = [], {c: [] for c in columns}
    for router in routers:
        row = {"router": label(router)}
        for rule, alpha in columns:
            hit = at[(at["router"] == router) & (at["rule"].isna() if rule is None else at["rule"] == rule)
                     & (at["alpha"].isna() if alpha is None else (at["alpha"] - alpha).abs() < 1e-12)]
            side = side_label(rule, alpha)
            if len(hit):
                r = hit.iloc[0]
                row[side] = ci_cell(r["estimate"], r["lower"], r["upper"], ".3f")
                continue
            method = uncertified_side(router).method if rule is None else certified_name(router, rule)
            best = top.get((method, None if alpha is None else round(alpha, 9)))
            if best is None:
                row[side] = "— (not evaluated)"
            elif best < target - 1e-9:
                row[side] = f"does not reach {target:.2f} (tops out at {best:.3f})"
                short[(rule, alpha)].append(best)
            else:
                row[side] = f"— (no cost row at {target:.2f})"
        out.append(row)
    notes = [f"_{side_label(rule, alpha)}: no router reaches {target:.2f} (the highest accuracy any reaches there is "
             f"{max(short[(rule, alpha)]):.3f}: under this rule and α the calibrated thresholds accept more locally "
             "than the target allows)._" for rule, alpha in columns if len(short[(rule, alpha)]) == len(routers)]
    return out, notes


class PaperFixedSavings(Table):
    """The paper's targets: the paper's CR² saving vs KNN beside ours (interpolated with its interval, and at the grid
    point) and every other router's (interpolated); with `verdict`, CR²'s stored word at each target after ours."""

    def __init__(self, fa: pd.DataFrame, verdict: bool = False):
        ours, ref = method_router(), reference_router()
        rows = []
        for t in TARGETS:
            d = fa[(fa["target"].round(2) == t)].set_index("method")
            cell = lambda m, col: NOT_REACHED if m not in d.index else num(d.loc[m, col], "+.1f")  # noqa: E731
            ci = lambda m: NOT_REACHED if m not in d.index else ci_cell(d.loc[m, "saving_vs_knn_pct"],  # noqa: E731
                                                                d.loc[m].get("saving_lower"), d.loc[m].get("saving_upper"))
            word = {} if not verdict else {"verdict": NOT_REACHED if ours not in d.index else
                                           d.loc[ours, "verdict"] if pd.notna(d.loc[ours, "verdict"]) else
                                           "— (no interval)"}
            rows.append({"target accuracy": f"{t:.2f}", "paper CR² vs KNN %": f"{PAPER_SAVING_VS_KNN[t]:+.1f}",
                         "ours CR² vs KNN % (interp.) [95 % CI]": ci(ours), **word,
                         "ours CR² vs KNN % (grid)": cell(ours, "saving_vs_knn_grid_pct"),
                         **{f"ours {short_name(m)} vs KNN % (interp.) [95 % CI]": ci(m)
                            for m in sorted(set(fa["method"]) - {ours, ref})}})
        self.set_records(rows)


class PaperLocalRate(Table):
    """The paper's tab:ablation beside ours: accuracy and local rate at c̄ ≈ 0.45 per α (operating_points) and at the
    fixed local rates (v_ablation)."""

    def __init__(self, local_at_cost: pd.DataFrame, ablation: pd.DataFrame):
        def ours(d: pd.DataFrame, key) -> dict:
            at = key in d.index
            return {"ours accuracy": num(d.loc[key, "accuracy"], ".4f") if at else DASH,
                    "ours local rate": share_cell(d.loc[key, "local_rate"]) if at else DASH,
                    "ours cost (nearest 0.45)": num(d.loc[key, "cost"], ".3f") if at else DASH}

        local, ab = local_at_cost.set_index("alpha"), ablation.set_index("method")
        rows = [{"α": f"{a:g}", "paper accuracy": f"{acc:.4f}", "paper local rate": f"{100 * lr:.1f} %", **ours(local, a)}
                for a, (acc, lr) in PAPER_LOCAL_AT_045.items()]
        rows += [{"α": f"fixed local rate f = {rate:.2f}", "paper accuracy": f"{acc:.4f}",
                  "paper local rate": f"{100 * lr:.1f} %", **ours(ab, f"cr2-rate-{rate:g}")}
                 for rate, (acc, lr) in PAPER_FIXED_RATE.items()]
        self.set_records(rows)


class PaperGateErrors(Table):
    """The paper's fig:misdefer beside ours: false defers and the total gate error at each c̄, ours from v_gate_errors
    at the λ whose pooled cost (v_pareto `ops`) is nearest c̄, CR² at `alpha`."""

    def __init__(self, errors: pd.DataFrame, ops: pd.DataFrame, alpha: float):
        cr2_pts = ops[(ops["method"] == method_router()) & ops["alpha"].round(6).eq(round(alpha, 6))]
        rows = []
        for c, (fd, tot) in PAPER_GATE_ERRORS.items():
            near = cr2_pts.iloc[(cr2_pts["cost"] - c).abs().argsort()[:1]] if len(cr2_pts) else cr2_pts
            e = errors[(errors["alpha"].round(6) == round(alpha, 6))]
            if len(near):
                lam = float(near["lam"].iloc[0])
                e = e[e["lam"] == lam]
            ours_fd = share_cell(e["false_defer"].iloc[0], ".2f") if len(e) else DASH
            ours_fa = share_cell(e["false_accept"].iloc[0], ".2f") if len(e) else DASH
            ours_tot = share_cell(e["false_defer"].iloc[0] + e["false_accept"].iloc[0], ".2f") if len(e) else DASH
            rows.append({"c̄": f"{c:.2f}", "paper false defers": f"{fd:.2f} %", "paper total gate error": f"≈ {tot:.1f} %",
                         "ours λ (nearest c̄)": f"{lam:g}" if len(near) else DASH, "ours false accepts": ours_fa,
                         "ours false defers": ours_fd, "ours total": ours_tot})
        self.set_records(rows)


class PaperComplexity(Table):
    """The paper's tab:router_complexity beside ours (v_router_complexity): the catalogue's paper baselines and CR²'s
    two networks, parameters and FLOPs per decision."""

    def __init__(self, complexity: pd.DataFrame):
        cx = complexity.set_index("kind")
        rows = []
        for key in [*routers_tagged("paper", kinds=("baseline",)), *CR2_NETWORKS]:
            kind = key if key in CR2_NETWORKS else f"router:{key}"
            params, flops = PAPER_COMPLEXITY.get(key if key in CR2_NETWORKS else short_name(key), (None, "—"))
            rows.append({"router": key, "paper params": "—" if params is None else f"{params:,}", "paper FLOPs": flops,
                         "ours params": num(cx.loc[kind, "params"], ",.0f") if kind in cx.index else DASH,
                         "ours FLOPs": num(cx.loc[kind, "flops"], ",.0f") if kind in cx.index else DASH})
        self.set_records(rows)


def paper_comparison_tables(f: dict, errors: pd.DataFrame, ops: pd.DataFrame, alpha: float,
                            verdict: bool = False) -> dict[str, Table]:
    """The paper beside ours: fixed (PaperFixedSavings; `verdict`: with CR²'s word), local, gate_errors and
    complexity. `f`: the headline rows (cr2_warehouse.repository.headline_results at the paper's targets), `errors`:
    v_gate_errors, `ops`: v_pareto."""
    return {"fixed": PaperFixedSavings(f["fixed_accuracy"], verdict), "local": PaperLocalRate(f["local_at_cost"], f["ablation"]),
            "gate_errors": PaperGateErrors(errors, ops, alpha), "complexity": PaperComplexity(f["complexity"])}


class SeedSpread(Table):
    """Rows of v_seed_spread as shown: the key columns of `by` ('method': the router by its short name; 'target';
    'lam': λ and metric), the seeds, mean ± sd, min – max over seeds and the base seed's value with its 95 % bootstrap
    interval, every number in format `spec`."""

    KEYS = {"method": (["method"], lambda r: [short_name(r.method)]),
            "target": (["target"], lambda r: [num(r.target, ".2f")]),
            "lam": (["λ", "metric"], lambda r: [num(r.lam, "g"), str(r.metric)])}

    def __init__(self, d: pd.DataFrame, by: str, spec: str = "+.1f", why: str = "this run has none here"):
        head, key = self.KEYS[by]
        super().__init__([*head, "seeds", "mean ± sd", "min – max", "base seed [95 % bootstrap CI]"],
                         [[*key(r), count_cell(r.n_seeds), mean_sd_cell(r.seed_mean, r.seed_sd, spec),
                           f"{num(r.seed_min, spec)} – {num(r.seed_max, spec)}",
                           ci_cell(r.base_value, r.base_lower, r.base_upper, spec)] for r in d.itertuples()], why)


def mean_grid_line(means: pd.DataFrame) -> str:
    """The line under `cr2 results --equal-risk` that says how many validation grid targets the mean savings average
    over, and which grid targets were left out (no Always-model reaches them on the test set) and why."""
    if means.empty:
        return ""
    sizes = sorted({int(n) for n in means["n_targets"].dropna()})
    shown = ", ".join(str(n) for n in sizes) or "?"
    if "dropped_targets" not in means:
        return f"Mean-saving grid: {shown} targets (a run stored before targets were left out: re-run `cr2 run` to " \
               "see which are).\n"
    reasons = sorted({str(r) for r in means["dropped_targets"].dropna()})
    if not reasons:
        return f"Mean-saving grid: {shown} targets; every target of the validation grid is reached by some " \
               "Always-model on the test set, none left out.\n"
    return f"Mean-saving grid: {shown} targets; " + "; ".join(reasons) + ".\n"
