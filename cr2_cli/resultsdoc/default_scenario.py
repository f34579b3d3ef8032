"""Section "Default scenario: the paper's protocol, paper beside ours": reads the full default run (its headline
tables, v_risk_vs_alpha, its pool) and the paper-beside-ours frames of `cr2 results --paper`;
cr2.report.resultsdoc.default_scenario writes the section."""
from __future__ import annotations

from cr2.report.headline import COST_ANCHOR, LAMS, PAPER_TARGETS
from cr2.report.resultsdoc import default_scenario as page
from cr2_cli.results import comparison_frames
from cr2_cli.resultsdoc.core import Doc
from cr2_cli.resultsdoc.scenario_stats import load


def render(doc: Doc) -> str:
    from cr2_warehouse.reads import pool_models
    from cr2_warehouse.repository import headline_results, view_for_run

    s = load(doc, page.KEY)
    if s is None:
        return page.render(page.DefaultData(None), doc)
    with doc.warehouse(page.KEY) as wh:
        f = headline_results(wh, s.run_id, targets=PAPER_TARGETS, cost_anchor=COST_ANCHOR, alpha=s.alpha, lams=LAMS)
        risk = view_for_run(wh, "v_risk_vs_alpha", s.run_id)
        pool = pool_models(wh)
    return page.render(page.DefaultData(s, f, risk, tuple(pool), comparison_frames(doc.homes[page.KEY], s.alpha)), doc)
