"""`cr2 serve` under load on loopback: /route throughput and latency at 1, 16 and 64 concurrent clients,
without and with micro-batching of concurrent requests into one encoder call (serving.batch_max_size).

Needs a cr2 home with a deployed router (--warehouse HOME: prepared, trained, calibrated; `cr2 run` makes
one). For each setting a fresh `cr2 serve` process listens on 127.0.0.1; closed-loop clients (asyncio +
httpx, one process) each send one POST /route at a time, with real query texts of the default data set
at λ = 1, until --requests requests per setting or --seconds seconds have passed (whichever comes first;
both bounded). Reported: completed requests per second, p50 / p99 latency, errors, and the batcher's mean
batch size as seen in the server's decisions. Target: ≥ 200 req/s at p99 ≤ 100 ms.
"""
from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import CR2, REPO, fmt, figure, parse_args, quantile, target, write_result

CLIENTS = (1, 16, 64)
TARGET_RPS, TARGET_P99_MS = 200.0, 100.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _texts(n: int) -> list[str]:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_device import _sample_texts

    from cr2.config import load_config

    return _sample_texts(load_config(), n, seed=1)


async def _load(port: int, clients: int, texts: list[str], max_requests: int, max_seconds: float) -> dict:
    import httpx

    lat, errors, sent = [], [], 0
    url = f"http://127.0.0.1:{port}/route"
    deadline = time.perf_counter() + max_seconds

    async def client(c: int, http: httpx.AsyncClient) -> None:
        nonlocal sent
        i = c
        while sent < max_requests and time.perf_counter() < deadline:
            sent += 1
            body = {"query": texts[i % len(texts)], "lam": 1.0, "distance_m": 80.0}
            i += clients
            t0 = time.perf_counter()
            try:
                r = await http.post(url, json=body)
                ok = r.status_code == 200
            except httpx.HTTPError as exc:
                ok, r = False, exc
            lat.append((time.perf_counter() - t0) * 1e3)
            if not ok:
                errors.append(str(getattr(r, "status_code", r)))

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=60.0, limits=limits) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(c, http) for c in range(clients)))
        wall = time.perf_counter() - t0
    return {"requests": len(lat), "seconds": wall, "rps": len(lat) / wall, "p50_ms": quantile(lat, 0.5),
            "p99_ms": quantile(lat, 0.99), "max_ms": max(lat), "errors": len(errors), "error_examples": errors[:3]}


def _serve(home: str, cfg_path: Path, port: int, log: Path) -> subprocess.Popen:
    import httpx

    env = {**os.environ, "CR2_HOME": home, "CR2_TORCH_THREADS": os.environ.get("CR2_TORCH_THREADS", "2")}
    proc = subprocess.Popen([CR2, "serve", "--port", str(port), "--config", str(cfg_path)], env=env, cwd=REPO,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)
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


def main(argv=None) -> None:
    args = parse_args(__doc__, argv,
                      warehouse={"default": os.environ.get("CR2_HOME"),
                                 "help": "a cr2 home with a deployed router (default: $CR2_HOME)"},
                      config={"default": None, "help": "the config that home was built with (default: default)"},
                      requests={"type": int, "default": 1500, "help": "most requests per setting (default 1500)"},
                      seconds={"type": float, "default": 20.0, "help": "most seconds per setting (default 20)"},
                      batch={"type": int, "default": 32, "help": "serving.batch_max_size when batching (default 32)"},
                      wait_ms={"type": float, "default": 5.0, "help": "serving.batch_max_wait_ms (default 5)"})
    if not args.warehouse:
        raise SystemExit("bench_serve needs a cr2 home with a deployed router: --warehouse HOME or $CR2_HOME")
    if args.quick:
        args.requests, args.seconds = 200, 5.0
    texts = _texts(400)
    base = Path(args.config).resolve() if args.config else None
    tmp = Path(tempfile.mkdtemp(prefix="cr2-bench-serve-"))
    settings = {"no batching": 1, f"batching ≤ {args.batch}, {args.wait_ms:g} ms": args.batch}
    runs, figures, rows = {}, [], []
    for label, size in settings.items():
        cfg = tmp / f"serve-{size}.yaml"
        extends = f"extends: {base}\n" if base else "extends: default\n"
        cfg.write_text(extends + f"serving:\n  batch_max_size: {size}\n  batch_max_wait_ms: {args.wait_ms}\n")
        port = _free_port()
        proc = _serve(args.warehouse, cfg, port, tmp / f"serve-{size}.log")
        try:
            asyncio.run(_load(port, 4, texts, 40, 10.0))  # warm-up: lazy imports, first batches
            for c in CLIENTS:
                la = os.getloadavg()[0]
                res = asyncio.run(_load(port, c, texts, args.requests, args.seconds))
                res["load_avg_1m"] = la
                runs[f"{label} | {c}"] = res
                print(f"{label}, {c} clients: {res['rps']:.1f} req/s, p50 {res['p50_ms']:.1f} ms, p99 {res['p99_ms']:.1f} ms, "
                      f"{res['errors']} errors ({res['requests']} requests, load {la:.1f})", flush=True)
                key = f"{'batched' if size > 1 else 'unbatched'}.{c}"
                meets = c == 64 and size > 1
                figures.append(figure(f"{key}.rps", f"/route {label}, {c} clients: throughput", [res["rps"]], "req/s",
                                      target(">=", TARGET_RPS, f"≥ {TARGET_RPS:g} req/s") if meets else None))
                figures.append(figure(f"{key}.p50", f"/route {label}, {c} clients: p50", [res["p50_ms"]], "ms"))
                figures.append(figure(f"{key}.p99", f"/route {label}, {c} clients: p99", [res["p99_ms"]], "ms",
                                      target("<=", TARGET_P99_MS, f"≤ {TARGET_P99_MS:g} ms") if meets else None))
                rows.append([label, c, res["requests"], fmt(res["rps"]), fmt(res["p50_ms"]), fmt(res["p99_ms"]),
                             fmt(res["max_ms"]), res["errors"], f"{la:.1f}"])
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    write_result("serve", {
        "title": "`cr2 serve` /route under concurrent load (loopback)",
        "quick": args.quick, "figures": figures,
        "tables": [{"title": f"/route, closed-loop clients, ≤ {args.requests} requests or {args.seconds:g} s per row",
                    "columns": ["server", "clients", "requests", "req/s", "p50, ms", "p99, ms", "max, ms", "errors",
                                "load avg"], "rows": rows}],
        "notes": ["One uvicorn process; the load generator runs on the same machine (it takes CPU from the server).",
                  "Batched requests share one encoder call; each decision's remaining steps (τ*, costs, teacher, gate) "
                  "still run per request."],
        "details": {"runs": runs, "warehouse": args.warehouse},
    })


if __name__ == "__main__":
    main()
