"""The sim-to-real check's report page (simcheck.html): frames in, one self-contained HTML string out."""
from __future__ import annotations

import base64
import html

import pandas as pd

from cr2.report import _axes, _png

STRUCTURE_ORDER = ("solvable_share", "accuracy", "accuracy_on_solvable", "correlation", "p_device_given_right",
                   "p_device_given_wrong", "p_device_given_largest_wrong")


def frontier_figure(points: pd.DataFrame, source: str) -> bytes:
    """Accuracy vs cost per router (mean over seeds of each λ point) under one label source."""
    fig, ax = _axes(f"Accuracy–cost per router — {source} labels", "mean normalised cost", "accuracy (solvable test)")
    for router, g in points[points["source"] == source].groupby("model"):
        g = g.sort_values("cost")
        ax.plot(g["cost"], g["accuracy"], marker="o", ms=3, lw=1.2, label=router)
    ax.legend(fontsize=8)
    return _png(fig)


def render_simcheck_html(meta: dict, structure: pd.DataFrame, savings: pd.DataFrame, cr2_curve: pd.DataFrame,
                         points: pd.DataFrame, fit: pd.DataFrame) -> str:
    """The page: a SIMULATED-vs-MEASURED banner, the run facts, the fitted shape, structure and routing tables."""
    esc = html.escape
    facts = "".join(f"<tr><th>{esc(str(k))}</th><td>{esc(str(v))}</td></tr>" for k, v in meta.items())
    figs = []
    for source in sorted(points["source"].unique()) if len(points) else []:
        png = base64.b64encode(frontier_figure(points, source)).decode()
        figs.append(f'<figure><img alt="frontier {esc(source)}" src="data:image/png;base64,{png}"></figure>')

    def table(frame: pd.DataFrame) -> str:
        return frame.to_html(index=False, border=0, na_rep="–", float_format=lambda v: f"{v:.4g}", escape=True)

    # sql-text: shown to the user, never run
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>cr2 sim-to-real check</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}
.sim{{background:#fdecea;border:2px solid #c0392b;padding:.8em 1em;margin:1em 0}}
table{{border-collapse:collapse;margin:.5em 0 1.5em}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}
th{{background:#f4f4f4}}img{{max-width:100%}}code{{background:#f4f4f4;padding:0 3px}}</style></head><body>
<h1>Sim-to-real check: SIMULATED vs MEASURED labels (MMLU-Pro)</h1>
<div class="sim"><b>SIMULATED and MEASURED labels side by side.</b> Columns <code>measured</code> are real model
outputs (data/measured/, MMLU-Pro authors' published 5-shot CoT outputs); every other number is computed on labels
from the named simulator, matched to the measured accuracy of every (model, category), on the same questions.</div>
<table>{facts}</table>
<p>Numbers: <code>cr2 sql "SELECT * FROM v_simcheck WHERE run_id = '{esc(str(meta.get('run_id')))}'"</code>;
mean, sd and 5–95 % band over simulator seeds. docs/labels.md explains the check.</p>
<h2>Fitted shape of simulated-irt-v2 (fresh fit on these data)</h2>{table(fit)}
<h2>Label structure</h2>{table(structure)}
<h2>Fixed-accuracy saving vs KNN (%), at targets measured and simulated labels both reach</h2>{table(savings)}
<h2>CR²: test risk and local rate vs λ (α as configured)</h2>{table(cr2_curve)}
<h2>Accuracy–cost points per router</h2>{''.join(figs)}
</body></html>"""
