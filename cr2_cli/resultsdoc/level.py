"""docs/results.md, "The level of the equal-risk test": the newest stored level study of each scenario."""
from __future__ import annotations

from cr2.report.resultsdoc import level as page
from cr2_cli.resultsdoc.core import Doc


def render(doc: Doc) -> str:
    from cr2.studies.level import stored_level_verdicts
    from cr2_warehouse.level import newest_level_study

    studies = {}
    for key, _, _ in page.SCENARIOS:
        rows = None
        if doc.has(key):
            with doc.warehouse(key) as wh:
                rows = newest_level_study(wh)
        studies[key] = page.LevelStudy(rows, stored_level_verdicts(rows) if rows is not None and len(rows) else None)
    return page.render(page.LevelData(studies), doc)
