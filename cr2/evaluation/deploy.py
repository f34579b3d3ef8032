"""Which router to deploy: a decision rule written down before the data (docs/guarantees.md, "Which router to
deploy", the text of RULE_TEXT verbatim; its hash is stored with every decision).

The rule answers per scenario × rule R at the default α with one of three things: a router to deploy, "no device"
(do not run a device model at this α: an edge-only candidate is the answer), or "undecided between X and Y" where
the data cannot tell a simpler candidate from the cheapest one. It never recommends from absence of evidence: a
simpler candidate is preferred only where it is *shown* non-inferior within the margin Δ fixed in RULE_TEXT.

The statistic of a candidate is L = the mean over the validation target grid (less the targets no Always-model reaches
on the test set) of log(what it is charged at the target: cr2.evaluation.fixed_accuracy.FallbackCost.charge, the
lower of its own frontier cost and the cheapest Always-model reaching the target, so L exists on every resample). A pair is tested on D = L_A − L_B, antisymmetric (B vs A
is −D), so each unordered pair is one test; shown as a geometric-mean saving 100·(1 − e^D) %, positive: A cheaper.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Mapping, Sequence

import numpy as np

from cr2.core.errors import InvalidValueError
from cr2.evaluation.statistics import CHEAPER, DEARER, bootstrap_intervals, holm_adjust, saving_verdict, significant

QUESTION = "deploy"  # equal_risk.question of the deploy rule's tests (one family per rule × α)
PAIR_METRIC = "geo_mean_saving_pct"  # a pair: 100·(1 − e^(L_a − L_b)); positive: a is cheaper
NONINFERIORITY_METRIC = "noninferiority_loss_pct"  # a simpler candidate vs the cheapest: 100·(e^(L_s − L_b) − 1)
COST_METRIC = "geo_mean_cost"  # a candidate: e^L, the geometric mean over the grid of its cost at the target

NO_DEVICE = "no-device"  # `<router>@no-device`: the router with the device switched off (τ = +∞, every query deferred)
ALWAYS_EDGE = "always-edge"  # the cheapest Always edge model that reaches each target: no router, no device

MARGIN_PCT = 2.0  # Δ: a simpler candidate whose cost is shown < (1 + Δ) × the cheapest's is preferred

# statuses of a candidate in a decision
OUT, CHEAPEST, NON_INFERIOR, OPEN, NOT_SIMPLER = "out", "cheapest", "non-inferior", "open", "not simpler"
# the answers
DEPLOY, NO_DEVICE_ANSWER, UNDECIDED = "deploy", "no device", "undecided"

RULE_TEXT = """\
Candidates, per scenario and rule R at the default α: every certified router X@R; every router with the device
switched off, X@no-device (τ = +∞: every query goes to the router's best edge model, so every risk is 0 ≤ α); and
always-edge, the cheapest Always edge model that reaches each target (no router, no device model).

Cost of a candidate: at each target of the validation target grid, the lower of its frontier's cost at risk ≤ α
and the cheapest Always-model's that reaches the target (an edge model for a candidate without a device; where no
such model reaches it on a resample, its frontier's cost, else the most accurate such model's), summarised as L =
the mean over the grid of log(cost); a grid target no Always-model reaches on the test set is left out. Every
statistic exists on every one of the evaluation's paired bootstrap resamples over the test queries.

Complexity, fixed before the data, compared in this order: (1) whether the candidate runs a device model;
(2) whether it runs a router (the shared MiniLM embedding and a router head); (3) its worst-case decision FLOPs per
query: its own head plus what every deferral needs (CR²: gate + teacher; a baseline: its head; the shared
embedding is the same for every router and not counted here). A device model (1.7 B parameters) outweighs any
router (below 10 M FLOPs per decision), and a router's head is what differs between routers.

