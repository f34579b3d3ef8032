"""The measured-pool tables (the pool sweep, the ZeroEval ladders, the packaged label diagnostics) as objects: built
once from the stored frames (views v_pool_savings, v_pool_diagnostics; cr2.studies.pools and cr2.studies.diagnostics
for the label statistics), rendered by the results page (cr2_cli.resultsdoc), `cr2 study pools|diagnostics` and
scripts/pool_label_diagnostics.py alike (cr2.report.table.Table: markdown, rich, artifact, html).

Nothing is computed here but cells: every verdict word is the stored test's (Holm within its pool, read with
`stored_family`) passed through the caller's `word`, every number written by a cr2.report.cells style.
"""
from __future__ import annotations

import json
from collections import Counter
from typing import Iterable, Mapping

import pandas as pd

from cr2.report.cells import DASH, PAGE, TERMINAL, Style, counts_cell, num
from cr2.report.table import Table, Word

ORACLE = "full-information"  # the full-information reference: a bound, shown without a word
# why no verdict word is drawn across pools (printed under every across-pool table)
POOL_DEPENDENCE = ("\n\nNo verdict word across pools. The pools are not independent units: they share the questions, "
                   "the split and the resample index, and several share edge models. A signed-rank test over them "
                   "treats them as independent, so its p is optimistic (anti-conservative), and Holm's correction "
                   "cannot repair the dependence of the units; a joint bootstrap over the shared question ids would "
                   "need every pool's statistic on every resample of one index, which the sweep does not store. The "
                   "median and p describe the pools; the evidence is each pool's own test (its stored word, Holm "
                   "within the pool), counted per comparison.\n")


# ---------------------------------------------------------------- reading the stored tests (no statistics)
def stored_family(df: pd.DataFrame, est: str = "estimate", lo: str = "lower", hi: str = "upper") -> pd.DataFrame:
    """The frame with p and the stored test's Holm p over its family (cr2.evaluation.families: within one pool, every
    learned method's mean saving vs one reference) and its one word (word_holm; `word` the same), unmarked; nothing
    is corrected here, so the word is the one every surface prints."""
    from cr2.evaluation.statistics import saving_verdict

    out = df.copy()
    if len(out) and ("p_holm" not in out.columns or out["p_holm"].isna().all()):
        raise ValueError("these savings were stored without their family and Holm p (schema < 9): run the study again")
    out["p"] = out["p_value"].astype(float) if len(out) else []
    out["p_holm"] = out["p_holm"].astype(float) if len(out) else []
    out["word_holm"] = [saving_verdict(a, b, p) for a, b, p in zip(out[lo], out[hi], out["p_holm"])]
    out["word"] = out["word_holm"]
    return out


def family_sizes(family: pd.DataFrame) -> str:
    """The stored family sizes of a table's tests ('5', or '4–5' where pools differ)."""
    v = sorted({int(x) for x in family.get("family_size", pd.Series(dtype=float)).dropna()})
    return DASH if not v else (str(v[0]) if len(v) == 1 else f"{v[0]}–{v[-1]}")


def shared_edges(models_json: Iterable[str]) -> tuple[int, list[str]]:
    """(how many pools share the most common set of edge models, that set's names) from pool_runs.models."""
    sets = Counter(tuple(sorted(m.get("name") or m["id"] for m in json.loads(s) if m.get("role") == "edge"))
                   for s in models_json)
    if not sets:
        return 0, []
    edges, n = max(sets.items(), key=lambda kv: (kv[1], kv[0]))
    return n, list(edges)


def resamples_kept(values: Iterable) -> str:
    """'min–max' of the resamples some conditional intervals kept (pool_results.n_resamples: those on which every
    averaged target is reached), 'not stored' where none is (a study stored before schema 7)."""
    v = [x for x in values if x is not None and not pd.isna(x)]
    return PAGE.span(v, ",.0f") if v else "not stored"


