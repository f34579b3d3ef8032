"""The whole pipeline as a user runs it: cold and warm `cr2 run`, each stage's time, peak RSS, re-calibration.

Every run is a real `cr2 ...` process in a fresh, isolated installation (CR2_HOME, CR2_CACHE and
PREFECT_HOME under a temporary folder), timed from the outside:
  cold         `cr2 run` on an empty warehouse and cache (tokenizer conversion, embedding, training,
               baselines, evaluation, ablation and report all computed);
  warm         the same command again with nothing changed: every task must be a cache hit;
  recalibrate  `cr2 recalibrate --states far-rician` on a copy of the cold run's warehouse (a copy per
               repeat, so each one does the real work: new states and costs, new thresholds, two
               evaluations — nothing retrained);
  scaling      cold runs on proportional slices of the default set (1k and 5k queries; the full set is
               the cold run above), through a config that `extends: default` with `data_dir` on the slice.
Stage and task times come from the Prefect run history the process leaves in PREFECT_HOME (task-run
start/end times): a stage's time runs from the end of the previous stage to the end of its last task,
so the cache-key computation before a task counts toward its stage. The flow-run time excludes Python
start-up and Prefect's temporary API server; `wall − flow` is that fixed overhead. Peak RSS: ru_maxrss
of the cr2 process (wait4; the largest single process), and the sampled sum over its process tree.

Targets (default set, this 2-core machine): cold ≤ 5 min, warm ≤ 15 s, peak RSS ≤ 4 GB,
re-calibration ≤ 10 s. A --quick run uses a 1k-query slice; its targets show n/a.
The full-size benchmark takes about 15 minutes on 2 idle cores (one cold run alone embeds 21,501 queries).
"""
from __future__ import annotations

import datetime as dt
import re
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

from _common import CR2, fmt, figure, fresh_env, parse_args, run_measured, target, write_result, write_sliced_data

FULL = 0  # size code of the full default set
STAGES = ("ingest", "prepare", "train", "calibrate", "baselines", "evaluate", "ablation", "report")
TASK_STAGE = {"ingest-queries": "ingest", "train-cr2": "train", "calibrate-cr2": "calibrate", "fit-baselines": "baselines",
              "evaluate": "evaluate", "ablation": "ablation", "report": "report"}
TARGETS = {"cold": target("<=", 300, "≤ 300 s (5 min)"), "warm": target("<=", 15, "≤ 15 s"),
           "rss": target("<=", 4.0, "≤ 4 GB"), "recal": target("<=", 10, "≤ 10 s"),
           # the cold run outside the embedding step, and a re-run after a change of channel.distribution
           "cold_non_embed": target("<=", 90, "≤ 90 s"), "channel": target("<=", 60, "≤ 60 s")}


# ---------------------------------------------------------------- Prefect run history
def _ts(s: str) -> dt.datetime:
    t = dt.datetime.fromisoformat(str(s))
    return t.replace(tzinfo=None) if t.tzinfo else t


def _task_stage(name: str) -> str:
    base = re.sub(r"-[0-9a-f]{3}$", "", name)  # Prefect appends a short hash to the task run's name
    return "prepare" if base.startswith("prepare-") else TASK_STAGE.get(base, base)


