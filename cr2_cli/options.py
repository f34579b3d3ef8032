"""What every `cr2` command shares: the --config / --home options and the warehouse folder they name."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from cr2.core.errors import Cr2Error

ConfigOpt = typer.Option(None, "--config", "-c", help="config YAML (default: configs/default.yaml)")
HomeOpt = typer.Option(None, "--home", help="warehouse folder (default: $CR2_HOME or var/)")
RouterOpt = typer.Option("cr2", "--router", help="the router to deploy: cr2 (its calibrated gate) or a certified "
                         "router by catalogue name with --rule, e.g. --router knn --rule crc-avoidable")
RuleOpt = typer.Option(None, "--rule", help="the calibration rule of a certified router (stored by `cr2 run`'s "
                       "certify stage, certify.rules), e.g. crc-avoidable")


def deployed(config, router: str, rule: Optional[str]) -> str:
    """The deployed router's name from --router / --rule ('cr2' or '<router>@<rule>'; cr2.deploy.deployment.deployed_name),
    with the config's extra router catalogues registered, so a router added from outside the package is found."""
    from cr2.deploy.deployment import deployed_name
    from cr2.routers import use_catalogues

    use_catalogues(config.baselines.catalogues)
    return deployed_name(router, rule)


def config_arg(config: Optional[Path]) -> str | None:
    """The --config path as a flow parameter (None: configs/default.yaml)."""
    return str(config) if config else None


def resolve_home(home: Optional[Path]) -> Path:
    """The --home folder as an absolute path ($CR2_HOME or var/ when not given); a loop of symbolic links is an
    error naming it."""
    from cr2.core.boundary import resolve_path
    from cr2_warehouse.db import default_home

    return resolve_path(home, "--home") if home else default_home()


def home_dir(home: Optional[Path], create: bool = True) -> Path:
    """The warehouse folder; Prefect's own state (run history DB) goes to <home>/prefect unless PREFECT_HOME is set.

    create=False (commands that only read a warehouse): a folder without a warehouse is an error and nothing is
    created on disk."""
    from cr2_warehouse.db import DB_NAME, WarehouseError

    h = resolve_home(home)
    if not create and not (h / DB_NAME).is_file():
        raise WarehouseError(f"no warehouse at {h / DB_NAME}; run `cr2 run` (or `cr2 ingest`) first, or pass the "
                             "--home that holds it")
    use_prefect_home(h)
    return h


def use_prefect_home(home: Optional[Path]) -> None:
    """Prefect's state (run history DB) under <home>/prefect unless PREFECT_HOME is set — before anything starts a
    Prefect API server for this command (cr2_cli/prefect_api.py)."""
    if "PREFECT_HOME" in os.environ:
        return
    h = resolve_home(home)
    (h / "prefect").mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(h / "prefect")


def prefect_templates(home: Optional[Path]) -> Optional[Path]:
    """The store folder of the home's empty, migrated Prefect databases (cr2_cli.prefect_api.seed_database), or None
    where the store cannot be made (the flow reports that home's problem itself)."""
    from cr2_tasks.store import tool_dir

    try:
        return tool_dir(resolve_home(home), "prefect-db")
    except (OSError, Cr2Error):
        return None
