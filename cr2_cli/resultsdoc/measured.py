"""Section "Measured scenario (MMLU-Pro)": reads the newest evaluation run of the measured warehouse and the views
the section shows; cr2.report.resultsdoc.measured writes it."""
from __future__ import annotations

from cr2.report.headline import COST_ANCHOR, LAMS
from cr2.report.resultsdoc import measured as page
from cr2_cli.resultsdoc.core import Doc
from cr2_cli.resultsdoc.scenario_stats import load


def render(doc: Doc) -> str:
    from cr2_warehouse.reads import model_summary
    from cr2_warehouse.repository import headline_results, view_for_run

    s = load(doc, page.KEY)
    if s is None:
        return page.render(page.MeasuredData(None), doc)
    with doc.warehouse(page.KEY) as wh:
        ops = view_for_run(wh, "operating_points", s.run_id)
        data = page.MeasuredData(
            s, model_summary(wh, s.source, s.run["dist_id"], int(s.run.get("split_seed") or 0)),
            ops[ops["benchmark"] == "all"], *(view_for_run(wh, v, s.run_id) for v in (
                "v_risk_vs_alpha", "v_local_rate", "v_benchmark_at_cost", "v_subset_at_cost")),
            headline_results(wh, s.run_id, targets=(), cost_anchor=COST_ANCHOR, alpha=s.alpha,
                             lams=LAMS)["cost_assumptions"])
    return page.render(data, doc)
