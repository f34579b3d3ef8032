"""The equal-risk comparison's tables on docs/results.md (one scenario's run at one α) as objects
(cr2.report.table.Table): CR² against each baseline by question and rule, each router calibrated against its default
threshold, and the certified routers' validity over the re-splits. Every cell prints its test's stored word (its
family's Holm correction, cr2.evaluation.families.stored_word) through the caller's `word`."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from cr2.evaluation import families
from cr2.evaluation.statistics import saving_verdict
from cr2.report.cells import DASH, ci_cell, num, p_cell
from cr2.report.table import Table, Word, plain_word, rows_where
from cr2.routers import short_name

RULE_RISK = {"crc": "teacher disagreement, vs CR²'s frozen teacher", "crc-oracle": "oracle disagreement, on the labels",
             "crc-avoidable": "avoidable error, on the labels"}  # the risk each rule bounds


def stored_word(r: dict) -> str | None:
    """The stored word of one test, as the verdict function's own object; it must be the word of its stored Holm p
    (a warehouse edited by hand, or stored before schema 9 without one, is refused)."""
    p = r.get("p_holm")
    if p is None or pd.isna(p):
        if r.get("lower") is None or pd.isna(r.get("lower")):
            return None
        raise ValueError("an equal-risk test was stored without its family and Holm p (schema < 9): run `cr2 run` on "
                         "the warehouse again")
    return families.stored_word(r["lower"], r["upper"], p, r.get("verdict"))


def equal_risk_cell(r: dict | None, word: Word = plain_word) -> str:
    """'estimate [lower, upper] word (Holm p)': the test's stored word (its family's Holm correction, the one word every
    surface prints; a direction in bold) and the Holm p it rests on."""
    if r is None:
        return "– (not compared: a side was not evaluated)"
    text = ci_cell(r["estimate"], r["lower"], r["upper"])
    stored = stored_word(r)
    if stored is None:
        return text
    marked = word(saving_verdict(r["lower"], r["upper"], r["p_holm"]))  # the stored word (stored_word checked it)
    shown = f"**{marked}**" if stored in ("cheaper", "dearer") else marked
    return f"{text} {shown} (Holm p {p_cell(r.get('p_holm'), r.get('n_resamples'), '.2g', r.get('family_size'))})"


def _one(df: pd.DataFrame, **where) -> dict | None:
    d = rows_where(df, **where)
    return None if d.empty else d.iloc[0].to_dict()


class EqualRiskScores(Table):
    """Per baseline: CR²'s mean saving against it with both uncertified (gate quality) and certified under each rule
    at α (which score certifies at the lower cost). `means`: the run's equal_risk rows of metric mean_saving_pct."""

    def __init__(self, means: pd.DataFrame, baselines: Sequence[str], rules: Sequence[str], alpha: float,
                 word: Word = plain_word):
        rows = [[short_name(base), equal_risk_cell(_one(means, question="gate-quality", against=base), word),
                 *(equal_risk_cell(_one(means, question="certified-score", against=base, rule=rule, alpha=alpha), word)
                   for rule in rules)] for base in baselines]
        super().__init__(["baseline", "gate quality (both uncertified)",
                          *(f"certified at α, {rule} ({RULE_RISK[rule]})" for rule in rules)], rows)


class CalibratedVsDefault(Table):
    """Per router: its calibrated threshold at α against its default one, under each rule (mean saving, stored word)."""

    def __init__(self, means: pd.DataFrame, routers: Sequence[str], rules: Sequence[str], alpha: float,
                 word: Word = plain_word):
        rows = [[short_name(r), *(equal_risk_cell(_one(means, question="calibrated-vs-default", router=r, rule=rule,
                                                       alpha=alpha), word) for rule in rules)] for r in routers]
        super().__init__(["router", *(f"{rule} ({RULE_RISK[rule]})" for rule in rules)], rows)


class CertifiedValidityAt(Table):
    """Per certified router and crc rule at α (its re-split cells, certified_validity, read by
    cr2.report.validity.certified_verdicts): the decisive λ, the mean risk there ± its Monte-Carlo SE, the Holm p and
    the word of E[risk] ≤ α at every λ — the confirmatory re-check's where the screening re-splits flagged the family
    (both shown). An ltt rule's promise is over all λ at once, so per-λ re-splits cannot test it: it is left out."""

    def __init__(self, valid: pd.DataFrame, alpha: float, word: Word = plain_word):
        from cr2.report.validity import certified_verdicts, confirm_note

        v = certified_verdicts(valid[(valid["alpha"] - alpha).abs() < 1e-12])
        rows = []
        for r in v.itertuples(index=False):  # by method, as certified_validity orders the cells
            if not r.rule.startswith("crc"):
                continue
            tested = isinstance(r.verdict, str)
            rows.append([short_name(r.router), f"{r.rule} ({RULE_RISK.get(r.rule, r.rule)})",
                         num(r.worst_lam, ".3g") if tested else DASH,
                         f"{num(r.mean, '.4f')} ± {num(r.se, '.4f')}" if tested else DASH,
                         num(r.p_holm, ".2g") if tested else DASH,
                         word(r.verdict) + confirm_note(r, word) if tested else word(None)])
        super().__init__(["router", "rule (its risk)", "decisive λ (smallest p)",
                          "mean risk over re-splits there ± MC se", "Holm p", f"E[risk] ≤ α = {alpha:g} at every λ"],
                         rows)


class SeedEqualRisk(Table):
    """The equal-risk savings over the seeds of a seed study (cr2.evaluation.equal_risk.seed_spread) with their
    conclusion over seeds (cr2.evaluation.families.over_seeds: the t-interval, the t-test's Holm p per family, the
    word; a direction in bold)."""

    def __init__(self, spread: pd.DataFrame, over: pd.DataFrame, word: Word = plain_word):
        from cr2.report.cells import interval_cell, lam_cell, mean_sd_cell

        def said(w) -> str:
            return word(w) if w in (None, "no difference detected") else f"**{word(w)}**"

        rows = [[r.question, r.comparison, lam_cell(r.alpha), str(f.n), mean_sd_cell(f.mean, f.sd),
                 interval_cell(f.lo, f.hi), num(f.p_holm, ".2g"), said(f.verdict)]
                for r, f in zip(spread.itertuples(index=False), over.itertuples(index=False))]
        super().__init__(["question", "comparison", "α", "seeds", "mean ± sd", "95 % t-interval over seeds",
                          "p, Holm per family", "verdict"], rows)
