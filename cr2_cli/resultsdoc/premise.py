"""docs/results.md, "When CR² pays: the premise map": per cell of the device-speed × channel grid, CR²'s
fixed-accuracy saving vs KNN and vs the best single model, what re-calibration alone loses against retraining, the
risk at α — for every stored premise study of the default and the MMLU-Pro warehouse (fine-tuned and from-scratch
retraining side by side, each named by its study id and the command that reproduces it), a cell-by-cell
comparison of the two retraining modes, and a tested trend of the saving with device speed.

Every number comes from v_premise / premise_cells / premise_studies (cr2_warehouse.premise); every verdict word from
cr2's verdict functions through `Doc`: per interval, and under Holm over the family the page reads together (the
cells of one study, per comparison; cells × paper targets; the trend tests of the page). p-values of stored
intervals: the p stored beside each interval (its own bootstrap resamples); the trend: cr2.evaluation.statistics.spearman_permutation_test (seeded).
"""
from __future__ import annotations

import json

import pandas as pd

from cr2.evaluation.fixed_accuracy import PAPER_TARGETS
from cr2.report.premise_map import (PremiseModes, PremiseRecalibration, PremiseSavings, SpeedTrendTable,
                                   target_counts)
from cr2.studies.premise import COMPARISONS, premise_cells
from cr2.evaluation.statistics import saving_verdict
from cr2.evaluation.families import change_verdict
from cr2_cli.resultsdoc.core import HOMES, Doc, label_kind

SCENARIOS = (("default", "Default scenario", None),
             ("mmlu-pro", "Measured scenario (MMLU-Pro)", "configs/mmlu-pro-measured.yaml"))
TREND_SEED = 0  # the permutation test's generator (the page is deterministic)
TREND_PERMUTATIONS = 10_000


# ---------------------------------------------------------------- reading the studies
def studies(doc: Doc, key: str) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Every premise study of a warehouse (cr2_warehouse.premise.premise_studies) and its v_premise rows."""
    from cr2_warehouse.premise import premise_studies, premise_view

    with doc.warehouse(key) as wh:
        st = premise_studies(wh)
        return st, {sid: premise_view(wh, sid) for sid in st["study_id"]}


def mode(row) -> str:
    """How a study's retrained variant was trained, from its recorded settings."""
    if row.retrain_from is None or pd.isna(row.retrain_from):
        return "retraining not recorded"
    if row.retrain_from == "base":
        return f"fine-tuned from the base fits ({int(row.retrain_epochs)} epochs)"
    return "from scratch (the command's default)"


def command(key: str, config: str | None, row) -> str | None:
    """The command that reproduces a study from its recorded settings (None where none were recorded)."""
    from cr2.studies.premise import DEFAULT_CHANNELS, DEFAULT_RESAMPLES, DEFAULT_SPEEDS

    if row.retrain_from is None or pd.isna(row.retrain_from):
        return None
    cfg = row.config if isinstance(row.config, str) and row.config else config
    parts = ["cr2 study premise"] + ([f"-c {cfg}"] if cfg else []) + [f"--home {HOMES[key][0]}"]
    speeds, channels = json.loads(row.speeds), json.loads(row.channels)
    if [float(s) for s in speeds] != [float(s) for s in DEFAULT_SPEEDS]:
        parts.append("--speeds " + ",".join(f"{s:g}" for s in speeds))
    if list(channels) != list(DEFAULT_CHANNELS):
        parts.append("--channels " + ",".join(channels))
    if int(row.n_resamples) != DEFAULT_RESAMPLES:
        parts.append(f"--resamples {int(row.n_resamples)}")
    if int(row.seed) != 0:
        parts.append(f"--seed {int(row.seed)}")
    if row.retrain_from == "base":
        parts.append(f"--retrain-from base --retrain-epochs {int(row.retrain_epochs)}")
    return " ".join(parts)


# ---------------------------------------------------------------- words and cells of the tables
def _verdict_counts(doc: Doc, cs: pd.DataFrame, tag: str, holm: bool, loss: bool = False) -> dict:
    out: dict[str, int] = {}
    for _, c in cs.iterrows():
        if pd.isna(c.get(tag)):
            out["not reached"] = out.get("not reached", 0) + 1
            continue
        w = (change_verdict if loss else saving_verdict)(c[tag + "|lo"], c[tag + "|hi"], c[tag + "|holm"] if holm else None)
        out[w] = out.get(w, 0) + 1
    return out


