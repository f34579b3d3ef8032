"""Guarantee validity task: re-split val + test of the deployed gate and check every rule's promise.

Loads the deployed gate and teacher (those of the newest threshold table), scores the val and test
queries of the deployment's calibration split (cr2.deploy.deployment.calibration_split: the table's own states and
labels) at the calibrated λ grid, and runs cr2.evaluation.guarantees.resplit_validity for the promises only this run
checks: LTT's share of re-splits with any λ over α (on the teacher risk and on the real labels: ltt, ltt-oracle,
ltt-avoidable), Mondrian per-group mean risk, the target mode's miss share, and each rule's local rate / cost /
accuracy and realised risks beside plain CRC. The crc rules' mean risk per λ is not stored here: the certify stage
stores those re-splits for every certified router (cr2@crc, cr2@crc-oracle, … included), the one source of their
verdicts (cr2.report.validity). One run is one `run_id` in `guarantees`; the view v_guarantees and the report read it.
Each run draws a fresh seed (stored with its rows, printed; `--seed` replays it) and re-checks every family flagged
"violation detected" on an independent confirmatory stream with more re-splits (docs/guarantees.md).
"""
from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import replace_guarantee_run
from cr2_warehouse.routing_data import query_groups


def validity_pool(config: Config, home: str | Path) -> dict:
    """The val + test queries of the deployed gate: scores and risks at the calibrated λ grid, teacher p, costs, labels."""
    from cr2.crc import RISKS
    from cr2.deploy.deployment import deployed_router
    from cr2.method.utility import disagree_label, risk_label
    from cr2_warehouse.deployment import read_deployment

    deployment = read_deployment(home, config)
    router, table = deployed_router(config, deployment), deployment.table
    sets = deployment.load_sets(("val", "test"))  # the rows the deployed table calibrates on (one definition)
    pool = [sets["val"], sets["test"]]
    qid = np.concatenate([s.query_id for s in pool])
    with Warehouse(home, read_only=True) as wh:
        groups = query_groups(wh, qid, config.calibration.group or "benchmark")
    emb = np.concatenate([s.embedding for s in pool])
    cost = np.concatenate([s.decision_cost for s in pool]).astype(np.float64)  # routers decide with ĉ
    lams = np.asarray(table.scored_lams)
    proba = router.proba(emb)
    correct = np.concatenate([s.correct for s in pool])
    realised = {k: risk_label(k, lams, correct=correct, decision_cost=cost)
                for k, r in RISKS.items() if r.needs_labels}  # the risks on the real labels (cr2.crc.RISKS)
    return {"score": router.scores(emb, lams), "risk": disagree_label(proba, cost, lams), "proba": proba, "cost": cost,
            "correct": correct, "groups": groups, "lams": lams, "realised": realised,
            "alphas": np.asarray(table.alphas), "n_val": len(pool[0]), "label_source": table.label_source,
            "group_by": config.calibration.group or "benchmark"}


def default_targets(correct: np.ndarray, cost: np.ndarray) -> tuple[float, float]:
    """An accuracy target and a budget inside the pool's reach, fixed before any re-split.

    Target: halfway between always-m0 and the best single model's accuracy; budget: halfway between
    always-m0's and the reference model's mean cost. Both are properties of the pool (the 'population'
    the re-splits sample), not of any calibration set, so they do not bias the check.
    """
    acc = correct.mean(axis=0)
    c = cost.mean(axis=0)
    return round(float(0.5 * (acc[0] + acc.max())), 3), round(float(0.5 * (c[0] + c.max())), 3)


def fresh_seed() -> int:
    """A seed from fresh OS entropy (63 bits: a BIGINT column holds it): each `cr2 guarantees` run draws its own
    stream, so one unlucky stream is not printed on every run; the run stores it, and `--seed` replays it."""
    return int(np.random.SeedSequence().entropy % (1 << 63))


