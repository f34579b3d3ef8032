"""Re-runs of a built default home: the cold run it was built by, then a re-run after changing only the channel.

Reads the newest `cr2 run` of the home (run it first, e.g. `make run` from a fresh clone, idle): its time outside
the embedding step (flow time − prepare-embeddings; the process start beside it is measured by bench_pipeline).
Then, `--repeats` times, copies the home (its cache folder with it) and times `cr2 run` on the copy with only
channel.distribution changed (far-rician) — whole process, Prefect's temporary server included — with its stages and
the load average before it. Writes
benchmarks/results/rerun.json. Targets: outside embedding ≤ 90 s, channel-only re-run ≤ 60 s.
    .venv/bin/python benchmarks/bench_rerun.py --home var [--repeats 2]
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from _common import built_home, figure, fresh_env, target, write_result
from bench_pipeline import cli, last_flow_run


def main(argv: list[str] | None = None) -> int:
    args, home = built_home(__doc__, argv)
    reps = args.repeats or (1 if args.quick else 2)
    cold = last_flow_run(home / "prefect", "cr2-run")
    embed_s = sum(t["seconds"] for t in cold["tasks"] if t["task"] == "prepare-embeddings")
    channel = []
    with tempfile.TemporaryDirectory(prefix="cr2-bench-rerun-") as tmp:
        far = Path(tmp) / "far.yaml"
        far.write_text("extends: default\nchannel: {distribution: far-rician}\n")
        for i in range(reps):
            copy = Path(tmp) / f"home-{i}"
            shutil.copytree(home, copy)
            env = {**fresh_env(Path(tmp) / f"env-{i}"), "CR2_HOME": str(copy), "PREFECT_HOME": str(copy / "prefect")}
            env.pop("CR2_CACHE")  # the copy's own cache (<home>/cache), as a re-run of the home has it
            channel.append(cli(["run", "--config", str(far)], env, "cr2-run"))
            print(f"  channel re-run {i + 1}/{reps}: {channel[-1]['wall_s']:.1f} s wall "
                  f"(load before {channel[-1]['load_avg_before']})", flush=True)
            shutil.rmtree(copy, ignore_errors=True)
    figures = [
        figure("cold.flow_outside_embedding_s", "the home's cold `cr2 run`: time in the flow outside prepare-embeddings",
               [cold["flow_s"] - embed_s], "s", target("<=", 90, "≤ 90 s")),
        figure("cold.embedding_s", "the home's cold `cr2 run`: prepare-embeddings", [embed_s], "s"),
        figure("channel.wall_s", "re-run after changing only channel.distribution (far-rician), whole process",
               [c["wall_s"] for c in channel], "s", target("<=", 60, "≤ 60 s")),
        figure("channel.overhead_s", "channel re-run: outside the flow (process start, imports, Prefect server)",
               [c["overhead_s"] for c in channel], "s"),
    ]
    write_result("rerun", {"title": "Cold run outside embedding; re-run after a channel change", "home": str(home),
                           "quick": args.quick, "cold_stages": cold["stages"],
                           "channel_stages": [c["stages"] for c in channel],
                           "channel_load_avg_before": [c["load_avg_before"] for c in channel], "figures": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
