"""Table cells: how every number, share, interval, p-value and count cr2 prints or publishes is written as text.

One function per rule. The command line (cr2_cli), the results page (cr2_cli/resultsdoc), the HTML report and the
Prefect artifacts (flows/artifacts.py) write their cells with these and format no number themselves. A missing value
(None, NaN) is written as the caller's `missing` text, never 'nan'.

missing-value marks: `DASH` (–) in the report's and the results page's tables, `EM_DASH` (—) in the command line's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

import pandas as pd

DASH = "–"
EM_DASH = "—"


def missing(value: Any) -> bool:
    """Whether a cell value is missing (None, NaN, NA)."""
    return value is None or bool(pd.isna(value))


def num(value: Any, spec: str, scale: float = 1.0, suffix: str = "", missing_text: str = DASH, *,
        minus: str = "-", no_negative_zero: bool = False) -> str:
    """value × scale in format `spec`, then `suffix`; `missing_text` where there is no value. `minus` replaces the
    hyphen-minus of the formatted number (every surface of cr2 keeps the hyphen-minus: one minus sign); `no_negative_zero`
    writes −0.0 as 0.0."""
    if missing(value):
        return missing_text
    v = float(value) * scale
    if no_negative_zero:
        v += 0.0
    text = format(v, spec)
    return (text if minus == "-" else text.replace("-", minus)) + suffix


def pct(share: Any, spec: str = ".1f", missing_text: str = DASH) -> str:
    """A share in [0, 1] as 'x.y %'."""
    return num(share, spec, 100, " %", missing_text)


def ci_cell(estimate: Any, lower: Any, upper: Any, spec: str = "+.1f", missing_text: str = DASH, *,
            minus: str = "-") -> str:
    """'estimate [lower, upper]' (a 95 % interval); `missing_text` without an estimate, the estimate alone without
    bounds."""
    if missing(estimate):
        return missing_text
    if missing(lower) or missing(upper):
        return num(estimate, spec, minus=minus)
    return f"{num(estimate, spec, minus=minus)} [{num(lower, spec, minus=minus)}, {num(upper, spec, minus=minus)}]"


def interval_cell(lower: Any, upper: Any, spec: str = "+.1f", missing_text: str = DASH) -> str:
    """'[lower, upper]' of an interval shown without its estimate; `missing_text` without a lower bound."""
    return missing_text if missing(lower) else f"[{num(lower, spec)}, {num(upper, spec)}]"


def pm_cell(value: Any, se: Any, digits: int = 4, missing_text: str = DASH) -> str:
    """'value ± SE' (a Monte-Carlo standard error) to `digits` decimals; the value alone without an SE."""
    if missing(value):
        return missing_text
    return f"{value:.{digits}f}" + ("" if missing(se) else f" ± {se:.{digits}f}")


def mean_sd_cell(mean: Any, sd: Any, spec: str = "+.1f") -> str:
    """'mean ± sd' over seeds (the sd without the sign of `spec`)."""
    return f"{num(mean, spec)} ± {num(sd, spec.lstrip('+'))}"


def p_cell(p: Any, n_resamples: Any, digits: str = ".3g", family_size: Any = None) -> str:
    """A bootstrap p (or its Holm adjustment over a family of `family_size`): 0 — no resample on the other side of 0 —
    reads "< 2/B" (a two-sided bootstrap p moves in steps of 2 / B), and a Holm-adjusted 0 "< m·2/B" (Holm multiplies
    by at most m), since such a p is only known to be below that resolution; '—' where undefined."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return EM_DASH
    if float(p) == 0.0 and not missing(n_resamples) and float(n_resamples) > 0:
        from cr2.evaluation.families import p_resolution

        return f"< {p_resolution(float(n_resamples), None if missing(family_size) else int(family_size)):.2g}"
    return format(float(p), digits)


def span(values: Iterable, spec: str = ".3f", *, minus: str = "-") -> str:
    """'min–max' of the finite values ('x' when they agree as written, 'lo to hi' when one is negative, '–' when there
    are none)."""
    v = [float(x) for x in values if not missing(x)]
    if not v:
        return DASH
    lo, hi = num(min(v), spec, minus=minus), num(max(v), spec, minus=minus)
    return lo if lo == hi else f"{lo} to {hi}" if min(v) < 0 else f"{lo}–{hi}"


def lam_cell(lam: Any, missing_text: str = DASH) -> str:
    """A λ (or α) as its shortest text ('2', '0.5')."""
    return missing_text if missing(lam) else f"{lam:g}"


def count_cell(n: Any, missing_text: str = DASH) -> str:
    """A count with thousands separators."""
    return missing_text if missing(n) else f"{int(n):,}"


def sql_cell(value: Any) -> str:
    """A query result's cell as printable text (cr2.core.boundary.printable: no terminal control sequences, so a
    table measures what it shows); a missing value as SQL names it (NULL), a float to 6 significant digits."""
    from cr2.core.boundary import printable

    if value is None or (isinstance(value, float) and value != value):
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"
    return printable(str(value))


COUNTS_HEAD = '"cheaper" / "dearer" / "no difference detected"'  # what counts_cell counts, in its order


def counts_cell(verdicts: Iterable) -> str:
    """'k / k / k' of the verdicts "cheaper" / "dearer" / "no difference detected" (undefined ones left out)."""
    v = [x for x in verdicts if x is not None]
    return " / ".join(str(sum(x == w for x in v)) for w in ("cheaper", "dearer", "no difference detected"))


@dataclass(frozen=True)
class Style:
    """How one surface writes its numbers: its minus sign and its missing-value mark (the rules above, applied with
    both fixed)."""

    minus: str = "-"
    missing_text: str = DASH

    def num(self, value: Any, spec: str = ".1f") -> str:
        return num(value, spec, missing_text=self.missing_text, minus=self.minus)

    def ci(self, estimate: Any, lower: Any, upper: Any, spec: str = "+.1f") -> str:
        return ci_cell(estimate, lower, upper, spec, self.missing_text, minus=self.minus)

    def span(self, values: Iterable, spec: str = ".3f") -> str:
        return span(values, spec, minus=self.minus)


PAGE = Style("-", DASH)  # the results page's tables: '–' where a value is missing
TERMINAL = Style("-", EM_DASH)  # the study commands' tables (and the page's pool diagnostics, which print theirs)