@task(name="check-guarantees")
def check_guarantees(config: Config, home: str, n_resplits: int | None = None, seed: int | None = None,
                     confirm_factor: int | None = None) -> dict:
    """Run the re-split validity check on the warehouse's val + test and write it to `guarantees`.

    The screening run draws from default_rng(seed) (seed: fresh entropy unless given). Every family whose screening
    verdict is "violation detected" is re-checked on the confirmatory stream default_rng(confirm_seed(seed)) with
    confirm_factor × the re-splits (cr2.evaluation.guarantees.confirm_resplits; only the flagged rules calibrate);
    both stages are stored, and the confirmatory verdict is the reported one (cr2.report.validity.deployed_verdicts).
    """
    from cr2.evaluation.guarantees import ResplitSpec

    pool = validity_pool(config, home)
    target, budget = default_targets(pool["correct"], pool["cost"])
    spec = ResplitSpec(n_calib=pool["n_val"], n_resplits=int(n_resplits or config.calibration.n_resplits),
                       delta=config.calibration.delta or config.calibration.target_delta, target_accuracy=target,
                       budget=budget, price_alpha=config.grids.default_alpha, group_by=pool["group_by"],
                       variant=config.routing.deferred_variant, crc_mean=False)  # the certify stage stores those
    records, streams = validity_records(pool, spec, seed, confirm_factor)
    run_id = uuid.uuid4().hex[:12]
    out = write_guarantees(home, records, run_id, "warehouse val+test", pool["label_source"])
    return {**out, **streams}


def validity_records(pool: dict, spec, seed: int | None = None, confirm_factor: int | None = None) -> tuple[list, dict]:
    """The records of one validity run over `pool` (validity_pool's arrays), each with its seed and stage, and the
    run's streams {seed, confirm_seed, n_flagged}: the screening run on default_rng(seed) (fresh entropy when seed is
    None), then every family it flags re-checked on default_rng(confirm_seed(seed)) with confirm_factor × the
    re-splits, only the flagged rules calibrating (cr2.evaluation.guarantees.ResplitSpec.rules)."""
    from dataclasses import replace

    from cr2.evaluation.guarantees import CONFIRM_FACTOR, confirm_resplits, confirm_seed, resplit_validity
    from cr2.report.validity import CONFIRMATORY, SCREENING, deployed_verdicts, flagged_families

    seed = fresh_seed() if seed is None else int(seed)
    arrays = (pool["score"], pool["risk"], pool["proba"], pool["cost"], pool["correct"], pool["groups"], pool["lams"],
              pool["alphas"])
    records = [{**r, "seed": seed, "stage": SCREENING}
               for r in resplit_validity(*arrays, spec, np.random.default_rng(seed), realised=pool.get("realised"))]
    flagged = flagged_families(deployed_verdicts(_bounded(records)))
    out_seed = None
    if len(flagged):
        out_seed = confirm_seed(seed)
        again = replace(spec, n_resplits=confirm_resplits(spec.n_resplits, confirm_factor or CONFIRM_FACTOR),
                        rules=tuple(sorted(set(flagged["rule"]))))
        families = {_family(f.check, f.rule, f.alpha, f.target) for f in flagged.itertuples()}
        records += [{**r, "seed": out_seed, "stage": CONFIRMATORY}
                    for r in resplit_validity(*arrays, again, np.random.default_rng(out_seed),
                                              realised=pool.get("realised"))
                    if _family(r["check_name"], r["rule"], r["alpha"], r["target"]) in families]
    return records, {"seed": seed, "confirm_seed": out_seed, "n_flagged": len(flagged)}


def _bounded(records: list[dict]) -> pd.DataFrame:
    """The bounded cells of a run's records, as the warehouse's guarantee_cells returns them."""
    df = pd.DataFrame(records)
    return df[(df["check_name"] != "price") & df["bound"].notna()].reset_index(drop=True)


def _family(check: str, rule: str, alpha, target) -> tuple:
    """A verdict's family key (check, rule, α, target), with missing α / target as None."""
    def key(v):
        return None if v is None or pd.isna(v) else round(float(v), 12)

    return check, rule, key(alpha), key(target)


def write_guarantees(home: str | Path, records: list[dict], run_id: str, source: str, label_source: str) -> dict:
    """Append one validity run to `guarantees` (one transaction); records carry their seed and stage (a synthetic
    run's records without them are stored with seed NULL and stage 'screening')."""
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    df = pd.DataFrame(records).assign(run_id=run_id, source=source, label_source=label_source, created_at=now)
    if "seed" not in df:
        df["seed"] = None
    df["stage"] = df["stage"].fillna("screening") if "stage" in df else "screening"
    with Warehouse(home) as wh:
        replace_guarantee_run(wh, run_id, df)
    return {"run_id": run_id, "rows": len(df), "source": source}
