"""`cr2 results`: the numbers docs/results.md compares with the paper, as markdown, from the warehouse views.

Every table names the view it comes from and carries the run's label source, so simulated results are
never read as measured.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

TARGETS = (0.79, 0.80, 0.81, 0.82)  # the paper's fixed-accuracy comparison range
COST_ANCHOR = 0.45  # the paper's operating-point anchor c̄ ≈ 0.45
LAMS = (0.5, 2.0, 8.0)


def _md(df: pd.DataFrame, digits: int = 4) -> str:
    if df.empty:
        return "_(no rows)_\n"
    df = df.copy()
    for c in df.columns:
        if pd.api.types.is_float_dtype(df[c]):
            df[c] = df[c].map(lambda v: "–" if pd.isna(v) else f"{v:.{digits}g}")
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "| " + " | ".join("---" for _ in df.columns) + " |"
    rows = ["| " + " | ".join(map(str, r)) + " |" for r in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows]) + "\n"


def results_markdown(home: str | Path, alpha: float, label_source: str | None = None) -> str:
    """The headline tables of the newest evaluation run in `home` as markdown."""
    from warehouse.db import Warehouse
    from warehouse.repository import headline_results, newest_eval_run

    with Warehouse(home, read_only=True) as wh:
        run_id = newest_eval_run(wh, label_source)
        f = headline_results(wh, run_id, targets=TARGETS, cost_anchor=COST_ANCHOR, alpha=alpha, lams=LAMS)
    run = f["run"].iloc[0]
    simulated = str(run["label_source"]).startswith("simulated")
    banner = ("SIMULATED labels — not measured" if simulated else "MEASURED labels") + f" (label source `{run['label_source']}`)"
    fa = f["fixed_accuracy"]
    fixed = fa.pivot_table(index="target", columns="method", values="saving_vs_knn_pct").round(1).reset_index()
    grid = fa.pivot_table(index="target", columns="method", values="saving_vs_knn_grid_pct").round(1).reset_index()
    ca = f["cost_assumptions"]
    dearer = (f"{100 * ca['device_dearer_share_estimated'].iloc[0]:.1f} % under ĉ (routing), "
              f"{100 * ca['device_dearer_share_realised'].iloc[0]:.1f} % under c (realised)") if len(ca) else "–"
    parts = [
        f"_{banner}; run `{run_id}`, states `{run['dist_id']}`, decision cost `{run.get('decision_cost', 'realised')}`._\n",
        f"Device model dearer than the cheapest edge model (v_cost_assumptions): {dearer}.\n",
        f"**Fixed-accuracy cost saving vs KNN, % (v_fixed_accuracy, interpolated monotone frontier)**\n\n{_md(fixed, 3)}",
        f"**… at the best grid point, no interpolation (v_fixed_accuracy.saving_vs_knn_grid_pct)**\n\n{_md(grid, 3)}",
        f"**CR² local rate at c̄ ≈ {COST_ANCHOR} per α (operating_points)**\n\n{_md(f['local_at_cost'])}",
        f"**CR² at α = {alpha:g} (operating_points, v_gate_errors)**\n\n{_md(f['operating_points'])}",
        f"**Largest local rate and smallest cost over the λ sweep, α = {alpha:g} (operating_points)**\n\n{_md(f['sweep'])}",
        f"**Ablation at c̄ ≈ 0.45 (v_ablation)**\n\n"
        f"{_md(f['ablation'][['method', 'alpha', 'lam', 'accuracy', 'cost', 'local_rate']].sort_values(['method', 'alpha']))}",
        f"**Router complexity (v_router_complexity)**\n\n{_md(f['complexity'][['kind', 'params', 'flops']])}",
    ]
    return "\n".join(parts)
