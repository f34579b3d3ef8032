"""`cr2 serve` at the encoder's ceiling: /route throughput and latency at 1, 16 and 64
concurrent clients, without and with length-bucketed micro-batching, for the fp32 and the int8 ONNX encoder,
each beside the encoder's own batch throughput measured in the same run.

Needs a cr2 home with a deployed router (--warehouse HOME: prepared, trained, calibrated; `cr2 run` makes
one). Texts: real router texts of the default data set (question and choices), sampled with a fixed seed;
every request of a level sends the next text, and the server's embedding cache is off
(serving.embedding_cache_size = 0), so every request is embedded: the numbers are the encoder path's, not
the cache's.

Per encoder backend (onnx = fp32, onnx-int8):
- the ceiling: the encoder alone (same backend, same threads as the server) embeds --ceiling texts in
  batches of --batch, sorted by length (its best case), in this process with no server running; measured
  before and after that backend's server runs, the mean is the ceiling;
- a fresh `cr2 serve` process per setting (serving.batch_max_size 1 = no batching, or --batch with
  --wait-ms), serving.max_concurrency = 64 so batches can form; closed-loop clients (asyncio + httpx, one
  process on the same machine) each send one POST /route at a time at λ = 1, distance 80 m, until
  --requests requests or --seconds seconds per level.
Reported: req/s, p50 / p99, the ratio route / ceiling, the same ratio per CPU second (requests per server
CPU-second ÷ texts per encoder CPU-second: robust to a machine shared with other jobs), the server's and the
clients' CPU seconds and the 1-minute load average per level; the int8 encoder's routing agreement with fp32 (same chosen model, same
local/defer) on the ceiling texts.

Targets: /route at 16 and 64 clients ≥ 80 % of the ceiling; p99 ≤ 3 × p50 below saturation (1 client);
batching faster than no batching at ≥ 16 clients.

The measured ceiling above is the encoder's own batch path, which the server can beat (its micro-batches and
threads differ), so it is not an upper bound. Beside it, a ceiling from first principles, measured in the same
run: the encoder's FLOPs per served text (its layer shapes × each text's token count: 2·L·(4h² + 2h·d_ff) +
4·L²·h per layer, padding excluded, so a lower bound on the work) and the machine's peak, a GEMM on all cores
(fp32 in torch; int8 with onnxruntime's MatMulInteger for the int8 encoder, whose matmuls are int8). Peak ÷
FLOPs per text is an upper bound on texts/s, and every served rate is reported as a fraction of it, with a
check that the fraction is ≤ 1.
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

from _common import fmt, figure, parse_args, quantile, start_serve, target, write_result

CLIENTS = (1, 16, 64)
RATIO_TARGET, TAIL_TARGET = 0.8, 3.0
BACKENDS = {"fp32": "onnx", "int8": "onnx-int8"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _texts(n: int) -> list[str]:
    """n real router texts of the default data set, shuffled (fixed seed): the sample is drawn benchmark by
    benchmark, and the ceiling's texts must be the same mixture as the served ones."""
    import numpy as np

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_device import _sample_texts

    from cr2.config import load_config

    texts = _sample_texts(load_config(), n, seed=1)
    return [texts[i] for i in np.random.default_rng(1).permutation(len(texts))]


