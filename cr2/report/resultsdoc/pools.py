"""docs/results.md, "CR² across measured pools": the label diagnostics of every pool on all MMLU-Pro
questions (a pure function over the packaged outputs file), the stored pool sweep (`cr2 study pools`: savings with
paired-bootstrap intervals, Holm over the pools × methods family, the across-pool signed-rank tests with Holm) and
the pool diagnostics (view v_pool_diagnostics). Every statistic is computed in the library (cr2.studies.pools,
cr2.studies.diagnostics) or read as stored, and every table is a cr2.report.pools object (the ones `cr2 study pools`
prints too); this module writes the prose around them (cr2_cli.resultsdoc.pools reads the warehouse and computes
the label diagnostics and signed-rank tests).

The wrappers below (savings_table, verdict_counts, changed_sentence) serve the ZeroEval section too.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from cr2.config.scenarios import scenario
from cr2.report.cells import PAGE
from cr2.report.pools import (POOL_DEPENDENCE, LabelDiagnostics, PoolDiagnostics, PoolSavings, PoolVerdictCounts,
                              ReferenceGaps, SignedRankTests, family_sizes, resamples_kept, shared_edges, stored_family)
from cr2.report.resultsdoc.words import PLAIN, Words, label_kind, missing
from cr2.routers import reference_router, routers_tagged

KEY = "pools"
def compared() -> tuple[str, ...]:
    """The learned methods: the family a verdict counts in (the catalogue's `compared` tag, read when a page renders)."""
    return routers_tagged("compared")
POOLS_COMMAND = scenario(KEY).command_line()  # configs/scenarios.yaml
LABELS_COMMAND = "python scripts/pool_label_diagnostics.py"
RESAMPLES_LABELS = 1000  # paired resamples of the questions for the m_ref accuracy gaps (seed 0)
num, cell, span = PAGE.num, PAGE.ci, PAGE.span  # the measured-pool sections' cells


@dataclass(frozen=True)
class PoolLabels:
    """The label diagnostics of every pool on all questions (cr2.studies.pools.pool_label_table) and m_ref's
    accuracy gaps (cr2.studies.diagnostics.reference_accuracy_gap_family); error: why they are not available."""

    source: str = ""
    rows: tuple = ()
    gaps: pd.DataFrame | None = None
    error: str | None = None


@dataclass(frozen=True)
class PoolSweep:
    """The newest pool study (None: none): its runs, v_pool_savings, v_pool_diagnostics and the across-pool
    signed-rank tests (cr2.studies.pools.signed_rank_tests of the savings vs the reference router)."""

    study: str | None
    runs: pd.DataFrame | None = None
    savings: pd.DataFrame | None = None
    diagnostics: pd.DataFrame | None = None
    signed_rank: pd.DataFrame | None = None


@dataclass(frozen=True)
class PoolsData:
    references: tuple[str, str]  # cr2.studies.pools.references(): the reference router, then the best single model
    labels: PoolLabels
    sweep: PoolSweep | None  # None: no pools warehouse


def savings_table(w: Words, sav: pd.DataFrame, ref: str, ratio: pd.Series, label: str = "pool") -> str:
    """cr2.report.pools.PoolSavings of the learned routers with their stored words, marked."""
    return PoolSavings(sav, ref, ratio, compared(), label=label, word=w.word).markdown()


def verdict_counts(sav: pd.DataFrame, ref: str) -> tuple[str, pd.DataFrame]:
    """cr2.report.pools.PoolVerdictCounts of the learned routers, and its tests (for their family sizes)."""
    t = PoolVerdictCounts(sav, ref, compared())
    return t.markdown(), t.family


def changed_sentence(family: pd.DataFrame, what: str, label: str = "pool") -> str:
    """The family the verdicts of a table were corrected over (uncorrected words of its members are not printed)."""
    return (f"Every verdict of {what} is its test's stored word: Holm over its family within that {label} (every "
            f"learned method's mean saving against the same reference, {family_sizes(family)} tests; "
            "docs/guarantees.md, \"One family rule\"); no member's uncorrected word is printed.\n")


def _labels_part(w: Words, labels: PoolLabels) -> str:
    if labels.error is not None:  # the packaged outputs file or the rule is missing or unreadable here
        return f"_Label diagnostics not available: {labels.error}_\n"
    source, rows, gaps = labels.source, labels.rows, labels.gaps
    n_q = sorted({r["n"] for r in rows})
    out = [f"### Label diagnostics of the {len(rows)} pools (all {'/'.join(f'{n:,}' for n in n_q)} questions)", "",
           f"`{LABELS_COMMAND}` — {label_kind(source)} labels (data/measured/mmlu_pro_outputs.parquet, the "
           "extraction "
           "rule of docs/measured.md). The page calls the same pure function (cr2.studies.pools.pool_label_table) on the "
           "packaged file. Per pool: each model's accuracy in pool order (device, then the edge models by size, "
           "m_ref last), the φ correlation of device and m_ref correctness, the mean φ over the pool's pairs, "
           "P(device right | m_ref wrong), P(m_ref right | device wrong) and the share of questions some pool model "
           "solves.", "", LabelDiagnostics(rows).markdown().rstrip("\n")]
    n_shared, edges = shared_edges(json.dumps([{"name": e, "role": "edge"} for e in r["edges"]]) for r in rows)
    dev_top = [r for r in rows if r["accuracy"][0] == max(r["accuracy"])]
    below_dev = [r for r in rows if any(a < r["accuracy"][0] for a in r["accuracy"][1:])]
    out += ["", f"{n_shared} of the {len(rows)} pools share the same three edge models ({', '.join(edges)}): the "
            "file has few models between the device sizes and the largest edge platform, so the rule picks the same "
            "ones again.", "",
            f"What the labels say before any router runs (point accuracies over all the questions, the whole "
            f"benchmark, no sampling): in {len(below_dev)} of the {len(rows)} pools at least one edge model is less "
            f"accurate than the device, and in {len(dev_top)} pool(s) "
            f"({', '.join(r['pool'] for r in dev_top) or 'none'}) the device is the most accurate model of the pool. "
            f"The device is right on {span((r['p_device_right_given_ref_wrong'] for r in rows), '.3f')} of the "
            f"questions m_ref gets wrong, and device–m_ref correctness has φ "
            f"{span((r['phi_device_ref'] for r in rows), '.2f')}: the labels leave routing room in every pool; "
            "whether a router can find it from the text is what the k-NN AUCs of the sweep below measure.", ""]
    out.append(_gap_part(w, gaps))
    return "\n".join(out)


def _gap_part(w: Words, g: pd.DataFrame) -> str:
    """m_ref against every other model of its pool (cr2.studies.diagnostics.reference_accuracy_gap_family): where
    m_ref is not the most accurate, with intervals."""
    below = g[g["verdict"] == "dearer"]  # a negative gap: m_ref less accurate than that model
    lines = [f"Is m_ref the most accurate model of its pool? accuracy(m_ref) − accuracy(other model), 95 % paired "
             f"bootstrap interval over the questions ({RESAMPLES_LABELS:,} resamples, seed 0), Holm over the "
             f"{len(g)} comparisons. Pools where m_ref's accuracy is below another model's (the interval under 0 "
             "and Holm p < 0.05), and the verdict of that difference:", ""]
    if below.empty:
        lines.append("_(none: in every pool m_ref's accuracy is at least that of every other model)_")
        return "\n".join(lines) + "\n"
    return "\n".join(lines) + "\n" + ReferenceGaps(below, word=w.word).markdown()


# ---------------------------------------------------------------- the sweep
def _signed_rank_part(tests: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    if tests.empty:
        return "_(signed-rank test: fewer than 2 pools with a CR² saving)_\n", pd.DataFrame()
    tests = tests[tests["error"].isna()]
    lines = ["Across pools: Wilcoxon signed-rank statistic of CR²'s mean saving vs KNN against each baseline's (KNN: "
             "0), as a description, without a verdict." + POOL_DEPENDENCE.replace("\n\n", " ").rstrip("\n"), ""]
    lines.append(SignedRankTests(tests).markdown().rstrip("\n"))
    return "\n".join(lines) + "\n", tests


def _sweep_part(w: Words, sw: PoolSweep, references: tuple[str, str]) -> str:
    if sw.study is None:
        return missing(KEY, "no pool study (`cr2 study pools`) is stored in this warehouse")
    sid, runs, sav, diag = sw.study, sw.runs, sw.savings, sw.diagnostics
    kinds = sorted({label_kind(s) for s in runs["label_source"]})
    n_shared, edges = shared_edges(runs["models"])
    ratio = diag.set_index("pool")["cost_ratio_realised"]
    out = [f"### The sweep on the {span(runs['n_queries'], ',.0f')}-question sample — all {len(runs)} pools", "",
           f"Study `{sid}` ({' / '.join(kinds)} labels: {', '.join(sorted(set(runs['label_source'])))}); "
           f"`{POOLS_COMMAND}` "
           f"(= `make study-pools`), tables printed by the command from the views v_pool_savings and "
           f"v_pool_diagnostics. Test questions per pool {span(runs['n_test'], 'g')}, of which some pool model solves "
           f"{span(runs['n_evaluable'], 'g')}; {span(runs['n_resamples'], ',.0f')} paired resamples of the test "
           f"questions; **test-query noise only — training, calibration and the split held fixed**. Evaluation runs "
           f"per pool: {', '.join(f'{p} `{r}`' for p, r in zip(runs['pool'], runs['run_id']))}.", "",
           f"**Dependence.** {n_shared} of the {len(runs)} pools share the same three edge models "
           f"({', '.join(edges)}), and all share the questions, the split and the resample index: the pools are not "
           "independent draws. Per-pool intervals are the primary result; anything pooled across pools (the "
           "counts and the signed-rank statistics below) overstates the evidence, so no verdict word is drawn across "
           "pools.", "",
           "Mean fixed-accuracy saving (%) over each pool run's validation target grid [95 % paired-bootstrap "
           "interval], positive = the method costs less, CR² at grids.default_alpha; the word after each learned "
           "method's cell is its test's stored word, Holm over its family within the pool (every learned method "
           "against the same reference; each p from its interval's own resamples, "
           "cr2.evaluation.statistics.bootstrap_p_values). c_dev/c_edge = "
           "E[c_device] / E[min edge c] on the test rows (realised cost). The full-information reference is a bound, "
           "shown without a word. " + _kept_sentence(runs, sav), ""]
    for ref in references:
        out += [savings_table(w, sav, ref, ratio), ""]
    for ref, what in zip(references, ("KNN", "the best single model")):
        table, changed = verdict_counts(sav, ref)
        out += [f"Pools per verdict against {what}:", "", table,
                changed_sentence(changed, f"the savings against {what}"), ""]
    sr, tests = _signed_rank_part(sw.signed_rank)
    out += [sr, "", f"Diagnostics (all {span(runs['n_queries'], ',.0f')} sample questions; view v_pool_diagnostics; "
            "headroom = the full-information reference's mean saving vs KNN):", "",
            PoolDiagnostics(diag).markdown().rstrip("\n"), "", _reading(sav, diag)]
    return "\n".join(out)


def _kept_sentence(runs: pd.DataFrame, sav: pd.DataFrame) -> str:
    """Every interval rests on all its resamples: said with the numbers stored."""
    kept = pd.to_numeric(sav["n_resamples"], errors="coerce") if "n_resamples" in sav else pd.Series(dtype=float)
    return (f"A target a frontier misses on a resample costs the cheapest Always-model that reaches it there, so every "
            f"mean is defined on every resample: the intervals rest on {resamples_kept(kept)} resamples each. The "
            "headroom interval in the diagnostics below is the full-information cell of the first table.")


def _reading(sav: pd.DataFrame, diag: pd.DataFrame) -> str:
    """What the sweep says, every number and word from the rows above."""
    knn = stored_family(sav[(sav["reference"] == reference_router()) & sav["method"].isin(compared())], "mean_saving_pct", "lower_pct",
                    "upper_pct")
    cr2 = knn[knn["method"] == "cr2"]
    parts = []
    for w in ("cheaper", "dearer"):
        hit = cr2[cr2["word_holm"] == w]
        parts.append(f"\"{w}\" on {len(hit)}" + (
            " (" + "; ".join(f"{r.pool} {cell(r.mean_saving_pct, r.lower_pct, r.upper_pct)} %"
                            for r in hit.itertuples(index=False)) + ")" if len(hit) else ""))
    nd = int((cr2["word_holm"] == "no difference detected").sum())
    head = (f"**Where CR² stands against KNN, pool by pool (each pool's stored word, Holm within the pool).** CR² is "
            f"{parts[0]} and {parts[1]} of the {len(cr2)} pools; \"no difference detected\" on {nd} (each pool's "
            f"word: the table above).")
    ratio = diag["cost_ratio_realised"]
    above = int((ratio > 1).sum())
    why = (f" Why, from the diagnostics: the full-information reference's mean saving vs KNN is "
           f"{span(diag['headroom_vs_knn_pct'], '.1f')} % across pools (lower interval ends "
           f"{span(diag['headroom_lower_pct'], '.1f')} %), so the labels leave room; but (1) c_dev/c_edge is above 1 "
           f"in {above} of the {len(diag)} pools ({span(ratio, '.2f')}): there the device is on average the costlier "
           "option, and CR²'s local-first rule starts from that side; (2) the 20-NN AUC of device ≠ m_ref from the "
           f"text, what the gate needs, is {span(diag['auc_disagree_device_ref'], '.3f')}; (3) correctness itself "
           f"has AUC {span(pd.concat([diag['auc_device_correct'], diag['auc_ref_correct']]), '.3f')}.")
    low = diag.nsmallest(2, "headroom_vs_knn_pct")
    tail = (" The least headroom: " + "; ".join(
        f"{r.pool} {cell(r.headroom_vs_knn_pct, r.headroom_lower_pct, r.headroom_upper_pct)} % (m_ref {r.m_ref}, "
        f"accuracy {r.ref_accuracy:.3f} on the sample, device {r.device_accuracy:.3f})"
        for r in low.itertuples(index=False)) + "; how m_ref compares with each edge model is in the label "
        "diagnostics above.") if len(low) else ""
    return head + why + tail + "\n"


def render(data: PoolsData, words: Words = PLAIN) -> str:
    head = ["## CR² across measured pools", "",
            "The pools come from the rule in `configs/pools/mmlu-pro.yaml`, committed before any pool was run "
            "(docs/pools.md): each model of ≤ 8B parameters on the device, with the edge models nearest 2×, 5× and "
            "10× its size (active parameters, log scale), m_ref the pool's largest edge model. Labels: the MMLU-Pro "
            "authors' published outputs (docs/measured.md). This section is printed by `make results-doc` "
            "(cr2_cli/resultsdoc/pools.py) from the pools warehouse and the packaged outputs file.", "",
            "Commands that rebuild what it reads:", "", "```bash",
            f"{POOLS_COMMAND}   # = make study-pools", f"{LABELS_COMMAND}   # the label diagnostics, all questions",
            "make results-doc", "```", "", _labels_part(words, data.labels), ""]
    if data.sweep is None:
        return "\n".join(head + [missing(KEY, "the pool sweep")])
    return "\n".join(head + [_sweep_part(words, data.sweep, data.references)])
