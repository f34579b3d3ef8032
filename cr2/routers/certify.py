"""Certified routing for every router: any router's local-acceptance score, calibrated by the rules of cr2.crc.

A certified router is a NAME, `<router>@<rule>` (e.g. `knn@crc-avoidable`): a catalogued router, a calibrated rule
of cr2.crc.RULE_REGISTRY, and nothing else — no code per router. It routes like CR²'s online rule (paper
Algorithm 1) with the router's own pieces:

    accept locally (m0)  iff  s(x, ξ; λ) ≥ τ(λ; α)            τ calibrated per λ on val (cr2.crc.calibrate_table)
    otherwise            m̂ = argmax_{m ∈ M_edge} p̂_m(x) − λ·ĉ_m(x, ξ)   the router's own best edge model

The score s is, by default, the utility margin of the router's p̂ (eq. teacher_margin with p̂ for p):

    s(x, ξ; λ) = (p̂_0 − λ·ĉ_0) − max_{m ∈ M_edge} (p̂_m − λ·ĉ_m)

A router may supply a score of its own instead: a method `local_score(batch, lam)` returning [n] (one λ) or
[n, n_lam] scores, −∞ at a λ where the score is not defined (CR²'s gate at λ = 0: that λ then defers everything,
τ = +∞), and optionally `local_score_fingerprint()` naming what the score depends on (default: fingerprint()).
The catalogue says which routers are certifiable: those with `predicts_proba: true`, and any whose class has
`local_score` (CR², by its gate score s = σ(Δ̂/T)).

Why the margin is float64: the utilities are computed the way cr2.method.utility computes every utility — float64,
elementwise, no reduction across queries — so the same p̂ and ĉ give bit-identical scores however the queries are
batched, and the exact thresholds of cr2.crc (the next float64 above a calibration score) apply unchanged as long as
deployment scores are computed by this same function (a table records score_dtype; decide() checks it). Rounding
the margin to float32 would merge distinct margins into ties for no gain.

Risks: teacher disagreement needs a teacher's p on the calibration set; a router without a teacher is calibrated
against CR²'s frozen teacher (passed in as `teacher_proba`), so the paper's risk means the same thing for every
certified router. Oracle disagreement and avoidable error need only the real labels.

Routing uses only pre-execution inputs: the query's embedding (through p̂ or the score), λ and the decision cost
ĉ (RoutingSet.decision_cost) — never the realised cost or correctness.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from cr2.crc import RULES, ThresholdTable, calibrate_table, rule_spec
from cr2.core.data import Decisions, RoutingSet
from cr2.core.errors import DataValidationError, InvalidValueError, NotFittedError, UncalibratedOperatingPointError
from cr2.method.utility import DEVICE_INDEX, risk_label, teacher_margin

SEPARATOR = "@"  # <router>@<rule>
UNCERTIFIED = "uncertified"  # <router>@uncertified: the router's own one-shot decision (evaluation rows only)
MARGIN_DTYPE = np.float64  # the dtype margin scores are computed, calibrated and compared in (module docstring)


# ---------------------------------------------------------------- names
@dataclass(frozen=True)
class CertifiedName:
    """A certified router's name: the catalogued router and the calibrated rule."""

    router: str  # a catalogue key, e.g. "knn" or "llmrank-bench"
    rule: str  # a calibrated RULE_REGISTRY key, e.g. "crc-avoidable"

    def __str__(self) -> str:
        return f"{self.router}{SEPARATOR}{self.rule}"


def certified_name(router: str, rule: str) -> str:
    """Return the certified router's name `<router>@<rule>`."""
    return str(CertifiedName(router, rule))


def _has_own_score(obj: Any) -> bool:
    return callable(getattr(obj, "local_score", None))


def certifiable_routers() -> list[str]:
    """The catalogued routers a rule can certify, in catalogue order: every entry that predicts p̂ (its margin is the
    score) and every entry whose class supplies `local_score` (e.g. CR²'s gate). Per-model entries are not routers
    with a score of their own and are left out."""
    from cr2.routers import catalogue

    out = []
    for name, entry in catalogue().items():
        if entry.per_model:
            continue
        if entry.predicts_proba or _has_own_score(entry.load_class()):
            out.append(name)
    return out


