"""`cr2 label`: real per-query correctness labels from lm-evaluation-harness, with progress per (model, benchmark).

Wired in cr2_cli/main.py as `app.command("label")(friendly(label_command, flow=True))`. The command is a thin wrapper
over `cr2_flows.label.run_labeling`; see docs/labeling.md for backends, fan-out and resumption.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from cr2.core.errors import ConfigError
from cr2_cli.options import home_dir

from cr2_cli.console import SafeConsole

console = SafeConsole(markup=False)  # names and ids are printed as they are, never parsed as Rich markup


def _split(values: Optional[list[str]]) -> list[str] | None:
    """Repeatable options that also accept comma-separated lists: -m a,b -m c → [a, b, c]."""
    if not values:
        return None
    out = [v.strip() for item in values for v in item.split(",") if v.strip()]
    return out or None


def _model_paths(items: Optional[list[str]]) -> dict[str, str]:
    paths: dict[str, str] = {}
    for item in _split(items) or []:
        model_id, sep, folder = item.partition("=")
        if not sep or not model_id or not folder:
            raise ConfigError(f"--model-path takes MODEL_ID=FOLDER (got '{item}')")
        paths[model_id.strip()] = str(Path(folder.strip()).expanduser().resolve())
    return paths


def load_labeling_file(path: Path) -> dict[str, Any]:
    """A YAML file of labeling settings: either the `labeling:` section itself or a file that contains one."""
    from cr2.core.boundary import load_yaml_file
    from cr2.core.errors import InvalidValueError

    try:
        data = load_yaml_file(path) or {}
    except InvalidValueError as exc:  # missing, not a regular file, too large, malformed YAML
        raise ConfigError(f"--labeling file: {exc}") from None
    section = data.get("labeling", data) if isinstance(data, dict) else data
    if not isinstance(section, dict):
        raise ConfigError(f"--labeling file {path}: expected a mapping of labeling settings")
    return section


def _spec(config: Any, labeling: Optional[Path], model_paths: dict[str, str]):
    from pydantic import ValidationError

    from cr2.config.lmeval import LabelingSpec, labeling_spec

    base = labeling_spec(config)
    if labeling is None and not model_paths:
        return base
    data = base.model_dump()
    if labeling is not None:
        data.update(load_labeling_file(labeling))
    if model_paths:
        data["model_paths"] = {**data.get("model_paths", {}), **model_paths}
    try:
        return LabelingSpec.model_validate(data)
    except ValidationError as exc:
        where = f" in {labeling}" if labeling is not None else ""
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid labeling settings{where}: {problems}") from None


class _ProgressBars:
    """One bar per (model, benchmark), summed over shards, fed by the flow's per-chunk hook (any thread)."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.bars: dict[tuple[str, str], Any] = {}
        self.shards: dict[tuple[str, str], dict[int, tuple[int, int]]] = {}

    def __call__(self, event) -> None:
        key = (event.model_id, event.benchmark)
        per_shard = self.shards.setdefault(key, {})
        per_shard[event.shard] = (event.done, event.total)
        done = sum(d for d, _ in per_shard.values())
        total = sum(t for _, t in per_shard.values())
        if key not in self.bars:
            self.bars[key] = self.progress.add_task(f"{event.model_id} · {event.benchmark}", total=total)
        self.progress.update(self.bars[key], completed=done, total=total)


def print_label_summary(runs, wall_s: float) -> None:
    """Rows written per (model, benchmark) and the run ids."""
    runs = runs.sort_values(["model_id", "benchmark", "run_id"])
    table = Table(title=f"labels written (source '{', '.join(sorted(set(runs['source'])))}')")
    for col, just in (("model", "left"), ("benchmark", "left"), ("written", "right"), ("labelled", "right"),
                      ("status", "left")):
        table.add_column(col, justify=just)
    table.add_column("run", no_wrap=True, min_width=18)
    for r in runs.itertuples():
        status = r.status if r.status == "finished" else Text(r.status, style="bold red")
        # run ids are <source>:<model>:<benchmark>:<key>:<shard>; the table shows key:shard, the list below all of it
        table.add_row(r.model_id, r.benchmark, f"{int(r.written):,}", f"{int(r.done):,}/{int(r.total):,}", status,
                      ":".join(r.run_id.split(":")[-2:]))
    console.print(table)
    console.print("run ids (label_runs.run_id, labels.run_id):", highlight=False)
    for rid in runs["run_id"]:
        console.print(f"  {rid}", highlight=False, soft_wrap=True)
    console.print(f"labeling finished in {wall_s:.1f} s: {int(runs['written'].sum()):,} labels written, "
                  f"{int(runs['done'].sum()):,} of {int(runs['total'].sum()):,} (query, model) pairs labelled",
                  highlight=False)


