"""CR² as one estimator: teacher selector + margin gate + threshold table τ*(λ; α) + the online rule.

Training, calibration, evaluation, ablation, re-calibration, `cr2 route`, `cr2 serve` and the device export
all go through this object, so the method exists once:

    router = CR2Router(cfg.teacher, cfg.gate, alpha=0.01).fit(train, dev)
    router.calibrate(val, lams=cfg.grids.lam.values(), alphas=cfg.grids.alpha,
                     dist_id=cfg.channel.distribution.dist_id, label_source=cfg.labels.source)
    decisions = router.route(test, lam=1.0)                     # Router protocol (α = router.alpha)
    decisions = router.decide(embedding, cost, lam=2.0, alpha=0.05)  # arrays only (online serving)
    router.save(directory); CR2Router.load(directory)

torch is imported only when the router is fitted or used, so looking it up in a registry stays cheap.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cr2.config import GateSpec, TeacherSpec
from cr2.crc import (GroupedThresholdTable, ThresholdTable, calibrate_group_tables, calibrate_table, calibrated_lams,
                     rule_spec, table_from_records)
from cr2.core.data import Decisions, RoutingSet
from cr2.core.errors import DataValidationError, NotFittedError, UncalibratedOperatingPointError
from cr2.core.files import atomic_write, temp_sibling
from cr2.core.hashing import content_fingerprint
from cr2.method.routing import VARIANTS, route
from cr2.method.utility import risk_label

BUNDLE_FILES = {"teacher": "teacher.pt", "gate": "gate.pt", "thresholds": "thresholds.json", "manifest": "cr2.json"}


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
    def fit(self, train: RoutingSet, dev: RoutingSet, teacher: Any = None, dropout_cache: Any = None) -> "CR2Router":
        """Return self with teacher_ (fitted first, then frozen) and gate_ (distilled from it) fitted.

        With `teacher` given, that frozen teacher is kept and only the gate is distilled (the ablation
        gates share the full gate's teacher). dropout_cache: a store (tasks/store.py) where the gate fit's dropout
        masks are kept and replayed (cr2.method.gate.fit_gate); the same router either way.
        """
        import time

        from cr2.method.gate import fit_gate
        from cr2.routers.base import torch_threads

        self._check_variant(self.variant)
        t0 = time.perf_counter()
        if teacher is None:
            teacher = self.fit_teacher(train, dev)
        t1 = time.perf_counter()
        with torch_threads(self.num_threads):  # the gate's inputs, computed at the fit's own thread count
            p_train, p_dev = teacher.predict_proba(train.embedding), teacher.predict_proba(dev.embedding)
        gate = fit_gate(train, dev, p_train, p_dev, self.gate_spec, num_threads=self.num_threads,
                        dropout_cache=dropout_cache)
        self._set_fitted(teacher, gate, tuple(train.model_ids))
        self.fit_seconds_ = {"teacher": t1 - t0, "gate": time.perf_counter() - t1}
        return self

    def fit_teacher(self, train: RoutingSet, dev: RoutingSet) -> Any:
        """Return the teacher `fit` would fit (this router's spec and threads), frozen; `fit(…, teacher=…)` then
        distils the gate from it."""
        from cr2.method.teacher import fit_teacher

        return fit_teacher(train, dev, self.teacher_spec, num_threads=self.num_threads)

    @classmethod
    def from_config(cls, config: Any, trained: dict | None = None, num_threads: int = 1,
                    load_when_used: bool = False) -> "CR2Router":
        """The router a cr2 Config describes: unfitted, or around the checkpoints of `trained`
        ({"teacher": {"path": …, "fingerprint": …}, "gate": {…}}, what the train stage returns), loaded now or, with
        load_when_used, when first used (from_recorded)."""
        params = {"alpha": config.grids.default_alpha, "variant": config.routing.deferred_variant,
                  "on_demand_calibration": config.routing.on_demand_calibration, "num_threads": num_threads,
                  "teacher_spec": config.teacher, "gate_spec": config.gate}
        if trained is None:
            return cls(**params)
        if load_when_used:
            return cls.from_recorded(trained, [m.id for m in config.models], **params)
        return cls.from_checkpoints(trained["teacher"]["path"], trained["gate"]["path"], [m.id for m in config.models],
                                    **params)

    @classmethod
    def from_recorded(cls, trained: dict, model_ids: Sequence[str], **params: Any) -> "CR2Router":
        """The router around the checkpoints of `trained` ({"teacher": {"path", "fingerprint"}, "gate": {…}}, what
        the train stage recorded), loaded when the teacher or gate is first used, not before.

        Its fingerprints are the recorded ones, so a stage whose scores and p are all remembered (remember(), from a
        cache keyed by these fingerprints) never loads a checkpoint or imports torch. The files must exist now; when
        loaded, each is verified against its own stored fingerprint and against the recorded one.
        """
        router = cls(**params)
        router._check_variant(router.variant)
        for kind in ("teacher", "gate"):
            if not Path(trained[kind]["path"]).is_file():
                raise DataValidationError(f"{trained[kind]['path']}: {kind} checkpoint not found; fit and save the "
                                          f"{kind} first (`cr2 train`)")
        router._recorded = {kind: (Path(trained[kind]["path"]), str(trained[kind]["fingerprint"]))
                            for kind in ("teacher", "gate")}
        router.teacher_fingerprint_ = router._recorded["teacher"][1]
        router.gate_fingerprint_ = router._recorded["gate"][1]
        router.model_ids_ = tuple(model_ids)
        return router

    def __getattr__(self, name: str) -> Any:
        # only reached for a missing attribute: a recorded router's teacher_ and gate_ before their first use
        recorded = self.__dict__.get("_recorded")
        if name not in ("teacher_", "gate_") or recorded is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._load_recorded(recorded)
        return self.__dict__[name]

    def _load_recorded(self, recorded: dict) -> None:
        from cr2.method.checkpoint import fingerprint
        from cr2.method.gate import load_gate
        from cr2.method.teacher import load_teacher

        modules = {"teacher": load_teacher(recorded["teacher"][0]), "gate": load_gate(recorded["gate"][0])}
        for kind, module in modules.items():
            if fingerprint(module) != recorded[kind][1]:
                raise DataValidationError(f"{recorded[kind][0]}: the {kind} checkpoint there is not the one recorded "
                                          f"({recorded[kind][1]}); run `cr2 train` again")
        _check_heads(modules["teacher"], self.model_ids_)
        self.teacher_, self.gate_ = modules["teacher"], modules["gate"]
        self.__dict__.pop("_recorded", None)

    @classmethod
    def from_fitted(cls, teacher: Any, gate: Any, model_ids: Sequence[str], **params: Any) -> "CR2Router":
        """Return a router around an already-fitted teacher and gate (e.g. loaded checkpoints)."""
        router = cls(**params)
        router._check_variant(router.variant)
        return router._set_fitted(teacher, gate, tuple(model_ids))

    def _set_fitted(self, teacher: Any, gate: Any, model_ids: tuple[str, ...]) -> "CR2Router":
        from cr2.method.checkpoint import fingerprint

        _check_heads(teacher, model_ids)
        self.teacher_, self.gate_, self.model_ids_ = teacher, gate, model_ids
        self.teacher_fingerprint_ = fingerprint(teacher)
        self.gate_fingerprint_ = fingerprint(gate)
        for attr in ("threshold_table_", "calibration_set_", "_remembered", "_recorded"):
            self.__dict__.pop(attr, None)
        return self

    @staticmethod
    def _check_variant(variant: str) -> None:
        if variant not in VARIANTS:
            from cr2.core.errors import did_you_mean

            raise did_you_mean("deferred variant", variant, list(VARIANTS))

    def _check_fitted(self) -> None:
        if "gate_fingerprint_" not in self.__dict__:  # fitted, loaded or recorded (from_recorded): never loads
            raise NotFittedError("CR2Router is not fitted; call fit(train, dev) before calibrate() or route()")

    def _check_pool(self, data: RoutingSet) -> None:
        if tuple(data.model_ids) != self.model_ids_:
            raise DataValidationError(f"the router was fitted on pool {self.model_ids_}, got a set over {data.model_ids}")

    # ------------------------------------------------------------ the two learned functions
    def remember(self, embedding: np.ndarray, lams: Sequence[float], scores: np.ndarray, proba: np.ndarray) -> "CR2Router":
        """Return self, keeping the gate scores [n, n_lam] at `lams` and the teacher's p [n, M] of the rows of
        `embedding` (that very array object): scores()/proba() on it return them instead of recomputing.

        Both functions are batch-independent (float64 evaluation rounded once to float32), so remembered values
        are bit-identical to recomputed ones; they must come from this router's gate and teacher (e.g.
        tasks/inputs.remember_scores reads them from a cache keyed by both fingerprints). A λ not remembered is computed.
        """
        self._check_fitted()
        lam_arr = np.asarray(lams, dtype=np.float64)
        n = len(embedding)
        if scores.shape != (n, len(lam_arr)) or proba.shape != (n, len(self.model_ids_)):
            raise DataValidationError(f"remembered scores {scores.shape} / proba {proba.shape} do not fit {n} rows, "
                                      f"{len(lam_arr)} λ and {len(self.model_ids_)} models")
        column = {float(v): j for j, v in enumerate(lam_arr)}
        self.__dict__.setdefault("_remembered", []).append((embedding, column, scores, proba))
        return self

    def _recall(self, embedding: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray] | None:
        for array, column, scores, proba in self.__dict__.get("_remembered", ()):
            if array is embedding:
                return column, scores, proba
        return None

    def _gate_score(self, embedding: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
        """The gate's s(e, λ) for λ > 0: remembered columns when every λ asked for was remembered, else computed."""
        hit = self._recall(embedding)
        lam_arr = np.asarray(lam, dtype=np.float64)
        if hit is not None and all(float(v) in hit[0] for v in np.atleast_1d(lam_arr)):
            column, scores, _ = hit
            if lam_arr.ndim == 0:
                return scores[:, column[float(lam_arr)]].copy()
            return scores[:, [column[float(v)] for v in lam_arr]]
        return self.gate_.score(embedding, lam)

    def proba(self, embedding: np.ndarray) -> np.ndarray:
        """Return the frozen teacher's p_m(x), [n, M]."""
        self._check_fitted()
        hit = self._recall(embedding)
        if hit is not None:
            return hit[2].copy()
        return self.teacher_.predict_proba(embedding)

    def predict_proba(self, batch: RoutingSet) -> np.ndarray:
        """Return the teacher's p_m(x) for a RoutingSet, [n, M] (the Router protocol's estimate)."""
        self._check_fitted()
        self._check_pool(batch)
        return self.proba(batch.embedding)

    def scores(self, embedding: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
        """Return the gate scores s_φ(e(x), λ): [n] for one λ, [n, n_lam] for a vector of λ.

        λ = 0 is the accuracy-only end of the sweep: the gate (FiLM on log λ) is defined for λ > 0 and CR²
        defers everything there, so its score is −∞ (never accepted).
        """
        self._check_fitted()
        lam_arr = np.asarray(lam, dtype=np.float64)
        if np.all(lam_arr != 0):
            return self._gate_score(embedding, lam)
        n = len(embedding)
        if lam_arr.ndim == 0:
            return np.full(n, -np.inf, dtype=np.float32)
        out = np.full((n, len(lam_arr)), -np.inf, dtype=np.float32)
        positive = lam_arr != 0
        if positive.any():
            out[:, positive] = self._gate_score(embedding, lam_arr[positive])
        return out

    def local_score(self, batch: RoutingSet, lam: float | np.ndarray) -> np.ndarray:
        """Return the gate scores s_φ(e(x), λ) of `batch` (float32; −∞ at λ = 0): the score a certified `cr2@<rule>`
        calibrates (cr2.routers.certify), in place of a margin of the teacher's p."""
        self._check_fitted()
        self._check_pool(batch)
        return self.scores(batch.embedding, lam)

    def local_score_fingerprint(self) -> str:
        """The fingerprint a certified CR²'s thresholds are bound to: the gate's (what local_score depends on)."""
        self._check_fitted()
        return self.gate_fingerprint_

    def calibration_inputs(self, val: RoutingSet, lams: Sequence[float],
                           risk: str = "teacher-disagreement") -> tuple[np.ndarray, np.ndarray]:
        """Return (scores, risks) on a calibration set: float32 s_i(λ_j) and bool r_i(λ_j), both [n, n_lam].

        risk (cr2.crc.RISKS): "teacher-disagreement" — r = 1[m_full* ≠ m0] under the frozen teacher (paper §VI-F);
        "oracle-disagreement" — the same with the val queries' real labels and the same pre-execution decision
        cost ĉ (cr2.method.utility.risk_label: the realised cost is never a decision input); "avoidable-error"
        — the device wrong and some edge model right.
        """
        self._check_fitted()
        self._check_pool(val)
        lam_arr = np.asarray(lams, dtype=np.float64)
        scores = self.scores(val.embedding, lam_arr)
        proba = self.proba(val.embedding) if risk == "teacher-disagreement" else None
        risks = risk_label(risk, lam_arr, proba=proba, decision_cost=val.decision_cost, correct=val.correct,
                           cost=val.cost)
        return scores, risks

    # ------------------------------------------------------------ calibration
    def calibrate(
        self,
        val: RoutingSet,
        lams: Sequence[float],
        alphas: Sequence[float],
        dist_id: str,
        label_source: str,
        rule: str = "crc",
        delta: float | None = None,
        groups: np.ndarray | None = None,
        group_by: str = "benchmark",
        small_group: str = "error",
    ) -> ThresholdTable | GroupedThresholdTable:
        """Return the threshold table τ*(λ; α) on the calibration set `val`; also sets threshold_table_.

        rule (a cr2.crc.RULE_REGISTRY key, calibrated by cr2.crc.calibrate_table): "crc" (conformal risk control, the method: E[teacher disagreement] ≤ α
        per λ), "ltt" (Learn-then-Test with `delta`: every λ's risk ≤ α at once with probability ≥ 1 − δ),
        "crc-oracle" / "ltt-oracle" and "crc-avoidable" / "ltt-avoidable" (the same on val's real labels: oracle
        disagreement, avoidable error), "empirical" (no +1 correction), "fixed" (τ = 0.5 for every cell,
        uncalibrated) or "rate" (each α read as a fixed local rate f: the smallest τ accepting at most ⌊f·N⌋ of val). `groups` ([n] attribute values of the val rows, e.g. their
        benchmark) gives Mondrian thresholds, one table per group (cr2.crc.calibrate_group_tables). `val`
        must not have been used for fitting (exchangeability); it is kept to calibrate an off-grid λ on demand.
        """
        spec = rule_spec(rule)  # did-you-mean on an unknown name
        if len(val) == 0:
            raise DataValidationError("the calibration set is empty: nothing to calibrate on (check splits.val)")
        lam_arr = np.asarray(lams, dtype=np.float64)
        positive = calibrated_lams(lam_arr)  # λ = 0 gets its row from _with_zero, not from a rule
        if len(positive) == 0:
            raise DataValidationError("calibrate needs at least one λ > 0 (at λ = 0 CR² defers everything)")
        scores, risks = self.calibration_inputs(val, positive, spec.risk or "teacher-disagreement")
        if groups is not None:  # Mondrian: crc or ltt per group (calibrate_group_tables says so otherwise)
            table = calibrate_group_tables(scores, risks, groups, positive, alphas, group_by=group_by,
                                           gate_fingerprint=self.gate_fingerprint_, dist_id=dist_id,
                                           label_source=label_source, rule=rule, delta=delta, small_group=small_group)
            if len(positive) < len(lam_arr):
                table = GroupedThresholdTable(group_by=table.group_by, too_small=table.too_small,
                                              tables={g: _with_zero(t) for g, t in table.tables.items()})
        else:
            table = calibrate_table(scores, risks, positive, alphas, gate_fingerprint=self.gate_fingerprint_,
                                    dist_id=dist_id, label_source=label_source, rule=rule, delta=delta)
            if len(positive) < len(lam_arr):
                table = _with_zero(table)
        self.calibration_set_ = val
        self.threshold_table_ = table
        return table

    def set_threshold_table(self, table: ThresholdTable | GroupedThresholdTable,
                            calibration_set: RoutingSet | None = None) -> "CR2Router":
        """Use a stored threshold table (its gate fingerprint must be this router's); returns self."""
        self._check_fitted()
        table.check_fingerprint(self.gate_fingerprint_)
        self.threshold_table_ = table
        if calibration_set is not None:
            self.calibration_set_ = calibration_set
        return self

    def threshold(self, lam: float, alpha: float | None = None, group: str | None = None) -> float:
        """Return τ*(λ; α) from the table (α defaults to the router's; `group` selects a Mondrian table's group);
        an off-grid λ is calibrated exactly on the stored calibration set when on_demand_calibration is set,
        else it is an error naming the grid."""
        table = getattr(self, "threshold_table_", None)
        if table is None:
            raise UncalibratedOperatingPointError(
                "CR2Router has no threshold table; call calibrate(val, lams, alphas, ...) or set_threshold_table()"
            )
        if lam == 0:  # the accuracy-only end: CR² defers everything (τ = +∞), whatever the table
            return float("inf")
        if isinstance(table, GroupedThresholdTable):
            if group is None:
                raise UncalibratedOperatingPointError(
                    f"the threshold table is per {table.group_by} (Mondrian): give the query's {table.group_by}")
            return table.tau(lam, self.alpha if alpha is None else alpha, self.gate_fingerprint_, group)
        if not table.has_lam(lam) and self.on_demand_calibration:
            val = getattr(self, "calibration_set_", None)
            if val is None:
                table.lam_index(lam)  # raises, naming the grid: nothing to calibrate on
            # the guarantee is pointwise in λ: calibrate exactly this λ on the stored calibration set
            risk = rule_spec(table.rule).risk or "teacher-disagreement"
            scores, risks = self.calibration_inputs(val, [lam], risk)
            extra = calibrate_table(scores, risks, [lam], table.alphas, gate_fingerprint=self.gate_fingerprint_,
                                    dist_id=table.dist_id, label_source=table.label_source, rule=table.rule,
                                    delta=table.delta)
            table = table.merge(extra)
            self.threshold_table_ = table
        return table.tau(lam, self.alpha if alpha is None else alpha, self.gate_fingerprint_)

    def query_thresholds(self, lam: float, alpha: float | None = None,
                         groups: np.ndarray | None = None) -> float | np.ndarray:
        """Return τ*(λ; α) for a batch: one float for a pooled table; for a Mondrian table, each query's own group
        threshold τ*_g(λ; α), float64 [n] (`groups`: the queries' values of the table's group attribute)."""
        table = getattr(self, "threshold_table_", None)
        if not isinstance(table, GroupedThresholdTable):
            return self.threshold(lam, alpha)
        if groups is None:
            raise UncalibratedOperatingPointError(
                f"the threshold table is per {table.group_by} (Mondrian): give each query's {table.group_by} (groups=…)")
        groups = np.asarray(groups).astype(str)
        if lam == 0:  # the accuracy-only end: CR² defers everything (τ = +∞) in every group
            return np.full(len(groups), np.inf)
        return table.taus_for(groups, lam, self.alpha if alpha is None else alpha, self.gate_fingerprint_)

    def batch_groups(self, batch: RoutingSet) -> np.ndarray | None:
        """Return the Mondrian group of each query of `batch` when the table is per benchmark (None when pooled)."""
        table = getattr(self, "threshold_table_", None)
        if not isinstance(table, GroupedThresholdTable):
            return None
        if table.group_by != "benchmark":
            raise UncalibratedOperatingPointError(
                f"the threshold table is per {table.group_by} (Mondrian), which a RoutingSet does not carry; pass "
                f"groups=<each query's {table.group_by}> (warehouse query_groups)")
        return np.asarray(batch.benchmark)

    # ------------------------------------------------------------ routing
    def decide(
        self,
        embedding: np.ndarray,
        cost: np.ndarray,
        lam: float,
        alpha: float | None = None,
        *,
        tau: float | None = None,
        variant: str | None = None,
        score: np.ndarray | None = None,
        proba: np.ndarray | None = None,
        groups: np.ndarray | None = None,
    ) -> Decisions:
        """Return the CR² decisions (Algorithm 1) for embeddings e(x) [n, d] and costs c_m(x, ξ) [n, M] at λ.

        τ defaults to τ*(λ; α) of the table (a Mondrian table: each query's group threshold, `groups` [n]);
        `score`/`proba` may be passed when already computed for these rows (evaluation scores each λ once and
        routes it at every α).
        """
        self._check_fitted()
        variant = self.variant if variant is None else variant
        self._check_variant(variant)
        if tau is None:
            tau = self.query_thresholds(lam, alpha, groups)
        score = self.scores(embedding, lam) if score is None else score
        proba = self.proba(embedding) if proba is None else proba
        decisions = route(score, tau, proba, cost, lam, variant)
        decisions.extra["alpha"] = self.alpha if alpha is None else alpha
        return decisions

    def route(self, batch: RoutingSet, lam: float, alpha: float | None = None,
              groups: np.ndarray | None = None) -> Decisions:
        """Return the CR² decisions for `batch` at cost weight λ and α (default: the router's α); a Mondrian table
        applies each query's group threshold (groups: default the batch's benchmarks for a per-benchmark table)."""
        self._check_fitted()
        self._check_pool(batch)
        groups = self.batch_groups(batch) if groups is None else groups
        return self.decide(batch.embedding, batch.decision_cost, lam, alpha, groups=groups)

    # ------------------------------------------------------------ persistence
    def fingerprint(self) -> str:
        """Return the content fingerprint of the fitted teacher + gate (+ the threshold table when set)."""
        self._check_fitted()
        table = getattr(self, "threshold_table_", None)
        return content_fingerprint(self.name, self.model_ids_, self.teacher_fingerprint_, self.gate_fingerprint_,
                                   None if table is None else table.to_records())

    def save_modules(self, directory: str | Path) -> dict[str, dict[str, str]]:
        """Write the teacher and gate checkpoints as <kind>-<fingerprint>.pt (atomically); return kind → {fingerprint, path}."""
        from cr2.method.checkpoint import fingerprint
        from cr2.method.gate import save_gate
        from cr2.method.teacher import save_teacher

        self._check_fitted()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        out = {}
        for kind, module, save in (("teacher", self.teacher_, save_teacher), ("gate", self.gate_, save_gate)):
            fp = fingerprint(module)  # the name: a killed run never leaves a half-written checkpoint under it
            path = atomic_write(directory / f"{kind}-{fp}.pt", lambda tmp: save(module, tmp))
            out[kind] = {"fingerprint": fp, "path": str(path)}
        return out

    @classmethod
    def from_checkpoints(cls, teacher_path: str | Path, gate_path: str | Path, model_ids: Sequence[str],
                         **params: Any) -> "CR2Router":
        """Return a router from saved teacher and gate checkpoints (fingerprints verified on load)."""
        from cr2.method.gate import load_gate
        from cr2.method.teacher import load_teacher

        return cls.from_fitted(load_teacher(teacher_path), load_gate(gate_path), model_ids, **params)

    def save(self, directory: str | Path) -> str:
        """Write the whole router (teacher, gate, threshold table if calibrated, manifest) to `directory`;
        return its fingerprint. Files are written under temporary names and renamed last."""
        from cr2.method.gate import save_gate
        from cr2.method.teacher import save_teacher

        self._check_fitted()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        table = getattr(self, "threshold_table_", None)
        staged = []
        for kind, module, save in (("teacher", self.teacher_, save_teacher), ("gate", self.gate_, save_gate)):
            tmp = temp_sibling(directory / BUNDLE_FILES[kind])
            save(module, tmp)
            staged.append((tmp, directory / BUNDLE_FILES[kind]))
        if table is not None:
            tmp = temp_sibling(directory / BUNDLE_FILES["thresholds"])
            tmp.write_text(json.dumps(table.to_records()))
            staged.append((tmp, directory / BUNDLE_FILES["thresholds"]))
        manifest = {"name": self.name, "model_ids": list(self.model_ids_), "fingerprint": self.fingerprint(),
                    "alpha": self.alpha, "variant": self.variant, "on_demand_calibration": self.on_demand_calibration,
                    "teacher_fingerprint": self.teacher_fingerprint_, "gate_fingerprint": self.gate_fingerprint_}
        tmp = temp_sibling(directory / BUNDLE_FILES["manifest"])
        tmp.write_text(json.dumps(manifest, indent=1))
        staged.append((tmp, directory / BUNDLE_FILES["manifest"]))
        for src, dst in staged:
            src.replace(dst)
        if table is None:
            (directory / BUNDLE_FILES["thresholds"]).unlink(missing_ok=True)
        return manifest["fingerprint"]

    @classmethod
    def load(cls, directory: str | Path) -> "CR2Router":
        """Return the router saved by save() in `directory` (every fingerprint verified)."""
        directory = Path(directory)
        path = directory / BUNDLE_FILES["manifest"]
        if not path.is_file():
            raise DataValidationError(f"{directory}: no {BUNDLE_FILES['manifest']}; not a saved CR2Router (see CR2Router.save)")
        manifest = json.loads(path.read_text())
        router = cls.from_checkpoints(directory / BUNDLE_FILES["teacher"], directory / BUNDLE_FILES["gate"],
                                      manifest["model_ids"], alpha=manifest["alpha"], variant=manifest["variant"],
                                      on_demand_calibration=manifest["on_demand_calibration"])
        table_path = directory / BUNDLE_FILES["thresholds"]
        if table_path.is_file():
            router.set_threshold_table(table_from_records(json.loads(table_path.read_text())))  # pooled or Mondrian
        if router.fingerprint() != manifest["fingerprint"]:
            raise DataValidationError(f"{directory}: contents do not match the manifest's fingerprint "
                                      f"{manifest['fingerprint']}; save the router again")
        return router

    # ------------------------------------------------------------ complexity
    def n_params(self) -> int:
        """Return the on-device parameter count (the gate; the teacher runs only for deferred queries)."""
        self._check_fitted()
        return int(self.gate_.n_params())

    def flops_per_query(self) -> int:
        """Return the on-device FLOPs per decision (the gate)."""
        self._check_fitted()
        return int(self.gate_.flops_per_query())

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


def _check_heads(teacher: Any, model_ids: Sequence[str]) -> None:
    """A teacher predicts one p per pool model: refuse one fitted on another pool size."""
    if teacher.hparams["n_models"] != len(model_ids):
        raise DataValidationError(f"the teacher has {teacher.hparams['n_models']} heads but the pool has "
                                  f"{len(model_ids)} models")


def _with_zero(table: ThresholdTable) -> ThresholdTable:
    """The table with a λ = 0 row of τ = +∞ added: CR² defers everything there, exactly, whatever the rule (risk 0 ≤ α).

    λ = 0 is the smallest λ, so the row goes first; the gate is never scored there (it is defined for λ > 0).
    """
    if 0.0 in table.lams:
        return table
    taus = np.vstack([np.full((1, len(table.alphas)), np.inf), table.taus])
    return dataclasses.replace(table, lams=(0.0, *table.lams), taus=taus)
