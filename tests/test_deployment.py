"""cr2.deploy.deployment — one definition of the deployed router's calibration split, and a pure library module."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cr2.config import load_config
from cr2.crc import calibrate_group_tables, calibrate_table
from cr2.deploy.deployment import CalibrationSplit, Deployment, calibration_split, check_route_inputs
from cr2.core.errors import DataValidationError

REPO = Path(__file__).resolve().parent.parent


def _table(dist_id: str, label_source: str, grouped: bool = False):
    rng = np.random.default_rng(0)
    scores, risks = rng.random((60, 1)).astype(np.float32), rng.random((60, 1)) < 0.2
    kw = dict(gate_fingerprint="fp", dist_id=dist_id, label_source=label_source)
    if grouped:
        return calibrate_group_tables(scores, risks, np.array(["a", "b"] * 30), [1.0], [0.3], **kw)
    return calibrate_table(scores, risks, [1.0], [0.3], **kw)


@pytest.mark.parametrize("grouped", [False, True])
def test_a_deployment_calibrates_on_its_tables_own_states_and_labels(grouped):
    cfg = load_config()
    table = _table("far-rician@v1-recalibrated", "imported-x", grouped)  # not the config's distribution / labels
    split = calibration_split(cfg, table)
    assert (split.dist_id, split.label_source, split.split) == ("far-rician@v1-recalibrated", "imported-x", "val")
    assert split.dist_id != cfg.channel.distribution.dist_id
    assert (split.seed, split.encoder, split.decision_cost) == (int(cfg.splits.seed), cfg.embedding.store_name,
                                                                cfg.routing.decision_cost)
    assert split.routing_args() == {"dist_id": split.dist_id, "label_source": "imported-x", "seed": split.seed,
                                    "encoder": split.encoder, "decision_cost": split.decision_cost}


def test_the_calibration_set_comes_from_the_split_and_an_empty_one_is_an_error():
    cfg = load_config()
    table = _table("d", "s")
    asked = []

    def load_sets(splits):
        asked.append(splits)
        return {s: [] for s in splits}  # an empty split

    dep = Deployment(version=3, table=table, trained={}, split=calibration_split(cfg, table), load_sets=load_sets)
    with pytest.raises(DataValidationError, match="val split of 'd' / 's' is empty"):
        dep.calibration_set()
    assert asked == [("val",)]
    assert isinstance(dep.split, CalibrationSplit)


def test_route_inputs_are_validated_once_with_errors_naming_the_input():
    check_route_inputs("What is 2 + 2?", ["3", "4"], 1.0, 0.05, 80.0)
    for args, match in (((" ", None, 1.0, 0.05), "query text is empty"), (("q", ["a", ""], 1.0, 0.05), "non-empty"),
                        (("q", None, float("nan"), 0.05), "λ must be"), (("q", None, 1.0, 1.0), "α must be"),
                        (("q", None, 1.0, 0.05, -1.0), "distance_m")):
        with pytest.raises(DataValidationError, match=match):
            check_route_inputs(*args)


def test_the_deployment_module_imports_no_database_orchestrator_or_upper_layer():
    code = "import json, sys; import cr2.deploy.deployment; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    top = {m.split(".")[0] for m in json.loads(proc.stdout.strip().splitlines()[-1])}
    assert not top & {"duckdb", "prefect", "cr2_warehouse", "cr2_tasks", "cr2_flows", "cr2_cli", "torch"}
