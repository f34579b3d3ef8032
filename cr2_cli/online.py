"""Route queries online with the deployed CR² router (teacher, gate, newest threshold table).

What a device would do (paper Algorithm 1): embed the query, score it with the gate at λ, accept
locally iff s ≥ τ*(λ; α), otherwise pick the edge model of best teacher utility p_m(x) − λ·c_m(x, ξ).
The channel state ξ is sampled from the deployed table's state distribution, or fixed by a given
distance with mean fading (|z|² = 1 on both links). An off-grid λ is an error naming the grid unless
routing.on_demand_calibration is set; then it is calibrated exactly on the val split first.

`OnlineRouter.load` reads everything once (the CLI routes one query; `cr2 serve` keeps it for every
request).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cr2.config import Config, StateDistribution
from cr2.errors import DataValidationError, UncalibratedOperatingPointError
from tasks.common import cache_dir
from warehouse.db import Warehouse
from warehouse.repository import (cost_scales, deployed_artifacts, load_threshold_table, newest_threshold_version,
                                  state_distribution_spec)


def load_deployed_router(config: Config, home: str | Path, version: int | None = None) -> tuple[Any, int]:
    """The deployed CR² router (trained checkpoints + threshold table `version`, default the newest) and its version."""
    with Warehouse(home, read_only=True) as wh:
        version = newest_threshold_version(wh) if version is None else int(version)
        table = load_threshold_table(wh, version)
        trained = deployed_artifacts(wh, table.gate_fingerprint)
    from cr2.routers.cr2_router import CR2Router

    return CR2Router.from_config(config, trained).set_threshold_table(table), version


@dataclass
class OnlineRouter:
    """The deployed CR² router: artefacts loaded once, one `route` call per query."""

    config: Config
    home: Path
    router: Any  # the deployed CR2Router (teacher, gate, threshold table)
    version: int
    dist: StateDistribution
    cost_config: Config  # the config with T0/E0 fixed to the stored costs' scales
    output_estimates: dict = field(default_factory=dict)  # benchmark → L̂_out per model (from `cr2 prepare`)
    encoder: Any = None
    counter: Any = None
    _lock: Any = field(default=None, repr=False)

    @classmethod
    def load(cls, config: Config, home: str | Path) -> "OnlineRouter":
        import threading

        from cr2.embed import load_encoder
        from cr2.tokenizer import qwen_token_counter

        router, version = load_deployed_router(config, home)
        table = router.threshold_table_
        with Warehouse(home, read_only=True) as wh:
            sc = cost_scales(wh, table.dist_id, table.label_source)
            spec = state_distribution_spec(wh, table.dist_id)
        if sc is None or spec is None:
            raise DataValidationError(f"no states or cost scales for '{table.dist_id}'; run `cr2 prepare` first")
        # T0/E0 of the stored costs: a new query is normalised exactly like them
        cost_config = config.model_copy(update={"cost": config.cost.model_copy(
            update={"normalisation": "fixed", "t0_s": sc["t0_s"], "e0_j": sc["e0_j"]})})
        encoder = load_encoder(config.embedding.max_seq_length, backend=config.embedding.backend,
                               cache_dir=cache_dir(Path(home)) / "encoders")
        counter = qwen_token_counter(cache_dir(Path(home)) / "tokenizers")
        return cls(config=config, home=Path(home), router=router, version=int(version),
                   dist=StateDistribution.model_validate(spec), cost_config=cost_config, encoder=encoder,
                   output_estimates=sc.get("output_token_estimates") or {
                       b: [float(v)] * len(config.models) for b, v in config.cost.default_output_tokens.items()},
                   counter=counter, _lock=threading.Lock())

    def risk(self) -> dict:
        """The calibration rule of the deployed table and the risk its α bounds (issue 26; cr2.crc.RISKS)."""
        from cr2.crc import rule_risk

        rule = self.router.threshold_table_.rule
        r = rule_risk(rule)
        return {"rule": rule, "risk": None if r is None else r.name, "risk_display": None if r is None else r.display}

    def describe(self) -> dict:
        return {**self.risk(), "gate_fingerprint": self.router.threshold_table_.gate_fingerprint,
                "thresholds_version": self.version,
                "dist_id": self.router.threshold_table_.dist_id, "label_source": self.router.threshold_table_.label_source,
                "lams": list(self.router.threshold_table_.lams), "alphas": list(self.router.threshold_table_.alphas),
                "models": [m.id for m in self.config.models]}

    def _tau(self, lam: float, alpha: float, benchmark: str | None = None) -> float:
        """τ*(λ; α) of the deployed table — of the query's own group for a Mondrian table (issue 21); an off-grid λ
        is calibrated by the router on the table's own val set when routing.on_demand_calibration is set (else the
        router's error names the grid)."""
        from cr2.crc import GroupedThresholdTable

        table = self.router.threshold_table_
        if isinstance(table, GroupedThresholdTable):
            if table.group_by != "benchmark":
                raise UncalibratedOperatingPointError(
                    f"the deployed thresholds are per {table.group_by}; routing needs the query's {table.group_by}, "
                    "which `cr2 route` does not take — calibrate per benchmark or pooled (calibration.group)")
            return self.router.threshold(lam, alpha, group=benchmark)
        if (not table.has_lam(lam) and self.config.routing.on_demand_calibration
                and getattr(self.router, "calibration_set_", None) is None):
            from warehouse.routing_data import load_routing_sets

            with Warehouse(self.home, read_only=True) as wh:
                val = load_routing_sets(wh, tuple(m.id for m in self.config.models), dist_id=table.dist_id,
                                        label_source=table.label_source, seed=int(self.config.splits.seed),
                                        encoder=self.config.embedding.store_name,
                                        decision_cost=self.config.routing.decision_cost)["val"]
            self.router.set_threshold_table(table, calibration_set=val)
        return self.router.threshold(lam, alpha)

    def route(self, question: str, choices: list[str] | None, lam: float, alpha: float, distance_m: float | None = None,
              benchmark: str = "mmlu", seed: int = 0, tau: float | None = None,
              embedding: np.ndarray | None = None) -> dict:
        """The CR² decision for one query: accept/defer, score s, τ*, and every model's utility.

        tau: a target-mode choice's own certified τ (issue 21); embedding: e(x) [1, d] when the caller already
        encoded the text (micro-batching, cr2_cli/serve_batching.py).
        """
        from cr2.channel import channel_gain, downlink_rate_bps, sample_states, uplink_rate_bps
        from cr2.cost import compute_costs
        from cr2.embed import embed_texts, router_text
        from cr2.utility import teacher_utility

        check_route_inputs(question, choices, lam, alpha, distance_m)
        with self._lock:  # torch modules and the tokenizer are shared across server threads
            # issue 21: a target-mode choice brings its own certified τ (calibrated on the threshold half of val)
            tau = self._tau(float(lam), float(alpha), benchmark) if tau is None else float(tau)
            text = router_text(question, choices)
            emb = embedding if embedding is not None else embed_texts(
                [text], progress=False, encoder=self.encoder, max_seq_length=self.config.embedding.max_seq_length)
            prompt_tokens = np.array(self.counter.count([text]), dtype=float)
            if distance_m is None:
                st = sample_states(self.dist, 1, seed)
                d, g_ul, g_dl = st.distance_m, st.gain_ul, st.gain_dl
            else:
                d = np.array([float(distance_m)])
                g_ul = g_dl = channel_gain(d, np.ones(1), self.dist.path_loss)  # mean fading |z|² = 1
            estimates = self.output_estimates  # L̂_out per (benchmark, model): the pre-execution estimate
            if benchmark not in estimates:
                raise DataValidationError(f"unknown benchmark '{benchmark}' for the output-length estimate; known: "
                                          f"{', '.join(sorted(estimates))}")
            out_tokens = np.asarray(estimates[benchmark], dtype=float)[None, :]
            costs = compute_costs(prompt_tokens, out_tokens, uplink_rate_bps(g_ul, self.config.communication),
                                  downlink_rate_bps(g_dl, self.config.communication), config=self.cost_config)
            proba = self.router.proba(emb)
            dec = self.router.decide(emb, costs.cost_norm, lam, alpha, tau=tau, proba=proba)
        score = dec.score
        util = teacher_utility(proba, costs.cost_norm, lam)[0]
        model_ids = [m.id for m in self.config.models]
        return {
            "accept_local": bool(dec.extra["gate_accept"][0]), "chosen_model": model_ids[int(dec.chosen[0])],
            "score": float(score[0]), "tau": float(tau), "lam": float(lam), "alpha": float(alpha),
            "distance_m": float(d[0]), "prompt_tokens": int(prompt_tokens[0]), "threshold_dist_id": self.router.threshold_table_.dist_id,
            "thresholds_version": self.version, "label_source": self.router.threshold_table_.label_source,
            **self.risk(),  # issue 26: what α bounds at this τ
            "models": [{"model_id": m, "p_correct": float(proba[0, i]), "cost_norm": float(costs.cost_norm[0, i]),
                        "latency_s": float(costs.latency_s[0, i]), "energy_j": float(costs.energy_j[0, i]),
                        "utility": float(util[i])} for i, m in enumerate(model_ids)],
        }