def last_flow_run(prefect_home: Path, flow_name: str) -> dict:
    """Return the newest run of `flow_name` in this PREFECT_HOME: its time, its tasks and the stage times."""
    con = sqlite3.connect(prefect_home / "prefect.db")
    try:
        row = con.execute("SELECT fr.id, fr.start_time, fr.end_time, fr.state_type FROM flow_run fr JOIN flow f "
                          "ON f.id = fr.flow_id WHERE f.name = ? ORDER BY fr.start_time DESC LIMIT 1", [flow_name]).fetchone()
        if row is None:
            raise SystemExit(f"no '{flow_name}' flow run recorded in {prefect_home}")
        fid, start, end, state = row
        tasks = con.execute("SELECT name, state_name, start_time, end_time FROM task_run WHERE flow_run_id = ? "
                            "ORDER BY start_time", [fid]).fetchall()
    finally:
        con.close()
    t_start, t_end = _ts(start), _ts(end)
    out_tasks = [{"task": re.sub(r"-[0-9a-f]{3}$", "", n), "stage": _task_stage(n), "state": st,
                  "start_s": (_ts(a) - t_start).total_seconds(), "seconds": (_ts(b) - _ts(a)).total_seconds()}
                 for n, st, a, b in tasks]
    stages: list[dict] = []
    prev_end = 0.0
    for t in out_tasks:  # consecutive tasks of one stage form one interval
        end_s = t["start_s"] + t["seconds"]
        if stages and stages[-1]["stage"] == t["stage"]:
            stages[-1]["seconds"] = end_s - stages[-1]["from_s"]
            stages[-1]["task_seconds"] += t["seconds"]
        else:
            stages.append({"stage": t["stage"], "from_s": prev_end, "seconds": end_s - prev_end, "task_seconds": t["seconds"]})
        prev_end = end_s
    return {"state": state, "flow_s": (t_end - t_start).total_seconds(), "tasks": out_tasks, "stages": stages,
            "cached_share": sum(t["state"] == "Cached" for t in out_tasks) / max(len(out_tasks), 1)}


# ---------------------------------------------------------------- one measured command
def _queries(stdout: str) -> int | None:
    m = re.search(r"│\s*all\s*│\s*([\d,]+)\s*│", stdout)
    return int(m.group(1).replace(",", "")) if m else None


def cli(args: list[str], env: dict, flow_name: str) -> dict:
    res = run_measured([CR2, *args], env)
    run = last_flow_run(Path(env["PREFECT_HOME"]), flow_name)
    return {"wall_s": res["wall_s"], "cpu_s": res["cpu_s"], "load_avg_before": res["load_avg_before"],
            "flow_s": run["flow_s"], "overhead_s": res["wall_s"] - run["flow_s"],
            "peak_rss_gb": res["peak_rss_gb"], "tree_peak_rss_gb": res["tree_peak_rss_gb"],
            "max_processes": res["max_processes"], "queries": _queries(res["stdout"]), "stages": run["stages"],
            "tasks": run["tasks"], "cached_share": run["cached_share"], "stdout_tail": res["stdout"].strip().splitlines()[-6:]}


def _fit_seconds(home: Path) -> dict:
    """Return {artifact kind: fit seconds} recorded in the warehouse's `artifacts` table (teacher, gate, router:*)."""
    from cr2_warehouse.db import Warehouse

    with Warehouse(home, read_only=True) as wh:
        df = wh.df("SELECT kind, fit_seconds FROM artifacts")
    return {str(k): round(float(v), 2) for k, v in zip(df["kind"], df["fit_seconds"])}


def _label(size: int) -> str:
    return "full" if size == FULL else (f"{size // 1000}k" if size % 1000 == 0 else f"{size:,}")


def _stage_seconds(run: dict, stage: str) -> float:
    return sum(s["seconds"] for s in run["stages"] if s["stage"] == stage)


