"""The evaluation loop (paper §VII): every method over its λ (× α) sweep on the test split, as tidy rows.

Pure: RoutingSets, fitted routers and arrays in; an `Evaluation` (tidy metric rows + per-query decisions)
out. tasks/evaluate.py and tasks/ablation.py only load inputs, call these functions and write the result.

accuracy, cost and local_rate are taken over the `keep` rows (queries some model solves, when excluded as
in the paper); the false-acceptance risk over every test row, the exchangeable population the CRC
guarantee is about (dropping unsolvable queries would bias it).
"""
from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from cr2.crc import (RULE_REGISTRY, calibrate_thresholds, empirical_threshold, fixed_threshold, ltt_delta_per_lam,
                     rate_threshold, rule_spec)
from cr2.core.data import Decisions, RoutingSet
from cr2.evaluation.metrics import PER_QUERY_METRICS, MetricInputs, false_defers, local_accuracy, resplit_risk
from cr2.method.routing import VARIANTS
from cr2.method.utility import disagree_label, full_information_choice, risk_label


def subset_decisions(decisions: Decisions, idx: np.ndarray) -> Decisions:
    """Return the decisions of rows `idx` (per-row extras sliced, scalar extras kept)."""
    extra = {k: (v[idx] if isinstance(v, np.ndarray) and v.shape[:1] == decisions.chosen.shape else v)
             for k, v in decisions.extra.items()}
    return Decisions(chosen=decisions.chosen[idx], accepted_local=decisions.accepted_local[idx],
                     score=None if decisions.score is None else decisions.score[idx],
                     tau=decisions.tau[idx] if np.ndim(decisions.tau) == 1 else decisions.tau, extra=extra)


def benchmark_scopes(data: RoutingSet, keep: np.ndarray) -> list[tuple[str, dict[str, tuple[np.ndarray, RoutingSet]]]]:
    """Per benchmark ("all" first, then each benchmark): the rows each metric is computed on — "solvable" (kept rows,
    the paper's test set) and "all" (every row: the risk's population) — as (indices, the subset). They depend on the
    test set alone, so an evaluation computes them once for all its operating points."""
    out = []
    for bench in ["all", *sorted(set(data.benchmark))]:
        in_b = np.ones(len(data), dtype=bool) if bench == "all" else data.benchmark == bench
        idx, idx_all = np.flatnonzero(in_b & keep), np.flatnonzero(in_b)
        out.append((bench, {"solvable": (idx, data.subset(idx)), "all": (idx_all, data.subset(idx_all))}))
    return out


def metric_rows(run_id: str, method: str, lam: float, alpha: float | None, data: RoutingSet, decisions: Decisions,
                proba: np.ndarray, keep: np.ndarray, scopes: list | None = None,
                inputs: MetricInputs | None = None) -> list[dict[str, Any]]:
    """Return tidy metric rows (run, method, λ, α, benchmark, metric, value), pooled ('all') and per benchmark.
    scopes: benchmark_scopes(data, keep), and inputs: MetricInputs(data, proba, lam), when the caller has them already
    (an evaluation shares them between its operating points)."""
    inputs = MetricInputs(data, proba, lam) if inputs is None else inputs
    rows = []
    for bench, rows_of in (scopes if scopes is not None else benchmark_scopes(data, keep)):
        # the paper's test set excludes queries no model solves: every metric, risk included, on the same rows;
        # risk_all keeps the risk over every test row (the population the CRC guarantee is stated for)
        scope = {k: (idx, inputs.subset(idx, sub), subset_decisions(decisions, idx)) for k, (idx, sub) in rows_of.items()}
        (idx, q, dec), (idx_all, _, _) = scope["solvable"], scope["all"]
        values = {}
        for m in PER_QUERY_METRICS.values():  # each the mean of its per-query values (what the bootstrap resamples)
            _, q_m, dec_m = scope[m.rows]
            v = m.values(q_m, dec_m)
            values[m.name] = float(np.mean(v)) if len(v) else float("nan")
        values["local_accuracy"] = local_accuracy(q.data, dec)  # a ratio (correct among accepted), not a per-query mean
        values.update({"n": float(len(idx)), "n_risk": float(len(idx_all))})
        if "gate_accept" in decisions.extra:  # gate-error decomposition (CR² and its variants)
            values["false_defer"] = false_defers(q, dec)  # the same rows as `risk`
        rows += [{"run_id": run_id, "method": method, "lam": lam, "alpha": alpha, "benchmark": bench, "metric": k,
                  "value": v} for k, v in values.items()]
    return rows


