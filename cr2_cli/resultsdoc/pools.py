"""docs/results.md, "CR² across measured pools": the label diagnostics of every pool on all MMLU-Pro
questions (a pure function over the packaged outputs file), the stored pool sweep (`cr2 study pools`: savings with
paired-bootstrap intervals, Holm over the pools × methods family, the across-pool signed-rank tests with Holm) and
the pool diagnostics (view v_pool_diagnostics). Every statistic is computed in the library (cr2.studies.pools,
cr2.studies.diagnostics) or read as stored; this module only lays the results out.

The helpers below (cells, stored verdicts, shared edge models) serve the ZeroEval and simulator sections too.
"""
from __future__ import annotations

import json
from collections import Counter
from typing import Iterable

import numpy as np
import pandas as pd

from cr2.report import cells
from cr2.report.markdown import text_table
from cr2.config.scenarios import scenario
from cr2.routers import routers_tagged
from cr2_cli.resultsdoc.core import Doc, counts, label_kind

KEY = "pools"
ROUTERS = routers_tagged("compared")  # learned methods: the family a verdict counts in (router catalogue)
ORACLE = "full-information"
POOLS_COMMAND = scenario(KEY).command_line()  # configs/scenarios.yaml
LABELS_COMMAND = "python scripts/pool_label_diagnostics.py"
RESAMPLES_LABELS = 1000  # paired resamples of the questions for the m_ref accuracy gaps (seed 0)


# ---------------------------------------------------------------- cells of the measured-pool sections (shared)
# cr2.report.cells' rules, negative numbers written with the typeset minus sign (cells.MINUS)
def num(v, spec: str = ".1f") -> str:
    return cells.num(v, spec, minus=cells.MINUS)


def cell(estimate, lower, upper, spec: str = "+.1f") -> str:
    return cells.ci_cell(estimate, lower, upper, spec, minus=cells.MINUS)


def span(values: Iterable, spec: str = ".3f") -> str:
    return cells.span(values, spec, minus=cells.MINUS)


def resamples_kept(values: Iterable) -> str:
    """'min–max' of the resamples some conditional intervals kept (pool_results.n_resamples: those on which every
    averaged target is reached), 'not stored' where none is (a study stored before schema 7)."""
    v = [x for x in values if x is not None and not pd.isna(x)]
    return span(v, ",.0f") if v else "not stored"


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
    return "–" if not v else (str(v[0]) if len(v) == 1 else f"{v[0]}–{v[-1]}")


def shared_edges(models_json: Iterable[str]) -> tuple[int, list[str]]:
    """(how many pools share the most common set of edge models, that set's names) from pool_runs.models."""
    sets = Counter(tuple(sorted(m.get("name") or m["id"] for m in json.loads(s) if m.get("role") == "edge"))
                   for s in models_json)
    if not sets:
        return 0, []
    edges, n = max(sets.items(), key=lambda kv: (kv[1], kv[0]))
    return n, list(edges)


def savings_table(doc: Doc, sav: pd.DataFrame, ref: str, ratio: pd.Series, label: str = "pool") -> str:
    """Per pool (row) and method (column): mean saving vs `ref` [95 % CI] and its stored word (Holm over its family
    within the pool: every learned method vs `ref`; the full-information reference is a bound, no test); the last
    column: the fewest and most resamples the row's intervals kept (each mean's: those where all its targets are
    reached)."""
    sub = sav[sav["reference"] == ref]
    fam = stored_family(sub[sub["method"].isin(ROUTERS)], "mean_saving_pct", "lower_pct", "upper_pct")
    methods = [m for m in (*ROUTERS, ORACLE) if m in set(sub["method"])]
    head = [label, "c_dev/c_edge", *(f"{m} vs {ref}" for m in methods)]
    rows = []
    for pool, g in sub.groupby("pool", sort=True):
        cells = []
        for m in methods:
            r = g[g["method"] == m]
            if r.empty:
                cells.append("–")
                continue
            r = r.iloc[0]
            c = cell(r.mean_saving_pct, r.lower_pct, r.upper_pct)
            if m in ROUTERS:
                h = fam[(fam["pool"] == pool) & (fam["method"] == m)].iloc[0]
                c += f" {doc.saving(h.lower_pct, h.upper_pct, h.p_holm)}"
            cells.append(c)
        rows.append([pool, num(ratio.get(pool), ".2f"), *cells])
    return text_table(head, rows, f"no savings against {ref} are stored")


