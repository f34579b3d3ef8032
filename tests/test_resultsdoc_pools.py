"""The generated sections "CR² across measured pools", "The ZeroEval device-class ladders" and "Simulator check"
(cr2_cli/resultsdoc/pools.py, zeroeval.py, simcheck.py): they render without any warehouse, on small stored studies
and sim-to-real runs, with every verdict word from a verdict function; and their helpers."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cr2_cli.resultsdoc import render_sections
from cr2_cli.resultsdoc.core import HOMES, OPEN, Doc, unbacked_words

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("pools", "zeroeval", "simcheck")


def _doc(homes: dict[str, Path], tmp: Path) -> Doc:
    return Doc({k: homes.get(k, tmp / "absent" / k) for k in HOMES}, REPO)


def test_sections_render_with_no_warehouse_and_say_what_is_missing(tmp_path):
    page = render_sections(_doc({}, tmp_path), SECTIONS, marked=True)
    assert unbacked_words(page) == []
    assert page.count("## ") >= 3 and "_Not in this checkout" in page
    # the label diagnostics need no warehouse: the packaged outputs file gives all 13 pools
    assert "### Label diagnostics of the 13 pools (all 12,032 questions)" in page
    assert "9 of the 13 pools share the same three edge models" in page
    # the Yi pools' m_ref is below two of its edge models on all questions, and the page says so with an interval
    yi = [line for line in page.splitlines() if line.startswith("| yi-6b |")]
    assert len(yi) == 3  # the diagnostics row and two m_ref-gap rows
    assert all(f"{OPEN}smaller" in line for line in yi[1:])


# ---------------------------------------------------------------- small stored studies and runs
def _models(device: str, edges: list[str]) -> list[dict]:
    return [{"id": device, "name": device, "role": "device"}] + [{"id": e, "name": e, "role": "edge"} for e in edges]


def _p(lo: float, hi: float) -> float:
    """A stand-in for the bootstrap p stored beside an interval: small where it clears 0 by far, near 0.04 where by
    a hair, large where it holds 0."""
    if lo > 0 or hi < 0:
        return 0.0001 if min(abs(lo), abs(hi)) > 1.0 else 0.04
    return 0.6


def _pool(wh, study: str, pool: str, edges: list[str], savings: dict[str, tuple[float, float, float]]) -> None:
    from cr2.evaluation.families import annotate
    from cr2.studies.pools import pool_family
    from cr2_warehouse.pools import write_pool

    run = {"label_source": "measured-mmlu-pro-v1", "models": _models(pool, edges), "reference": edges[-1],
           "run_id": f"eval-{pool}", "home": ".", "n_test": 600, "n_evaluable": 400, "n_queries": 2000,
           "cost_ratio_realised": 2.0, "cost_ratio_est": 2.0, "n_resamples": 1000, "seconds": 1.0}
    rows = []
    for ref in ("knn", "best-single"):
        for m, (e, lo, hi) in savings.items():
            rows.append({"subject": m, "other": ref, "metric": "mean_saving_pct", "target": None, "estimate": e,
                         "lower": lo, "upper": hi, "n": 20, "n_resamples": 1000, "p_value": _p(lo, hi)})
    rows = annotate(rows, pool_family)  # stored as the pool summary stores them
    for a, b in (("cr2-fixed-0.5", "knn@uncertified"), ("cr2-fixed-0.5", "mlp@uncertified")):
        rows.append({"subject": a, "other": b, "metric": "equal-risk:gate-quality", "target": None, "estimate": 1.0,
                     "lower": -1.0, "upper": 3.0, "n": 9, "n_resamples": 1000, "p_value": 0.5,
                     "family": "gate-quality/-/alpha=-/mean", "family_size": 2, "p_holm": 1.0,
                     "verdict": "no difference detected"})
    rows.append({"subject": pool, "other": None, "metric": "accuracy", "target": None, "estimate": 0.3, "lower": None,
                 "upper": None, "n": 600})
    write_pool(wh, study, pool, run, rows)


def _simcheck(wh, run_id: str, routing: bool, fresh_fit: bool) -> None:
    from cr2_warehouse.repository import write_simcheck

    ids = ["dev", "mid", "big"]
    rows = []
    for source, seed, shift in (("measured", None, 0.0), ("simulated-irt-v2", 0, 0.01), ("simulated-irt-v2", 1, 0.01),
                                ("simulated-irt-v1", 0, 0.2), ("simulated-irt-v1", 1, 0.2)):
        def add(section, statistic, value, model="", other="", lam=None, target=None):
            rows.append({"source": source, "seed": seed, "section": section, "statistic": statistic, "model": model,
                         "other": other, "lam": lam, "target": target, "value": value})
        add("structure", "solvable_share", 0.7 + shift)
        for i, m in enumerate(ids):
            add("structure", "accuracy", 0.3 + 0.1 * i, m)
            add("structure", "accuracy_on_solvable", 0.5 + 0.1 * i, m)
            add("diagnostics", "knn_auc_correct", 0.6 - shift, m)
        for a, b in (("dev", "mid"), ("dev", "big"), ("mid", "big")):
            add("structure", "correlation", 0.4 + shift, a, b)
            add("diagnostics", "knn_auc_disagree", 0.55 - shift, a, b)
        add("structure", "p_device_given_largest_wrong", 0.2 - shift, "dev", "big")
        if routing:
            for lam in (0.5, 2.0, 8.0):
                add("routing", "accuracy", 0.6, "cr2", lam=lam)
                add("routing", "risk", 0.0, "cr2", lam=lam)
            for t in (0.6, 0.7):
                for r in ("cr2", "mlp"):
                    sign = -1.0 if source == "simulated-irt-v1" else 1.0  # v1 gets every sign wrong
                    add("routing", "saving_vs_knn_pct", sign * (-5.0 if r == "cr2" else 1.0), r, target=t)
    write_simcheck(wh, run_id, 2000, shape={"fresh_fit": {"latent_correlation": 0.5} if fresh_fit else None},
                   pool={m: m.upper() for m in ids}, rows=rows)


@pytest.fixture(scope="module")
def homes(tmp_path_factory) -> dict[str, Path]:
    """A pools warehouse with a 3-pool study (two share their edge models), two ladder warehouses with a
    diagnostics study and a sim-to-real run with routing, and an MMLU-Pro warehouse with a `cr2 simcheck` run."""
    from cr2_warehouse.db import Warehouse

    root = tmp_path_factory.mktemp("resultsdoc-pools")
    h = {k: root / k for k in ("pools", "zeroeval-gemma", "zeroeval-qwen", "mmlu-pro")}
    with Warehouse(h["pools"]) as wh:
        same = ["e1", "e2", "e3"]
        # cr2's interval excludes 0 on one pool only by a hair: 'dearer' alone, 'no difference detected' under Holm
        _pool(wh, "pools-x", "p1", same, {"cr2": (-3.0, -6.0, -0.1), "mlp": (0.5, -2.0, 3.0),
                                          "full-information": (40.0, 35.0, 45.0)})
        _pool(wh, "pools-x", "p2", same, {"cr2": (-1.0, -4.0, 2.0), "mlp": (0.2, -2.0, 2.5),
                                          "full-information": (40.0, 35.0, 45.0)})
        _pool(wh, "pools-x", "p3", ["e4", "e5", "e6"], {"cr2": (-2.0, -5.0, 1.0), "mlp": (0.1, -2.0, 2.0),
                                                       "full-information": (40.0, 35.0, 45.0)})
    for key in ("zeroeval-gemma", "zeroeval-qwen"):
        with Warehouse(h[key]) as wh:
            _pool(wh, "diagnostics-x", key, ["e1", "e2", "e3"], {"cr2": (-2.0, -6.0, 2.0), "mlp": (8.0, 5.0, 11.0),
                                                                 "full-information": (30.0, 25.0, 35.0)})
            _simcheck(wh, "simcheck-w-x", routing=True, fresh_fit=False)
    with Warehouse(h["mmlu-pro"]) as wh:
        _simcheck(wh, "simcheck-x", routing=True, fresh_fit=True)
    return h


def test_sections_render_on_small_stored_studies_with_backed_words_only(homes, tmp_path):
    page = render_sections(_doc(homes, tmp_path), SECTIONS, marked=True)
    assert unbacked_words(page) == []
    assert "Study `pools-x`" in page and "2 of the 3 pools share the same three edge models (e1, e2, e3)" in page
    # p1's interval excludes 0 by a hair (p 0.04): under Holm over the pools × methods family it gets no word, and no
    # uncorrected word of a family member is printed anywhere
    p1 = [line for line in page.splitlines() if line.startswith("| p1 | 2.00 |")]
    assert len(p1) == 2 and all(f"{OPEN}dearer" not in line for line in p1)
    assert f"-3.0 [-6.0, -0.1] {OPEN}no difference detected" in p1[0]
    assert "| cr2 | 3 | 0 / 0 / 3 |" in page and "by its own interval" not in page
    assert "| resamples kept |" not in page and "the intervals rest on 1,000 resamples each" in page
    # the ladders: mlp's clear saving keeps its word under Holm
    assert f"+8.0 [+5.0, +11.0] {OPEN}cheaper" in page
    # sim-to-real: met / missed recomputed from the tolerances (v2 within, v1 outside)
    assert "Run `simcheck-x`" in page
    assert "| share some model solves | 0.700 | 0.710 | 0.900 | ± 0.020 | met | missed |" in page
    assert "| cr2 | 2 of 2 | -5.0 / -5.0 |" in page and "−5.0" not in page  # one minus sign
    assert "simcheck-w-x" in page


def test_equal_risk_pools_table_tests_across_pools_with_no_per_pool_words(homes):
    from cr2_cli.commands.study_pools import equal_risk_pools_markdown

    text = equal_risk_pools_markdown(homes["pools"], "pools-x")
    assert "| resamples per pool interval |" in text and "per-pool 95 % CI" not in text
    rows = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| cr2-fixed-0.5 |")}
    assert "| 1,000 |" in rows["knn@uncertified"] and "| 1,000 |" in rows["mlp@uncertified"]
    # across pools: a description without a verdict, and each pool's own stored word counted
    assert "**gate-quality** (across pools)" in text and "No verdict word across pools" in text
    assert "| 0 / 0 / " in rows["knn@uncertified"] and "verdict |" not in text


def test_pool_rows_without_stored_counts_say_so():
    from cr2.report.pools import resamples_kept

    assert resamples_kept([None, float("nan")]) == "not stored" and resamples_kept([]) == "not stored"
    assert resamples_kept([870, 1000, None]) == "870–1,000" and resamples_kept([1000, 1000]) == "1,000"


# ---------------------------------------------------------------- helpers
def test_shared_edges_counts_the_most_common_edge_set():
    from cr2.report.pools import shared_edges

    pools = [json.dumps(_models("a", ["x", "y", "z"])), json.dumps(_models("b", ["z", "y", "x"])),
             json.dumps(_models("c", ["x", "y", "w"]))]
    assert shared_edges(pools) == (2, ["x", "y", "z"])
    assert shared_edges([]) == (0, [])


def test_stored_family_reads_the_stored_holm_p_and_corrects_nothing():
    from cr2.evaluation.families import annotate
    from cr2.report.pools import family_sizes, stored_family

    rows = [{"metric": "mean_saving_pct", "estimate": e, "lower": lo, "upper": hi, "p_value": p}
            for e, lo, hi, p in ((10.0, 6.0, 14.0, 0.0), (-2.0, -4.0, -0.05, 0.03), (0.5, -1.0, 2.0, 0.7))]
    df = pd.DataFrame(annotate(rows, lambda r: "mean_saving_pct-vs-knn"))
    out = stored_family(df)
    assert list(out["word_holm"]) == ["cheaper", "no difference detected", "no difference detected"]
    assert (out["word"] == out["word_holm"]).all()  # a family member gets no uncorrected word
    assert list(out["p_holm"]) == pytest.approx([0.0, 0.06, 0.7]) and family_sizes(out) == "3"
    assert list(stored_family(df.iloc[1:2])["p_holm"]) == pytest.approx([0.06])  # a subset keeps its stored family
    with pytest.raises(ValueError, match="schema < 9"):
        stored_family(df.drop(columns="p_holm"))


def test_met_uses_the_tolerance_and_counts_several_targets():
    from cr2.report.simcheck import met_word
    from cr2.studies.simcheck import with_met

    rows = pd.DataFrame({"mean": [0.51, 0.60, 0.3], "measured": [0.50, 0.50, 0.1], "tolerance": [0.02, 0.02, np.nan]})
    met = with_met(rows)["met"]
    assert list(met.iloc[:2]) == [True, False] and pd.isna(met.iloc[2])
    assert met_word(met.iloc[:1]) == "met" and met_word(met.iloc[1:2]) == "missed"
    assert met_word(met) == "1 of 2" and met_word(met.iloc[2:]) == "–"


def test_pool_label_table_and_reference_gaps_on_a_hand_made_file():
    from cr2.evaluation.statistics import resample_indices
    from cr2.studies.diagnostics import reference_accuracy_gaps
    from cr2.studies.pools import Pool, PoolModel, pool_label_table

    def pm(name, params):
        return PoolModel(name=name, hf_name=name, params=params, chat=False)

    dev, e1, ref = pm("dev", 1e9), pm("e1", 2e9), pm("ref", 9e9)
    pool = Pool(device=dev, edges=(e1, ref), reference=ref)
    y = np.array([[1, 1, 0], [0, 1, 1], [0, 1, 0], [1, 0, 0], [np.nan, 1, 1]], dtype=float)  # dev, e1, ref
    row = pool_label_table(y, ["dev", "e1", "ref"], [pool])[0]
    assert row["n"] == 4 and row["accuracy"] == [0.5, 0.75, 0.25]  # the unanswered question drops out
    assert row["p_device_right_given_ref_wrong"] == pytest.approx(2 / 3)
    assert row["solvable"] == 1.0
    gaps = reference_accuracy_gaps(y, ["dev", "e1", "ref"], [pool], resample_indices(5, 200, np.random.default_rng(0)))
    by = {g["model"]: g for g in gaps}
    assert by["dev"]["estimate"] == pytest.approx(-0.25) and by["e1"]["estimate"] == pytest.approx(-0.5)
    assert all(g["lower"] <= g["estimate"] <= g["upper"] for g in gaps)


def test_sections_render_on_warehouses_that_hold_none_of_their_runs(tmp_path):
    """Warehouses of the current schema without a pool study, a diagnostics study or a sim-to-real run (as the
    test slice's default-scenario warehouse): each part says what is missing instead of failing."""
    from cr2_warehouse.db import Warehouse

    homes = {}
    for key in ("pools", "zeroeval-gemma", "zeroeval-qwen", "mmlu-pro"):
        with Warehouse(tmp_path / key):
            homes[key] = tmp_path / key
    page = render_sections(_doc(homes, tmp_path), SECTIONS, marked=True)
    assert unbacked_words(page) == []
    assert "no pool study (`cr2 study pools`) is stored" in page
    assert "no `cr2 study diagnostics` of the gemma ladder is stored" in page
    assert "no `cr2 simcheck` run is stored" in page and "no sim-to-real run with routing on the qwen ladder" in page


def test_markdown_table_default_output_is_unchanged_and_tight_empty_cells_are_opt_in():
    from cr2.report.markdown import markdown_table

    df = pd.DataFrame([["a", "", "1.5"], ["b", "x", ""]], columns=["k", "v", "w"], dtype=object)
    by_hand = "\n".join(["| k | v | w |", "| --- | --- | --- |", "| a |  | 1.5 |", "| b | x |  |"]) + "\n"
    assert markdown_table(df) == by_hand  # the writer's output before tight_empty existed
    assert markdown_table(df, tight_empty=True) == by_hand.replace("|  |", "| |")
    assert markdown_table(pd.DataFrame({"x": [0.123456, np.nan]})) == "| x |\n| --- |\n| 0.1235 |\n| – |\n"


def test_no_markdown_table_is_built_by_hand():
    """Every markdown table goes through cr2.report.markdown.markdown_table: no string literal outside a docstring
    starts a table row or holds a separator row."""
    import ast
    import re

    root = Path(__file__).resolve().parents[1]
    row = re.compile(r"^\|[ -]|\| ?--- ?\|")
    found = []
    for top in ("cr2", "cr2_cli", "tasks", "flows", "warehouse", "scripts", "benchmarks"):
        for path in sorted((root / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docs = {id(n.body[0].value) for n in ast.walk(tree)
                    if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
                    and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
            for n in ast.walk(tree):
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs \
                        and row.search(n.value):
                    found.append(f"{path.relative_to(root)}:{n.lineno}: {n.value[:40]!r}")
    assert not found, found
