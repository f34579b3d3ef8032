"""The page's title and how it is made: the newest evaluation run and label source of every warehouse."""
from __future__ import annotations

from cr2.report.resultsdoc import header as page
from cr2_cli.resultsdoc.core import HOMES, Doc


def render(doc: Doc) -> str:
    from cr2_warehouse.repository import eval_run

    homes = []
    for key, (home, command) in HOMES.items():
        run_id = source = None
        if doc.has(key):
            with doc.warehouse(key) as wh:
                run_id = doc.newest_run(wh)
                source = None if run_id is None else eval_run(wh, run_id)["label_source"]
        homes.append(page.HomeRun(home, command, doc.has(key), run_id, source))
    return page.render(page.HeaderData(tuple(homes)), doc)