def _counts_text(doc: Doc, counts: dict) -> str:
    order = ("cheaper", "dearer", "larger", "smaller", "no difference detected", "not reached")
    return ", ".join(f"\"{w}\" in {counts[w]}" for w in order if counts.get(w))


# ---------------------------------------------------------------- one study
def _study_tables(doc: Doc, cs: pd.DataFrame) -> str:
    answer = PremiseSavings(cs, doc.word).markdown()
    recal = PremiseRecalibration(cs, doc.word).markdown()
    return (f"Cells in order of the device / edge cost ratio; CR² retrained:\n\n{answer}\n"
            f"**Re-calibration without retraining** (mean extra cost of the frozen base gate re-calibrated on the cell "
            f"over the gate retrained on it, %; positive: re-calibration alone costs more; the word is that of the "
            f"change):\n\n{recal}")


def _answer(doc: Doc, cs: pd.DataFrame, kind: str) -> str:
    kt, bt, lt = (f"{m}|{r}" for m, r, _, _ in COMPARISONS)
    n = len(cs)
    lines = [f"**In numbers ({kind}).** {n} cells, ĉ ratio {cs['cost_ratio'].min():.3f} … "
             f"{cs['cost_ratio'].max():.3f}; {int(cs['n_evaluable'].iloc[0]):,} evaluable test queries, "
             f"{int(cs['n_resamples'].iloc[0]):,} resamples, α = {cs['alpha'].iloc[0]:g}."]
    for tag, name, loss in ((kt, "CR² retrained vs KNN (mean over targets)", False),
                            (bt, "CR² retrained vs the best single model", False),
                            (lt, "What re-calibration alone loses against retraining", True)):
        h = _verdict_counts(doc, cs, tag, holm=True, loss=loss)
        est = cs[tag].dropna()
        rng = f"; point estimates {est.min():+.1f} … {est.max():+.1f} %" if len(est) else ""
        lines.append(f"- {name}: under Holm over the {n} cells {_counts_text(doc, h)}{rng}.")
    for tag, name in ((kt, "KNN"), (bt, "the best single model")):
        h = {}
        for _, c in cs.iterrows():
            for k, v in target_counts(c, tag, holm=True)[1].items():
                h[k] = h.get(k, 0) + v
        lines.append(f"- At the paper's targets {PAPER_TARGETS[0]:.2f}–{PAPER_TARGETS[-1]:.2f} vs {name} "
                     f"({n * len(PAPER_TARGETS)} (cell, target) pairs), under Holm over the pairs: "
                     f"{_counts_text(doc, h)}.")
    rmax, rmean = cs["cr2-retrain|risk_max"].dropna(), cs["cr2-retrain|risk_mean"].dropna()
    if len(rmax):
        lines.append(f"- CR²'s (retrained) test risk at α = {cs['alpha'].iloc[0]:g}: mean over the λ grid "
                     f"{rmean.min():.4f} … {rmean.max():.4f} per cell, worst λ {rmax.min():.4f} … {rmax.max():.4f} "
                     "(one test draw per λ).")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- across studies: trend, fine-tune vs scratch
def _trends(doc: Doc, found: list) -> str:
    from cr2.studies.premise import speed_trends

    if not found:
        return ""
    tag = "cr2-retrain|knn"
    trends = speed_trends([(cs["speed_factor"].to_numpy(float), cs[tag].to_numpy(float)) for _, _, cs in found],
                          TREND_SEED, TREND_PERMUTATIONS)
    out = ["### Does CR²'s saving vs KNN change with device speed? (trend test)\n",
           "Spearman's ρ between the device speed factor and CR²'s mean saving vs KNN over a study's cells, with a "
           f"two-sided permutation p ({TREND_PERMUTATIONS:,} seeded permutations of the savings; "
           "cr2.evaluation.statistics.spearman_permutation_test), Holm over the studies below. The word is the direction of "
           "CR²'s saving as the device gets faster (\"cheaper\": the saving grows, \"dearer\": the deficit grows). The "
           "cells share their test queries and base fits, so the test is of the ordering across this grid, not of "
           "independent draws.\n"]
    out.append(SpeedTrendTable([(title, sid) for title, sid, _ in found], trends, doc.word).markdown())
    return "\n".join(out)


