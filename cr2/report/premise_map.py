"""The premise map's tables (docs/results.md, "When CR² pays"; `cr2 study premise`) as objects
(cr2.report.table.Table), built from one study's cells (cr2.studies.premise.premise_cells: one row per device speed ×
channel cell, each comparison's signed mean saving with its interval and stored Holm p). Words through the caller's
`word`; numbers through cr2.report.cells."""
from __future__ import annotations

import pandas as pd

from cr2.evaluation.fixed_accuracy import PAPER_TARGETS
from cr2.evaluation.families import change_verdict
from cr2.evaluation.statistics import saving_verdict
from cr2.report.cells import ci_cell, lam_cell, num
from cr2.report.table import Table, Word, plain_word

NOT_REACHED = "not reached"
KNN, BEST, LOSS = "cr2-retrain|knn", "cr2-retrain|best-single", "cr2-recal|cr2-retrain"  # premise_cells' tags


def saving_cell(c, tag: str) -> str:
    """'estimate [lower, upper]' of one cell's comparison, 'not reached' where a side misses every target."""
    return ci_cell(c[tag], c[tag + "|lo"], c[tag + "|hi"], "+.1f", NOT_REACHED)


def cell_name(c) -> str:
    """'×speed / channel' of one cell."""
    return f"×{lam_cell(c['speed_factor'])} / {c['channel']}"


def target_counts(c, tag: str, holm: bool = True) -> tuple[str, dict]:
    """'cheaper / dearer / n.d. / not reached' counts over the paper targets, each from a verdict function (under the
    stored Holm p over cells × targets, or the interval alone)."""
    counts = {"cheaper": 0, "dearer": 0, "no difference detected": 0, NOT_REACHED: 0}
    for t in PAPER_TARGETS:
        k = f"{tag}@{t:.2f}"
        if k not in c or pd.isna(c[k]) or pd.isna(c[k + "|lo"]):
            counts[NOT_REACHED] += 1
            continue
        counts[saving_verdict(c[k + "|lo"], c[k + "|hi"], c[k + "|holm"] if holm else None)] += 1
    return " / ".join(str(v) for v in counts.values()), counts


class PremiseSavings(Table):
    """Per cell, in order of the device / edge cost ratio: CR² retrained vs KNN and vs the best single model — the
    mean saving [95 % CI], its word under Holm over the study's cells, and the paper targets' words counted."""

    def __init__(self, cs: pd.DataFrame, word: Word = plain_word):
        def said(c, tag: str) -> str:
            return NOT_REACHED if pd.isna(c.get(tag)) else word(saving_verdict(c[tag + "|lo"], c[tag + "|hi"],
                                                                               c[tag + "|holm"]))

        rows = [[num(c["cost_ratio"], ".3f"), cell_name(c), saving_cell(c, KNN), said(c, KNN),
                 target_counts(c, KNN)[0], saving_cell(c, BEST), said(c, BEST), target_counts(c, BEST)[0]]
                for _, c in cs.iterrows()]
        super().__init__(["ĉ ratio", "cell", "CR² vs KNN, mean", f"word, Holm ({len(cs)} cells)",
                          "paper targets vs KNN, Holm over cells × targets: \"cheaper\" / \"dearer\" / n.d. / not "
                          "reached", "CR² vs best single, mean", f"word, Holm ({len(cs)} cells) ",
                          "paper targets vs best single, Holm over cells × targets: \"cheaper\" / \"dearer\" / n.d. / "
                          "not reached"], rows)


class PremiseRecalibration(Table):
    """Per cell, by speed and channel distance: the mean extra cost of re-calibrating the frozen base gate over
    retraining it [95 % CI], the word of that change under Holm over the cells, and both variants' worst-λ risk."""

    def __init__(self, cs: pd.DataFrame, word: Word = plain_word):
        def said(c) -> str:
            return NOT_REACHED if pd.isna(c.get(LOSS)) else word(change_verdict(c[LOSS + "|lo"], c[LOSS + "|hi"],
                                                                                c[LOSS + "|holm"]))

        rows = [[f"×{lam_cell(c['speed_factor'])}", c["channel"], num(c["cost_ratio"], ".3f"), saving_cell(c, LOSS),
                 said(c), f"{num(c['cr2-retrain|risk_max'], '.4f')} / {num(c['cr2-recal|risk_max'], '.4f')}"]
                for _, c in cs.sort_values(["speed_factor", "mean_distance_m"]).iterrows()]
        super().__init__(["speed", "channel", "ĉ ratio", "loss of re-calibration only, mean",
                          f"word, Holm ({len(cs)} cells)", "risk at α, worst λ: retrained / re-calibrated"], rows)


class PremiseMap(Table):
    """`cr2 study premise`'s summary: per cell, CR² retrained vs KNN and re-calibration's loss against retraining
    (mean over the target grid [95 % CI]), and whether the cell came from the cache (`cached`: (speed, channel) →
    bool)."""

    def __init__(self, cs: pd.DataFrame, cached: dict | None = None):
        rows = [[f"×{lam_cell(c['speed_factor'])}", c["channel"], num(c["cost_ratio"], ".3f"), saving_cell(c, KNN),
                 saving_cell(c, LOSS), "yes" if (cached or {}).get((c["speed_factor"], c["channel"])) else "no"]
                for _, c in cs.iterrows()]
        super().__init__(["speed", "channel", "ĉ ratio", "CR² vs KNN", "recal − retrain", "cached"], rows)


