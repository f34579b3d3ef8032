"""What every section of docs/results.md prints through one object: the verdict words (each the output of a verdict
function on a stored interval or a corrected test), the line that says a warehouse is missing, and the kind of labels
a number rests on."""
from __future__ import annotations

from typing import Any

import numpy as np

from cr2.config.scenarios import scenarios
from cr2.evaluation.families import change_verdict
from cr2.evaluation.statistics import saving_verdict, test_verdict
from cr2.evaluation.validity import validity_verdict
from cr2.labels import is_simulated
from cr2.report.table import plain_word


class Words:
    """The word of each verdict function's output. Here plain text ('–' where there is none); the results page's
    Doc (cr2_cli.resultsdoc.core) overrides `word` to mark each word and refuse a typed one."""

    def word(self, verdict: Any) -> str:
        return plain_word(verdict)

    def saving(self, lower: float, upper: float, p_adjusted: float | None = None) -> str:
        """cheaper / dearer / no difference detected of a saving's interval (and its family-wise p where given)."""
        return self.word(saving_verdict(lower, upper, p_adjusted))

    def test(self, direction: float, p_adjusted: float) -> str:
        """The word of a corrected test: its direction where p_adjusted < 0.05, else no difference detected."""
        return self.word(test_verdict(direction, p_adjusted))

    def bound(self, values, ses, bound: float) -> str:
        """no violation detected / violation detected of one guarantee's cells (cr2.evaluation.validity)."""
        return self.word(validity_verdict(np.asarray(values, dtype=float), np.asarray(ses, dtype=float), bound).verdict)

    def compare(self, lower: float, upper: float, p_adjusted: float | None = None) -> str:
        """larger / smaller / no difference detected of a difference's 95 % interval (a change, not a saving; with
        its family-wise p where given)."""
        return self.word(change_verdict(lower, upper, p_adjusted))


PLAIN = Words()


def homes() -> dict[str, tuple[str, str]]:
    """The warehouses of the shipped results (configs/scenarios.yaml): key → (home relative to the repository root,
    the command that builds it)."""
    return {key: (s.home, f"make {s.make}") for key, s in scenarios().items()}


def missing(key: str, what: str = "") -> str:
    """The line a section prints when its warehouse (or the run it needs) is not there."""
    home, command = homes().get(key, (key, "cr2 run"))
    return (f"_Not in this checkout{(': ' + what) if what else ''} — build the warehouse `{home}` with "
            f"`{command}` and run `make results-doc` again._\n")


def label_kind(source: str) -> str:
    """SIMULATED or MEASURED: every section names the kind of labels its numbers rest on."""
    return "SIMULATED" if is_simulated(source) else "MEASURED"
