"""Helpers shared by the benchmarks: arguments, thread limits, machine description, figures, result files.

A benchmark measures each figure several times (`repeats`) and records every sample; `figure()` turns
the samples into median, quartiles and range and checks the figure's target on the median. Results go
to benchmarks/results/<name>.json; run_all.py merges them into latest.json and renders SUMMARY.md.
numpy is deliberately not imported here, so a benchmark can limit BLAS threads before numpy loads.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
CR2 = str(Path(sys.executable).with_name("cr2"))
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

if str(REPO) not in sys.path:  # tests/serve_helpers.py (fake model endpoints) lives outside the installed packages
    sys.path.append(str(REPO))

from cr2.core.env import apply_offline_env  # noqa: E402
from cr2.core.files import atomic_write  # noqa: E402

apply_offline_env()  # every benchmark imports this module first: offline, and OMP_WAIT_POLICY before torch loads


# ---------------------------------------------------------------- arguments
def parse_args(doc: str | None, argv: Sequence[str] | None = None, **extra: dict[str, Any]) -> argparse.Namespace:
    """Return the common benchmark arguments (--quick, --repeats) plus `extra` options (name → add_argument kwargs)."""
    p = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None)
    p.add_argument("--quick", action="store_true", help="small sizes and few repeats (a smoke run of a few minutes)")
    p.add_argument("--repeats", type=int, default=None, help="repeated measurements per figure (default: per benchmark)")
    for name, kwargs in extra.items():
        p.add_argument(f"--{name}", **kwargs)
    args = p.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        p.error("--repeats must be ≥ 1")
    return args


def built_home(doc: str | None, argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, Path]:
    """The arguments of a benchmark that reads a built home (--home, default var/) and that home, which must hold
    a warehouse (`cr2 run` there first)."""
    args = parse_args(doc, argv, home={"default": "var", "help": "the built home (default var/)"})
    home = Path(args.home).resolve()
    if not (home / "cr2.duckdb").is_file():
        raise SystemExit(f"no warehouse in {home}: run `cr2 run` there first")
    return args, home


def limit_threads(n: int) -> dict:
    """Limit BLAS/OpenMP (and torch, once imported) to n threads; return what was set.

    Environment variables only bind before numpy/torch load, so call this first; threadpoolctl (a
    scikit-learn dependency) also limits pools that are already loaded.
    """
    for var in THREAD_ENV:
        os.environ[var] = str(n)
    out = {"threads": n}
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=n)
    except ImportError:  # env vars above still apply to pools loaded later
        pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    return out


# ---------------------------------------------------------------- machine
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def machine(with_torch: bool = False) -> dict:
    """Return the machine description: CPU model and count, RAM, Python, load average (torch threads if loaded)."""
    info = {
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "ram_gb": _ram_gb(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_1m_5m_15m": [round(v, 2) for v in os.getloadavg()],
    }
    if with_torch or "torch" in sys.modules:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [{"library": p.get("internal_api"), "threads": p.get("num_threads")} for p in threadpool_info()]
    except ImportError:
        pass
    return info


# ---------------------------------------------------------------- statistics and figures
def quantile(values: Sequence[float], q: float) -> float:
    """Return the q-quantile of `values` with linear interpolation (numpy's default method)."""
    xs = sorted(float(v) for v in values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def stats(samples: Sequence[float]) -> dict:
    """Return n, median, q1, q3, min and max of the samples."""
    xs = [float(v) for v in samples]
    if not xs:
        raise ValueError("a figure needs at least one sample")
    return {"n": len(xs), "median": quantile(xs, 0.5), "q1": quantile(xs, 0.25), "q3": quantile(xs, 0.75),
            "min": min(xs), "max": max(xs)}


def target(op: str, value: float, text: str | None = None) -> dict:
    """Return a target the median must satisfy: op is '<=' or '>='."""
    if op not in ("<=", ">="):
        raise ValueError(f"target op must be '<=' or '>=', got {op!r}")
    return {"op": op, "value": value, "text": text or f"{'≤' if op == '<=' else '≥'} {value:g}"}


def figure(key: str, label: str, samples: Sequence[float], unit: str, tgt: dict | None = None,
           target_applies: bool = True, note: str | None = None) -> dict:
    """Return one measured figure: its samples, their statistics, the target and whether the median meets it.

    target_applies=False (e.g. a quick run at a size the target is not defined for) records the target
    but leaves `met` as None, shown as "n/a" in the summary.
    """
    out = {"key": key, "label": label, "unit": unit, "samples": [float(v) for v in samples], **stats(samples)}
    if tgt is not None:
        out["target"] = tgt
        med = out["median"]
        out["met"] = (med <= tgt["value"] if tgt["op"] == "<=" else med >= tgt["value"]) if target_applies else None
    if note:
        out["note"] = note
    return out


def timed_us(fn, idx) -> list[float]:
    """µs per call fn(i) for i in idx (an iterable, or n for range(n)), garbage collection paused (as timeit does)."""
    import gc

    out, was = [], gc.isenabled()
    gc.disable()
    try:
        for i in (range(idx) if isinstance(idx, int) else idx):
            t0 = time.perf_counter_ns()
            fn(i)
            out.append((time.perf_counter_ns() - t0) / 1e3)
    finally:
        if was:
            gc.enable()
    return out


def fmt(x: float | None) -> str:
    """Return x with about three significant digits and thousands separators."""
    if x is None:
        return "—"
    ax = abs(x)
    if ax >= 100:
        return f"{x:,.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    if ax == 0:
        return "0"
    return f"{x:.3g}"


# ---------------------------------------------------------------- result files
def write_result(name: str, payload: dict) -> Path:
    """Write benchmarks/results/<name>.json: the payload plus the benchmark name, time and machine."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), **payload}
    atomic_write(out, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    for f in payload.get("figures", []):
        spread = f"[{fmt(f['q1'])}–{fmt(f['q3'])}]" if f["n"] > 1 else ""
        status = "" if "target" not in f else {True: "  met", False: "  MISSED", None: "  n/a"}[f["met"]]
        print(f"  {f['label']}: {fmt(f['median'])} {f['unit']} {spread} (n={f['n']}){status}", flush=True)
    print(f"wrote {out.relative_to(REPO)}", flush=True)
    return out


# ---------------------------------------------------------------- subprocesses
def timed_cli(args: list[str], env: dict) -> tuple[float, str]:
    """Wall-clock seconds of one `cr2 ...` process (Prefect's temporary server start included)."""
    res = run_measured(args, env)
    return res["wall_s"], res["stdout"]


class _TreeSampler(threading.Thread):
    """Samples the summed RSS of a process and its descendants every `interval` seconds (psutil)."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_bytes, self.max_procs = 0, 0
        self.server_pids: set[int] = set()  # Prefect API servers started under the process (temporary ones)
        self._halt = threading.Event()

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._halt.is_set():
            try:
                procs = [root] + root.children(recursive=True)
                total = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                        if p.pid not in self.server_pids and "prefect.server" in " ".join(p.cmdline()):
                            self.server_pids.add(p.pid)
                    except psutil.Error:
                        pass
                self.peak_bytes = max(self.peak_bytes, total)
                self.max_procs = max(self.max_procs, len(procs))
            except psutil.Error:
                return
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


BESIDE_LOAD = "one CPU-bound process (a Python busy loop) beside the measured command for its whole duration"


@contextlib.contextmanager
def beside_load(enabled: bool) -> Iterator[str | None]:
    """With `enabled`, one CPU-bound process runs for the duration of the block — the 'one other CPU-heavy job on a
    2-core machine' case of the targets (CI, a user's laptop with a build beside); yields what ran beside, or None."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if enabled else None
    try:
        yield BESIDE_LOAD if enabled else None
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


BESIDE_LOAD = "_beside_load"  # the suffix of a result taken with one busy process beside the benchmark


def beside_result(name: str, beside: str | None) -> str:
    """The results file of benchmark `name`: <name>_beside_load when one process ran beside it, so the idle-machine
    figures are never overwritten by loaded ones."""
    return f"{name}{BESIDE_LOAD}" if beside else name


def run_measured(args: list[str], env: dict, cwd: Path | None = None) -> dict:
    """Run one command; return wall time, stdout/stderr, peak RSS of the largest process and of the process tree.

    peak_rss_gb: ru_maxrss from wait4 — the largest resident set of the process or of any descendant it
    waited for (exact, per process). tree_peak_rss_gb: the summed RSS of the whole process tree (the
    Prefect server included), sampled every 0.25 s with psutil (None when psutil is missing).
    """
    import tempfile

    load_before = os.getloadavg()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=err, cwd=cwd or REPO, text=True)
        sampler = None
        try:
            import psutil  # noqa: F401

            sampler = _TreeSampler(proc.pid)
            sampler.start()
        except ImportError:
            pass
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here; keep Popen from waiting again
        if sampler is not None:
            sampler.stop()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed (exit {proc.returncode}):\n{stdout[-4000:]}\n{stderr[-4000:]}")
    return {
        "wall_s": wall, "stdout": stdout, "stderr": stderr,
        "peak_rss_gb": usage.ru_maxrss / 1024**2,  # ru_maxrss is in KiB on Linux
        "tree_peak_rss_gb": sampler.peak_bytes / 1024**3 if sampler else None,
        "max_processes": sampler.max_procs if sampler else None,
        # CPU time (user + sys) of the process and the descendants it waited for: less inflated than wall time
        # on a loaded machine; a temporary Prefect server it started is a descendant
        "cpu_s": usage.ru_utime + usage.ru_stime, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
        "load_avg_before": list(load_before), "load_avg_after": list(os.getloadavg()),
        "prefect_server_starts": len(sampler.server_pids) if sampler else None,
    }


def start_serve(args: list[str], env: dict, log: Path, port: int) -> subprocess.Popen:
    """`cr2 serve --port PORT ARGS…` started in the background, once it answers /health (its output in `log`)."""
    import httpx

    proc = subprocess.Popen([CR2, "serve", "--port", str(port), *args], env=env, cwd=REPO, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 600:
        if proc.poll() is not None:
            raise SystemExit(f"cr2 serve exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"cr2 serve did not answer /health within 600 s: {log.read_text()[-2000:]}")


def fresh_env(root: Path) -> dict:
    """Return os.environ with CR2_HOME, CR2_CACHE and PREFECT_HOME under `root` (an empty, isolated installation)."""
    for d in ("home", "cache", "prefect"):
        (root / d).mkdir(parents=True, exist_ok=True)
    return {**os.environ, "CR2_HOME": str(root / "home"), "CR2_CACHE": str(root / "cache"),
            "PREFECT_HOME": str(root / "prefect")}


# ---------------------------------------------------------------- data slices
def write_sliced_data(out: Path, n_queries: int) -> tuple[Path, int]:
    """Write a proportional slice of about n_queries of the default benchmark set to out/; return (dir, rows).

    Every configured subset keeps its first ⌈f·size⌉ rows, f = n_queries / total (the configured subset
    filters — GPQA main, MBPP test — are applied first), so the benchmark and subject mix of the default
    set is kept. The labels' accuracy file is copied beside the slice, as the config expects.
    """
    import math
    import shutil

    import pyarrow.parquet as pq

    from cr2.config import load_config

    cfg = load_config()
    frames = {}
    for name in cfg.enabled_benchmarks:
        spec = cfg.benchmarks[name]
        df = pq.read_table(cfg.benchmark_file(name)).to_pandas()
        if spec.selected_subsets is not None:
            df = df[df["subset"].isin(spec.selected_subsets)]
        frames[name] = (spec.data_file, df)
    total = sum(len(df) for _, df in frames.values())
    frac = min(1.0, n_queries / total)
    rows = 0
    for name, (file, df) in frames.items():
        size = df.groupby("subset", sort=False)["subset"].transform("size")
        rank = df.groupby("subset", sort=False).cumcount()
        keep = df[rank < (size * frac).map(math.ceil)]
        dest = out / file
        dest.parent.mkdir(parents=True, exist_ok=True)
        keep.to_parquet(dest, compression="zstd", index=False)
        rows += len(keep)
    shutil.copy(cfg.data_path / cfg.labels.simulator.accuracy_file, out / cfg.labels.simulator.accuracy_file)
    return out, rows


def labeling_queries(benchmarks: list[str], n: int):
    """A selection of n shipped queries of `benchmarks` (MBPP's test subset), as `cr2 label` selects them."""
    import pandas as pd

    from cr2.labels.lmeval.runs import select_queries

    cols = ["query_id", "benchmark", "subset", "question", "choices", "target", "tests", "test_setup"]
    frames = []
    for b in benchmarks:
        df = pd.read_parquet(REPO / "data" / "benchmarks" / f"{b}.parquet")
        if b == "mbpp":
            df = df[df["subset"] == "test"]
        frames.append(df[cols])
    return select_queries(pd.concat(frames, ignore_index=True), n)
