"""Recalibrate: new thresholds for the frozen gate under a new channel-state distribution — no retraining.

The gate sees only e(x) and λ, never the channel state, so when the wireless conditions change the
deployed artefact to renew is the threshold table (paper §VI-F), not the gate:

1. the teacher and gate stay as trained (cached, under the configured distribution),
2. states and costs are sampled/computed under the new distribution (everything else is cached); when the
   states are new, Great Expectations is imported in a helper process from the start
   (cr2_warehouse.validation.start_ahead), so validating them does not wait for its import,
3. a drift check (two-sample KS, Holm-corrected) compares the new states with the calibration states;
   with only_if_drift it runs first and the flow stops there when nothing drifted (what the scheduled deployment
   uses); otherwise it runs once the new table is written, so a running server swaps to it without waiting,
4. the threshold table is re-calibrated on val under the new states → a new `thresholds` version
   (the previous one stays queryable),
5. test is evaluated twice under the new states: with the old thresholds (before) and the new (after).

At operator speed by default: the before/after evaluation is CR² alone at every (λ, α) of each table —
the rows the before/after table and v_recalibration read — in one task that reads the test rows once and takes
the gate's scores from the per-gate cache (they do not depend on ξ); `bands=True` or `baselines=True` runs the
full evaluation of each table instead (comparison rows, the Monte-Carlo re-split bands, the baselines). The run publishes Prefect artifacts
(flows/artifacts.py): a summary, the drift statistics and the before/after table.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

import cr2_flows  # noqa: F401  (Prefect loads this file by path: the package's offline environment first, cr2/core/env.py)
from cr2.config import Config, load_config, load_state_distribution
from cr2_flows.calibrate import calibrate
from cr2_flows.baselines import fit_baselines
from cr2_flows.evaluate import evaluate
from cr2_flows.prepare import prepare
from cr2_flows.train import train
from cr2_tasks.common import run_stage


def with_distribution(config: Config, states: str | Path) -> Config:
    """The config with its channel-state distribution replaced by `states` (a name under configs/states or a file)."""
    dist = load_state_distribution(states)
    return config.model_copy(update={"channel": config.channel.model_copy(update={"distribution": dist})})


def operator_speed(config: Config, bands: bool) -> Config:
    """The config for the before/after evaluation: Monte-Carlo re-split bands only when asked for."""
    if bands:
        return config
    return config.model_copy(update={"evaluation": config.evaluation.model_copy(update={"n_resplits": 0})})


def evaluate_tables(config: Config, home: Path, trained: dict, tables: dict[str, dict]) -> tuple[dict, dict]:
    """(before, after): CR² on test under config's states with each threshold table (one cached stage)."""
    from cr2_tasks.recalibrate import EVALUATE_RECALIBRATION

    out = run_stage(EVALUATE_RECALIBRATION, config, home, trained, tables)
    return {**out["before"], "cached": out["cached"]}, {**out["after"], "cached": out["cached"]}


def recalibrate(config: Config, home: Path, states: str | Path, only_if_drift: bool = False, bands: bool = False,
                baselines: bool = False) -> dict:
    from cr2_flows.drift import drift_check

    from cr2_warehouse.inputs import validation_ahead

    new = with_distribution(operator_speed(config, bands), states)
    if not only_if_drift:  # the new states will be validated: GX is imported beside the cached stages
        validation_ahead(home, new.channel.distribution.dist_id)
    trained = train(config, home)  # frozen: the gate never sees ξ
    drift = drift_check(config, home, states) if only_if_drift else None
    if drift is not None and not drift.drifted:
        return {"old_dist_id": config.channel.distribution.dist_id, "new_dist_id": new.channel.distribution.dist_id,
                "drift": drift.to_records(), "drifted": False, "skipped": True}
    if drift is not None:
        validation_ahead(home, new.channel.distribution.dist_id)
    old_cal = calibrate(config, home, trained)  # before the new table: the newest version is the one served
    # p̂ of a baseline does not depend on ξ (costs enter at routing time); evaluated only when asked for
    fitted = fit_baselines(config, home) if baselines else {"routers": {}, "cached": True}
    prepared = prepare(new, home)
    new_cal = calibrate(new, home, trained)  # a running `cr2 serve` swaps to it from here
    if drift is None:  # reported, not waited for: the new table goes live first
        drift = drift_check(config, home, states)
    if bands or baselines:  # the full evaluation (comparison rows, bands, baselines) of each table
        before = evaluate(new, home, trained, old_cal, fitted)
        after = evaluate(new, home, trained, new_cal, fitted)
    else:  # operator speed: CR² under both tables in one pass, scores from the per-gate cache
        before, after = evaluate_tables(new, home, trained, {"before": old_cal, "after": new_cal})
    return {"old_dist_id": config.channel.distribution.dist_id, "new_dist_id": new.channel.distribution.dist_id,
            "drift": drift.to_records(), "drifted": drift.drifted, "skipped": False, "prepare": prepared, "old_thresholds": old_cal, "new_thresholds": new_cal, "before": before, "after": after}


@flow(name="cr2-recalibrate", log_prints=True)
def recalibrate_flow(states: str, config_path: str | None = None, home: str | None = None,
                     only_if_drift: bool = False, bands: bool = False, baselines: bool = False) -> dict:
    """Re-calibrate the threshold table of the frozen gate on a new state distribution (name or YAML file);
    with only_if_drift, only when the drift check finds the new states depart from the calibration states."""
    from cr2_flows.artifacts import publish_recalibration
    from cr2_warehouse.db import default_home

    config, h = load_config(config_path), Path(home) if home else default_home()
    out = recalibrate(config, h, states, only_if_drift, bands, baselines)
    out["artifacts"] = publish_recalibration(config, h, out)
    print(f"recalibrate {out['old_dist_id']} → {out['new_dist_id']}: "
          + ("no drift, thresholds kept" if out["skipped"] else f"thresholds v{out['new_thresholds']['version']}"))
    return out
