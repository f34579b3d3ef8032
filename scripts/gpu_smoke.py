"""GPU smoke test of labeling: random-weight models of the pool's shapes, N queries per benchmark, a JSON of rates.

    python scripts/gpu_smoke.py                       # the default pool and set, 32 queries per benchmark
    python scripts/gpu_smoke.py --n 64 --models qwen3-1.7b,qwen3-14b --batch-size auto --chunk-size 256
    python scripts/gpu_smoke.py --tiny                # CPU, tiny shapes, seconds (what `make test` runs)

Offline and without weights: the queries are ingested from the shipped benchmark files into a temporary
warehouse (or --home is used as it is), each pool model is built with random weights from its published
shape (configs/architectures.yaml) directly on the GPU, and N queries of every benchmark are labelled
through the code of `cr2 label --estimate` — lm-eval's loglikelihood and generation with cr2's tasks, the
MBPP sandbox included — nothing is written to the warehouse. Random weights never stop early, so every
BBH and MBPP generation runs to max_gen_toks: the generative rates are a worst case.

The JSON (default benchmarks/results/gpu_smoke.json; --out elsewhere; --tiny writes one only with --out) holds per (model, benchmark) the
queries/s, and on a GPU the device name, the peak memory torch allocated, and the GPU utilisation nvidia-smi
reported while each benchmark ran (sampled every 200 ms). At the rates measured on one H200 (docs/labeling.md
§9) the default sizes should take about 5 minutes there (not yet run on a GPU).

--tiny: the same path on CPU in seconds — tiny shapes (hidden 64, 1–2 layers) with the real Qwen3 tokenizer,
a 4-query slice of each benchmark, generation capped at 32 tokens. Either way the script exits non-zero unless
every (model, benchmark) produced a positive rate.
"""
from __future__ import annotations

import argparse
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


