"""The deployed CR² router, defined once: its threshold table, the split it calibrates on, online routing, targets.

What a device would do (paper Algorithm 1): embed the query, score it with the gate at λ, accept locally
iff s ≥ τ*(λ; α), otherwise pick the edge model of best teacher utility p_m(x) − λ·c_m(x, ξ). The channel
state ξ is sampled from the deployed table's state distribution, or fixed by a given distance with mean
fading (|z|² = 1 on both links). An off-grid λ is an error naming the grid unless
routing.on_demand_calibration is set; then it is calibrated exactly on the deployment's calibration split.

Which split a deployment calibrates on (one definition, `calibration_split`): the val split of the
deployed table's OWN channel-state distribution and label source (the `dist_id` and `label_source` the
table records), with the config's split seed, encoder and decision cost. The table was calibrated on
exactly those rows, so on-demand calibration, target selection (cr2.method.targets) and the guarantee
validity check (tasks/guarantees.py) all read them — also after `cr2 recalibrate` deployed a table of
another state distribution than the config's. (For a table calibrated under the config's distribution, as in
`cr2 run`, these are the rows the config alone gives.)

Which router a deployment routes with (one definition, `deployed_name`): CR² itself ('cr2', its table from
`cr2 calibrate`), or a certified router `<router>@<rule>` (cr2.routers.certify: a catalogued router's score and the
table the certify stage of `cr2 run` stored under that name). A certified router decides with exactly
CR²'s request-time inputs — the embedding from the same encoder, λ, α and the decision cost ĉ computed
from the same channel state and output-length estimates — through CertifiedRouter.decide; it never sees
realised cost or correctness (cr2.routers.certify.request_set).

Pure: no database here. `Deployment` is what the warehouse holds about a deployment;
warehouse/deployment.py reads it (read_deployment), and the CLI, `cr2 serve` and the tasks pass it in.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cr2.config import Config, StateDistribution
from cr2.crc import GroupedThresholdTable, ThresholdTable, rule_for, rule_risk
from cr2.core.data import RoutingSet
from cr2.core.errors import DataValidationError, InvalidValueError, UncalibratedOperatingPointError

CR2 = "cr2"  # the deployed name of CR² with its own table (`cr2 calibrate`); any other is '<router>@<rule>'


def deployed_name(router: str = CR2, rule: str | None = None) -> str:
    """Return the name of the router to deploy: 'cr2' (CR² with its calibrated table) or '<router>@<rule>'.

    `--router cr2` alone is CR² as always; any other router needs a rule, and `--router cr2 --rule R` deploys
    CR²'s gate score certified by the certify stage under R ('cr2@R'). An unknown or uncertifiable router or an
    unknown rule is an error with a did-you-mean (cr2.routers.certify.parse_certified_name).
    """
    from cr2.routers.certify import certified_name, parse_certified_name
    from cr2.crc import RULES

    if rule is None:
        if router == CR2:
            return CR2
        parse_certified_name(certified_name(router, RULES[0]))  # an unknown router fails here, with a did-you-mean
        raise InvalidValueError(f"router '{router}' is deployed certified: add --rule, e.g. --router {router} "
                                f"--rule crc-avoidable (rules: {', '.join(RULES)})")
    return str(parse_certified_name(certified_name(router, rule)))


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
        """The keyword arguments of cr2_warehouse.routing_data.load_routing_sets for these rows (model_ids aside)."""
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
    # the artefacts the table's score comes from: CR²'s {"teacher": {"path", "fingerprint"}, "gate": {…}} (for 'cr2'
    # and 'cr2@<rule>'), or a fitted router's {"router": {"name", "path", "fingerprint"}}
    trained: dict
    split: CalibrationSplit  # calibration_split(config, table)
    load_sets: Callable[[tuple[str, ...]], dict[str, RoutingSet]]  # splits → RoutingSet of `split`'s rows (lazy)
    cost_scales: dict | None = None  # {t0_s, e0_j, output_token_estimates} of the table's states and labels
    state_spec: dict | None = None  # the stored spec of the table's state distribution
    router: str = CR2  # the deployed name: 'cr2' or a certified '<router>@<rule>' (deployed_name)

    def calibration_set(self) -> RoutingSet:
        """Return the calibration split's RoutingSet (an error naming the fix when it is empty)."""
        val = self.load_sets((self.split.split,))[self.split.split]
        if len(val) == 0:
            raise DataValidationError(f"the {self.split.split} split of '{self.split.dist_id}' / "
                                      f"'{self.split.label_source}' is empty: nothing to calibrate on; run `cr2 prepare`")
        return val


