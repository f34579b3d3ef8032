"""Each learned baseline learns the embedding → correctness map of a synthetic pool (conftest.make_set).

At λ = 0 every learned router must beat Always-1.7B (the device-only policy) by a wide margin, and its p̂
must have a lower test Brier score than the constant predictor that ignores the embedding (the train
accuracy of each model). Both checks are one-sided with fixed seeds; on this task the routers reach
≈ 0.88–0.90 routing accuracy against 0.40 for Always-1.7B and 0.61 for Always-14B.
"""
from __future__ import annotations

import numpy as np
import pytest

from cr2.routers import LEARNED_BASELINES, get_router, router_class


def _threads(name: str) -> dict:
    """num_threads=2 for the routers that take a thread count (the torch ones)."""
    import inspect

    return {"num_threads": 2} if "num_threads" in inspect.signature(router_class(name).__init__).parameters else {}

MARGIN_OVER_DEVICE_ONLY = 0.2  # accuracy points; observed ≈ 0.5
BRIER_GAIN = 0.05  # observed ≈ 0.11 below the constant predictor's 0.244


def _accuracy(test, chosen: np.ndarray) -> float:
    return float(test.correct[np.arange(len(test)), chosen].mean())


@pytest.mark.slow
@pytest.mark.parametrize("name", LEARNED_BASELINES)
def test_learned_router_beats_device_only_and_the_constant_predictor(name, synth_splits):
    train, dev, test = synth_splits
    device_only = get_router("always-qwen3-1.7b").fit(train, dev)
    acc_device = _accuracy(test, device_only.route(test, 0.0).chosen)

    router = get_router(name, **_threads(name))
    router.fit(train, dev)
    acc = _accuracy(test, router.route(test, 0.0).chosen)
    assert acc >= acc_device + MARGIN_OVER_DEVICE_ONLY, f"{name}: {acc:.3f} vs Always-1.7B {acc_device:.3f}"

    y = test.correct.astype(np.float64)
    brier = float(np.mean((router.predict_proba(test) - y) ** 2))
    brier_const = float(np.mean((train.correct.mean(axis=0) - y) ** 2))
    assert brier <= brier_const - BRIER_GAIN, f"{name}: Brier {brier:.4f} vs constant {brier_const:.4f}"