# ---------------------------------------------------------------- the tables
class PoolSavings(Table):
    """Per pool (row) and method (column): mean saving vs `reference` [95 % CI], and with `word` the stored word of
    each learned router's test (Holm over its family within the pool: every learned method vs `reference`; the
    full-information reference is a bound, no test). `savings`: rows of v_pool_savings; `ratio`: pool → realised
    c_dev/c_edge."""

    def __init__(self, savings: pd.DataFrame, reference: str, ratio: Mapping, routers: Iterable[str], *,
                 label: str = "pool", word: Word | None = None, style: Style = PAGE, missing_method: str = DASH):
        routers = tuple(routers)
        sub = savings[savings["reference"] == reference]
        fam = (stored_family(sub[sub["method"].isin(routers)], "mean_saving_pct", "lower_pct", "upper_pct")
               if word is not None else None)
        methods = [m for m in (*routers, ORACLE) if m in set(sub["method"])]
        rows = []
        for pool, g in sub.groupby("pool", sort=True):
            row = []
            for m in methods:
                r = g[g["method"] == m]
                if r.empty:
                    row.append(missing_method)
                    continue
                r = r.iloc[0]
                c = style.ci(r.mean_saving_pct, r.lower_pct, r.upper_pct)
                if fam is not None and m in routers:
                    from cr2.evaluation.statistics import saving_verdict

                    h = fam[(fam["pool"] == pool) & (fam["method"] == m)].iloc[0]
                    c += f" {word(saving_verdict(h.lower_pct, h.upper_pct, h.p_holm))}"
                row.append(c)
            rows.append([pool, style.num(ratio.get(pool), ".2f"), *row])
        super().__init__([label, "c_dev/c_edge", *(f"{m} vs {reference}" for m in methods)], rows,
                         f"no savings against {reference} are stored")


class PoolVerdictCounts(Table):
    """Per learned method: pools "cheaper" / "dearer" / "no difference detected" vs `reference`, each the stored word
    of its test (Holm within its pool); `family` keeps the tests (for their family sizes)."""

    def __init__(self, savings: pd.DataFrame, reference: str, routers: Iterable[str], *, label: str = "pools"):
        routers = tuple(routers)
        sub = savings[(savings["reference"] == reference) & savings["method"].isin(routers)]
        self.family = stored_family(sub, "mean_saving_pct", "lower_pct", "upper_pct")
        head = ["method", label, f"Holm within each pool ({family_sizes(self.family)} tests): \"cheaper\" / "
                                 "\"dearer\" / \"no difference detected\""]
        rows = [[m, str(len(g)), counts_cell(g["word_holm"])]
                for m in routers if m in set(self.family["method"])
                for g in [self.family[self.family["method"] == m]]]
        super().__init__(head, rows, f"no learned method has a saving against {reference}")


class SignedRankTests(Table):
    """The across-pool signed-rank tests of CR²'s saving vs KNN against each baseline's (rows of
    cr2.studies.pools.signed_rank_tests), a description without a verdict; a test that could not run shows its
    error in the last column."""

    def __init__(self, tests: pd.DataFrame, *, style: Style = PAGE):
        rows = []
        for t in tests.itertuples(index=False):
            if getattr(t, "error", None) is not None and not pd.isna(t.error):
                rows.append([str(t.baseline), str(t.pools), *[style.missing_text] * 4, str(t.error)])
                continue
            rows.append([str(t.baseline), str(t.pools), style.num(t.median, "+.1f"), num(t.w_plus, "g"),
                         num(t.w_minus, "g"), num(t.p, ".3g"), str(t.method)])
        super().__init__(["CR² against", "pools", "median(CR² − baseline), points", "W⁺", "W⁻",
                          "p (two-sided, optimistic)", "test"], rows)


class PoolDiagnostics(Table):
    """One row per pool (rows of v_pool_diagnostics): the full-information headroom vs KNN [95 % CI], the device's
    and m_ref's accuracy, P(device right | m_ref wrong), φ and the k-NN AUCs."""

    def __init__(self, diag: pd.DataFrame, *, label: str = "pool", style: Style = TERMINAL, headroom_spec: str = ".1f",
                 why: str = "this run has none here"):
        f = style.num
        rows = [[str(r.pool), style.ci(r.headroom_vs_knn_pct, r.headroom_lower_pct, r.headroom_upper_pct,
                                       headroom_spec),
                 f(r.device_accuracy, ".3f"), f(r.ref_accuracy, ".3f"), f(r.p_device_right_given_ref_wrong, ".3f"),
                 f(r.phi_device_ref, ".2f"), f(r.phi_mean, ".2f"), f(r.auc_device_correct, ".3f"),
                 f(r.auc_ref_correct, ".3f"), f(r.auc_disagree_device_ref, ".3f"), f(r.auc_disagree_mean, ".3f")]
                for r in diag.itertuples(index=False)]
        super().__init__([label, "headroom vs KNN %", "acc dev", "acc m_ref", "P(dev ✓ \\| ref ✗)", "φ dev–ref",
                          "φ mean", "AUC dev ✓", "AUC ref ✓", "AUC dev≠ref", "AUC ≠ mean"], rows, why)