def check_route_inputs(question: str, choices: list[str] | None, lam: float, alpha: float,
                       distance_m: float | None = None) -> None:
    """A DataValidationError naming the first bad input of one routing request (NaN and ±inf included)."""
    if not isinstance(question, str) or not question.strip():
        raise DataValidationError("the query text is empty; give the question to route, e.g. "
                                  "`cr2 route \"What is the capital of France?\" --lam 1`")
    if choices is not None:
        from cr2.embed import CHOICE_LETTERS

        if not all(isinstance(c, str) and c.strip() for c in choices):
            raise DataValidationError("every choice must be non-empty text")
        if len(choices) > len(CHOICE_LETTERS):
            raise DataValidationError(f"at most {len(CHOICE_LETTERS)} choices (A–Z), got {len(choices)}")
    if not (isinstance(lam, (int, float)) and math.isfinite(lam) and lam > 0):
        raise DataValidationError(f"λ must be a finite number > 0, got {lam}")
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and 0 < alpha < 1):
        raise DataValidationError(f"α must be a number in (0, 1), got {alpha}")
    from cr2.channel import MAX_DISTANCE_M

    if distance_m is not None and not (isinstance(distance_m, (int, float)) and math.isfinite(distance_m)
                                       and 0 < distance_m <= MAX_DISTANCE_M):
        raise DataValidationError(f"distance_m must be a number of metres in (0, {MAX_DISTANCE_M:g}], got {distance_m}")


def route_query(config: Config, home: str | Path, question: str, choices: list[str] | None, lam: float, alpha: float,
                distance_m: float | None = None, benchmark: str = "mmlu", seed: int = 0) -> dict:
    """The CR² decision for one query (loads the deployed artefacts for this one call)."""
    check_route_inputs(question, choices, lam, alpha, distance_m)
    return OnlineRouter.load(config, home).route(question, choices, lam, alpha, distance_m, benchmark, seed)
