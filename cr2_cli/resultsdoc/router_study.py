"""docs/results.md, "The router study": reads the stored `cr2 study routers` rows and each unit's run and labels;
cr2.report.resultsdoc.router_study writes the section."""
from __future__ import annotations

from cr2.report.resultsdoc import router_study as page
from cr2.report.resultsdoc.words import label_kind
from cr2_cli.resultsdoc.core import Doc


def render(doc: Doc) -> str:
    from cr2.studies.routers import POOLS, SCENARIOS, study_id, study_scenarios
    from cr2_warehouse.pools import pool_study_runs
    from cr2_warehouse.router_study import study_results, study_validity

    if not doc.has(page.KEY):
        return page.render(page.RouterStudyData(None), doc)
    homes = {k: str(doc.homes[k]) for k in study_scenarios() if k in doc.homes}  # the scenarios a study may name
    study, rows, summary, flops = study_results(str(doc.repo / page.STUDY), str(doc.homes[page.KEY]), homes,
                                                shipped=False)
    if rows["estimate"].notna().sum() == 0:
        return page.render(page.RouterStudyData(study, rows, summary, flops), doc)
    sources, run_ids = {}, {}
    for kind, key in [(POOLS, page.KEY), *[(SCENARIOS, s) for s in study.scenarios]]:
        if doc.has(key):
            with doc.warehouse(key) as wh:
                runs = pool_study_runs(wh, study_id(study, kind))
            for r in runs.itertuples(index=False):
                sources[r.pool] = label_kind(r.label_source)
                run_ids[r.pool] = r.run_id
    validity = study_validity(str(doc.repo / page.STUDY), homes, shipped=False)
    return page.render(page.RouterStudyData(study, rows, summary, flops, validity, (POOLS, SCENARIOS),
                                            (study_id(study, POOLS), study_id(study, SCENARIOS)), sources, run_ids),
                       doc)
