"""Section "Is a difference real? 95 % intervals and seed variability": reads the default and the measured scenario
(scenario_stats.load); cr2.report.resultsdoc.intervals writes the section."""
from __future__ import annotations

from cr2.report.resultsdoc import intervals as page
from cr2_cli.resultsdoc.core import Doc
from cr2_cli.resultsdoc.scenario_stats import load


def render(doc: Doc) -> str:
    return page.render(page.IntervalsData({key: load(doc, key) for key in page.SCENARIOS}), doc)
