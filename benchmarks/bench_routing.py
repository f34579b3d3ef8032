"""Routing decision cost side by side on the same queries: the CR² gate and edge selector against the baselines.

What is timed (inference only; every router is first fitted with a few epochs — its weights do not change
its cost):
  cr2-gate   the device decision: s = gate.score(e, λ), τ* = table.tau(λ, α, fingerprint), accept(s, τ*)
  cr2-edge   the edge selector on a deferred query: p = teacher.predict_proba(e), deferred_choice(p, c, λ)
  cr2-route  CR2Router.route(batch, λ): both stages for every query (what the evaluation calls)
  knn, mlp, embedllm, llmrank   router.route(batch, λ): p̂ for every model, then argmax p̂ − λ·c; the same for every
             other learned baseline of the catalogue (the router study's candidates included)
at batch 1 (median over many single-query calls, each on the next query of one shared pool) and at
batch 1024 (time per query). Routers take turns inside every repeat, so drift in the machine's load
hits them alike. All run on --threads threads (torch and BLAS; default 1: a device decides one query at
a time, and on a shared 2-core machine a multi-threaded BLAS call at batch 1 mostly measures scheduler
contention). FLOPs are the counted ones (flops_per_query(), cr2.method.complexity convention).

Data: synthetic routing sets (cr2/evaluation/synthetic.py) with the default split sizes — 17,200 train queries
(train + dev of the default set), so KNN searches as many vectors as in the paper's setting — or, with
--warehouse HOME, the prepared train/dev/val/test splits of that warehouse.

Target: the gate decision ≥ 100× faster than KNN at batch 1 with the default train set.

Diagnostics (not shipped code; each is checked to give the same float32 scores as gate.score): the
gate with its float64 twin built once instead of on every call, and a numpy forward pass with the FiLM
(γ, β) of each λ cached — what a fix in cr2/method/gate.py would buy.
"""
from __future__ import annotations

import copy
import gc
import math
import time

from _common import fmt, figure, limit_threads, parse_args, target, write_result

TARGET_SPEEDUP = 100.0
BATCH = 1024
LAM = 1.0  # on the default calibrated grid (grids.lam.extra)