def label_command(
    models: Optional[list[str]] = typer.Option(None, "--models", "-m",
                                               help="model ids of the pool (repeatable or comma-separated; default: all)"),
    benchmarks: Optional[list[str]] = typer.Option(None, "--benchmarks", "-b",
                                                   help="benchmarks (repeatable or comma-separated; default: the enabled ones)"),
    backend: Optional[str] = typer.Option(None, "--backend", help="hf | vllm | api (default: labeling.backend, i.e. hf)"),
    limit: Optional[int] = typer.Option(None, "--limit", min=1,
                                        help="label only the first N queries of each benchmark (round-robin over subsets)"),
    model_path: Optional[list[str]] = typer.Option(None, "--model-path",
                                                   help="MODEL_ID=FOLDER: local weights of a model (repeatable)"),
    labeling: Optional[Path] = typer.Option(None, "--labeling",
                                            help="YAML of labeling settings (docs/labeling.md), over the config's"),
    shards: Optional[int] = typer.Option(None, "--shards", min=1, help="shards per model (one Prefect task each)"),
    chunk_size: Optional[int] = typer.Option(None, "--chunk-size", min=1,
                                             help="queries per lm-eval call and per warehouse transaction"),
    task_runner: Optional[str] = typer.Option(None, "--task-runner", help="threads | dask | ray"),
    estimate: bool = typer.Option(False, "--estimate",
                                  help="label nothing: time a sample of every benchmark on random-weight models of "
                                       "the pool's shapes here, and project the whole run"),
    sample: int = typer.Option(32, "--sample", min=1, help="--estimate: queries timed per (model, benchmark)"),
    stored: bool = typer.Option(False, "--stored",
                                help="--estimate: time nothing here; project the selection with the stored GPU "
                                     "measurements only (configs/labeling_gpu_rates.yaml)"),
    architectures: Optional[Path] = typer.Option(None, "--architectures",
                                                 help="--estimate: architectures file (default: configs/architectures.yaml)"),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="config YAML (default: configs/default.yaml)"),
    home: Optional[Path] = typer.Option(None, "--home", help="warehouse folder (default: $CR2_HOME or var/)"),
) -> None:
    """Label (model, query) pairs with lm-evaluation-harness; a killed run continues when started again."""
    from cr2.config import load_config

    cfg = load_config(config)
    if estimate and architectures is not None:  # a bad architectures file fails here, before any model is built
        from cr2.labels.lmeval.architectures import load_architectures

        load_architectures(architectures)
    spec = _spec(cfg, labeling, _model_paths(model_path))
    h = home_dir(home)
    model_ids = _split(models) or cfg.model_ids
    bench = _split(benchmarks) or cfg.enabled_benchmarks
    if stored and not estimate:
        raise ConfigError("--stored goes with --estimate (cr2 label --estimate --stored)")
    if estimate:
        _estimate(cfg, h, model_ids, bench, backend, limit, spec, sample, chunk_size, architectures, stored)
        return
    from cr2_flows.label import run_labeling

    console.print(f"labeling {', '.join(model_ids)} on {', '.join(bench)} with backend "
                  f"'{backend or spec.backend}'" + (f", first {limit} queries per benchmark" if limit else "")
                  + f"; warehouse {h / 'cr2.duckdb'}", highlight=False)
    t0 = time.perf_counter()
    progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console)
    with progress:
        report = run_labeling(cfg, h, models=model_ids, benchmarks=bench, backend=backend, limit=limit, spec=spec,
                              shards=shards, chunk_size=chunk_size, task_runner=task_runner,
                              progress=_ProgressBars(progress))
    print_label_summary(report.runs, time.perf_counter() - t0)
    if cfg.labels.source != spec.source:
        console.print(f"Train on these labels with `labels: {{source: {spec.source}}}` in your config "
                      "(every (query, model) pair of the pool must be labelled).", highlight=False)