def deployed_router(config: Config, deployment: Deployment, num_threads: int = 1) -> Any:
    """Return the deployed router with its table set: the CR2Router of the table's teacher and gate ('cr2'), or the
    CertifiedRouter of a certified name (the fitted router, or CR² by its gate score for 'cr2@<rule>')."""
    from cr2.routers.cr2_router import CR2Router

    if deployment.router == CR2:
        return CR2Router.from_config(config, deployment.trained, num_threads=num_threads).set_threshold_table(
            deployment.table)
    from cr2.routers.certify import CertifiedRouter, parse_certified_name
    from cr2.routers import use_catalogues

    use_catalogues(config.baselines.catalogues)  # a router added from outside the package is found by its name
    name = parse_certified_name(deployment.router)
    if name.router == CR2:
        base = CR2Router.from_config(config, deployment.trained, num_threads=num_threads)
    else:
        from cr2.routers import load_router

        base = load_router(deployment.trained["router"]["path"])
    return CertifiedRouter(base, name.router, name.rule).set_threshold_table(deployment.table)


def decision_cost_inputs(config: Config, deployment: Deployment) -> dict[str, Any]:
    """Return what a device needs to compute a query's decision cost ĉ as `cr2 route` does (JSON-ready): the pool in
    order, the fixed normalisation T0/E0 of the stored costs, L̂_out per benchmark and model, the table's state
    distribution and the cost-model sections cr2.system.cost.compute_costs reads (models, hardware, communication, power,
    cost with normalisation 'fixed')."""
    sc, spec = _require_costs(deployment)
    cost = config.cost.model_copy(update={"normalisation": "fixed", "t0_s": sc["t0_s"], "e0_j": sc["e0_j"]})
    estimates = sc.get("output_token_estimates") or {
        b: [float(v)] * len(config.models) for b, v in config.cost.default_output_tokens.items()}
    return {"models": [m.id for m in config.models], "t0_s": float(sc["t0_s"]), "e0_j": float(sc["e0_j"]),
            "output_token_estimates": estimates, "state_distribution": spec,
            "cost_model": {"models": [m.model_dump(mode="json") for m in config.models],
                           "reference_model": config.reference_model,
                           "hardware": config.hardware.model_dump(mode="json"),
                           "communication": config.communication.model_dump(mode="json"),
                           "power": config.power.model_dump(mode="json"), "cost": cost.model_dump(mode="json")},
            "computed_by": "cr2.system.cost.compute_costs(prompt_tokens, output_token_estimates[benchmark], rate_ul, rate_dl, "
                           "...).cost_norm, rates from cr2.system.channel for the device's channel state"}


# ---------------------------------------------------------------- one validation of a routing request
def check_route_inputs(question: str, choices: list[str] | None, lam: float, alpha: float,
                       distance_m: float | None = None) -> None:
    """Raise DataValidationError naming the first bad input of one routing request (NaN and ±inf included).

    A request's inputs are data from a user (serve answers 422), hence DataValidationError.
    """
    from cr2.core.boundary import check_text
    from cr2.core.errors import InvalidValueError

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
        from cr2.inputs.embed import CHOICE_LETTERS

        if not all(isinstance(c, str) and c.strip() for c in choices):
            raise DataValidationError("every choice must be non-empty text")
        if len(choices) > len(CHOICE_LETTERS):
            raise DataValidationError(f"at most {len(CHOICE_LETTERS)} choices (A–Z), got {len(choices)}")
    if not (isinstance(lam, (int, float)) and math.isfinite(lam) and lam > 0):
        raise DataValidationError(f"λ must be a finite number > 0, got {lam}")
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and 0 < alpha < 1):
        raise DataValidationError(f"α must be a number in (0, 1), got {alpha}")
    from cr2.system.channel import MAX_DISTANCE_M, MIN_DISTANCE_M

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


TARGET_CACHE_SIZE = 64  # certified target choices an online router keeps (least recently used dropped first)
TARGET_ACCURACY_STEP = Decimal("0.001")  # the grid accuracy targets are certified on
TARGET_BUDGET_DIGITS = 3  # significant digits a cost budget is certified with


