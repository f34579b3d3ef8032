"""What certifying every router costs a `cr2 run`: the certify and equal-risk stages' share of a warm and a cold run.

Reads the home's newest `cr2 run` (run `cr2 run` there first, e.g. `make run`, idle) for the share of what it
recomputed; then, `--repeats` times, copies the home and times a warm `cr2 run` with nothing changed (whole process,
Prefect's temporary server included) and the time its certify and equal-risk tasks took. Target: certifying adds at
most 20 % to a warm run. Writes benchmarks/results/certify_share.json.
    .venv/bin/python benchmarks/bench_certify_share.py --home var [--repeats 3]
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from _common import built_home, figure, fresh_env, target, write_result
from bench_pipeline import cli, last_flow_run

CERTIFY_TASKS = ("certify", "equal-risk")


def _certify_s(run: dict) -> float:
    return sum(t["seconds"] for t in run["tasks"] if t["task"] in CERTIFY_TASKS)


def _home_only(root: Path):
    """copytree ignore: at the home's top level, leave out the homes nested in it (other scenarios' warehouses) and
    its study copies; a warm run reads only the home's own warehouse and caches."""
    def ignore(folder: str, names: list[str]) -> list[str]:
        if Path(folder) != root:
            return []
        return [n for n in names if n == "studies" or (root / n / "cr2.duckdb").is_file()]
    return ignore


def main(argv: list[str] | None = None) -> int:
    args, home = built_home(__doc__, argv)
    reps = args.repeats or (1 if args.quick else 3)
    cold = last_flow_run(home / "prefect", "cr2-run")
    warm = []
    with tempfile.TemporaryDirectory(prefix="cr2-bench-certify-") as tmp:
        copy = Path(tmp) / "home"
        shutil.copytree(home, copy, ignore=_home_only(home))
        env = {**fresh_env(Path(tmp) / "env"), "CR2_HOME": str(copy), "PREFECT_HOME": str(copy / "prefect")}
        # one run first, not counted: it brings the copy's caches to this code (a stage whose code changed since
        # the home's last run recomputes once)
        first = cli(["run"], env, "cr2-run")
        print(f"  warm-up run: {first['wall_s']:.1f} s wall, certify + equal-risk {_certify_s(first):.2f} s", flush=True)
        for i in range(reps):
            warm.append(cli(["run"], env, "cr2-run"))
            print(f"  warm run {i + 1}/{reps}: {warm[-1]['wall_s']:.1f} s wall, certify + equal-risk "
                  f"{_certify_s(warm[-1]):.2f} s (load before {warm[-1]['load_avg_before']})", flush=True)
    figures = [
        figure("warm.wall_s", "warm `cr2 run`, nothing changed, whole process", [w["wall_s"] for w in warm], "s"),
        figure("warm.certify_s", "… of which the certify and equal-risk tasks (cached)", [_certify_s(w) for w in warm], "s"),
        figure("warm.certify_share_pct", "certify + equal-risk as a share of the warm run",
               [100 * _certify_s(w) / w["wall_s"] for w in warm], "%", target("<=", 20, "≤ 20 %")),
        figure("newest.certify_s", "the home's newest `cr2 run` (what it recomputed): certify + equal-risk", [_certify_s(cold)], "s"),
        figure("newest.certify_share_pct", "… as a share of that run's flow", [100 * _certify_s(cold) / cold["flow_s"]], "%"),
    ]
    write_result("certify_share", {"title": "Certifying every router: share of a warm and a cold `cr2 run`",
                                   "home": str(home), "quick": args.quick,
                                   "warm_load_avg_before": [w["load_avg_before"] for w in warm], "figures": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
