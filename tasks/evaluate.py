"""Evaluate task: routing policies on the test split, over the λ grid (and the α grid for CR²), tidy metrics.

Writes one `eval_runs` row, the per-query `decisions` and the tidy `metrics` (run, method, λ, α,
benchmark, metric, value) in one transaction. Test queries no model answers correctly are excluded
(paper §VII-A). The key covers the test rows, the trained artefacts, the threshold table and the code.
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from tasks.common import code_hash, in_home, make_key, warehouse_epoch
from tasks.train import routing_args
from warehouse.db import Warehouse
from warehouse.routing_data import load_routing_sets, routing_fingerprint

EVAL_CODE = ("cr2.metrics", "cr2.routing", "cr2.crc", "tasks.evaluate")


def evaluate_key(config: Config, wh: Warehouse, trained: dict, calibrated: dict, baselines: dict) -> str:
    return make_key("evaluate", trained["teacher"]["fingerprint"], trained["gate"]["fingerprint"], calibrated["version"],
                    sorted((k, v["fingerprint"]) for k, v in baselines.items()),
                    routing_fingerprint(wh, **routing_args(config), splits=("val", "test")),
                    config.section_hash("grids", "routing", "evaluation"), code_hash(*EVAL_CODE), warehouse_epoch(wh))


def _baseline_proba(wh: Warehouse, name: str, fingerprint: str, data) -> np.ndarray:
    """p̂ [n, M] of a fitted baseline for the rows of `data`, from `predictions`."""
    df = wh.df("SELECT query_id, model_id, p_hat FROM predictions WHERE router = ? AND fingerprint = ?", [name, fingerprint])
    wide = df.pivot(index="query_id", columns="model_id", values="p_hat").reindex(columns=list(data.model_ids))
    out = wide.reindex(data.query_id).to_numpy(dtype=np.float64)
    if np.isnan(out).any():
        from cr2.errors import DataValidationError

        raise DataValidationError(f"predictions of '{name}' ({fingerprint}) miss test queries; re-run `cr2 run`")
    return out


def _metric_rows(run_id: str, method: str, lam: float, alpha: float | None, data, decisions, proba,
                 keep: np.ndarray) -> list[dict]:
    """Tidy metric rows, pooled ('all') and per benchmark.

    accuracy, cost and local_rate are taken over the `keep` rows (queries some model solves, when
    excluded as in the paper); the false-acceptance risk over every test row, the exchangeable
    population the CRC guarantee is about (dropping unsolvable queries would bias it).
    """
    from cr2.metrics import accuracy, false_acceptance_risk, false_defer_rate, local_rate, mean_cost

    rows = []
    for bench in ["all", *sorted(set(data.benchmark))]:
        in_b = np.ones(len(data), dtype=bool) if bench == "all" else data.benchmark == bench
        idx, idx_all = np.flatnonzero(in_b & keep), np.flatnonzero(in_b)
        sub, dec = data.subset(idx), _subset_decisions(decisions, idx)
        values = {"accuracy": accuracy(sub, dec), "cost": mean_cost(sub, dec), "local_rate": local_rate(dec),
                  "risk": false_acceptance_risk(proba[idx_all], data.subset(idx_all), _subset_decisions(decisions, idx_all),
                                                lam),
                  "n": float(len(idx)), "n_risk": float(len(idx_all))}
        if "gate_accept" in decisions.extra:  # gate-error decomposition (CR² and its variants)
            values["false_defer"] = false_defer_rate(proba[idx_all], data.subset(idx_all),
                                                     _subset_decisions(decisions, idx_all), lam)
        rows += [{"run_id": run_id, "method": method, "lam": lam, "alpha": alpha, "benchmark": bench, "metric": k,
                  "value": v} for k, v in values.items()]
    return rows


def _subset_decisions(decisions, idx):
    from cr2.data import Decisions

    extra = {k: (v[idx] if isinstance(v, np.ndarray) and v.shape[:1] == decisions.chosen.shape else v)
             for k, v in decisions.extra.items()}
    return Decisions(chosen=decisions.chosen[idx], accepted_local=decisions.accepted_local[idx],
                     score=None if decisions.score is None else decisions.score[idx], tau=decisions.tau, extra=extra)


@task(name="evaluate")
def evaluate(config: Config, home: str, key: str, trained: dict, calibrated: dict, baselines: dict) -> dict:
    """CR² at every calibrated (λ, α) and each baseline over grids.eval_lam, on the test split."""
    from cr2.data import Decisions
    from cr2.metrics import evaluable_mask
    from cr2.routers.base import one_shot_choice
    from cr2.routing import route
    from tasks.calibrate import load_modules, load_threshold_table

    teacher, gate = load_modules(trained, home)
    with Warehouse(home, read_only=True) as wh:
        sets = load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config))
        test, val = sets["test"], sets["val"]
        table = load_threshold_table(wh, calibrated["version"])
        base_proba = {name: _baseline_proba(wh, name, b["fingerprint"], test) for name, b in baselines.items()}
    keep = evaluable_mask(test) if config.evaluation.exclude_unsolvable else np.ones(len(test), dtype=bool)
    proba = teacher.predict_proba(test.embedding)
    run_id = f"eval-{key[-16:]}"
    metrics, decisions = [], []
    model_ids = np.asarray(test.model_ids)

    def record(method: str, lam: float, alpha: float | None, dec: Decisions) -> None:
        metrics.extend(_metric_rows(run_id, method, lam, alpha, test, dec, proba, keep))
        decisions.append(pd.DataFrame({"run_id": run_id, "method": method, "lam": lam, "alpha": alpha,
                                       "query_id": test.query_id, "chosen_model": model_ids[dec.chosen],
                                       "accepted_local": dec.accepted_local}))

    from cr2.crc import empirical_threshold, fixed_threshold
    from cr2.metrics import resplit_risk
    from cr2.routing import VARIANTS
    from cr2.utility import disagree_label, full_information_choice

    default_alpha = config.grids.default_alpha
    val_proba = teacher.predict_proba(val.embedding)
    rng = np.random.default_rng(config.seed)
    resplit_rows = []
    for lam in table.lams:
        score = gate.score(test.embedding, lam)
        s_val, r_val = gate.score(val.embedding, lam), disagree_label(val_proba, val.cost, lam)
        for alpha in table.alphas:
            tau = table.tau(lam, alpha, trained["gate"]["fingerprint"])
            record("cr2", lam, alpha, route(score, tau, proba, test.cost, lam, config.routing.deferred_variant))
            # the calibration-rule comparison: the same gate and α without the +1 correction
            record("cr2-empirical", lam, alpha, route(score, empirical_threshold(s_val, r_val, alpha), proba, test.cost,
                                                      lam, config.routing.deferred_variant))
            for variant in VARIANTS:  # deferred-branch variants (paper Fig. ours_comparison)
                if variant != config.routing.deferred_variant and abs(alpha - default_alpha) < 1e-12:
                    record(f"cr2-{variant}", lam, alpha, route(score, tau, proba, test.cost, lam, variant))
        record("cr2-fixed-0.5", lam, None, route(score, fixed_threshold(), proba, test.cost, lam,
                                                 config.routing.deferred_variant))
        full = full_information_choice(proba, test.cost, lam)
        record("full-info", lam, None, Decisions(chosen=full, accepted_local=full == 0,
                                                 extra={"gate_accept": full == 0}))
        # risk vs α with Monte-Carlo bands: re-split calibration ∪ test at random, calibrate, measure
        pooled_s = np.concatenate([s_val, score])
        pooled_r = np.concatenate([r_val, disagree_label(proba, test.cost, lam)])
        risks = resplit_risk(pooled_s, pooled_r, len(val), np.asarray(table.alphas), config.evaluation.n_resplits, rng)
        for j, alpha in enumerate(table.alphas):
            for metric, value in (("risk_mean", risks[:, j].mean()), ("risk_q05", np.quantile(risks[:, j], 0.05)),
                                  ("risk_q95", np.quantile(risks[:, j], 0.95)),
                                  ("risk_se", risks[:, j].std(ddof=1) / np.sqrt(len(risks)))):
                resplit_rows.append({"run_id": run_id, "method": "cr2-resplit", "lam": lam, "alpha": alpha,
                                     "benchmark": "all", "metric": metric, "value": float(value)})
    metrics.extend(resplit_rows)
    from cr2.routers import load_router
    from cr2.routers.base import OneShotRouter

    for name, b in baselines.items():
        router = load_router(in_home(home, b["path"]))
        uses_p_hat = type(router).route is OneShotRouter.route  # argmax p̂ − λc: reuse the recorded p̂ for every λ
        for lam in config.grids.eval_lam.values():
            if uses_p_hat:
                chosen = one_shot_choice(base_proba[name], test.cost, lam)
                dec = Decisions(chosen=chosen, accepted_local=chosen == 0)
            else:
                dec = router.route(test, float(lam))
            record(name, float(lam), None, dec)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    run = pd.DataFrame([{"run_id": run_id, "config_hash": config.section_hash(), "label_source": config.labels.source,
                         "dist_id": config.channel.distribution.dist_id, "threshold_version": calibrated["version"],
                         "code_version": code_hash(*EVAL_CODE), "created_at": now}])
    with Warehouse(home) as wh, wh.transaction() as con:
        for t in ("metrics", "decisions", "eval_runs"):
            wh.delete_where(t, {"run_id": run_id}, con)
        wh.insert_df("eval_runs", run, con)
        wh.insert_df("decisions", pd.concat(decisions, ignore_index=True), con)
        wh.insert_df("metrics", pd.DataFrame(metrics), con)
    return {"run_id": run_id, "n_test": len(test), "n_evaluable": int(keep.sum()), "label_source": config.labels.source,
            "exclude_unsolvable": bool(config.evaluation.exclude_unsolvable)}