@dataclass
class Evaluation:
    """What one evaluation produces: tidy metric rows and, per (method, λ, α), the chosen model of each test row."""

    run_id: str
    test: RoutingSet
    proba: np.ndarray  # [n, M] the frozen teacher's p_m(x) on test (risk is defined under it)
    keep: np.ndarray  # [n] bool, rows counted in accuracy / cost / local rate
    metrics: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[tuple[str, float, float | None, Decisions]] = field(default_factory=list)
    record_decisions: bool = True
    _inputs: dict[float, MetricInputs] = field(default_factory=dict, repr=False, compare=False)

    @functools.cached_property
    def scopes(self) -> list:
        """benchmark_scopes of the test set: computed once, shared by every operating point."""
        return benchmark_scopes(self.test, self.keep)

    def inputs(self, lam: float) -> MetricInputs:
        """The metrics' inputs on the test set at λ: its risk labels computed once, for every operating point at λ."""
        key = float(lam)
        if key not in self._inputs:
            self._inputs[key] = MetricInputs(self.test, self.proba, lam)
        return self._inputs[key]

    def record(self, method: str, lam: float, alpha: float | None, dec: Decisions) -> None:
        """Add one operating point's metric rows (and its decisions)."""
        self.metrics.extend(metric_rows(self.run_id, method, lam, alpha, self.test, dec, self.proba, self.keep,
                                        self.scopes, self.inputs(lam)))
        if self.record_decisions:
            self.decisions.append((method, lam, alpha, dec))


# the rules evaluated beside the deployed one at every (λ, α), as methods "cr2-<rule>": LTT on the paper's
# risk and the rules that control the realised risks on the calibration split's real labels
COMPARED_RULES = ("ltt", "crc-oracle", "crc-avoidable", "ltt-oracle", "ltt-avoidable")


def rule_thresholds(rule: str, s_val: np.ndarray, val: RoutingSet, val_proba: np.ndarray, lam: float,
                    alphas: Sequence[float], *, delta: float | None, n_lam: int) -> np.ndarray:
    """τ(λ; α) of a registered rule on the calibration split at one λ > 0, [n_alpha] (LTT at δ / n_lam per λ)."""
    spec = rule_spec(rule)
    r_val = risk_label(spec.risk, lam, proba=val_proba, decision_cost=val.decision_cost, correct=val.correct,
                       cost=val.cost)
    per_lam = ltt_delta_per_lam(float(delta), n_lam) if spec.needs_delta else None
    return calibrate_thresholds(s_val, r_val, alphas, rule, per_lam)