def _cpu_s(pid: int) -> float:
    """user + system CPU seconds of process `pid` (and its reaped children) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


async def _load(port: int, clients: int, texts: list[str], max_requests: int, max_seconds: float) -> dict:
    import httpx

    lat, errors, counter = [], [], {"sent": 0}
    url = f"http://127.0.0.1:{port}/route"
    deadline = time.perf_counter() + max_seconds

    async def client(http: httpx.AsyncClient) -> None:
        while counter["sent"] < max_requests and time.perf_counter() < deadline:
            i = counter["sent"]
            counter["sent"] += 1
            body = {"query": texts[i % len(texts)], "lam": 1.0, "distance_m": 80.0}
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
    async with httpx.AsyncClient(timeout=120.0, limits=limits) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        wall = time.perf_counter() - t0
    return {"requests": len(lat), "seconds": wall, "rps": len(lat) / wall, "p50_ms": quantile(lat, 0.5),
            "p99_ms": quantile(lat, 0.99), "max_ms": max(lat), "errors": len(errors), "error_examples": errors[:3]}


def _serve(home: str, cfg_path: Path, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "CR2_HOME": home, "CR2_TORCH_THREADS": os.environ.get("CR2_TORCH_THREADS", "2")}
    return start_serve(["--config", str(cfg_path)], env, log, port)


def _ceiling(encoder, texts: list[str], batch: int) -> dict:
    """The encoder's own batch throughput on `texts` (sorted by length, batches of `batch`), and the embeddings."""
    from cr2.inputs.embed import embed_texts

    embed_texts(texts[:batch], batch_size=batch, progress=False, encoder=encoder,
                max_seq_length=encoder.max_seq_length)  # warm-up
    c0, t0 = time.process_time(), time.perf_counter()
    emb = embed_texts(texts, batch_size=batch, progress=False, encoder=encoder, max_seq_length=encoder.max_seq_length)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"texts": len(texts), "seconds": wall, "texts_per_s": len(texts) / wall, "cpu_s": cpu,
            "load_avg_1m": os.getloadavg()[0], "embeddings": emb}


def encoder_flops_per_text(encoder, texts: list[str]) -> dict:
    """FLOPs the encoder's transformer must do per text (matmuls and attention; padding, softmax, norms excluded),
    from its layer shapes and each text's token count — a lower bound on the work per served text."""
    import json

    import numpy as np

    cfg = json.loads((Path(encoder.path) / "config.json").read_text())  # the packaged model's published shapes
    h, d_ff, layers = int(cfg["hidden_size"]), int(cfg["intermediate_size"]), int(cfg["num_hidden_layers"])
    ids = encoder.tokenizer(texts, truncation=True, max_length=encoder.max_seq_length, padding=False)["input_ids"]
    n = np.array([len(x) for x in ids], dtype=float)
    per_text = layers * (2.0 * n * (4 * h * h + 2 * h * d_ff) + 4.0 * n * n * h)
    return {"hidden": h, "intermediate": d_ff, "layers": layers, "mean_tokens": float(n.mean()),
            "mean_flops": float(per_text.mean())}


