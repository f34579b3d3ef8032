"""Run the benchmarks, then merge their results into results/latest.json and render results/SUMMARY.md.

    python benchmarks/run_all.py                  # every benchmarks/bench_*.py (what `make bench` runs)
    python benchmarks/run_all.py --quick          # small sizes and few repeats: a smoke run of every benchmark
    python benchmarks/run_all.py routing scaling  # only the named ones (the others keep their last results)
    python benchmarks/run_all.py --list           # the available names
    python benchmarks/run_all.py --summary-only   # re-render latest.json and SUMMARY.md from the result files

Each benchmark runs in its own process and writes results/<name>.json; a failing one is reported and
the rest still run. latest.json holds every result file present (each with its own measured_at and
quick flag), the machine and the load average before and after the run.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from _common import BESIDE_LOAD, RESULTS, fmt, machine

from cr2.core.files import atomic_write
from cr2.report.markdown import markdown_table

HERE = Path(__file__).resolve().parent
# cheap to expensive; others follow by name. device/serve use $CR2_HOME's deployed router where they need one
ORDER = ("routing", "scaling", "guarantees", "device", "ingest", "embed", "pipeline", "serve", "scale")


def available() -> list[str]:
    names = [p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py")]
    return [n for n in ORDER if n in names] + sorted(n for n in names if n not in ORDER)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes and few repeats (smoke run)")
    p.add_argument("--repeats", type=int, default=None, help="override every benchmark's number of repeats")
    p.add_argument("--list", action="store_true", help="print the available benchmarks and exit")
    p.add_argument("--summary-only", action="store_true", help="only merge the result files and render the summary")
    args = p.parse_args(argv)
    names_all = available()
    if args.list:
        print("\n".join(names_all))
        return 0
    for name in args.names:
        if name not in names_all:
            close = difflib.get_close_matches(name, names_all, n=1)
            hint = f" — did you mean '{close[0]}'?" if close else ""
            print(f"unknown benchmark '{name}'{hint} available: {', '.join(names_all)}", file=sys.stderr)
            return 2
    names = [] if args.summary_only else (args.names or names_all)

    load_before = list(os.getloadavg())
    suite, failed = {}, []
    t_suite = time.perf_counter()
    for name in names:
        cmd = [sys.executable, str(HERE / f"bench_{name}.py")]
        if args.quick:
            cmd.append("--quick")
        if args.repeats is not None:
            cmd += ["--repeats", str(args.repeats)]
        print(f"== {name}{' (quick)' if args.quick else ''}", flush=True)
        la0, t0 = os.getloadavg()[0], time.perf_counter()
        rc = subprocess.run(cmd, cwd=HERE.parent).returncode
        secs = time.perf_counter() - t0
        suite[name] = {"rc": rc, "seconds": round(secs, 1), "load_avg_1m_before": round(la0, 2),
                       "load_avg_1m_after": round(os.getloadavg()[0], 2)}
        print(f"== {name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {secs:.0f} s", flush=True)
        if rc != 0:
            failed.append(name)
    latest = merge(args, suite, load_before, time.perf_counter() - t_suite)
    out_md = RESULTS / "SUMMARY.md"
    out_md.write_text(render(latest))
    print(f"wrote {RESULTS / 'latest.json'} and {out_md}")
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


def merge(args: argparse.Namespace, suite: dict, load_before: list[float], seconds: float) -> dict:
    """Write results/latest.json: every results/<name>.json, the machine and this run's bookkeeping."""
    results = {}
    for name in available():  # each benchmark's result, and beside it the one taken with a busy process beside it
        for key in (name, f"{name}{BESIDE_LOAD}"):
            f = RESULTS / f"{key}.json"
            if f.is_file():
                results[key] = json.loads(f.read_text())
    latest = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "benchmarks/run_all.py " + " ".join(sys.argv[1:]),
        "quick": args.quick,
        "machine": {**machine(with_torch=True), "load_avg_before": [round(v, 2) for v in load_before],
                    "load_avg_after": [round(v, 2) for v in os.getloadavg()]},
        "suite_seconds": round(seconds, 1),
        "ran": suite,
        "results": results,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    atomic_write(RESULTS / "latest.json", json.dumps(latest, indent=2, ensure_ascii=False) + "\n")
    return latest


# ---------------------------------------------------------------- SUMMARY.md
def _status(f: dict) -> str:
    if "target" not in f:
        return ""
    return {True: "met", False: "**MISSED**", None: "n/a (quick)"}[f.get("met")]


