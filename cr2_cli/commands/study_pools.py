"""`cr2 study pools` (the pool sweep) and `cr2 study diagnostics` (one warehouse's label diagnostics).

Wired in cr2_cli/main.py as `study_app.command("pools")(friendly(pools_command, flow=True))` and
`study_app.command("diagnostics")(friendly(diagnostics_command, flow=True))`. Both print markdown tables from the views
v_pool_savings and v_pool_diagnostics.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from cr2_cli.console import SafeConsole, emit

if TYPE_CHECKING:
    import pandas as pd

console = SafeConsole()


def _fmt(v, spec: str = ".1f") -> str:
    from cr2.report import cells
    return cells.num(v, spec, missing_text=cells.EM_DASH)


def _table(rows: list[list], columns: list[str]) -> str:
    from cr2.report.markdown import text_table
    return text_table(columns, rows)


def savings_markdown(home: Path, study_id: str) -> str:
    """Per pool: each method's mean saving vs KNN and vs the best single model [95 % interval]
    (cr2.report.pools.PoolSavings), the verdict counts vs KNN (PoolVerdictCounts: each pool's stored word) and the
    across-pool signed-rank tests."""
    from cr2.report import cells
    from cr2.report.pools import PoolSavings, PoolVerdictCounts
    from cr2.routers import reference_router, routers_tagged
    from cr2.studies.pools import references
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.pools import pool_diagnostics, pool_savings

    with Warehouse(home, read_only=True) as wh:
        sav, diag = pool_savings(wh, study_id), pool_diagnostics(wh, study_id)
    if sav.empty:
        return "(no pool rows for this study)"
    ratio = diag.set_index("pool")["cost_ratio_realised"]
    routers = routers_tagged("paper", "compared")  # CR² and the paper's baselines compared with KNN (catalogue)
    lines = [PoolSavings(sav, ref, ratio, routers, style=cells.TERMINAL, missing_method=cells.EM_DASH).markdown()
             for ref in references()]
    knn = reference_router()
    lines += ["Pools per verdict against KNN:", "", PoolVerdictCounts(sav, knn, routers).markdown()]
    lines += [signed_rank_markdown(sav[sav["reference"] == knn])]
    return "\n".join(lines)


def signed_rank_markdown(knn: pd.DataFrame) -> str:
    """The across-pool signed-rank tests (cr2.report.pools.SignedRankTests), without a verdict (POOL_DEPENDENCE)."""
    from cr2.report import cells
    from cr2.report.pools import POOL_DEPENDENCE, SignedRankTests
    from cr2.studies.pools import signed_rank_tests
    tests = signed_rank_tests(knn)
    if tests.empty:
        return "(signed-rank test: fewer than 2 pools with a CR² saving)"
    return SignedRankTests(tests, style=cells.TERMINAL).markdown().rstrip("\n") + POOL_DEPENDENCE


def equal_risk_pools_markdown(home: Path, study_id: str) -> str:
    """Across pools, per equal-risk comparison (cr2.evaluation.equal_risk, at grids.default_alpha): the stored rows as
    cr2.report.pools.AcrossPoolEqualRisk tables (median saving, a signed-rank p as a description, each pool's own
    stored word counted)."""
    from cr2.report.pools import across_pool_equal_risk_markdown
    from cr2.studies.pools import across_pool_questions
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.pools import pool_equal_risk

    with Warehouse(home, read_only=True) as wh:
        er = pool_equal_risk(wh, study_id)
    return across_pool_equal_risk_markdown(None if er.empty else across_pool_questions(er))


def diagnostics_markdown(home: Path, study_id: str) -> str:
    """One row per pool (cr2.report.pools.PoolDiagnostics): headroom, accuracies, P(device right | m_ref wrong), φ and
    k-NN AUCs."""
    from cr2.report.pools import PoolDiagnostics
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.pools import pool_diagnostics

    with Warehouse(home, read_only=True) as wh:
        d = pool_diagnostics(wh, study_id)
    return PoolDiagnostics(d).markdown().rstrip("\n")


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
    import pandas as pd
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