def evaluate_cr2(ev: Evaluation, router: Any, val: RoutingSet, *, default_alpha: float, n_resplits: int,
                 rng: np.random.Generator, fixed_rates: Sequence[float] = (), ltt_delta: float = 0.1,
                 compared_rules: Sequence[str] = COMPARED_RULES, groups: np.ndarray | None = None) -> None:
    """CR² at every calibrated (λ, α) of the router's threshold table, with its comparison rows.

    Per λ: CR² (the deployed table) and the empirical rule at every α, each rule of `compared_rules` at every α
    (method "cr2-<rule>", calibrated on val; the ltt rules at δ = ltt_delta over the table's λ grid), the other
    deferred-branch variants at the default α, the uncalibrated τ = 0.5 rule, the fixed-local-rate rules (accept
    the top f of val, the paper's ablation rows), the full-information reference, and the risk-vs-α Monte-Carlo
    bands over random calibration/test re-splits (n_resplits of them, drawn from `rng`: tasks pass
    resplit_rng(seed, CR2_BANDS), so the bands are cr2@crc's validity re-splits). At λ = 0 every rule defers everything
    (the gate is defined for λ > 0).

    A Mondrian table (calibration.group) routes "cr2" and its variants with each test query's own group
    threshold (`groups` [n], default the test benchmarks for a per-benchmark table); metric_rows then gives the
    pooled ("all") and the per-benchmark — per-group — metrics. The comparison rules stay pooled, calibrated on val.
    """
    test, proba = ev.test, ev.proba
    table = router.threshold_table_
    groups = router.batch_groups(test) if groups is None else np.asarray(groups)
    val_proba = router.proba(val.embedding)
    n_scored = len(table.scored_lams)
    for lam in table.lams:
        score = router.scores(test.embedding, lam)
        s_val, r_val = router.scores(val.embedding, lam), disagree_label(val_proba, val.decision_cost, lam)

        def decide(tau: float, variant: str | None = None) -> Decisions:
            return router.decide(test.embedding, test.decision_cost, lam, tau=tau, variant=variant, score=score, proba=proba)

        compared = {rule: (rule_thresholds(rule, s_val, val, val_proba, lam, table.alphas, delta=ltt_delta, n_lam=n_scored)
                           if lam else np.full(len(table.alphas), np.inf)) for rule in compared_rules}
        for j, alpha in enumerate(table.alphas):
            tau = router.query_thresholds(lam, alpha, groups)  # one τ, or each query's group τ (Mondrian)
            ev.record("cr2", lam, alpha, decide(tau))
            # the calibration-rule comparison: the same gate and α without the +1 correction
            ev.record("cr2-empirical", lam, alpha, decide(empirical_threshold(s_val, r_val, alpha) if lam else np.inf))
            for rule, taus in compared.items():
                ev.record(f"cr2-{rule}", lam, alpha, decide(float(taus[j])))
            for variant in VARIANTS:  # deferred-branch variants (paper Fig. ours_comparison)
                if variant != router.variant and abs(alpha - default_alpha) < 1e-12:
                    ev.record(f"cr2-{variant}", lam, alpha, decide(tau, variant))
        ev.record("cr2-fixed-0.5", lam, None, decide(fixed_threshold()))
        for rate in fixed_rates:
            ev.record(f"cr2-rate-{rate:g}", lam, None, decide(rate_threshold(s_val, rate) if lam else np.inf))
        full = full_information_choice(proba, test.decision_cost, lam)
        ev.record("full-info", lam, None, Decisions(chosen=full, accepted_local=full == 0, extra={"gate_accept": full == 0}))
        if n_resplits > 0 and lam > 0:
            _resplit_rows(ev, lam, np.asarray(table.alphas), s_val, r_val, score, disagree_label(proba, test.decision_cost, lam),
                          n_resplits, rng)


def evaluate_table(ev: Evaluation, router: Any, groups: np.ndarray | None = None) -> None:
    """CR² alone at every (λ, α) of the router's threshold table: the same "cr2" rows evaluate_cr2 records, without
    its comparison rows (what a re-calibration's before/after compares, at operator speed). A Mondrian table routes
    each test query at its own group's τ (`groups` as in evaluate_cr2)."""
    test = ev.test
    table = router.threshold_table_
    groups = router.batch_groups(test) if groups is None else np.asarray(groups)
    for lam in table.lams:
        score = router.scores(test.embedding, lam)
        for alpha in table.alphas:
            tau = router.query_thresholds(lam, alpha, groups)  # one τ, or each query's group τ (Mondrian)
            ev.record("cr2", lam, alpha, router.decide(test.embedding, test.decision_cost, lam, tau=tau,
                                                       score=score, proba=ev.proba))


