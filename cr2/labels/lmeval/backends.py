"""Inference backends for labeling, by name: `hf` (transformers), `vllm`, `api` (an OpenAI-compatible server).

Each backend becomes an lm-eval model (`hf`, `vllm`, `local-completions`) with its arguments from the
LabelingSpec. `BackendPlan.model_args` are what lm-eval receives (recorded as `label_runs.backend_args`);
`semantic_args` are the subset that can change a label (weights, precision, context length), which
enters the run id — throughput knobs (batch size, GPU memory share, concurrency) do not, so changing
them never relabels.

The `hf` backend is lm-eval's HFLM in cr2's variant (cr2/labels/lmeval/hf_batching.py): greedy generation on a static
KV cache (`hf.generation: static`, the same text as lm-eval's generate_until), and `batch_size: auto` sized from the
requests' lengths instead of the model's context; everything else is lm-eval's.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cr2.core.errors import ConfigError, did_you_mean
from cr2.config.lmeval import LabelingSpec

LM_EVAL_MODELS = {"hf": "hf", "vllm": "vllm", "api": "local-completions"}
_LOAD_LOCK = threading.Lock()
# modules each backend imports beyond cr2's own dependencies, and how to get them
BACKEND_MODULES: dict[str, tuple[str, ...]] = {"hf": (), "vllm": ("vllm",), "api": ("tenacity", "aiohttp")}
BACKEND_INSTALL: dict[str, str] = {
    "hf": "",
    "vllm": "pip install -e '.[vllm]' on a GPU machine",
    "api": "pip install 'lm-eval[api]==0.4.13' (lm-eval's local-completions model)",
}


@dataclass(frozen=True)
class BackendPlan:
    """How one model is loaded for labeling (picklable: travels to Dask/Ray workers)."""

    backend: str  # hf | vllm | api
    lm_eval_model: str  # lm-eval registry name
    model_args: dict[str, Any] = field(default_factory=dict)  # lm-eval model constructor arguments
    semantic_args: dict[str, Any] = field(default_factory=dict)  # the label-relevant subset (run id)

    def args_json(self) -> str:
        return json.dumps({"lm_eval_model": self.lm_eval_model, **self.model_args}, sort_keys=True, default=str)


def is_local(pretrained: str) -> bool:
    return Path(pretrained).expanduser().is_dir()


def local_revision(path: str | Path) -> str:
    """A content id of a local model folder: sha256 over config.json and the names and sizes of its files."""
    root = Path(path).expanduser()
    h = hashlib.sha256()
    cfg = root / "config.json"
    if cfg.is_file():
        h.update(cfg.read_bytes())
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(f"{p.relative_to(root)}:{p.stat().st_size}".encode())
    return f"local-{h.hexdigest()[:12]}"


def _hf(spec: LabelingSpec, pretrained: str, revision: str | None, hf_name: str, model_id: str | None) -> BackendPlan:
    s = spec.hf
    args: dict[str, Any] = {"pretrained": pretrained, "dtype": s.dtype, "batch_size": s.batch_size,
                            "trust_remote_code": s.trust_remote_code, "generation": s.generation, "compile": s.compile}
    if revision and not is_local(pretrained):
        args["revision"] = revision
    if s.device:
        args["device"] = s.device
    if s.batch_size == "auto":
        args["max_batch_size"] = s.max_batch_size
    if s.max_length:
        args["max_length"] = s.max_length
    if s.num_threads:
        args["num_threads"] = s.num_threads  # taken out again by load_lm: a torch setting, not an HFLM argument
    return BackendPlan("hf", "hf", args, {"dtype": s.dtype, "max_length": s.max_length})


def _vllm(spec: LabelingSpec, pretrained: str, revision: str | None, hf_name: str, model_id: str | None) -> BackendPlan:
    s = spec.vllm
    args: dict[str, Any] = {
        "pretrained": pretrained, "dtype": s.dtype, "tensor_parallel_size": s.tensor_parallel_size,
        "data_parallel_size": s.data_parallel_size, "gpu_memory_utilization": s.gpu_memory_utilization,
        "batch_size": s.batch_size, "seed": s.seed, "enable_prefix_caching": s.enable_prefix_caching, **s.extra_args,
    }
    if revision and not is_local(pretrained):
        args["revision"] = revision
    if s.max_model_len:
        args["max_model_len"] = s.max_model_len
    return BackendPlan("vllm", "vllm", args, {"dtype": s.dtype, "max_model_len": s.max_model_len})


def _api(spec: LabelingSpec, pretrained: str, revision: str | None, hf_name: str, model_id: str | None) -> BackendPlan:
    s = spec.api
    base_url = s.base_urls.get(model_id, s.base_url) if model_id is not None else s.base_url
    args: dict[str, Any] = {
        "model": s.served_model or hf_name, "base_url": base_url, "tokenizer_backend": s.tokenizer_backend,
        "tokenized_requests": s.tokenized_requests, "num_concurrent": s.num_concurrent, "batch_size": s.batch_size,
        "max_retries": s.max_retries,
        "timeout": s.timeout_s, "max_length": s.max_length,
    }
    if s.tokenizer_backend == "huggingface":
        args["tokenizer"] = s.tokenizer or pretrained
        if revision and not is_local(args["tokenizer"]):
            args["revision"] = revision
    elif s.tokenizer:
        args["tokenizer"] = s.tokenizer
    return BackendPlan("api", "local-completions", args, {"served_model": args["model"], "max_length": s.max_length})


_REGISTRY: dict[str, Callable[..., BackendPlan]] = {"hf": _hf, "vllm": _vllm, "api": _api}


def backend_plan(
    backend: str, spec: LabelingSpec, pretrained: str, revision: str | None, hf_name: str, model_id: str | None = None
) -> BackendPlan:
    """The lm-eval model and arguments of `backend` for one model (weights at `pretrained`, pool id `model_id`)."""
    if backend not in _REGISTRY:
        raise did_you_mean("labeling backend", backend, sorted(_REGISTRY))
    return _REGISTRY[backend](spec, pretrained, revision, hf_name, model_id)


def load_lm(plan: BackendPlan, device: str | None = None, compile_cache_dir: str | Path | None = None) -> Any:
    """Instantiate the lm-eval model of `plan` (imports lm-eval and the backend's library here); `compile_cache_dir`:
    where the hf backend's compiled decode steps are cached (under the cr2 home, so a re-label does not recompile)."""
    from lm_eval.api.registry import get_model

    args = dict(plan.model_args)
    num_threads = args.pop("num_threads", None)
    if plan.backend == "hf":
        import torch

        if "device" not in args:
            args["device"] = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if num_threads and str(args["device"]).startswith("cpu"):
            torch.set_num_threads(int(num_threads))  # process-wide: the model is the process's main work
        if compile_cache_dir is not None:
            args["compile_cache_dir"] = str(compile_cache_dir)
    missing = [m for m in BACKEND_MODULES[plan.backend] if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"backend '{plan.backend}' needs {', '.join(missing)}: {BACKEND_INSTALL[plan.backend]}")
    if plan.backend == "api" and not os.environ.get("OPENAI_API_KEY"):
        # lm-eval sends "Bearer <OPENAI_API_KEY>"; local servers ignore it, but an empty header is rejected by some
        os.environ.setdefault("OPENAI_API_KEY", "EMPTY")
    try:
        # accelerate's process state is a singleton that HFLM initialises on construction; two threads of one
        # process (thread runner with max_workers > 1, threaded Dask workers) must not build models at once
        with _LOAD_LOCK:
            if plan.backend == "hf":
                from cr2.labels.lmeval.hf_batching import sized_hflm_class

                return sized_hflm_class()(**args)
            return get_model(plan.lm_eval_model)(**args)
    except OSError as exc:
        where = args.get("pretrained") or args.get("tokenizer")
        raise ConfigError(
            f"cannot load model '{where}' for backend '{plan.backend}': {exc}. Offline, point "
            f"labeling.model_paths.<model id> at a local folder, or set HF_HUB_OFFLINE=0 on a machine with hub access."
        ) from None


def hf_lm_from_model(model: Any, tokenizer: Any, spec: LabelingSpec, compile_cache_dir: str | Path | None = None) -> Any:
    """lm-eval's hf model (cr2's variant) over an already built transformers model, with the spec's batching and
    generation settings."""
    from cr2.labels.lmeval.hf_batching import sized_hflm_class

    s = spec.hf
    args: dict[str, Any] = {"pretrained": model, "tokenizer": tokenizer, "batch_size": s.batch_size,
                            "generation": s.generation, "compile": s.compile,
                            "compile_cache_dir": str(compile_cache_dir) if compile_cache_dir is not None else None}
    if s.batch_size == "auto":
        args["max_batch_size"] = s.max_batch_size
    if s.max_length:
        args["max_length"] = s.max_length
    # lm-eval warns that other arguments may be ignored with a model object: cr2 passes none it would ignore
    hf_log = logging.getLogger("lm_eval.models.huggingface")
    level = hf_log.level
    with _LOAD_LOCK:
        hf_log.setLevel(logging.ERROR)
        try:
            return sized_hflm_class()(**args)
        finally:
            hf_log.setLevel(level)


def token_counter(lm: Any) -> Callable[[str], int | None]:
    """Counts generated tokens with the model's own tokenizer (None where the backend has none)."""
    encode = getattr(lm, "tok_encode", None)

    def count(text: str) -> int | None:
        if not text:
            return 0
        if encode is None:
            return None
        ids = encode(text)
        return len(ids) if isinstance(ids, (list, tuple)) else None

    return count
