"""docs/results.md, "The ZeroEval device-class ladders": the stored `cr2 study diagnostics` of each ladder's
warehouse — savings vs KNN and vs the best single model with paired-bootstrap intervals (Holm over the ladders ×
methods family) and the label diagnostics (views v_pool_savings, v_pool_diagnostics)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cr2.report.cells import PAGE
from cr2.report.pools import PoolDiagnostics
from cr2.report.resultsdoc.pools import (cell, changed_sentence, compared, family_sizes, num, savings_table,
                                         stored_family, verdict_counts)
from cr2.report.resultsdoc.words import PLAIN, Words, label_kind

LADDERS = {"zeroeval-gemma": "gemma", "zeroeval-qwen": "qwen"}


def diagnostics_command(name: str) -> str:
    return f"cr2 study diagnostics -c configs/zeroeval-{name}.yaml --home var/zeroeval-{name}"


@dataclass(frozen=True)
class Ladder:
    """A ladder's newest `cr2 study diagnostics`: its id, its pool row, v_pool_savings and v_pool_diagnostics."""

    study: str
    runs: pd.DataFrame
    savings: pd.DataFrame
    diagnostics: pd.DataFrame


@dataclass(frozen=True)
class ZeroEvalData:
    ladders: dict  # ladder key (LADDERS) → Ladder, for the ladders that store one
    missing: tuple[str, ...]  # the missing-warehouse or missing-study lines of the others
    references: tuple[str, str]  # cr2.studies.pools.references(): the reference router, then the best single model


def _reading(w: Words, sav: pd.DataFrame, runs: pd.DataFrame, references: tuple[str, str]) -> str:
    """Per ladder, CR² and the routers whose verdict has a direction — every number and word from the rows."""
    out = []
    for ref, what in zip(references, ("KNN", "the best single model")):
        fam = stored_family(sav[(sav["reference"] == ref) & sav["method"].isin(compared())], "mean_saving_pct", "lower_pct",
                        "upper_pct")
        cr2 = fam[fam["method"] == "cr2"]
        per = "; ".join(f"{r.pool} {cell(r.mean_saving_pct, r.lower_pct, r.upper_pct)} % "
                        f"({w.saving(r.lower_pct, r.upper_pct, r.p_holm)})" for r in cr2.itertuples(index=False))
        held = fam[fam["word_holm"].isin(("cheaper", "dearer"))]
        sentence = (f"Against {what}, CR² (each ladder's stored word: Holm within the ladder over its "
                    f"{family_sizes(fam)} learned routers): {per}.")
        if len(held):
            sentence += (f" A direction for {len(held)} of the {len(fam)} (ladder, router) pairs: "
                         + "; ".join(f"{r.method} on {r.pool} {w.saving(r.lower_pct, r.upper_pct, r.p_holm)} "
                                     f"({cell(r.mean_saving_pct, r.lower_pct, r.upper_pct)} %)"
                                     for r in held.itertuples(index=False)) + ".")
        else:
            sentence += f" No learned router has a direction on any ladder ({len(fam)} tests)."
        out.append(sentence)
    ratio = runs.set_index("pool")["cost_ratio_realised"]
    side = "; ".join(f"{p} {num(v, '.2f')} ({'below' if v < 1 else 'above'} 1)" for p, v in ratio.items()
                     if v is not None and np.isfinite(v))
    se = "; ".join(f"{p}: {int(n):,} test queries, at most {100 * np.sqrt(0.25 / n):.1f} points"
                   for p, n in zip(runs["pool"], runs["n_test"]) if n)
    out.append(f"c_dev/c_edge per ladder (realised cost, test rows; below 1: the device costs less on average than "
               f"the cheapest edge option): {side}. These sets are small — the standard error of a rate: {se}.")
    return "\n\n".join(out) + "\n"


def render(data: ZeroEvalData, words: Words = PLAIN) -> str:
    found, missing, references = data.ladders, list(data.missing), data.references
    out = ["## The ZeroEval device-class ladders: diagnostics and comparisons", "",
           "Each ladder is one device model with three bigger models of its own family on the edge, on GSM8K, "
           "CRUXEval and MATH-L5 (the Qwen2.5 ladder has no GSM8K), labelled by the ZeroEval project's published "
           "outputs (docs/measured.md). Per ladder, `cr2 study diagnostics` reads the newest evaluation run of its "
           "warehouse and stores the same comparisons and diagnostics as a pool of the sweep (views v_pool_savings, "
           "v_pool_diagnostics). Paired bootstrap over the test queries; test-query noise only.", "",
           "Commands that rebuild what it reads:", "", "```bash",
           *(f"make run-{n}   # cr2 run -c configs/zeroeval-{n}.yaml --home var/zeroeval-{n}"
             for n in LADDERS.values()),
           *(diagnostics_command(n) for n in LADDERS.values()), "make results-doc", "```", ""]
    out += missing
    if not found:
        return "\n".join(out)
    runs = pd.concat([f.runs for f in found.values()], ignore_index=True)
    sav = pd.concat([f.savings for f in found.values()], ignore_index=True)
    diag = pd.concat([f.diagnostics for f in found.values()], ignore_index=True)
    facts = "; ".join(
        f"{f.runs['pool'].iloc[0]}: study `{f.study}` of run `{f.runs['run_id'].iloc[0]}`, "
        f"{label_kind(f.runs['label_source'].iloc[0])} labels ({f.runs['label_source'].iloc[0]}), "
        f"{int(f.runs['n_test'].iloc[0]):,} test queries ({int(f.runs['n_evaluable'].iloc[0]):,} solvable), "
        f"{int(f.runs['n_resamples'].iloc[0]):,} resamples" for f in found.values())
    ratio = runs.set_index("pool")["cost_ratio_realised"]
    out += [f"{facts}.", "",
            "Mean fixed-accuracy saving (%) [95 % interval], positive = the method costs less; the word after a "
            "learned method's cell is its verdict with Holm over the table's ladders × methods family (each p from "
            "its interval's own resamples); the full-information reference is a bound, without a word.", ""]
    for ref in references:
        out += [savings_table(words, sav, ref, ratio, label="ladder"), ""]
    for ref, what in zip(references, ("KNN", "the best single model")):
        table, changed = verdict_counts(sav, ref)
        out += [changed_sentence(changed, f"the savings against {what}", label="ladder"), ""]
    out += [PoolDiagnostics(diag, label="ladder", style=PAGE, headroom_spec="+.1f",
                            why="no ladder's diagnostics are stored").markdown(), "", _reading(words, sav, runs, references),
            "The point estimates of the tables carry no claim by themselves: a difference is stated only where its "
            "interval (and the Holm-corrected p) says so.", ""]
    return "\n".join(out)
