"""docs/results.md, "CR² across measured pools": computes the label diagnostics of every pool on the packaged
outputs file (cr2.studies.pools, cr2.studies.diagnostics), reads the newest pool sweep (`cr2 study pools`) and tests
across pools (cr2.studies.pools.signed_rank_tests); cr2.report.resultsdoc.pools writes the section."""
from __future__ import annotations

import numpy as np

from cr2.report.resultsdoc import pools as page
from cr2.studies.pools import references
from cr2_cli.resultsdoc.core import Doc

def _labels(doc: Doc) -> page.PoolLabels:
    from cr2.core.errors import Cr2Error
    from cr2.studies.diagnostics import reference_accuracy_gap_family
    from cr2.studies.pools import load_pool_rule, pool_label_table, select_pools
    from cr2_warehouse.measured_files import read_measured_correctness

    try:
        rule = load_pool_rule(doc.repo / "configs" / "pools" / "mmlu-pro.yaml")
        pools = select_pools(rule)
        names, correct = read_measured_correctness(doc.repo / "data")
        rows = pool_label_table(correct, names, pools)
        gaps = reference_accuracy_gap_family(correct, names, pools, page.RESAMPLES_LABELS, np.random.default_rng(0))
    except (OSError, Cr2Error) as e:  # the packaged outputs file or the rule is missing or unreadable here
        return page.PoolLabels(error=f"{type(e).__name__}: {e}")
    return page.PoolLabels("measured-mmlu-pro", rows, gaps)


def _sweep(doc: Doc) -> page.PoolSweep | None:
    from cr2.studies.pools import signed_rank_tests
    from cr2_warehouse.pools import newest_study, pool_diagnostics, pool_savings, pool_study_runs

    if not doc.has(page.KEY):
        return None
    with doc.warehouse(page.KEY) as wh:
        sid = newest_study(wh, "pools")
        if sid is None:
            return page.PoolSweep(None)
        runs, sav, diag = pool_study_runs(wh, sid), pool_savings(wh, sid), pool_diagnostics(wh, sid)
    return page.PoolSweep(sid, runs, sav, diag, signed_rank_tests(sav[sav["reference"] == references()[0]]))


def render(doc: Doc) -> str:
    return page.render(page.PoolsData(references(), _labels(doc), _sweep(doc)), doc)
