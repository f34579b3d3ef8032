"""The `cr2` command line: thin wrappers over flows/ and warehouse/ (errors print as one clear message)."""
from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

import cr2  # noqa: F401  (applies the offline / no-telemetry switches first)
from cr2.errors import Cr2Error

app = typer.Typer(add_completion=False, no_args_is_help=True, help="CR²: cost-aware, risk-controlled device–edge LLM routing.")
config_app = typer.Typer(no_args_is_help=True, help="Show or check configuration files.")
app.add_typer(config_app, name="config")
console = Console()
err_console = Console(stderr=True)

ConfigOpt = typer.Option(None, "--config", "-c", help="config YAML (default: configs/default.yaml)")
HomeOpt = typer.Option(None, "--home", help="warehouse folder (default: $CR2_HOME or var/)")


def friendly(fn):
    """Turn cr2's own errors into a short message and a non-zero exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Cr2Error as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except Exception as exc:  # errors raised inside Prefect tasks arrive wrapped or re-raised as-is
            cause = _cr2_cause(exc)
            if cause is None:
                raise
            err_console.print(f"[bold red]error:[/] {cause}", highlight=False, soft_wrap=True)
            raise typer.Exit(cause.exit_code) from None

    return wrapper


def _cr2_cause(exc: BaseException) -> Cr2Error | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, Cr2Error):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _home(home: Optional[Path]) -> Path:
    """The warehouse folder; Prefect's own state (run history DB) goes to <home>/prefect unless PREFECT_HOME is set."""
    from warehouse.db import default_home

    h = home.expanduser().resolve() if home else default_home()
    if "PREFECT_HOME" not in os.environ:
        (h / "prefect").mkdir(parents=True, exist_ok=True)
        os.environ["PREFECT_HOME"] = str(h / "prefect")
    return h


# ------------------------------------------------------------------ config
@config_app.command("show")
@friendly
def config_show(config: Optional[Path] = ConfigOpt) -> None:
    """Print the resolved configuration (state distribution and hardware profile included)."""
    from cr2.config import load_config

    cfg = load_config(config)
    console.print(cfg.to_yaml(), highlight=False, markup=False)
    console.print(f"# config hash: {cfg.section_hash()}", highlight=False, markup=False)


@config_app.command("validate")
@friendly
def config_validate(file: Path = typer.Argument(..., help="config YAML to check")) -> None:
    """Check a config file; exit 0 when valid."""
    from cr2.config import load_config

    cfg = load_config(file)
    console.print(f"{file}: valid (hash {cfg.section_hash()}, {len(cfg.models)} models, "
                  f"{len(cfg.enabled_benchmarks)} benchmarks, states '{cfg.channel.distribution.name}')", highlight=False)


# ------------------------------------------------------------------ pipeline
@app.command()
@friendly
def ingest(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Load the selected benchmarks into the warehouse (validated, cached)."""
    from flows.ingest import ingest_flow

    t0 = time.perf_counter()
    summary = ingest_flow(config_path=str(config) if config else None, home=str(_home(home)))
    print_ingest_summary(summary)
    how = "cached: nothing changed, no work done" if summary.get("cached") else "computed"
    console.print(f"ingest finished in {time.perf_counter() - t0:.1f} s ({how}); warehouse: {_home(home) / 'cr2.duckdb'}")


@app.command()
@friendly
def run(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Run the whole pipeline on the configured data (one flow, one process)."""
    from flows.run import run_flow

    h = _home(home)
    t0 = time.perf_counter()
    summary = run_flow(config_path=str(config) if config else None, home=str(h))
    print_ingest_summary(summary["ingest"])
    console.print(f"\ncr2 run finished in {time.perf_counter() - t0:.1f} s")
    console.print(f"warehouse: {h / 'cr2.duckdb'}")
    if summary.get("report"):
        console.print(f"report:    {summary['report']}")


def print_ingest_summary(summary: dict) -> None:
    state = " — cached" if summary.get("cached") else ""
    table = Table(title=f"queries per benchmark (prompt tokens: {summary['tokenizer']}){state}")
    table.add_column("benchmark")
    table.add_column("queries", justify="right")
    table.add_column("mean prompt tokens", justify="right")
    total = 0
    for b, row in summary["benchmarks"].items():
        table.add_row(b, f"{row['queries']:,}", f"{row['mean_prompt_tokens']:.1f}")
        total += row["queries"]
    table.add_row("all", f"{total:,}", "")
    console.print(table)


# ------------------------------------------------------------------ warehouse access
@app.command()
@friendly
def sql(query: str = typer.Argument(..., help="a read-only SQL query"), home: Optional[Path] = HomeOpt,
        limit: int = typer.Option(50, help="rows to print")) -> None:
    """Run a read-only SQL query on the warehouse and print the result as a table."""
    import duckdb

    from warehouse.db import Warehouse

    with Warehouse(_home(home), read_only=True) as wh:
        try:
            df = wh.df(query)
        except duckdb.Error as exc:
            raise Cr2SqlError(f"SQL failed: {str(exc).splitlines()[0]}") from None
    table = Table(show_lines=False)
    for col in df.columns:
        table.add_column(str(col))
    for row in df.head(limit).itertuples(index=False):
        table.add_row(*[_fmt(v) for v in row])
    console.print(table)
    if len(df) > limit:
        console.print(f"… {len(df) - limit} more rows (use --limit)")


class Cr2SqlError(Cr2Error):
    """A user's SQL query failed."""


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


@app.command()
@friendly
def export(table: str = typer.Argument(..., help="table or view name"), home: Optional[Path] = HomeOpt,
           out: Optional[Path] = typer.Option(None, help="output folder (default: <home>/export)")) -> None:
    """Write a table or view to <home>/export/TABLE.parquet."""
    from warehouse.db import Warehouse

    with Warehouse(_home(home), read_only=True) as wh:
        path = wh.export(table, out)
    console.print(f"wrote {path}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
