"""Section "Equal-risk comparison" and "Which router should I deploy?": reads each scenario's newest evaluation run
(table equal_risk, its certified re-splits, its deploy decisions), its newest seed study, the newest pool sweep, the
stored routing benchmark and the newest premise study with a certified KNN; cr2.report.resultsdoc.equal_risk writes
the section."""
from __future__ import annotations

import json

from cr2.report.resultsdoc import equal_risk as page
from cr2.report.resultsdoc.equal_risk import SCENARIOS
from cr2_cli.resultsdoc.core import Doc


def scenario_alpha(doc: Doc, key: str) -> float | None:
    """The α the newest evaluation run of scenario `key` compares at (stored with it), None without a run."""
    from cr2_warehouse.repository import stored_run_alpha

    with doc.warehouse(key) as wh:
        run_id = doc.newest_run(wh)
        return None if run_id is None else stored_run_alpha(wh, run_id)


def _scenario(doc: Doc, key: str, name: str) -> page.ScenarioRun:
    from cr2_warehouse.repository import (certified_validity, eval_run, newest_seed_study, run_alpha, run_deploy,
                                          run_equal_risk, seed_equal_risk)

    if not doc.has(key):
        return page.ScenarioRun(key, name, False)
    with doc.warehouse(key) as wh:
        run_id = doc.newest_run(wh)
        if run_id is None:
            return page.ScenarioRun(key, name, True)
        run, study = eval_run(wh, run_id), newest_seed_study(wh)
        return page.ScenarioRun(key, name, True, run_id, run["label_source"], run_alpha(run),
                                run_equal_risk(wh, run_id), certified_validity(wh, run_id), study,
                                None if study is None else seed_equal_risk(wh, study), *run_deploy(wh, run_id))


def _premise(doc: Doc) -> page.PremiseDeploy | None:
    from cr2.studies.premise_settings import command, mode
    from cr2_warehouse.premise import newest_premise_study, premise_studies, premise_view

    if not doc.has("default"):
        return None
    with doc.warehouse("default") as wh:
        study = newest_premise_study(wh, page.premise_reference())
        if study is None:
            return page.PremiseDeploy(None)
        v, settings = premise_view(wh, study), premise_studies(wh)
    row = next(settings[settings["study_id"] == study].itertuples(), None)
    cmd = None if row is None else command("default", None, row)
    return page.PremiseDeploy(study, v, mode(row) if cmd else None, cmd)


def render(doc: Doc) -> str:
    from cr2.studies.pools import across_pool_questions
    from cr2_warehouse.pools import newest_pool_study, pool_equal_risk

    study = questions = None
    if doc.has("pools"):
        with doc.warehouse("pools") as wh:
            study = newest_pool_study(wh)
            er = pool_equal_risk(wh, study) if study is not None else None
        questions = None if study is None or er.empty else across_pool_questions(er)
    bench = doc.repo / page.ROUTING_BENCH
    return page.render(page.EqualRiskData(
        tuple(_scenario(doc, key, name) for key, name in SCENARIOS), study, questions,
        json.loads(bench.read_text(encoding="utf-8")) if bench.is_file() else None, _premise(doc)), doc)
