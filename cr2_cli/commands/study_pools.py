"""`cr2 study pools` (the pool sweep) and `cr2 study diagnostics` (one warehouse's label diagnostics).

Wired in cr2_cli/main.py as `study_app.command("pools")(friendly(pools_command, flow=True))` and
`study_app.command("diagnostics")(friendly(diagnostics_command, flow=True))`. Both print markdown tables from the views
v_pool_savings and v_pool_diagnostics.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import pandas as pd
import typer

from cr2.report import cells
from cr2.studies.pools import signed_rank_tests
from cr2.report.markdown import text_table
from cr2_cli.console import SafeConsole, emit

console = SafeConsole()


def _fmt(v, spec: str = ".1f") -> str:
    return cells.num(v, spec, missing_text=cells.EM_DASH)


def _table(rows: list[list], columns: list[str]) -> str:
    return text_table(columns, rows)


def savings_markdown(home: Path, study_id: str) -> str:
    """Per pool: each method's mean saving vs KNN and vs the best single model [95 % interval], verdict vs KNN."""
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.pools import pool_diagnostics, pool_savings

    with Warehouse(home, read_only=True) as wh:
        sav, diag = pool_savings(wh, study_id), pool_diagnostics(wh, study_id)
    if sav.empty:
        return "(no pool rows for this study)"
    sav["cell"] = [f"{_fmt(e)} [{_fmt(lo)}, {_fmt(hi)}]" for e, lo, hi in
                   zip(sav["mean_saving_pct"], sav["lower_pct"], sav["upper_pct"])]
    from cr2.routers import routers_tagged

    # CR² and the paper's baselines compared with KNN (router catalogue), then the full-information oracle
    methods = [m for m in (*routers_tagged("paper", "compared"), "full-information") if m in set(sav["method"])]
    lines = []
    for ref in ("knn", "best-single"):
        sub = sav[sav["reference"] == ref].pivot(index="pool", columns="method", values="cell")
        ratio = diag.set_index("pool")["cost_ratio_realised"]
        rows = [[pool, _fmt(ratio.get(pool), ".2f")] + [row.get(m, "—") for m in methods] for pool, row in sub.iterrows()]
        lines.append(_table(rows, ["pool", "c_dev/c_edge"] + [f"{m} vs {ref}" for m in methods]))
    knn = sav[sav["reference"] == "knn"]
    counts = knn.groupby("method")["verdict"].value_counts().unstack(fill_value=0)
    lines.append("pools where a method is detectably cheaper / dearer than KNN / no difference detected:")
    for m in methods:
        if m in counts.index:
            c = counts.loc[m]
            lines.append(f"- {m}: {c.get('cheaper', 0)} / {c.get('dearer', 0)} / {c.get('no difference detected', 0)}")
    lines += ["", signed_rank_markdown(knn)]
    return "\n".join(lines)


def signed_rank_markdown(knn: pd.DataFrame) -> str:
    """The across-pool signed-rank tests (signed_rank_tests) as a table, without a verdict (POOL_DEPENDENCE)."""
    tests = signed_rank_tests(knn)
    if tests.empty:
        return "(signed-rank test: fewer than 2 pools with a CR² saving)"
    rows = []
    for t in tests.itertuples(index=False):
        if t.error is not None:
            rows.append([t.baseline, t.pools, "—", "—", "—", "—", t.error])
            continue
        rows.append([t.baseline, t.pools, f"{t.median:+.1f}", f"{t.w_plus:g}", f"{t.w_minus:g}", f"{t.p:.3g}", t.method])
    head = ["CR² against", "pools", "median(CR² − baseline), pts", "W⁺", "W⁻", "p (two-sided, optimistic)", "test"]
    return _table(rows, head).rstrip("\n") + POOL_DEPENDENCE


POOL_DEPENDENCE = ("\n\nNo verdict word across pools. The pools are not independent units: they share the questions, "
                   "the split and the resample index, and several share edge models. A signed-rank test over them "
                   "treats them as independent, so its p is optimistic (anti-conservative), and Holm's correction "
                   "cannot repair the dependence of the units; a joint bootstrap over the shared question ids would "
                   "need every pool's statistic on every resample of one index, which the sweep does not store. The "
                   "median and p describe the pools; the evidence is each pool's own test (its stored word, Holm "
                   "within the pool), counted per comparison.\n")


