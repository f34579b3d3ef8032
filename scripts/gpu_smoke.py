"""GPU smoke test of labeling: random-weight models of the pool's shapes, N queries per benchmark, a JSON of rates.

    python scripts/gpu_smoke.py                       # the default pool and set, 32 queries per benchmark, new path
    python scripts/gpu_smoke.py --path both --budget-s 480      # old and new path side by side, stop after 8 min
    python scripts/gpu_smoke.py --n 64 --models qwen3-1.7b,qwen3-14b --batch-size 128 --chunk-size 256
    python scripts/gpu_smoke.py --tiny --path both    # CPU, tiny shapes, seconds (what `make test` runs)

Offline and without weights: the queries are ingested from the shipped benchmark files into a temporary
warehouse (or --home is used as it is), each pool model is built once with random weights from its published
shape (configs/architectures.yaml) directly on the GPU, and N queries of every benchmark are labelled through the
code of `cr2 label --estimate` — lm-eval's loglikelihood and generation with cr2's tasks, the MBPP sandbox
included — nothing is written to the warehouse. Random weights never stop early, so every BBH and MBPP generation
runs to max_gen_toks: the generative rates are a worst case.

--path: `new` is the hf backend's static-cache generation (`hf.generation: static`, the default), `old` lm-eval's
generate_until (`hf.generation: lm-eval`), `both` runs the two on the same model, new then old, and records
per benchmark the share of queries whose label (and whose generated text) the two paths agree on.

The JSON (default benchmarks/results/gpu_smoke.json; --out elsewhere; --tiny writes one only with --out) is
rewritten after every (model, path, benchmark) — a temporary file renamed over the old one — so a run cut short
keeps what it measured; `status` says whether it finished or stopped for --budget-s (checked between steps). Per
(model, path, benchmark) it holds queries/s, generated tokens/s, the compile time (apart from the rate), the
warm-up time (one query, generation capped at one token), the batch-size probe time and the GPU busy share — the
mean of nvidia-smi's utilization.gpu, polled every 200 ms in a background thread, over the timed calls minus
compilation (null without nvidia-smi); per model the build time and peak memory; at the end the default set
projected on this device from the measured rates.

--tiny: the same path on CPU in seconds — tiny shapes (hidden 64, 1–2 layers) with the real Qwen3 tokenizer,
a 4-query slice of each benchmark, generation capped at 32 tokens. Either way the script exits non-zero unless
every (model, path, benchmark) it reached produced a positive rate.
"""
from __future__ import annotations

import argparse
import gc
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TINY_SHAPE = {  # a Qwen3 of a few million parameters (the embeddings of the real 151,936-token vocabulary)
    "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 40960, "rope_theta": 1000000.0,
    "rms_norm_eps": 1.0e-6, "tie_word_embeddings": True, "bos_token_id": 151643, "eos_token_id": 151645,
    "tokenizer": "qwen3-bpe",
}
TINY_PER_BENCHMARK = 4
PATHS = {"new": "static", "old": "lm-eval"}


class GpuSampler(threading.Thread):
    """Samples GPU utilisation (%) and memory used (MiB) with nvidia-smi every `interval_ms`, with timestamps."""

    def __init__(self, interval_ms: int = 200):
        super().__init__(daemon=True)
        self.interval_ms = interval_ms
        self.samples: list[tuple[float, float, float]] = []  # (epoch s, utilisation %, memory MiB)
        self.proc: subprocess.Popen | None = None
        self.available = shutil.which("nvidia-smi") is not None

    def run(self) -> None:
        exe = shutil.which("nvidia-smi")
        if exe is None:
            return
        self.proc = subprocess.Popen([exe, "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits",
                                      f"--loop-ms={self.interval_ms}", "--id=0"], stdout=subprocess.PIPE, text=True)
        for line in self.proc.stdout:  # type: ignore[union-attr]
            parts = [p.strip() for p in line.split(",")]
            try:
                self.samples.append((time.time(), float(parts[0]), float(parts[1])))
            except (ValueError, IndexError):
                continue

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def window(self, start: float, end: float, exclude: tuple[tuple[float, float], ...] = ()) -> dict | None:
        """Utilisation over [start, end] without the `exclude` intervals (compilation); None without samples."""
        xs = [(u, m) for t, u, m in self.samples
              if start <= t <= end and not any(a <= t <= b for a, b in exclude)]
        if not xs:
            return None
        mean = sum(u for u, _ in xs) / len(xs)
        return {"busy_share": round(mean / 100.0, 3), "mean_utilisation_pct": round(mean, 1),
                "max_memory_used_mib": max(m for _, m in xs), "samples": len(xs)}


