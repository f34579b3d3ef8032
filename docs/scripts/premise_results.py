"""Print the premise-map tables of docs/results.md ("When CR² pays") from a warehouse's v_premise.

    PYTHONPATH=. python docs/scripts/premise_results.py --home var [--study STUDY_ID]

Every number comes from the view v_premise (and premise_cells) of the newest premise study in the warehouse:
per cell, the device / cheapest-edge cost ratio under ĉ, CR²'s fixed-accuracy saving vs KNN, vs KNN certified at
the same α and rule (knn@<rule>: the equal-risk comparison) and vs the best single model (mean over the targets
both reach, and at the paper's targets 0.79–0.82) with 95 % paired-bootstrap intervals and their verdicts, and the
loss of re-calibration only against retraining.
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from warehouse.db import Warehouse
from warehouse.premise import premise_view


def _md(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "|".join(" --- " for _ in cols) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def _ci(r, sign: float = 1.0) -> str:
    if r is None or not np.isfinite(r.saving_pct):
        return "not reached"
    lo, hi = sorted((sign * r.saving_lower_pct, sign * r.saving_upper_pct))
    mark = "" if lo <= 0 <= hi else (" ✓" if lo > 0 else " ✗")
    return f"{sign * r.saving_pct + 0.0:+.1f} [{lo + 0.0:+.1f}, {hi + 0.0:+.1f}]{mark}"


def _pick(v: pd.DataFrame, method: str, reference: str, target: float | None):
    sel = v[(v["method"] == method) & (v["reference"] == reference)]
    sel = sel[sel["mean_over_targets"]] if target is None else sel[np.isclose(sel["target"], target)]
    return None if sel.empty else sel.iloc[0]


def _certified_knn(v: pd.DataFrame) -> str | None:
    """The certified KNN the study compared CR² with (`knn@<rule>`, the rule of CR²'s calibration), if any."""
    names = sorted({m for m in v["reference"].dropna().unique() if str(m).startswith("knn@")})
    return names[0] if names else None


def tables(v: pd.DataFrame) -> str:
    out = []
    certified = _certified_knn(v)
    channels = v.groupby("channel")["mean_distance_m"].mean().sort_values().index.tolist()
    rows = []
    for (f, ch), g in sorted(v.groupby(["speed_factor", "channel"]), key=lambda kv: (kv[0][0], channels.index(kv[0][1]))):
        first = g.iloc[0]
        row = {"speed": f"×{f:g}", "channel": ch, "ĉ ratio": f"{first.cost_ratio_est:.3f}",
               "device dearer (ĉ)": f"{100 * first.device_dearer_share_est:.0f} %",
               "CR² retrained vs KNN, mean": _ci(_pick(g, "cr2-retrain", "knn", None)),
               "CR² retrained vs certified KNN (same α, same rule), mean":
                   _ci(_pick(g, "cr2-retrain", certified, None)) if certified else "–",
               "CR² re-calibrated vs KNN, mean": _ci(_pick(g, "cr2-recal", "knn", None)),
               "CR² retrained vs best single, mean": _ci(_pick(g, "cr2-retrain", "best-single", None)),
               "loss of re-calibration only, mean": _ci(_pick(g, "cr2-recal", "cr2-retrain", None), -1.0)}
        risk = _pick(g, "cr2-retrain", "knn", None)
        recal = _pick(g, "cr2-recal", "knn", None)
        row["risk max retrained / recal"] = (f"{risk.risk_max:.4f} / {recal.risk_max:.4f}"
                                             if risk is not None and recal is not None else "–")
        cert = _pick(g, certified, "knn", None) if certified else None
        row["certified KNN risk max / mean"] = (f"{cert.risk_max:.4f} / {cert.risk_mean:.4f}"
                                                if cert is not None else "–")
        rows.append(row)
    out.append(_md(pd.DataFrame(rows)))
    rows = []
    for (f, ch), g in sorted(v.groupby(["speed_factor", "channel"]), key=lambda kv: (kv[0][0], channels.index(kv[0][1]))):
        row = {"speed": f"×{f:g}", "channel": ch, "ĉ ratio": f"{g.iloc[0].cost_ratio_est:.3f}"}
        for t in (0.79, 0.80, 0.81, 0.82):
            row[f"vs KNN @ {t:.2f}"] = _ci(_pick(g, "cr2-retrain", "knn", t))
        for t in (0.79, 0.80, 0.81, 0.82):
            row[f"vs best single @ {t:.2f}"] = _ci(_pick(g, "cr2-retrain", "best-single", t))
        lr = _pick(g, "cr2-retrain", "knn", 0.80)
        row["CR² local rate @ 0.80"] = "–" if lr is None or not np.isfinite(lr.local_rate) else f"{100 * lr.local_rate:.1f} %"
        rows.append(row)
    out.append(_md(pd.DataFrame(rows)))
    rows = []  # the answer's view: cells in order of the device / edge cost ratio
    for (f, ch), g in v.groupby(["speed_factor", "channel"]):
        r = g.iloc[0]
        row = {"ĉ ratio": round(float(r.cost_ratio_est), 3), "cell": f"×{f:g} / {ch}"}
        for ref, name in (("knn", "KNN"), ("best-single", "best single")):
            m = _pick(g, "cr2-retrain", ref, None)
            row[f"CR² vs {name}, mean"] = _ci(m)
            verdicts = [_pick(g, "cr2-retrain", ref, t) for t in (0.79, 0.80, 0.81, 0.82)]
            row[f"paper targets cheaper / dearer / n.d. / not reached vs {name}"] = " / ".join(
                str(sum(1 for x in verdicts if x is not None and x.verdict == w))
                for w in ("cheaper", "dearer", "no difference detected", "not reached"))
        rows.append(row)
    out.append(_md(pd.DataFrame(rows).sort_values("ĉ ratio")))
    return "\n\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--study", default=None)
    args = ap.parse_args()
    with Warehouse(args.home, read_only=True) as wh:
        sid = args.study or wh.scalar("SELECT study_id FROM premise_cells ORDER BY created_at DESC LIMIT 1")
        v = premise_view(wh, sid)
        cells = wh.df("SELECT count(*) AS n, sum(cell_seconds) AS s FROM premise_cells WHERE study_id = ?", [sid])
    print(f"study {sid}: {int(cells.n[0])} cells, {float(cells.s[0]):.0f} s of cell time; labels "
          f"{v['label_source'].iloc[0]}{' (SIMULATED)' if v['labels_simulated'].iloc[0] else ''}; "
          f"{int(v['n_evaluable'].iloc[0])} evaluable test queries, {int(v['n_resamples'].iloc[0])} resamples\n")
    print(tables(v))


if __name__ == "__main__":
    main()