def _rule_of(side: str) -> str:
    return side.split("@", 1)[1] if "@" in side and not side.endswith("@uncertified") else "–"


def equal_risk_pools_markdown(home: Path, study_id: str, word=lambda w: w or "—") -> str:
    """Across pools, per equal-risk comparison (cr2.evaluation.equal_risk, at grids.default_alpha): the pools' median
    mean saving, a signed-rank p of the savings against 0 as a description (no verdict: POOL_DEPENDENCE), and the
    count of each pool's own stored word (its run's family: question × rule × α, Holm within the pool).
    `word` renders each verdict (docs/results.md marks the ones its verdict functions produce)."""
    from cr2.studies.pools import across_pool_comparisons
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.pools import pool_equal_risk

    with Warehouse(home, read_only=True) as wh:
        er = pool_equal_risk(wh, study_id)
    if er.empty:
        return "(no equal-risk rows for this study: pools run before the equal-risk stage; re-run the study)"
    from cr2.evaluation.equal_risk import QUESTIONS

    # a question a pool stored that is no longer asked (the deploy rule's former ordered pairs) is not read as one
    er = er[er["question"].isin(QUESTIONS)]
    er = er.assign(rule=er["subject"].map(_rule_of))
    lines = []
    for (question, rule), q in er.groupby(["question", "rule"], sort=False):
        rows = []
        for c in across_pool_comparisons(q):
            words = f"{c.cheaper} / {c.dearer} / {c.no_difference}"
            if c.no_word:
                words += f" ({c.no_word} stored without a word: re-run the study)"
            rows.append([c.side_a, c.side_b, c.pools, f"{c.median:+.1f}",
                         "not stored" if c.min_resamples is None else f"{c.min_resamples:,}",
                         "—" if c.p_value is None else f"{c.p_value:.3g}", words])
        head = ["side a", "side b", "pools", "median saving %", "resamples per pool interval",
                "p (signed rank, optimistic; no verdict)",
                "pools \"cheaper\" / \"dearer\" / \"no difference detected\" (each pool's own test)"]
        title = question if rule == "–" else f"{question}, {rule}"
        lines += [f"**{title}** (across pools)", "", _table(rows, head)]
    return "\n".join(lines) + POOL_DEPENDENCE


def diagnostics_markdown(home: Path, study_id: str) -> str:
    """One row per pool: headroom, accuracies, P(device right | m_ref wrong), φ and k-NN AUCs."""
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.pools import pool_diagnostics

    with Warehouse(home, read_only=True) as wh:
        d = pool_diagnostics(wh, study_id)
    cols = ["pool", "headroom vs KNN %", "acc dev", "acc m_ref", "P(dev ✓ \\| ref ✗)", "φ dev–ref", "φ mean",
            "AUC dev ✓", "AUC ref ✓", "AUC dev≠ref", "AUC ≠ mean"]
    rows = [[r.pool, f"{_fmt(r.headroom_vs_knn_pct)} [{_fmt(r.headroom_lower_pct)}, {_fmt(r.headroom_upper_pct)}]",
             _fmt(r.device_accuracy, ".3f"), _fmt(r.ref_accuracy, ".3f"), _fmt(r.p_device_right_given_ref_wrong, ".3f"),
             _fmt(r.phi_device_ref, ".2f"), _fmt(r.phi_mean, ".2f"), _fmt(r.auc_device_correct, ".3f"),
             _fmt(r.auc_ref_correct, ".3f"), _fmt(r.auc_disagree_device_ref, ".3f"), _fmt(r.auc_disagree_mean, ".3f")]
            for r in d.itertuples(index=False)]
    return _table(rows, cols).rstrip("\n")


