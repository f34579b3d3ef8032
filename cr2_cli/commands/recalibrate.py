"""`cr2 recalibrate | drift`: a new channel-state distribution — test for drift, re-calibrate the frozen gate."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from cr2_cli.console import console, friendly
from cr2_cli.options import ConfigOpt, HomeOpt, config_arg, home_dir

# what the re-calibration imports once it runs and no validation helper runs (GX validates the new states and costs)
FLOW_IMPORTS = ("great_expectations", "great_expectations.expectations")


def validate_states_ahead(kwargs: dict) -> None:
    """New states to validate: Great Expectations imported in a helper process from the command's first step
    (cr2_warehouse.validation.start_ahead), stopped again when the states turn out to be stored already."""
    if kwargs.get("only_if_drift"):
        return  # the drift check decides first; the flow starts the helper once it finds drift
    from cr2_warehouse.validation import start_ahead, stop_ahead

    if not start_ahead():
        return
    from cr2.config import load_state_distribution
    from cr2.core.errors import Cr2Error
    from cr2_warehouse.inputs import states_pending

    try:
        pending = states_pending(home_dir(kwargs.get("home"), create=False),
                                 load_state_distribution(kwargs["states"]).dist_id)
    except (Cr2Error, OSError):  # the command reads them again and reports the problem (a flow run records it)
        pending = False
    if not pending:
        stop_ahead()


@friendly(flow=True, existing_home=True, ahead=validate_states_ahead)
def recalibrate(states: str = typer.Option(..., "--states", help="new state distribution: a name under configs/states "
                                          "or a YAML file"),
                only_if_drift: bool = typer.Option(False, "--only-if-drift", help="re-calibrate only when the drift "
                                                   "check detects a shift"),
                bands: bool = typer.Option(False, "--bands", help="also the Monte-Carlo re-split risk bands "
                                           "(evaluation.n_resplits; slower)"),
                baselines: bool = typer.Option(False, "--baselines", help="also evaluate the baselines under the new "
                                               "states"),
                config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Re-calibrate the frozen gate's thresholds on a new channel-state distribution (no retraining)."""
    from cr2_cli.render import print_drift, print_recalibration
    from cr2_cli import prefect_api

    t0 = time.perf_counter()
    h = home_dir(home)
    from cr2_flows.recalibrate import recalibrate_flow
    from cr2_warehouse.validation import ahead_started

    # the temporary API server friendly() started while the flow imported; GX warmed here unless the helper has it
    prefect_api.wait(warm=() if ahead_started() else FLOW_IMPORTS)
    out = recalibrate_flow(states=states, config_path=config_arg(config), home=str(h),
                           only_if_drift=only_if_drift, bands=bands, baselines=baselines)
    print_drift(out["drift"])
    if out["skipped"]:
        console.print("no drift detected: thresholds kept as they are", highlight=False)
        return
    print_recalibration(h, out)
    console.print(f"recalibrate finished in {time.perf_counter() - t0:.1f} s", highlight=False)


@friendly
def drift(states: str = typer.Option(..., "--states", help="candidate state distribution: a name or a YAML file"),
          n: int = typer.Option(2000, "--n", help="states to sample from it"),
          alpha: float = typer.Option(0.05, "--alpha", help="family-wise significance level (Holm)"),
          config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Test whether a state distribution departs from the deployed calibration states (KS per feature)."""
    from cr2.config import load_config, load_state_distribution
    from cr2_flows.drift import drift_check

    load_state_distribution(states)  # a bad file or name fails here, before the warehouse is opened
    report = drift_check(load_config(config), home_dir(home, create=False), states, n, alpha)
    for line in report.lines():
        console.print(line, highlight=False, markup=False)
