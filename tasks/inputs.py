"""What the model-fitting tasks share: the config's routing sets, the configured CR² router, fit threads and workers.

Train, calibrate, evaluate, intervals, baselines, ablation, premise and guarantees read their inputs through
this module rather than from one another, so editing one task's code changes only that task's code hash
(tasks.common.code_hash) and keeps the others' caches.
"""
from __future__ import annotations

from pathlib import Path

from cr2.config import Config
from tasks.common import cache_dir, in_home, routing_args
from warehouse.db import Warehouse
from warehouse.routing_data import load_routing_sets


def fit_threads(config: Config) -> int:
    """torch threads of every fit: `fit.torch_threads`, never the machine's core count (cr2/fitting.py)."""
    return int(config.fit.torch_threads)


def baseline_threads(config: Config) -> int:
    """torch threads of a baseline's fit: baselines.num_threads, else fit.torch_threads."""
    return int(config.baselines.num_threads or fit_threads(config))


def fit_workers(config: Config) -> int:
    """Independent fits at once (`fit.workers`, default the available cores ÷ fit.torch_threads)."""
    from cr2.fitting import fit_workers as workers

    return workers(config.fit.torch_threads, config.fit.workers)


def load_sets(config: Config, home: str | Path) -> dict:
    """{split: RoutingSet} of the config's pool, state distribution, label source and encoder."""
    with Warehouse(home, read_only=True) as wh:
        return load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config),
                                 decision_cost=config.routing.decision_cost)


def cr2_router(config: Config, trained: dict | None = None, home: str | Path | None = None):
    """The configured CR² router (fit.torch_threads threads): unfitted, or around the checkpoints of
    `trained` (recorded relative to `home`)."""
    from cr2.routers.cr2_router import CR2Router

    if trained is not None:
        trained = {k: {**trained[k], "path": str(in_home(home, trained[k]["path"]))} for k in ("teacher", "gate")}
    return CR2Router.from_config(config, trained, num_threads=fit_threads(config))


def cr2_trainer(config: Config):
    """The unfitted CR² router as the train stage fits it: teacher and gate specs and the deferred variant. The
    routing-time settings (default α, on-demand calibration) never reach a fit, so the train stage does not read
    them and its cache outlives a change of them."""
    from cr2.routers.cr2_router import CR2Router

    return CR2Router(teacher_spec=config.teacher, gate_spec=config.gate, variant=config.routing.deferred_variant,
                     num_threads=fit_threads(config))


def artifacts_dir(home: str | Path) -> Path:
    d = cache_dir(Path(home)) / "artifacts"
    d.mkdir(parents=True, exist_ok=True)
    return d
