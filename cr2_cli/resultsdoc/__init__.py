"""docs/results.md, generated: every table and every sentence with a number or a verdict is printed here from the
stored runs and studies of the shipped warehouses (`make results-doc`; `python -m cr2_cli.resultsdoc --help`).

One module per section, in page order (SECTIONS); each has `render(doc) -> str`: it picks the warehouses the section
reads (core.Doc), reads their frames through cr2_warehouse, and hands them to the library's section of the same name
(cr2.report.resultsdoc), which writes the prose and the tables. The page is refused when a verdict word in it did not
come from a verdict function (core.unbacked_words).
"""
from __future__ import annotations

import importlib
from pathlib import Path

from cr2_cli.resultsdoc.core import HOMES, Doc, unbacked_words, unmark

SECTIONS = ("header", "equal_risk", "intervals", "level", "default_scenario", "measured", "risks", "premise", "pools", "router_study",
            "zeroeval", "simcheck", "machine")


class UnbackedVerdict(ValueError):
    """A section printed a verdict word that no verdict function produced."""


def render_sections(doc: Doc, names: tuple[str, ...] = SECTIONS, *, marked: bool = False) -> str:
    """The page (or the named sections) as markdown; `marked` keeps the verdict marks (for tests)."""
    parts = []
    for name in names:
        text = importlib.import_module(f"cr2_cli.resultsdoc.{name}").render(doc).strip("\n")
        bad = unbacked_words(text)
        if bad:
            raise UnbackedVerdict(f"section {name!r} prints a verdict word no verdict function produced: "
                                  + "; ".join(repr(b) for b in bad[:5]))
        parts.append(text)
    page = "\n\n".join(parts) + "\n"
    return page if marked else unmark(page)


def default_homes(repo: Path) -> dict[str, Path]:
    return {key: repo / home for key, (home, _) in HOMES.items()}
