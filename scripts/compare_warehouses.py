"""Same decisions and metrics before and after a change: the default config on a slice, in two warehouses, joined.

The check that a change keeps behaviour and every number of the default run the same:

  1. slice   — every 20th row of each default benchmark file (1,077 queries after the default subset selection)
               written to <out>/data, and <out>/slice.yaml = the default config with data_dir pointing there;
  2. run     — `cr2 run` of that config with the code of one checkout (e.g. a `git worktree` of the base commit,
               and the working tree) into its own home;
  3. compare — the two homes' newest evaluation runs joined on (method, λ, α, query) for `decisions` and on
               (method, λ, α, benchmark, metric) for `metrics`: rows only on one side, decisions that differ
               (chosen model, local/defer, gate acceptance) and the largest |Δ| of a metric. Exit status 1 when
               anything differs.

`check` does all three:

    python scripts/compare_warehouses.py check --base 00994d6 --out /tmp/cr2-compare

(the base commit is checked out with `git worktree add` under <out>/base-code, the current tree is the "after"
side). Labels are SIMULATED (the default config): the check compares code paths, not model quality.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVERY = 20
KEY_DECISIONS = ["method", "lam", "alpha", "query_id"]
KEY_METRICS = ["method", "lam", "alpha", "benchmark", "metric"]


def write_slice(out: Path, every: int = EVERY) -> Path:
    """Every `every`-th row of each enabled benchmark file of the default config under out/data; returns the
    config file (the default config with data_dir = out/data)."""
    import pandas as pd

    sys.path.insert(0, str(ROOT))
    from cr2.config import load_config

    config = load_config()
    data = out / "data"
    (data / "benchmarks").mkdir(parents=True, exist_ok=True)
    for name in config.enabled_benchmarks:
        src = config.benchmark_file(name)
        df = pd.read_parquet(src).iloc[::every]
        df.to_parquet(data / "benchmarks" / src.name, compression="zstd", index=False)
    shutil.copy(config.data_path / config.labels.simulator.accuracy_file, data / config.labels.simulator.accuracy_file)
    cfg = out / "slice.yaml"
    cfg.write_text(f"extends: default\ndata_dir: {data}\n")
    return cfg


def run_pipeline(code: Path, config: Path, home: Path) -> float:
    """`cr2 run -c config --home home` with the code of checkout `code`; returns the wall seconds."""
    prefect_home = home.with_name(f"prefect-{home.name}")  # its own Prefect database (no shared ~/.prefect)
    prefect_home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(code), "PREFECT_HOME": str(prefect_home),
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "600"}  # a loaded machine starts it slowly
    env.pop("PREFECT_API_URL", None)
    t0 = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("cr2")), "run", "-c", str(config), "--home", str(home)],
                   cwd=code, env=env, check=True)
    return time.perf_counter() - t0


def _newest_run(home: Path) -> tuple[object, object, str]:
    sys.path.insert(0, str(ROOT))
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import newest_eval_run, run_decisions, view_for_run

    with Warehouse(home, read_only=True) as wh:
        run_id = newest_eval_run(wh)
        return run_decisions(wh, run_id), view_for_run(wh, "metrics", run_id), run_id


def _keyed(df, key):
    df = df.copy()
    df["alpha"] = df["alpha"].fillna(-1.0)  # NULL α (methods without calibration) joins as a value
    df["lam"] = df["lam"].fillna(-1.0)
    return df


def compare(home_a: Path, home_b: Path) -> dict:
    """Join the newest evaluation runs of two homes; counts of rows, one-sided rows, differences."""
    import numpy as np

    dec_a, met_a, run_a = _newest_run(home_a)
    dec_b, met_b, run_b = _newest_run(home_b)
    dec = _keyed(dec_a, KEY_DECISIONS).merge(_keyed(dec_b, KEY_DECISIONS), on=KEY_DECISIONS, how="outer",
                                             suffixes=("_a", "_b"), indicator=True)
    both = dec[dec["_merge"] == "both"]
    differ = ((both["chosen_model_a"] != both["chosen_model_b"])
              | (both["accepted_local_a"] != both["accepted_local_b"])
              | (both["gate_accept_a"].astype("boolean").fillna(False) != both["gate_accept_b"].astype("boolean").fillna(False))
              | (both["gate_accept_a"].isna() != both["gate_accept_b"].isna()))
    met = _keyed(met_a, KEY_METRICS).merge(_keyed(met_b, KEY_METRICS), on=KEY_METRICS, how="outer",
                                           suffixes=("_a", "_b"), indicator=True)
    mboth = met[met["_merge"] == "both"]
    va, vb = mboth["value_a"].to_numpy(dtype=float), mboth["value_b"].to_numpy(dtype=float)
    nan_differs = np.isnan(va) != np.isnan(vb)
    delta = np.abs(np.where(np.isnan(va) | np.isnan(vb), 0.0, va - vb))
    out = {
        "run_a": run_a, "run_b": run_b,
        "decisions_a": len(dec_a), "decisions_b": len(dec_b), "decisions_joined": len(both),
        "decisions_only_a": int((dec["_merge"] == "left_only").sum()),
        "decisions_only_b": int((dec["_merge"] == "right_only").sum()),
        "decisions_differing": int(differ.sum()),
        "methods": int(dec_a["method"].nunique()), "queries": int(dec_a["query_id"].nunique()),
        "metrics_a": len(met_a), "metrics_b": len(met_b), "metrics_joined": len(mboth),
        "metrics_only_a": int((met["_merge"] == "left_only").sum()),
        "metrics_only_b": int((met["_merge"] == "right_only").sum()),
        "metrics_nan_differs": int(nan_differs.sum()),
        "metrics_max_abs_delta": float(delta.max()) if len(delta) else 0.0,
        "metrics_differing": int((delta > 0).sum() + nan_differs.sum()),
    }
    out["identical"] = (out["decisions_only_a"] == out["decisions_only_b"] == out["decisions_differing"] == 0
                        and out["metrics_only_a"] == out["metrics_only_b"] == out["metrics_differing"] == 0)
    if out["decisions_differing"]:
        out["differing_methods"] = sorted(both.loc[differ, "method"].unique())
    if out["metrics_differing"]:
        bad = mboth[(delta > 0) | nan_differs]
        out["differing_metric_methods"] = sorted(bad["method"].unique())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("slice", help="write the slice's data and config")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--every", type=int, default=EVERY)
    r = sub.add_parser("run", help="cr2 run of a config with the code of one checkout")
    r.add_argument("--code", type=Path, default=ROOT)
    r.add_argument("--config", type=Path, required=True)
    r.add_argument("--home", type=Path, required=True)
    c = sub.add_parser("compare", help="join the newest evaluation runs of two homes")
    c.add_argument("home_a", type=Path)
    c.add_argument("home_b", type=Path)
    k = sub.add_parser("check", help="slice, run the base commit and this tree, compare")
    k.add_argument("--base", required=True, help="the commit before the change (e.g. 00994d6)")
    k.add_argument("--out", type=Path, required=True)
    k.add_argument("--every", type=int, default=EVERY)
    a = p.parse_args(argv)
    if a.cmd == "slice":
        print(write_slice(a.out, a.every))
        return 0
    if a.cmd == "run":
        print(f"{run_pipeline(a.code, a.config, a.home):.1f} s")
        return 0
    if a.cmd == "compare":
        out = compare(a.home_a, a.home_b)
    else:
        cfg = write_slice(a.out, a.every)
        base = a.out / "base-code"
        if not base.exists():
            subprocess.run(["git", "worktree", "add", "--detach", str(base), a.base], cwd=ROOT, check=True)
        for code, home in ((base, a.out / "before"), (ROOT, a.out / "after")):
            print(f"{home.name}: {run_pipeline(code, cfg, home):.1f} s", flush=True)
        out = compare(a.out / "before", a.out / "after")
    for k_, v in out.items():
        print(f"{k_}: {v}")
    return 0 if out["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
