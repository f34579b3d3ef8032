"""docs/results.md, "When CR² pays: the premise map": reads every stored premise study of the default and the
MMLU-Pro warehouse (premise_studies, v_premise) and tests the trend of the saving with device speed
(cr2.studies.premise.speed_trends); cr2.report.resultsdoc.premise writes the section."""
from __future__ import annotations

import pandas as pd

from cr2.report.resultsdoc import premise as page
from cr2.studies.premise import COMPARISONS, premise_cells, speed_trends
from cr2.studies.premise_settings import command, mode
from cr2_cli.resultsdoc.core import Doc


def _scenario(doc: Doc, key: str, title: str, config: str | None) -> page.PremiseScenario:
    from cr2_warehouse.premise import premise_studies, premise_view

    if not doc.has(key):
        return page.PremiseScenario(key, title, config, None)
    with doc.warehouse(key) as wh:
        st = premise_studies(wh)
        views = {sid: premise_view(wh, sid) for sid in st["study_id"]}
    return page.PremiseScenario(key, title, config, tuple(
        page.PremiseStudy(row, mode(row), command(key, config, row),
                          premise_cells(views[row.study_id]) if len(views[row.study_id]) else pd.DataFrame())
        for row in st.itertuples()))


def render(doc: Doc) -> str:
    scenarios = tuple(_scenario(doc, *s) for s in page.SCENARIOS)
    tag = "|".join(COMPARISONS[0][:2])  # CR² retrained vs KNN, mean over targets
    found = [st.cells for sc in scenarios if sc.studies for st in page.shown(sc.studies)]
    trends = speed_trends([(cs["speed_factor"].to_numpy(float), cs[tag].to_numpy(float)) for cs in found],
                          page.TREND_SEED, page.TREND_PERMUTATIONS) if found else ()
    return page.render(page.PremiseData(scenarios, COMPARISONS, tuple(trends)), doc)
