"""docs/results.md, "When CR² pays: the premise map": per cell of the device-speed × channel grid, CR²'s
fixed-accuracy saving vs KNN and vs the best single model, what re-calibration alone loses against retraining, the
risk at α — for every stored premise study of the default and the MMLU-Pro warehouse (fine-tuned and from-scratch
retraining side by side, each named by its study id and the command that reproduces it), a cell-by-cell
comparison of the two retraining modes, and a tested trend of the saving with device speed.

Every number comes from v_premise / premise_cells / premise_studies (cr2_warehouse.premise); every verdict word from
cr2's verdict functions through `words`: per interval, and under Holm over the family the page reads together (the
cells of one study, per comparison; cells × paper targets; the trend tests of the page). p-values of stored
intervals: the p stored beside each interval (its own bootstrap resamples); the trend: cr2.evaluation.statistics.spearman_permutation_test (seeded).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from cr2.evaluation.families import change_verdict
from cr2.evaluation.fixed_accuracy import PAPER_TARGETS
from cr2.evaluation.statistics import saving_verdict
from cr2.evaluation.verdict_counts import cell_verdict_counts
from cr2.report.premise_map import (PremiseModes, PremiseRecalibration, PremiseSavings, SpeedTrendTable,
                                   target_counts)
from cr2.report.resultsdoc.words import PLAIN, Words, homes, label_kind, missing

SCENARIOS = (("default", "Default scenario", None),
             ("mmlu-pro", "Measured scenario (MMLU-Pro)", "configs/mmlu-pro-measured.yaml"))
TREND_SEED = 0  # the permutation test's generator (the page is deterministic)
TREND_PERMUTATIONS = 10_000


@dataclass(frozen=True)
class PremiseStudy:
    """One stored premise study: its premise_studies row, its settings in words (cr2.studies.premise_settings) and
    its cells (cr2.studies.premise.premise_cells of its v_premise rows; empty: none)."""

    row: Any
    mode: str
    command: str | None
    cells: pd.DataFrame


@dataclass(frozen=True)
class PremiseScenario:
    key: str
    title: str
    config: str | None
    studies: tuple[PremiseStudy, ...] | None  # oldest first; None: no warehouse


@dataclass(frozen=True)
class PremiseData:
    scenarios: tuple[PremiseScenario, ...]
    comparisons: tuple  # cr2.studies.premise.COMPARISONS: (method, reference, sign, name) per comparison
    trends: tuple = ()  # cr2.studies.premise.speed_trends of the shown studies, in page order (shown)


def shown(studies: tuple[PremiseStudy, ...]) -> list[PremiseStudy]:
    """The studies a scenario shows: the oldest with cells of each retraining mode, from scratch first."""
    by_mode: dict[str, PremiseStudy] = {}
    for st in studies:
        if not st.cells.empty:
            by_mode.setdefault(str(st.row.retrain_from), st)
    return [by_mode[m] for m in ("scratch", "base") if m in by_mode] + [
        st for m, st in by_mode.items() if m not in ("scratch", "base")]


# ---------------------------------------------------------------- words and cells of the tables
def _verdict_counts(cs: pd.DataFrame, tag: str, loss: bool = False) -> dict:
    return cell_verdict_counts(cs[tag], cs[tag + "|lo"], cs[tag + "|hi"], cs[tag + "|holm"],
                               change_verdict if loss else saving_verdict)


def _counts_text(counts: dict) -> str:
    order = ("cheaper", "dearer", "larger", "smaller", "no difference detected", "not reached")
    return ", ".join(f"\"{w}\" in {counts[w]}" for w in order if counts.get(w))


# ---------------------------------------------------------------- one study
def _study_tables(w: Words, cs: pd.DataFrame) -> str:
    answer = PremiseSavings(cs, w.word).markdown()
    recal = PremiseRecalibration(cs, w.word).markdown()
    return (f"Cells in order of the device / edge cost ratio; CR² retrained:\n\n{answer}\n"
            f"**Re-calibration without retraining** (mean extra cost of the frozen base gate re-calibrated on the cell "
            f"over the gate retrained on it, %; positive: re-calibration alone costs more; the word is that of the "
            f"change):\n\n{recal}")


def _answer(cs: pd.DataFrame, kind: str, comparisons: tuple) -> str:
    kt, bt, lt = (f"{m}|{r}" for m, r, _, _ in comparisons)
    n = len(cs)
    lines = [f"**In numbers ({kind}).** {n} cells, ĉ ratio {cs['cost_ratio'].min():.3f} … "
             f"{cs['cost_ratio'].max():.3f}; {int(cs['n_evaluable'].iloc[0]):,} evaluable test queries, "
             f"{int(cs['n_resamples'].iloc[0]):,} resamples, α = {cs['alpha'].iloc[0]:g}."]
    for tag, name, loss in ((kt, "CR² retrained vs KNN (mean over targets)", False),
                            (bt, "CR² retrained vs the best single model", False),
                            (lt, "What re-calibration alone loses against retraining", True)):
        h = _verdict_counts(cs, tag, loss=loss)
        est = cs[tag].dropna()
        rng = f"; point estimates {est.min():+.1f} … {est.max():+.1f} %" if len(est) else ""
        lines.append(f"- {name}: under Holm over the {n} cells {_counts_text(h)}{rng}.")
    for tag, name in ((kt, "KNN"), (bt, "the best single model")):
        h = {}
        for _, c in cs.iterrows():
            for k, v in target_counts(c, tag, holm=True)[1].items():
                h[k] = h.get(k, 0) + v
        lines.append(f"- At the paper's targets {PAPER_TARGETS[0]:.2f}–{PAPER_TARGETS[-1]:.2f} vs {name} "
                     f"({n * len(PAPER_TARGETS)} (cell, target) pairs), under Holm over the pairs: "
                     f"{_counts_text(h)}.")
    rmax, rmean = cs["cr2-retrain|risk_max"].dropna(), cs["cr2-retrain|risk_mean"].dropna()
    if len(rmax):
        lines.append(f"- CR²'s (retrained) test risk at α = {cs['alpha'].iloc[0]:g}: mean over the λ grid "
                     f"{rmean.min():.4f} … {rmean.max():.4f} per cell, worst λ {rmax.min():.4f} … {rmax.max():.4f} "
                     "(one test draw per λ).")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- across studies: trend, fine-tune vs scratch
def _trends(w: Words, found: list, trends: tuple) -> str:
    if not found:
        return ""
    out = ["### Does CR²'s saving vs KNN change with device speed? (trend test)\n",
           "Spearman's ρ between the device speed factor and CR²'s mean saving vs KNN over a study's cells, with a "
           f"two-sided permutation p ({TREND_PERMUTATIONS:,} seeded permutations of the savings; "
           "cr2.evaluation.statistics.spearman_permutation_test), Holm over the studies below. The word is the direction of "
           "CR²'s saving as the device gets faster (\"cheaper\": the saving grows, \"dearer\": the deficit grows). The "
           "cells share their test queries and base fits, so the test is of the ordering across this grid, not of "
           "independent draws.\n"]
    out.append(SpeedTrendTable(found, trends, w.word).markdown())
    return "\n".join(out)


def _compare_modes(w: Words, title: str, a: tuple, b: tuple, comparisons: tuple) -> str:
    """Cell by cell: the same comparisons in two studies that differ only in how the retrained variant is trained."""
    (sa, ma, ca), (sb, mb, cb) = a, b
    table = PremiseModes(ca, cb, ma, mb, w.word)
    j, stats = table.cells, table.stats
    if j.empty:
        return f"_{title}: the two studies share no cell._\n"
    summary = []
    for method, ref, _, name in comparisons:
        st = stats[f"{method}|{ref}"]
        summary.append(f"- {name}: the same word (Holm) in {st['same']} of {len(j)} cells; a direction detected in "
                       f"both studies in {st['both']}, only fine-tuned in {st['only_a']}, only from scratch in "
                       f"{st['only_b']}; the from-scratch point estimate is above the fine-tuned one in {st['above']} "
                       f"of {len(j)} cells.")
    return (f"{title}: `{sa}` ({ma}) vs `{sb}` ({mb}), {len(j)} common cells, mean over targets, %. Each study's own "
            "interval and word, Holm within its study; the difference between the two studies has no stored "
            "interval, so it is not judged — only counted.\n\n" + table.markdown() + "\n"
            + "\n".join(summary) + "\n")


# ---------------------------------------------------------------- the section
def _scenario(w: Words, sc: PremiseScenario, comparisons: tuple, found: list) -> str:
    key, title, config = sc.key, sc.title, sc.config
    if sc.studies is None:
        return f"### {title}\n\n" + missing(key, "the premise studies of this scenario")
    home, make = homes()[key]
    cmd_first = f"cr2 study premise{(' -c ' + config) if config else ''} --home {home}"
    if not sc.studies:
        return f"### {title}\n\n" + missing(key, f"a premise study — `{cmd_first}` stores one")
    source = str(sc.studies[0].row.label_source)
    kind = label_kind(source)
    out = [f"### {title} — {kind} labels\n",
           f"_Every number in this subsection rests on **{kind}** correctness labels "
           f"(`{source}`); warehouse `{home}` (`{make}`)._\n", "Studies stored:\n"]
    for st in sc.studies:
        row, cmd = st.row, st.command
        out.append(f"- `{row.study_id}` — retrained variant {st.mode}; {int(row.n_cells)} cells "
                   f"({float(row.cell_seconds):,.0f} s of cell time, stored); base run `{row.base_run}`; "
                   + (f"`{cmd}`" if cmd else "settings not recorded (a study run before cr2 recorded them: "
                                             "`cr2 study premise … --record-only` records them)"))
    out.append("")
    by_mode = {}
    for st in shown(sc.studies):
        row, cs = st.row, st.cells
        by_mode[str(row.retrain_from)] = st
        out.append(f"#### Study `{row.study_id}` — retrained {st.mode}\n")
        out.append(f"_Reproduce: `{make}`, then `{st.command or 'settings not recorded'}`; this page: "
                   "`make results-doc`._\n")
        out.append(_study_tables(w, cs))
        out.append(_answer(cs, kind, comparisons))
        found.append((f"{title}, {st.mode}", row.study_id))
    if "scratch" in by_mode and "base" in by_mode:
        a, b = by_mode["base"], by_mode["scratch"]
        out.append("#### Fine-tuned vs from-scratch retraining, cell by cell\n")
        out.append(_compare_modes(w, title, (a.row.study_id, a.mode, a.cells), (b.row.study_id, b.mode, b.cells),
                                  comparisons))
    return "\n".join(out)


def render(data: PremiseData, words: Words = PLAIN) -> str:
    text = ["## When CR² pays: the premise map\n",
            "`cr2 study premise` (docs/operations.md) re-prices every (query, state) of a warehouse over a grid of "
            "**device speed** (the device platform's prefill throughput and memory bandwidth scaled; edge platforms "
            "unchanged) × **channel** (state distributions of growing distance to the access point, Rayleigh, "
            "Table I path loss; configs/states/), and in every cell compares CR² with the baselines at fixed "
            "accuracy. Tables: view `v_premise` of each study (cr2_warehouse.premise); heatmaps in "
            "`HOME/premise-report/index.html`.\n",
            "**How to read them.** Savings are in %, positive: CR² costs less; \"mean\" = the mean over the targets of "
            "the base run's validation grid (a target a frontier misses on a resample costs the cheapest Always-model "
            "that reaches it there); `[a, b]` = the stored 95 % paired-bootstrap interval over the test queries "
            "(the same resamples for every method; each frontier recomputed per resample). Every word is the test's "
            "one word: \"cheaper\" / \"dearer\" only where the interval excludes 0 and the Holm p over its family — "
            "the study's cells × that comparison (v_premise) — is below 0.05. The "
            "intervals cover test-query noise only — training and calibration are held fixed, one split, one seed. "
            "\"ĉ ratio\" = E[ĉ_device] / E[min edge ĉ] over all (query, state) rows of the cell (below 1: the device "
            "is the cheap option on average). \"Best single\" = the Always-m points of the pool as one interpolated "
            "frontier, the cheapest routing that does not look at the query. **Retrained** = the gate re-distilled on "
            "the cell's train costs (same frozen teacher, which never sees a cost) and MLP (the one baseline whose "
            "inputs include costs) refitted on the cell — from scratch, or fine-tuned from the base fits, as each "
            "study records; KNN, EmbedLLM and LLMRank keep their base p̂ and route it with the cell's ĉ. "
            "**Re-calibrated only** = the base gate frozen, τ*(λ; α) from CRC on the cell's val.\n"]
    found: list = []
    for sc in data.scenarios:
        text.append(_scenario(words, sc, data.comparisons, found))
    text.append(_trends(words, found, data.trends))
    text.append("**What the premise map does not cover.** One split and one training seed per study (test-query "
                "noise only); one state per query; a fixed α; channels differ only in distance (Rayleigh, Table I "
                "path loss); only the device platform is scaled. The gate sees only (e(x), λ), never the state ξ: "
                "where answering locally depends mostly on the per-query channel draw rather than on the query, a "
                "channel-blind gate cannot follow it, while the one-shot baselines route on each query's ĉ — our "
                "reading, not tested separately.\n")
    return "\n".join(text)