def peak_flops(precision: str, seconds: float = 1.0, size: int = 1024) -> float:
    """The machine's matmul peak, FLOP/s (int8: integer ops/s), on all cores: the best of 5 timed GEMM batches."""
    import numpy as np

    threads = os.cpu_count() or 1
    rng = np.random.default_rng(0)
    if precision == "fp32":
        import torch

        old = torch.get_num_threads()
        torch.set_num_threads(threads)
        a = torch.from_numpy(rng.standard_normal((size, size), dtype=np.float32))
        b = torch.from_numpy(rng.standard_normal((size, size), dtype=np.float32))

        def gemm():
            torch.mm(a, b)
    else:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper

        graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["c"])], "gemm",
                                  [helper.make_tensor_value_info("a", TensorProto.UINT8, [size, size]),
                                   helper.make_tensor_value_info("b", TensorProto.INT8, [size, size])],
                                  [helper.make_tensor_value_info("c", TensorProto.INT32, [size, size])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        feed = {"a": rng.integers(0, 255, (size, size), dtype=np.uint8),
                "b": rng.integers(-127, 127, (size, size), dtype=np.int8)}
        onnx.checker.check_model(model)

        def gemm():
            sess.run(None, feed)
    gemm()  # warm-up
    best = 0.0
    for _ in range(5):
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds / 5:
            gemm()
            reps += 1
        best = max(best, 2.0 * size ** 3 * reps / (time.perf_counter() - t0))
    if precision == "fp32":
        torch.set_num_threads(old)
    return best


def _agreement(config, home: str, texts: list[str], emb32, emb8) -> dict:
    """How often the deployed router decides the same with int8 embeddings as with fp32 ones."""
    import numpy as np

    from cr2_cli.online import load_online_router

    router = load_online_router(config, home)
    alpha = config.grids.default_alpha
    same_model = same_place = 0
    for i, t in enumerate(texts):
        a = router.route(t, None, 1.0, alpha, 80.0, embedding=emb32[i : i + 1])
        b = router.route(t, None, 1.0, alpha, 80.0, embedding=emb8[i : i + 1])
        same_model += a["chosen_model"] == b["chosen_model"]
        same_place += a["accept_local"] == b["accept_local"]
    cos = np.sum(emb32 * emb8, axis=1)
    return {"n": len(texts), "chosen_model_agreement": same_model / len(texts),
            "local_defer_agreement": same_place / len(texts), "min_cosine": float(cos.min()),
            "mean_cosine": float(cos.mean())}


def main(argv=None) -> None:
    args = parse_args(__doc__, argv,
                      warehouse={"default": os.environ.get("CR2_HOME"),
                                 "help": "a cr2 home with a deployed router (default: $CR2_HOME)"},
                      config={"default": None, "help": "the config that home was built with (default: default)"},
                      requests={"type": int, "default": 1500, "help": "most requests per level (default 1500)"},
                      seconds={"type": float, "default": 20.0, "help": "most seconds per level (default 20)"},
                      batch={"type": int, "default": 32, "help": "serving.batch_max_size when batching (default 32)"},
                      wait_ms={"type": float, "default": 5.0, "help": "serving.batch_max_wait_ms (default 5)"},
                      ceiling={"type": int, "default": 256, "help": "texts the encoder ceiling embeds (default 256)"})
    if not args.warehouse:
        raise SystemExit("bench_serve needs a cr2 home with a deployed router: --warehouse HOME or $CR2_HOME")
    if args.quick:
        args.requests, args.seconds, args.ceiling = 200, 5.0, 64
    from cr2.config import load_config
    from cr2.inputs.embed import load_encoder
    from cr2_tasks.store import tool_dir

    config = load_config(args.config) if args.config else load_config()
    texts = _texts(2000)
    ceiling_texts = texts[-args.ceiling:]  # not sent to the servers
    base = Path(args.config).resolve() if args.config else None
    tmp = Path(tempfile.mkdtemp(prefix="cr2-bench-serve-"))
    threads = int(os.environ.get("CR2_TORCH_THREADS", "2"))
    runs, ceilings, figures, rows, emb = {}, {}, [], [], {}
    t_start, cpu_start = time.perf_counter(), os.times()
    for precision, backend in BACKENDS.items():
        enc = load_encoder(config.embedding.max_seq_length, num_threads=threads, backend=backend,
                           cache_dir=tool_dir(args.warehouse, "encoders"))
        before = _ceiling(enc, ceiling_texts, args.batch)
        emb[precision] = before.pop("embeddings")
        work = encoder_flops_per_text(enc, texts)  # over every text the servers are sent
        peak = peak_flops(precision)
        bound = peak / work["mean_flops"]  # texts/s no server on this machine can exceed
        print(f"{precision} first-principles ceiling: {peak / 1e9:.1f} G{'FLOP' if precision == 'fp32' else 'OP'}/s "
              f"÷ {work['mean_flops'] / 1e9:.2f} G per text ({work['mean_tokens']:.0f} tokens) = {bound:.1f} texts/s",
              flush=True)
        settings = {f"{precision}, no batching": 1, f"{precision}, batching ≤ {args.batch}": args.batch}
        for label, size in settings.items():
            cfg = tmp / f"serve-{precision}-{size}.yaml"
            extends = f"extends: {base}\n" if base else "extends: default\n"
            cfg.write_text(extends + f"embedding:\n  backend: {backend}\nserving:\n  batch_max_size: {size}\n"
                           f"  batch_max_wait_ms: {args.wait_ms}\n  embedding_cache_size: 0\n  max_concurrency: 64\n")
            port = _free_port()
            proc = _serve(args.warehouse, cfg, port, tmp / f"serve-{precision}-{size}.log")
            try:
                asyncio.run(_load(port, 4, texts, 16, 60.0))  # warm-up: lazy imports, first batches
                for c in CLIENTS:
                    la, cpu0, own0 = os.getloadavg()[0], _cpu_s(proc.pid), sum(os.times()[:2])
                    res = asyncio.run(_load(port, c, texts, args.requests, args.seconds))
                    res.update(load_avg_1m=la, server_cpu_s=_cpu_s(proc.pid) - cpu0,
                               client_cpu_s=sum(os.times()[:2]) - own0)
                    runs[f"{label} | {c}"] = res
                    print(f"{label}, {c} clients: {res['rps']:.2f} req/s, p50 {res['p50_ms']:.0f} ms, p99 "
                          f"{res['p99_ms']:.0f} ms, {res['errors']} errors ({res['requests']} requests, load {la:.1f}, "
                          f"server CPU {res['server_cpu_s']:.1f} s)", flush=True)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        after = _ceiling(enc, ceiling_texts, args.batch)
        after.pop("embeddings")
        ceil = (before["texts_per_s"] + after["texts_per_s"]) / 2
        ceil_cpu = (before["texts"] + after["texts"]) / (before["cpu_s"] + after["cpu_s"])  # texts per CPU second
        ceilings[precision] = {"before": before, "after": after, "texts_per_s": ceil, "texts_per_cpu_s": ceil_cpu,
                               "peak_per_s": peak, "work": work, "bound_texts_per_s": bound}
        figures.append(figure(f"{precision}.bound", f"{precision}: first-principles ceiling (GEMM peak on {os.cpu_count()} "
                              "cores ÷ encoder FLOPs per served text)", [bound], "texts/s"))
        print(f"{precision} encoder ceiling: {before['texts_per_s']:.2f} / {after['texts_per_s']:.2f} texts/s "
              f"(before / after; CPU {before['cpu_s']:.1f} / {after['cpu_s']:.1f} s)", flush=True)
        figures.append(figure(f"{precision}.ceiling", f"{precision} encoder alone, batches of {args.batch}: "
                              "throughput (the ceiling)", [before["texts_per_s"], after["texts_per_s"]], "texts/s"))
        for c in CLIENTS:
            un, ba = runs[f"{precision}, no batching | {c}"], runs[f"{precision}, batching ≤ {args.batch} | {c}"]
            for key, label, res in (("unbatched", "no batching", un), ("batched", "batching", ba)):
                k = f"{precision}.{key}.{c}"
                figures.append(figure(f"{k}.rps", f"/route {precision}, {label}, {c} clients", [res["rps"]], "req/s"))
                ratio = res["rps"] / ceil
                figures.append(figure(f"{k}.ratio", f"/route {precision}, {label}, {c} clients ÷ encoder ceiling",
                                      [ratio], "×", target(">=", RATIO_TARGET, "≥ 0.8") if c >= 16 else None))
                figures.append(figure(f"{k}.of_bound", f"/route {precision}, {label}, {c} clients ÷ first-principles "
                                      "ceiling", [res["rps"] / bound], "×", target("<=", 1.0, "≤ 1 (a true bound)")))
                # the same ratio per CPU second (requests per server CPU-s ÷ texts per encoder CPU-s): what a busy
                # machine does not change
                res["cpu_ratio"] = (res["requests"] / res["server_cpu_s"]) / ceil_cpu if res["server_cpu_s"] else None
                if res["cpu_ratio"] is not None:
                    figures.append(figure(f"{k}.cpu_ratio", f"/route {precision}, {label}, {c} clients ÷ encoder "
                                          "ceiling, per CPU second", [res["cpu_ratio"]], "×"))
                tail = res["p99_ms"] / res["p50_ms"]
                figures.append(figure(f"{k}.tail", f"/route {precision}, {label}, {c} clients: p99 ÷ p50", [tail],
                                      "×", target("<=", TAIL_TARGET, "≤ 3 (below saturation)") if c == 1 else None))
                rows.append([label if precision == "fp32" else f"{label} (int8)", c, res["requests"], fmt(res["rps"]),
                             fmt(ratio), fmt(res["cpu_ratio"]), fmt(res["p50_ms"]), fmt(res["p99_ms"]), fmt(tail), res["errors"],
                             fmt(res["server_cpu_s"]), f"{res['load_avg_1m']:.1f}"])
            if c >= 16:
                figures.append(figure(f"{precision}.batched_over_unbatched.{c}", f"/route {precision}, {c} clients: "
                                      "batching ÷ no batching throughput", [ba["rps"] / un["rps"]], "×",
                                      target(">=", 1.0, "> 1 (batching faster)")))
    agree = _agreement(config, args.warehouse, ceiling_texts, emb["fp32"], emb["int8"])
    figures.append(figure("int8.agreement", "int8 encoder: same chosen model as fp32 (λ = 1, 80 m)",
                          [agree["chosen_model_agreement"]], "fraction"))
    print(f"int8 vs fp32: chosen model agrees on {agree['chosen_model_agreement']:.3f}, local/defer on "
          f"{agree['local_defer_agreement']:.3f} of {agree['n']} texts", flush=True)
    cpu_end = os.times()
    write_result("serve", {
        "title": "`cr2 serve` /route against the encoder's ceiling (loopback, same run)",
        "quick": args.quick, "figures": figures,
        "tables": [{"title": f"/route, closed-loop clients, ≤ {args.requests} requests or {args.seconds:g} s per row; "
                             "ratio = req/s ÷ the same encoder's batch throughput measured in this run",
                    "columns": ["server", "clients", "requests", "req/s", "÷ ceiling", "÷ ceiling per CPU-s", "p50, ms", "p99, ms",
                                "p99 ÷ p50", "errors", "server CPU, s", "load avg"], "rows": rows},
                   {"title": "encoder ceiling (alone, batches of {}, sorted by length), texts/s".format(args.batch),
                    "columns": ["encoder", "before", "after", "mean", "texts per CPU-s", "CPU s (before, after)"],
                    "rows": [[p, fmt(c["before"]["texts_per_s"]), fmt(c["after"]["texts_per_s"]),
                              fmt(c["texts_per_s"]), fmt(c["texts_per_cpu_s"]),
                              f'{fmt(c["before"]["cpu_s"])}, {fmt(c["after"]["cpu_s"])}'] for p, c in ceilings.items()]}],
        "notes": ["One uvicorn process per setting; the load generator runs on the same machine (it takes CPU from "
                  "the server), and other jobs may share the machine: compare the ratios, measured in the same run, "
                  "rather than absolute numbers; each row records the load average and the server's CPU seconds.",
                  "The embedding cache is off (every request is embedded); texts are distinct within a level.",
                  "Batched requests share length-bucketed encoder calls; each decision's remaining steps (τ*, costs, "
                  "teacher, gate) still run per request, on serving.torch_threads torch threads."],
        "details": {"runs": runs, "ceilings": ceilings, "int8_agreement": agree, "warehouse": args.warehouse,
                    "wall_s": time.perf_counter() - t_start,
                    "bench_process_cpu_s": (cpu_end[0] - cpu_start[0]) + (cpu_end[1] - cpu_start[1])},
    })


if __name__ == "__main__":
    main()
