"""The deployed CR² router, defined once: its threshold table, the split it calibrates on, online routing, targets.

What a device would do (paper Algorithm 1): embed the query, score it with the gate at λ, accept locally
iff s ≥ τ*(λ; α), otherwise pick the edge model of best teacher utility p_m(x) − λ·c_m(x, ξ). The channel
state ξ is sampled from the deployed table's state distribution, or fixed by a given distance with mean
fading (|z|² = 1 on both links). An off-grid λ is an error naming the grid unless
routing.on_demand_calibration is set; then it is calibrated exactly on the deployment's calibration split.

Which split a deployment calibrates on (one definition, `calibration_split`): the val split of the
deployed table's OWN channel-state distribution and label source (the `dist_id` and `label_source` the
table records), with the config's split seed, encoder and decision cost. The table was calibrated on
exactly those rows, so on-demand calibration, target selection (cr2.targets) and the guarantee
validity check (tasks/guarantees.py) all read them — also after `cr2 recalibrate` deployed a table of
another state distribution than the config's. (Before issue 29, the validity check took the config's
distribution; for a table calibrated under the config, as in `cr2 run`, the two are the same rows.)

Pure: no database here. `Deployment` is what the warehouse holds about a deployment;
warehouse/deployment.py reads it (read_deployment), and the CLI, `cr2 serve` and the tasks pass it in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cr2.config import Config, StateDistribution
from cr2.crc import GroupedThresholdTable, ThresholdTable, rule_for, rule_risk
from cr2.data import RoutingSet
from cr2.errors import DataValidationError, UncalibratedOperatingPointError


# ---------------------------------------------------------------- which rows a deployment calibrates on
@dataclass(frozen=True)
class CalibrationSplit:
    """The routing rows a deployed table is calibrated (and checked, and extended on demand) on."""

    dist_id: str  # the channel-state distribution the table records
    label_source: str  # the label source the table records
    seed: int  # config splits.seed: which queries are val
    encoder: str  # config embedding.store_name
    decision_cost: str  # config routing.decision_cost: estimated | realised
    split: str = "val"  # the calibration split

    def routing_args(self) -> dict[str, Any]:
        """The keyword arguments of warehouse.routing_data.load_routing_sets for these rows (model_ids aside)."""
        return {"dist_id": self.dist_id, "label_source": self.label_source, "seed": self.seed, "encoder": self.encoder,
                "decision_cost": self.decision_cost}


def calibration_split(config: Config, table: ThresholdTable | GroupedThresholdTable) -> CalibrationSplit:
    """Return the rows `table` calibrates on: the val split of the table's own states and labels (module docstring)."""
    return CalibrationSplit(dist_id=table.dist_id, label_source=table.label_source, seed=int(config.splits.seed),
                            encoder=config.embedding.store_name, decision_cost=config.routing.decision_cost)


# ---------------------------------------------------------------- what the warehouse holds about a deployment
@dataclass(frozen=True)
class Deployment:
    """A deployed threshold table with everything needed to route with it (read by warehouse/deployment.py)."""

    version: int  # the `thresholds` version
    table: ThresholdTable | GroupedThresholdTable
    trained: dict  # {"teacher": {"path", "fingerprint"}, "gate": {"path", "fingerprint"}}: the table's gate + teacher
    split: CalibrationSplit  # calibration_split(config, table)
    load_sets: Callable[[tuple[str, ...]], dict[str, RoutingSet]]  # splits → RoutingSet of `split`'s rows (lazy)
    cost_scales: dict | None = None  # {t0_s, e0_j, output_token_estimates} of the table's states and labels
    state_spec: dict | None = None  # the stored spec of the table's state distribution

    def calibration_set(self) -> RoutingSet:
        """Return the calibration split's RoutingSet (an error naming the fix when it is empty)."""
        val = self.load_sets((self.split.split,))[self.split.split]
        if len(val) == 0:
            raise DataValidationError(f"the {self.split.split} split of '{self.split.dist_id}' / "
                                      f"'{self.split.label_source}' is empty: nothing to calibrate on; run `cr2 prepare`")
        return val


def deployed_router(config: Config, deployment: Deployment, num_threads: int = 1) -> Any:
    """Return the deployed CR2Router: the table's trained teacher and gate, with the table set."""
    from cr2.routers.cr2_router import CR2Router

    return CR2Router.from_config(config, deployment.trained, num_threads=num_threads).set_threshold_table(deployment.table)


