"""Read a deployment from the warehouse: the threshold table, its trained artefacts, states, cost scales and rows.

The one reader behind `cr2 route`, `cr2 serve`, `cr2 export-gate`, target selection and the guarantee
validity task; what it returns (cr2.deployment.Deployment) is plain data the library takes. Which rows a
deployment calibrates on is decided by cr2.deployment.calibration_split, not here.
"""
from __future__ import annotations

from pathlib import Path

from cr2.config import Config
from cr2.deployment import Deployment, calibration_split
from cr2.data import RoutingSet
from warehouse.db import Warehouse
from warehouse.repository import (cost_scales, deployed_artifacts, load_threshold_table, newest_threshold_version,
                                  state_distribution_spec)
from warehouse.routing_data import load_routing_sets


def read_deployment(home: str | Path, config: Config, version: int | None = None) -> Deployment:
    """Return the deployment of threshold-table `version` (default: the newest) in the warehouse at `home`."""
    with Warehouse(home, read_only=True) as wh:
        version = newest_threshold_version(wh) if version is None else int(version)
        table = load_threshold_table(wh, version)
        trained = deployed_artifacts(wh, table.gate_fingerprint)
        spec = state_distribution_spec(wh, table.dist_id)
        split = calibration_split(config, table)
        scales = cost_scales(wh, table.dist_id, table.label_source, split.seed)
    model_ids = tuple(m.id for m in config.models)

    def load_sets(splits: tuple[str, ...]) -> dict[str, RoutingSet]:
        with Warehouse(home, read_only=True) as wh:
            sets = load_routing_sets(wh, model_ids, **split.routing_args())
        return {s: sets[s] for s in splits}

    return Deployment(version=int(version), table=table, trained=trained, split=split, load_sets=load_sets,
                      cost_scales=scales, state_spec=spec)
