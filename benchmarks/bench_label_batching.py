"""Batch sizing of the hf labeling backend under `batch_size: auto`, on CPU with a small Qwen3-shaped model.

What lm-eval's auto batch size does with cr2's generation tasks, and what cr2's hf model (cr2/labels/lmeval/
hf_batching.py) does instead, on the same queries through the labeling path (ChunkEvaluator →
lm_eval.simple_evaluate with cr2's BBH and MBPP tasks, max_gen_toks 256, the real Qwen3 tokenizer):

- stock: lm-eval's HFLM, which probes generation at `max_length` = the model's context (40,960 for Qwen3);
- sized: cr2's HFLM, which splits each call into length groups (prompt + max_gen_toks, next power of two)
  and probes each group at its own length, once per length.

Measured for real, on this CPU: the lengths each probe runs at, the length groups, the batches lm-eval
forms during generation (count, sizes, share of padding tokens), the generations themselves (identical
between the two), and the wall time and queries/s of the generation on this CPU.

Emulated, and only this: the GPU's memory during the probe. A probe forward of b × L tokens produces
b·L·V logits and as many log-softmax values (V = 151,936; 2 bytes each at bf16); the probe is told
"out of memory" (the error accelerate's batch finder catches) when those exceed --device-memory-gib
(default 135: an H200's 141 GB less the 1.7B model's 3.4 GB of weights and the runtime), and a probe
forward that fits is not computed (its logits alone would not fit this machine). lm-eval's own probe
logic (accelerate's find_executable_batch_size: start at max_batch_size, × 0.9 per failure) then picks
the batch. The memory model ignores activations and attention, so the stock batch it finds is an upper
bound: on a real H200 the stock probe fell to batch 1–2 (docs/labeling.md §9).

    python benchmarks/bench_label_batching.py            # writes benchmarks/results/label_batching.json
    python benchmarks/bench_label_batching.py --quick    # 4 queries per benchmark
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from _common import REPO, figure, labeling_queries, limit_threads, parse_args, write_result

SMALL_SHAPE = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 32}
BYTES_PER_LOGIT = 2  # bf16 on the GPU being emulated


def _instrument(lm, vocab: int, budget_bytes: float, log: dict) -> None:
    """Emulated probe memory (module docstring) and a record of every probe and generation batch."""
    import torch

    real_call, real_generate = lm._model_call, lm._model_generate

    def model_call(inps, attn_mask=None, labels=None):
        b, length = int(inps.shape[0]), int(inps.shape[1])
        if bool((inps == 1).all()):  # lm-eval's probe batch is all ones; real prompts never are
            need = 2 * b * length * vocab * BYTES_PER_LOGIT
            fits = need <= budget_bytes
            log["probes"].append({"batch": b, "length": length, "logit_gib": round(need / 2**30, 1), "fits": fits})
            if not fits:
                raise RuntimeError(f"CUDA out of memory. (emulated: {need / 2**30:.1f} GiB of logits)")
            return torch.zeros(1, 1, 2)
        return real_call(inps, attn_mask, labels)

    def model_generate(context, max_length, stop, **kwargs):
        mask = kwargs.get("attention_mask")
        pad = 0.0 if mask is None else 1.0 - float(mask.sum()) / mask.numel()
        log["batches"].append({"batch": int(context.shape[0]), "context_tokens": int(context.shape[1]),
                               "padding_share": round(pad, 3)})
        return real_generate(context, max_length, stop, **kwargs)

    lm._model_call, lm._model_generate = model_call, model_generate


def run_mode(mode: str, model, tokenizer, spec, samples: dict, fewshot: dict, budget_bytes: float, work: Path) -> dict:
    from lm_eval.models.huggingface import HFLM

    from cr2.labels.lmeval.hf_batching import sized_hflm_class
    from cr2.labels.lmeval.runner import ChunkEvaluator

    cls = HFLM if mode == "stock" else sized_hflm_class()
    lm = cls(pretrained=model, tokenizer=tokenizer, batch_size="auto", max_batch_size=spec.hf.max_batch_size)
    log: dict = {"probes": [], "batches": []}
    _instrument(lm, model.config.vocab_size, budget_bytes, log)
    evaluator = ChunkEvaluator(lm, spec, work)
    out: dict = {"mode": mode, "model_max_length": int(lm.max_length), "benchmarks": {}}
    for benchmark, queries in samples.items():
        log["probes"].clear()
        # lm-eval's first-call costs, outside the timing of either mode (its probes are recorded)
        evaluator.evaluate(benchmark, queries.head(1), fewshot.get(benchmark))
        log["batches"].clear()
        if hasattr(lm, "size_log"):
            lm.size_log.clear()
        t0 = time.perf_counter()
        result = evaluator.evaluate(benchmark, queries, fewshot.get(benchmark))
        wall_s = time.perf_counter() - t0
        batches = list(log["batches"])
        out["benchmarks"][benchmark] = {
            "queries": len(queries), "wall_s": round(wall_s, 2), "queries_per_s": round(len(queries) / wall_s, 3),
            "probes": [dict(t) for t in dict.fromkeys(tuple(p.items()) for p in log["probes"])],  # 5 forwards each
            "batch_sizes": [b["batch"] for b in batches], "generate_calls": len(batches),
            "mean_padding_share": round(sum(b["padding_share"] * b["batch"] for b in batches)
                                        / max(1, sum(b["batch"] for b in batches)), 3),
            "length_groups": list(getattr(lm, "size_log", [])),
            "generations": [s.get("generation") for s in result.samples],
        }
        if hasattr(lm, "size_log"):
            lm.size_log.clear()
    return out


def main() -> None:
    args = parse_args(__doc__, device_memory_gib={"type": float, "default": 135.0,
                                                  "help": "emulated free GPU memory for the probe, GiB"},
                      max_batch_size={"type": int, "default": 64, "help": "auto: the largest batch probed"})
    threads = limit_threads(1)
    import torch  # noqa: F401

    from cr2.labels.lmeval.architectures import load_architectures, qwen3_tokenizer, random_model
    from cr2.labels.lmeval.docs import mbpp_fewshot_docs
    from cr2.config.lmeval import LabelingSpec

    n = 4 if args.quick else 16
    benchmarks = ["bbh", "mbpp"]
    queries = labeling_queries(benchmarks, n)
    samples = {b: queries[queries["benchmark"] == b] for b in benchmarks}
    import pandas as pd

    fewshot = {"mbpp": mbpp_fewshot_docs(pd.read_parquet(REPO / "data" / "benchmarks" / "mbpp.parquet"), [2, 3, 4])}
    arch = load_architectures()["Qwen/Qwen3-1.7B"].model_copy(update=SMALL_SHAPE)
    scratch = Path(tempfile.mkdtemp(prefix="cr2-bench-batching-"))
    try:
        tokenizer = qwen3_tokenizer(scratch / "tokenizers")
        model = random_model(arch.hf_config(), "float32", "cpu", seed=0)
        spec = LabelingSpec.model_validate({"hf": {"batch_size": "auto", "max_batch_size": args.max_batch_size},
                                            "sandbox": {"timeout_s": 5.0}})
        budget = args.device_memory_gib * 2**30
        modes = [run_mode(m, model, tokenizer, spec, samples, fewshot, budget, scratch / m) for m in ("stock", "sized")]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    stock, sized = modes
    same = all(stock["benchmarks"][b]["generations"] == sized["benchmarks"][b]["generations"] for b in benchmarks)
    figures = []
    for b in benchmarks:
        for m in modes:
            r = m["benchmarks"][b]
            figures.append(figure(f"{m['mode']}_{b}_queries_per_s", f"{b}, {m['mode']} auto: queries/s on this CPU",
                                  [r["queries_per_s"]], "queries/s",
                                  note=f"probes at {sorted({p['length'] for p in r['probes']})} tokens, batches "
                                       f"{r['batch_sizes']}"))
    for m in modes:
        for r in m["benchmarks"].values():
            r.pop("generations")
    params = sum(p.numel() for p in model.parameters())
    write_result("label_batching", {
        "quick": args.quick, "threads": threads, "figures": figures,
        "model": {"shape": {**arch.model_dump(exclude={"params_published"}), **SMALL_SHAPE}, "params": params},
        "emulated_device_memory_gib": args.device_memory_gib, "max_batch_size": args.max_batch_size,
        "generations_identical": same, "modes": modes,
    })
    for m in modes:
        for b, r in m["benchmarks"].items():
            found = sorted({p["batch"] for p in r["probes"] if p["fits"]})
            print(f"{m['mode']:>5} {b}: probe lengths {sorted({p['length'] for p in r['probes']})}, batch found "
                  f"{found}, generate batches {r['batch_sizes']}, padding {r['mean_padding_share']:.0%}, "
                  f"{r['queries_per_s']:.2f} q/s", flush=True)
    print(f"generations identical between stock and sized: {same}")


if __name__ == "__main__":
    main()
