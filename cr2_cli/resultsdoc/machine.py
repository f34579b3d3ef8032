"""Section "Fits and the machine": why the page's numbers do not depend on the core count, and what a thread costs."""
from __future__ import annotations

import json

import pandas as pd

from cr2.report.markdown import markdown_table
from cr2_cli.resultsdoc.core import Doc

BENCH = "benchmarks/results/fit_threads.json"

TEXT = """## Fits and the machine

Every fit (teacher, gate, ablated gates, learned baselines, retrained premise cells) runs at `fit.torch_threads`
torch threads, never at the machine's core count, and independent fits run in separate processes at that thread
count (docs/method.md), so the same config gives the same fits on any machine: `tests/test_fit_threads.py` fits on 1,
2 and a reported 16 cores, serially and in parallel processes, and requires identical parameters. The shipped
configs set one thread; a warehouse made at another thread count contains other fits and, through them, other numbers."""


def render(doc: Doc) -> str:
    path = doc.repo / BENCH
    if not path.is_file():
        return TEXT + f"\n\n_No stored benchmark `{BENCH}`: run `python benchmarks/bench_fit_threads.py`._\n"
    b = json.loads(path.read_text(encoding="utf-8"))
    rows = [{"fit": f["label"], "median s": f"{f['median']:.2f}", "min … max s": f"{f['min']:.2f} … {f['max']:.2f}",
             "runs": f["n"]} for f in b["figures"]]
    load = ", ".join(str(x) for x in b.get("load_avg_before", []))
    return (TEXT + f"\n\nWhat a thread buys on a small fit (`python benchmarks/bench_fit_threads.py` → `{BENCH}`, "
            f"measured {b['measured_at']} on {b['machine']['cpus']} cores, load average before {load}):\n\n"
            + markdown_table(pd.DataFrame(rows)))