def _resplit_rows(ev: Evaluation, lam: float, alphas: np.ndarray, s_val: np.ndarray, r_val: np.ndarray,
                  s_test: np.ndarray, r_test: np.ndarray, n_resplits: int, rng: np.random.Generator) -> None:
    """Risk vs α with Monte-Carlo bands: re-split calibration ∪ test at random, calibrate, measure."""
    risks = resplit_risk(np.concatenate([s_val, s_test]), np.concatenate([r_val, r_test]), len(s_val), alphas,
                         n_resplits, rng)
    for j, alpha in enumerate(alphas):
        for metric, value in _band(risks[:, j]).items():
            ev.metrics.append({"run_id": ev.run_id, "method": "cr2-resplit", "lam": lam, "alpha": float(alpha),
                               "benchmark": "all", "metric": metric, "value": value})


def evaluate_baseline(ev: Evaluation, name: str, lams: Sequence[float], *, p_hat: np.ndarray | None = None,
                      router: Any = None) -> None:
    """A one-shot baseline over `lams`: argmax p̂ − λ·c from its recorded p̂ when it predicts p̂, else its route()."""
    from cr2.routers.base import one_shot_choice

    for lam in lams:
        if p_hat is not None:
            chosen = one_shot_choice(p_hat, ev.test.decision_cost, lam)
            dec = Decisions(chosen=chosen, accepted_local=chosen == 0)
        else:
            dec = router.route(ev.test, float(lam))
        ev.record(name, float(lam), None, dec)


def evaluate_ablation_gate(ev: Evaluation, name: str, router: Any, val: RoutingSet, lams: Sequence[float],
                           alpha: float, *, dist_id: str, label_source: str) -> None:
    """One ablated gate (same frozen teacher): CRC-calibrated on val at α over `lams`, evaluated on test."""
    router.calibrate(val, lams, [alpha], dist_id=dist_id, label_source=label_source)
    for lam in lams:
        ev.record(f"ablation:{name}", float(lam), alpha,
                  router.decide(ev.test.embedding, ev.test.decision_cost, lam, alpha, proba=ev.proba))


# the Monte-Carlo band of a rule's test risk over re-splits, and how many re-splits it rests on
RESPLIT_METRICS = ("risk_mean", "risk_q05", "risk_q95", "risk_se", "risk_n")
# the certified method whose re-splits CR²'s own bands (method cr2-resplit) repeat: CRC on teacher disagreement
CR2_BANDS = "cr2@crc"


def resplit_rng(seed: int, method: str) -> np.random.Generator:
    """The re-split stream of one certified method `<router>@<rule>`, seeded by the run's seed and the method's name.

    A method's re-splits do not depend on which other routers or rules run, and CR²'s risk-vs-α bands (evaluate_cr2,
    method cr2-resplit, drawn from resplit_rng(seed, CR2_BANDS)) are the very re-splits of cr2@crc: the same scores,
    labels, calibration size and stream, so every α both grids hold gets the same numbers in both (one source)."""
    return np.random.default_rng([int(seed), zlib.crc32(method.encode())])


#: the confirmatory re-check's stream of a method: independent of its screening stream (another SeedSequence entropy)
CONFIRM_STREAM = 1


def confirm_rng(seed: int, method: str) -> np.random.Generator:
    """The stream a flagged (method, α) family is re-checked on: seeded by the run's seed, the method's name and
    CONFIRM_STREAM, so it shares no draw with resplit_rng(seed, method) and is stored with the run (its seed)."""
    return np.random.default_rng([int(seed), zlib.crc32(method.encode()), CONFIRM_STREAM])


def _band(risks: np.ndarray) -> dict[str, float]:
    """Mean, 5–95 % quantiles, standard error and count of a rule's test risk over re-splits [n_resplits]
    (RESPLIT_METRICS)."""
    return {"risk_mean": float(risks.mean()), "risk_q05": float(np.quantile(risks, 0.05)),
            "risk_q95": float(np.quantile(risks, 0.95)), "risk_se": float(risks.std(ddof=1) / np.sqrt(len(risks))),
            "risk_n": float(len(risks))}