# ---------------------------------------------------------------- one validation of a routing request
def check_route_inputs(question: str, choices: list[str] | None, lam: float, alpha: float,
                       distance_m: float | None = None) -> None:
    """Raise DataValidationError naming the first bad input of one routing request (NaN and ±inf included).

    A request's inputs are data from a user (serve answers 422), hence DataValidationError.
    """
    from cr2.boundary import check_text
    from cr2.errors import InvalidValueError

    if not isinstance(question, str) or not question.strip():
        raise DataValidationError("the query text is empty; give the question to route, e.g. "
                                "`cr2 route \"What is the capital of France?\" --lam 1`")
    try:
        check_text(question, "the query")
        for i, c in enumerate(choices or []):
            if isinstance(c, str):
                check_text(c, f"choice {i + 1}")
    except InvalidValueError as exc:
        raise DataValidationError(str(exc)) from None
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
    from cr2.channel import MAX_DISTANCE_M, MIN_DISTANCE_M

    if distance_m is not None and not (isinstance(distance_m, (int, float)) and math.isfinite(distance_m)
                                       and MIN_DISTANCE_M <= distance_m <= MAX_DISTANCE_M):
        raise DataValidationError(f"distance_m must be a number of metres in [{MIN_DISTANCE_M:g}, {MAX_DISTANCE_M:g}] "
                                  f"(the path-loss model's range), got {distance_m}")


# ---------------------------------------------------------------- the online router
def _require_costs(deployment: Deployment) -> tuple[dict, dict]:
    """(cost scales, state distribution spec) of a deployment, or the error naming `cr2 prepare`."""
    if deployment.cost_scales is None or deployment.state_spec is None:
        raise DataValidationError(f"no states or cost scales for '{deployment.table.dist_id}'; run `cr2 prepare` first")
    return deployment.cost_scales, deployment.state_spec