def write_json_atomic(path: Path, payload: dict) -> None:
    """Write `payload` to `path` through a temporary file in the same folder and a rename (never half-written)."""
    from cr2.core.files import atomic_write

    atomic_write(path, json.dumps(payload, indent=2, default=str) + "\n")


def _tiny_data(out: Path) -> Path:
    """A slice of the shipped benchmarks: TINY_PER_BENCHMARK queries of each (GPQA main, MBPP test)."""
    import pandas as pd

    (out / "benchmarks").mkdir(parents=True, exist_ok=True)
    keep = {"mmlu": None, "bbh": None, "gpqa": "main", "mbpp": "test"}
    for name, subset in keep.items():
        df = pd.read_parquet(REPO / "data" / "benchmarks" / f"{name}.parquet")
        if subset:
            df = df[df["subset"] == subset]
        first = list(dict.fromkeys(df["subset"]))[:2]
        df = df[df["subset"].isin(first)].groupby("subset", sort=False).head(TINY_PER_BENCHMARK // len(first))
        df.to_parquet(out / "benchmarks" / f"{name}.parquet", index=False)
    shutil.copy(REPO / "data" / "qwen3_base_accuracy.csv", out / "qwen3_base_accuracy.csv")
    return out


def _tiny_architectures(config, out: Path) -> Path:
    import yaml

    shapes = {m.hf_name: {**TINY_SHAPE, "num_hidden_layers": 1 + i % 2} for i, m in enumerate(config.models)}
    out.write_text(yaml.safe_dump({"architectures": shapes}))
    return out


def _agreement(benchmark: str, by_path: dict[str, dict[str, tuple[bool, str | None]]]) -> dict:
    """Share of the queries both paths labelled on which their labels (and generated texts) are equal."""
    old, new = by_path.get("old", {}), by_path.get("new", {})
    common = sorted(set(old) & set(new))
    if not common:
        return {"benchmark": benchmark, "queries": 0, "label_agreement": None, "generation_agreement": None}
    labels = sum(old[q][0] == new[q][0] for q in common) / len(common)
    texts = [q for q in common if old[q][1] is not None]
    gens = sum(old[q][1] == new[q][1] for q in texts) / len(texts) if texts else None
    return {"benchmark": benchmark, "queries": len(common), "label_agreement": round(labels, 4),
            "generation_agreement": round(gens, 4) if gens is not None else None}


def _projection(rates: list[dict], counts, models: list[str], benchmarks: list[str]) -> list[dict]:
    """The selection (the default set unless --home says otherwise) projected per path from the measured rates."""
    out = []
    for path in dict.fromkeys(r["path"] for r in rates):
        total_s, missing, per_model = 0.0, [], {}
        for mid in models:
            for b in benchmarks:
                n = int(counts[(counts["model_id"] == mid) & (counts["benchmark"] == b)]["total"].sum())
                hit = [r for r in rates if r["path"] == path and r["model_id"] == mid and r["benchmark"] == b]
                if not n:
                    continue
                if not hit or not hit[0]["queries_per_s"] > 0:
                    missing.append(f"{mid}/{b}")
                    continue
                s = n / hit[0]["queries_per_s"]
                total_s += s
                per_model[mid] = per_model.get(mid, 0.0) + s
        out.append({"path": path, "projected_s": round(total_s, 1), "per_model_s": {k: round(v, 1) for k, v in
                                                                                   per_model.items()},
                    "not_measured": missing})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="CPU, tiny shapes, a 4-query slice: the test of this script")
    p.add_argument("--n", type=int, default=None, help="queries per (model, benchmark) (default 32; --tiny 2)")
    p.add_argument("--models", default=None, help="comma-separated pool model ids (default: the whole pool)")
    p.add_argument("--benchmarks", default=None, help="comma-separated benchmarks (default: the enabled ones)")
    p.add_argument("--path", choices=("new", "old", "both"), default="new",
                   help="generation path: new (static cache, the default), old (lm-eval's generate_until), both")
    p.add_argument("--budget-s", type=float, default=None,
                   help="stop between steps once this many seconds have passed (the JSON says so)")
    p.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                   help="new path: compile the decode step (auto: on CUDA)")
    p.add_argument("--config", default=None, help="config YAML (default: configs/default.yaml)")
    p.add_argument("--home", default=None, help="an ingested warehouse to read (default: a temporary one, ingested)")
    p.add_argument("--dtype", default=None, help="torch dtype (default bfloat16 on a GPU, float32 on CPU)")
    p.add_argument("--batch-size", default=None,
                   help="hf batch size: an integer or auto (default 32, the H200 run's setting; --tiny 4)")
    p.add_argument("--max-batch-size", type=int, default=64, help="auto: the largest batch probed")
    p.add_argument("--chunk-size", type=int, default=64, help="queries per lm-eval call (default 64)")
    p.add_argument("--compile-cache", default=None,
                   help="folder of the compiled decode steps (default: <home>/cache/torch-compile; for a temporary "
                        "home, that of the default home, $CR2_HOME or var/)")
    p.add_argument("--out", default=None, help="JSON file (default benchmarks/results/gpu_smoke.json; --tiny: temporary)")
    args = p.parse_args(argv)
    t_begin = time.perf_counter()

    from cr2.core.env import apply_offline_env

    apply_offline_env()  # offline switches before anything loads a model
    import torch

    from cr2.config import load_config
    from cr2.config.lmeval import LabelingSpec
    from cr2.labels.lmeval.architectures import load_architectures, load_tokenizer, random_model
    from cr2.labels.lmeval.backends import hf_lm_from_model
    from cr2.labels.lmeval.estimate import measure_rates, resolve_shape
    from cr2.labels.lmeval.runs import select_queries
    from cr2_tasks.store import tool_dir
    from cr2_tasks.label import _mbpp_fewshot, compile_cache, estimate_selection

    scratch = Path(tempfile.mkdtemp(prefix="cr2-gpu-smoke-"))
    sampler = GpuSampler()
    out = Path(args.out) if args.out else (None if args.tiny else REPO / "benchmarks" / "results" / "gpu_smoke.json")
    payload: dict = {}

    def save() -> None:
        if out is not None:
            write_json_atomic(out, payload)

    def over_budget() -> bool:
        return args.budget_s is not None and time.perf_counter() - t_begin >= args.budget_s

    try:
        cuda = torch.cuda.is_available() and not args.tiny
        device = "cuda" if cuda else "cpu"
        overrides = {}
        if args.tiny:
            overrides["data_dir"] = str(_tiny_data(scratch / "data"))
        config = load_config(args.config, overrides=overrides or None)
        models = args.models.split(",") if args.models else config.model_ids
        benchmarks = args.benchmarks.split(",") if args.benchmarks else config.enabled_benchmarks
        paths = ["new", "old"] if args.path == "both" else [args.path]  # new first: a budget stop keeps its rates
        n = args.n or (2 if args.tiny else 32)
        batch = args.batch_size or ("4" if args.tiny else "32")
        base = {
            "backend": "hf",
            "hf": {"dtype": args.dtype or ("bfloat16" if cuda else "float32"), "device": device,
                   "batch_size": batch if batch == "auto" else int(batch), "max_batch_size": args.max_batch_size,
                   "num_threads": 1 if args.tiny else None, "compile": args.compile},
            "chunk_size": 2 if args.tiny else args.chunk_size,
            "templates": {"bbh": {"max_gen_toks": 32}, "mbpp": {"max_gen_toks": 32}} if args.tiny else {},
            "sandbox": {"timeout_s": 5.0},
        }
        specs = {path: LabelingSpec.model_validate({**base, "hf": {**base["hf"], "generation": PATHS[path]}})
                 for path in paths}
        architectures = str(_tiny_architectures(config, scratch / "architectures.yaml")) if args.tiny else None
        if args.home:
            home = Path(args.home).expanduser().resolve()
        else:
            from cr2_tasks.ingest import ingest_queries

            home = scratch / "home"
            home.mkdir()
            t0 = time.perf_counter()
            ingest_queries.fn(config, str(home))
            print(f"ingested the queries into a temporary warehouse in {time.perf_counter() - t0:.1f} s", flush=True)
        if args.compile_cache:
            compile_dir = Path(args.compile_cache).expanduser().resolve()
        else:  # a temporary home is removed at the end: keep the compiled steps in the default home's cache
            from cr2.config.shipped import default_home

            compile_dir = compile_cache(home if args.home else default_home())
        sampler.start()
        spec0 = specs[paths[0]]
        queries, counts = estimate_selection.fn(config, str(home), models, benchmarks, "hf", None, spec0)
        picked = select_queries(queries, n)
        fewshot = {"mbpp": _mbpp_fewshot(config, spec0)} if "mbpp" in benchmarks else {}
        shapes = load_architectures(architectures)
        payload = {
            "benchmark": "gpu_smoke", "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "tiny": args.tiny,
            "device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
            "nvidia_smi": sampler.available, "status": "running", "budget_s": args.budget_s,
            "settings": {"n_per_benchmark": n, **spec0.hf.model_dump(exclude={"generation"}),
                         "chunk_size": spec0.chunk_size, "paths": {p: PATHS[p] for p in paths},
                         "compile_cache": str(compile_dir)},
            "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
            "selection": counts.to_dict("records"), "rates": [], "models": [], "agreement": [], "projection": [],
        }
        save()
        stopped = False
        for mid in models:
            if over_budget():
                stopped = True
                break
            model_cfg = next(m for m in config.models if m.id == mid)
            shape = resolve_shape(mid, model_cfg.hf_name, spec0.model_paths.get(mid), shapes)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            tokenizer = load_tokenizer(shape.tokenizer, tool_dir(home, "tokenizers"))
            model = random_model(shape.config, spec0.hf.dtype, device, seed=spec0.seed)
            build_s = time.perf_counter() - t0
            model_row = {"model_id": mid, "params": sum(x.numel() for x in model.parameters()), "shape": shape.source,
                         "build_s": round(build_s, 2), "paths": {}}
            payload["models"].append(model_row)
            labels: dict[str, dict[str, dict[str, tuple[bool, str | None]]]] = {}  # benchmark → path → query → …
            for path in paths:
                spec = specs[path]
                lm = hf_lm_from_model(model, tokenizer, spec, compile_dir)
                path_row = {"warmup_s": 0.0, "probe_s": 0.0, "compile_s": 0.0}
                model_row["paths"][path] = path_row
                for b in benchmarks:
                    if over_budget():
                        stopped = True
                        break
                    sample = picked[picked["benchmark"] == b]

                    def collect(benchmark, result, path=path):
                        store = labels.setdefault(benchmark, {}).setdefault(path, {})
                        gens = {s["query_id"]: s.get("generation") for s in result.samples}
                        for row in result.rows.itertuples(index=False):
                            store[row.query_id] = (bool(row.correct), gens.get(row.query_id))

                    rates, warmup_s, probe_s = measure_rates(lm, mid, spec, {b: sample}, scratch / "work", fewshot,
                                                             on_chunk=collect)
                    for r in rates:
                        gpu = sampler.window(*r.window, exclude=r.compile_windows)
                        row = {"model_id": mid, "path": path, "generation": PATHS[path], "benchmark": r.benchmark,
                               "queries": r.sample_queries, "chunks": r.chunks, "seconds": round(r.seconds, 3),
                               "queries_per_s": round(r.queries_per_s, 3),
                               "output_tokens": r.output_tokens, "tokens_per_s": round(r.tokens_per_s, 1),
                               "generated_tokens": r.generated_tokens,
                               "generated_tokens_per_s": round(r.generated_tokens / r.seconds, 1) if r.seconds else 0,
                               "busy_row_share": round(r.busy_row_share, 3) if r.busy_row_share is not None else None,
                               "compile_s": round(r.compile_s, 2), "warmup_s": round(r.warmup_s, 2),
                               "probe_s": round(r.probe_s, 2),
                               "gpu_busy_share": gpu["busy_share"] if gpu else None, "gpu": gpu}
                        payload["rates"].append(row)
                        path_row["warmup_s"] = round(path_row["warmup_s"] + r.warmup_s, 2)
                        path_row["probe_s"] = round(path_row["probe_s"] + r.probe_s, 2)
                        path_row["compile_s"] = round(path_row["compile_s"] + r.compile_s, 2)
                        print(f"{mid:>12} {path:>3} {r.benchmark:>6}: {r.queries_per_s:8.2f} queries/s "
                              f"({r.sample_queries} in {r.seconds:.1f} s, {r.tokens_per_s:.0f} tokens/s), compile "
                              f"{r.compile_s:.1f} s, warm-up {r.warmup_s:.1f} s"
                              + (f", GPU busy {gpu['busy_share']:.0%}" if gpu else ""), flush=True)
                    stats = getattr(lm, "generation_stats", None)
                    if stats is not None and path == "new":
                        path_row["compiled_shapes"] = [list(s) for s in stats.compiled_shapes]
                        path_row["compile_error"] = stats.compile_error
                    path_row["fallback_reasons"] = list(getattr(lm, "fallback_reasons", []))
                    save()
                del lm
                gc.collect()
                if cuda:
                    torch.cuda.empty_cache()
                if stopped:
                    break
            if cuda:
                model_row["peak_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
            if len(paths) == 2:
                for b in benchmarks:
                    if b in labels:
                        agree = _agreement(b, labels[b])
                        agree["model_id"] = mid
                        payload["agreement"].append(agree)
                        if agree["queries"]:
                            print(f"{mid:>12} {b:>6}: old and new path agree on {agree['label_agreement']:.1%} of "
                                  f"{agree['queries']} labels" + (f", {agree['generation_agreement']:.1%} of the "
                                                                  f"generations" if agree["generation_agreement"]
                                                                  is not None else ""), flush=True)
            del model
            if cuda:
                torch.cuda.empty_cache()
            save()
            if stopped:
                break
        payload["projection"] = _projection(payload["rates"], counts, models, benchmarks)
        for proj in payload["projection"]:
            print(f"the selection ({int(counts['total'].sum()):,} (query, model) pairs) on {payload['device']}, "
                  f"{proj['path']} path: {proj['projected_s'] / 3600:.2f} h at the measured rates"
                  + (f"; not measured: {', '.join(proj['not_measured'])}" if proj["not_measured"] else ""), flush=True)
        payload["status"] = "stopped_for_budget" if stopped else "finished"
        payload["wall_s"] = round(time.perf_counter() - t_begin, 1)
        sampler.stop()
        save()
        print(f"{'wrote ' + str(out) if out else 'no --out: JSON not written'} ({payload['wall_s']:.0f} s, "
              f"{payload['status']})", flush=True)
        bad = [r for r in payload["rates"] if not r["queries_per_s"] > 0]
        if bad or (not stopped and len(payload["rates"]) != len(models) * len(benchmarks) * len(paths)):
            print(f"smoke test FAILED: {len(payload['rates'])} rates for {len(models)} × {len(benchmarks)} × "
                  f"{len(paths)}; bad {bad}")
            return 1
        return 0
    except BaseException as exc:
        if payload:
            payload["status"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
            payload["wall_s"] = round(time.perf_counter() - t_begin, 1)
            save()
        raise
    finally:
        sampler.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
