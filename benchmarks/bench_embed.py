"""Embedding throughput of the default set on this machine (all-MiniLM-L6-v2, CPU).

Embeds the router texts of every default query once with the shipped settings (batch 64, length-sorted
batches, max 256 tokens, all CPU threads); model loading is timed separately. Target: the default set
(21,501 queries) in ≤ 5 minutes on 2 cores.
"""
from __future__ import annotations

import os
import time

import torch

from _common import write_result


def main() -> None:
    from cr2.benchmarks import select_queries
    from cr2.config import load_config
    from cr2.embed import embed_texts, load_encoder, router_texts

    cfg = load_config()
    q = select_queries(cfg)
    texts = router_texts(list(q["question"]), [None if c is None or not len(c) else list(c) for c in q["choices"]])
    t0 = time.perf_counter()
    enc = load_encoder(cfg.embedding.max_seq_length, num_threads=os.cpu_count())
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    embed_texts(texts, batch_size=cfg.embedding.batch_size, max_seq_length=cfg.embedding.max_seq_length,
                progress=False, encoder=enc)
    dt = time.perf_counter() - t0
    write_result("embed", {
        "queries": len(texts), "torch_threads": torch.get_num_threads(), "batch_size": cfg.embedding.batch_size,
        "model_load_s": round(load_s, 2), "embed_s": round(dt, 1), "texts_per_s": round(len(texts) / dt, 1),
        "target_s": 300, "meets_target": dt <= 300,
    })


if __name__ == "__main__":
    main()
