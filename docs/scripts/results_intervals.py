"""Print the intervals-and-seeds tables of docs/results.md (issue 25) for one warehouse.

    PYTHONPATH=. python docs/scripts/results_intervals.py --home var [--targets 0.79 0.80 0.81 0.82] [--alpha 0.01]

Every number comes from the views of the newest evaluation run and the newest seed study in the warehouse:
v_mean_saving_ci, v_fixed_accuracy_ci, v_operating_points_ci and v_seed_spread.
"""
from __future__ import annotations

import argparse

import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2_cli.results import _md, ci_cell
from warehouse.db import Warehouse
from warehouse.repository import newest_eval_run, seed_spread, view_for_run

LEARNED = ("cr2", "mlp", "embedllm", "llmrank", "llmrank-bench")
NAMES = {"cr2": "CR²", "knn": "KNN", "mlp": "MLP", "embedllm": "EmbedLLM", "llmrank": "LLMRank",
         "llmrank-bench": "LLMRank + benchmark id"}


def _spread(sp: pd.DataFrame, fmt: str, **where) -> tuple[str, str]:
    if sp.empty:
        return "–", "–"
    d = sp
    for k, v in where.items():
        d = d[d[k].isna()] if v is None else d[(d[k] - v).abs() < 1e-9] if isinstance(v, float) else d[d[k] == v]
    if d.empty:
        return "–", "–"
    r = d.iloc[0]
    sd = "–" if pd.isna(r.seed_sd) else format(r.seed_sd, fmt.lstrip("+"))
    return (f"{format(r.seed_mean, fmt)} ± {sd}",
            f"{format(r.seed_min, fmt)} … {format(r.seed_max, fmt)} ({int(r.n_seeds)} seeds)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--targets", type=float, nargs="*", default=[0.79, 0.80, 0.81, 0.82])
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--lams", type=float, nargs="*", default=list(HEADLINE_LAMS))
    a = ap.parse_args()
    with Warehouse(a.home, read_only=True) as wh:
        run_id = newest_eval_run(wh)
        ms = view_for_run(wh, "v_mean_saving_ci", run_id)
        fa = view_for_run(wh, "v_fixed_accuracy_ci", run_id)
        ops = view_for_run(wh, "v_operating_points_ci", run_id)
        sp = seed_spread(wh)
        n_res = wh.scalar("SELECT max(n_resamples) FROM intervals WHERE run_id = ? AND target IS NULL AND lam IS NOT NULL",
                          [run_id])
    print(f"_Run `{run_id}`, label source `{ms['label_source'].iloc[0]}`; {n_res} paired resamples of the test queries; "
          f"seed study `{sp['study_id'].iloc[0] if len(sp) else '–'}`._\n")
    rows = []
    for m in LEARNED:
        r = ms[ms["method"] == m]
        if r.empty:
            continue
        r = r.iloc[0]
        mean_sd, rng = _spread(sp, "+.1f", method=m, metric="mean_saving_vs_knn_pct")
        rows.append({"router": NAMES.get(m, m), "targets both reach": int(r.n_targets),
                     "mean saving vs KNN % [95 % CI]": ci_cell(r.mean_saving_vs_knn_pct, r.saving_lower, r.saving_upper),
                     "verdict": r.verdict, "seeds: mean ± sd": mean_sd, "seeds: min … max": rng})
    print("**Mean fixed-accuracy saving vs KNN over the targets both reach** (v_mean_saving_ci; seeds: v_seed_spread)\n")
    print(_md(pd.DataFrame(rows)))
    rows = []
    for t in a.targets:
        row = {"target": f"{t:.2f}"}
        for m in LEARNED:
            r = fa[(fa["method"] == m) & (fa["target"].round(2) == round(t, 2))]
            row[NAMES.get(m, m)] = "–" if r.empty else (
                f"{ci_cell(r.iloc[0].saving_vs_knn_pct, r.iloc[0].saving_lower, r.iloc[0].saving_upper)} "
                f"{'' if r.iloc[0].verdict == 'no difference detected' else r.iloc[0].verdict}").strip()
        mean_sd, _ = _spread(sp, "+.1f", method="cr2", metric="saving_vs_knn_pct", target=float(t))
        row["CR² over seeds: mean ± sd"] = mean_sd
        rows.append(row)
    print("\n**Saving vs KNN at the targets, % [95 % CI]** (v_fixed_accuracy_ci; a word only where the interval "
          "excludes 0, every other cell is \"no difference detected\")\n")
    print(_md(pd.DataFrame(rows)))
    rows = []
    d = ops[(ops["benchmark"] == "all") & ops["lam"].isin(a.lams)
            & (((ops["method"] == "cr2") & ((ops["alpha"] - a.alpha).abs() < 1e-12)) | ops["method"].isin(["knn", "mlp"]))]
    for r in d.sort_values(["lam", "method"]).itertuples():
        row = {"λ": f"{r.lam:g}", "router": NAMES.get(r.method, r.method)}
        for m in ("accuracy", "cost", "local_rate", "risk"):
            row[f"{m} [95 % CI]"] = ci_cell(getattr(r, m), getattr(r, f"{m}_lower"), getattr(r, f"{m}_upper"), ".3f")
        for m in ("accuracy", "cost", "local_rate", "risk"):
            row[f"{m}: seeds mean ± sd"] = _spread(sp, ".3f", method=r.method, metric=m, lam=float(r.lam),
                                                   alpha=None if r.method != "cr2" else float(a.alpha))[0]
        rows.append(row)
    print(f"\n**Operating points, CR² at α = {a.alpha:g}, KNN and MLP** (v_operating_points_ci; seeds: v_seed_spread)\n")
    print(_md(pd.DataFrame(rows)))


if __name__ == "__main__":
    main()
