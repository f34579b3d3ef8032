"""Section "Fits and the machine": why the page's numbers do not depend on the core count, and what a thread costs."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from cr2.report.markdown import markdown_table
from cr2.report.resultsdoc.words import PLAIN, Words

BENCH = "benchmarks/results/fit_threads.json"

TEXT = """## Fits and the machine

Every fit (teacher, gate, ablated gates, learned baselines, retrained premise cells) runs at `fit.torch_threads`
torch threads, never at the machine's core count, and independent fits run in separate processes at that thread
count (docs/method.md), so the same config gives the same fits on any machine: `tests/test_fit_threads.py` fits on 1,
2 and a reported 16 cores, serially and in parallel processes, and requires identical parameters. The shipped
configs set one thread; a warehouse made at another thread count contains other fits and, through them, other numbers."""


@dataclass(frozen=True)
class MachineData:
    bench: dict | None  # the stored benchmark BENCH as read (None: not there)


def render(data: MachineData, words: Words = PLAIN) -> str:
    b = data.bench
    if b is None:
        return TEXT + f"\n\n_No stored benchmark `{BENCH}`: run `python benchmarks/bench_fit_threads.py`._\n"
    rows = [{"fit": f["label"], "median s": f"{f['median']:.2f}", "min … max s": f"{f['min']:.2f} … {f['max']:.2f}",
             "runs": f["n"]} for f in b["figures"]]
    load = ", ".join(str(x) for x in b.get("load_avg_before", []))
    return (TEXT + f"\n\nWhat a thread buys on a small fit (`python benchmarks/bench_fit_threads.py` → `{BENCH}`, "
            f"measured {b['measured_at']} on {b['machine']['cpus']} cores, load average before {load}):\n\n"
            + markdown_table(pd.DataFrame(rows)))
