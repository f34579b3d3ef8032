"""Where the time goes: a py-spy speedscope profile summarised by pipeline stage.

    py-spy record --rate 25 --format speedscope -o prof.json -- python .venv/bin/cr2 run
    python benchmarks/profile_summary.py prof.json [--json out.json]

Each sample's stack is assigned to the first stage of STAGES that one of its frames belongs to — the stage tasks
of the pipeline first, then cache-key computation, the Prefect machinery (engine, client, temporary server
start), imports and the rest — and the share of
samples per stage is printed with the seconds it stands for (samples / rate). py-spy drops samples of idle
threads, so on a loaded machine a stage's seconds include the time it waited for a core: compare shares, and
take CPU time from /usr/bin/time.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

# (stage, frame name, file fragment), most specific first: a sample belongs to the first stage any of its frames matches
STAGES: tuple[tuple[str, str, str], ...] = (
    ("ingest", "ingest_queries", "tasks/ingest"),
    ("prepare: embeddings", "embed_queries", "tasks/prepare"),
    ("prepare: splits/states/labels/costs", "", "tasks/prepare"),
    ("train (teacher + gate)", "train_cr2", "tasks/train"),
    ("calibrate", "calibrate_cr2", "tasks/calibrate"),
    ("baselines", "fit_baselines", "tasks/baselines"),
    ("evaluate", "evaluate", "tasks/evaluate"),
    ("recalibration before/after", "evaluate_recalibration", "tasks/recalibrate"),
    ("intervals", "", "tasks/intervals"),
    ("ablation gates", "run_ablation", "tasks/ablation"),
    ("report", "", "tasks/report"),
    ("drift check", "drift_check", ""),
    ("artifacts", "", "flows/artifacts"),
    ("cache keys (fingerprints)", "", "_key"),
    ("Prefect temporary server start", "", "prefect/server"),
    ("Prefect engine / client / results", "", "prefect/"),
    ("imports", "_find_and_load", ""),
)


def _matches(stage: tuple[str, str, str], f: dict) -> bool:
    _, fn, frag = stage
    name, file = f.get("name", ""), f.get("file", "") or ""
    if frag == "_key":
        return name.endswith("_key") and "/tasks/" in file
    return (not fn or name == fn) and (not frag or frag in file)


def _stage(frames: list[dict], stack: list[int]) -> str:
    """The first stage of STAGES (most specific first) that any frame of the stack belongs to."""
    stack_frames = [frames[i] for i in stack]
    for stage in STAGES:
        if any(_matches(stage, f) for f in stack_frames):
            return stage[0]
    return "other (CLI, flow glue, interpreter start)"


def summarise(path: Path, rate: float) -> dict:
    prof = json.loads(path.read_text())
    frames = prof["shared"]["frames"]
    counts: Counter = Counter()
    for p in prof["profiles"]:
        for stack, w in zip(p["samples"], p.get("weights", [1] * len(p["samples"]))):
            counts[_stage(frames, stack)] += w
    total = sum(counts.values())
    unit = prof["profiles"][0].get("unit", "none") if prof["profiles"] else "none"
    # py-spy's speedscope weights are sample counts ("none") or seconds/microseconds
    scale = {"seconds": 1.0, "milliseconds": 1e-3, "microseconds": 1e-6, "nanoseconds": 1e-9}.get(unit, 1.0 / rate)
    rows = [{"stage": s, "share": c / total, "seconds": c * scale} for s, c in counts.most_common()]
    return {"profile": str(path), "total_seconds": total * scale, "stages": rows}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile", type=Path)
    ap.add_argument("--rate", type=float, default=25.0, help="py-spy --rate used (samples per second)")
    ap.add_argument("--json", type=Path, default=None, help="also write the summary here")
    args = ap.parse_args(argv)
    out = summarise(args.profile, args.rate)
    print(f"{args.profile}: {out['total_seconds']:.1f} s of non-idle samples")
    for r in out["stages"]:
        print(f"  {r['stage']:<42} {100 * r['share']:5.1f} %  {r['seconds']:7.1f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
