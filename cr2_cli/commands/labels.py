"""`cr2 labels import | list`: correctness label sources produced elsewhere, and those in the warehouse."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cr2_cli.console import console, friendly
from cr2_cli.options import HomeOpt, home_dir
from cr2_cli.render import print_label_sources


@friendly
def labels_import(file: Path = typer.Argument(..., help="long-form Parquet or CSV: query_id, model, correct[, output_tokens]"),
                  source: str = typer.Option(..., "--source", help="name of the imported label source"),
                  replace: bool = typer.Option(False, "--replace", help="overwrite an existing source of that name"),
                  home: Optional[Path] = HomeOpt) -> None:
    """Import labels produced elsewhere; nothing is written unless every row is valid."""
    from tasks.labels_import import import_labels

    out = import_labels(home_dir(home), file, source, replace)
    per = ", ".join(f"{m} {n:,}" for m, n in out["per_model"].items())
    console.print(f"imported {out['rows']:,} labels ({out['queries']:,} queries; {per}) as source '{source}'. "
                  f"Train on them with `labels: {{source: {source}}}` in your config.", highlight=False)


@friendly
def labels_list(home: Optional[Path] = HomeOpt) -> None:
    """Label sources in the warehouse, with rows, models and how they were produced."""
    from warehouse.db import Warehouse
    from warehouse.reads import label_sources

    with Warehouse(home_dir(home, create=False), read_only=True) as wh:
        df = label_sources(wh)
    print_label_sources(df)
