"""The sim-to-real check's page (simcheck.html): frames in, one self-contained HTML string out."""
from __future__ import annotations

import html

import pandas as pd

from cr2.report.figures import axes, png
from cr2.report.page import banner, facts_table, img, page, table_html


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
