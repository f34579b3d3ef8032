"""The router study's tables (cr2.studies.routers): one formatting for `cr2 study routers` and docs/results.md."""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from cr2.report.cells import EM_DASH, num, p_cell
from cr2.report.markdown import markdown_table
from cr2.routers import short_name


def _num(v: Any, spec: str = "+.1f") -> str:
    return num(v, spec, missing_text=EM_DASH, no_negative_zero=True)


def _name(router: str) -> str:
    return short_name(router)


def unit_table(rows: pd.DataFrame, kind: str, word: Callable[[Any], str] = lambda w: w or "—") -> str:
    """Per unit of `kind` and candidate: saving vs certified KNN at equal risk [95 %], bootstrap p, Holm p over the
    candidate's family, the word, the 95 % upper bound and the share of the oracle headroom captured."""
    sub = rows[rows["kind"] == kind]
    if sub.empty:
        return f"(no {kind} of the study is stored)"
    out = []
    for r in sub.itertuples(index=False):
        out.append({"candidate": _name(r.candidate), kind: r.unit,
                    "saving vs certified KNN, % [95 %]": f"{_num(r.estimate)} [{_num(r.lower)}, {_num(r.upper)}]",
                    "p": p_cell(r.p_value, r.n_resamples),
                    "p, Holm": p_cell(r.p_holm, r.n_resamples, family_size=getattr(r, "family_size", None)),
                    "verdict": word(r.verdict),
                    "could save at most, %": _num(r.upper),
                    "oracle headroom vs KNN, %": _num(r.headroom, ".1f"),
                    "share of headroom": _num(r.headroom_share, ".2f")})
    return markdown_table(pd.DataFrame(out, dtype=object))


def summary_table(summary: pd.DataFrame, flops: dict[str, int] | None = None,
                  word: Callable[[Any], str] = lambda w: w or "—") -> str:
    """Per candidate over the pools: detectably cheaper / dearer / no difference (Holm over its pools), missing,
    medians, FLOPs per decision, and whether it meets the pre-registered success criterion."""
    from cr2.method.complexity import format_flops

    out = []
    for r in summary.itertuples(index=False):
        f = (flops or {}).get(r.candidate)
        out.append({"candidate": _name(r.candidate), "pools": r.pools, 
                    'pools "cheaper"': r.cheaper, '"dearer"': r.dearer, '"no difference detected"': r.no_difference,
                    "missing": r.missing,
                    "median saving, %": _num(r.median_saving), "median 95 % upper bound, %": _num(r.median_upper),
                    "median share of headroom": _num(r.median_headroom_share, ".2f"),
                    "FLOPs / decision": format_flops(f) if f else "—", "pre-registered success": word(r.outcome)})
    return markdown_table(pd.DataFrame(out, dtype=object))


def router_study_markdown(rows: pd.DataFrame, summary: pd.DataFrame, flops: dict[str, int] | None,
                          kinds: tuple[str, str], word: Callable[[Any], str] = lambda w: w or "—",
                          validity: pd.DataFrame | None = None) -> str:
    """The study's tables: the summary over the pools, then per unit of each of `kinds` (pools, scenarios;
    cr2.studies.routers), and the scenarios' validity (cr2.report.validity.certified_display)."""
    from cr2.report.validity import certified_display

    parts = [summary_table(summary, flops, word), *(unit_table(rows, kind, word) for kind in kinds)]
    if validity is not None and not validity.empty:
        shown = certified_display(validity, word=word)
        shown.insert(0, "scenario", validity["scenario"].to_numpy())
        parts.append(markdown_table(shown))
    return "\n".join(parts)


__all__ = ["router_study_markdown", "summary_table", "unit_table"]