def main(argv=None) -> None:
    args = parse_args(__doc__, argv, sizes={"default": None, "help": "comma-separated query counts, 'full' for the whole "
                                                                    "default set (default 1000,5000,full; quick: 1000)"})
    if args.sizes:
        sizes = [FULL if s.strip() == "full" else int(float(s)) for s in args.sizes.split(",")]
    else:
        sizes = [1_000] if args.quick else [1_000, 5_000, FULL]
    main_size = FULL if FULL in sizes else max(sizes)
    reps = args.repeats or (2 if args.quick else 3)  # warm and recalibrate; a cold run per size (and `reps` at main size
    cold_reps = args.repeats or 1  # only when asked: a full-size cold run takes ~10 minutes)
    full_scope = main_size == FULL

    runs: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="cr2-bench-pipeline-") as tmp:
        env0 = fresh_env(Path(tmp) / "help")
        help_s = [run_measured([CR2, "--help"], env0)["wall_s"] for _ in range(reps)]  # start-up without a flow
        import_s = [run_measured([sys.executable, "-c", "import cr2_cli.main, cr2_flows.run, cr2_flows.recalibrate"], env0)["wall_s"]
                    for _ in range(reps)]  # what a flow command imports before Prefect starts its server
        for size in sorted(sizes, key=lambda s: (s == FULL, s)):
            n_cold = cold_reps if size == main_size else 1
            colds, warms, recals, channels = [], [], [], []
            for rep in range(n_cold):
                root = Path(tmp) / f"{_label(size)}-{rep}"
                env = fresh_env(root)
                cfg_args: list[str] = []
                if size != FULL:
                    data, _ = write_sliced_data(root / "data", size)
                    cfg = root / "bench.yaml"
                    cfg.write_text(f"extends: default\ndata_dir: {data}\n")
                    cfg_args = ["--config", str(cfg)]
                print(f"cold `cr2 run` on {_label(size)} ({rep + 1}/{n_cold}) …", flush=True)
                colds.append(cli(["run", *cfg_args], env, "cr2-run"))
                colds[-1]["fit_seconds"] = _fit_seconds(root / "home")
                print(f"  {fmt(colds[-1]['wall_s'])} s wall, {colds[-1]['queries']} queries, "
                      f"peak RSS {colds[-1]['peak_rss_gb']:.2f} GB", flush=True)
                if size == main_size and rep == 0:
                    for i in range(reps):
                        warms.append(cli(["run", *cfg_args], env, "cr2-run"))
                        print(f"  warm {i + 1}/{reps}: {fmt(warms[-1]['wall_s'])} s wall, "
                              f"{100 * warms[-1]['cached_share']:.0f}% of tasks cached", flush=True)
                    for i in range(reps):
                        home = root / f"recal-{i}"
                        shutil.copytree(root / "home", home)
                        recals.append(cli(["recalibrate", "--states", "far-rician", *cfg_args],
                                          {**env, "CR2_HOME": str(home)}, "cr2-recalibrate"))
                        shutil.rmtree(home, ignore_errors=True)
                        print(f"  recalibrate {i + 1}/{reps}: {fmt(recals[-1]['wall_s'])} s wall, "
                              f"{fmt(recals[-1]['flow_s'])} s in the flow", flush=True)
                    for i in range(reps):  # only channel.distribution changed: states, costs and downstream
                        home = root / f"channel-{i}"
                        shutil.copytree(root / "home", home)
                        far = root / "far.yaml"
                        base = f"extends: {cfg_args[1]}\n" if cfg_args else "extends: default\n"
                        far.write_text(base + "channel: {distribution: far-rician}\n")
                        channels.append(cli(["run", "--config", str(far)], {**env, "CR2_HOME": str(home)}, "cr2-run"))
                        shutil.rmtree(home, ignore_errors=True)
                        print(f"  channel re-run {i + 1}/{reps}: {fmt(channels[-1]['wall_s'])} s wall, "
                              f"{fmt(channels[-1]['cpu_s'])} s CPU", flush=True)
                shutil.rmtree(root, ignore_errors=True)
            runs[size] = {"cold": colds, "warm": warms, "recal": recals, "channel": channels}

    m = runs[main_size]
    tag = _label(main_size) + ("" if main_size == FULL else f" ({m['cold'][0]['queries']:,} queries)")
    col = lambda rs, k: [r[k] for r in rs]  # noqa: E731
    figures = [
        figure("cold.wall_s", f"cold `cr2 run`, {tag}", col(m["cold"], "wall_s"), "s", TARGETS["cold"], full_scope),
        figure("cold.flow_s", f"cold: time inside the flow, {tag}", col(m["cold"], "flow_s"), "s"),
        figure("cold.peak_rss_gb", f"cold: peak RSS (largest process), {tag}", col(m["cold"], "peak_rss_gb"), "GB",
               TARGETS["rss"], full_scope),
    ]
    if m["cold"][0]["tree_peak_rss_gb"] is not None:
        figures.append(figure("cold.tree_peak_rss_gb", f"cold: peak RSS, whole process tree (sampled), {tag}",
                              col(m["cold"], "tree_peak_rss_gb"), "GB", TARGETS["rss"], full_scope))
    for stage in STAGES:
        figures.append(figure(f"cold.stage.{stage}", f"cold stage: {stage}",
                              [_stage_seconds(r, stage) for r in m["cold"]], "s"))
    emb = [next((t["seconds"] for t in r["tasks"] if t["task"] == "prepare-embeddings"), None) for r in m["cold"]]
    if all(emb) and all(r["queries"] for r in m["cold"]):
        figures.append(figure("cold.embed_texts_per_s", "MiniLM embedding throughput inside the cold run",
                              [r["queries"] / e for r, e in zip(m["cold"], emb)], "texts/s"))
    figures += [
        figure("warm.wall_s", f"warm `cr2 run`, {tag}", col(m["warm"], "wall_s"), "s", TARGETS["warm"], full_scope),
        figure("warm.flow_s", "warm: time inside the flow", col(m["warm"], "flow_s"), "s"),
        figure("warm.overhead_s", "warm: process start + Prefect server (wall − flow)", col(m["warm"], "overhead_s"), "s"),
        figure("cli_help_s", "`cr2 --help` (Python start-up and CLI import, no flow)", help_s, "s"),
        figure("flow_import_s", "Python start-up + importing the flows (torch, prefect, duckdb, …)", import_s, "s"),
        figure("warm.cached_pct", "warm: tasks served from the cache", [100 * r["cached_share"] for r in m["warm"]], "%",
               target(">=", 100, "100%")),
        figure("warm.peak_rss_gb", "warm: peak RSS (largest process)", col(m["warm"], "peak_rss_gb"), "GB"),
        figure("recal.wall_s", f"`cr2 recalibrate --states far-rician`, {tag}", col(m["recal"], "wall_s"), "s",
               TARGETS["recal"], full_scope),
        figure("recal.flow_s", "recalibrate: time inside the flow", col(m["recal"], "flow_s"), "s"),
        figure("recal.overhead_s", "recalibrate: process start + Prefect server (wall − flow)",
               col(m["recal"], "overhead_s"), "s"),
        figure("recal.peak_rss_gb", "recalibrate: peak RSS (largest process)", col(m["recal"], "peak_rss_gb"), "GB"),
        figure("cold.cpu_s", f"cold `cr2 run`: CPU time (user + sys), {tag}", col(m["cold"], "cpu_s"), "s"),
        figure("cold.non_embed_wall_s", f"cold `cr2 run` outside the embedding step (wall − prepare-embeddings), {tag}",
               [r["wall_s"] - (e or 0.0) for r, e in zip(m["cold"], emb)], "s", TARGETS["cold_non_embed"], full_scope),
        figure("channel.wall_s", f"re-run after changing only channel.distribution (far-rician), {tag}",
               col(m["channel"], "wall_s"), "s", TARGETS["channel"], full_scope),
        figure("channel.cpu_s", "channel re-run: CPU time (user + sys)", col(m["channel"], "cpu_s"), "s"),
        figure("recal.cpu_s", "recalibrate: CPU time (user + sys)", col(m["recal"], "cpu_s"), "s"),
    ]
    for size, r in runs.items():
        if size != main_size:
            c = r["cold"][0]
            figures.append(figure(f"scaling.cold_wall_s.{_label(size)}", f"cold `cr2 run`, {c['queries']:,} queries",
                                  [c["wall_s"]], "s"))

    # tables: stage times per size (cold), and the tasks of the warm and recalibrate runs
    order = sorted(runs, key=lambda s: (s == FULL, s))
    colds = [runs[s]["cold"][0] for s in order]
    scale_rows = [[stage] + [fmt(_stage_seconds(c, stage)) for c in colds] for stage in STAGES]
    scale_rows += [["time inside the flow"] + [fmt(c["flow_s"]) for c in colds],
                   ["process + Prefect server"] + [fmt(c["overhead_s"]) for c in colds],
                   ["**wall, `cr2 run`**"] + [f"**{fmt(c['wall_s'])}**" for c in colds],
                   ["peak RSS, GB (largest process / tree)"] + [
                       f"{c['peak_rss_gb']:.2f} / {c['tree_peak_rss_gb']:.2f}" if c["tree_peak_rss_gb"]
                       else f"{c['peak_rss_gb']:.2f}"
                       for c in colds]]
    kinds = sorted({k for c in colds for k in c["fit_seconds"] if not k.startswith("router:always")},
                   key=lambda k: (k.startswith("router:"), k))
    scale_rows += [[f"fit: {k}"] + [fmt(c["fit_seconds"].get(k)) for c in colds] for k in kinds]
    recal_tasks = m["recal"][0]["tasks"]
    channel_stages = m["channel"][0]["stages"] if m["channel"] else []
    tables = [
        {"title": "Cold `cr2 run`: seconds per stage as the query count grows (one cold run per size)",
         "columns": ["stage"] + [f"{c['queries']:,} queries" if c["queries"] else _label(s) for s, c in zip(order, colds)],
         "rows": scale_rows},
        {"title": "`cr2 recalibrate --states far-rician` (first repeat): its tasks in order",
         "columns": ["task", "state", "seconds"],
         "rows": [[t["task"], t["state"], fmt(t["seconds"])] for t in recal_tasks]
                 + [["(in the flow, outside tasks: cache keys, drift check, loading)", "",
                     fmt(m["recal"][0]["flow_s"] - sum(t["seconds"] for t in recal_tasks))],
                    ["(outside the flow: process start, imports, Prefect server)", "", fmt(m["recal"][0]["overhead_s"])]]},
        {"title": "Re-run after changing only channel.distribution (first repeat): seconds per stage",
         "columns": ["stage", "seconds", "task seconds"],
         "rows": [[st["stage"], fmt(st["seconds"]), fmt(st["task_seconds"])] for st in channel_stages]
                 + ([["(outside the flow: process start, imports, Prefect server)", fmt(m["channel"][0]["overhead_s"]), ""]]
                    if m["channel"] else [])},
    ]
    notes = _notes(m, full_scope, sorted(import_s)[len(import_s) // 2])
    write_result("pipeline", {
        "title": "`cr2 run` cold and warm, stages, memory, re-calibration",
        "quick": args.quick,
        "config": {"sizes": [_label(s) for s in order], "main_size": _label(main_size), "cold_repeats": cold_reps,
                   "warm_repeats": reps, "recalibrate_repeats": reps, "states": "far-rician",
                   "queries": {_label(s): runs[s]["cold"][0]["queries"] for s in order}},
        "figures": figures,
        "tables": tables,
        "notes": notes,
        "details": {_label(s): runs[s] for s in order},
    })


def _notes(m: dict, full_scope: bool, import_s: float) -> list[str]:
    cold, warm, recal = m["cold"][0], m["warm"], m["recal"]
    notes = []
    if not full_scope:
        notes.append("Quick run on a slice of the default set: the targets are defined for the full set and show n/a.")
    big = sorted(cold["stages"], key=lambda s: -s["seconds"])[:3]
    notes.append("Cold run: the largest stages are " + ", ".join(f"{s['stage']} {fmt(s['seconds'])} s" for s in big)
                 + f" of {fmt(cold['wall_s'])} s wall ({fmt(cold['overhead_s'])} s process start + Prefect server).")
    emb = next((t for t in cold["tasks"] if t["task"] == "prepare-embeddings"), None)
    if emb:
        notes.append(f"Embedding (prepare-embeddings) alone: {fmt(emb['seconds'])} s for {cold['queries']:,} queries "
                     f"({cold['queries'] / emb['seconds']:.0f} texts/s); on the full set it bounds the cold run from below.")
    if warm:
        w = warm[0]
        uncached = [t["task"] for t in w["tasks"] if t["state"] != "Cached"]
        notes.append(f"Warm run: {fmt(w['flow_s'])} s inside the flow, {fmt(w['overhead_s'])} s outside it, of which "
                     f"≈ {fmt(import_s)} s is Python start-up and importing the flows and "
                     f"≈ {fmt(w['overhead_s'] - import_s)} s "
                     "Prefect's temporary API server (start and shutdown)" + (f"; NOT cached: {', '.join(uncached)}" if uncached
                                                                              else "; every task cached") + ".")
    if recal:
        r = recal[0]
        top = sorted(r["tasks"], key=lambda t: -t["seconds"])[:3]
        notes.append(f"Re-calibration: {fmt(r['flow_s'])} s inside the flow (largest tasks: "
                     + ", ".join(f"{t['task']} {fmt(t['seconds'])} s" for t in top)
                     + f"), {fmt(r['overhead_s'])} s process start + Prefect server.")
    return notes


if __name__ == "__main__":
    main()