def verdict_counts(doc: Doc, sav: pd.DataFrame, ref: str) -> tuple[str, pd.DataFrame]:
    """Per learned method: pools cheaper / dearer / no difference detected vs `ref`, each the stored word of its test
    (Holm within its pool); and the tests (for their family sizes)."""
    sub = sav[(sav["reference"] == ref) & sav["method"].isin(ROUTERS)]
    fam = stored_family(sub, "mean_saving_pct", "lower_pct", "upper_pct")
    head = ["method", "pools", f"Holm within each pool ({family_sizes(fam)} tests): \"cheaper\" / \"dearer\" / "
                               "\"no difference detected\""]
    rows = []
    for m in [m for m in ROUTERS if m in set(fam["method"])]:
        g = fam[fam["method"] == m]
        rows.append([m, str(len(g)), counts(g["word_holm"])])
    return text_table(head, rows, f"no learned method has a saving against {ref}"), fam


def changed_sentence(doc: Doc, family: pd.DataFrame, what: str, label: str = "pool") -> str:
    """The family the verdicts of a table were corrected over (uncorrected words of its members are not printed)."""
    return (f"Every verdict of {what} is its test's stored word: Holm over its family within that {label} (every "
            f"learned method's mean saving against the same reference, {family_sizes(family)} tests; "
            "docs/guarantees.md, \"One family rule\"); no member's uncorrected word is printed.\n")


# ---------------------------------------------------------------- the label diagnostics (pure, packaged data)
def _label_diagnostics(doc: Doc) -> tuple[str, list[dict], pd.DataFrame]:
    from cr2.studies.diagnostics import reference_accuracy_gap_family
    from cr2.studies.pools import load_pool_rule, pool_label_table, select_pools
    from cr2_warehouse.measured_files import read_measured_correctness

    rule = load_pool_rule(doc.repo / "configs" / "pools" / "mmlu-pro.yaml")
    pools = select_pools(rule)
    names, correct = read_measured_correctness(doc.repo / "data")
    rows = pool_label_table(correct, names, pools)
    gaps = reference_accuracy_gap_family(correct, names, pools, RESAMPLES_LABELS, np.random.default_rng(0))
    return "measured-mmlu-pro", rows, gaps


def label_diagnostics_table(rows: list[dict]) -> str:
    """The label diagnostics of pools (rows of cr2.studies.pools.pool_label_table) as a markdown table; the page and
    scripts/pool_label_diagnostics.py print this one."""
    head = ["pool", "n", "accuracy (device / edges… / m_ref)", "φ device–m_ref", "mean φ", "P(dev ✓ \\| ref ✗)",
            "P(ref ✓ \\| dev ✗)", "solvable"]
    cells = [[str(r["pool"]), str(r["n"]), " / ".join(f"{a:.3f}" for a in r["accuracy"]), f"{r['phi_device_ref']:.2f}",
              f"{r['phi_mean']:.2f}", f"{r['p_device_right_given_ref_wrong']:.3f}",
              f"{r['p_ref_right_given_device_wrong']:.3f}", f"{r['solvable']:.3f}"] for r in rows]
    return text_table(head, cells, "the rule selects no pool")


def _labels_part(doc: Doc) -> str:
    from cr2.core.errors import Cr2Error

    try:
        source, rows, gaps = _label_diagnostics(doc)
    except (OSError, Cr2Error) as e:  # the packaged outputs file or the rule is missing or unreadable here
        return f"_Label diagnostics not available: {type(e).__name__}: {e}_\n"
    n_q = sorted({r["n"] for r in rows})
    out = [f"### Label diagnostics of the {len(rows)} pools (all {'/'.join(f'{n:,}' for n in n_q)} questions)", "",
           f"`{LABELS_COMMAND}` — {label_kind(source)} labels (data/measured/mmlu_pro_outputs.parquet, the "
           "extraction "
           "rule of docs/measured.md). The page calls the same pure function (cr2.studies.pools.pool_label_table) on the "
           "packaged file. Per pool: each model's accuracy in pool order (device, then the edge models by size, "
           "m_ref last), the φ correlation of device and m_ref correctness, the mean φ over the pool's pairs, "
           "P(device right | m_ref wrong), P(m_ref right | device wrong) and the share of questions some pool model "
           "solves.", "", label_diagnostics_table(rows).rstrip("\n")]
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
    out.append(_gap_part(doc, gaps))
    return "\n".join(out)


def _gap_part(doc: Doc, g: pd.DataFrame) -> str:
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
    head = ["pool", "m_ref", "other model", "role", "accuracy gap, points", "p, Holm", "m_ref's accuracy is"]
    rows = [[str(r.pool), str(r.reference), str(r.model), str(r.role),
             cell(100 * r.estimate, 100 * r.lower, 100 * r.upper), f"{r.p_holm:.3g}", doc.compare(r.lower, r.upper)]
            for r in below.itertuples(index=False)]
    return "\n".join(lines) + "\n" + text_table(head, rows)


