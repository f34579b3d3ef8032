"""The measured scenario's tables (docs/results.md, "Measured scenario (MMLU-Pro)") as objects
(cr2.report.table.Table): built from the views of one evaluation run, every number through cr2.report.cells."""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from cr2.report.cells import DASH, lam_cell, num
from cr2.report.table import Table
from cr2.routers import method_router, reference_router, short_name


class ModelSummary(Table):
    """One row per model on all questions (model_summary): accuracy, mean normalised cost, latency, energy."""

    def __init__(self, models: pd.DataFrame):
        rows = [[str(r.model_id), num(r.accuracy, ".3f"), num(r.mean_cost_norm, ".3f"), num(r.mean_latency_s, ".2f"),
                 num(r.mean_energy_j, ".1f")] for r in models.itertuples(index=False)]
        super().__init__(["model", "accuracy", "mean norm. cost", "latency s", "energy J"], rows)


class OperatingPoints(Table):
    """CR² at `lams` (operating_points rows of one α): false-accept risk, risk over all test rows, local rate,
    accuracy, cost."""

    def __init__(self, cr2: pd.DataFrame, lams: Iterable[float]):
        r = cr2[cr2["lam"].isin(list(lams))].sort_values("lam")
        rows = [[lam_cell(x.lam), num(x.risk, ".4f"), num(x.risk_all, ".4f"), num(x.local_rate, ".1%"),
                 num(x.accuracy, ".3f"), num(x.cost, ".3f")] for x in r.itertuples(index=False)]
        super().__init__(["λ", "false-accept risk", "risk, all test rows", "local rate", "accuracy", "cost"], rows,
                         "no CR² point at the headline λ")


class FrontierSegments(Table):
    """The pooled Pareto frontier's runs (cr2.evaluation.fixed_accuracy.frontier_segments): router, cost from, to."""

    def __init__(self, segments: list[tuple[str, float, float]]):
        super().__init__(["router", "cost from", "cost to"],
                         [[short_name(m), num(a, ".3f"), num(b, ".3f")] for m, a, b in segments], "no operating points")


class RiskVsAlpha(Table):
    """CR²'s risk at `lams` per α (v_risk_vs_alpha): the test risk and the mean ± Monte-Carlo SE and 5–95 % band
    over the stored re-splits."""

    def __init__(self, risk: pd.DataFrame, lams: Iterable[float]):
        r = risk[risk["lam"].isin(list(lams))].sort_values(["lam", "alpha"])
        rows = [[lam_cell(x.lam), lam_cell(x.alpha), num(x.risk, ".4f"),
                 f"{num(x.risk_mean, '.4f')} ± {num(x.risk_se, '.4f')}" if pd.notna(x.risk_mean) else DASH,
                 f"{num(x.risk_q05, '.4f')}–{num(x.risk_q95, '.4f')}" if pd.notna(x.risk_q05) else DASH]
                for x in r.itertuples(index=False)]
        super().__init__(["λ", "α", "test risk", "re-split mean ± MC se", "5–95 %"], rows)


class LocalRate(Table):
    """CR²'s local rate over λ at α (v_local_rate)."""

    def __init__(self, local: pd.DataFrame, alpha: float):
        lr = local[(local["method"] == method_router()) & np.isclose(local["alpha"].fillna(-1), alpha)].sort_values("lam")
        super().__init__(["λ", "local rate"], [[lam_cell(x.lam), num(x.local_rate, ".1%")]
                                               for x in lr.itertuples(index=False)], "no CR² rows")


class CategoryAccuracy(Table):
    """Per category (v_subset_at_cost) and pooled (v_benchmark_at_cost): CR²'s and the reference's (KNN) accuracy at
    each cost target, '(–)' where the target lies outside the router's cost range (the nearest point shown)."""

    def __init__(self, at_cost: pd.DataFrame, by_cat: pd.DataFrame):
        shown = [method_router(), reference_router()]
        tab = by_cat[by_cat["method"].isin(shown)].copy()
        tab["cell"] = [num(a, ".3f") + ("" if ok else " (–)") for a, ok in zip(tab["accuracy"], tab["reachable"])]
        wide = tab.pivot_table(index="subset", columns=["target", "method"], values="cell", aggfunc="first")
        wide.columns = [f"{short_name(m)} @ c̄≈{t:.2f}" for t, m in wide.columns]
        ac = at_cost[(at_cost["benchmark"] == "all") & at_cost["method"].isin(shown)]
        pooled = {f"{short_name(m)} @ c̄≈{t:.2f}": num(a, ".3f") + ("" if ok else " (–)")
                  for m, t, a, ok in zip(ac["method"], ac["target"], ac["accuracy"], ac["reachable"])}
        wide = wide.reset_index().rename(columns={"subset": "category"})
        wide = pd.concat([wide, pd.DataFrame([{"category": "**all**", **pooled}])], ignore_index=True).fillna(DASH)
        self.targets = sorted(tab["target"].unique())
        super().__init__(list(wide.columns), wide.astype(str).values.tolist())
