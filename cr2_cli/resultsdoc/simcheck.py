"""docs/results.md, "Simulator check (sim-to-real)": reads the stored sim-to-real runs — `cr2 simcheck` on MMLU-Pro,
`cr2 study simcheck` on the sweep's Phi-3 pool and on the ZeroEval ladders — and recomputes "met" and the sign counts
(cr2.studies.simcheck); cr2.report.resultsdoc.simcheck writes the section."""
from __future__ import annotations

from cr2.report.resultsdoc import simcheck as page
from cr2.report.simcheck import V1, V2
from cr2.studies.simcheck import router_savings, sign_counts, with_met
from cr2_cli.resultsdoc.core import Doc


def _latest_w_run(wh, routing: bool | None, **more) -> page.SimRun:
    """The newest `cr2 study simcheck` run of a warehouse (with routing, or without, where `routing` says)."""
    from cr2_warehouse.simcheck import simcheck_rows, simcheck_runs

    runs = simcheck_runs(wh)
    runs = runs[runs["run_id"].str.startswith("simcheck-w-")]
    if routing is not None:
        runs = runs[runs["has_routing"] == routing]
    if runs.empty:
        return page.SimRun(None, **more)
    rows = with_met(simcheck_rows(wh, runs.iloc[0].run_id))
    return page.SimRun(runs.iloc[0], rows, savings=router_savings(rows, V2) if routing else None, **more)


def _mmlu(doc: Doc) -> page.SimRun | None:
    from cr2_warehouse.simcheck import simcheck_rows, simcheck_runs

    if not doc.has("mmlu-pro"):
        return None
    with doc.warehouse("mmlu-pro") as wh:
        runs = simcheck_runs(wh)
        runs = runs[~runs["run_id"].str.startswith("simcheck-w-") & runs["has_routing"] & runs["has_fresh_fit"]]
        if runs.empty:
            return page.SimRun(None)
        rows = with_met(simcheck_rows(wh, runs.iloc[0].run_id))
    return page.SimRun(runs.iloc[0], rows, {s: sign_counts(rows, s) for s in (V2, V1)})


def _out_of_pool(doc: Doc) -> page.SimRun | None:
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.pools import newest_study, pool_study_runs

    if not doc.has("pools"):
        return None
    with doc.warehouse("pools") as wh:
        sid = newest_study(wh, "pools")
        runs = pool_study_runs(wh, sid) if sid else None
    hit = runs[runs["pool"] == page.PHI_POOL] if runs is not None and len(runs) else []
    home = doc.homes["pools"] / hit["home"].iloc[0] if len(hit) else None
    if home is None or not (home / "cr2.duckdb").is_file():
        return page.SimRun(None, found=False)
    with Warehouse(home, read_only=True) as wh:
        return _latest_w_run(wh, None, study=sid)


def _ladder(doc: Doc, key: str) -> page.SimRun | None:
    if not doc.has(key):
        return None
    with doc.warehouse(key) as wh:
        return _latest_w_run(wh, True)


def render(doc: Doc) -> str:
    return page.render(page.SimcheckData(_mmlu(doc), _out_of_pool(doc),
                                         {key: _ladder(doc, key) for key in page.LADDERS}), doc)
