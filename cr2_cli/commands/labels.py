"""`cr2 labels import | list`: correctness label sources produced elsewhere, and those in the warehouse."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cr2_cli.console import console, friendly
from cr2_cli.options import HomeOpt, home_dir, resolve_home


def check_pool_written(home: Path, config: Optional[Path]) -> None:
    """Labels attach to a pool and its queries, both written by `cr2 ingest -c CONFIG`: a clear error naming that
    command when the warehouse has none, or (with -c) holds another config's pool or benchmarks."""
    from cr2.config import load_config
    from cr2.core.errors import DataValidationError
    from cr2_warehouse.db import DB_NAME, Warehouse
    from cr2_warehouse.reads import pool_models, query_counts

    cfg = load_config(config) if config is not None else None
    ingest = f"cr2 ingest -c {config}" if config is not None else "cr2 ingest -c CONFIG"
    what = ("" if config is not None else " (CONFIG: the config you will train with, whose `models:` name the pool "
            "and whose benchmarks hold the queries)")
    if not (home / DB_NAME).is_file():
        raise DataValidationError(f"no warehouse at {home / DB_NAME}: labels attach to a pool of models and its "
                                  f"queries, which `{ingest}` writes{what}; run it first (same --home), then import")
    with Warehouse(home, read_only=True) as wh:
        models, counts = pool_models(wh), query_counts(wh)
    if not counts or not models:
        raise DataValidationError(f"the warehouse at {home / DB_NAME} has no queries or pool yet: labels attach to a "
                                  f"pool of models and its queries, which `{ingest}` writes{what}; run it first, "
                                  "then import")
    if cfg is None:
        return
    if list(cfg.model_ids) != models:
        raise DataValidationError(f"the warehouse at {home / DB_NAME} holds the pool {', '.join(models)}, not {config}'s "
                                  f"({', '.join(cfg.model_ids)}); run `{ingest}` first (it writes the pool and its "
                                  "queries), then import")
    missing = [b for b in cfg.enabled_benchmarks if b not in counts]
    if missing:
        raise DataValidationError(f"the warehouse at {home / DB_NAME} has no queries of {', '.join(missing)} "
                                  f"(enabled in {config}); run `{ingest}` first, then import")


@friendly
def labels_import(file: Path = typer.Argument(..., help="long-form Parquet or CSV: query_id, model, correct[, output_tokens]"),
                  source: str = typer.Option(..., "--source", help="name of the imported label source"),
                  replace: bool = typer.Option(False, "--replace", help="overwrite an existing source of that name"),
                  config: Optional[Path] = typer.Option(None, "--config", "-c", help="the config you will train with: "
                                                        "its pool and benchmarks must be in the warehouse (written by "
                                                        "`cr2 ingest -c CONFIG`)"),
                  home: Optional[Path] = HomeOpt) -> None:
    """Import labels produced elsewhere into a warehouse `cr2 ingest -c CONFIG` wrote; nothing is written unless every
    row is valid."""
    from cr2_warehouse.labels_import import import_labels

    h = resolve_home(home)
    check_pool_written(h, config)  # names the ingest command when there is no warehouse yet
    out = import_labels(h, file, source, replace)
    per = ", ".join(f"{m} {n:,}" for m, n in out["per_model"].items())
    where = str(config) if config is not None else "your config"
    console.print(f"imported {out['rows']:,} labels ({out['queries']:,} queries; {per}) as source '{source}'. "
                  f"Train on them with `labels: {{source: {source}}}` in {where}.", highlight=False)


@friendly
def labels_list(home: Optional[Path] = HomeOpt) -> None:
    """Label sources in the warehouse, with rows, models and how they were produced."""
    from cr2_cli.render import print_label_sources
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.reads import label_sources

    with Warehouse(home_dir(home, create=False), read_only=True) as wh:
        df = label_sources(wh)
    print_label_sources(df)
