"""`cr2 recalibrate --states FILE` of this checkout against another commit's, side by side in one run.

Each commit runs its own installation on a home its own `cr2 run` built from the default config (the warehouse
schema differs between versions, so a home is per commit; both hold the same default set). Every repeat copies the
home afresh — warehouse, task-result cache, stage caches and the home's Prefect state: the whole home, as an operator
has it — and runs the command without a Prefect server (the command starts its temporary one). The commits alternate
(old, new, old, new, …) so a drift of the machine's load hits both alike; every sample records wall and CPU time
(user + sys of the command and the descendants it waited for, its temporary server included) and the load average.
Target: the median wall time of this checkout ÷ that of the other commit ≤ 1.0 (read on an idle machine: the load
is in the file). With --beside-load one CPU-bound process runs beside both sides for the whole measurement (the 2-core
machine with its second core busy); results then go to recalibrate_versus_beside_load.json. Results:
benchmarks/results/recalibrate_versus.json.

    python benchmarks/bench_recalibrate_versus.py --old-checkout DIR --old-home DIR --home DIR --states FILE \
        [--repeats 3] [--beside-load]

--old-checkout: a clone of the other commit with its .venv (`make install`); --old-home / --home: homes built by
`cr2 run` of each checkout; --states: one state-distribution YAML both read.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from _common import REPO, beside_load, beside_result, figure, parse_args, run_measured, target, write_result


RECALIBRATE_TARGET = target("<=", 20, "≤ 20 s, also with one other process beside it")


def commit_of(checkout: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True,
                          check=True).stdout.strip()


def one(checkout: Path, home: Path, states: Path, scratch: Path) -> dict:
    """One timed `cr2 recalibrate` of `checkout` on a fresh copy of `home`."""
    copy = scratch / "home"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(home, copy, ignore=shutil.ignore_patterns("*.wal"))
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME", "CR2_HOME")}
    try:
        res = run_measured([str(checkout / ".venv" / "bin" / "cr2"), "recalibrate", "--states", str(states),
                            "--home", str(copy)], env, cwd=checkout)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    said = next((ln for ln in res["stdout"].splitlines() if "recalibrate finished" in ln), None)
    return {"wall_s": res["wall_s"], "cpu_s": res["cpu_s"], "load": res["load_avg_before"][0], "said": said}


def main() -> None:
    args = parse_args(__doc__, **{
        "old-checkout": {"required": True, "help": "a clone of the other commit, with its .venv"},
        "old-home": {"required": True, "help": "a home built by the other commit's `cr2 run`"},
        "home": {"required": True, "help": "a home built by this checkout's `cr2 run`"},
        "states": {"required": True, "help": "the state-distribution YAML both re-calibrate to"},
        "beside-load": {"action": "store_true", "help": "one CPU-bound process beside both sides"}})
    repeats = args.repeats or 3
    old, states = Path(args.old_checkout).resolve(), Path(args.states).resolve()
    sides = {"old": (old, Path(args.old_home).resolve()), "new": (REPO, Path(args.home).resolve())}
    samples: dict[str, list[dict]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="cr2-recal-versus-") as tmp, beside_load(args.beside_load) as beside:
        for i in range(repeats):
            for side, (checkout, home) in sides.items():
                s = one(checkout, home, states, Path(tmp))
                samples[side].append(s)
                print(f"  {side} #{i + 1}: {s['wall_s']:.1f} s wall, {s['cpu_s']:.1f} s CPU, load {s['load']:.2f}",
                      flush=True)
    wall = {k: sorted(x["wall_s"] for x in v) for k, v in samples.items()}
    med = {k: v[len(v) // 2] for k, v in wall.items()}
    cpu = {k: sorted(x["cpu_s"] for x in v)[len(v) // 2] for k, v in samples.items()}
    commits = {"old": commit_of(old), "new": commit_of(REPO)}
    figures = [figure(f"{k}.wall_s", f"`cr2 recalibrate` at {commits[k]}, wall", [x["wall_s"] for x in samples[k]], "s",
                      RECALIBRATE_TARGET if k == "new" else None) for k in ("old", "new")]
    figures += [figure(f"{k}.cpu_s", f"`cr2 recalibrate` at {commits[k]}, CPU (user + sys)",
                       [x["cpu_s"] for x in samples[k]], "s") for k in ("old", "new")]
    figures.append(figure("ratio.wall", f"median wall {commits['new']} ÷ {commits['old']}", [med["new"] / med["old"]],
                          "×", target("<=", 1.0)))
    figures.append(figure("ratio.cpu", f"median CPU {commits['new']} ÷ {commits['old']}", [cpu["new"] / cpu["old"]], "×"))
    loads = [x["load"] for v in samples.values() for x in v]
    write_result(beside_result("recalibrate_versus", beside), {
        "commits": commits, "beside_load": beside, "states": str(states), "repeats": repeats, "samples": samples,
        "figures": figures,
        "notes": [f"1-minute load average before the samples: {min(loads):.2f}–{max(loads):.2f} on "
                  f"{os.cpu_count()} cores" + (" (loaded: compare the CPU times)" if max(loads) > 1.5 else "")]})


if __name__ == "__main__":
    main()
