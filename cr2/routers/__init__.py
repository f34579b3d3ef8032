"""Routers by name: CR² and the paper's baselines (§VII-A), looked up in one small registry.

    from cr2.routers import get_router, available_routers
    knn = get_router("knn").fit(train, dev)
    device_only = get_router("always-qwen3-1.7b")          # Always-m: always-<model_id>
    router = get_router("mlp", seed=1, num_threads=2)       # keyword arguments go to the constructor

Router modules are imported only when a router is built, so `import cr2.routers` stays cheap and does
not load torch. A miss names the closest registered router:
"unknown router 'knnn' — did you mean 'knn'? available: …".
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Sequence

from cr2.errors import did_you_mean

ALWAYS_PREFIX = "always-"

# name → (module, class); "always" needs model_id= (or use the spelling always-<model_id>)
_REGISTRY: dict[str, tuple[str, str]] = {
    "always": ("cr2.routers.always", "AlwaysRouter"),
    "knn": ("cr2.routers.knn", "KNNRouter"),
    "mlp": ("cr2.routers.mlp", "MLPRouter"),
    "embedllm": ("cr2.routers.embedllm", "EmbedLLMRouter"),
    "llmrank": ("cr2.routers.llmrank", "LLMRankRouter"),
    "cr2": ("cr2.routers.cr2_router", "CR2Router"),
}

# the one-shot baselines (paper §VII-A), in the paper's table order
BASELINES: tuple[str, ...] = ("always", "knn", "mlp", "embedllm", "llmrank")
LEARNED_BASELINES: tuple[str, ...] = ("knn", "mlp", "embedllm", "llmrank")


def available_routers(model_ids: Sequence[str] | None = None) -> list[str]:
    """Return the registered router names; with a pool, 'always' is expanded to always-<model_id> per model."""
    names = [n for n in _REGISTRY if n != "always"]
    if model_ids is None:
        return sorted(names + ["always"])
    return [f"{ALWAYS_PREFIX}{m}" for m in model_ids] + sorted(names)


def router_class(name: str) -> type:
    """Return the router class registered under `name` (imports its module)."""
    key = "always" if name.startswith(ALWAYS_PREFIX) else name
    if key not in _REGISTRY:
        raise did_you_mean("router", name, available_routers())
    module, cls = _REGISTRY[key]
    return getattr(importlib.import_module(module), cls)


def get_router(name: str, **kwargs: Any) -> Any:
    """Return an unfitted router built from `name` and the constructor keyword arguments."""
    cls = router_class(name)
    if name.startswith(ALWAYS_PREFIX):
        return cls(model_id=name[len(ALWAYS_PREFIX) :], **kwargs)
    return cls(**kwargs)


def load_router(path: str | Path) -> Any:
    """Return the fitted baseline router saved at `path` (OneShotRouter.save), whatever its class."""
    from cr2.routers.base import read_router_file

    _, meta = read_router_file(path)
    key = "always" if meta["name"].startswith(ALWAYS_PREFIX) else meta["name"]
    return router_class(key).load(path)


__all__ = ["BASELINES", "LEARNED_BASELINES", "available_routers", "get_router", "load_router", "router_class"]
