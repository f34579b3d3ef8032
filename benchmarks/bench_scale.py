"""Scale: cr2's stages on a synthetic query set of 10k, 100k and 1M queries (pure library, no warehouse).

One subprocess per size (so each size's peak RSS is its own), each running the pipeline's stages after
`prepare`'s text encoder, through the same library functions the tasks call:

  generate    random unit embeddings clustered by topic (as cr2/evaluation/synthetic.py), four benchmarks, prompt
              and output lengths, and correctness simulated from a latent difficulty (IRT-style)
  splits      cr2.inputs.splits.assign_splits (stratified, seeded per query id)
  states      cr2.system.channel.sample_channel (one generator per query id, as the pipeline does)
  costs       cr2.system.channel.rates + cr2.system.cost.compute_costs (the config's pool, hardware, power, T0/E0)
  train       CR2Router.fit: teacher then gate — with --epochs (default 2) each, not the config's 20
  calibrate   CR2Router.calibrate on val over the default λ × α grids
  baselines   KNN (exact where it is affordable, and the opt-in approximate indexes: faiss IVF and HNSW) and
              the MLP router (--epochs)
  evaluate    CR² on the whole test split at 4 λ (on the grid) (accuracy, cost, false-acceptance risk, local rate); each
              KNN variant on a fixed sample of ≤ 10,000 test queries (exact KNN over 1M would be ≈ 55 TFLOP)

Time and peak RSS (ru_maxrss after each stage: a running maximum) per stage and size; the growth
exponent b of each stage from a least-squares fit of log t = a + b·log n; recall@k of each approximate
KNN index against the exact search on 1,000 test queries (exact neighbours by brute force for those).
Run once per size: `bench_scale.py --sizes 10000,100000,1000000` (default) — the 1M size needs ≈ 10 GB.
"""
from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from _common import fmt, figure, limit_threads, parse_args, target, write_result

