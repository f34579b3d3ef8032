"""CR² as a Router: teacher selector + margin gate + per-λ CRC threshold table + the online rule.

    router = CR2Router(cfg.teacher, cfg.gate, alpha=0.01).fit(train, dev)
    router.calibrate(val, lams=cfg.grids.lam.values(), alphas=cfg.grids.alpha,
                     dist_id=cfg.channel.distribution.dist_id, label_source=cfg.labels.source)
    decisions = router.route(test, lam=1.0)

torch is imported only when the router is fitted or used, so looking it up in a registry stays cheap.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from cr2.config import GateSpec, TeacherSpec
from cr2.crc import Rule, ThresholdTable, calibrate_table
from cr2.data import Decisions, RoutingSet
from cr2.errors import DataValidationError, NotFittedError, UncalibratedOperatingPointError
from cr2.routing import VARIANTS
from cr2.utility import disagree_label


class CR2Router:
    """Cost-aware, risk-controlled two-stage router (paper Algorithm 1); route() returns Decisions."""

    name = "cr2"

    def __init__(
        self,
        teacher_spec: TeacherSpec | None = None,
        gate_spec: GateSpec | None = None,
        alpha: float = 0.01,
        variant: str = "edge-only",
        on_demand_calibration: bool = False,
        num_threads: int = 1,
    ) -> None:
        self.teacher_spec = teacher_spec if teacher_spec is not None else TeacherSpec()
        self.gate_spec = gate_spec if gate_spec is not None else GateSpec()
        self.alpha = alpha
        self.variant = variant
        self.on_demand_calibration = on_demand_calibration
        self.num_threads = num_threads

    # ------------------------------------------------------------ training
    def fit(self, train: RoutingSet, dev: RoutingSet) -> "CR2Router":
        """Return self with teacher_ (fitted first, then frozen) and gate_ (distilled from it) fitted."""
        from cr2.checkpoint import fingerprint
        from cr2.gate import fit_gate
        from cr2.teacher import fit_teacher

        if self.variant not in VARIANTS:
            from cr2.errors import did_you_mean

            raise did_you_mean("deferred variant", self.variant, list(VARIANTS))
        self.teacher_ = fit_teacher(train, dev, self.teacher_spec, num_threads=self.num_threads)
        proba_train = self.teacher_.predict_proba(train.embedding)
        proba_dev = self.teacher_.predict_proba(dev.embedding)
        self.gate_ = fit_gate(train, dev, proba_train, proba_dev, self.gate_spec, num_threads=self.num_threads)
        self.gate_fingerprint_ = fingerprint(self.gate_)
        self.model_ids_ = tuple(train.model_ids)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "gate_"):
            raise NotFittedError("CR2Router is not fitted; call fit(train, dev) before calibrate() or route()")

    def _check_pool(self, data: RoutingSet) -> None:
        if tuple(data.model_ids) != self.model_ids_:
            raise DataValidationError(f"the router was fitted on pool {self.model_ids_}, got a set over {data.model_ids}")

    # ------------------------------------------------------------ calibration
    def calibration_inputs(self, val: RoutingSet, lams: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """Return (scores, risks) on a calibration set: float32 s_i(λ_j) and bool r_i(λ_j), both [n, n_lam]."""
        self._check_fitted()
        self._check_pool(val)
        lam_arr = np.asarray(lams, dtype=np.float64)
        scores = self.gate_.score(val.embedding, lam_arr)
        risks = disagree_label(self.teacher_.predict_proba(val.embedding), val.cost, lam_arr)
        return scores, risks

    def calibrate(
        self,
        val: RoutingSet,
        lams: Sequence[float],
        alphas: Sequence[float],
        dist_id: str,
        label_source: str,
        rule: Rule = "crc",
    ) -> ThresholdTable:
        """Return the ThresholdTable τ*(λ; α) on the calibration set `val`; also sets threshold_table_.

        `val` must not have been used for fitting (exchangeability); it is kept to calibrate an off-grid λ
        on demand.
        """
        scores, risks = self.calibration_inputs(val, lams)
        table = calibrate_table(
            scores,
            risks,
            lams,
            alphas,
            gate_fingerprint=self.gate_fingerprint_,
            dist_id=dist_id,
            label_source=label_source,
            rule=rule,
        )
        self.calibration_set_ = val
        self.threshold_table_ = table
        return table

    def _threshold(self, lam: float) -> float:
        table: ThresholdTable | None = getattr(self, "threshold_table_", None)
        if table is None:
            raise UncalibratedOperatingPointError(
                "CR2Router has no threshold table; call calibrate(val, lams, alphas, ...) or set threshold_table_"
            )
        if not table.has_lam(lam) and self.on_demand_calibration:
            val = getattr(self, "calibration_set_", None)
            if val is None:
                table.lam_index(lam)  # raises, naming the grid: nothing to calibrate on
            # the guarantee is pointwise in λ: calibrate exactly this λ on the stored calibration set
            scores, risks = self.calibration_inputs(val, [lam])
            extra = calibrate_table(
                scores,
                risks,
                [lam],
                table.alphas,
                gate_fingerprint=self.gate_fingerprint_,
                dist_id=table.dist_id,
                label_source=table.label_source,
                rule=table.rule,
            )
            table = table.merge(extra)
            self.threshold_table_ = table
        return table.tau(lam, self.alpha, self.gate_fingerprint_)

    # ------------------------------------------------------------ routing
    def route(self, batch: RoutingSet, lam: float) -> Decisions:
        """Return the CR² decisions for `batch` at cost weight λ and the stored α (Algorithm 1)."""
        from cr2.routing import route

        self._check_fitted()
        self._check_pool(batch)
        tau = self._threshold(lam)
        score = self.gate_.score(batch.embedding, lam)
        proba = self.teacher_.predict_proba(batch.embedding)
        decisions = route(score, tau, proba, batch.cost, lam, self.variant)
        decisions.extra["alpha"] = self.alpha
        return decisions

    def get_params(self) -> dict[str, Any]:
        """Return the constructor's hyperparameters (scikit-learn style)."""
        return {
            "teacher_spec": self.teacher_spec,
            "gate_spec": self.gate_spec,
            "alpha": self.alpha,
            "variant": self.variant,
            "on_demand_calibration": self.on_demand_calibration,
            "num_threads": self.num_threads,
        }