def pools_command(rule: Path = typer.Option(Path("configs/pools/mmlu-pro.yaml"), "--rule",
                                            help="pool rule YAML (configs/pools/)"),
                  pool: Optional[list[str]] = typer.Option(None, "--pool", help="run only these pools (repeatable)"),
                  config: Optional[Path] = typer.Option(None, "--config", "-c",
                                                        help="measured config YAML the pools vary (e.g. "
                                                        "configs/mmlu-pro-measured.yaml)"),
                  home: Optional[Path] = typer.Option(None, "--home", help="base warehouse folder (default: $CR2_HOME "
                                                      "or var/)"),
                  embeddings_from: Optional[Path] = typer.Option(None, "--embeddings-from", help="copy e(x) of the "
                                                                 "same questions from this warehouse home (e.g. "
                                                                 "var/mmlu-pro) instead of embedding them")) -> None:
    """Pool sweep: every pool of a written-down rule end to end, with intervals and label diagnostics."""
    from cr2_cli.options import home_dir
    from cr2_flows.pools import study_pools_flow

    h = home_dir(home)
    t0 = time.perf_counter()
    out = study_pools_flow(config_path=str(config) if config else None, home=str(h), rule_path=str(rule),
                           pools=pool or None, embeddings_from=str(embeddings_from) if embeddings_from else None)
    emit(savings_markdown(h, out["study_id"]))
    emit(equal_risk_pools_markdown(h, out["study_id"]))
    emit(diagnostics_markdown(h, out["study_id"]))
    console.print(f"cr2 study pools finished in {time.perf_counter() - t0:.1f} s; study {out['study_id']} "
                  f"(tables pool_runs, pool_results; views v_pool_savings, v_pool_diagnostics)", highlight=False)


def diagnostics_command(config: Optional[Path] = typer.Option(None, "--config", "-c", help="config YAML"),
                        home: Optional[Path] = typer.Option(None, "--home", help="warehouse folder (default: "
                                                            "$CR2_HOME or var/)")) -> None:
    """Label diagnostics and savings with intervals of one warehouse's newest evaluation run (a scenario)."""
    from cr2_cli.options import home_dir
    from cr2_flows.pools import study_diagnostics_flow

    h = home_dir(home)
    out = study_diagnostics_flow(config_path=str(config) if config else None, home=str(h))
    emit(savings_markdown(h, out["study_id"]))
    emit(diagnostics_markdown(h, out["study_id"]))
    console.print(f"study {out['study_id']} (run {out['run_id']})", highlight=False)


def simcheck_markdown(home: Path, run_id: str) -> str:
    """Measured vs simulated (mean over seeds) for the structure and diagnostics statistics, and the savings' signs."""
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.reads import simcheck_savings, simcheck_structure

    with Warehouse(home, read_only=True) as wh:
        v, sav = simcheck_structure(wh, run_id), simcheck_savings(wh, run_id)
    rows = [[r.source, r.statistic, r.model, r.other, _fmt(r.measured, ".3f"),
             f"{_fmt(r.mean, '.3f')} [{_fmt(r.q05, '.3f')}, {_fmt(r.q95, '.3f')}]", _fmt(r.diff, "+.3f"),
             _fmt(r.tolerance, ".3f"),
             "" if r.meets_target is None or pd.isna(r.meets_target) else ("yes" if r.meets_target else "NO")]
            for r in v.itertuples(index=False)]
    out = _table(rows, ["source", "statistic", "model", "other", "measured", "simulated mean [5–95 %]", "diff",
                        "tolerance", "met"])
    if len(sav):
        g = sav.groupby(["source", "model"]).agg(n=("meets_target", "size"), same_sign=("meets_target", "sum"),
                                                 measured=("measured", "mean"), simulated=("mean", "mean"))
        rows = [[src, model, int(r.n), int(r.same_sign), _fmt(r.measured), _fmt(r.simulated)]
                for (src, model), r in g.iterrows()]
        out += "\n" + _table(rows, ["source", "router", "targets", "same sign as measured",
                                    "mean saving vs KNN measured", "simulated"])
    return out.rstrip("\n")


def simcheck_command(config: Optional[Path] = typer.Option(None, "--config", "-c", help="the measured scenario's "
                                                           "config YAML (labels.measured)"),
                     home: Optional[Path] = typer.Option(None, "--home", help="its warehouse folder (prepared)"),
                     no_routing: bool = typer.Option(False, "--no-routing", help="label structure and diagnostics "
                                                     "only (skip fitting the routers per label set)")) -> None:
    """Sim-to-real check on any measured warehouse: its measured labels vs simulated-irt-v2 on the same queries."""
    from cr2_cli.options import home_dir
    from cr2_flows.pools import study_simcheck_flow

    h = home_dir(home)
    t0 = time.perf_counter()
    out = study_simcheck_flow(config_path=str(config) if config else None, home=str(h), routing=not no_routing)
    emit(simcheck_markdown(h, out["run_id"]))
    console.print(f"simcheck run {out['run_id']} on {out['n_questions']} queries ({', '.join(out['benchmarks'])}) in "
                  f"{time.perf_counter() - t0:.1f} s (view v_simcheck)", highlight=False)
