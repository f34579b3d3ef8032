"""Read a deployment from the warehouse: the threshold table, its trained artefacts, states, cost scales and rows.

The one reader behind `cr2 route`, `cr2 serve`, `cr2 export-gate`, target selection and the guarantee
validity task; what it returns (cr2.deploy.deployment.Deployment) is plain data the library takes. Which rows a
deployment calibrates on is decided by cr2.deploy.deployment.calibration_split, not here.
"""
from __future__ import annotations

from pathlib import Path

from cr2.config import Config
from cr2.deploy.deployment import CR2, Deployment, calibration_split
from cr2.core.data import RoutingSet
from cr2_warehouse.db import Warehouse
from cr2.core.errors import UncalibratedOperatingPointError
from cr2_warehouse.repository import (certified_table_names, cost_scales, deployed_artifacts, fitted_router_artifact,
                                  load_threshold_table, newest_threshold_version, state_distribution_spec)
from cr2_warehouse.routing_data import load_routing_sets


def read_deployment(home: str | Path, config: Config, version: int | None = None, router: str = CR2) -> Deployment:
    """Return the deployment of `router` ('cr2', or a certified '<router>@<rule>', cr2.deploy.deployment.deployed_name) at
    its threshold-table `version` (default: its newest) in the warehouse at `home`."""
    with Warehouse(home, read_only=True) as wh:
        if version is None:
            version = _newest_version(wh, router)
        table = load_threshold_table(wh, int(version), router)
        base = router.split("@", 1)[0]
        trained = (deployed_artifacts(wh, table.gate_fingerprint) if base == CR2
                   else fitted_router_artifact(wh, base, table.gate_fingerprint))
        spec = state_distribution_spec(wh, table.dist_id)
        split = calibration_split(config, table)
        scales = cost_scales(wh, table.dist_id, table.label_source, split.seed)
    model_ids = tuple(m.id for m in config.models)

    def load_sets(splits: tuple[str, ...]) -> dict[str, RoutingSet]:
        with Warehouse(home, read_only=True) as wh:
            sets = load_routing_sets(wh, model_ids, **split.routing_args())
        return {s: sets[s] for s in splits}

    return Deployment(version=int(version), table=table, trained=trained, split=split, load_sets=load_sets,
                      cost_scales=scales, state_spec=spec, router=router)


def _newest_version(wh: Warehouse, router: str) -> int:
    """`router`'s newest table version; for a certified router without one, the error also names those stored."""
    try:
        return newest_threshold_version(wh, router)
    except UncalibratedOperatingPointError as exc:
        if router == CR2:
            raise
        stored = certified_table_names(wh)
        raise UncalibratedOperatingPointError(
            f"no certified table for '{router}' in this home: run `cr2 run` with '{router.split('@')[0]}' in "
            f"baselines.routers and '{router.split('@')[1]}' in certify.rules; stored: {', '.join(stored) or 'none'}"
        ) from exc
