"""docs/results.md, "What α bounds, and the risks users feel": reads, per scenario, the newest full evaluation run's
per-rule risks (v_realised_risk, the stored risk-vs-α tests), its certified re-split cells and the newest
`cr2 guarantees` run; cr2.report.resultsdoc.risks writes the section."""
from __future__ import annotations

import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.evaluation.own_risk import MINUS_ALPHA, vs_alpha
from cr2.report.resultsdoc import risks as page
from cr2_cli.resultsdoc.core import Doc
from cr2_cli.resultsdoc.equal_risk import scenario_alpha


def _read(doc: Doc, key: str, title: str, config: str | None) -> page.RiskScenario:
    from cr2.evaluation.metrics import RISK_ALL_METRICS
    from cr2.report.validity import deployed_table_risk
    from cr2_warehouse.reads import certified_test_risk
    from cr2_warehouse.repository import (certified_validity, eval_run, methods_of_run, newest_eval_run,
                                          newest_guarantees, realised_risk_ci, run_alpha, run_intervals)

    if not doc.has(key):
        return page.RiskScenario(key, title, config)
    with doc.warehouse(key) as wh:
        run_id = newest_eval_run(wh, full_only=True)
        rules, certified = page.RuleRun(None), page.Certified(None)
        if run_id is not None:
            run = eval_run(wh, run_id)
            alpha = run_alpha(run)  # the α the run compares at, stored with it
            rr = realised_risk_ci(wh, run_id, alpha, HEADLINE_LAMS)
            tests = pd.concat([run_intervals(wh, run_id, m) for m in MINUS_ALPHA.values()], ignore_index=True)
            rules = page.RuleRun(run_id, run, alpha, rr if rr.empty else vs_alpha(rr, alpha, tests))
            certified = page.Certified(run_id, run, certified_validity(wh, run_id), methods_of_run(wh, run_id),
                                       deployed_table_risk(certified_test_risk(wh, run_id,
                                                                               tuple(RISK_ALL_METRICS.values()))))
        guarantees = newest_guarantees(wh)
    return page.RiskScenario(key, title, config, rules, certified, guarantees, scenario_alpha(doc, key))


def render(doc: Doc) -> str:
    return page.render(page.RisksData(tuple(_read(doc, *s) for s in page.SCENARIOS)), doc)