def _timed_calls(fn, indices) -> list[int]:
    """Return the ns of each call fn(i) (garbage collection paused, as timeit does)."""
    out = []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for i in indices:
            t0 = time.perf_counter_ns()
            fn(i)
            out.append(time.perf_counter_ns() - t0)
    finally:
        if gc_was:
            gc.enable()
    return out


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _data(args, cfg):
    """Return (train, dev, val, queries, source)."""
    if args.warehouse:
        from cr2_tasks.inputs import routing_args
        from cr2_warehouse.db import Warehouse
        from cr2_warehouse.routing_data import load_routing_sets

        with Warehouse(args.warehouse, read_only=True) as wh:
            sets = load_routing_sets(wh, tuple(m.id for m in cfg.models), **routing_args(cfg))
        return sets["train"], sets["dev"], sets["val"], sets["test"], f"warehouse {args.warehouse}"
    from cr2.evaluation.synthetic import make_routing_set

    n = args.n_train
    return (make_routing_set(n, seed=1), make_routing_set(max(n // 10, 200), seed=2),
            make_routing_set(max(n // 8, 500), seed=3), make_routing_set(2048, seed=4), "synthetic (cr2/evaluation/synthetic.py)")


def _quick_fit_kwargs(name: str, epochs: int, threads: int) -> dict:
    """Constructor arguments that fit router `name` with few epochs on `threads` threads: whatever of epochs (its own, or
    its MLP's / gate's) and num_threads its constructor takes."""
    import inspect

    from cr2.routers import router_class

    params = inspect.signature(router_class(name).__init__).parameters
    kwargs = {"epochs": epochs} if "epochs" in params else {}
    kwargs.update({part: {"epochs": epochs} for part in ("mlp", "gate") if part in params})
    if "num_threads" in params:
        kwargs["num_threads"] = threads
    return kwargs


def main(argv=None) -> None:
    args = parse_args(__doc__, argv,
                      threads={"type": int, "default": 1, "help": "torch and BLAS threads (default 1)"},
                      **{"n-train": {"type": int, "default": 17_200, "dest": "n_train",
                                     "help": "synthetic train-set size (default 17,200: the default set's train + dev)"},
                         "warehouse": {"default": None, "help": "use the prepared splits of this warehouse folder"}})
    limit_threads(args.threads)
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from cr2.config import load_config
    from cr2.crc import accept
    from cr2.routers import LEARNED_BASELINES, get_router
    from cr2.routers.cr2_router import CR2Router
    from cr2.method.routing import deferred_choice

    repeats = args.repeats or (3 if args.quick else 5)
    n_b1 = 100 if args.quick else 400  # single-query calls per repeat and router
    n_batch = 2 if args.quick else 3  # batch-1024 calls per repeat and router
    epochs = 1 if args.quick else 2

    cfg = load_config()
    train, dev, val, pool, source = _data(args, cfg)
    alpha = cfg.grids.default_alpha
    variant = cfg.routing.deferred_variant

    # ------------------------------------------------------------ fit (not timed)
    fit_s = {}
    t0 = time.perf_counter()
    cr2 = CR2Router(cfg.teacher.model_copy(update={"epochs": epochs}), cfg.gate.model_copy(update={"epochs": epochs}),
                    alpha=alpha, variant=variant, num_threads=args.threads).fit(train, dev)
    table = cr2.calibrate(val, lams=cfg.grids.lam.values(), alphas=cfg.grids.alpha, dist_id="bench",
                          label_source="synthetic" if not args.warehouse else cfg.labels.source)
    fit_s["cr2"] = time.perf_counter() - t0
    gate, teacher, fp = cr2.gate_, cr2.teacher_, cr2.gate_fingerprint_
    baselines = {}
    for name in LEARNED_BASELINES:
        kwargs = _quick_fit_kwargs(name, epochs, args.threads)
        t0 = time.perf_counter()
        baselines[name] = get_router(name, **kwargs).fit(train, dev)
        fit_s[name] = time.perf_counter() - t0
    torch.set_num_threads(args.threads)  # fitting contexts restore the previous count; make sure it holds

    # ------------------------------------------------------------ the shared queries
    n_pool = len(pool)
    singles = [pool.subset(np.array([i])) for i in range(n_pool)]
    emb1 = [np.ascontiguousarray(pool.embedding[i : i + 1]) for i in range(n_pool)]
    cost1 = [np.ascontiguousarray(pool.cost[i : i + 1]) for i in range(n_pool)]
    big = pool.subset(np.arange(min(BATCH, n_pool)))
    scores_pool = gate.score(pool.embedding, LAM)

    def gate_decision(e):
        s = gate.score(e, LAM)
        return accept(s, table.tau(LAM, alpha, fp))

    def edge_choice(e, c):
        return deferred_choice(teacher.predict_proba(e), c, LAM, variant)

    # diagnostics: the same float64 computation without rebuilding the twin per call, and a numpy forward pass
    twin = copy.deepcopy(gate).double().eval()
    with torch.no_grad():
        temperature = twin.temperature
    lam_t = torch.tensor([LAM], dtype=torch.float64)

    def twin_score(e):
        with torch.no_grad():
            x = torch.from_numpy(np.ascontiguousarray(e, dtype=np.float64))
            return torch.sigmoid(twin(x, lam_t) / temperature).T.numpy().astype(np.float32)[:, 0]

    numpy_score = _numpy_gate(gate, twin, LAM)
    teacher_twin = copy.deepcopy(teacher).double().eval()

    def teacher_twin_proba(e):
        with torch.no_grad():
            x = torch.from_numpy(np.ascontiguousarray(e, dtype=np.float64))
            return torch.sigmoid(teacher_twin(x)).numpy().astype(np.float32)

    routers = {
        "cr2-gate": {"what": "gate.score + table.tau + accept (device)", "flops": gate.flops_per_query(),
                     "params": gate.n_params(), "b1": lambda i: gate_decision(emb1[i]),
                     "batch": lambda: gate_decision(big.embedding)},
        "cr2-edge": {"what": "teacher.predict_proba + deferred argmax (edge)", "flops": teacher.flops_per_query(),
                     "params": teacher.n_params(), "b1": lambda i: edge_choice(emb1[i], cost1[i]),
                     "batch": lambda: edge_choice(big.embedding, big.cost)},
        "cr2-route": {"what": "CR2Router.route: gate and edge selector on every query",
                      "flops": gate.flops_per_query() + teacher.flops_per_query(),
                      "params": gate.n_params() + teacher.n_params(), "b1": lambda i: cr2.route(singles[i], LAM),
                      "batch": lambda: cr2.route(big, LAM)},
    }
    for name, r in baselines.items():
        routers[name] = {"what": f"{type(r).__name__}.route (p̂ for every model, argmax p̂ − λ·c)",
                         "flops": r.flops_per_query(), "params": r.n_params(),
                         "b1": (lambda rr: lambda i: rr.route(singles[i], LAM))(r),
                         "batch": (lambda rr: lambda: rr.route(big, LAM))(r)}
    diagnostics = {
        "diag: τ lookup + accept": {"what": "table.tau + accept on a precomputed score (part of cr2-gate)", "flops": 0,
                                    "params": 0, "b1": lambda i: accept(scores_pool[i : i + 1], table.tau(LAM, alpha, fp)),
                                    "batch": lambda: accept(scores_pool[:BATCH], table.tau(LAM, alpha, fp))},
        "diag: twin rebuild": {"what": "copy.deepcopy(gate).double() — what gate.score redoes on every call", "flops": 0,
                               "params": 0, "b1": lambda i: copy.deepcopy(gate).double().eval(),
                               "batch": lambda: copy.deepcopy(gate).double().eval()},
        "diag: gate, twin cached": {"what": "cr2-gate with the float64 twin built once (proposed fix)",
                                    "flops": gate.flops_per_query(), "params": gate.n_params(),
                                    "b1": lambda i: accept(twin_score(emb1[i]), table.tau(LAM, alpha, fp)),
                                    "batch": lambda: accept(twin_score(big.embedding), table.tau(LAM, alpha, fp))},
    }
    diagnostics["diag: edge, twin cached"] = {
        "what": "cr2-edge with the teacher's float64 twin built once (proposed fix)", "flops": teacher.flops_per_query(),
        "params": teacher.n_params(), "b1": lambda i: deferred_choice(teacher_twin_proba(emb1[i]), cost1[i], LAM, variant),
        "batch": lambda: deferred_choice(teacher_twin_proba(big.embedding), big.cost, LAM, variant)}
    if numpy_score is not None:
        diagnostics["diag: gate, numpy"] = {
            "what": "cr2-gate as a numpy float64 forward pass, FiLM (γ, β) cached per λ", "flops": gate.flops_per_query(),
            "params": gate.n_params(), "b1": lambda i: accept(numpy_score(emb1[i]), table.tau(LAM, alpha, fp)),
            "batch": lambda: accept(numpy_score(big.embedding), table.tau(LAM, alpha, fp))}
    agree = {"diag: gate, twin cached": int((twin_score(pool.embedding) == scores_pool).sum()),
             "diag: edge, twin cached": int((teacher_twin_proba(pool.embedding)
                                             == teacher.predict_proba(pool.embedding)).all(axis=1).sum())}
    if numpy_score is not None:
        agree["diag: gate, numpy"] = int((numpy_score(pool.embedding) == scores_pool).sum())
    everything = {**routers, **diagnostics}

    # ------------------------------------------------------------ timing
    for r in everything.values():  # warm-up: first calls pay for lazy imports and allocator growth
        for i in range(5):
            r["b1"](i)
        r["batch"]()
        r["b1_us"], r["batch_us"] = [], []
    offset = 0
    for rep in range(repeats):
        idx = [(offset + j) % n_pool for j in range(n_b1)]
        offset += n_b1
        for name, r in everything.items():
            r["b1_us"].append(_median(_timed_calls(r["b1"], idx)) / 1e3)
            r["batch_us"].append(_median(_timed_calls(lambda _: r["batch"](), range(n_batch))) / 1e3 / len(big))
        print(f"repeat {rep + 1}/{repeats}: " + ", ".join(f"{k} {fmt(r['b1_us'][-1])} µs" for k, r in routers.items()),
              flush=True)

    # ------------------------------------------------------------ figures
    knn = everything["knn"]
    figures = []
    for name, r in everything.items():
        figures.append(figure(f"{name}.b1_us", f"{name}: batch 1", r["b1_us"], "µs/query"))
        figures.append(figure(f"{name}.b1024_us", f"{name}: batch {len(big)}", r["batch_us"], "µs/query"))
        if name in routers and name != "knn" or name.startswith("diag: gate"):
            tgt = target(">=", TARGET_SPEEDUP, f"≥ {TARGET_SPEEDUP:g}×") if name == "cr2-gate" else None
            figures.append(figure(f"{name}.speedup_b1", f"{name}: KNN time ÷ its time, batch 1",
                                  [k / v for k, v in zip(knn["b1_us"], r["b1_us"])], "×", tgt,
                                  target_applies=args.n_train >= 17_000 or bool(args.warehouse)))
    rows = []
    for name, r in everything.items():
        b1 = figure("", "", r["b1_us"], "")
        bb = figure("", "", r["batch_us"], "")
        k1, kb = _median(knn["b1_us"]), _median(knn["batch_us"])
        rows.append([name, r["what"], f"{fmt(b1['median'])} [{fmt(b1['q1'])}–{fmt(b1['q3'])}]",
                     f"{fmt(bb['median'])} [{fmt(bb['q1'])}–{fmt(bb['q3'])}]",
                     f"{r['flops']:,}" if r["flops"] else "—", f"{r['params']:,}" if r["params"] else "—",
                     f"{k1 / b1['median']:.1f}×" if r["flops"] else "—",
                     f"{kb / bb['median']:.1f}×" if r["flops"] else "—",
                     f"{knn['flops'] / r['flops']:.1f}×" if r["flops"] else "—"])

    gate_b1 = _median(everything["cr2-gate"]["b1_us"])
    twin_b1 = _median(everything["diag: twin rebuild"]["b1_us"])
    notes = [
        f"Counted FLOPs: KNN {knn['flops']:,} vs gate {gate.flops_per_query():,} — "
        f"a {knn['flops'] / gate.flops_per_query():.0f}× "
        "ratio, so at equal arithmetic throughput the gate decision is about that much faster; beating it in wall time "
        "needs KNN to be memory bound (its train matrix no longer in cache) or the gate's per-call overhead to be near zero.",
        f"Of the gate decision's {fmt(gate_b1)} µs at batch 1, rebuilding the float64 twin (copy.deepcopy(gate).double(), "
        f"done inside every gate.score call) takes {fmt(twin_b1)} µs; the same scores with the twin built once take "
        f"{fmt(_median(everything['diag: gate, twin cached']['b1_us']))} µs "
        f"({agree['diag: gate, twin cached']}/{n_pool} scores identical to gate.score).",
    ]
    if numpy_score is not None:
        notes.append("A numpy forward pass (FiLM γ, β cached per λ) takes "
                     f"{fmt(_median(everything['diag: gate, numpy']['b1_us']))} µs "
                     f"({agree['diag: gate, numpy']}/{n_pool} scores identical): roughly the floor for one Python-level call.")
    notes.append("cr2-edge (TeacherSelector.predict_proba) deep-copies the 398k-parameter teacher on every call in the same "
                 f"way: {fmt(_median(everything['cr2-edge']['b1_us']))} µs at batch 1, "
                 f"{fmt(_median(everything['diag: edge, twin cached']['b1_us']))} µs with the twin built once "
                 f"({agree['diag: edge, twin cached']}/{n_pool} queries with identical p).")

    write_result("routing", {
        "title": "Routing decision cost, side by side",
        "quick": args.quick,
        "config": {"threads": args.threads, "repeats": repeats, "single_query_calls_per_repeat": n_b1,
                   "batch": len(big), "batch_calls_per_repeat": n_batch, "fit_epochs": epochs, "lam": LAM,
                   "alpha": alpha, "data": source, "n_train": len(train), "n_dev": len(dev), "n_val": len(val),
                   "n_queries": n_pool, "knn_k": int(baselines["knn"].k_), "deferred_variant": variant},
        "figures": figures,
        "tables": [{"title": f"Per-query decision cost (median [IQR] over {repeats} repeats, µs; {args.threads} thread(s), "
                             f"{len(train):,} train queries)",
                    "columns": ["router", "what runs", "batch 1, µs", f"batch {len(big)}, µs/query", "FLOPs/query",
                                "params", "KNN ÷ it, batch 1", f"KNN ÷ it, batch {len(big)}", "KNN ÷ it, FLOPs"],
                    "rows": rows}],
        "notes": notes,
        "details": {"fit_seconds": {k: round(v, 2) for k, v in fit_s.items()}, "scores_identical_to_gate_score": agree,
                    "threshold_table": {"n_lams": len(table.lams), "n_alphas": len(table.alphas), "n_calib": table.n_calib}},
    })


def _numpy_gate(gate, twin, lam):
    """Return e ↦ float32 gate scores at one λ from a numpy float64 forward pass (None without scipy)."""
    try:
        from scipy.special import erf
    except ImportError:
        return None
    import numpy as np
    import torch

    with torch.no_grad():
        sd = {k: v.detach().double().numpy().copy() for k, v in twin.state_dict().items()}
        film = twin.film(twin.psi(torch.tensor([lam], dtype=torch.float64))).numpy()[0]
        temperature = float(twin.temperature)
    h = twin.hidden
    gamma, beta = film[:h], film[h:]
    w1, b1 = np.ascontiguousarray(sd["w1.weight"].T), sd["w1.bias"]
    ln_w, ln_b, eps = sd["norm.weight"], sd["norm.bias"], twin.norm.eps
    w2, b2 = sd["w2.weight"][0], float(sd["w2.bias"][0])
    root2 = math.sqrt(2.0)

    def score(e):
        x = np.asarray(e, dtype=np.float64)
        mu = x.mean(axis=1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
        hid = (((x - mu) / np.sqrt(var + eps)) * ln_w + ln_b) @ w1 + b1
        ht = gamma * hid + beta
        margin = (0.5 * ht * (1.0 + erf(ht / root2))) @ w2 + b2
        return (1.0 / (1.0 + np.exp(-margin / temperature))).astype(np.float32)

    return score


if __name__ == "__main__":
    main()
