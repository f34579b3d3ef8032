"""The device decision, as a device makes it: one query at a time, one thread.

Three parts, all at batch 1 on --threads threads (default 1):

A. The gate alone against KNN, in the same process and interleaved (so load drift hits both alike), on
   the default-size synthetic set (17,200 train queries, cr2/evaluation/synthetic.py; a 2-epoch CR² router — the
   weights do not change the cost): KNN (KNNRouter.route), the torch gate (gate.score + τ lookup + accept,
   what the evaluation runs), the exported ONNX gate through cr2.deploy.runtime (DeviceGate.decide: input checks,
   τ lookup, onnxruntime), the raw onnxruntime session, and the fused NumPy gate (cr2.method.fused_gate, FiLM
   folded for the fixed λ; float64 and float32; τ*(λ; α) of the fixed operating point looked up once, and
   per call). Targets: ≤ 20 µs per decision; KNN time ÷ its time ≥ the counted-FLOP ratio (64×).
B. End to end: text → tokenise → MiniLM (torch, onnx, onnx-int8) → fused gate → τ* comparison, on real
   query texts of the default data set (a fixed sample across the four benchmarks); p50 and p99 of each.
C. With --warehouse HOME (a prepared, trained and calibrated cr2 home): what the int8 encoder changes.
   The test split's texts are embedded with onnx (fp32) and onnx-int8; the deployed gate, teacher and
   threshold table route both on the same labels and costs: largest embedding deviation, changed gate
   decisions and chosen models, and accuracy / mean cost / false-acceptance risk (risk judged by the
   teacher on the fp32 embeddings, so only the decisions differ) at each (λ, α) of the default grids.
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from _common import fmt, figure, limit_threads, parse_args, quantile, target, write_result, timed_us

LAM = 1.0  # on the calibrated λ grid (grids.lam.extra)
TARGET_US = 20.0
TARGET_RATIO = 64.0  # counted FLOPs, KNN ÷ gate, at the default train size (bench_routing)
BACKENDS = ("torch", "onnx", "onnx-int8")


def _choice_lists(column) -> list:
    """Choice lists as Python lists; None where a query has none (None, NA or NaN from pandas)."""
    import numpy as np

    return [list(c) if isinstance(c, (list, tuple, np.ndarray)) else None for c in column]


def _sample_texts(cfg, n: int, seed: int = 0) -> list[str]:
    """n router texts drawn evenly from the configured benchmarks (fixed seed)."""
    import numpy as np
    import pyarrow.parquet as pq

    from cr2.inputs.embed import router_texts

    per = max(1, n // len(cfg.enabled_benchmarks))
    rng = np.random.default_rng(seed)
    texts = []
    for name in cfg.enabled_benchmarks:
        spec = cfg.benchmarks[name]
        df = pq.read_table(cfg.data_path / spec.data_file).to_pandas()  # the definition's file unless overridden
        if spec.selected_subsets is not None:
            df = df[df["subset"].isin(spec.selected_subsets)]
        take = df.iloc[np.sort(rng.choice(len(df), size=min(per, len(df)), replace=False))]
        choices = take["choices"] if "choices" in take else [None] * len(take)
        texts += router_texts(list(take["question"]), _choice_lists(choices))
    return texts[:n]


def part_a(args, cfg, figures, tables, notes, details):
    import numpy as np
    import torch

    from cr2.crc import accept
    from cr2.deploy.export import export_gate
    from cr2.method.fused_gate import FusedGate
    from cr2.routers import get_router
    from cr2.routers.cr2_router import CR2Router
    from cr2.deploy.runtime import DeviceGate
    from cr2.evaluation.synthetic import make_routing_set

    alpha = cfg.grids.default_alpha
    train, dev, val, pool = (make_routing_set(args.n_train, seed=1), make_routing_set(max(args.n_train // 10, 200), seed=2),
                             make_routing_set(max(args.n_train // 8, 500), seed=3), make_routing_set(2048, seed=4))
    epochs = 1 if args.quick else 2
    cr2 = CR2Router(cfg.teacher.model_copy(update={"epochs": epochs}), cfg.gate.model_copy(update={"epochs": epochs}),
                    alpha=alpha, variant=cfg.routing.deferred_variant, num_threads=args.threads).fit(train, dev)
    table = cr2.calibrate(val, lams=cfg.grids.lam.values(), alphas=cfg.grids.alpha, dist_id="bench", label_source="synthetic")
    gate, fp = cr2.gate_, cr2.gate_fingerprint_
    knn = get_router("knn").fit(train, dev)
    torch.set_num_threads(args.threads)
    export_dir = Path(tempfile.mkdtemp(prefix="cr2-bench-device-")) / "export"
    export_gate(gate, table, export_dir)
    device = DeviceGate.load(export_dir, num_threads=args.threads)
    session = device._session
    fused64 = FusedGate.from_gate(gate, LAM, np.float64)
    fused32 = FusedGate.from_gate(gate, LAM, np.float32)
    tau = device.tau(LAM, alpha)
    assert tau == table.tau(LAM, alpha, fp)

    n = len(pool)
    singles = [pool.subset(np.array([i])) for i in range(n)]
    e32 = [np.ascontiguousarray(pool.embedding[i : i + 1]) for i in range(n)]
    v64 = [np.ascontiguousarray(pool.embedding[i], dtype=np.float64) for i in range(n)]
    v32 = [np.ascontiguousarray(pool.embedding[i], dtype=np.float32) for i in range(n)]
    lam1 = np.array([LAM], dtype=np.float64)
    ref = gate.score(pool.embedding, LAM)
    agree = {
        "onnx (DeviceGate.score)": int((device.score(pool.embedding, LAM) == ref).sum()),
        "fused float64 (batch)": int((fused64.score(pool.embedding) == ref).sum()),
        "fused float64 (score_one)": int(sum(fused64.score_one(v64[i]) == ref[i] for i in range(n))),
        "fused float32 (batch)": int((fused32.score(pool.embedding) == ref).sum()),
    }
    dec_ref = accept(ref, tau)
    same_decision = {
        "fused float64": int(sum((fused64.score_one(v64[i]) >= tau) == dec_ref[i] for i in range(n))),
        "fused float32": int(sum((fused32.score_one(v32[i]) >= tau) == dec_ref[i] for i in range(n))),
    }
    max_dev32 = float(np.abs(fused32.score(pool.embedding).astype(np.float64) - ref).max())

    thresholds = device.thresholds
    paths = {
        "knn": ("KNNRouter.route (exact, 17,200 train queries)", knn.flops_per_query(), lambda i: knn.route(singles[i], LAM)),
        "torch gate": ("gate.score + table.tau + accept (what the evaluation runs)", gate.flops_per_query(),
                       lambda i: accept(gate.score(e32[i], LAM), table.tau(LAM, alpha, fp))),
        "onnx runtime": ("cr2.deploy.runtime DeviceGate.decide(e, λ, α): checks, τ lookup, onnxruntime", gate.flops_per_query(),
                         lambda i: device.decide(e32[i], LAM, alpha)),
        "onnx session": ("onnxruntime session.run alone (no checks, no τ)", gate.flops_per_query(),
                         lambda i: session.run(None, {"embedding": e32[i], "lam": lam1})),
        "fused float64": ("FusedGate.score_one(e) ≥ τ* (λ, α fixed: τ* looked up once)", gate.flops_per_query(),
                          lambda i: fused64.score_one(v64[i]) >= tau),
        "fused float64 + τ lookup": ("FusedGate.score_one(e) ≥ thresholds.tau(λ, α) on every call", gate.flops_per_query(),
                                     lambda i: fused64.score_one(v64[i]) >= thresholds.tau(LAM, alpha)),
        "fused float32": ("FusedGate (float32 weights).score_one(e) ≥ τ*", gate.flops_per_query(),
                          lambda i: fused32.score_one(v32[i]) >= tau),
    }
    repeats = args.repeats or (3 if args.quick else 7)
    calls = 200 if args.quick else args.calls
    samples = {k: {"median": [], "p99": [], "all": []} for k in paths}
    loads = []
    for _, _, fn in paths.values():  # warm-up
        for i in range(20):
            fn(i)
    off = 0
    for rep in range(repeats):
        idx = [(off + j) % n for j in range(calls)]
        off += calls
        loads.append(os.getloadavg()[0])
        for k, (_, _, fn) in paths.items():
            us = timed_us(fn, idx)
            samples[k]["median"].append(quantile(us, 0.5))
            samples[k]["p99"].append(quantile(us, 0.99))
        print(f"A repeat {rep + 1}/{repeats} (load {loads[-1]:.1f}): "
              + ", ".join(f"{k} {fmt(v['median'][-1])} µs" for k, v in samples.items()), flush=True)

    knn_med = samples["knn"]["median"]
    rows = []
    for k, (what, flops, _) in paths.items():
        s = samples[k]
        tgt = target("<=", TARGET_US, f"≤ {TARGET_US:g} µs") if k in ("fused float64", "fused float32") else None
        figures.append(figure(f"a.{k}.p50_us", f"A gate alone: {k}, batch 1, p50", s["median"], "µs", tgt))
        figures.append(figure(f"a.{k}.p99_us", f"A gate alone: {k}, batch 1, p99", s["p99"], "µs"))
        if k != "knn":
            ratio = [a / b for a, b in zip(knn_med, s["median"])]
            tgt = (target(">=", TARGET_RATIO, f"≥ {TARGET_RATIO:g}× (counted FLOPs)")
                   if k in ("fused float64", "fused float32", "onnx runtime") else None)
            figures.append(figure(f"a.{k}.knn_ratio", f"A gate alone: KNN time ÷ {k} time, batch 1", ratio, "×", tgt))
        med = quantile(s["median"], 0.5)
        rows.append([k, what, fmt(med), fmt(quantile(s["p99"], 0.5)), f"{flops:,}",
                     f"{quantile(knn_med, 0.5) / med:.1f}×" if k != "knn" else "1×"])
    tables.append({"title": f"A. Gate decision at batch 1, {args.threads} thread(s): median over {repeats} repeats of "
                            f"{calls} calls each (load average during the run {min(loads):.1f}–{max(loads):.1f})",
                   "columns": ["path", "what runs", "p50, µs", "p99, µs", "FLOPs/query", "KNN ÷ it"], "rows": rows})
    notes.append(f"A: scores identical to gate.score (of {n}): " + ", ".join(f"{k} {v}" for k, v in agree.items())
                 + f"; float32 fused max |Δs| = {max_dev32:.2e}; same accept/defer decision as gate.score at (λ={LAM:g}, "
                 f"α={alpha:g}): " + ", ".join(f"{k} {v}/{n}" for k, v in same_decision.items()) + ".")
    details["a"] = {"agree_scores": agree, "same_decision": same_decision, "fused32_max_abs_score_diff": max_dev32,
                    "load_avg_1m": loads, "calls_per_repeat": calls, "repeats": repeats, "n_train": len(train),
                    "knn_k": int(knn.k_)}
    return fused64, tau


def part_b(args, cfg, fused, tau, figures, tables, notes, details, cache):
    import numpy as np

    from cr2.inputs.embed import embed_texts, load_encoder

    texts = _sample_texts(cfg, 60 if args.quick else args.texts)
    encoders = {b: load_encoder(cfg.embedding.max_seq_length, num_threads=args.threads, backend=b, cache_dir=cache)
                for b in BACKENDS}
    tok = encoders["onnx"].tokenizer
    lengths = [len(tok(t, truncation=True, max_length=cfg.embedding.max_seq_length)["input_ids"]) for t in texts]

    def decide(backend, t):
        e = embed_texts([t], max_seq_length=cfg.embedding.max_seq_length, progress=False, encoder=encoders[backend])
        return fused.score_one(np.ascontiguousarray(e[0], dtype=np.float64)) >= tau

    for b in BACKENDS:  # warm-up
        for t in texts[:3]:
            decide(b, t)
    times = {b: [] for b in BACKENDS}
    tok_us = []
    loads = []
    for i, t in enumerate(texts):  # backends take turns on every text
        if i % 40 == 0:
            loads.append(os.getloadavg()[0])
        t0 = time.perf_counter_ns()
        tok([t], truncation=True, max_length=cfg.embedding.max_seq_length)
        tok_us.append((time.perf_counter_ns() - t0) / 1e3)
        for b in BACKENDS:
            t0 = time.perf_counter_ns()
            decide(b, t)
            times[b].append((time.perf_counter_ns() - t0) / 1e6)
    emb = {b: embed_texts(texts, max_seq_length=cfg.embedding.max_seq_length, progress=False, encoder=encoders[b])
           for b in BACKENDS}
    dev_int8 = float(np.abs(emb["onnx-int8"] - emb["onnx"]).max())
    cos_int8 = float((emb["onnx-int8"] * emb["onnx"]).sum(axis=1).min())
    dev_onnx = float(np.abs(emb["onnx"] - emb["torch"]).max())
    rows = []
    for b in BACKENDS:
        ms = times[b]
        figures.append(figure(f"b.{b}.p50_ms", f"B end to end ({b}): text → decision, p50", [quantile(ms, 0.5)], "ms"))
        figures.append(figure(f"b.{b}.p99_ms", f"B end to end ({b}): text → decision, p99", [quantile(ms, 0.99)], "ms"))
        rows.append([b, fmt(quantile(ms, 0.5)), fmt(quantile(ms, 0.9)), fmt(quantile(ms, 0.99)), fmt(max(ms)),
                     fmt(quantile(times["torch"], 0.5) / quantile(ms, 0.5))])
    figures.append(figure("b.tokenise_us", "B tokenise one text, p50", [quantile(tok_us, 0.5)], "µs"))
    figures.append(figure("b.int8_max_dev", "B onnx-int8 vs onnx: largest |Δ| of an embedding coordinate", [dev_int8], ""))
    figures.append(figure("b.int8_min_cos", "B onnx-int8 vs onnx: lowest cosine similarity", [cos_int8], ""))
    tables.append({"title": f"B. Device decision end to end (tokenise + MiniLM + fused gate + τ*), batch 1, "
                            f"{args.threads} thread(s), {len(texts)} real query texts ({min(lengths)}–{max(lengths)} "
                            f"tokens, median {int(quantile(lengths, 0.5))}); load average {min(loads):.1f}–{max(loads):.1f}",
                   "columns": ["encoder backend", "p50, ms", "p90, ms", "p99, ms", "max, ms", "torch p50 ÷ it"],
                   "rows": rows})
    notes.append(f"B: tokenising one text takes {fmt(quantile(tok_us, 0.5))} µs (p50); the gate and τ* ≈ 0.01 ms — the "
                 "encoder is the decision's cost. onnx vs torch embeddings: max |Δ| "
                 f"{dev_onnx:.1e}; onnx-int8 vs onnx: max |Δ| {dev_int8:.2e}, lowest cosine {cos_int8:.5f}.")
    details["b"] = {"n_texts": len(texts), "token_lengths": {"min": min(lengths), "median": quantile(lengths, 0.5),
                                                             "max": max(lengths)},
                    "load_avg_1m": loads, "max_abs_dev_onnx_vs_torch": dev_onnx}
    return encoders


def part_c(args, cfg, encoders, figures, tables, notes, details):
    import numpy as np

    from cr2.inputs.embed import embed_texts, router_texts
    from cr2.evaluation.metrics import accuracy, evaluable_mask, false_acceptance_risk, local_rate, mean_cost
    from cr2.method.routing import route
    from cr2_cli.online import load_deployed_router
    from cr2_tasks.inputs import routing_args
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.routing_data import load_routing_sets

    home = args.warehouse
    router, _ = load_deployed_router(cfg, home)
    table, teacher, gate = router.threshold_table_, router.teacher_, router.gate_
    with Warehouse(home, read_only=True) as wh:
        test = load_routing_sets(wh, tuple(m.id for m in cfg.models), **routing_args(cfg),
                                 decision_cost=cfg.routing.decision_cost)["test"]
        q = wh.df("SELECT query_id, question, choices FROM queries")
    q = q.set_index("query_id").loc[list(test.query_id)]
    texts = router_texts(list(q["question"]), _choice_lists(q["choices"]))
    if cfg.evaluation.exclude_unsolvable:
        keep = evaluable_mask(test)
        test = test.subset(np.flatnonzero(keep))
        texts = [t for t, k in zip(texts, keep) if k]
    t0 = time.perf_counter()
    e32 = embed_texts(texts, batch_size=cfg.embedding.batch_size, max_seq_length=cfg.embedding.max_seq_length,
                      progress=False, encoder=encoders["onnx"])
    s32 = time.perf_counter() - t0
    t0 = time.perf_counter()
    e8 = embed_texts(texts, batch_size=cfg.embedding.batch_size, max_seq_length=cfg.embedding.max_seq_length,
                     progress=False, encoder=encoders["onnx-int8"])
    s8 = time.perf_counter() - t0
    stored_dev = float(np.abs(e32 - test.embedding).max())
    dev = float(np.abs(e8 - e32).max())
    proba_ref = teacher.predict_proba(e32)
    proba8 = teacher.predict_proba(e8)
    rows, changed_all = [], []
    lams = [lam for lam in (0.5, 1.0, 2.0, 8.0) if table.has_lam(lam)]
    for lam in lams:
        score_ref, score8 = gate.score(e32, lam), gate.score(e8, lam)
        for alpha in table.alphas:
            tau = table.tau(lam, alpha, table.gate_fingerprint)
            d_ref = route(score_ref, tau, proba_ref, test.decision_cost, lam, cfg.routing.deferred_variant)
            d8 = route(score8, tau, proba8, test.decision_cost, lam, cfg.routing.deferred_variant)
            flips = int((d_ref.extra["gate_accept"] != d8.extra["gate_accept"]).sum())
            changed = int((d_ref.chosen != d8.chosen).sum())
            changed_all.append(changed / len(test))
            m_ref = (accuracy(test, d_ref), mean_cost(test, d_ref), false_acceptance_risk(proba_ref, test, d_ref, lam))
            m8 = (accuracy(test, d8), mean_cost(test, d8), false_acceptance_risk(proba_ref, test, d8, lam))
            rows.append([f"{lam:g}", f"{alpha:g}", flips, changed, f"{100 * m_ref[0]:.2f} → {100 * m8[0]:.2f}",
                         f"{m_ref[1]:.4f} → {m8[1]:.4f}", f"{m_ref[2]:.4f} → {m8[2]:.4f} (α {alpha:g})",
                         f"{100 * local_rate(d_ref):.1f} → {100 * local_rate(d8):.1f}"])
            if lam == LAM and alpha == cfg.grids.default_alpha:
                figures.append(figure("c.changed_decisions", f"C onnx-int8: test queries routed differently (λ={lam:g}, "
                                      f"α={alpha:g}, of {len(test)})", [changed], "queries"))
                figures.append(figure("c.acc_delta_pp", "C onnx-int8: accuracy change (λ=1, default α)",
                                      [100 * (m8[0] - m_ref[0])], "pp"))
                figures.append(figure("c.cost_delta", "C onnx-int8: mean cost change (λ=1, default α)",
                                      [m8[1] - m_ref[1]], ""))
                figures.append(figure("c.risk_delta", "C onnx-int8: false-acceptance risk change (λ=1, default α)",
                                      [m8[2] - m_ref[2]], ""))
    figures.append(figure("c.max_dev", "C onnx-int8 vs onnx on the test split: largest |Δ| per coordinate", [dev], ""))
    figures.append(figure("c.embed_speedup", "C batch embedding of the test split: onnx time ÷ onnx-int8 time",
                          [s32 / s8], "×"))
    tables.append({"title": f"C. Routing effect of the onnx-int8 encoder on the test split of {home} ({len(test)} "
                            "evaluable queries; deployed gate, teacher and thresholds; same labels and costs); "
                            "fp32 → int8",
                   "columns": ["λ", "α", "gate flips", "chosen model changed", "accuracy, %", "mean cost",
                               "false-acceptance risk", "local rate, %"], "rows": rows})
    notes.append(f"C: re-embedding the test split with onnx reproduces the stored embeddings to {stored_dev:.1e}; "
                 f"onnx-int8 moves them by up to {dev:.2e}; {len(texts)} texts embedded in {s32:.1f} s (onnx) and "
                 f"{s8:.1f} s (onnx-int8). Over all {len(rows)} operating points, 0–{100 * max(changed_all):.1f} % of "
                 "the queries change model. Risk is judged by the teacher on the fp32 embeddings for both.")
    details["c"] = {"warehouse": str(home), "n_test": len(test), "stored_vs_recomputed_max_abs": stored_dev,
                    "embed_seconds": {"onnx": s32, "onnx-int8": s8}}


def keep_from_last_run(args, figures, tables, notes) -> None:
    """Parts not run this time (--parts) keep their figures, tables and notes from results/device.json."""
    import json

    from _common import RESULTS

    last = RESULTS / "device.json"
    ran_a = "a" in args.parts or "b" in args.parts
    skipped = [p for p in "abc" if (p not in args.parts and not (p == "a" and ran_a)) or (p == "c" and not args.warehouse)]
    if not skipped or not last.is_file():
        return
    old = json.loads(last.read_text())
    for p in skipped:
        figures += [f for f in old.get("figures", []) if f["key"].startswith(f"{p}.")
                    and not any(g["key"] == f["key"] for g in figures)]
        tables += [t for t in old.get("tables", []) if t["title"].startswith(f"{p.upper()}.")
                   and not any(u["title"].startswith(f"{p.upper()}.") for u in tables)]
        kept = [n for n in old.get("notes", []) if n.startswith(f"{p.upper()}:")]
        notes[:] = [n for n in notes if not n.startswith(f"{p.upper()} (")] + [
            n + f" (from the run of {old.get('measured_at', '?')})" if not n.endswith(")") else n for n in kept]


def main(argv=None) -> None:
    args = parse_args(__doc__, argv,
                      threads={"type": int, "default": 1, "help": "threads (default 1: a device decides alone)"},
                      **{"n-train": {"type": int, "default": 17_200, "dest": "n_train",
                                     "help": "synthetic KNN train-set size (default 17,200: the default set's train + dev)"},
                         "warehouse": {"default": None, "help": "a trained, calibrated cr2 home: measure the int8 "
                                                                "routing effect (part C)"},
                         "parts": {"default": "abc", "help": "which parts to run (default abc)"},
                         "texts": {"type": int, "default": 240, "help": "query texts in part B (default 240)"},
                         "calls": {"type": int, "default": 1000, "help": "batch-1 calls per repeat in part A"}})
    limit_threads(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    from cr2.config import load_config

    cfg = load_config()
    figures, tables, notes, details = [], [], [], {"threads": args.threads}
    from cr2_tasks.store import tool_dir
    from cr2_warehouse.db import default_home

    cache = tool_dir(default_home(), "encoders")  # the store's encoder folder ($CR2_CACHE, else the home's)
    encoders = None
    if "a" in args.parts or "b" in args.parts:
        fused, tau = part_a(args, cfg, figures, tables, notes, details)
    if "b" in args.parts:
        encoders = part_b(args, cfg, fused, tau, figures, tables, notes, details, cache)
    elif "c" in args.parts:
        from cr2.inputs.embed import load_encoder

        encoders = {b: load_encoder(cfg.embedding.max_seq_length, num_threads=args.threads, backend=b, cache_dir=cache)
                    for b in ("onnx", "onnx-int8")}
    if "c" in args.parts and args.warehouse:
        try:
            part_c(args, cfg, encoders, figures, tables, notes, details)
        except Exception as exc:  # parts A and B are still written
            import traceback

            traceback.print_exc()
            notes.append(f"C failed: {type(exc).__name__}: {exc}")
    elif "c" in args.parts:
        notes.append("C (routing effect of onnx-int8) needs --warehouse HOME; not run.")
    keep_from_last_run(args, figures, tables, notes)
    write_result("device", {"title": "Device decision latency: gate alone, end to end, int8 encoder",
                            "quick": args.quick, "figures": figures, "tables": tables, "notes": notes,
                            "details": details})


if __name__ == "__main__":
    main()
