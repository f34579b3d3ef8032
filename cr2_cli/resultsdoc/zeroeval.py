"""docs/results.md, "The ZeroEval device-class ladders": reads the newest stored `cr2 study diagnostics` of each
ladder's warehouse; cr2.report.resultsdoc.zeroeval writes the section."""
from __future__ import annotations

from cr2.report.resultsdoc import zeroeval as page
from cr2.studies.pools import references
from cr2_cli.resultsdoc.core import Doc


def render(doc: Doc) -> str:
    from cr2_warehouse.pools import newest_study, pool_diagnostics, pool_savings, pool_study_runs

    found, missing = {}, []
    for key, name in page.LADDERS.items():
        if not doc.has(key):
            missing.append(doc.missing(key, f"the {name} ladder"))
            continue
        with doc.warehouse(key) as wh:
            sid = newest_study(wh, "diagnostics")
            if sid is None:
                missing.append(doc.missing(key, f"no `cr2 study diagnostics` of the {name} ladder is stored — run "
                                                f"`{page.diagnostics_command(name)}`"))
                continue
            found[key] = page.Ladder(sid, pool_study_runs(wh, sid), pool_savings(wh, sid), pool_diagnostics(wh, sid))
    return page.render(page.ZeroEvalData(found, tuple(missing), references()), doc)
