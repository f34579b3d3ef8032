"""A channel change reaching the live router: a new states file → `cr2 recalibrate` → the running `cr2 serve`
answering with the new threshold table, end to end, while 8 clients keep routing.

Each repeat copies a home that holds a full default `cr2 run`, starts `cr2 serve` on it, starts 8 concurrent
/route clients, then runs `cr2 recalibrate --states far-rician` on the same home and waits for the first answer
decided by the new table (its X-CR2-Thresholds-Version). Modes:
  server     a Prefect server is running (PREFECT_API_URL): the operator set-up
  ephemeral  no server: the command starts one temporary API server on the home's Prefect state
Reported per mode: end to end (recalibrate started → first answer of the new version), the command's own wall
time, the swap lag after it (the server's poll, `serving.reload_interval_s`, plus loading the new teacher and
gate), /route p50 / p99 latency before and during the swap window (recalibrate start → 2 s after the swap),
failed requests (target: none), and the load average.
Targets (idle 2-core machine, default set): end to end ≤ 15 s with a server, ≤ 20 s without. With --beside-load
one CPU-bound process runs beside for the whole measurement (the 2-core machine with its second core busy);
results then go to live_swap_beside_load.json.

    python benchmarks/bench_live_swap.py --home var [--repeats 3] [--modes server,ephemeral] [--beside-load]
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import (CR2, REPO, beside_load, beside_result, figure, parse_args, quantile, run_measured, start_serve,
                     target, write_result)
from bench_recalibrate import copy_home, mode_env

CLIENTS = 8
TEXTS = ["What is the capital of France?", "Which planet is largest?", "Name a prime number above 100.",
         "Solve 12 * 13.", "Who wrote Hamlet?", "What does DNA stand for?", "Sort [3, 1, 2] in Python.",
         "What is the derivative of x^2?"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Clients(threading.Thread):
    """8 concurrent /route clients in an event loop of their own; every answer recorded as (t, ms, version, ok)."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port, self.records, self.stop_flag = port, [], threading.Event()

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        import httpx

        async def client(http, c: int) -> None:
            i = 0
            while not self.stop_flag.is_set():
                body = {"query": f"{TEXTS[(c + i) % len(TEXTS)]} ({c}.{i})", "lam": 1.0, "distance_m": 80.0}
                t0 = time.perf_counter()
                try:
                    r = await http.post(f"http://127.0.0.1:{self.port}/route", json=body)
                    ok, version = r.status_code == 200, int(r.headers.get("x-cr2-thresholds-version", -1))
                except httpx.HTTPError:
                    ok, version = False, -1
                self.records.append((time.perf_counter(), (time.perf_counter() - t0) * 1e3, version, ok))
                i += 1

        limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
        async with httpx.AsyncClient(timeout=120.0, limits=limits) as http:
            await asyncio.gather(*(client(http, c) for c in range(CLIENTS)))