def evaluate_certified(ev: Evaluation, router: str, tables: dict[str, Any], *, s_val: np.ndarray, s_test: np.ndarray,
                       p_hat_test: np.ndarray, val: RoutingSet, val_teacher_proba: np.ndarray, n_resplits: int,
                       seed: int, one_shot: bool) -> None:
    """A certified router under each rule (cr2.routers.certify) at every (λ, α) of its tables, with its validity check.

    tables: rule → ThresholdTable calibrated on val over one λ grid; s_val [n_val, n_lam], s_test [n_test, n_lam]:
    the router's scores at that grid (the dtype the tables were calibrated in); p_hat_test [n_test, M]: its p̂ on test
    (the deferred choice). Records method `<router>@<rule>` at every (λ, α), and per λ where the score is defined the
    risk-vs-α band over n_resplits random re-splits of val ∪ test (metrics `resplit_<RESPLIT_METRICS>` of that method,
    benchmark 'all': the same machinery as CR²'s cr2-resplit rows, on the rule's own risk; each method draws its
    re-splits from resplit_rng(seed, method), so cr2@crc's are cr2-resplit's). one_shot: also
    `<router>@uncertified`, the router's own one-shot decision (a router whose score is the margin of its p̂). Every
    router also as `<router>@no-device` at every λ: the device switched off (τ = +∞), a deploy rule candidate.
    """
    from cr2.crc import expected_resplit_risk
    from cr2.evaluation.deploy import NO_DEVICE
    from cr2.routers.certify import UNCERTIFIED, calibration_risks, certified_decisions, certified_name, one_shot_decisions

    test = ev.test
    lams = next(iter(tables.values())).lams
    n_scored = int((~np.isneginf(s_val).all(axis=0)).sum())  # the λ an ltt table divides δ over (calibrate_certified)
    rngs = {rule: resplit_rng(seed, certified_name(router, rule)) for rule in tables}  # one stream per method
    cells: dict[str, list] = {}  # rule → [(λ, pooled scores and risks, ltt δ per λ, risks over re-splits [R, α])]
    for j, lam in enumerate(lams):
        score = s_test[:, j]
        defined = bool(np.isfinite(s_val[:, j]).all() and np.isfinite(score).all())
        for rule, table in tables.items():
            name = certified_name(router, rule)
            i = table.lam_index(lam)
            for k, alpha in enumerate(table.alphas):
                ev.record(name, float(lam), float(alpha),
                          certified_decisions(score, float(table.taus[i, k]), p_hat_test, test.decision_cost, float(lam)))
            if n_resplits > 0 and defined:
                r_val = calibration_risks(rule, val, [lam], val_teacher_proba)[:, 0]
                r_test = calibration_risks(rule, test, [lam], ev.proba)[:, 0]
                per_lam = ltt_delta_per_lam(table.delta, n_scored) if rule_spec(rule).needs_delta else None
                pooled = np.concatenate([s_val[:, j], score]), np.concatenate([r_val, r_test])
                risks = resplit_risk(*pooled, len(val), np.asarray(table.alphas), n_resplits, rngs[rule], rule=rule,
                                     delta=per_lam)
                # what the mean of those re-splits estimates, exactly (the two-sided software check, cr2.crc.exact)
                exact = expected_resplit_risk(*pooled, len(val), np.asarray(table.alphas), rule=rule, delta=per_lam)
                cells.setdefault(rule, []).append((lam, pooled, per_lam, risks, exact))
                for k, alpha in enumerate(table.alphas):
                    ev.metrics += [{"run_id": ev.run_id, "method": name, "lam": float(lam), "alpha": float(alpha),
                                    "benchmark": "all", "metric": f"resplit_{metric}", "value": value}
                                   for metric, value in {**_band(risks[:, k]), "exact_mean": float(exact[k])}.items()]
        if one_shot:
            ev.record(certified_name(router, UNCERTIFIED), float(lam), None,
                      one_shot_decisions(p_hat_test, test.decision_cost, float(lam), score))
        # the device switched off: τ = +∞ accepts nothing, so every risk is 0 ≤ α (a deploy rule candidate)
        ev.record(certified_name(router, NO_DEVICE), float(lam), None,
                  certified_decisions(score, np.inf, p_hat_test, test.decision_cost, float(lam)))
    for rule, found in cells.items():
        ev.metrics += confirm_flagged(certified_name(router, rule), rule, tables[rule], found, len(val), n_resplits,
                                      seed, ev.run_id)


