"""Safety load test of `cr2 serve` on loopback: a bounded mix of good and hostile requests must get no 5xx.
(The throughput benchmark is bench_serve.py.)

A child process serves the real HTTP app (cr2_cli/serve/) around a real OnlineRouter — the MiniLM
encoder, the Qwen token counter, a CR² teacher and gate fitted for one epoch on synthetic routing sets
(cr2/evaluation/synthetic.py) and their CRC threshold table — with fake OpenAI-compatible model endpoints (in the
same child). The parent sends `--requests` requests from `--clients` concurrent clients, in a fixed
rotation:
  route        POST /route, λ on the grid                                  → 200
  chat         POST /v1/chat/completions (forwarded)                        → 200
  stream       the same with stream: true (server-sent events)              → 200
  nan-lambda   /route with λ = NaN                                          → 422
  blank        /route with a whitespace-only query                          → 422
  off-grid     /route with an uncalibrated λ                                → 400
  huge         a 2 MiB body                                                 → 413
  text-plain   a cross-site text/plain POST                                 → 415
  bad-host     a DNS-rebinding Host header                                  → 400
  bad-messages chat with `messages: 5`                                      → 422
and, meanwhile, GET /health once every 50 ms. Figures: 5xx answers (target 0), answers other than the
expected status (target 0), throughput, latency of /route and of /health under load (decisions run
off the event loop, so /health stays fast). The run is bounded: at most --requests requests and
--max-seconds of sending; the server listens on 127.0.0.1 only.
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from _common import REPO, figure, parse_args, target, write_result

QUESTIONS = ["What is the capital of France?", "Write a function that reverses a string.",
             "Which planet has the most moons?", "Solve 12 * 17.", "Explain the Doppler effect in one sentence."]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ the server (child process)
def serve_child(port: int, max_concurrency: int) -> None:
    import contextlib
    import threading

    import uvicorn

    from cr2.config import load_config
    from cr2.inputs.embed import load_encoder
    from cr2.routers.cr2_router import CR2Router
    from cr2.inputs.tokenizer import qwen_token_counter
    from cr2_cli.serve import create_app
    from cr2_tasks.store import tool_dir
    from cr2.deploy.deployment import OnlineRouter
    from cr2.evaluation.synthetic import make_routing_set
    from tests.serve_helpers import fake_model_endpoint, running

    cfg = load_config()
    cr2 = CR2Router(cfg.teacher.model_copy(update={"epochs": 1}), cfg.gate.model_copy(update={"epochs": 1}),
                    alpha=cfg.grids.default_alpha, variant=cfg.routing.deferred_variant, num_threads=1)
    cr2.fit(make_routing_set(2000, seed=1), make_routing_set(400, seed=2))
    cr2.calibrate(make_routing_set(1000, seed=3), lams=cfg.grids.lam.values(), alphas=cfg.grids.alpha,
                          dist_id=cfg.channel.distribution.dist_id, label_source="synthetic")
    home = Path(os.environ.get("CR2_HOME", REPO / "var"))
    router = OnlineRouter(config=cfg, router=cr2, version=1, dist=cfg.channel.distribution, cost_config=cfg,
                          encoder=load_encoder(cfg.embedding.max_seq_length, backend=cfg.embedding.backend,
                                               cache_dir=tool_dir(home, "encoders")),
                          counter=qwen_token_counter(tool_dir(home, "tokenizers")), _lock=threading.Lock())
    router.route(QUESTIONS[0], None, 2.0, cfg.grids.default_alpha)  # warm up
    with contextlib.ExitStack() as stack:
        endpoints = {m.id: stack.enter_context(running(fake_model_endpoint(m.id))) + "/v1" for m in cfg.models}
        cfg = cfg.model_copy(update={"serving": cfg.serving.model_copy(update={
            "endpoints": endpoints, "max_concurrency": max_concurrency})})
        app = create_app(cfg, str(home), router=router)
        print("ready", flush=True)
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="error")


# ------------------------------------------------------------------ the load (parent process)
def _requests(n: int) -> list[tuple[str, str, dict, bytes, int]]:
    """(kind, path, headers, body, expected status) in a fixed rotation."""
    j = {"content-type": "application/json"}
    route = lambda q, lam: json.dumps({"query": q, "lam": lam}).encode()  # noqa: E731
    chat = lambda q, **kw: json.dumps({"model": "cr2", "messages": [{"role": "user", "content": q}],  # noqa: E731
                                       "cr2_lam": 2.0, **kw}).encode()
    rotation = [
        ("route", "/route", j, None, 200), ("chat", "/v1/chat/completions", j, "chat", 200),
        ("route", "/route", j, None, 200), ("stream", "/v1/chat/completions", j, "stream", 200),
        ("nan-lambda", "/route", j, b'{"query": "q", "lam": NaN}', 422),
        ("route", "/route", j, None, 200), ("blank", "/route", j, b'{"query": "   ", "lam": 2.0}', 422),
        ("off-grid", "/route", j, b'{"query": "q", "lam": 0.3712}', 400),
        ("huge", "/route", j, b'{"query": "' + b"x" * (2 << 20) + b'", "lam": 2.0}', 413),
        ("text-plain", "/v1/chat/completions", {"content-type": "text/plain", "origin": "https://evil.example"},
         b"{}", 403),
        ("bad-host", "/route", {**j, "host": "rebind.example"}, b"{}", 400),
        ("bad-messages", "/v1/chat/completions", j, b'{"messages": 5}', 422),
        ("route", "/route", j, None, 200), ("chat", "/v1/chat/completions", j, "chat", 200),
    ]
    out = []
    for i in range(n):
        kind, path, headers, body, expect = rotation[i % len(rotation)]
        q = QUESTIONS[i % len(QUESTIONS)] + f" ({i})"
        if body is None:
            body = route(q, 2.0)
        elif body == "chat":
            body = chat(q)
        elif body == "stream":
            body = chat(q, stream=True)
        out.append((kind, path, headers, body, expect))
    return out


async def _load(base: str, n: int, clients: int, max_seconds: float) -> dict:
    import httpx

    todo = _requests(n)
    results: list[tuple[str, int, int, float]] = []
    health: list[float] = []
    stop = asyncio.Event()
    t_end = time.monotonic() + max_seconds

    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        async def worker(k: int) -> None:
            for i in range(k, len(todo), clients):
                if time.monotonic() > t_end:
                    return
                kind, path, headers, body, expect = todo[i]
                t0 = time.perf_counter()
                try:
                    r = await client.post(path, content=body, headers=headers)
                    status = r.status_code
                except httpx.HTTPError:
                    status = 599  # no answer at all counts as a server failure
                results.append((kind, status, expect, time.perf_counter() - t0))

        async def probe() -> None:
            while not stop.is_set():
                t0 = time.perf_counter()
                r = await client.get("/health")
                if r.status_code == 200:
                    health.append(time.perf_counter() - t0)
                await asyncio.sleep(0.05)

        prober = asyncio.create_task(probe())
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(clients)))
        wall = time.perf_counter() - t0
        stop.set()
        await prober
    return {"results": results, "health": health, "wall_s": wall}


def main(argv=None) -> None:
    args = parse_args(__doc__, argv, **{
        "requests": {"type": int, "default": None, "help": "requests to send (default 1,400; quick: 280)"},
        "clients": {"type": int, "default": 16, "help": "concurrent clients (default 16)"},
        "max-concurrency": {"type": int, "default": 8, "dest": "max_concurrency",
                            "help": "serving.max_concurrency of the server (default 8)"},
        "max-seconds": {"type": float, "default": 300.0, "dest": "max_seconds", "help": "stop sending after this"},
        "serve-child": {"type": int, "default": None, "dest": "serve_child", "help": argparse_hidden()},
    })
    if args.serve_child:
        return serve_child(args.serve_child, args.max_concurrency)
    n = args.requests or (280 if args.quick else 1400)
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, __file__, "--serve-child", str(port), "--max-concurrency",
                              str(args.max_concurrency)], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"the server did not start (got {line!r})")
        base = f"http://127.0.0.1:{port}"
        import httpx

        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the server did not answer /health")
            time.sleep(0.1)
        out = asyncio.run(_load(base, n, args.clients, args.max_seconds))
    finally:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
    res = out["results"]
    by_kind: dict[str, dict] = {}
    for kind, status, expect, secs in res:
        k = by_kind.setdefault(kind, {"n": 0, "statuses": {}, "expected": expect})
        k["n"] += 1
        k["statuses"][str(status)] = k["statuses"].get(str(status), 0) + 1
    n5xx = sum(1 for _, s, _, _ in res if s >= 500)
    unexpected = sum(1 for _, s, e, _ in res if s != e)
    route_ms = [1000 * s for kind, status, _, s in res if kind == "route" and status == 200]
    health_ms = [1000 * s for s in out["health"]] or [float("nan")]
    figures = [
        figure("server_errors", "5xx answers", [n5xx], "answers", target("<=", 0)),
        figure("unexpected_status", "answers other than the expected status", [unexpected], "answers",
               target("<=", 0)),
        figure("throughput", f"requests answered per second ({args.clients} clients)", [len(res) / out["wall_s"]],
               "req/s"),
        figure("route_latency", "POST /route latency under load", route_ms, "ms"),
        figure("health_latency", "GET /health latency under load", health_ms, "ms", target("<=", 250.0)),
    ]
    write_result("serve_safety", {"quick": bool(args.quick), "requests": len(res), "clients": args.clients,
                           "max_concurrency": args.max_concurrency, "wall_s": round(out["wall_s"], 2),
                           "by_kind": by_kind, "figures": figures})
    if n5xx:
        raise SystemExit(f"{n5xx} answers were 5xx")


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