class GpuSampler(threading.Thread):
    """Samples GPU utilisation (%) and memory used (MiB) with nvidia-smi every `interval_ms`, with timestamps."""

    def __init__(self, interval_ms: int = 200):
        super().__init__(daemon=True)
        self.interval_ms = interval_ms
        self.samples: list[tuple[float, float, float]] = []  # (epoch s, utilisation %, memory MiB)
        self.proc: subprocess.Popen | None = None

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
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def window(self, start: float, end: float) -> dict | None:
        xs = [(u, m) for t, u, m in self.samples if start <= t <= end]
        if not xs:
            return None
        return {"mean_utilisation_pct": round(sum(u for u, _ in xs) / len(xs), 1),
                "max_memory_used_mib": max(m for _, m in xs), "samples": len(xs)}


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="CPU, tiny shapes, a 4-query slice: the test of this script")
    p.add_argument("--n", type=int, default=None, help="queries per (model, benchmark) (default 32; --tiny 2)")
    p.add_argument("--models", default=None, help="comma-separated pool model ids (default: the whole pool)")
    p.add_argument("--benchmarks", default=None, help="comma-separated benchmarks (default: the enabled ones)")
    p.add_argument("--config", default=None, help="config YAML (default: configs/default.yaml)")
    p.add_argument("--home", default=None, help="an ingested warehouse to read (default: a temporary one, ingested)")
    p.add_argument("--dtype", default=None, help="torch dtype (default bfloat16 on a GPU, float32 on CPU)")
    p.add_argument("--batch-size", default=None,
                   help="hf batch size: an integer or auto (default 32, the H200 run's setting; --tiny 4)")
    p.add_argument("--max-batch-size", type=int, default=64, help="auto: the largest batch probed")
    p.add_argument("--chunk-size", type=int, default=64, help="queries per lm-eval call (default 64)")
    p.add_argument("--out", default=None, help="JSON file (default benchmarks/results/gpu_smoke.json; --tiny: temporary)")
    args = p.parse_args(argv)

    from cr2.core.env import apply_offline_env

    apply_offline_env()  # offline switches before anything loads a model
    import torch

    from cr2.config import load_config
    from cr2.config.labeling import LabelingSpec
    from tasks.label import estimate_model_rates, estimate_selection

    scratch = Path(tempfile.mkdtemp(prefix="cr2-gpu-smoke-"))
    sampler = GpuSampler()
    try:
        cuda = torch.cuda.is_available() and not args.tiny
        device = "cuda" if cuda else "cpu"
        overrides = {}
        if args.tiny:
            overrides["data_dir"] = str(_tiny_data(scratch / "data"))
        config = load_config(args.config, overrides=overrides or None)
        models = args.models.split(",") if args.models else config.model_ids
        benchmarks = args.benchmarks.split(",") if args.benchmarks else config.enabled_benchmarks
        n = args.n or (2 if args.tiny else 32)
        batch = args.batch_size or ("4" if args.tiny else "32")
        spec = LabelingSpec.model_validate({
            "backend": "hf",
            "hf": {"dtype": args.dtype or ("bfloat16" if cuda else "float32"), "device": device,
                   "batch_size": batch if batch == "auto" else int(batch), "max_batch_size": args.max_batch_size,
                   "num_threads": 1 if args.tiny else None},
            "chunk_size": 2 if args.tiny else args.chunk_size,
            "templates": {"bbh": {"max_gen_toks": 32}, "mbpp": {"max_gen_toks": 32}} if args.tiny else {},
            "sandbox": {"timeout_s": 5.0},
        })
        architectures = str(_tiny_architectures(config, scratch / "architectures.yaml")) if args.tiny else None
        if args.home:
            home = Path(args.home).expanduser().resolve()
        else:
            from tasks.ingest import ingest_queries

            home = scratch / "home"
            home.mkdir()
            t0 = time.perf_counter()
            ingest_queries.fn(config, str(home))
            print(f"ingested the queries into a temporary warehouse in {time.perf_counter() - t0:.1f} s", flush=True)
        sampler.start()
        t_start = time.perf_counter()
        queries, counts = estimate_selection.fn(config, str(home), models, benchmarks, "hf", None, spec)
        results = []
        for mid in models:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            m = estimate_model_rates.fn(config, str(home), mid, queries, benchmarks, n, spec, architectures)
            peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
            for r in m.rates:
                row = {"model_id": mid, "benchmark": r.benchmark, "queries": r.sample_queries, "chunks": r.chunks,
                       "seconds": round(r.seconds, 3), "queries_per_s": round(r.queries_per_s, 3),
                       "gpu": sampler.window(*r.window)}
                results.append(row)
                print(f"{mid:>12} {r.benchmark:>6}: {r.queries_per_s:8.2f} queries/s ({r.sample_queries} in "
                      f"{r.seconds:.1f} s)" + (f", GPU {row['gpu']['mean_utilisation_pct']} %" if row["gpu"] else ""),
                      flush=True)
            results.append({"model_id": mid, "params": m.params, "shape": m.shape, "build_s": round(m.build_s, 2),
                            "warmup_s": round(m.warmup_s, 2), "probe_s": round(m.probe_s, 2),
                            "peak_allocated_gib": round(peak, 2) if peak is not None else None})
        wall_s = time.perf_counter() - t_start
        sampler.stop()
        payload = {
            "benchmark": "gpu_smoke", "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "tiny": args.tiny,
            "device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
            "settings": {"n_per_benchmark": n, **spec.hf.model_dump(), "chunk_size": spec.chunk_size},
            "wall_s": round(wall_s, 1), "selection": counts.to_dict("records"),
            "rates": [r for r in results if "benchmark" in r], "models": [r for r in results if "benchmark" not in r],
        }
        out = Path(args.out) if args.out else (None if args.tiny else REPO / "benchmarks" / "results" / "gpu_smoke.json")
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        print(f"{'wrote ' + str(out) if out else 'no --out: JSON not written'} ({wall_s:.0f} s)", flush=True)
        bad = [r for r in payload["rates"] if not r["queries_per_s"] > 0]
        if len(payload["rates"]) != len(models) * len(benchmarks) or bad:
            print(f"smoke test FAILED: {len(payload['rates'])} rates for {len(models)} × {len(benchmarks)}; bad {bad}")
            return 1
        return 0
    finally:
        sampler.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
