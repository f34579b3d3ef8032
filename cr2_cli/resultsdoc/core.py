"""The frame of the generated docs/results.md: which warehouses it reads, and the one way a verdict word gets in.

Every word that states a result (cheaper, dearer, no difference detected, no violation detected, violation detected,
larger, smaller) reaches the page through `Doc.word` — the output of cr2's verdict functions on a stored interval or a
corrected test — and is marked while the page is rendered. `unbacked_words` finds any such word that was typed
instead; the generator refuses to write a page that has one. Hand-written text explains method and meaning; where it
must name a word (a definition), it quotes it ("cheaper") or sets it as code.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator


from cr2.evaluation.statistics import Verdict
from cr2.report.resultsdoc.words import Words, homes, missing
from cr2.studies.level import ABOVE, WITHIN
from cr2.studies.routers import FAILS, SUCCEEDS

STUDY_OUTCOMES = (FAILS, SUCCEEDS)  # the router study's pre-registered criterion (longest first: one match each)

VERDICT_WORDS = ("no difference detected", "cheaper", "dearer", "no violation detected", "violation detected", "larger",
                 "smaller", "matches its exact expectation", "differs from its exact expectation", *STUDY_OUTCOMES,
                 WITHIN, ABOVE)  # the last two: cr2.studies.level.level_verdict
OPEN, CLOSE = "\u2e22", "\u2e23"  # ⸢word⸣: produced by a verdict function; removed from the written page
RETIRED_WORDS = ("holds", "fails")  # validity words no verdict function produces: any on the page was typed
_WORD = re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in (*VERDICT_WORDS, *RETIRED_WORDS)) + r")(?![\w-])",
                   re.IGNORECASE)
_EXEMPT = re.compile(OPEN + r"[^" + CLOSE + r"]*" + CLOSE + r"|`[^`\n]*`|\"[^\"\n]*\"|<!--.*?-->", re.DOTALL)

# the warehouses of the shipped results (configs/scenarios.yaml): key → default home (relative to the repository root)
# and the command that builds it; `make results-doc` reads these, a test passes other homes
HOMES = homes()


def mark(word: str) -> str:
    return f"{OPEN}{word}{CLOSE}"


def unbacked_words(text: str) -> list[str]:
    """Every verdict word of `text` that no verdict function produced (outside marks, code spans, quotes and HTML
    comments), each with a few words of context."""
    rest = _EXEMPT.sub(" ", text)
    return [rest[max(m.start() - 40, 0):m.end() + 20].replace("\n", " ") for m in _WORD.finditer(rest)]


def unmark(text: str) -> str:
    return text.replace(OPEN, "").replace(CLOSE, "")


@dataclass
class Doc(Words):
    """What a section renders with: the warehouse homes (key → folder) and the marked verdict words (its saving,
    test, bound and compare: cr2.report.resultsdoc.words.Words over this `word`)."""

    homes: dict[str, Path]
    repo: Path = field(default_factory=lambda: Path(__file__).resolve().parents[2])

    # ---- verdict words: the only way one reaches the page
    def word(self, verdict: Verdict | None) -> str:
        """A verdict function's output, marked; '–' where it had none (no finite interval). A plain string — a word
        typed or taken from a constant — is refused: only a computed verdict reaches the page."""
        if verdict is None:
            return "–"
        if not isinstance(verdict, Verdict):
            raise TypeError(f"{verdict!r} was not produced by a verdict function (cr2.evaluation.statistics.Verdict)")
        if verdict.lower() not in VERDICT_WORDS:
            raise ValueError(f"{verdict!r} is not a verdict word ({', '.join(VERDICT_WORDS)})")
        return mark(verdict)

    # ---- warehouses
    def has(self, key: str) -> bool:
        home = self.homes.get(key)
        return home is not None and (home / "cr2.duckdb").is_file()

    @contextmanager
    def warehouse(self, key: str) -> Iterator:
        from cr2_warehouse.db import Warehouse

        with Warehouse(self.homes[key], read_only=True) as wh:
            yield wh

    @staticmethod
    def newest_run(wh) -> str | None:
        """The newest evaluation run of a warehouse, None where it has none."""
        from cr2.core.errors import DataValidationError
        from cr2_warehouse.repository import newest_eval_run

        try:
            return newest_eval_run(wh)
        except DataValidationError:
            return None

    def missing(self, key: str, what: str = "") -> str:
        """The line a section prints when its warehouse (or the run it needs) is not there."""
        return missing(key, what)
