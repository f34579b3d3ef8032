"""Router registry: lookup by name, always-<model_id>, the did-you-mean miss, and lazy heavy imports."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from cr2.core.errors import Cr2Error, UnknownNameError
from cr2.routers import BASELINES, available_routers, get_router, load_router, router_class


def test_available_routers_lists_cr2_and_every_baseline():
    assert available_routers() == ["always", "cr2", "embedllm", "gate-avoidable", "knn", "knn-distance", "knn-isotonic",
                                   "knn-mlp-mean", "knn-stack", "llmrank", "llmrank-bench", "mlp"]
    assert set(BASELINES) <= set(available_routers())
    pool = ("qwen3-1.7b", "qwen3-14b")
    assert available_routers(pool)[:2] == ["always-qwen3-1.7b", "always-qwen3-14b"]


def test_registry_miss_names_the_closest_router():
    with pytest.raises(UnknownNameError) as err:
        get_router("knnn")
    msg = str(err.value)
    assert msg.startswith("unknown router 'knnn' — did you mean 'knn'?")
    assert ("available: always, cr2, embedllm, gate-avoidable, knn, knn-distance, knn-isotonic, knn-mlp-mean, "
            "knn-stack, llmrank, llmrank-bench, mlp") in msg
    assert isinstance(err.value, Cr2Error)


def test_always_spelling_and_unknown_model(tiny_splits):
    train, dev, test = tiny_splits
    router = get_router("always-qwen3-8b")
    assert router.name == "always-qwen3-8b"
    assert router.fit(train, dev).route(test, 3.0).chosen.tolist() == [2] * len(test)
    with pytest.raises(UnknownNameError, match="unknown model 'qwen3-8' — did you mean 'qwen3-8b'"):
        get_router("always-qwen3-8").fit(train, dev)


def test_keyword_arguments_reach_the_constructor():
    router = get_router("knn", k=7)
    assert router.get_params()["k"] == 7


def test_cr2_is_registered_lazily():
    assert router_class("cr2").__name__ == "CR2Router"


def test_load_router_dispatches_on_the_file(tiny_splits, tmp_path):
    train, dev, test = tiny_splits
    router = get_router("knn", k=5).fit(train, dev)
    router.save(tmp_path / "knn.npz")
    loaded = load_router(tmp_path / "knn.npz")
    assert type(loaded).__name__ == "KNNRouter"
    assert np.array_equal(loaded.route(test, 1.0).chosen, router.route(test, 1.0).chosen)


def test_registry_and_numpy_baselines_do_not_import_torch():
    code = (
        "import sys; import cr2.routers; from cr2.routers import get_router; "
        "get_router('knn'); get_router('always-x'); "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