def parse_certified_name(name: str, *, routers: Sequence[str] | None = None) -> CertifiedName:
    """Return the parts of `<router>@<rule>`; a malformed name, an unknown or uncertifiable router or an unknown or
    uncalibrated rule is an error that says what is available (with a did-you-mean).

    routers: the names that may be certified (default: certifiable_routers(), which reads the catalogue).
    """
    from cr2.core.errors import did_you_mean

    example = "e.g. 'knn@crc-avoidable'"
    if not isinstance(name, str) or name.count(SEPARATOR) != 1:
        raise InvalidValueError(f"{name!r} is not a certified router name: write <router>{SEPARATOR}<rule>, {example} "
                                f"(rules: {', '.join(RULES)})")
    router, rule = name.split(SEPARATOR)
    if not router or not rule:
        raise InvalidValueError(f"{name!r} names no {'router' if not router else 'rule'}: write "
                                f"<router>{SEPARATOR}<rule>, {example}")
    if rule not in RULES:
        raise did_you_mean(f"calibration rule (in certified router {name!r})", rule, list(RULES))
    available = certifiable_routers() if routers is None else list(routers)
    if router not in available:
        from cr2.routers import catalogue

        if routers is None and router in catalogue():
            raise InvalidValueError(f"router '{router}' cannot be certified: it predicts no p̂ (catalogue "
                                    f"predicts_proba: false) and has no local_score; certifiable: {', '.join(available)}")
        raise did_you_mean(f"router (in certified router {name!r})", router, available)
    return CertifiedName(router, rule)