Tests. One per unordered pair of candidates on D = L_A − L_B, two-sided, p from the paired bootstrap resamples
(2·min(#{D ≤ 0}, #{D ≥ 0}) / B), Holm over every pair of the rule (one family per scenario × rule × α); "cheaper" or
"dearer" only where the Holm p is below 0.05. Non-inferiority of every candidate S simpler than the estimated
cheapest C: H0 L_S − L_C ≥ log(1 + Δ) with Δ = 2 %, one-sided p = #{resamples with L_S − L_C ≥ log(1 + Δ)} / B,
Holm over the candidates compared with C; shown where the Holm p is below 0.05 (then the one-sided 95 % upper
bound of the loss is below Δ).

Decision:
1. a candidate called "dearer" than another — in this family, or in any stored comparison of two certified
   sides of the same rule and α (certified-score, pairwise) — is out;
2. C is the candidate with the lowest estimated L among the others;
3. the recommendation is the simplest of C and the candidates shown non-inferior to C;
4. if a candidate simpler than the recommendation is neither out nor shown non-inferior, the answer is "undecided
   between" the recommendation and it, with both estimates — never one name;
5. otherwise, if the recommendation runs no device model, the answer is "no device" (do not run a device model at
   this α); else "deploy" it."""

RULE_SHA = hashlib.sha256(RULE_TEXT.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Candidate:
    """One candidate of the deploy rule with the whole cost of its decisions (per query)."""

    name: str  # the evaluated side: `<router>@<rule>`, `<router>@no-device`, or ALWAYS_EDGE
    router: str | None  # its catalogue router; None: always-edge (no router)
    device: bool  # runs a device model
    flops_device: int  # decision FLOPs on the device before the decision (a router's head; CR²: its gate)
    flops_edge: int  # decision FLOPs per deferred query after it (CR²: the teacher that picks the edge model)
    defer_share: float = float("nan")  # share of test queries deferred, mean over the side's λ sweep (descriptive)
    params: int | None = None  # parameters the router holds (CR²: gate + teacher)
    fit_seconds: float | None = None  # the router's training time as stored with its artefact
    stored_bytes: int | None = None  # size of its stored fitted files: what a deployment loads (a KNN's index too)

    @property
    def runs_router(self) -> bool:
        return self.router is not None

    @property
    def flops_worst(self) -> int:
        """Decision FLOPs per query when the query is deferred (the figure the rule ranks by)."""
        return int(self.flops_device + self.flops_edge)

    @property
    def flops_expected(self) -> float:
        """Decision FLOPs per query at the side's mean deferral share: device head + P(defer)·edge."""
        share = self.defer_share if np.isfinite(self.defer_share) else 1.0
        return float(self.flops_device + share * self.flops_edge)

    @property
    def complexity(self) -> tuple:
        """The rule's complexity order (RULE_TEXT): device model, router, worst-case decision FLOPs; name breaks ties."""
        return (self.device, self.runs_router, self.flops_worst, self.name)


@dataclass(frozen=True)
class DeployDecision:
    """The decision of one (scenario, rule, α), with every test it rests on."""

    rule: str
    alpha: float
    answer: str  # DEPLOY, NO_DEVICE_ANSWER or UNDECIDED
    recommended: str  # the recommendation (under UNDECIDED: the one the simpler candidates could not be told from)
    undecided_with: tuple[str, ...]  # the simpler candidates neither out nor shown non-inferior (UNDECIDED only)
    cheapest: str  # C: the lowest estimated L among the candidates not out
    status: Mapping[str, str]  # candidate → OUT / CHEAPEST / NON_INFERIOR / OPEN / NOT_SIMPLER
    out_by: Mapping[str, tuple[str, ...]]  # candidate → the candidates it is detectably dearer than
    cost: Mapping[str, tuple[float, float, float]]  # candidate → geometric-mean cost (estimate, lower, upper)
    margin_pct: float = MARGIN_PCT
    rule_sha: str = RULE_SHA
    n_pairs: int = 0  # the pairwise family's size
    n_noninferiority: int = 0  # the non-inferiority family's size
    candidates: tuple[Candidate, ...] = field(default_factory=tuple)

    @property
    def names(self) -> tuple[str, ...]:
        """The answer's candidate names: one where the rule decides, the recommendation and the others where not."""
        return (self.recommended, *self.undecided_with)


@dataclass(frozen=True)
class RouterHead:
    """What one router computes per decision and holds (from its stored artefacts)."""

    flops_choose: int  # the p̂ that picks the edge model of a deferred query (a baseline's head; CR²: its teacher)
    flops_gate: int | None = None  # a separate on-device decision head (CR²: its gate); None: the chooser decides
    params_choose: int | None = None
    params_gate: int | None = None
    bytes_choose: int | None = None  # size of the stored chooser (a KNN: its index of training embeddings)
    bytes_gate: int | None = None
    fit_seconds: float | None = None  # training time of everything the router holds


def deploy_candidates(rule: str, routers: Sequence[str], heads: Mapping[str, RouterHead],
                      defer_share: Mapping[str, float] | None = None) -> list[Candidate]:
    """The candidates of RULE_TEXT under `rule`: always-edge, and per router `<router>@<rule>` (device on) and
    `<router>@no-device`. defer_share: side name → its mean deferral share on test (descriptive; missing: unknown)."""
    from cr2.routers.certify import certified_name

    missing = [r for r in routers if r not in heads]
    if missing:
        raise InvalidValueError(f"no stored FLOPs for router(s) {missing}: the deploy rule ranks by the whole decision "
                                "cost (re-run `cr2 run` so their artefacts are stored)")
    share = dict(defer_share or {})
    out = [Candidate(ALWAYS_EDGE, None, False, 0, 0, 1.0)]
    for r in routers:
        h = heads[r]
        on = certified_name(r, rule)
        params = None if h.params_choose is None else int(h.params_choose) + int(h.params_gate or 0)
        held = None if h.bytes_choose is None else int(h.bytes_choose) + int(h.bytes_gate or 0)
        if h.flops_gate is None:  # the router's own p̂ both decides and picks the edge model
            out.append(Candidate(on, r, True, int(h.flops_choose), 0, share.get(on, float("nan")), params,
                                 h.fit_seconds, held))
        else:
            out.append(Candidate(on, r, True, int(h.flops_gate), int(h.flops_choose), share.get(on, float("nan")),
                                 params, h.fit_seconds, held))
        out.append(Candidate(certified_name(r, NO_DEVICE), r, False, 0, int(h.flops_choose), 1.0, h.params_choose,
                             h.fit_seconds, h.bytes_choose))
    return out


def grid_log_cost(full: np.ndarray, resampled: np.ndarray, columns: np.ndarray) -> tuple[float, np.ndarray]:
    """L = mean over the grid columns of log(cost), on the full test set (a float) and on every resample [B]."""
    f, r = np.asarray(full, dtype=np.float64)[columns], np.asarray(resampled, dtype=np.float64)[:, columns]
    if not (np.isfinite(f).all() and np.isfinite(r).all()) or (f <= 0).any() or (r <= 0).any():
        raise InvalidValueError("a deploy candidate's cost must be finite and positive at every grid target on every "
                                "resample (give it a fallback)")
    return float(np.log(f).mean()), np.log(r).mean(axis=1)


def _ratio_pct(d: np.ndarray | float) -> np.ndarray:
    return 100.0 * (1.0 - np.exp(d))


def noninferiority_p(diff: np.ndarray, margin_log: float) -> float:
    """One-sided bootstrap p of H0 "diff ≥ margin": the share of resamples at or above the margin."""
    d = np.asarray(diff, dtype=np.float64)
    return float((d >= margin_log).sum() / d.size)


def one_sided_upper(diff: np.ndarray, level: float = 0.95) -> float:
    """The one-sided `level` upper bound of `diff` from its resamples: s_(B − r) with r = ⌈(1 − level)·B⌉ − 1, the
    order statistic for which "bound < m" holds exactly where noninferiority_p(diff, m) < 1 − level."""
    s = np.sort(np.asarray(diff, dtype=np.float64))
    r = max(0, math.ceil((1.0 - level) * s.size - 1e-9) - 1)
    return float(s[s.size - 1 - r])


def deploy_decision(candidates: Sequence[Candidate], log_cost: Mapping[str, tuple[float, np.ndarray]], rule: str,
                    alpha: float, *, dearer_elsewhere: Mapping[str, Sequence[str]] | None = None,
                    margin_pct: float = MARGIN_PCT, level: float = 0.95) -> tuple[DeployDecision, list[dict[str, Any]]]:
    """The decision of RULE_TEXT and its tests' rows.

    log_cost: candidate → (L on the full test set, L on each resample [B]), every resample of one shared index;
    dearer_elsewhere: candidate → the candidates another stored comparison of the same rule and α calls it dearer than
    (called_dearer over the certified-score and pairwise rows). Returns (decision, rows) with rows in `equal_risk`'s tidy form (question
    QUESTION): one COST_METRIC row per candidate, one PAIR_METRIC row per unordered pair (simpler first) with its
    Holm p and word, one NONINFERIORITY_METRIC row per candidate simpler than the cheapest."""
    cands = sorted(candidates, key=lambda c: c.complexity)
    names = [c.name for c in cands]
    if len(set(names)) != len(names):
        raise InvalidValueError(f"deploy candidates must have distinct names, got {names}")
    missing = [n for n in names if n not in log_cost]
    if missing or len(cands) < 2:
        raise InvalidValueError(f"the deploy rule needs ≥ 2 candidates with costs; without costs: {missing}")
    b = {np.asarray(log_cost[n][1]).shape for n in names}
    if len(b) != 1:
        raise InvalidValueError(f"every candidate's L must rest on the same resamples, got shapes {sorted(b)}")
    base = {"question": QUESTION, "rule": rule, "alpha": float(alpha), "target": None, "level": level}
    rows: list[dict[str, Any]] = []
    est = {n: float(log_cost[n][0]) for n in names}
    cost: dict[str, tuple[float, float, float]] = {}
    for c in cands:
        s = np.asarray(log_cost[c.name][1], dtype=np.float64)
        lo, hi, _ = bootstrap_intervals(np.exp(s)[:, None], np.array([math.exp(est[c.name])]), level)
        cost[c.name] = (math.exp(est[c.name]), float(lo[0]), float(hi[0]))
        rows.append({**base, "router": c.router or ALWAYS_EDGE, "against": None, "method_a": c.name, "method_b": None,
                     "metric": COST_METRIC, "estimate": cost[c.name][0], "lower": cost[c.name][1],
                     "upper": cost[c.name][2], "n_resamples": int(s.size), "p_value": None, "p_holm": None,
                     "verdict": None})
    pairs = list(combinations(cands, 2))  # simpler first: a pair's saving is the simpler side's
    diffs = np.stack([np.asarray(log_cost[a.name][1]) - np.asarray(log_cost[b_.name][1]) for a, b_ in pairs], axis=1)
    pair_est = np.array([est[a.name] - est[b_.name] for a, b_ in pairs])
    lower, upper, p = bootstrap_intervals(_ratio_pct(diffs), _ratio_pct(pair_est), level)
    p_holm = holm_adjust(p)
    out_by: dict[str, set[str]] = {n: set() for n in names}
    for n, others in (dearer_elsewhere or {}).items():
        if n in out_by:
            out_by[n].update(o for o in others if o in out_by)
    for k, (a, b_) in enumerate(pairs):
        word = saving_verdict(float(lower[k]), float(upper[k]), float(p_holm[k]), level)
        if word == DEARER:
            out_by[a.name].add(b_.name)
        elif word == CHEAPER:
            out_by[b_.name].add(a.name)
        rows.append({**base, "router": a.router or ALWAYS_EDGE, "against": b_.router or ALWAYS_EDGE,
                     "method_a": a.name, "method_b": b_.name,
                     "metric": PAIR_METRIC, "estimate": float(_ratio_pct(pair_est[k])), "lower": float(lower[k]),
                     "upper": float(upper[k]), "n_resamples": int(diffs.shape[0]), "p_value": float(p[k]),
                     "p_holm": float(p_holm[k]), "verdict": word, "family": f"deploy/{rule}/alpha={float(alpha):g}/pairs",
                     "family_size": len(pairs)})
    alive = [c for c in cands if not out_by[c.name]]
    status = {c.name: OUT for c in cands if out_by[c.name]}
    pool = alive or cands  # every candidate out (only possible through other comparisons): nothing is decided
    cheapest = min(pool, key=lambda c: (est[c.name], c.complexity))
    status[cheapest.name] = CHEAPEST
    simpler = [c for c in alive if c.complexity < cheapest.complexity]
    margin_log = math.log1p(margin_pct / 100.0)
    losses = [np.asarray(log_cost[s.name][1]) - np.asarray(log_cost[cheapest.name][1]) for s in simpler]
    ni_p = np.array([noninferiority_p(d, margin_log) for d in losses])
    ni_holm = holm_adjust(ni_p) if len(simpler) else ni_p
    shown = []
    for s, d, pv, ph in zip(simpler, losses, ni_p, ni_holm):
        ok = significant(float(ph), level)
        status[s.name] = NON_INFERIOR if ok else OPEN
        if ok:
            shown.append(s)
        rows.append({**base, "router": s.router or ALWAYS_EDGE, "against": cheapest.router or ALWAYS_EDGE,
                     "method_a": s.name,
                     "method_b": cheapest.name, "metric": NONINFERIORITY_METRIC,
                     "estimate": float(math.expm1(est[s.name] - est[cheapest.name]) * 100.0), "lower": None,
                     "upper": float(math.expm1(one_sided_upper(d, level)) * 100.0), "n_resamples": int(d.size),
                     "p_value": float(pv), "p_holm": float(ph),
                     "verdict": f"non-inferior within {margin_pct:g} %" if ok else "non-inferiority not shown",
                     "family": f"deploy/{rule}/alpha={float(alpha):g}/non-inferiority", "family_size": len(simpler)})
    for c in cands:
        status.setdefault(c.name, NOT_SIMPLER)
    pick = min([cheapest, *shown], key=lambda c: c.complexity)
    still_open = tuple(c.name for c in simpler if status[c.name] == OPEN and c.complexity < pick.complexity)
    if not alive:
        answer, still_open = UNDECIDED, tuple(c.name for c in cands if c.name != pick.name)
    elif still_open:
        answer = UNDECIDED
    else:
        answer = NO_DEVICE_ANSWER if not pick.device else DEPLOY
    for r in rows:
        r.setdefault("n_targets", None)
    decision = DeployDecision(rule, float(alpha), answer, pick.name, still_open, cheapest.name, status,
                              {n: tuple(sorted(v)) for n, v in out_by.items()}, cost, float(margin_pct), RULE_SHA,
                              len(pairs), len(simpler), tuple(cands))
    return decision, rows


def called_dearer(rows: Sequence[Mapping[str, Any]], rule: str, alpha: float,
                  metrics: Sequence[str] = ("mean_saving_pct",), questions: Sequence[str] | None = None
                  ) -> dict[str, list[tuple[str, str]]]:
    """side → [(the side a stored word calls it dearer than, the row's question)], over the `rows` (equal_risk's tidy
    form) of `rule` at `alpha` whose metric is one of `metrics` (and question one of `questions`, where given): a
    row's "dearer" counts against its side a, its "cheaper" against its side b."""
    out: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        a_, b_, word, at = r.get("method_a"), r.get("method_b"), r.get("verdict"), r.get("alpha")
        if r.get("rule") != rule or r.get("metric") not in metrics or (questions and r.get("question") not in questions) \
                or at is None or at != at or abs(float(at) - float(alpha)) > 1e-12:
            continue
        if word == DEARER:
            out.setdefault(a_, []).append((b_, r.get("question")))
        elif word == CHEAPER:
            out.setdefault(b_, []).append((a_, r.get("question")))
    return out


def contradictions(decision: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every stored word of the run that calls the recommendation of `decision` (a deploy_decisions row) dearer than
    another side at the decision's rule and α — in the deploy family or in any certified comparison. Empty where the
    answer contradicts no detected difference."""
    if decision["answer"] == UNDECIDED:
        return []  # undecided recommends no candidate: nothing to contradict
    rec = str(decision["recommended"])
    found = called_dearer(rows, decision["rule"], float(decision["alpha"]), (PAIR_METRIC, "mean_saving_pct"))
    return [f"{rec} dearer than {other} ({question})" for other, question in found.get(rec, [])]


def decision_record(d: DeployDecision) -> dict[str, Any]:
    """The stored row of a decision (table deploy_decisions)."""
    return {"rule": d.rule, "alpha": d.alpha, "answer": d.answer, "recommended": d.recommended,
            "undecided_with": ",".join(d.undecided_with), "cheapest": d.cheapest, "margin_pct": d.margin_pct,
            "rule_sha": d.rule_sha, "n_pairs": d.n_pairs, "n_noninferiority": d.n_noninferiority}


def candidate_records(d: DeployDecision) -> list[dict[str, Any]]:
    """The stored rows of a decision's candidates with the whole cost of their decisions (table deploy_candidates)."""
    return [{"rule": d.rule, "alpha": d.alpha, "candidate": c.name, "router": c.router, "device": c.device,
             "runs_router": c.runs_router, "flops_device": c.flops_device, "flops_edge": c.flops_edge,
             "flops_worst": c.flops_worst, "flops_expected": c.flops_expected,
             "defer_share": c.defer_share if np.isfinite(c.defer_share) else None, "params": c.params,
             "stored_bytes": c.stored_bytes,
             "fit_seconds": c.fit_seconds, "complexity_rank": i + 1, "geo_mean_cost": d.cost[c.name][0],
             "geo_mean_cost_lower": d.cost[c.name][1], "geo_mean_cost_upper": d.cost[c.name][2],
             "status": d.status[c.name], "out_by": ",".join(d.out_by.get(c.name, ()))}
            for i, c in enumerate(d.candidates)]


__all__ = ["ALWAYS_EDGE", "COST_METRIC", "Candidate", "RouterHead", "called_dearer", "contradictions", "deploy_candidates", "DeployDecision", "MARGIN_PCT", "NONINFERIORITY_METRIC",
           "NO_DEVICE", "PAIR_METRIC", "QUESTION", "RULE_SHA", "RULE_TEXT", "candidate_records", "decision_record",
           "deploy_decision", "grid_log_cost", "noninferiority_p", "one_sided_upper"]