def _compare_modes(doc: Doc, title: str, a: tuple, b: tuple) -> str:
    """Cell by cell: the same comparisons in two studies that differ only in how the retrained variant is trained."""
    (sa, ma, ca), (sb, mb, cb) = a, b
    table = PremiseModes(ca, cb, ma, mb, doc.word)
    j, stats = table.cells, table.stats
    if j.empty:
        return f"_{title}: the two studies share no cell._\n"
    summary = []
    for method, ref, _, name in COMPARISONS:
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
def _scenario(doc: Doc, key: str, title: str, config: str | None, trends: list) -> str:
    if not doc.has(key):
        return f"### {title}\n\n" + doc.missing(key, "the premise studies of this scenario")
    st, views = studies(doc, key)
    cmd_first = f"cr2 study premise{(' -c ' + config) if config else ''} --home {HOMES[key][0]}"
    if st.empty:
        return f"### {title}\n\n" + doc.missing(key, f"a premise study — `{cmd_first}` stores one")
    kind = label_kind(str(st["label_source"].iloc[0]))
    out = [f"### {title} — {kind} labels\n",
           f"_Every number in this subsection rests on **{kind}** correctness labels "
           f"(`{st['label_source'].iloc[0]}`); warehouse `{HOMES[key][0]}` (`{HOMES[key][1]}`)._\n", "Studies stored:\n"]
    parsed = []
    for row in st.itertuples():
        cmd = command(key, config, row)
        cs = premise_cells(views[row.study_id]) if len(views[row.study_id]) else pd.DataFrame()
        out.append(f"- `{row.study_id}` — retrained variant {mode(row)}; {int(row.n_cells)} cells "
                   f"({float(row.cell_seconds):,.0f} s of cell time, stored); base run `{row.base_run}`; "
                   + (f"`{cmd}`" if cmd else "settings not recorded (a study run before cr2 recorded them: "
                                             "`cr2 study premise … --record-only` records them)"))
        parsed.append((row, cmd, cs))
    out.append("")
    by_mode = {}
    for row, cmd, cs in parsed:
        if not cs.empty:
            by_mode.setdefault(str(row.retrain_from), (row, cmd, cs))  # oldest of each mode: st is oldest first
    order = [m for m in ("scratch", "base") if m in by_mode] + [m for m in by_mode if m not in ("scratch", "base")]
    for m in order:
        row, cmd, cs = by_mode[m]
        out.append(f"#### Study `{row.study_id}` — retrained {mode(row)}\n")
        out.append(f"_Reproduce: `{HOMES[key][1]}`, then `{cmd or 'settings not recorded'}`; this page: "
                   "`make results-doc`._\n")
        out.append(_study_tables(doc, cs))
        out.append(_answer(doc, cs, kind))
        trends.append((f"{title}, {mode(row)}", row.study_id, cs))
    if "scratch" in by_mode and "base" in by_mode:
        a, b = by_mode["base"], by_mode["scratch"]
        out.append("#### Fine-tuned vs from-scratch retraining, cell by cell\n")
        out.append(_compare_modes(doc, title, (a[0].study_id, mode(a[0]), a[2]), (b[0].study_id, mode(b[0]), b[2])))
    return "\n".join(out)


def render(doc: Doc) -> str:
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
    trends: list = []
    for key, title, config in SCENARIOS:
        text.append(_scenario(doc, key, title, config, trends))
    text.append(_trends(doc, trends))
    text.append("**What the premise map does not cover.** One split and one training seed per study (test-query "
                "noise only); one state per query; a fixed α; channels differ only in distance (Rayleigh, Table I "
                "path loss); only the device platform is scaled. The gate sees only (e(x), λ), never the state ξ: "
                "where answering locally depends mostly on the per-query channel draw rather than on the query, a "
                "channel-blind gate cannot follow it, while the one-shot baselines route on each query's ĉ — our "
                "reading, not tested separately.\n")
    return "\n".join(text)
