"""`cr2 recalibrate | drift`: a new channel-state distribution — test for drift, re-calibrate the frozen gate."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from cr2_cli.console import console, friendly
from cr2_cli.options import ConfigOpt, HomeOpt, config_arg, home_dir
from cr2_cli.render import print_drift, print_recalibration

# what the re-calibration imports once it runs and no validation helper runs (GX validates the new states and costs)
FLOW_IMPORTS = ("great_expectations", "great_expectations.expectations")


@friendly(flow=True, existing_home=True)
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
    from cr2_cli import prefect_api

    t0 = time.perf_counter()
    h = home_dir(home)
    ahead = False
    if not only_if_drift:  # new states to validate: GX imported in a helper from now, beside the flow's own imports
        from cr2.config import load_state_distribution
        from cr2_warehouse.inputs import validation_ahead

        ahead = validation_ahead(h, load_state_distribution(states).dist_id)
    from cr2_flows.recalibrate import recalibrate_flow

    prefect_api.wait(warm=() if ahead else FLOW_IMPORTS)  # the temporary API server friendly() started while the flow imported
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
