"""`cr2 recalibrate --states far-rician` at operator speed: the wall time of the command, process start included.

Every repeat runs on a fresh copy of a home that holds a full default `cr2 run` (warehouse + task-result cache),
so each one does the real work: new states and costs, a new threshold table, the before/after evaluation.
Modes:
  server     a Prefect server is running (`make prefect-up`, PREFECT_API_URL exported): the operator set-up;
             the benchmark starts its own server on a free port and stops it at the end
  ephemeral  no server: Prefect starts its temporary API inside the process (7–17 s on this machine)
  full       server, with --bands --baselines: what every recalibration did before (Monte-Carlo bands + baselines)
Target: `server` median ≤ 10 s on the default set. Results: benchmarks/results/recalibrate.json.

    python benchmarks/bench_recalibrate.py [--home var] [--repeats 3] [--modes server,ephemeral,full]
    python benchmarks/bench_recalibrate.py --queries 1000   # builds a proportional slice first (cold `cr2 run`)

The target applies to the default set (a home from `cr2 run` on configs/default.yaml); a --queries slice
records it as n/a.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from _common import CR2, REPO, figure, fresh_env, parse_args, run_measured, target, write_result

SKIP = {"prefect", "report", "export", "prefect-stack", "cache"}  # not read by a recalibration


def copy_home(src: Path, dst: Path) -> Path:
    """The warehouse and task-result cache of `src` copied to `dst` (checkpoints are referenced by absolute path)."""
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.name in SKIP or p.name.endswith(".wal"):
            continue
        (shutil.copytree if p.is_dir() else shutil.copy2)(p, dst / p.name)
    return dst


def main(argv=None) -> None:
    args = parse_args(__doc__, argv, home={"default": str(REPO / "var"), "help": "home with a default `cr2 run`"},
                      modes={"default": "server,ephemeral,full", "help": "comma-separated modes"},
                      queries={"default": None, "type": int, "help": "benchmark a proportional slice of N queries"})
    cfg_args: list[str] = []
    if args.queries:
        from _common import write_sliced_data

        base = REPO / "var" / f"bench-recal-{args.queries}"
        data, rows = write_sliced_data(base / "data", int(args.queries))
        (base / "slice.yaml").write_text(f"extends: default\ndata_dir: {data}\n")
        cfg_args = ["-c", str(base / "slice.yaml")]
        src = base / "home"
        if not (src / "cr2.duckdb").is_file():
            print(f"cold `cr2 run` on a {rows:,}-query slice into {src} …", flush=True)
            env = fresh_env(base / "cold")
            run_measured([CR2, "run", *cfg_args, "--home", str(src)], env)
    else:
        src = Path(args.home).resolve()
    if not (src / "cr2.duckdb").is_file():
        raise SystemExit(f"{src} holds no warehouse; run `cr2 run` first (or pass --home / --queries)")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    reps = args.repeats or (1 if args.quick else 3)
    sys.path.insert(0, str(REPO))
    from tests.prefect_stack import PrefectStack, stop

    samples: dict[str, list[dict]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="cr2-bench-recal-") as tmp:
        root = Path(tmp)
        stack = None
        try:
            if {"server", "full"} & set(modes):
                stack = PrefectStack(root / "stack")
                stack.spawn("server", "server", "start", "--host", "127.0.0.1", "--port", str(stack.port))
                stack.wait_healthy()
            for i in range(reps):
                for mode in modes:
                    env = fresh_env(root / f"{mode}-{i}")
                    env = {k: v for k, v in env.items() if k not in ("PREFECT_API_URL", "CR2_CACHE")}
                    if "CR2_CACHE" in os.environ:  # the user's cache (encoders, tokenizer), as a user has it
                        env["CR2_CACHE"] = os.environ["CR2_CACHE"]
                    if mode in ("server", "full"):
                        env.update({"PREFECT_API_URL": stack.api, "PREFECT_HOME": stack.env["PREFECT_HOME"]})
                    home = copy_home(src, root / f"{mode}-{i}" / "work")
                    cmd = [CR2, "recalibrate", "--states", "far-rician", "--home", str(home), *cfg_args]
                    if mode == "full":
                        cmd += ["--bands", "--baselines"]
                    res = run_measured(cmd, env)
                    samples[mode].append({"wall_s": res["wall_s"], "peak_rss_gb": res["peak_rss_gb"],
                                          "tail": res["stdout"].strip().splitlines()[-1:]})
                    print(f"  {mode} {i + 1}/{reps}: {res['wall_s']:.1f} s", flush=True)
        finally:
            if stack is not None:
                stop(stack.procs)
    labels = {"server": "`cr2 recalibrate --states far-rician`, Prefect server running (operator set-up)",
              "ephemeral": "`cr2 recalibrate --states far-rician`, no server (temporary in-process API)",
              "full": "`cr2 recalibrate --states far-rician --bands --baselines`, server running (previous default)"}
    figures = [figure(f"{m}.wall_s", labels[m], [s["wall_s"] for s in samples[m]], "s",
                      target("<=", 10, "≤ 10 s") if m == "server" else None, target_applies=not args.queries)
               for m in modes]
    figures += [figure(f"{m}.peak_rss_gb", f"{m}: peak RSS (largest process)", [s["peak_rss_gb"] for s in samples[m]],
                       "GB") for m in modes]
    write_result("recalibrate", {"quick": bool(args.quick), "home": str(src), "queries": args.queries or "default set",
                                 "states": "far-rician", "repeats": reps,
                                 "figures": figures, "samples": samples})


if __name__ == "__main__":
    main()
