"""cr2 study pools: does CR² beat the baselines over many measured pools, not just one?

The pools come from a rule written down before any pool was run (configs/pools/<name>.yaml, cr2/studies/pools.py,
docs/pools.md). For each pool the study runs, in the pool's own warehouse
  prepare (labels and costs of the pool; embeddings, splits and states reused) → train → calibrate →
  baselines → evaluate → certify → equal-risk → intervals → pool summary (comparisons vs KNN and vs the best
  single model with paired-bootstrap intervals, the equal-risk decomposition at grids.default_alpha, the headroom
  and the label diagnostics)
— each a cached task — and writes the pool's rows into pool_runs / pool_results of the base warehouse (views
v_pool_savings, v_pool_diagnostics). The report and the ablation are skipped, and so are the risk-vs-α
Monte-Carlo bands (evaluation.n_resplits = 0): they are not pool statistics.

Embeddings are computed once: the base warehouse (`--home`, e.g. var/mmlu-pro) is ingested and prepared under the
config first (cached: nothing is done when `cr2 run` already ran there), and every pool's warehouse under
<home>/studies/pools/<pool>/ starts as a copy of it, so no query is embedded twice. An interrupted study resumes:
a pool whose stages are cached only re-writes its rows.

`cr2 study diagnostics` runs the pool summary on one warehouse's newest evaluation run (a scenario) into the same
tables, so a scenario and a sweep read alike.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from prefect import flow

from cr2.config import Config, load_config
from cr2_tasks.common import run_stage
from cr2_tasks.store import study_file_digest, study_id
from cr2_warehouse.db import Warehouse

STUDY_DIR = Path("studies") / "pools"  # pool homes, relative to the base warehouse home
DEFAULT_RULE = "configs/pools/mmlu-pro.yaml"


def pool_config(config: Config, overrides: dict[str, Any]) -> Config:
    """The base config with a pool's models, m_ref, hardware and label mapping in place (replaced, not merged)."""
    data = config.model_dump(mode="json")
    data["models"] = overrides["models"]
    data["reference_model"] = overrides["reference_model"]
    data["hardware"] = overrides["hardware"]
    data["labels"]["measured"]["models"] = overrides["labels"]["measured"]["models"]
    data["evaluation"]["n_resplits"] = 0  # the risk-vs-α bands are not a pool statistic
    return Config.model_validate(data)


def pool_home(home: Path, pool: str) -> Path:
    """The warehouse folder of one pool: a copy of the base warehouse made on first use."""
    from cr2_warehouse.db import copy_warehouse

    return copy_warehouse(home, home / STUDY_DIR / pool)


def run_pool(config: Config, home: Path) -> dict:
    """The pipeline stages of one pool, each a cached task in `home`: ingest (the pool's models), then prepare …
    intervals (cr2_flows.evaluate.study_run)."""
    from cr2_flows.evaluate import study_run
    from cr2_flows.ingest import ingest

    ingest(config, home)  # registers the pool's models (the queries are the base's, unchanged)
    return study_run(config, home)


def summarise(config: Config, home: Path, run_id: str) -> dict:
    """The pool-summary task of run `run_id` in `home` (cached)."""
    from cr2_tasks.pools import POOL_SUMMARY

    return run_stage(POOL_SUMMARY, config, home, run_id)


def _models_json(config: Config, names: dict[str, str]) -> list[dict[str, Any]]:
    return [{"id": m.id, "name": names.get(m.id, m.hf_name), "params": m.params, "active_params": m.active_params,
             "platform": m.platform, "role": m.role} for m in config.models]


def _record(base_home: Path, study_id: str, pool: str, config: Config, home: Path, summary: dict,
            seconds: float) -> None:
    from cr2_warehouse.pools import write_pool

    names = dict(config.labels.measured.models) if config.labels.measured is not None else {}
    s = summary["summary"]
    run = {**{k: s[k] for k in ("run_id", "n_test", "n_evaluable", "n_queries", "cost_ratio_realised",
                                 "cost_ratio_est", "n_resamples")},
           "label_source": config.labels.source, "models": _models_json(config, names),
           "reference": config.ref_model_id, "home": "." if home == base_home else str(home.relative_to(base_home)),
           "seconds": round(seconds, 1)}
    with Warehouse(base_home) as wh:
        write_pool(wh, study_id, pool, run, summary["rows"])


def study_id_of(config: Config, rule_hash: str, pools: list[str]) -> str:
    """A sweep's id: the base config, the rule and its pools (a re-run replaces its rows)."""
    return study_id("pools", config.section_hash(), rule_hash, sorted(pools))


