"""The intervals section's tables (docs/results.md, "Is a difference real?") as objects (cr2.report.table.Table):
per scenario, the learned routers' mean saving vs KNN (base split and over seeds), the saving at each target, and the
operating points with their intervals and seed spread. The frames come with their stored family's words already
worded by the caller (cr2.report.resultsdoc.scenario: interval_family and seed_family add word_holm and
seed_word); numbers through cr2.report.cells."""
from __future__ import annotations

from typing import Callable, Sequence

import pandas as pd

from cr2.report.cells import DASH, ci_cell, interval_cell, lam_cell, mean_sd_cell, num
from cr2.report.pools import family_sizes
from cr2.report.table import Table, rows_where
from cr2.routers import short_name

OP_METRICS = ("accuracy", "cost", "local_rate", "risk")


def _mean_sd(r, spec: str = "+.1f") -> str:
    return mean_sd_cell(r.seed_mean, r.seed_sd, spec)


def _t(r) -> str:
    return interval_cell(r.lo, r.hi, "+.1f")


class RouterMeanSavings(Table):
    """Per learned router (its stored family: v_mean_saving_ci with p, p_holm, word_holm): targets of the validation
    grid, the mean saving vs KNN [95 % CI], the bootstrap p, the Holm p over the routers and the word."""

    def __init__(self, fam: pd.DataFrame):
        self.set_records([
            {"router": short_name(r.method), "targets (validation grid)": int(r.n_targets),
             "mean saving vs KNN % [95 % CI]": ci_cell(r.mean_saving_vs_knn_pct, r.saving_lower, r.saving_upper),
             "bootstrap p": num(r.p, ".2g"), f"p, Holm over the {family_sizes(fam)} learned routers": num(r.p_holm, ".2g"),
             "word (Holm)": r.word_holm} for r in fam.itertuples()])


class SeedRouterSavings(Table):
    """Per learned router over the seeds (v_seed_spread with its t-interval, Holm p and word): seeds, mean ± sd,
    min … max, the 95 % t-interval, the t-test's Holm p over the routers and the word."""

    def __init__(self, sr: pd.DataFrame):
        self.set_records([
            {"router": short_name(r.method), "seeds": int(r.n_seeds), "mean ± sd": _mean_sd(r),
             "min … max": f"{num(r.seed_min, '+.1f')} … {num(r.seed_max, '+.1f')}", "95 % t-interval over seeds": _t(r),
             f"t-test p, Holm over the {len(sr)} routers": num(r.p_t_holm, ".2g"), "word (t-interval, Holm)": r.seed_word}
            for r in sr.itertuples()])


class TargetSavings(Table):
    """Per target shown: KNN's cost there, every learned router's saving vs KNN [95 % CI] with its stored word (the
    family: every target × router), and CR² over the seeds where a seed family is given."""

    def __init__(self, fam: pd.DataFrame, shown: Sequence[float], learned: Sequence[str], knn: pd.DataFrame | None,
                seeds: pd.DataFrame):
        rows = []
        for t in shown:
            at = rows_where(fam, target=float(t))
            row = {"target": f"{t:.2f}"}
            if knn is not None:
                k = rows_where(knn, target=float(t))
                row["KNN cost"] = num(k["knn_cost"].iloc[0] if len(k) else None, ".3f")
            for m in learned:
                r = at[at["method"] == m]
                if r.empty:
                    row[short_name(m)] = DASH
                    continue
                r = next(r.itertuples())
                row[short_name(m)] = f"{ci_cell(r.saving_vs_knn_pct, r.saving_lower, r.saving_upper)} {r.word_holm}"
            if len(seeds):
                sr = rows_where(seeds, target=float(t))
                if len(sr):
                    sr = next(sr.itertuples())
                    row["CR² over seeds: mean ± sd"] = _mean_sd(sr)
                    row["95 % t-interval"] = _t(sr)
                    row[f"word (t-test, Holm over the {len(seeds)} targets)"] = sr.seed_word
            rows.append(row)
        self.set_records(rows, fill=DASH)


class PointsWithSeeds(Table):
    """Operating points at the headline λ (v_operating_points_ci rows `d`): each metric [95 % CI] and its mean ± sd
    over the seeds (`seed_row(method, metric, lam)`: the v_seed_spread row, or None)."""

    def __init__(self, d: pd.DataFrame, seed_row: Callable):
        rows = []
        for r in d.sort_values(["lam", "method"]).itertuples():
            row = {"λ": lam_cell(r.lam), "router": short_name(r.method)}
            for m in OP_METRICS:
                row[f"{m} [95 % CI]"] = ci_cell(getattr(r, m), getattr(r, f"{m}_lower"), getattr(r, f"{m}_upper"), ".3f")
            for m in OP_METRICS:
                sp = seed_row(r.method, m, float(r.lam))
                row[f"{m}: seeds mean ± sd"] = DASH if sp is None else _mean_sd(sp, ".3f")
            rows.append(row)
        self.set_records(rows)


class RouterTargetCounts(Table):
    """Per learned router over the targets it and KNN reach (its stored family: every target × router, with
    verdict_holm): how many, the median saving, and the per-target words counted; `extra(g)` adds columns."""

    def __init__(self, tf: pd.DataFrame, learned: Sequence[str], reach_head: str, median_head: str,
                 extra: Callable | None = None, why: str = "this run has none here"):
        from cr2.report.cells import COUNTS_HEAD, counts_cell

        rows = []
        for m in learned:
            g = tf[tf["method"] == m]
            if g.empty:
                continue
            rows.append({"router": short_name(m), reach_head: len(g),
                         median_head: num(g["saving_vs_knn_pct"].median(), "+.1f"),
                         f"targets {COUNTS_HEAD}, Holm over every target × router": counts_cell(g["verdict_holm"]),
                         **(extra(g) if extra else {})})
        self.set_records(rows, why)