def served_target(target_accuracy: float | None, budget: float | None) -> tuple[float | None, float | None]:
    """The target a request is certified for: an accuracy rounded up to the TARGET_ACCURACY_STEP grid (at least the
    accuracy asked for: 0.9511 → 0.952), a budget rounded down to TARGET_BUDGET_DIGITS significant digits (at most
    the cost allowed: 0.01234 → 0.0123). Rounding in the safe direction keeps every guarantee asked for, and lets
    one certification — seconds of CPU — serve every target that rounds alike, so near-duplicate targets cannot
    each cost one or fill the cache. An accuracy above 1 − step cannot be rounded up: an InvalidValueError."""
    if target_accuracy is not None:
        rounded = Decimal(repr(float(target_accuracy))).quantize(TARGET_ACCURACY_STEP, rounding=ROUND_CEILING)
        if rounded >= 1:
            raise InvalidValueError(f"target_accuracy {target_accuracy:g} rounds up to 1 on the {TARGET_ACCURACY_STEP} "
                                    f"grid targets are certified on; ask for at most {1 - TARGET_ACCURACY_STEP}")
        target_accuracy = float(rounded)
    if budget is not None:
        exact = Decimal(repr(float(budget)))
        step = Decimal(1).scaleb(exact.adjusted() - (TARGET_BUDGET_DIGITS - 1))
        budget = float(exact.quantize(step, rounding=ROUND_FLOOR))
    return target_accuracy, budget


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
    def from_deployment(cls, config: Config, deployment: Deployment, encoder_dir: str | Path,
                        tokenizer_dir: str | Path) -> "OnlineRouter":
        """Return the online router of a deployment; the encoder's ONNX export is kept in `encoder_dir` and the
        tokenizer unpacked in `tokenizer_dir` (the store's tool folders, tasks/store.py)."""
        import threading

        from cr2.inputs.embed import load_encoder
        from cr2.inputs.tokenizer import qwen_token_counter

        _require_costs(deployment)  # before the encoder is loaded
        encoder = load_encoder(config.embedding.max_seq_length, backend=config.embedding.backend,
                               cache_dir=Path(encoder_dir))
        counter = qwen_token_counter(Path(tokenizer_dir))
        klass = cls if deployment.router == CR2 else CertifiedOnlineRouter
        return klass._of(config, deployment, encoder, counter, threading.Lock())

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

    @property
    def name(self) -> str:
        """The deployed router's name: 'cr2', or a certified '<router>@<rule>'."""
        return CR2 if self.deployment is None else self.deployment.router

    def risk(self) -> dict:
        """The deployed router's name, the calibration rule of its table and the risk its α bounds (cr2.crc.RISKS)."""
        rule = self.router.threshold_table_.rule
        r = rule_risk(rule)
        return {"router": self.name, "rule": rule, "risk": None if r is None else r.name,
                "risk_display": None if r is None else r.display}

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
        """τ*(λ; α) of the deployed table — of the query's own group for a Mondrian table; an off-grid λ
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
              benchmark: str | None = None, seed: int = 0, tau: float | None = None,
              embedding: np.ndarray | None = None) -> dict:
        """The deployed router's decision for one query: accept/defer, score s, τ*, and every model's utility.

        benchmark: whose output length L̂_out the costs assume (None: `default_benchmark`); tau: a target-mode
        choice's own certified τ; embedding: e(x) [1, d] when the caller already encoded the text (micro-batching,
        cr2_cli/serve/batching.py).
        """
        check_route_inputs(question, choices, lam, alpha, distance_m)
        benchmark = self.default_benchmark() if benchmark is None else benchmark
        with self._lock:  # torch modules and the tokenizer are shared across server threads
            # a target-mode choice brings its own certified τ (calibrated on the threshold half of val)
            tau = self._tau(float(lam), float(alpha), benchmark) if tau is None else float(tau)
            emb, prompt_tokens, d, costs = self._request_inputs(question, choices, distance_m, benchmark, seed,
                                                                embedding)
            proba, dec = self._decide(emb, costs.cost_norm, float(lam), float(alpha), tau)
        return self._answer(dec, proba, costs, tau, lam, alpha, d, prompt_tokens)

    def default_benchmark(self) -> str:
        """The benchmark a request that names none is costed as: the config's first enabled benchmark with an
        output-length estimate (the default pool: mmlu; a pool of one benchmark: that one)."""
        estimates = self.output_estimates
        known = [b for b in self.config.enabled_benchmarks if b in estimates] or sorted(estimates)
        if not known:
            raise DataValidationError("the deployment has no output-length estimate of any benchmark; run `cr2 prepare`")
        return known[0]

    def _request_inputs(self, question: str, choices: list[str] | None, distance_m: float | None, benchmark: str,
                        seed: int, embedding: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
        """What a router may decide one query with: e(x) [1, d], the prompt tokens, the UE–edge distance and the
        pre-execution costs (ĉ from the estimated output length L̂_out; cost_norm [1, M]) — the same for every
        deployed router. Called under the lock (the encoder and tokenizer are shared)."""
        from cr2.system.channel import channel_gain, downlink_rate_bps, sample_states, uplink_rate_bps
        from cr2.system.cost import compute_costs
        from cr2.inputs.embed import embed_texts, router_text

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
        return emb, prompt_tokens, d, costs

    def _decide(self, emb: np.ndarray, decision_cost: np.ndarray, lam: float, alpha: float,
                tau: float) -> tuple[np.ndarray, Any]:
        """(p [1, M], Decisions) of CR²: the teacher's p and Algorithm 1 at τ."""
        proba = self.router.proba(emb)
        return proba, self.router.decide(emb, decision_cost, lam, alpha, tau=tau, proba=proba)

    def _answer(self, dec: Any, proba: np.ndarray, costs: Any, tau: float, lam: float, alpha: float, d: np.ndarray,
                prompt_tokens: np.ndarray) -> dict:
        """The decision as `cr2 route` prints it and `cr2 serve` answers it."""
        from cr2.method.utility import teacher_utility

        score = dec.score
        util = teacher_utility(proba, costs.cost_norm, lam)[0]
        model_ids = [m.id for m in self.config.models]
        table = self.router.threshold_table_
        return {
            "accept_local": bool(dec.extra["gate_accept"][0]), "chosen_model": model_ids[int(dec.chosen[0])],
            "score": float(score[0]), "tau": float(tau), "lam": float(lam), "alpha": float(alpha),
            "distance_m": float(d[0]), "prompt_tokens": int(prompt_tokens[0]), "threshold_dist_id": table.dist_id,
            "thresholds_version": self.version, "label_source": table.label_source,
            **self.risk(),  # the router, and what α bounds at this τ
            "models": [{"model_id": m, "p_correct": float(proba[0, i]), "cost_norm": float(costs.cost_norm[0, i]),
                        "latency_s": float(costs.latency_s[0, i]), "energy_j": float(costs.energy_j[0, i]),
                        "utility": float(util[i])} for i, m in enumerate(model_ids)],
        }

    # ------------------------------------------------------------ operate by target
    def choose_target(self, target_accuracy: float | None, budget: float | None) -> dict:
        """Return the certified (λ, α, τ) for an accuracy target or a cost budget, rounded by `served_target`: the
        answer's `target` is the target certified, `target_requested` the one asked for. Cached per rounded target
        and version, the TARGET_CACHE_SIZE most recently used kept (each costs seconds to compute).

        The deployed gate and teacher score the deployment's calibration split; cr2.method.targets.choose_by_target
        splits it (seeded by the config) into a threshold half and a selection half and certifies the choice with
        Learn-then-Test at δ = calibration.target_delta.
        """
        requested = target_accuracy if target_accuracy is not None else budget
        target_accuracy, budget = served_target(target_accuracy, budget)
        key = (self.version, target_accuracy, budget)
        cache, lock = self._target_cache_and_lock()
        with lock:
            if key in cache:
                cache.move_to_end(key)
                return {**cache[key], "target_requested": requested}
        choice = self._certify_target(target_accuracy, budget)
        with lock:
            cache[key] = choice
            cache.move_to_end(key)
            while len(cache) > TARGET_CACHE_SIZE:
                cache.popitem(last=False)
        return {**choice, "target_requested": requested}

    def target_cached(self, target_accuracy: float | None, budget: float | None) -> bool:
        """Whether choose_target would answer this target from its cache (no computation)."""
        try:
            key = (self.version, *served_target(target_accuracy, budget))
        except InvalidValueError:
            return False
        cache, lock = self._target_cache_and_lock()
        with lock:
            return key in cache

    def _target_cache_and_lock(self) -> tuple[OrderedDict, Any]:
        import threading

        return self.__dict__.setdefault("_target_cache", OrderedDict()), self.__dict__.setdefault(
            "_target_lock", threading.Lock())

    def _certify_target(self, target_accuracy: float | None, budget: float | None) -> dict:
        """The certified choice for a (rounded) target: seconds of CPU on the calibration split."""
        from cr2.method.targets import choose_by_target
        from cr2.method.utility import risk_label

        cfg, table = self.config, self.router.threshold_table_
        val = self.calibration_set()
        lams = np.asarray(table.scored_lams)
        proba = self.router.proba(val.embedding)
        # [cr2 decision] the certified choice decides and accounts with the pre-execution cost ĉ: the only cost
        # known for a query before it runs; a budget is therefore a bound on the mean estimated cost
        cost = np.asarray(val.decision_cost, dtype=np.float64)
        cal = cfg.calibration
        # the candidates control the same risk as the deployed table (CRC on its label), and say so
        risk = rule_risk(table.rule).name if rule_risk(table.rule) else "teacher-disagreement"
        labels = risk_label(risk, lams, proba=proba, decision_cost=cost, correct=val.correct, cost=val.cost)
        choice = choose_by_target(self.router.scores(val.embedding, lams), labels, proba, cost,
                                  val.correct, lams, np.asarray(table.alphas), rng=np.random.default_rng(cfg.seed),
                                  rule=rule_for("crc", risk),
                                  target_accuracy=target_accuracy, budget=budget, delta=cal.target_delta,
                                  variant=cfg.routing.deferred_variant, cost_max=cal.cost_max,
                                  select_fraction=cal.target_select_fraction)
        return choice.as_dict()

    def route_by_target(self, question: str, choices: list[str] | None, target_accuracy: float | None,
                        budget: float | None, distance_m: float | None = None, benchmark: str | None = None,
                        seed: int = 0) -> dict:
        """The CR² decision for one query at the operating point certified for the target (choose_target)."""
        c = self.choose_target(target_accuracy, budget)
        out = self.route(question, choices, c["lam"], c["alpha"], distance_m, benchmark, seed, tau=c["tau"])
        return {**out, "rule": c["rule"], "target_choice": c}  # the target's τ comes from c["rule"] (same risk)