def _duration(seconds: float) -> str:
    """Seconds as '42 s', '12.5 min' or '3.1 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _params(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M"


def print_estimate(est) -> None:
    """The measured rates and projections of `cr2 label --estimate`, per (model, benchmark) and per model."""
    if not est.models:
        return
    table = Table(title=f"labeling estimate (measured here, hf generation '{est.models[0].generation}')")
    for col in ("model", "benchmark", "sample", "q/s", "queries", "time", "unlabelled", "time"):
        table.add_column(col, justify="left" if col in ("model", "benchmark") else "right", no_wrap=True)
    for r in est.table.itertuples():
        table.add_row(r.model_id, r.benchmark, f"{r.sample_queries}", f"{r.queries_per_s:.2f}", f"{r.total_queries:,}",
                      _duration(r.projected_total_s), f"{r.unlabelled_queries:,}", _duration(r.projected_unlabelled_s))
    console.print(table)
    for m in est.models:
        rows = est.table[est.table["model_id"] == m.model_id]
        console.print(
            f"{m.model_id}: {_params(m.params)} parameters ({m.shape}), {m.dtype} on {m.device}; whole selection "
            f"{_duration(rows['projected_total_s'].sum())}, not yet labelled {_duration(rows['projected_unlabelled_s'].sum())}"
            f" (plus once per model: loading the weights, first calls ≈ {_duration(m.warmup_s)}, "
            f"batch-size probes {_duration(m.probe_s)}, compiling decode steps {_duration(m.compile_s)})",
            highlight=False)
    console.print(f"all models: whole selection {_duration(est.table['projected_total_s'].sum())}, not yet labelled "
                  f"{_duration(est.table['projected_unlabelled_s'].sum())} (one model at a time on this machine). "
                  "Random weights generate to max_gen_toks: generative benchmarks are a worst case. "
                  f"Estimate took {_duration(est.wall_s)}.", highlight=False)


GPU_SMOKE_COMMAND = "bash scripts/gpu_measure.sh"


def print_stored_projection(counts, stored_rates=None) -> None:
    """The selection projected with every stored GPU measurement (configs/labeling_gpu_rates.yaml), per model,
    saying which (model, benchmark) rates are missing; and that cr2's static path has none yet if so."""
    from cr2.labels.lmeval.estimate import load_stored_rates, stored_projection

    measurements = stored_rates if stored_rates is not None else load_stored_rates()
    console.print("projections from stored GPU measurements (made elsewhere; configs/labeling_gpu_rates.yaml):",
                  highlight=False)
    for m in measurements:
        proj = stored_projection(m, counts)
        parts, unmeasured = [], []
        for mid, rows in proj.groupby("model_id", sort=False):
            known = rows[rows["queries_per_s"].notna()]
            if not len(known):
                unmeasured.append(mid)
                continue
            gaps = rows[rows["queries_per_s"].isna() & (rows["total_queries"] > 0)]
            parts.append(f"{mid} {_duration(known['projected_total_s'].sum())}"
                         + (f" + {', '.join(gaps['benchmark'])} (not measured)" if len(gaps) else ""))
        if unmeasured:
            parts.append(f"{', '.join(unmeasured)} not measured")
        console.print(f"  {m.device}, {m.generation} [{m.id}]: {'; '.join(parts)}", highlight=False, soft_wrap=True)
        console.print(f"    source: {m.source}", highlight=False, soft_wrap=True)
    if not any(m.generation == "static" for m in measurements):
        console.print(f"  cr2's static generation path (hf.generation: static): not measured on a GPU — measure it "
                      f"with `{GPU_SMOKE_COMMAND}` (docs/labeling.md §9).", highlight=False, soft_wrap=True)


def _estimate(cfg, home, model_ids, bench, backend, limit, spec, sample, chunk_size, architectures, stored) -> None:
    from cr2_flows.label import estimate_labeling

    if stored:
        console.print(f"projecting labeling of {', '.join(model_ids)} on {', '.join(bench)} from stored GPU "
                      f"measurements" + (f", first {limit} queries per benchmark" if limit else "")
                      + f"; warehouse {home / 'cr2.duckdb'}", highlight=False)
    else:
        console.print(f"estimating labeling of {', '.join(model_ids)} on {', '.join(bench)}: {sample} queries per "
                      f"(model, benchmark), chunk size {chunk_size or spec.chunk_size}, hf batch size "
                      f"{spec.hf.batch_size}, generation '{spec.hf.generation}'"
                      + (f", first {limit} queries per benchmark" if limit else "") + f"; warehouse {home / 'cr2.duckdb'}",
                      highlight=False)
    est = estimate_labeling(cfg, home, models=model_ids, benchmarks=bench, backend=backend, limit=limit, spec=spec,
                            sample=sample, chunk_size=chunk_size, architectures=architectures, measure=not stored)
    print_estimate(est)
    print_stored_projection(est.counts)
