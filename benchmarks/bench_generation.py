"""Generation paths of the hf labeling backend on CPU: lm-eval's generate_until against cr2's static-cache loop.

The same BBH and MBPP queries go through the labeling path (ChunkEvaluator → lm_eval.simple_evaluate with cr2's
tasks, max_gen_toks 256) with `hf.generation: lm-eval` (transformers' generate with lm-eval's text stop criteria)
and `hf.generation: static` (cr2/labels/lmeval/static_generation.py: length buckets, stop strings on token ids,
finished rows refilled; eager on CPU — the compiled decode step is for CUDA), at the same fixed batch size, on two
random-weight models:

- tiny: the tests' Qwen3 (hidden 64, 2 layers, a 2,048-token BPE trained on benchmark text; tests/labeling/
  tiny_model.py), drawn with weights of std 0.2 so that generations vary and end at stop strings;
- small: a Qwen3 of hidden 128 and 2 layers with the real 151,936-token vocabulary and tokenizer; random weights of
  transformers' init, so every generation runs to 256 tokens (the worst case the GPU smoke test measures).

Per (model, path, benchmark): wall time and queries/s of the timed call (a one-query call before it is not
timed), repeated, the two paths back to back in each repeat; the generations of the two paths are compared (they must be identical). The machine's load is
recorded with the result: on a shared 2-core machine the figures move with it.

    python benchmarks/bench_generation.py            # writes benchmarks/results/generation.json
    python benchmarks/bench_generation.py --quick    # 4 queries per benchmark, one repeat
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from _common import REPO, figure, labeling_queries, limit_threads, parse_args, write_result

SMALL_SHAPE = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 32}
PATHS = ("lm-eval", "static")


def _models(scratch: Path):
    """(name, transformers model, tokenizer) of the two models (module docstring)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cr2.labels.lmeval.architectures import load_architectures, qwen3_tokenizer, random_model
    from tests.labeling.tiny_model import build_tiny_qwen3

    folder = build_tiny_qwen3(scratch / "tiny", init_std=0.2)
    tiny = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    arch = load_architectures()["Qwen/Qwen3-1.7B"].model_copy(update=SMALL_SHAPE)
    small = random_model(arch.hf_config(), "float32", "cpu", seed=0)
    return [("tiny", tiny, AutoTokenizer.from_pretrained(str(folder))),
            ("small", small, qwen3_tokenizer(scratch / "tokenizers"))]


def run_paths(model, tokenizer, batch: int, samples: dict, fewshot: dict, work: Path, repeats: int) -> dict:
    """Both paths over the same model; each repeat times every benchmark on both paths back to back (old first,
    then new, alternating the order per repeat), so a change of the machine's load hits both alike."""
    from cr2.config.lmeval import LabelingSpec
    from cr2.labels.lmeval.backends import hf_lm_from_model
    from cr2.labels.lmeval.runner import ChunkEvaluator

    evaluators, lms = {}, {}
    for path in PATHS:
        spec = LabelingSpec.model_validate({"hf": {"batch_size": batch, "generation": path}, "chunk_size": 1024,
                                            "sandbox": {"timeout_s": 5.0}})
        lms[path] = hf_lm_from_model(model, tokenizer, spec)
        evaluators[path] = ChunkEvaluator(lms[path], spec, work / path)
    out: dict = {path: {} for path in PATHS}
    for benchmark, queries in samples.items():
        for path in PATHS:  # first-call costs, untimed
            evaluators[path].evaluate(benchmark, queries.head(1), fewshot.get(benchmark))
            out[path][benchmark] = {"queries": len(queries), "wall_s": [], "queries_per_s": [], "generations": None}
        for rep in range(repeats):
            for path in (PATHS if rep % 2 == 0 else PATHS[::-1]):
                t0 = time.perf_counter()
                result = evaluators[path].evaluate(benchmark, queries, fewshot.get(benchmark))
                wall = time.perf_counter() - t0
                r = out[path][benchmark]
                r["wall_s"].append(round(wall, 3))
                r["queries_per_s"].append(round(len(queries) / wall, 3))
                r["generations"] = [s.get("generation") for s in result.samples]
    stats = lms["static"].generation_stats
    out["static"]["_stats"] = {"decode_steps": stats.decode_steps, "row_steps": stats.row_steps,
                               "generated_tokens": stats.generated_tokens, "prefills": stats.prefills,
                               "decoded_windows": stats.decoded_windows}
    return out


def main() -> None:
    args = parse_args(__doc__, batch={"type": int, "default": 8, "help": "hf batch size of both paths"})
    threads = limit_threads(1)
    import pandas as pd

    from cr2.labels.lmeval.docs import mbpp_fewshot_docs

    n = 4 if args.quick else 16
    repeats = args.repeats or (1 if args.quick else 3)
    benchmarks = ["bbh", "mbpp"]
    queries = labeling_queries(benchmarks, n)
    samples = {b: queries[queries["benchmark"] == b] for b in benchmarks}
    fewshot = {"mbpp": mbpp_fewshot_docs(pd.read_parquet(REPO / "data" / "benchmarks" / "mbpp.parquet"), [2, 3, 4])}
    scratch = Path(tempfile.mkdtemp(prefix="cr2-bench-generation-"))
    load_before = __import__("os").getloadavg()
    results: dict = {}
    try:
        for name, model, tokenizer in _models(scratch):
            results[name] = run_paths(model, tokenizer, args.batch, samples, fewshot, scratch / name, repeats)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    figures, identical = [], {}
    for name, by_path in results.items():
        for b in benchmarks:
            old, new = by_path["lm-eval"][b], by_path["static"][b]
            identical[f"{name}/{b}"] = old["generations"] == new["generations"]
            for path in PATHS:
                r = by_path[path][b]
                figures.append(figure(f"{name}_{b}_{path}_queries_per_s", f"{name} model, {b}, {path} path: queries/s",
                                      r["queries_per_s"], "queries/s"))
            ratio = [o / s for o, s in zip(old["wall_s"], new["wall_s"])]
            figures.append(figure(f"{name}_{b}_speedup", f"{name} model, {b}: lm-eval wall time / static wall time",
                                  ratio, "×", note="> 1: the static path is faster"))
    for by_path in results.values():
        for r in by_path.values():
            for b in benchmarks:
                r[b].pop("generations")
    write_result("generation", {
        "quick": args.quick, "threads": threads, "batch_size": args.batch, "queries_per_benchmark": n,
        "repeats": repeats, "load_avg_before_1m_5m_15m": [round(v, 2) for v in load_before],
        "models": {"tiny": "tests/labeling/tiny_model.py, init_std 0.2", "small": {"shape": SMALL_SHAPE,
                                                                                  "vocab": 151936}},
        "figures": figures, "generations_identical": identical, "results": results,
    })
    print(f"generations identical between the paths: {identical}")


if __name__ == "__main__":
    main()
