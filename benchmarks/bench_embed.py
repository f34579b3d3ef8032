"""Embedding throughput of the default set on this machine (all-MiniLM-L6-v2, CPU).

Embeds the router texts of every default query with the shipped settings (configs/default.yaml
`embedding`: the onnx backend, batch 32, length-sorted batches, max 256 tokens, all CPU threads unless
--threads), then the same texts with the torch backend (batch 64, its fastest) for comparison; model
loading is timed separately, with the ONNX export (cold, into an empty cache) and without it. Target: the
default set (21,501 queries) in ≤ 5 minutes on 2 cores. --quick embeds every 80th query (≈270 texts)
twice and projects the full-set time from the throughput; its target shows n/a.
"""
from __future__ import annotations

import os
import tempfile
import time

from _common import figure, parse_args, target, write_result

TARGET_S = 300


def main(argv=None) -> None:
    args = parse_args(__doc__, argv, threads={"type": int, "default": os.cpu_count(),
                                              "help": "torch threads (default: all CPUs, as `cr2 prepare`)"})
    import torch

    from cr2.inputs.datasets import select_queries
    from cr2.config import load_config
    from cr2.inputs.embed import embed_texts, load_encoder, router_texts

    repeats = args.repeats or (2 if args.quick else 1)
    cfg = load_config()
    q = select_queries(cfg)
    n_full = len(q)
    if args.quick:
        q = q.iloc[::80]
    texts = router_texts(list(q["question"]), [None if c is None or not len(c) else list(c) for c in q["choices"]])
    backend = cfg.embedding.backend
    other = "torch" if backend == "onnx" else "onnx"
    load_s, cached_load_s, embed_s, other_s = [], [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            t0 = time.perf_counter()
            load_encoder(cfg.embedding.max_seq_length, num_threads=args.threads, backend=backend, cache_dir=cache)
            load_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            enc = load_encoder(cfg.embedding.max_seq_length, num_threads=args.threads, backend=backend, cache_dir=cache)
            cached_load_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            embed_texts(texts, batch_size=cfg.embedding.batch_size, max_seq_length=cfg.embedding.max_seq_length,
                        progress=False, encoder=enc)
            embed_s.append(time.perf_counter() - t0)
            enc = load_encoder(cfg.embedding.max_seq_length, num_threads=args.threads, backend=other, cache_dir=cache)
            t0 = time.perf_counter()
            embed_texts(texts, batch_size=32 if other == "onnx" else 64, max_seq_length=cfg.embedding.max_seq_length,
                        progress=False, encoder=enc)
            other_s.append(time.perf_counter() - t0)
    rate = [len(texts) / s for s in embed_s]
    scope = "default set" if not args.quick else f"{len(texts)}-text sample"
    figures = [
        figure("embed_s", f"embed the {scope} ({len(texts):,} texts), {backend}", embed_s, "s",
               target("<=", TARGET_S, "≤ 300 s (5 min), full set"), target_applies=not args.quick),
        figure("texts_per_s", f"throughput, {backend}", rate, "texts/s"),
        figure(f"{other}_texts_per_s", f"throughput, {other} backend (comparison)",
               [len(texts) / s for s in other_s], "texts/s"),
        figure("speedup", f"speed-up: {other} time ÷ {backend} time", [o / e for o, e in zip(other_s, embed_s)], "×"),
        figure("model_load_s", f"model load, {backend}, empty export cache", load_s, "s"),
        figure("model_load_cached_s", f"model load, {backend}, export cached", cached_load_s, "s"),
    ]
    if args.quick:
        figures.append(figure("projected_full_s", f"projected time for the full set ({n_full:,} texts)",
                              [n_full / r for r in rate], "s"))
    write_result("embed", {
        "title": "MiniLM embedding throughput",
        "quick": args.quick,
        "config": {"queries": len(texts), "backend": backend, "torch_threads": torch.get_num_threads(),
                   "batch_size": cfg.embedding.batch_size,
                   "max_seq_length": cfg.embedding.max_seq_length, "repeats": repeats},
        "figures": figures,
    })


if __name__ == "__main__":
    main()
