"""`cr2 ingest | prepare | train | calibrate | run`: the pipeline's stages as Prefect flows (cached)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from cr2.crc import RULES  # the calibrated rules of the registry, for --rule
from cr2_cli import prefect_api
from cr2_cli.console import console, friendly
from cr2_cli.options import ConfigOpt, HomeOpt, config_arg, home_dir


@friendly(flow=True)
def ingest(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Load the selected benchmarks into the warehouse (validated, cached)."""
    from cr2_cli.render import print_ingest_summary
    from cr2_flows.ingest import ingest_flow

    prefect_api.wait()  # the temporary API server friendly() started while the flow imported

    t0 = time.perf_counter()
    summary = ingest_flow(config_path=config_arg(config), home=str(home_dir(home)))
    print_ingest_summary(summary)
    how = "cached: nothing changed, no work done" if summary.get("cached") else "computed"
    console.print(f"ingest finished in {time.perf_counter() - t0:.1f} s ({how}); warehouse: "
                  f"{home_dir(home) / 'cr2.duckdb'}")


@friendly(flow=True)
def prepare(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Embeddings, splits, channel states, labels and costs for every query (validated, cached)."""
    from cr2_cli.render import print_model_summary, print_prepare_steps
    from cr2_flows.prepare import prepare_flow

    prefect_api.wait()  # the temporary API server friendly() started while the flow imported

    h = home_dir(home)
    t0 = time.perf_counter()
    summary = prepare_flow(config_path=config_arg(config), home=str(h))
    print_prepare_steps(summary)
    print_model_summary(h, config)
    console.print(f"prepare finished in {time.perf_counter() - t0:.1f} s; warehouse: {h / 'cr2.duckdb'}")


@friendly(flow=True, existing_home=True)
def train(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Train the CR² teacher selector and margin gate on the prepared train split (cached)."""
    from cr2_cli.render import print_train
    from cr2_flows.train import train_flow

    prefect_api.wait()  # the temporary API server friendly() started while the flow imported

    h = home_dir(home)
    print_train(train_flow(config_path=config_arg(config), home=str(h)))


@friendly(flow=True, existing_home=True)
def calibrate(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt,
              lam: Optional[list[float]] = typer.Option(None, "--lam", help="extra λ to calibrate exactly (repeatable)"),
              rule: Optional[str] = typer.Option(None, "--rule", help=f"{' | '.join(RULES)} (default: calibration.rule); "
                                                 "the risk each controls: docs/guarantees.md"),
              delta: Optional[float] = typer.Option(None, "--delta", help="ltt: P(some λ's threshold has risk > α) ≤ δ"),
              group: Optional[str] = typer.Option(None, "--group", help="Mondrian: benchmark | subset (none: pooled)"),
              small_group: Optional[str] = typer.Option(None, "--small-group", help="error | defer")) -> None:
    """Calibrate the threshold table τ*(λ; α) of the trained gate on the val split (new version)."""
    from cr2_cli.render import print_calibrate
    from cr2_flows.calibrate import calibrate_flow

    prefect_api.wait()  # the temporary API server friendly() started while the flow imported

    h = home_dir(home)
    print_calibrate(calibrate_flow(config_path=config_arg(config), home=str(h), extra_lams=list(lam or []),
                                   calibration=calibration_overrides(rule, delta, group, small_group)))


def calibration_overrides(rule: Optional[str], delta: Optional[float], group: Optional[str],
                          small_group: Optional[str]) -> dict:
    """config.calibration overrides from CLI flags; `--rule crc` drops a configured δ."""
    out: dict = {}
    if rule is not None:
        out["rule"] = rule
        from cr2.crc import RULE_REGISTRY

        if delta is None and not (rule in RULE_REGISTRY and RULE_REGISTRY[rule].needs_delta):
            out["delta"] = None
    if delta is not None:
        out["delta"] = delta
    if group is not None:
        out["group"] = None if group.lower() in ("none", "null", "") else group
    if small_group is not None:
        out["small_group"] = small_group
    return out


@friendly(flow=True)
def run(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Run the whole pipeline on the configured data (one flow, one process)."""
    from cr2_cli.render import (print_baselines, print_calibrate, print_ingest_summary, print_model_summary,
                                print_operating_points, print_prepare_steps, print_train)
    from cr2_flows.run import run_flow

    prefect_api.wait()  # the temporary API server friendly() started while the flow imported

    h = home_dir(home)
    t0 = time.perf_counter()
    summary = run_flow(config_path=config_arg(config), home=str(h))
    print_ingest_summary(summary["ingest"])
    if "prepare" in summary:
        print_prepare_steps(summary["prepare"])
        print_model_summary(h, config)
    if "train" in summary:
        print_train(summary["train"])
    if "calibrate" in summary:
        print_calibrate(summary["calibrate"])
    if "evaluate" in summary:
        print_operating_points(h, summary["evaluate"])
        if "baselines" in summary:
            print_baselines(h, summary["baselines"], summary["evaluate"])
    console.print(f"\ncr2 run finished in {time.perf_counter() - t0:.1f} s")
    console.print(f"warehouse: {h / 'cr2.duckdb'}")
    if summary.get("report"):
        rep = summary["report"]
        note = "  (SIMULATED labels — see the banner)" if rep.get("labels_simulated") else "  (see the labels banner)"
        console.print(f"report:    {rep['path']}{note}", highlight=False)
