"""The premise page: where CR² pays, as a speed × channel map of one premise study (view v_premise)."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from cr2.report.figures import png
from cr2.report.page import Figure, banner, figure_html, page, table_html
from cr2.routers import reference_router


def premise_grid(df: pd.DataFrame, method: str, reference: str, sign: float = 1.0) -> tuple[pd.DataFrame, ...]:
    """(estimate, lower, upper, cost ratio) grids, speed factor × channel (channels near → far), of the mean saving
    of `method` vs `reference` over the validation target grid (a missed target costs the Always-model fallback); sign −1 turns a saving into a loss (bounds swapped)."""
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
    return png(fig)


def premise_figures(df: pd.DataFrame) -> list[Figure]:
    """The premise map's two heatmaps from v_premise rows (one study)."""
    sim = bool(df["labels_simulated"].any()) if len(df) else False
    tag = " (SIMULATED labels)" if sim else ""
    return [
        Figure("premise_saving_vs_knn", f"CR² (gate retrained on the cell) vs KNN{tag}", "v_premise",
               "Mean fixed-accuracy saving of CR² against KNN over the validation target grid, %, positive: CR² cheaper; "
               "[95 % paired-bootstrap interval over test queries]; * where it excludes 0; r = E[ĉ_device] / "
               "E[min edge ĉ] in the cell.", premise_heatmap(df, "cr2-retrain", reference_router(), "CR² saving vs KNN" + tag)),
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
    ref = reference_router()
    for (method, reference), col in {("cr2-retrain", ref): "CR² retrained vs KNN",
                                     ("cr2-recal", ref): "CR² re-calibrated vs KNN",
                                     ("cr2-retrain", "best-single"): "CR² retrained vs best single",
                                     ("cr2-recal", "cr2-retrain"): "re-calibrated vs retrained"}.items():
        part = sel[(sel["method"] == method) & (sel["reference"] == reference)].set_index(["speed_factor", "channel"])
        out[col] = part.apply(fmt, axis=1)
        if reference == ref and method == "cr2-retrain":
            out["CR² risk max (α)"] = part["risk_max"].round(4)
    return out.reset_index().sort_values(["speed_factor", "mean_distance_m"]).round({"mean_distance_m": 0,
                                                                                     "cost_ratio_est": 3})


def premise_page(df: pd.DataFrame, study_id: str) -> str:
    """The premise map's self-contained HTML page: banner, the two heatmaps and the per-cell table."""
    esc = html.escape
    sim = bool(df["labels_simulated"].any()) if len(df) else False
    top = banner("sim", "SIMULATED LABELS.", "Every number on this page is computed on simulated correctness labels "
                 "(docs/labels.md), not on measured model outputs.") if sim else ""
    parts = [f"""<h1>When does CR² pay? The premise map</h1>{top}
<p>Study <code>{esc(study_id)}</code>. Each cell re-prices every (query, state) with the device platform's prefill
throughput and memory bandwidth × the speed factor and states from the named channel distribution. Intervals:
95 % paired bootstrap over test queries (training and calibration held fixed). View: <code>v_premise</code>.</p>"""]
    if len(df):
        parts += [figure_html(f) for f in premise_figures(df)]
        parts.append("<h2>Per cell</h2>" + table_html(premise_table(df)))
    return page("cr2 premise map", "\n".join(parts))