HERE = Path(__file__).resolve().parent
LAMS_EVAL = (0.5, 1.0, 2.0, 8.0)
RECALL_QUERIES = 1000
KNN_EVAL_MAX = 10_000
EXACT_KNN_MAX_TRAIN = 200_000  # exact KNN routing is run up to this many train queries


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def generate(n: int, seed: int = 0):
    """Return (query_id, benchmark, subset, embedding, correct, prompt_tokens, output_tokens) for n queries."""
    import numpy as np

    rng = np.random.default_rng(seed)
    task = np.random.default_rng(12345)
    dim, n_topics = 384, 64
    centroids = task.standard_normal((n_topics, dim)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    topic_difficulty = 2.0 * task.standard_normal(n_topics)
    direction = task.standard_normal(dim).astype(np.float32)
    direction /= np.linalg.norm(direction)
    topic = rng.integers(0, n_topics, n)
    emb = np.empty((n, dim), dtype=np.float32)
    step = 100_000
    for s in range(0, n, step):  # in chunks: bounded float64 temporaries
        e = centroids[topic[s : s + step]] + (0.7 / math.sqrt(dim)) * rng.standard_normal((len(topic[s : s + step]), dim),
                                                                                         dtype=np.float32)
        emb[s : s + step] = e / np.linalg.norm(e, axis=1, keepdims=True)
    difficulty = topic_difficulty[topic] + math.sqrt(dim) * (emb @ direction) + 0.5 * rng.standard_normal(n)
    skill = np.array([-0.6, 0.2, 0.7, 1.2])
    correct = rng.random((n, 4)) < 1.0 / (1.0 + np.exp(-(skill[None, :] - difficulty[:, None])))
    benches = np.array(["mmlu", "bbh", "gpqa", "mbpp"])
    b_idx = rng.choice(4, size=n, p=[0.65, 0.28, 0.02, 0.05])
    benchmark = benches[b_idx]
    subset = np.char.add(benchmark, np.char.mod("-%d", topic % 8))
    query_id = np.char.add("q", np.arange(n).astype(str))
    prompt_tokens = np.maximum(8, rng.lognormal(np.log([60, 200, 150, 90])[b_idx], 0.5)).round()
    out_med = np.array([12, 40, 20, 110])[b_idx]
    output_tokens = np.maximum(1, rng.lognormal(np.log(out_med)[:, None] * np.ones((1, 4)), 0.5)).round()
    return query_id, benchmark, subset, emb, correct, prompt_tokens, output_tokens


def knn_only_worker(n: int, index: str) -> dict:
    """KNN at scale alone: generate, split, fit the approximate index (k = 100), recall vs exact, batch-1 time."""
    import numpy as np

    from cr2.config import load_config
    from cr2.core.data import RoutingSet
    from cr2.routers import get_router
    from cr2.routers.base import l2_normalise
    from cr2.inputs.splits import assign_splits

    cfg = load_config()
    stages, out = {}, {"n": n, "knn_only": True}

    def stage(name, fn):
        t0 = time.perf_counter()
        res = fn()
        stages[name] = {"seconds": time.perf_counter() - t0, "peak_rss_gb": _rss_gb(), "load_avg_1m": os.getloadavg()[0],
                        "capped": True}
        print(f"[{n:,}] {name}: {stages[name]['seconds']:.1f} s, peak RSS {stages[name]['peak_rss_gb']:.2f} GB, "
              f"load {stages[name]['load_avg_1m']:.1f}", flush=True)
        return res

    qid, bench, subset, emb, correct, _, _ = stage("generate", lambda: generate(n))
    split = stage("splits", lambda: assign_splits(qid, bench, subset, cfg.splits))
    model_ids = tuple(m.id for m in cfg.models)

    def part(name):
        idx = np.flatnonzero(split.mask(name))
        return RoutingSet(query_id=qid[idx], benchmark=bench[idx], embedding=emb[idx], correct=correct[idx],
                          cost=np.ones((len(idx), len(model_ids)), np.float32), model_ids=model_ids)

    train, dev, test = part("train"), part("dev"), part("test")
    del emb
    out["sizes"] = {"train": len(train), "dev": len(dev), "test": len(test)}
    r = stage(f"baselines: knn ({index}) fit", lambda: get_router("knn", index=index, k=100).fit(train, dev))
    q = l2_normalise(test.embedding[:RECALL_QUERIES])
    truth = stage(f"recall: exact top-100 of {len(q):,} queries",
                  lambda: np.argpartition(-(q @ r.train_embedding_.T), 99, axis=1)[:, :100])
    approx = r.ann_neighbours(q, 100)
    out["recall"] = {f"knn-{index}": {"k": 100, "recall": float(np.mean([len(set(a) & set(b)) / 100
                                                                           for a, b in zip(truth, approx)]))}}
    singles = [test.subset(np.array([i])) for i in range(200)]
    t0 = time.perf_counter()
    for one in singles:
        r.route(one, 1.0)
    out[f"knn-{index}"] = {"batch1_us": (time.perf_counter() - t0) / 200 * 1e6, "flops_per_query": r.flops_per_query(),
                           "k": 100}
    out["stages"], out["peak_rss_gb"] = stages, _rss_gb()
    return out


def worker(n: int, epochs: int, indexes: list[str], train_cap: int) -> dict:
    """Run every stage on n synthetic queries; return {stage: {seconds, peak_rss_gb}} and the outcomes."""
    import numpy as np

    from cr2.system.channel import rates, sample_channel
    from cr2.config import load_config
    from cr2.system.cost import compute_costs
    from cr2.core.data import RoutingSet
    from cr2.evaluation.metrics import accuracy, false_acceptance_risk, local_rate, mean_cost
    from cr2.routers import get_router
    from cr2.routers.base import l2_normalise
    from cr2.routers.cr2_router import CR2Router
    from cr2.inputs.splits import assign_splits

    cfg = load_config()
    stages, out = {}, {"n": n}

    def stage(name, fn, capped=False):
        t0 = time.perf_counter()
        res = fn()
        stages[name] = {"seconds": time.perf_counter() - t0, "peak_rss_gb": _rss_gb(), "load_avg_1m": os.getloadavg()[0],
                        "capped": capped}
        print(f"[{n:,}] {name}: {stages[name]['seconds']:.1f} s, peak RSS {stages[name]['peak_rss_gb']:.2f} GB, "
              f"load {stages[name]['load_avg_1m']:.1f}", flush=True)
        return res

    qid, bench, subset, emb, correct, ptok, otok = stage("generate", lambda: generate(n))
    split = stage("splits", lambda: assign_splits(qid, bench, subset, cfg.splits))
    states = stage("states", lambda: sample_channel(cfg.channel, qid))

    def costs():
        r_ul, r_dl = rates(states, cfg.communication)
        return compute_costs(ptok, otok, r_ul, r_dl, config=cfg).cost_norm.astype(np.float32)

    cost = stage("costs", costs)
    model_ids = tuple(m.id for m in cfg.models)

    def part(name):
        idx = np.flatnonzero(split.mask(name))
        return RoutingSet(query_id=qid[idx], benchmark=bench[idx], embedding=emb[idx], correct=correct[idx],
                          cost=cost[idx], model_ids=model_ids, distance_m=states.distance_m[idx])

    train, dev, val, test = (part(s) for s in ("train", "dev", "val", "test"))
    del emb
    out["sizes"] = {"train": len(train), "dev": len(dev), "val": len(val), "test": len(test)}
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    cr2 = CR2Router(cfg.teacher.model_copy(update={"epochs": epochs}), cfg.gate.model_copy(update={"epochs": epochs}),
                    alpha=cfg.grids.default_alpha, variant=cfg.routing.deferred_variant, num_threads=threads)
    capped = len(train) > train_cap
    if capped:  # a time budget, not a limit of cr2: train on a fixed random subset, 1 epoch; say so in the results
        pick = np.sort(np.random.default_rng(3).choice(len(train), size=train_cap, replace=False))
        cr2.teacher_spec = cr2.teacher_spec.model_copy(update={"epochs": 1})
        cr2.gate_spec = cr2.gate_spec.model_copy(update={"epochs": 1})
        out["train_capped"] = {"rows": train_cap, "epochs": 1}
        stage("train", lambda: cr2.fit(train.subset(pick), dev.subset(np.arange(min(len(dev), train_cap // 8)))),
              capped=True)
    else:
        stage("train", lambda: cr2.fit(train, dev))
    stage("calibrate", lambda: cr2.calibrate(val, lams=cfg.grids.lam.values(), alphas=cfg.grids.alpha,
                                             dist_id="synthetic", label_source="synthetic"))
    rng = np.random.default_rng(7)
    knn_rows = np.sort(rng.choice(len(test), size=min(KNN_EVAL_MAX, len(test)), replace=False))
    knn_test = test.subset(knn_rows)
    routers = {}
    variants = [i for i in indexes if i != "exact" or len(train) <= EXACT_KNN_MAX_TRAIN]
    knn_k = {"k": 100} if capped else {}  # above the cap: k fixed to what dev chose at 10k and 100k (100)
    for index in variants:
        routers[f"knn-{index}"] = stage(f"baselines: knn ({index}) fit",
                                        lambda index=index: get_router("knn", index=index, **knn_k).fit(train, dev),
                                        capped=capped)
    if not capped:
        routers["mlp"] = stage("baselines: mlp fit",
                               lambda: get_router("mlp", epochs=epochs, num_threads=threads).fit(train, dev))

    def evaluate_cr2():
        res = {}
        for lam in LAMS_EVAL:
            d = cr2.route(test, lam)
            proba = cr2.teacher_.predict_proba(test.embedding)
            res[lam] = {"accuracy": accuracy(test, d), "cost": mean_cost(test, d), "local": local_rate(d),
                        "risk": false_acceptance_risk(proba, test, d, lam)}
        return res

    out["cr2"] = stage("evaluate: cr2", evaluate_cr2)
    for name, r in routers.items():
        data = knn_test if name.startswith("knn") else test
        out[name] = stage(f"evaluate: {name}", lambda r=r, data=data: {
            lam: {"accuracy": accuracy(data, d), "cost": mean_cost(data, d)}
            for lam in LAMS_EVAL for d in [r.route(data, lam)]})
        if name.startswith("knn"):
            singles = [knn_test.subset(np.array([i])) for i in range(200)]
            t0 = time.perf_counter()
            for one in singles:
                r.route(one, 1.0)
            out[name]["batch1_us"] = (time.perf_counter() - t0) / len(singles) * 1e6
            out[name]["flops_per_query"] = r.flops_per_query()
            out[name]["k"] = int(r.k_)

    # recall@k of the approximate indexes against the exact search, on RECALL_QUERIES test queries
    q = l2_normalise(test.embedding[: RECALL_QUERIES])
    any_knn = next(r for k, r in routers.items() if k.startswith("knn"))
    base = any_knn.train_embedding_

    def exact_top(k):
        sims = q @ base.T
        part_idx = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        return part_idx

    out["recall"], truths = {}, {}
    for name, r in routers.items():
        if name.startswith("knn") and name != "knn-exact":
            k = int(r.k_)
            if k not in truths:
                truths[k] = stage(f"recall: exact top-{k} of {len(q):,} queries", lambda k=k: exact_top(k))
            truth = truths[k]
            approx = r.ann_neighbours(q, k)
            out["recall"][name] = {"k": k, "recall": float(np.mean([len(set(a) & set(b)) / k
                                                                    for a, b in zip(truth, approx)]))}
    out["stages"] = stages
    out["peak_rss_gb"] = _rss_gb()
    return out


def _fit_exponent(ns: list[int], ts: list[float]) -> float | None:
    pts = [(math.log(n), math.log(t)) for n, t in zip(ns, ts) if t > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def main(argv=None) -> None:
    args = parse_args(__doc__, argv,
                      sizes={"default": "10000,100000,1000000", "help": "comma-separated query counts"},
                      epochs={"type": int, "default": 2, "help": "teacher, gate and MLP epochs (default 2)"},
                      indexes={"default": "exact,ivf,hnsw", "help": "KNN indexes (exact only up to 200k train)"},
                      threads={"type": int, "default": 1, "help": "threads per worker (default 1: a shared machine)"},
                      **{"train-cap": {"type": int, "default": 200_000, "dest": "train_cap",
                                       "help": "above this many train rows: train 1 epoch on this many, no MLP, "
                                               "KNN k fixed (a time budget on a shared machine)"}},
                      worker={"type": int, "default": None, "help": argparse_hidden()},
                      **{"knn-only": {"action": "store_true", "dest": "knn_only", "help": argparse_hidden()},
                         "partial-log": {"default": None, "dest": "partial_log",
                                         "help": "N=LOG: record the stages a stopped size-N worker logged, then render"}},
                      out={"default": None, "help": argparse_hidden()})
    if args.worker is not None:
        limit_threads(args.threads)
        import torch

        torch.set_num_threads(args.threads)
        res = (knn_only_worker(args.worker, args.indexes.split(",")[0]) if args.knn_only
               else worker(args.worker, args.epochs, args.indexes.split(","), args.train_cap))
        Path(args.out).write_text(json.dumps(res, indent=1, default=float))
        return
    if args.partial_log:  # a size whose worker was stopped: keep the stages its log reports, marked partial
        import re

        n_txt, path = args.partial_log.split("=", 1)
        n = int(n_txt)
        pat = re.compile(r"^\[([\d,]+)\] (.+): ([\d.]+) s, peak RSS ([\d.]+) GB, load ([\d.]+)$")
        stages = {}
        for line in Path(path).read_text().splitlines():
            m = pat.match(line.strip())
            if m and int(m.group(1).replace(",", "")) == n:
                stages[m.group(2)] = {"seconds": float(m.group(3)), "peak_rss_gb": float(m.group(4)),
                                      "load_avg_1m": float(m.group(5)), "capped": "train" in m.group(2) or
                                      "knn" in m.group(2)}
        prev = HERE / "results" / "scale_runs.json"
        runs = json.loads(prev.read_text()) if prev.is_file() else {}
        runs[str(n)] = {"n": n, "partial": f"worker stopped after '{list(stages)[-1]}' (session deadline); stages "
                        f"from its log {path}", "stages": stages,
                        "peak_rss_gb": max(v["peak_rss_gb"] for v in stages.values()), "sizes": {}}
        prev.write_text(json.dumps(runs, indent=1))
        args.sizes = ""
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.quick:
        sizes = [s for s in (2_000, 10_000)]
    results, prior = [], {}
    prev = HERE / "results" / "scale_runs.json"
    if prev.is_file():  # earlier sizes (each is run once; a later run adds or replaces sizes)
        prior = {int(k): v for k, v in json.loads(prev.read_text()).items()}
    for n in sizes:
        out = HERE / "results" / f".scale_{n}.json"
        indexes = args.indexes if n < 1_000_000 else ",".join(i for i in args.indexes.split(",") if i != "hnsw")
        cmd = [sys.executable, str(Path(__file__)), "--worker", str(n), "--out", str(out), "--epochs", str(args.epochs),
               "--indexes", indexes, "--threads", str(args.threads), "--train-cap", str(args.train_cap)]
        print(f"== {n:,} queries", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": str(args.threads)}).returncode
        if rc != 0:
            prior[n] = {"n": n, "failed": f"exit {rc} after {time.perf_counter() - t0:.0f} s"}
            print(f"   FAILED (exit {rc})", flush=True)
            continue
        prior[n] = json.loads(out.read_text())
        out.unlink()
    if prev.is_file():  # another invocation may have added sizes meanwhile: keep them, ours win
        prior = {**{int(k): v for k, v in json.loads(prev.read_text()).items()}, **{n: prior[n] for n in sizes if n in prior}}
    prev.write_text(json.dumps({str(k): v for k, v in sorted(prior.items())}, indent=1))
    ok = {n: r for n, r in sorted(prior.items()) if "stages" in r}
    ns = list(ok)
    stage_names = list(dict.fromkeys(s for r in ok.values() for s in r["stages"]))
    figures, rows = [], []
    for s in stage_names:
        present = [n for n in ns if s in ok[n]["stages"]]
        ts = [ok[n]["stages"][s]["seconds"] for n in present]
        full = [(n, t) for n, t in zip(present, ts) if not ok[n]["stages"][s].get("capped")]  # same work per row
        b = _fit_exponent([n for n, _ in full], [t for _, t in full])
        for n, t in zip(present, ts):
            figures.append(figure(f"{s}.{n}.s", f"{s}, {n:,} queries", [t], "s"))
        if b is not None:
            figures.append(figure(f"{s}.exponent", f"{s}: growth exponent b (t ∝ n^b)", [b], ""))
        rows.append([s] + [(fmt(ok[n]["stages"][s]["seconds"]) + (" (capped)" if ok[n]["stages"][s].get("capped") else ""))
                           if s in ok[n]["stages"] else "—" for n in ns]
                    + [f"{b:.2f}" if b is not None else "—"])
    rows.append(["**peak RSS, GB**"] + [f"{ok[n]['peak_rss_gb']:.2f}" for n in ns] + [
        f"{_fit_exponent(ns, [ok[n]['peak_rss_gb'] for n in ns]):.2f}" if len(ns) > 1 else "—"])
    for n in ns:
        figures.append(figure(f"rss.{n}", f"peak RSS, {n:,} queries", [ok[n]["peak_rss_gb"]], "GB",
                              target("<=", 24.0, "≤ 24 GB (the machine)") if n >= 1_000_000 else None))
    knn_rows = []
    for n in ns:
        r = ok[n]
        for name in [k for k in r if k.startswith("knn-")]:
            rec = r.get("recall", {}).get(name)
            acc1 = r[name].get("1.0", r[name].get(1.0, {})).get("accuracy")
            knn_rows.append([f"{n:,}", f"{r['sizes']['train']:,}", name, r[name]["k"], fmt(r[name]["batch1_us"]),
                             f"{r[name]['flops_per_query']:,}", f"{rec['recall']:.3f}" if rec else "— (exact)",
                             f"{100 * acc1:.2f}" if acc1 is not None else "—"])
            if rec:
                figures.append(figure(f"recall.{name}.{n}", f"{name} recall@{rec['k']} vs exact, {n:,} queries",
                                      [rec["recall"]], "", target(">=", 0.95, "≥ 0.95 [cr2 decision]")))
            figures.append(figure(f"b1.{name}.{n}", f"{name} batch-1 route, {n:,} queries", [r[name]["batch1_us"]], "µs"))
    failed = {n: r["failed"] for n, r in prior.items() if "failed" in r}
    notes = [f"Each size ran once, in its own process, {args.threads} thread(s); the machine was shared (load average "
             "after each stage is in scale_runs.json) — the exponents, not the absolute times, are the result.",
             "train is 2 epochs of teacher and gate (the default run uses 20 each): its time is linear in epochs.",
             "(capped): above --train-cap train rows the stage did less work — train: 1 epoch on a fixed subset; "
             "KNN fit: k fixed instead of chosen on dev — so it is left out of the exponent fit; no MLP there."]
    if failed:
        notes.append("Failed sizes: " + ", ".join(f"{n:,}: {v}" for n, v in failed.items()))
    for n, r in ok.items():
        if r.get("partial"):
            notes.append(f"{n:,} queries: PARTIAL — {r['partial']}.")
    write_result("scale", {
        "title": "Synthetic 10k / 100k / 1M queries through the pure library",
        "quick": args.quick, "figures": figures,
        "tables": [{"title": "Seconds per stage (one run per size) and the fitted growth exponent b (t ∝ nᵇ)",
                    "columns": ["stage"] + [f"{n:,} queries" for n in ns] + ["b"], "rows": rows},
                   {"title": "KNN: exact vs approximate index (evaluated on ≤ 10,000 test queries; recall on 1,000)",
                    "columns": ["queries", "train", "router", "k", "batch 1, µs", "FLOPs/query", "recall@k vs exact",
                                "accuracy at λ=1, %"], "rows": knn_rows}],
        "notes": notes,
        "details": {"runs": {str(n): {k: v for k, v in r.items() if k != "stages"} for n, r in ok.items()}},
    })


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
