"""Certify task: every router certified under every configured rule (cr2.routers.certify), appended to the evaluation run.

For each router of `certify.routers` (default: every fitted baseline that predicts p̂, and CR² by its gate score) and
each rule of `certify.rules`, the threshold table τ(λ; α) over grids.lam × certify.alphas is calibrated on val — the
same cr2.crc functions as CR²'s own table, teacher disagreement under CR²'s frozen teacher — and stored in
`thresholds` under the certified router's name. The certified router `<router>@<rule>` is evaluated on test at every (λ, α),
with its validity over random val ∪ test re-splits (metrics resplit_risk_*), and a router whose score is its margin
also as `<router>@uncertified` (its own one-shot decision: the decomposition's uncertified side). Metric rows and
per-query decisions land in the evaluation run like CR²'s. A baseline's p̂ on val and test is computed once per
router and set and cached by content (cr2_tasks.inputs.router_proba, shared with the baselines stage); CR²'s gate scores come from the gate's score cache.
The key covers the val/test rows, the certify/grids/evaluation config, the trained and fitted routers' fingerprints,
the evaluation run it appends to and the code the task can run.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from cr2.core.errors import ConfigError
from cr2_tasks.common import ROUTING_CONFIG, Reads, RoutingRows, Stage, catalogue_paths, in_home
from cr2.evaluation.decisions import decision_frame
from cr2_tasks.inputs import cr2_router, fit_workers, load_sets, remember_scores, router_proba
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import write_certified

CR2 = "cr2"


def certified_routers(config: Config, fitted: dict) -> list[str]:
    """The routers to certify, in catalogue order: `certify.routers`, or every certifiable router that was fitted
    (baselines that predict p̂) and CR²; a configured name that cannot be certified or was not fitted is an error."""
    from cr2.routers.certify import certifiable_routers, parse_certified_name
    from cr2.routers import use_catalogues

    use_catalogues(config.baselines.catalogues)
    certifiable = certifiable_routers()
    if config.certify.routers is None:
        return [name for name in certifiable if name == CR2 or name in fitted]
    for name in config.certify.routers:
        parse_certified_name(f"{name}@{config.certify.rules[0]}", routers=None)  # did-you-mean, or "cannot be certified"
        if name != CR2 and name not in fitted:
            raise ConfigError(f"certify.routers names '{name}', which is not fitted: add it to baselines.routers")
    return [name for name in certifiable if name in config.certify.routers]


@task(name="certify")
def certify(config: Config, home: str, trained: dict, baselines: dict, evaluated: dict) -> dict:
    """Calibrate and evaluate every certified router `<router>@<rule>`; store its tables and rows."""
    from cr2.routers.certify import calibrate_certified, calibration_risks, certified_name, local_scores, score_fingerprint
    from cr2.crc import rule_spec
    from cr2.evaluation.sweep import Evaluation, certified_rows, method_rows
    from cr2_tasks import ahead
    from cr2.evaluation.metrics import evaluable_mask
    from cr2.routers import load_router, router_entry

    fitted = baselines["routers"]
    names = certified_routers(config, fitted)
    sets = load_sets(config, home)
    val, test = sets["val"], sets["test"]
    lams = np.asarray(config.grids.lam.values(), dtype=np.float64)
    cr2 = cr2_router(config, trained, home)
    remember_scores(cr2, home, {"val": val, "test": test}, lams)  # the gate's scores and the teacher's p, cached
    teacher_val, teacher_test = cr2.proba(val.embedding), cr2.proba(test.embedding)
    keep = evaluable_mask(test) if config.evaluation.exclude_unsolvable else np.ones(len(test), dtype=bool)
    ev = Evaluation(run_id=evaluated["run_id"], test=test, proba=teacher_test, keep=keep)
    tables, hits, jobs, options = {}, {}, [], []
    for name in names:
        if name == CR2:
            router, p_val, p_test = cr2, teacher_val, teacher_test  # CR²'s own edge choice: its teacher's p
        else:
            router = load_router(in_home(home, fitted[name]["path"]))
            reads_costs = router_entry(name).reads_costs
            (p_val, hit_val), (p_test, hit_test) = (router_proba(router, fitted[name]["fingerprint"], home, data,
                                                                 reads_costs=reads_costs) for data in (val, test))
            hits[name] = hit_val and hit_test
        s_val, s_test = local_scores(router, val, lams, p_val), local_scores(router, test, lams, p_test)
        fingerprint = score_fingerprint(router)
        tables[name] = {rule: calibrate_certified(s_val, calibration_risks(rule, val, lams, teacher_val), lams,
                                                  config.certify.alphas, fingerprint=fingerprint,
                                                  dist_id=config.channel.distribution.dist_id,
                                                  label_source=config.labels.source, rule=rule,
                                                  delta=config.certify.delta if rule_spec(rule).needs_delta else None)
                        for rule in config.certify.rules}
        jobs.append((ev.run_id, test, teacher_test, keep, name, tables[name]))
        options.append(dict(s_val=s_val, s_test=s_test, p_hat_test=p_test, val=val, val_teacher_proba=teacher_val,
                            n_resplits=config.evaluation.n_resplits, seed=int(config.seed), one_shot=name != CR2))
    # the routers' rows are independent: fit.workers processes at once (their work grows with val + test), joined in
    # router order
    for rows, decisions in ahead.fit_all(certified_rows, [(*job, opts) for job, opts in zip(jobs, options)],
                                         fit_workers(config, len(val) + len(test))):
        ev.metrics.extend(rows)
        ev.decisions.extend(decisions)
    metrics = pd.DataFrame(ev.metrics)
    methods = pd.DataFrame(method_rows(ev.run_id, list(metrics["method"].unique())))
    by_name = {certified_name(router, rule): table for router, by_rule in tables.items() for rule, table in by_rule.items()}
    with Warehouse(home) as wh:
        versions = write_certified(wh, ev.run_id, by_name, methods, decision_frame(ev), metrics)
    return {"run_id": ev.run_id, "routers": names, "rules": list(config.certify.rules), "versions": versions,
            "methods": list(methods["method"]), "proba_cached": hits}


def _upstream(trained: dict, baselines: dict, evaluated: dict) -> list:
    return [evaluated["run_id"], trained["teacher"]["fingerprint"], trained["gate"]["fingerprint"],
            sorted((k, v["fingerprint"]) for k, v in baselines["routers"].items())]


CERTIFY = Stage(certify, Reads(
    config=("grids", "routing", "certify", "evaluation.exclude_unsolvable", "evaluation.n_resplits", "seed", "teacher",
            "gate", "fit", "models", "baselines.catalogues", *ROUTING_CONFIG),
    rows=(RoutingRows(("val", "test")),), files=catalogue_paths, upstream=("artifacts", "eval_runs"),
    writes=("thresholds", "methods", "decisions", "metrics")),
    upstream=_upstream)