def confirm_flagged(name: str, rule: str, table: Any, found: list, n_calib: int, n_resplits: int, seed: int,
                    run_id: str) -> list[dict[str, Any]]:
    """The confirmatory re-check of a certified method: every α whose screening verdict over its λ cells is
    "violation detected", or whose means differ from their exact expectations (cr2.evaluation.validity's two tests),
    is re-split again on confirm_rng(seed, name) with
    cr2.evaluation.guarantees.confirm_resplits(n_resplits) re-splits, and its cells stored as metrics
    `resplit_confirm_<risk_mean | risk_se | risk_n>` — the verdict reported for that α is the one over those cells
    (cr2.report.validity.certified_verdicts), so one unlucky screening stream cannot decide it. Only crc-procedure
    rules carry a verdict over per-λ re-splits; others are never flagged here."""
    from cr2.evaluation.guarantees import confirm_resplits
    from cr2.evaluation.validity import DIFFERS_EXACT, VIOLATION, exactness_verdict, validity_verdict

    if rule not in RULE_REGISTRY or RULE_REGISTRY[rule].procedure != "crc" or not found:
        return []
    alphas = np.asarray(table.alphas, dtype=np.float64)
    bands = [[_band(risks[:, k]) for k in range(alphas.size)] for *_, risks, _ in found]
    means = np.array([[b[k]["risk_mean"] for k in range(alphas.size)] for b in bands])  # [λ, α]
    ses = np.array([[b[k]["risk_se"] for k in range(alphas.size)] for b in bands])
    exact = np.array([np.asarray(e, dtype=np.float64) for *_, e in found])
    flagged = [k for k in range(alphas.size)
               if validity_verdict(means[:, k], ses[:, k], float(alphas[k])).verdict == VIOLATION
               or exactness_verdict(means[:, k], ses[:, k], exact[:, k],
                                    n=[risks.shape[0] for *_, risks, _ in found]).verdict == DIFFERS_EXACT]
    if not flagged:
        return []
    rng, n_confirm = confirm_rng(seed, name), confirm_resplits(n_resplits)
    rows = []
    for lam, pooled, per_lam, _, _ in found:
        risks = resplit_risk(*pooled, n_calib, alphas[flagged], n_confirm, rng, rule=rule, delta=per_lam)
        for i, k in enumerate(flagged):
            rows += [{"run_id": run_id, "method": name, "lam": float(lam), "alpha": float(alphas[k]), "benchmark": "all",
                      "metric": f"resplit_confirm_{metric}", "value": value}
                     for metric, value in _band(risks[:, i]).items() if metric in ("risk_mean", "risk_se", "risk_n")]
    return rows


def certified_rows(run_id: str, test: RoutingSet, proba: np.ndarray, keep: np.ndarray, router: str,
                   tables: dict[str, Any], options: dict[str, Any]) -> tuple[list[dict[str, Any]], list]:
    """evaluate_certified(…, **options) on an Evaluation of its own: (metric rows, decisions) of one certified router.
    Routers are independent (each its own random stream), so their rows can be computed in separate processes
    (cr2.routers.fitting.run_fits) and joined in router order to the rows one Evaluation would hold."""
    ev = Evaluation(run_id=run_id, test=test, proba=proba, keep=keep)
    evaluate_certified(ev, router, tables, **options)
    return ev.metrics, ev.decisions