class CertifiedOnlineRouter(OnlineRouter):
    """A deployed certified router `<router>@<rule>`: CR²'s request path (encoder, states, ĉ) with the router's score,
    its stored table and its own best edge model (CertifiedRouter.decide).

    The answer has CR²'s fields; `score` is the router's local-acceptance score and each model's `p_correct` and
    `utility` are the router's p̂ and p̂ − λ·ĉ (for 'cr2@<rule>', the teacher's). Off-grid λ or α is an error naming
    the calibrated grid (no on-demand calibration: a certified table is calibrated by `cr2 run` on its stored
    scores). Target mode chooses CR²'s operating points only.
    """

    def _tau(self, lam: float, alpha: float, benchmark: str | None = None) -> float:
        return self.router.threshold(lam, alpha)

    def _decide(self, emb: np.ndarray, decision_cost: np.ndarray, lam: float, alpha: float,
                tau: float) -> tuple[np.ndarray, Any]:
        from cr2.routers.certify import request_set

        batch = request_set(emb, decision_cost, [m.id for m in self.config.models])
        p_hat = self.router.predict_proba(batch)
        return p_hat, self.router.decide(batch, lam, alpha, tau=tau, p_hat=p_hat)

    def choose_target(self, target_accuracy: float | None, budget: float | None) -> dict:
        raise UncalibratedOperatingPointError(f"target mode (--target-accuracy / --budget) chooses CR²'s operating "
                                              f"points; route '{self.name}' at a calibrated λ and α instead (--lam, --alpha)")


__all__ = ["CR2", "TARGET_CACHE_SIZE", "CalibrationSplit", "CertifiedOnlineRouter", "Deployment", "OnlineRouter", "calibration_split",
           "check_route_inputs", "decision_cost_inputs", "deployed_name", "deployed_router", "served_target"]
