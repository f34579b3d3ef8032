"""`cr2 results | sql | export`: read the warehouse — the headline numbers, one read-only query, a table to Parquet."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cr2_cli.console import console, emit, friendly
from cr2_cli.options import ConfigOpt, HomeOpt, home_dir


@friendly
def results(alpha: Optional[float] = typer.Option(None, help="α of the CR² tables (default: the α the evaluation run "
                                                          "stores, its config's grids.default_alpha)"),
            label_source: Optional[str] = typer.Option(None, help="newest run of this label source (default: newest)"),
            paper: bool = typer.Option(False, "--paper", help="also the paper's numbers beside ours"),
            equal_risk: bool = typer.Option(False, "--equal-risk", help="only the equal-risk comparison: every "
                                            "certified router's cost with risk ≤ α, and CR² vs each baseline split "
                                            "into gate quality, price of the guarantee and certified score"),
            targets: Optional[str] = typer.Option(None, "--targets", help="fixed-accuracy targets, comma-separated "
                                                  "(0.50 … 0.99 in steps of 0.01; default: the paper's 0.79–0.82, or "
                                                  "the four highest CR² and KNN both reach when they do not reach 0.82; "
                                                  "with --equal-risk: one cost table per target, default the highest "
                                                  "every certified router reaches)"),
            config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Print the headline numbers of the newest evaluation run as markdown (what docs/results.md compares)."""
    from cr2_cli.results import check_alpha, comparison_markdown, equal_risk_markdown, parse_targets, results_markdown

    if alpha is not None:
        check_alpha(alpha)  # every table below reads it, --equal-risk's included, before the warehouse opens
    if config is not None:  # a router added by the config's extra catalogues joins the groups the tables read
        from cr2.config import load_config
        from cr2.routers import use_catalogues

        use_catalogues(load_config(config).baselines.catalogues)
    if equal_risk:
        chosen = parse_targets(targets) if targets is not None else None  # every target, each its own cost table
        emit(equal_risk_markdown(home_dir(home, create=False), label_source, chosen))
        return
    chosen = parse_targets(targets) if targets is not None else None  # a bad list fails before the warehouse opens
    h = home_dir(home, create=False)
    emit(results_markdown(h, alpha, label_source, chosen))
    if paper:
        emit(comparison_markdown(h, alpha, label_source))


@friendly
def sql(query: str = typer.Argument(..., help="one read-only query: SELECT / WITH / FROM / PIVOT / DESCRIBE / SHOW / SUMMARIZE / "
                                             "EXPLAIN"), home: Optional[Path] = HomeOpt,
        limit: int = typer.Option(50, min=0, help="rows to print (only these are fetched)"),
        timeout: float = typer.Option(60.0, "--timeout", help="stop the query after this many seconds, 0.01 … 86400 "
                                      "(writers waiting for the warehouse wait longer: $CR2_LOCK_WAIT_S, 300 s)"),
        max_memory_mb: Optional[int] = typer.Option(None, "--max-memory-mb", help="memory the query may use, in "
                                                    "MiB, 64 … 1048576 (default 2048); larger intermediate results "
                                                    "spill to disk, beyond that the query stops with an error")) -> None:
    """Run one read-only SQL query on the warehouse and print the first --limit rows as a table.

    The connection cannot touch files, the network or extensions (it can read the warehouse, nothing else),
    runs one statement, fetches at most --limit rows, uses at most --max-memory-mb and is stopped after --timeout
    seconds."""
    from cr2_cli.render import print_frame
    from cr2_warehouse.db import open_user_query

    cap = {} if max_memory_mb is None else {"memory_limit_mb": max_memory_mb}
    with open_user_query(home_dir(home, create=False), **cap) as wh:
        df, more = wh.user_query(query, timeout_s=timeout, max_rows=limit)
    print_frame(df, more)


@friendly
def export(table: str = typer.Argument(..., help="table or view name"), home: Optional[Path] = HomeOpt,
           out: Optional[Path] = typer.Option(None, help="output folder (default: <home>/export)")) -> None:
    """Write a table or view to <home>/export/TABLE.parquet."""
    from cr2_warehouse.db import Warehouse

    with Warehouse(home_dir(home, create=False), read_only=True) as wh:
        path = wh.export(table, out)
    console.print(f"wrote {path}")