def _cell(s: object) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _table(columns: list[str], rows: list[list[object]]) -> list[str]:
    """The lines of a markdown table (cr2.report.markdown) of cells written as one-line text."""
    frame = pd.DataFrame([[_cell(c) for c in row] for row in rows], columns=[_cell(c) for c in columns], dtype=object)
    return markdown_table(frame, why="no figures").rstrip("\n").split("\n")


def _figure_rows(figures: list[dict]) -> list[list[object]]:
    rows = []
    for f in figures:
        iqr = f"{fmt(f['q1'])}–{fmt(f['q3'])}" if f["n"] > 1 else "—"
        rng = f"{fmt(f['min'])}–{fmt(f['max'])}" if f["n"] > 1 else "—"
        rows.append([f["label"], f"{fmt(f['median'])} {f['unit']}", iqr, rng, f["n"],
                     f["target"]["text"] if "target" in f else "",
                     _status(f)])
    return rows


def _legacy_figures(res: dict) -> list[dict]:
    """Figures for a result file written before figures existed: its flat numbers, one sample each."""
    skip = {"benchmark", "measured_at", "machine"}
    out = []
    for k, v in res.items():
        if k not in skip and isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append({"label": k, "unit": "", "n": 1, "median": v, "q1": v, "q3": v, "min": v, "max": v})
    return out


def render(latest: dict) -> str:
    m = latest["machine"]
    blas = ", ".join(f"{b['library']} ({b['threads']} threads)" for b in m.get("blas", [])) or "—"
    lines = [
        "# cr2 benchmark summary",
        "",
        f"Generated {latest['generated_at']} by `{latest['command'].strip()}`"
        f"{' — QUICK mode: small sizes, few repeats; targets defined at full size show n/a' if latest['quick'] else ''}.",
        f"Each figure is the median over repeated runs (n); spread = interquartile range (IQR) and min–max. "
        f"A target is checked on the median. See docs/benchmarks.md.",
        "",
        f"**Machine:** {m['cpu_model']}, {m['cpus']} CPUs ({m['cpus_usable']} usable), {m['ram_gb']} GB RAM; "
        f"Python {m['python']}, torch {m.get('torch', '?')} ({m.get('torch_threads', '?')} threads by default); BLAS: {blas}; "
        f"{m['platform']}.",
        f"**Load average** (1, 5, 15 min): before {m['load_avg_before']}, after {m['load_avg_after']}"
        f" — the machine may be shared; a load above the core count slows every figure.",
        "",
    ]
    results = latest["results"]
    targeted = [(name, f) for name, res in results.items() for f in res.get("figures", []) if "target" in f]
    if targeted:
        lines += ["## Targets", ""]
        lines += _table(["benchmark", "figure", "median", "target", "status"],
                        [[name, f["label"], f"{fmt(f['median'])} {f['unit']}", f["target"]["text"], _status(f)]
                         for name, f in targeted])
        lines.append("")
    analysis = HERE / "ANALYSIS.md"  # hand-written: what a missed target costs, what was fixed, what remains and why
    if analysis.is_file():
        lines += [analysis.read_text().rstrip(), ""]
    for name, res in results.items():
        ran = latest["ran"].get(name)
        mode = "quick" if res.get("quick") else "full"
        title = res.get("title", "")
        load = res.get("machine", {}).get("load_avg_1m_5m_15m") or [res.get("machine", {}).get("load_avg_1m")]
        lines += [f"## {name}{' — ' + title if title else ''}", "",
                  f"{mode} mode; measured {res.get('measured_at', '?')}"
                  + (f" (this run, {ran['seconds']:.0f} s)" if ran else " (earlier run)")
                  + (f"; load average at the end {load}" if load and load[0] is not None else "") + "."]
        if ran and ran["rc"] != 0:
            lines.append(f"**This run FAILED (exit {ran['rc']}); the figures below are from the last successful run.**")
        lines.append("")
        figures = res.get("figures") or _legacy_figures(res)
        lines += _table(["figure", "median", "IQR", "min–max", "n", "target", "status"], _figure_rows(figures))
        lines.append("")
        for t in res.get("tables", []):
            lines += [f"**{t['title']}**", ""] + _table(t["columns"], t["rows"]) + [""]
        if res.get("notes"):
            lines += [f"- {n}" for n in res["notes"]] + [""]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