@flow(name="cr2-study-pools", log_prints=True, validate_parameters=False)
def study_pools_flow(config_path: str | None = None, home: str | None = None, rule_path: str = DEFAULT_RULE,
                     pools: list[str] | None = None, embeddings_from: str | None = None) -> dict:
    """Run (or resume) every pool of the rule (or the named ones); rows in pool_runs / pool_results.

    embeddings_from: another warehouse home (e.g. the full measured scenario's, var/mmlu-pro) whose e(x) of the
    same questions (same text, same encoder) are copied before prepare, so nothing is embedded twice."""
    from cr2.core.errors import InvalidValueError
    from cr2.studies.pools import load_pool_rule, pool_overrides, select_pools
    from cr2.config.shipped import shipped_path
    from cr2_flows.ingest import ingest
    from cr2_flows.prepare import prepare
    from cr2_warehouse.db import default_home

    config = load_config(config_path)
    if config.labels.measured is None:
        raise InvalidValueError("a pool sweep needs a measured config (labels.measured), e.g. "
                                "configs/mmlu-pro-measured.yaml")
    h = Path(home) if home else default_home()
    rp = Path(rule_path) if Path(rule_path).is_absolute() or Path(rule_path).is_file() else shipped_path(rule_path)
    rule = load_pool_rule(rp)
    chosen = select_pools(rule)
    if pools:
        unknown = sorted(set(pools) - {p.pool_id for p in chosen})
        if unknown:
            raise InvalidValueError(f"unknown pool(s) {unknown}; the rule gives: {[p.pool_id for p in chosen]}")
        chosen = [p for p in chosen if p.pool_id in set(pools)]
    sid = study_id_of(config, study_file_digest(rp), [p.pool_id for p in select_pools(rule)])
    t_all = time.perf_counter()
    ingest(config, h)
    if embeddings_from:
        from cr2_warehouse.db import DB_NAME
        from cr2_warehouse.pools import copy_embeddings

        src = Path(embeddings_from) / DB_NAME
        if not src.is_file():
            raise InvalidValueError(f"--embeddings-from: no warehouse at {src}")
        with Warehouse(h) as wh:
            n = copy_embeddings(wh, Path(embeddings_from), config.embedding.store_name)
        print(f"copied {n} embeddings from {src}")
    prepare(config, h)  # the embeddings every pool reuses (cached when `cr2 run` already ran here)
    print(f"pool study {sid}: {len(chosen)} pools from {rp.name}; base warehouse {h}")
    out: dict[str, Any] = {"study_id": sid, "pools": {}}
    for i, pool in enumerate(chosen, 1):
        t0 = time.perf_counter()
        cfg = pool_config(config, pool_overrides(pool, rule))
        ph = pool_home(h, pool.pool_id)
        evaluated = run_pool(cfg, ph)
        summary = summarise(cfg, ph, evaluated["run_id"])
        seconds = time.perf_counter() - t0
        _record(h, sid, pool.pool_id, cfg, ph, summary, seconds)
        print(f"pool {i}/{len(chosen)} {pool.pool_id} [{', '.join(m.name for m in pool.models)}]: run "
              f"{evaluated['run_id']} in {seconds:.1f} s{' (cached)' if summary['cached'] else ''}")
        out["pools"][pool.pool_id] = {"run_id": evaluated["run_id"], "home": str(ph), "seconds": round(seconds, 1),
                                      "cached": bool(summary["cached"])}
    out["wall_s"] = round(time.perf_counter() - t_all, 1)
    return out


@flow(name="cr2-study-diagnostics", log_prints=True, validate_parameters=False)
def study_diagnostics_flow(config_path: str | None = None, home: str | None = None) -> dict:
    """The pool summary (comparisons, headroom, label diagnostics) of the newest evaluation run of one warehouse."""
    from cr2.core.errors import DataValidationError
    from cr2_warehouse.db import default_home

    config = load_config(config_path)
    h = Path(home) if home else default_home()
    from cr2_warehouse.pools import newest_run

    with Warehouse(h, read_only=True) as wh:
        run = newest_run(wh, config.labels.source)
    if run is None:
        raise DataValidationError(f"no evaluation run under labels '{config.labels.source}' in {h}; run `cr2 run` "
                                  "with this config first")
    t0 = time.perf_counter()
    summary = summarise(config, h, str(run))
    sid = study_id("diagnostics", config.section_hash(), str(run))
    _record(h, sid, config.model_ids[0], config, h, summary, time.perf_counter() - t0)
    return {"study_id": sid, "run_id": str(run), "pool": config.model_ids[0], "cached": summary["cached"]}


@flow(name="cr2-study-simcheck", log_prints=True, validate_parameters=False)
def study_simcheck_flow(config_path: str | None = None, home: str | None = None, routing: bool = True) -> dict:
    """The sim-to-real check on the measured warehouse at `home` (tasks/simcheck_measured.py); rows in `simcheck`."""
    from cr2_tasks.simcheck_measured import SIMCHECK_MEASURED
    from cr2_warehouse.db import default_home

    config = load_config(config_path)
    h = Path(home) if home else default_home()
    return run_stage(SIMCHECK_MEASURED, config, h, routing)