class TableWatch(threading.Thread):
    """The moment the version file beside the warehouse changes: the new table committed (polled every 20 ms)."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.t, self.stop_flag = path, None, threading.Event()
        self.before = path.read_bytes() if path.is_file() else None
        self.start()

    def run(self) -> None:
        while not self.stop_flag.is_set() and self.t is None:
            if (self.path.read_bytes() if self.path.is_file() else None) != self.before:
                self.t = time.perf_counter()
            time.sleep(0.02)


def one_swap(src: Path, root: Path, mode: str, stack) -> dict:
    env = mode_env(root, mode, stack)
    home = copy_home(src, root / "work", frozenset({"prefect"}) if mode == "ephemeral" else frozenset())
    port = _free_port()
    server = start_serve(["--home", str(home)], {k: v for k, v in env.items() if k != "PREFECT_API_URL"},
                         root / "serve.log", port)
    clients = Clients(port)
    try:
        clients.start()
        time.sleep(3.0)  # a steady load before the channel changes
        old = max(v for _, _, v, ok in clients.records if ok)
        table = TableWatch(home / "thresholds.version")
        t_start = time.perf_counter()
        res = run_measured([CR2, "recalibrate", "--states", "far-rician", "--home", str(home)], env)
        t_cmd = time.perf_counter()
        deadline = t_cmd + 60
        t_new = None
        while time.perf_counter() < deadline and t_new is None:
            news = [t for t, _, v, ok in clients.records if ok and v > old]
            t_new = min(news) if news else None
            time.sleep(0.05)
        time.sleep(2.0)
    finally:
        clients.stop_flag.set()
        clients.join(timeout=60)
        table.stop_flag.set()
        server.terminate()
        server.wait(timeout=30)
    if t_new is None:
        raise SystemExit(f"{mode}: the server never answered with a version newer than {old} within 60 s")
    before = [ms for t, ms, _, ok in clients.records if t < t_start]
    during = [ms for t, ms, _, ok in clients.records if t_start <= t <= t_new + 2.0]
    swapped = [ln for ln in (root / "serve.log").read_text().splitlines() if "swapped in" in ln]
    return {"end_to_end_s": t_new - t_start, "recalibrate_wall_s": t_cmd - t_start, "swap_lag_s": t_new - t_cmd,
            "table_written_s": None if table.t is None else table.t - t_start,
            "after_table_s": None if table.t is None else t_new - table.t, "serve_swap_log": swapped[-1:],
            "recalibrate_cpu_s": res["cpu_s"], "load_avg_before": res["load_avg_before"],
            "requests": len(clients.records), "failed": sum(1 for r in clients.records if not r[3]),
            "p50_before_ms": quantile(before, 0.5), "p99_before_ms": quantile(before, 0.99),
            "p50_during_ms": quantile(during, 0.5), "p99_during_ms": quantile(during, 0.99),
            "versions": sorted({v for _, _, v, ok in clients.records if ok})}


def main(argv=None) -> None:
    args = parse_args(__doc__, argv, home={"default": str(REPO / "var"), "help": "home with a default `cr2 run`"},
                      modes={"default": "server,ephemeral", "help": "comma-separated modes"},
                      **{"beside-load": {"action": "store_true", "help": "one CPU-bound process beside the runs"}})
    src = Path(args.home).resolve()
    if not (src / "cr2.duckdb").is_file():
        raise SystemExit(f"{src} holds no warehouse; run `cr2 run` first (or pass --home)")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    reps = args.repeats or (1 if args.quick else 3)
    sys.path.insert(0, str(REPO))
    from tests.prefect_stack import PrefectStack, stop

    samples: dict[str, list[dict]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="cr2-bench-swap-") as tmp, beside_load(args.beside_load) as beside:
        stack = None
        try:
            if "server" in modes:
                stack = PrefectStack(Path(tmp) / "stack")
                stack.spawn("server", "server", "start", "--host", "127.0.0.1", "--port", str(stack.port))
                stack.wait_healthy()
            for i in range(reps):
                for mode in modes:
                    s = one_swap(src, Path(tmp) / f"{mode}-{i}", mode, stack)
                    samples[mode].append(s)
                    print(f"  {mode} {i + 1}/{reps}: end to end {s['end_to_end_s']:.1f} s (table at "
                          f"{s['table_written_s']:.1f} s, answered {s['after_table_s']:.2f} s later; recalibrate "
                          f"{s['recalibrate_wall_s']:.1f} s + swap {s['swap_lag_s']:.2f} s), p99 during "
                          f"{s['p99_during_ms']:.0f} ms, {s['failed']} failed of {s['requests']}, load "
                          f"{s['load_avg_before'][0]:.1f}", flush=True)
        finally:
            if stack is not None:
                stop(stack.procs)
    tgt = {"server": target("<=", 15, "≤ 15 s"), "ephemeral": target("<=", 20, "≤ 20 s")}
    label = {"server": "Prefect server running", "ephemeral": "no server (one temporary API server)"}
    figures = []
    for m in modes:
        runs = samples[m]
        figures += [
            figure(f"{m}.end_to_end_s", f"new states → recalibrate → live server answers with the new table, "
                   f"{label[m]}", [r["end_to_end_s"] for r in runs], "s", tgt[m]),
            figure(f"{m}.recalibrate_wall_s", f"{m}: `cr2 recalibrate` alone", [r["recalibrate_wall_s"] for r in runs], "s"),
            figure(f"{m}.table_written_s", f"{m}: recalibrate started → the new table committed (the version file)",
                   [r["table_written_s"] for r in runs], "s"),
            figure(f"{m}.after_table_s", f"{m}: the new table committed → the first answer decided by it (the "
                   "server's poll and load)", [r["after_table_s"] for r in runs], "s"),
            figure(f"{m}.swap_lag_s", f"{m}: first answer of the new version − the command's exit (negative: swapped while the command still evaluates)",
                   [r["swap_lag_s"] for r in runs], "s"),
            figure(f"{m}.p99_before_ms", f"{m}: /route p99 before the change, {CLIENTS} clients",
                   [r["p99_before_ms"] for r in runs], "ms"),
            figure(f"{m}.p99_during_ms", f"{m}: /route p99 during the swap window, {CLIENTS} clients",
                   [r["p99_during_ms"] for r in runs], "ms"),
            figure(f"{m}.failed", f"{m}: failed /route requests", [r["failed"] for r in runs], "",
                   target("<=", 0, "none")),
        ]
    loads = [r["load_avg_before"][0] for m in modes for r in samples[m]]
    write_result(beside_result("live_swap", beside), {
                               "home": str(src), "states": "far-rician", "clients": CLIENTS, "repeats": reps,
                               "beside_load": beside,
                               "load_avg_1m_during": {"min": min(loads, default=None), "max": max(loads, default=None)},
                               "figures": figures, "samples": samples})


if __name__ == "__main__":
    main()