# the rows CR²'s evaluation adds beside the routers of the catalogue: method → (kind, display, colour)
DERIVED_METHODS: dict[str, tuple[str, str, str]] = {
    "cr2-empirical": ("cr2-rule", "empirical rule (no +1)", "#1f618d"),
    "cr2-fixed-0.5": ("uncalibrated", "fixed τ = 0.5", "#7f8c8d"),
    "cr2-inclusive": ("cr2-variant", "CR² inclusive", "#e74c3c"),
    "cr2-fallback": ("cr2-variant", "CR² fallback", "#f1948a"),
    "cr2-edge-only": ("cr2-variant", "CR² edge-only", "#c0392b"),
    "cr2-resplit": ("cr2-resplit", "CR² re-split bands", "#c0392b"),
    "full-info": ("reference", "full-information", "#555555"),
}


def _derived(method: str) -> tuple[str, str, str] | None:
    if method in DERIVED_METHODS:
        return DERIVED_METHODS[method]
    if method.startswith("cr2-") and method[4:] in RULE_REGISTRY and RULE_REGISTRY[method[4:]].calibrated:
        rule = RULE_REGISTRY[method[4:]]
        from cr2.crc import RISKS

        return ("cr2-risk-rule", f"CR² {rule.name} ({RISKS[rule.risk].display})", rule.colour or "#c0392b")
    if method.startswith("cr2-rate-"):
        return ("cr2-rate", f"fixed local rate f = {method[9:]}", "#a569bd")
    return None


def method_rows(run_id: str, methods: Sequence[str]) -> list[dict[str, Any]]:
    """Return one `methods` row per evaluated method: what it is, from the router catalogue (and DERIVED_METHODS)."""
    from cr2.routers import catalogue, router_entry

    cr2 = catalogue()["cr2"]
    rows = []
    for method in dict.fromkeys(methods):
        if _derived(method) is not None:
            kind, display, colour = _derived(method)
            row = {"router": "cr2", "kind": kind, "learned": kind != "uncalibrated" and kind != "reference",
                   "display": display, "colour": colour, "reference": False, "sort_order": cr2.order}
        elif "@" in method:  # a certified router <router>@<rule> (cr2.routers.certify), or <router>@uncertified
            row = _certified_row(method)
        elif method.startswith("ablation:"):
            row = {"router": "cr2", "kind": "ablation", "learned": True, "display": f"CR² ablation {method[9:]}",
                   "colour": cr2.colour, "reference": False, "sort_order": cr2.order}
        else:
            e = router_entry(method)
            display = e.display if method == e.name else f"{e.display}-{method[len(e.name) + 1:]}"
            row = {"router": e.name, "kind": e.kind, "learned": e.learned, "display": display, "colour": e.colour,
                   "reference": e.reference, "sort_order": e.order}
        rows.append({"run_id": run_id, "method": method, **row})
    return rows


# methods.kind of `<router>@<rule>`, `<router>@uncertified` and `<router>@no-device`
CERTIFIED_KINDS = ("certified", "uncertified-router", "no-device-router")


def _certified_row(method: str) -> dict[str, Any]:
    """The `methods` row of a certified router `<router>@<rule>` (kind certified) or of `<router>@uncertified` (the
    router's own one-shot decision through the same machinery, kind uncertified-router): the router's catalogue
    entry, displayed as "KNN @ crc-avoidable"."""
    from cr2.routers.certify import SEPARATOR, UNCERTIFIED, parse_certified_name
    from cr2.routers import router_entry

    from cr2.evaluation.deploy import NO_DEVICE

    router, _, rule = method.partition(SEPARATOR)
    if rule not in (UNCERTIFIED, NO_DEVICE):
        parse_certified_name(method, routers=[router])  # a malformed name or an unknown rule is an error here
    e = router_entry(router)
    kind = {UNCERTIFIED: CERTIFIED_KINDS[1], NO_DEVICE: CERTIFIED_KINDS[2]}.get(rule, CERTIFIED_KINDS[0])
    return {"router": e.name, "kind": kind, "learned": e.learned,
            "display": f"{e.display} @ {rule}", "colour": e.colour, "reference": False, "sort_order": e.order}