class PremiseVsCertified(Table):
    """By device/edge cost ratio: per cell of a premise study, CR² retrained against a certified router at the same
    α and rule (v_premise rows of that comparison, mean over targets): the mean saving [95 % CI], its Holm p over the
    cells and its word (a comparison of the two routers, never a deploy recommendation)."""

    def __init__(self, d: pd.DataFrame, word: Word = plain_word):
        from cr2.report.cells import p_cell

        rows = [[f"×{lam_cell(r.speed_factor)}", r.channel, num(r.cost_ratio_est, ".3f"),
                 ci_cell(r.saving_pct, r.saving_lower_pct, r.saving_upper_pct),
                 p_cell(r.p_holm, r.n_resamples, ".2g", r.family_size),
                 word(saving_verdict(r.saving_lower_pct, r.saving_upper_pct, r.p_holm))]
                for r in d.sort_values(["cost_ratio_est"]).itertuples()]
        super().__init__(["device speed", "channel", "ĉ device / cheapest edge",
                          "CR² vs certified KNN, mean saving % [95 % CI]", "p, Holm over the cells", "word"], rows)


class SpeedTrendTable(Table):
    """Per premise study: Spearman's ρ between device speed and CR²'s mean saving vs KNN over its cells, the
    permutation p, its Holm p over the studies and the direction word (cr2.studies.premise.speed_trends; `studies`:
    (title, study id) per trend)."""

    def __init__(self, studies: list[tuple[str, str]], trends: list, word: Word = plain_word):
        from cr2.evaluation.statistics import test_verdict

        rows = [{"study": f"{title}: `{sid}`", "cells": t.n, "ρ (speed, saving vs KNN)": num(t.rho, "+.3f"),
                 "permutation p": num(t.p_value, ".4f"), f"Holm ({len(trends)} tests)": num(t.p_holm, ".4f"),
                 "as the device gets faster, CR² vs KNN": word(test_verdict(t.rho, t.p_holm))}
                for (title, sid), t in zip(studies, trends)]
        self.set_records(rows)


class PremiseModes(Table):
    """Cell by cell, the same comparisons in two premise studies that differ only in how the retrained variant is
    trained (their premise_cells `ca`, `cb`; `ma`, `mb` how each was trained): each study's mean saving [95 % CI]
    and its word under Holm within its study. `stats` counts, per comparison tag, the cells with the same word, a
    direction in both / only one, and the second study's estimate above the first's."""

    def __init__(self, ca: pd.DataFrame, cb: pd.DataFrame, ma: str, mb: str, word: Word = plain_word):
        j = ca.merge(cb, on=["speed_factor", "channel"], suffixes=("_a", "_b"))
        self.cells = j = j.sort_values(["speed_factor", "mean_distance_m_a"]).reset_index(drop=True) if len(j) else j
        short = {KNN: "vs KNN", BEST: "vs best single", LOSS: "re-calibration loss"}
        self.stats = {tag: {"same": 0, "both": 0, "only_a": 0, "only_b": 0, "above": 0} for tag in short}

        def side(c, suffix: str) -> pd.Series:
            return pd.Series({k[:-2]: v for k, v in c.items() if k.endswith(suffix)})

        def said(c, tag: str) -> str:
            if pd.isna(c.get(tag)):
                return NOT_REACHED
            verdict = change_verdict if tag == LOSS else saving_verdict
            return word(verdict(c[tag + "|lo"], c[tag + "|hi"], c[tag + "|holm"]))

        rows = []
        for _, c in j.iterrows():
            ra, rb = side(c, "_a"), side(c, "_b")
            row = {"cell": f"×{lam_cell(c['speed_factor'])} / {c['channel']}"}
            for tag, name in short.items():
                va = saving_verdict(ra[tag + "|lo"], ra[tag + "|hi"], ra[tag + "|holm"]) if pd.notna(ra[tag]) else None
                vb = saving_verdict(rb[tag + "|lo"], rb[tag + "|hi"], rb[tag + "|holm"]) if pd.notna(rb[tag]) else None
                st = self.stats[tag]
                st["same"] += va == vb
                da, db = va not in (None, "no difference detected"), vb not in (None, "no difference detected")
                st["both"] += da and db
                st["only_a"] += da and not db
                st["only_b"] += db and not da
                st["above"] += bool(pd.notna(ra[tag]) and pd.notna(rb[tag]) and rb[tag] > ra[tag])
                row[f"{name}, fine-tuned" if "fine-tuned" in ma else f"{name}, A"] = (
                    f"{saving_cell(ra, tag)} {said(ra, tag)}")
                row[f"{name}, from scratch" if "scratch" in mb else f"{name}, B"] = (
                    f"{saving_cell(rb, tag)} {said(rb, tag)}")
            rows.append(row)
        self.set_records(rows)