class LabelDiagnostics(Table):
    """The label diagnostics of pools on all the packaged questions (rows of cr2.studies.pools.pool_label_table):
    accuracies in pool order, φ, the conditional rates and the solvable share."""

    def __init__(self, rows: list[dict]):
        cells = [[str(r["pool"]), str(r["n"]), " / ".join(num(a, ".3f") for a in r["accuracy"]),
                  num(r["phi_device_ref"], ".2f"), num(r["phi_mean"], ".2f"),
                  num(r["p_device_right_given_ref_wrong"], ".3f"), num(r["p_ref_right_given_device_wrong"], ".3f"),
                  num(r["solvable"], ".3f")] for r in rows]
        super().__init__(["pool", "n", "accuracy (device / edges… / m_ref)", "φ device–m_ref", "mean φ",
                          "P(dev ✓ \\| ref ✗)", "P(ref ✓ \\| dev ✗)", "solvable"], cells, "the rule selects no pool")


class ReferenceGaps(Table):
    """m_ref against other models of its pool (rows of cr2.studies.diagnostics.reference_accuracy_gap_family): the
    accuracy gap in points [95 % CI], its Holm p and, through `word`, the word of that difference (larger /
    smaller / no difference detected: cr2.evaluation.families.change_verdict)."""

    def __init__(self, gaps: pd.DataFrame, *, word: Word, style: Style = PAGE):
        from cr2.evaluation.families import change_verdict

        rows = [[str(r.pool), str(r.reference), str(r.model), str(r.role),
                 style.ci(100 * r.estimate, 100 * r.lower, 100 * r.upper), num(r.p_holm, ".3g"),
                 word(change_verdict(r.lower, r.upper, None))] for r in gaps.itertuples(index=False)]
        super().__init__(["pool", "m_ref", "other model", "role", "accuracy gap, points", "p, Holm",
                          "m_ref's accuracy is"], rows)


class AcrossPoolEqualRisk(Table):
    """One equal-risk question (and rule) across pools (cr2.studies.pools.AcrossPools, one per compared pair): the
    pools' median mean saving, a signed-rank p of the savings against 0 as a description (no verdict:
    POOL_DEPENDENCE), and the count of each pool's own stored word."""

    def __init__(self, comparisons: Iterable):
        cells = []
        for c in comparisons:
            words = f"{c.cheaper} / {c.dearer} / {c.no_difference}"
            if c.no_word:
                words += f" ({c.no_word} stored without a word: re-run the study)"
            cells.append([c.side_a, c.side_b, c.pools, TERMINAL.num(c.median, "+.1f"),
                          "not stored" if c.min_resamples is None else num(c.min_resamples, ",.0f"),
                          TERMINAL.num(c.p_value, ".3g"), words])
        super().__init__(["side a", "side b", "pools", "median saving %", "resamples per pool interval",
                          "p (signed rank, optimistic; no verdict)",
                          "pools \"cheaper\" / \"dearer\" / \"no difference detected\" (each pool's own test)"], cells)


def across_pool_equal_risk_markdown(questions: list[tuple[str, str, list]] | None) -> str:
    """Every equal-risk question (and rule) of a pool study (cr2.studies.pools.across_pool_questions), at
    grids.default_alpha, as an AcrossPoolEqualRisk table under its title, and why no word is drawn across pools;
    None: the study stored no equal-risk rows."""
    if questions is None:
        return "(no equal-risk rows for this study: pools run before the equal-risk stage; re-run the study)"
    lines = []
    for question, rule, comparisons in questions:
        title = question if rule == DASH else f"{question}, {rule}"
        lines += [f"**{title}** (across pools)", "", AcrossPoolEqualRisk(comparisons).markdown()]
    return "\n".join(lines) + POOL_DEPENDENCE