@dataclass
class OnlineRouter:
    """The deployed CR² router: artefacts loaded once, one `route` call per query (`cr2 route`, `cr2 serve`)."""

    config: Config
    router: Any  # the deployed CR2Router (teacher, gate, threshold table)
    version: int
    dist: StateDistribution
    cost_config: Config  # the config with T0/E0 fixed to the stored costs' scales
    deployment: Deployment | None = None  # where the calibration split comes from (on-demand λ, targets)
    output_estimates: dict = field(default_factory=dict)  # benchmark → L̂_out per model (from `cr2 prepare`)
    encoder: Any = None
    counter: Any = None
    _lock: Any = field(default=None, repr=False)

    @classmethod
    def from_deployment(cls, config: Config, deployment: Deployment, cache_root: str | Path) -> "OnlineRouter":
        """Return the online router of a deployment; the encoder and tokenizer are cached under `cache_root`."""
        import threading

        from cr2.embed import load_encoder
        from cr2.tokenizer import qwen_token_counter

        _require_costs(deployment)  # before the encoder is loaded
        cache_root = Path(cache_root)
        encoder = load_encoder(config.embedding.max_seq_length, backend=config.embedding.backend,
                               cache_dir=cache_root / "encoders")
        counter = qwen_token_counter(cache_root / "tokenizers")
        return cls._of(config, deployment, encoder, counter, threading.Lock())

    @classmethod
    def _of(cls, config: Config, deployment: Deployment, encoder: Any, counter: Any, lock: Any) -> "OnlineRouter":
        sc, spec = _require_costs(deployment)
        # T0/E0 of the stored costs: a new query is normalised exactly like them
        cost_config = config.model_copy(update={"cost": config.cost.model_copy(
            update={"normalisation": "fixed", "t0_s": sc["t0_s"], "e0_j": sc["e0_j"]})})
        return cls(config=config, router=deployed_router(config, deployment), version=int(deployment.version),
                   dist=StateDistribution.model_validate(spec), cost_config=cost_config, deployment=deployment,
                   encoder=encoder, output_estimates=sc.get("output_token_estimates") or {
                       b: [float(v)] * len(config.models) for b, v in config.cost.default_output_tokens.items()},
                   counter=counter, _lock=lock)

    def with_deployment(self, deployment: Deployment) -> "OnlineRouter":
        """The online router of another deployment (a newer threshold table: a re-calibration, a new channel) that
        shares this one's encoder, tokenizer and lock: a live server swaps to it without loading them again."""
        return type(self)._of(self.config, deployment, self.encoder, self.counter, self._lock)

    def risk(self) -> dict:
        """The calibration rule of the deployed table and the risk its α bounds (issue 26; cr2.crc.RISKS)."""
        rule = self.router.threshold_table_.rule
        r = rule_risk(rule)
        return {"rule": rule, "risk": None if r is None else r.name, "risk_display": None if r is None else r.display}

    def describe(self) -> dict:
        table = self.router.threshold_table_
        return {**self.risk(), "gate_fingerprint": table.gate_fingerprint, "thresholds_version": self.version,
                "dist_id": table.dist_id, "label_source": table.label_source, "lams": list(table.lams),
                "alphas": list(table.alphas), "models": [m.id for m in self.config.models]}

    def calibration_set(self) -> RoutingSet:
        """Return the deployment's calibration split (calibration_split); an error when none is attached."""
        if self.deployment is None:
            raise UncalibratedOperatingPointError("this online router has no deployment to read its calibration split "
                                                  "from; load it with read_deployment (warehouse/deployment.py)")
        return self.deployment.calibration_set()

    def _tau(self, lam: float, alpha: float, benchmark: str | None = None) -> float:
        """τ*(λ; α) of the deployed table — of the query's own group for a Mondrian table (issue 21); an off-grid λ
        is calibrated by the router on the deployment's calibration split when routing.on_demand_calibration is set
        (else the router's error names the grid)."""
        table = self.router.threshold_table_
        if isinstance(table, GroupedThresholdTable):
            if table.group_by != "benchmark":
                raise UncalibratedOperatingPointError(
                    f"the deployed thresholds are per {table.group_by}; routing needs the query's {table.group_by}, "
                    "which `cr2 route` does not take — calibrate per benchmark or pooled (calibration.group)")
            return self.router.threshold(lam, alpha, group=benchmark)
        if (not table.has_lam(lam) and self.config.routing.on_demand_calibration
                and getattr(self.router, "calibration_set_", None) is None):
            self.router.set_threshold_table(table, calibration_set=self.calibration_set())
        return self.router.threshold(lam, alpha)

    def route(self, question: str, choices: list[str] | None, lam: float, alpha: float, distance_m: float | None = None,
              benchmark: str = "mmlu", seed: int = 0, tau: float | None = None,
              embedding: np.ndarray | None = None) -> dict:
        """The CR² decision for one query: accept/defer, score s, τ*, and every model's utility.

        tau: a target-mode choice's own certified τ (issue 21); embedding: e(x) [1, d] when the caller already
        encoded the text (micro-batching, cr2_cli/serve/batching.py).
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
        table = self.router.threshold_table_
        return {
            "accept_local": bool(dec.extra["gate_accept"][0]), "chosen_model": model_ids[int(dec.chosen[0])],
            "score": float(score[0]), "tau": float(tau), "lam": float(lam), "alpha": float(alpha),
            "distance_m": float(d[0]), "prompt_tokens": int(prompt_tokens[0]), "threshold_dist_id": table.dist_id,
            "thresholds_version": self.version, "label_source": table.label_source,
            **self.risk(),  # issue 26: what α bounds at this τ
            "models": [{"model_id": m, "p_correct": float(proba[0, i]), "cost_norm": float(costs.cost_norm[0, i]),
                        "latency_s": float(costs.latency_s[0, i]), "energy_j": float(costs.energy_j[0, i]),
                        "utility": float(util[i])} for i, m in enumerate(model_ids)],
        }

    # ------------------------------------------------------------ operate by target (issue 21)
    def choose_target(self, target_accuracy: float | None, budget: float | None) -> dict:
        """Return the certified (λ, α, τ) for an accuracy target or a cost budget (cached per target and version).

        The deployed gate and teacher score the deployment's calibration split; cr2.targets.choose_by_target splits
        it (seeded by the config) into a threshold half and a selection half and certifies the choice with
        Learn-then-Test at δ = calibration.target_delta.
        """
        from cr2.targets import choose_by_target
        from cr2.utility import risk_label

        key = (self.version, target_accuracy, budget)
        cache = self.__dict__.setdefault("_target_cache", {})
        if key in cache:
            return cache[key]
        cfg, table = self.config, self.router.threshold_table_
        val = self.calibration_set()
        lams = np.asarray(table.scored_lams)
        proba = self.router.proba(val.embedding)
        # [cr2 decision] the certified choice decides and accounts with the pre-execution cost ĉ: the only cost
        # known for a query before it runs (issue 16); a budget is therefore a bound on the mean estimated cost
        cost = np.asarray(val.decision_cost, dtype=np.float64)
        cal = cfg.calibration
        # issue 26: the candidates control the same risk as the deployed table (CRC on its label), and say so
        risk = rule_risk(table.rule).name if rule_risk(table.rule) else "teacher-disagreement"
        labels = risk_label(risk, lams, proba=proba, decision_cost=cost, correct=val.correct, cost=val.cost)
        choice = choose_by_target(self.router.scores(val.embedding, lams), labels, proba, cost,
                                  val.correct, lams, np.asarray(table.alphas), rng=np.random.default_rng(cfg.seed),
                                  rule=rule_for("crc", risk),
                                  target_accuracy=target_accuracy, budget=budget, delta=cal.target_delta,
                                  variant=cfg.routing.deferred_variant, cost_max=cal.cost_max,
                                  select_fraction=cal.target_select_fraction)
        cache[key] = choice.as_dict()
        return cache[key]

    def route_by_target(self, question: str, choices: list[str] | None, target_accuracy: float | None,
                        budget: float | None, distance_m: float | None = None, benchmark: str = "mmlu",
                        seed: int = 0) -> dict:
        """The CR² decision for one query at the operating point certified for the target (choose_target)."""
        c = self.choose_target(target_accuracy, budget)
        out = self.route(question, choices, c["lam"], c["alpha"], distance_m, benchmark, seed, tau=c["tau"])
        return {**out, "rule": c["rule"], "target_choice": c}  # the target's τ comes from c["rule"] (same risk)


__all__ = ["CalibrationSplit", "Deployment", "OnlineRouter", "calibration_split", "check_route_inputs", "deployed_router"]
