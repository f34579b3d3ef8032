"""KNN with per-model isotonic calibration: p̂_m(x) = g_m(p̂_m^knn(x)), g_m fitted on the dev split.

The KNN router (cr2.routers.knn, k chosen on dev by its log-loss rule) is fitted on train; then, for every model m,
an increasing isotonic regression g_m of the dev labels y_m on the dev split's KNN p̂_m is fitted
(scikit-learn's IsotonicRegression, y in [0, 1], out_of_bounds="clip"). The calibrated p̂ then goes into the same
utility argmax p̂_m − λ·c_m as every one-shot router. Calibration sees the dev split only (never val, which
certification calibrates on, or test).

g_m is piecewise linear between its breakpoints (X_thresholds_, y_thresholds_) and constant outside them. The
router stores those breakpoints and evaluates g_m itself (linear interpolation, np.interp — what
IsotonicRegression.predict computes), so a saved and loaded router predicts bit for bit like the fitted one and
prediction needs no scikit-learn. g_m is non-decreasing, so the calibrated p̂_m is monotone in the raw p̂_m.

Complexity: the KNN search plus, per model, one interpolation (a binary search, a read-out, and 4 FLOPs:
slope, offset, multiply, add). Parameters: the stored breakpoints, 2 numbers each (the KNN itself has none).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cr2.core.data import RoutingSet
from cr2.routers.base import OneShotRouter, part_state, restore_part
from cr2.routers.knn import KNNRouter

INTERP_FLOPS = 4  # per model: (x − x_j), · slope (itself a difference ratio), + y_j


class KNNIsotonicRouter(OneShotRouter):
    """KNN's p̂_m calibrated per model by isotonic regression on dev; route() takes argmax p̂ − λ·c over the pool."""

    name = "knn-isotonic"

    def __init__(self, knn: dict[str, Any] | None = None) -> None:
        self.knn = knn

    def _fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        from sklearn.isotonic import IsotonicRegression

        self.knn_ = KNNRouter(**dict(self.knn or {})).fit(train, dev)
        raw = self.knn_.predict_proba(dev).astype(np.float64)
        y = np.asarray(dev.correct, dtype=np.float64)
        self.x_thresholds_, self.y_thresholds_ = [], []
        for m in range(dev.n_models):
            iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(raw[:, m], y[:, m])
            self.x_thresholds_.append(np.asarray(iso.X_thresholds_, dtype=np.float64))
            self.y_thresholds_.append(np.asarray(iso.y_thresholds_, dtype=np.float64))

    def calibrate_raw(self, raw: np.ndarray) -> np.ndarray:
        """Return g_m(p̂_m) for raw KNN probabilities [n, M], float32 (clipped to each g_m's fitted range)."""
        raw = np.asarray(raw, dtype=np.float64)
        out = np.empty(raw.shape, dtype=np.float64)
        for m, (xs, ys) in enumerate(zip(self.x_thresholds_, self.y_thresholds_)):
            out[:, m] = np.interp(raw[:, m], xs, ys)  # constant beyond the end breakpoints: out_of_bounds="clip"
        return np.clip(out, 0.0, 1.0).astype(np.float32)

    def predict_proba(self, batch: RoutingSet) -> np.ndarray:
        """Return the calibrated p̂_m(x) = g_m(p̂_m^knn(x)), float32 [n, M]."""
        self._check_batch(batch)
        return self.calibrate_raw(self.knn_.predict_proba(batch))

    def n_params(self) -> int:
        """Return the number of stored breakpoint coordinates (2 per breakpoint and model; KNN has none)."""
        self._check_fitted()
        return int(sum(2 * len(xs) for xs in self.x_thresholds_))

    def flops_per_query(self) -> int:
        """Return KNN's FLOPs plus 4 per model for the interpolation (module docstring)."""
        self._check_fitted()
        return int(self.knn_.flops_per_query()) + INTERP_FLOPS * len(self.model_ids_)

    def _state_arrays(self) -> dict[str, np.ndarray]:
        arrays, _ = part_state(self.knn_, "knn")
        for m, (xs, ys) in enumerate(zip(self.x_thresholds_, self.y_thresholds_)):
            arrays[f"isotonic.{m}.x"], arrays[f"isotonic.{m}.y"] = xs, ys
        return arrays

    def _state_extra(self) -> dict[str, Any]:
        return {"knn": self.knn_._state_extra()}

    def _set_state(self, arrays: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.knn_ = restore_part(KNNRouter, dict(self.knn or {}), arrays, extra["knn"], "knn", self)
        n_models = len(self.model_ids_)
        self.x_thresholds_ = [np.asarray(arrays[f"isotonic.{m}.x"], dtype=np.float64) for m in range(n_models)]
        self.y_thresholds_ = [np.asarray(arrays[f"isotonic.{m}.y"], dtype=np.float64) for m in range(n_models)]