# ---------------------------------------------------------------- the sweep
def _signed_rank_part(doc: Doc, knn: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    from cr2.studies.pools import signed_rank_tests

    tests = signed_rank_tests(knn)
    if tests.empty:
        return "_(signed-rank test: fewer than 2 pools with a CR² saving)_\n", pd.DataFrame()
    from cr2_cli.commands.study_pools import POOL_DEPENDENCE

    tests = tests[tests["error"].isna()]
    lines = ["Across pools: Wilcoxon signed-rank statistic of CR²'s mean saving vs KNN against each baseline's (KNN: "
             "0), as a description, without a verdict." + POOL_DEPENDENCE.replace("\n\n", " ").rstrip("\n"), ""]
    head = ["CR² against", "pools", "median(CR² − baseline), points", "W⁺", "W⁻", "p (two-sided, optimistic)", "test"]
    lines.append(text_table(head, [[str(r.baseline), str(r.pools), num(r.median, "+.1f"), f"{r.w_plus:g}",
                                    f"{r.w_minus:g}", f"{r.p:.3g}", str(r.method)]
                                   for r in tests.itertuples(index=False)]).rstrip("\n"))
    return "\n".join(lines) + "\n", tests


def _sweep_part(doc: Doc) -> str:
    from cr2_cli.commands.study_pools import diagnostics_markdown
    from cr2_warehouse.pools import newest_study, pool_diagnostics, pool_savings, pool_study_runs

    with doc.warehouse(KEY) as wh:
        sid = newest_study(wh, "pools")
        if sid is None:
            return doc.missing(KEY, "no pool study (`cr2 study pools`) is stored in this warehouse")
        runs, sav, diag = pool_study_runs(wh, sid), pool_savings(wh, sid), pool_diagnostics(wh, sid)
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
    for ref in ("knn", "best-single"):
        out += [savings_table(doc, sav, ref, ratio), ""]
    for ref, what in (("knn", "KNN"), ("best-single", "the best single model")):
        table, changed = verdict_counts(doc, sav, ref)
        out += [f"Pools per verdict against {what}:", "", table,
                changed_sentence(doc, changed, f"the savings against {what}"), ""]
    knn = sav[sav["reference"] == "knn"]
    sr, tests = _signed_rank_part(doc, knn)
    out += [sr, "", f"Diagnostics (all {span(runs['n_queries'], ',.0f')} sample questions; view v_pool_diagnostics; "
            "headroom = the full-information reference's mean saving vs KNN):", "",
            diagnostics_markdown(doc.homes[KEY], sid), "", _reading(doc, sav, diag, tests)]
    return "\n".join(out)


def _kept_sentence(runs: pd.DataFrame, sav: pd.DataFrame) -> str:
    """Every interval rests on all its resamples: said with the numbers stored."""
    kept = pd.to_numeric(sav["n_resamples"], errors="coerce") if "n_resamples" in sav else pd.Series(dtype=float)
    return (f"A target a frontier misses on a resample costs the cheapest Always-model that reaches it there, so every "
            f"mean is defined on every resample: the intervals rest on {resamples_kept(kept)} resamples each. The "
            "headroom interval in the diagnostics below is the full-information cell of the first table.")


def _reading(doc: Doc, sav: pd.DataFrame, diag: pd.DataFrame, tests: pd.DataFrame) -> str:
    """What the sweep says, every number and word from the rows above."""
    knn = stored_family(sav[(sav["reference"] == "knn") & sav["method"].isin(ROUTERS)], "mean_saving_pct", "lower_pct",
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


def render(doc: Doc) -> str:
    head = ["## CR² across measured pools", "",
            "The pools come from the rule in `configs/pools/mmlu-pro.yaml`, committed before any pool was run "
            "(docs/pools.md): each model of ≤ 8B parameters on the device, with the edge models nearest 2×, 5× and "
            "10× its size (active parameters, log scale), m_ref the pool's largest edge model. Labels: the MMLU-Pro "
            "authors' published outputs (docs/measured.md). This section is printed by `make results-doc` "
            "(cr2_cli/resultsdoc/pools.py) from the pools warehouse and the packaged outputs file.", "",
            "Commands that rebuild what it reads:", "", "```bash",
            f"{POOLS_COMMAND}   # = make study-pools", f"{LABELS_COMMAND}   # the label diagnostics, all questions",
            "make results-doc", "```", "", _labels_part(doc), ""]
    if not doc.has(KEY):
        return "\n".join(head + [doc.missing(KEY, "the pool sweep")])
    return "\n".join(head + [_sweep_part(doc)])