# ---------------------------------------------------------------- the score
def margin_score(p_hat: np.ndarray, decision_cost: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """Return the utility margin s = (p̂_0 − λ·ĉ_0) − max_edge (p̂_m − λ·ĉ_m), float64 [n] (scalar λ) or [n, n_lam].

    p_hat: [n, M] the router's p̂_m(x); decision_cost: [n, M] ĉ_m(x, ξ) (what the router decides with).
    """
    # eq. (teacher_margin) with the router's p̂ for the teacher's p: s = û_{m0} − max_{m ∈ M_edge} û_m
    return np.asarray(teacher_margin(p_hat, decision_cost, lam), dtype=MARGIN_DTYPE)


def local_scores(router: Any, batch: RoutingSet, lams: float | Sequence[float] | np.ndarray,
                 p_hat: np.ndarray | None = None) -> np.ndarray:
    """Return the router's local-acceptance scores on `batch`: [n] for one λ, [n, n_lam] for a vector of λ.

    The router's own `local_score(batch, lam)` when it has one, else the margin of its p̂ (`p_hat` when the caller
    has it already for these rows, else router.predict_proba(batch)).
    """
    if _has_own_score(router):
        out = np.asarray(router.local_score(batch, lams))
        expected = (len(batch),) if np.ndim(lams) == 0 else (len(batch), len(np.atleast_1d(lams)))
        if out.shape != expected:
            raise DataValidationError(f"{type(router).__name__}.local_score returned shape {out.shape}, expected {expected}")
        if not np.issubdtype(out.dtype, np.floating):
            raise DataValidationError(f"{type(router).__name__}.local_score returned {out.dtype} scores; a score is a "
                                      "float array in the dtype it is calibrated and deployed in")
        return out
    p_hat = router.predict_proba(batch) if p_hat is None else p_hat
    return margin_score(p_hat, batch.decision_cost, lams)


def score_fingerprint(router: Any) -> str:
    """Return the fingerprint of what the router's score depends on (a threshold table is bound to it)."""
    fn = getattr(router, "local_score_fingerprint", None) if _has_own_score(router) else None
    return str(fn() if callable(fn) else router.fingerprint())


def request_set(embedding: np.ndarray, decision_cost: np.ndarray, model_ids: Sequence[str],
                benchmark: str = "request") -> RoutingSet:
    """Return the RoutingSet of queries being routed now: e(x) [n, d] and ĉ_m(x, ξ) [n, M], nothing else.

    At request time correctness is unknown and no model has run, so `correct` is all False and the realised cost is
    the estimate itself: a certified decision reads only the embedding and decision_cost (module docstring), and a
    request set has nothing else to leak into it. ĉ is rounded to float32, as the warehouse stores the ĉ the table was
    calibrated on (warehouse/routing_data.py), so a request's margin is computed from ĉ of the same precision.
    """
    emb = np.asarray(embedding, dtype=np.float32)
    cost = np.asarray(decision_cost, dtype=np.float32)
    n = len(emb)
    return RoutingSet(query_id=np.array([f"request-{i}" for i in range(n)]), benchmark=np.full(n, benchmark),
                      embedding=emb, correct=np.zeros((n, len(model_ids)), dtype=bool), cost=cost,
                      model_ids=tuple(model_ids), cost_est=cost)


# ---------------------------------------------------------------- calibration
def calibration_risks(rule: str, val: RoutingSet, lams: Sequence[float] | np.ndarray,
                      teacher_proba: np.ndarray | None = None) -> np.ndarray:
    """Return the rule's 0/1 risk labels r_i(λ_j) on the calibration set, bool [n, n_lam].

    teacher disagreement needs a teacher's p on `val` (`teacher_proba` [n, M]: CR²'s frozen teacher for a router
    without one); the real-label risks need only val's correctness and decision cost.
    """
    spec = rule_spec(rule)
    if not spec.calibrated:
        raise InvalidValueError(f"rule '{rule}' is not calibrated from risks; certified routers use one of: {', '.join(RULES)}")
    if spec.risk == "teacher-disagreement" and teacher_proba is None:
        raise InvalidValueError(f"rule '{rule}' controls teacher disagreement: pass the frozen teacher's p on the "
                                "calibration set (teacher_proba=…, CR²'s teacher for a router without one)")
    lam_arr = np.asarray(lams, dtype=np.float64)
    return np.asarray(risk_label(spec.risk, lam_arr, proba=teacher_proba, decision_cost=val.decision_cost,
                                 correct=val.correct), dtype=bool)


def calibrate_certified(scores: np.ndarray, risks: np.ndarray, lams: Sequence[float] | np.ndarray,
                        alphas: Sequence[float] | np.ndarray, *, fingerprint: str, dist_id: str, label_source: str,
                        rule: str, delta: float | None = None) -> ThresholdTable:
    """Return the ThresholdTable τ(λ; α) of `rule` for a router's scores [n, n_lam] and risks [n, n_lam] on val.

    Calibrated by cr2.crc.calibrate_table — the same exact thresholds as CR²'s table — at every λ where the score is
    defined; a λ where it is −∞ for every query (a score undefined there, e.g. CR²'s gate at λ = 0) gets τ = +∞:
    the certified router defers everything there, which keeps any risk at 0 ≤ α.
    """
    scores = np.asarray(scores)
    lam_arr = np.asarray(lams, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] != len(lam_arr):
        raise InvalidValueError(f"scores {scores.shape} must be [n_calib, n_lam] = [n, {len(lam_arr)}]")
    undefined = np.isneginf(scores).all(axis=0) if len(scores) else np.zeros(len(lam_arr), dtype=bool)
    if undefined.all():
        raise DataValidationError("the score is −∞ at every λ of the grid: nothing to calibrate")
    table = calibrate_table(scores[:, ~undefined], np.asarray(risks)[:, ~undefined], lam_arr[~undefined], alphas,
                            gate_fingerprint=fingerprint, dist_id=dist_id, label_source=label_source, rule=rule,
                            delta=delta)
    if not undefined.any():
        return table
    rows = {lam: table.taus[i] for i, lam in enumerate(table.lams)}
    rows.update({float(lam): np.full(len(table.alphas), np.inf) for lam in lam_arr[undefined]})
    ordered = sorted(rows)
    return ThresholdTable(lams=tuple(ordered), alphas=table.alphas, taus=np.stack([rows[v] for v in ordered]),
                          n_calib=table.n_calib, gate_fingerprint=table.gate_fingerprint, dist_id=table.dist_id,
                          label_source=table.label_source, rule=table.rule, score_dtype=table.score_dtype,
                          delta=table.delta)


# ---------------------------------------------------------------- decisions
def certified_decisions(score: np.ndarray, tau: float, p_hat: np.ndarray, decision_cost: np.ndarray,
                        lam: float) -> Decisions:
    """Return the certified router's decisions at one (λ, τ): m0 iff s ≥ τ, else its own best edge model.

    The deferred choice is argmax_{m ∈ M_edge} p̂_m − λ·ĉ_m, ties → cheaper, then lower index (cr2.method.routing's
    edge-only rule, the same tie rule as cr2.method.utility); extra["gate_accept"] is the acceptance 1[s ≥ τ].
    """
    from cr2.method.routing import route

    # eq. (cr2_rule) with the router's score and p̂: m̂ = m0 if s ≥ τ(λ; α), else argmax_{M_edge} p̂_m − λ ĉ_m
    return route(score, tau, p_hat, decision_cost, lam, "edge-only")


def one_shot_decisions(p_hat: np.ndarray, decision_cost: np.ndarray, lam: float,
                       score: np.ndarray | None = None) -> Decisions:
    """Return the router's own, uncertified decisions argmax_{m ∈ M} p̂_m − λ·ĉ_m (the one-shot rule of
    cr2.routers.base), with gate_accept = 1[m̂ = m0]: the same router without a guarantee, for the decomposition."""
    from cr2.routers.base import one_shot_choice

    chosen = one_shot_choice(p_hat, decision_cost, lam)
    local = chosen == DEVICE_INDEX
    return Decisions(chosen=chosen, accepted_local=local, score=score,
                     extra={"gate_accept": local, "lam": float(lam), "variant": UNCERTIFIED})


# ---------------------------------------------------------------- the estimator
class CertifiedRouter:
    """A fitted router made certified under one rule: score → threshold table τ(λ; α) → decisions (route()).

        certified = CertifiedRouter(get_router("knn").fit(train, dev), "knn", rule="crc-avoidable")
        certified.calibrate(val, lams, alphas, dist_id=…, label_source=…)      # teacher_proba=… for the crc rule
        decisions = certified.route(test, lam=1.0, alpha=0.01)
    """

    def __init__(self, router: Any, router_name: str, rule: str = "crc", alpha: float = 0.01) -> None:
        spec = rule_spec(rule)  # did-you-mean on an unknown rule
        if not spec.calibrated:
            raise InvalidValueError(f"rule '{rule}' is not calibrated from risks; certified routers use one of: {', '.join(RULES)}")
        if not _has_own_score(router) and not callable(getattr(router, "predict_proba", None)):
            raise InvalidValueError(f"router '{router_name}' ({type(router).__name__}) has neither predict_proba nor "
                                    "local_score: it has no score to certify")
        self.router = router
        self.router_name = router_name
        self.rule = rule
        self.alpha = alpha

    @property
    def name(self) -> str:
        """The certified router's name, `<router>@<rule>`."""
        return certified_name(self.router_name, self.rule)

    def fingerprint(self) -> str:
        """The fingerprint of the score the thresholds are bound to (score_fingerprint of the router).

        Computed once per wrapped router and kept: a fitted router's fingerprint hashes its whole state (KNN: the
        train index, megabytes), and every τ lookup checks it — per query when served. The wrapped router is
        fitted and frozen; a refitted router gets a new CertifiedRouter."""
        cached = getattr(self, "_fingerprint", None)
        if cached is None or cached[0] is not self.router:
            cached = self._fingerprint = (self.router, score_fingerprint(self.router))
        return cached[1]

    def scores(self, batch: RoutingSet, lams: float | Sequence[float] | np.ndarray,
               p_hat: np.ndarray | None = None) -> np.ndarray:
        """The router's local-acceptance scores (local_scores): [n] for one λ, [n, n_lam] for a vector."""
        return local_scores(self.router, batch, lams, p_hat)

    def predict_proba(self, batch: RoutingSet) -> np.ndarray:
        """The router's p̂_m(x), [n, M]: what its deferred choice maximises (with −λ·ĉ_m)."""
        return np.asarray(self.router.predict_proba(batch))

    def calibrate(self, val: RoutingSet, lams: Sequence[float], alphas: Sequence[float], *, dist_id: str,
                  label_source: str, teacher_proba: np.ndarray | None = None, delta: float | None = None,
                  scores: np.ndarray | None = None) -> ThresholdTable:
        """Return (and keep, threshold_table_) τ(λ; α) of this rule on the calibration set `val`.

        `val` must not have been used to fit the router (exchangeability). scores: the router's scores on val at
        `lams` when the caller has them already ([n, n_lam]); teacher_proba: the teacher's p on val (the crc/ltt/
        empirical rules on teacher disagreement).
        """
        if len(val) == 0:
            raise DataValidationError("the calibration set is empty: nothing to calibrate on (check splits.val)")
        lam_arr = np.asarray(lams, dtype=np.float64)
        scores = self.scores(val, lam_arr) if scores is None else np.asarray(scores)
        risks = calibration_risks(self.rule, val, lam_arr, teacher_proba)
        self.threshold_table_ = calibrate_certified(scores, risks, lam_arr, alphas, fingerprint=self.fingerprint(),
                                                    dist_id=dist_id, label_source=label_source, rule=self.rule,
                                                    delta=delta)
        return self.threshold_table_

    def set_threshold_table(self, table: ThresholdTable) -> "CertifiedRouter":
        """Use a stored table (its rule must be this router's, its fingerprint this router's score's); returns self."""
        if table.rule != self.rule:
            raise InvalidValueError(f"the threshold table holds rule '{table.rule}', this certified router is '{self.name}'")
        table.check_fingerprint(self.fingerprint())
        self.threshold_table_ = table
        return self

    def threshold(self, lam: float, alpha: float | None = None) -> float:
        """τ(λ; α) from the table (α defaults to the router's); an off-grid λ or α is an error naming the grid."""
        table = getattr(self, "threshold_table_", None)
        if table is None:
            raise NotFittedError(f"certified router '{self.name}' is not calibrated; call calibrate(val, lams, alphas, …)")
        return table.tau(lam, self.alpha if alpha is None else alpha, self.fingerprint())

    def decide(self, batch: RoutingSet, lam: float, alpha: float | None = None, *, tau: float | None = None,
               score: np.ndarray | None = None, p_hat: np.ndarray | None = None) -> Decisions:
        """The certified decisions on `batch` at λ (τ from the table at α unless given; score/p_hat when the caller
        has them for these rows). Scores must be in the dtype the table was calibrated in."""
        tau = self.threshold(lam, alpha) if tau is None else tau
        p_hat = self.predict_proba(batch) if p_hat is None else p_hat  # the deferred choice needs p̂ in any case
        score = self.scores(batch, float(lam), p_hat) if score is None else np.asarray(score)
        table = getattr(self, "threshold_table_", None)
        if table is not None and str(score.dtype) != table.score_dtype:
            raise DataValidationError(f"scores are {score.dtype} but '{self.name}' was calibrated on {table.score_dtype} "
                                      "scores; an exact threshold holds only in the dtype it was calibrated in")
        decisions = certified_decisions(score, tau, p_hat, batch.decision_cost, float(lam))
        decisions.extra.update({"alpha": self.alpha if alpha is None else alpha, "router": self.name})
        return decisions

    def route(self, batch: RoutingSet, lam: float, alpha: float | None = None) -> Decisions:
        """The Router protocol: certified decisions for `batch` at λ and α (default: the router's α)."""
        if getattr(self, "threshold_table_", None) is None:
            raise UncalibratedOperatingPointError(f"certified router '{self.name}' has no threshold table; call "
                                                  "calibrate() or set_threshold_table() first")
        return self.decide(batch, lam, alpha)
