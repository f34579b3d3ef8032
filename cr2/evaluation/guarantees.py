"""Validity shown, not claimed: each calibration rule's promise checked over random calibration/test re-splits.

One exchangeable pool (the val + test queries of a warehouse, or a synthetic pool) is split at random,
n_resplits times, into a calibration set of n_calib queries and a test set of the rest. Each split
calibrates every rule on the calibration set and measures on the test set:

- crc       mean test risk per (λ, α) over re-splits ≤ α                     (its promise: in expectation, per λ)
- ltt       share of re-splits where ANY λ has test risk > α ≤ δ              (with prob. ≥ 1 − δ, all λ at once)
- mondrian  per group, mean test risk per (λ, α) ≤ α                        (in expectation, within each group)
- target    share of re-splits where the chosen point misses the target ≤ δ (with prob. ≥ 1 − δ)
- crc-oracle, crc-avoidable, ltt-oracle, ltt-avoidable (when `realised` risk labels are given): the
  crc / ltt promises above for the realised risks on the real labels — each calibrated on its own label and
  checked against the test mean (crc) or the pool's exact risk (ltt) of that same label

Beside each rule's price (local rate, cost, accuracy at the same (λ, α) as plain CRC), the price rows carry the
mean test value of every risk under that rule (metrics teacher_risk, oracle_risk, avoidable_risk), so the
realised risks of the paper's rule are reported beside those of the rules that control them.

with Monte-Carlo standard errors (sd/√B for means, √(p(1 − p)/B) for shares). The high-probability
promises (ltt, target) are about the risk of the distribution the calibration set was drawn from; in a
re-split design that distribution is the pool itself, so their shares are reported against the pool's
exact risk (metric *_pool, the check) and, for comparison, against the held-out test split (*_test,
which also counts misses that are only test-set noise, so it overstates the miss rate). Beside each rule, its price: mean test local rate, mean cost and accuracy at the
same (λ, α) as plain CRC. Results are tidy records (one row per check × rule × λ × α × group × metric)
for the warehouse table `guarantees` and the view v_guarantees.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from cr2.crc import calibrate_group_tables, calibrate_table, rule_for
from cr2.core.errors import DataValidationError, TargetInfeasibleError
from cr2.method.routing import deferred_choice
from cr2.method.targets import choose_by_target

PRICE_LAMS = (0.5, 1.0, 2.0, 8.0)  # the paper's headline λ values and λ = 1
CHECKS = ("crc_mean_risk", "crc_any_violation", "ltt_any_violation", "mondrian_mean_risk", "crc_group_mean_risk",
          "target_miss", "price")


@dataclass(frozen=True)
class ResplitSpec:
    """What one validity run does: sizes, levels and targets."""

    n_calib: int  # calibration queries per re-split (the rest are test)
    n_resplits: int = 500
    delta: float = 0.1  # LTT's δ and the target mode's δ
    target_accuracy: float | None = None  # None: skip the accuracy target
    budget: float | None = None  # None: skip the budget
    price_alpha: float = 0.01  # α at which the price of each rule is reported
    price_lams: tuple[float, ...] = PRICE_LAMS
    group_by: str = "benchmark"
    variant: str = "edge-only"


def _metric(risk: str) -> str:
    """The price metric name of a realised risk: oracle-disagreement → oracle_risk, avoidable-error → avoidable_risk."""
    return {"oracle-disagreement": "oracle_risk", "avoidable-error": "avoidable_risk"}.get(risk, risk.replace("-", "_"))


def _mean_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x.mean(axis=0), x.std(axis=0, ddof=1) / np.sqrt(x.shape[0])


def _share_se(hits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = hits.mean(axis=0)
    return p, np.sqrt(p * (1 - p) / hits.shape[0])


class _SuffixSums:
    """Σ of per-row weights over the rows with s ≥ τ, per λ, for any τ grid — the exact `accept` comparison.

    Rows are sorted by score once per λ; a sum over {s ≥ τ} is a suffix sum read at searchsorted(τ), so
    one re-split costs O(n_lam · n_alpha · log n) instead of an [n, n_lam, n_alpha] mask. Test-set sums
    are pool sums minus calibration-set sums.
    """

    def __init__(self, score: np.ndarray, weights: np.ndarray) -> None:
        # score: [n, n_lam]; weights: [n, n_lam, k]
        n, n_lam = score.shape
        self.sorted, self.suffix = [], []
        for i in range(n_lam):
            order = np.argsort(score[:, i], kind="stable")
            self.sorted.append(score[order, i].astype(np.float64))
            w = weights[order, i, :]
            self.suffix.append(np.concatenate([np.cumsum(w[::-1], axis=0)[::-1], np.zeros((1, w.shape[1]))]))

    def sums(self, taus: np.ndarray) -> np.ndarray:
        """[n_lam, n_alpha, k] sums over rows with s ≥ τ[i, j] (float64 comparison, as cr2.crc.accept)."""
        return np.stack([suf[np.searchsorted(srt, taus[i], side="left")]
                         for i, (srt, suf) in enumerate(zip(self.sorted, self.suffix))])


def resplit_validity(
    score: np.ndarray,
    risk: np.ndarray,
    proba: np.ndarray,
    cost: np.ndarray,
    correct: np.ndarray,
    groups: np.ndarray,
    lams: Sequence[float],
    alphas: Sequence[float],
    spec: ResplitSpec,
    rng: np.random.Generator,
    progress: Callable[[int], None] | None = None,
    realised: dict[str, np.ndarray] | None = None,
) -> list[dict]:
    """Return tidy validity and price records of crc, ltt, Mondrian crc and the target mode over re-splits.

    score, risk: [n, n_lam] (λ ascending); proba, cost, correct: [n, M]; groups: [n] str. realised: risk name
    (cr2.crc.RISKS, e.g. "oracle-disagreement") → its [n, n_lam] bool label on the pool; each adds the rules
    crc-<…> and ltt-<…> calibrated on it.
    """
    lams = np.asarray(lams, dtype=np.float64)
    alphas = np.asarray(sorted(alphas), dtype=np.float64)
    score, risk, groups = np.asarray(score), np.asarray(risk, dtype=bool), np.asarray(groups).astype(str)
    correct, cost = np.asarray(correct, dtype=bool), np.asarray(cost, dtype=np.float64)
    n, n_lam = score.shape
    if list(lams) != sorted(lams) or n_lam != len(lams):
        raise DataValidationError("lams must be ascending and match the score columns")
    if not 0 < spec.n_calib < n:
        raise DataValidationError(f"n_calib={spec.n_calib} must leave a test set out of the pool of {n}")
    names, g_index = np.unique(groups, return_inverse=True)
    names = [str(v) for v in names]
    rows = np.arange(n)
    # the deferred choice depends only on the query and λ, not on the split: once for the pool
    dchoice = np.stack([deferred_choice(proba, cost, float(lam), spec.variant) for lam in lams], axis=1)  # [n, n_lam]
    def_correct = correct[rows[:, None], dchoice].astype(np.float64)
    def_cost = cost[rows[:, None], dchoice]
    # per-row weights summed over accepted rows: risk r, 1 (local), c0 − c_def, y0 − y_def
    realised = {k: np.asarray(v, dtype=bool) for k, v in (realised or {}).items()}
    for k, v in realised.items():
        if v.shape != (n, n_lam):
            raise DataValidationError(f"realised risk '{k}' has shape {v.shape}, expected [n, n_lam] = {(n, n_lam)}")
    risk_cols = {"teacher_risk": 0, **{_metric(k): 4 + q for q, k in enumerate(realised)}}  # weight column per risk
    weights = np.stack([risk.astype(np.float64), np.ones((n, n_lam)), cost[:, :1] - def_cost,
                        correct[:, :1].astype(np.float64) - def_correct,
                        *[v.astype(np.float64) for v in realised.values()]], axis=2)
    base_cost, base_acc = def_cost.sum(axis=0), def_correct.sum(axis=0)  # [n_lam]: everything deferred
    pool_sums = _SuffixSums(score, weights)
    group_pool = [_SuffixSums(score[g_index == gi], weights[g_index == gi]) for gi in range(len(names))]
    price_idx = [int(np.argmin(np.abs(lams - v))) for v in spec.price_lams]
    a_idx = int(np.argmin(np.abs(alphas - spec.price_alpha)))
    B, n_a, n_g = spec.n_resplits, len(alphas), len(names)
    crc_risk = np.empty((B, n_lam, n_a))
    ltt_viol = np.empty((B, n_a), dtype=bool)
    ltt_viol_pool = np.empty((B, n_a), dtype=bool)
    crc_viol = np.empty((B, n_a), dtype=bool)
    crc_viol_pool = np.empty((B, n_a), dtype=bool)
    mond_risk = np.full((B, n_g, n_lam, n_a), np.nan)
    crcg_risk = np.full((B, n_g, n_lam, n_a), np.nan)
    new_rules = {rule_for(proc, k): (k, proc) for k in realised for proc in ("crc", "ltt")}
    n_q = 3 + len(risk_cols)  # local, cost, accuracy, then each risk's test mean
    price = {r: np.empty((B, len(price_idx), n_q)) for r in ("crc", "ltt", "mondrian", *new_rules)}
    price_cols = [1, 2, 3, *risk_cols.values()]
    new_mean = {r: np.empty((B, n_lam, n_a)) for r, (_, proc) in new_rules.items() if proc == "crc"}
    new_viol_pool = {r: np.empty((B, n_a), dtype=bool) for r, (_, proc) in new_rules.items() if proc == "ltt"}
    new_viol = {r: np.empty((B, n_a), dtype=bool) for r, (_, proc) in new_rules.items() if proc == "ltt"}
    targets = [(m, t) for m, t in (("accuracy", spec.target_accuracy), ("budget", spec.budget)) if t is not None]
    t_miss = {m: np.zeros(B, dtype=bool) for m, _ in targets}
    t_miss_pool = {m: np.zeros(B, dtype=bool) for m, _ in targets}
    t_infeasible = {m: np.zeros(B, dtype=bool) for m, _ in targets}
    t_price = {m: np.full((B, 3), np.nan) for m, _ in targets}
    t_oracle = {m: np.full((B, 3), np.nan) for m, _ in targets}
    kw = dict(gate_fingerprint="-", dist_id="-", label_source="-")

    for b in range(B):
        perm = rng.permutation(n)
        cal, test = np.sort(perm[: spec.n_calib]), perm[spec.n_calib:]
        n_test = len(test)
        cal_sums = _SuffixSums(score[cal], weights[cal])
        cal_base_cost, cal_base_acc = def_cost[cal].sum(axis=0), def_correct[cal].sum(axis=0)

        def test_means(taus: np.ndarray, col: int = 0) -> tuple[np.ndarray, np.ndarray]:
            """([n_lam, n_a, k] test means of risk, local, cost, accuracy, realised risks…; [n_lam, n_a] pool mean
            of weight column `col`, the risk a rule controls) under taus."""
            pool, part = pool_sums.sums(taus), cal_sums.sums(taus)
            t = (pool - part) / n_test
            t[..., 2] += ((base_cost - cal_base_cost) / n_test)[:, None]  # cost = Σ c_def + Σ_accepted (c0 − c_def)
            t[..., 3] += ((base_acc - cal_base_acc) / n_test)[:, None]
            return t, pool[..., col] / n

        crc = calibrate_table(score[cal], risk[cal], lams, alphas, **kw)
        t_crc, pool_crc = test_means(crc.taus)
        crc_risk[b] = t_crc[..., 0]
        crc_viol[b] = (t_crc[..., 0] > alphas[None, :]).any(axis=0)
        crc_viol_pool[b] = (pool_crc > alphas[None, :]).any(axis=0)
        price["crc"][b] = t_crc[price_idx, a_idx][:, price_cols]
        for mode, t in targets:  # the oracle: the cheapest / most accurate CRC point judged on the test set itself
            y_m, c_m, l_m = t_crc[..., 3], t_crc[..., 2], t_crc[..., 1]
            ok = (y_m >= t) if mode == "accuracy" else (c_m <= t)
            if ok.any():
                key = np.where(ok, c_m, np.inf) if mode == "accuracy" else np.where(ok, -y_m, np.inf)
                i, j = np.unravel_index(np.argmin(key), key.shape)
                t_oracle[mode][b] = (l_m[i, j], c_m[i, j], y_m[i, j])
        ltt = calibrate_table(score[cal], risk[cal], lams, alphas, rule="ltt", delta=spec.delta, **kw)
        t_ltt, pool_ltt = test_means(ltt.taus)
        ltt_viol[b] = (t_ltt[..., 0] > alphas[None, :]).any(axis=0)
        ltt_viol_pool[b] = (pool_ltt > alphas[None, :]).any(axis=0)
        price["ltt"][b] = t_ltt[price_idx, a_idx][:, price_cols]
        for rule, (k, proc) in new_rules.items():  # the rules on the realised risks' own labels
            col = risk_cols[_metric(k)]
            tab = calibrate_table(score[cal], realised[k][cal], lams, alphas, rule=rule,
                                  delta=spec.delta if proc == "ltt" else None, **kw)
            t_new, pool_new = test_means(tab.taus, col)
            if proc == "crc":
                new_mean[rule][b] = t_new[..., col]
            else:
                new_viol[rule][b] = (t_new[..., col] > alphas[None, :]).any(axis=0)
                new_viol_pool[rule][b] = (pool_new > alphas[None, :]).any(axis=0)
            price[rule][b] = t_new[price_idx, a_idx][:, price_cols]
        mond = calibrate_group_tables(score[cal], risk[cal], groups[cal], lams, alphas, group_by=spec.group_by,
                                      small_group="defer", **kw)
        mond_tot = np.zeros((len(price_idx), n_q))
        for gi, g in enumerate(names):
            in_cal = g_index[cal] == gi
            n_test_g = int((g_index == gi).sum() - in_cal.sum())
            if n_test_g == 0:
                continue
            g_taus = mond.tables[g].taus if g in mond.tables else np.full((n_lam, n_a), np.inf)
            cal_g = _SuffixSums(score[cal][in_cal], weights[cal][in_cal])
            for taus, arr in ((g_taus, mond_risk), (crc.taus, crcg_risk)):
                arr[b, gi] = (group_pool[gi].sums(taus)[..., 0] - cal_g.sums(taus)[..., 0]) / n_test_g
            # price of Mondrian: this group's accepted rows under its own τ, summed over groups
            acc_sum = group_pool[gi].sums(g_taus) - cal_g.sums(g_taus)  # [n_lam, n_a, 4]
            mond_tot += acc_sum[price_idx, a_idx][:, price_cols]
        mond_tot[:, 1] += (base_cost - cal_base_cost)[price_idx]
        mond_tot[:, 2] += (base_acc - cal_base_acc)[price_idx]
        price["mondrian"][b] = mond_tot / n_test
        for mode, t in targets:
            try:
                ch = choose_by_target(score[cal], risk[cal], proba[cal], cost[cal], correct[cal], lams, alphas,
                                      rng=rng, delta=spec.delta, variant=spec.variant,
                                      **({"target_accuracy": t} if mode == "accuracy" else {"budget": t}))
            except TargetInfeasibleError:
                t_infeasible[mode][b] = True  # a refusal never misses; it is counted and reported apart
                continue
            i = int(np.argmin(np.abs(lams - ch.lam)))
            acc_p = score[:, i].astype(np.float64) >= ch.tau
            y_all = np.where(acc_p, correct[:, 0], def_correct[:, i])
            c_all = np.where(acc_p, cost[:, 0], def_cost[:, i])
            y_t, c_t = y_all[test].mean(), c_all[test].mean()
            t_miss[mode][b] = (y_t < t) if mode == "accuracy" else (c_t > t)
            t_miss_pool[mode][b] = (y_all.mean() < t) if mode == "accuracy" else (c_all.mean() > t)
            t_price[mode][b] = (acc_p[test].mean(), c_t, y_t)
        if progress is not None:
            progress(b + 1)

    out: list[dict] = []
    base = {"n_resplits": B, "n_calib": spec.n_calib, "delta": None, "target": None, "group": None, "lam": None}

    def add(check: str, rule: str, metric: str, value: float, se: float | None, bound: float | None, **extra) -> None:
        out.append({**base, "check_name": check, "rule": rule, "metric": metric, "value": float(value),
                    "se": None if se is None or not np.isfinite(se) else float(se),
                    "bound": None if bound is None else float(bound), **extra})

    for rule, arr in (("crc", crc_risk), *new_mean.items()):
        m, s = _mean_se(arr)
        for i, lam in enumerate(lams):
            for j, a in enumerate(alphas):
                add("crc_mean_risk", rule, "mean_test_risk", m[i, j], s[i, j], a, lam=float(lam), alpha=float(a))
    for name, hits, rule, metric, bound in (
        ("ltt_any_violation", ltt_viol_pool, "ltt", "share_any_lam_over_alpha_pool", spec.delta),
        ("ltt_any_violation", ltt_viol, "ltt", "share_any_lam_over_alpha_test", None),
        ("crc_any_violation", crc_viol_pool, "crc", "share_any_lam_over_alpha_pool", None),
        ("crc_any_violation", crc_viol, "crc", "share_any_lam_over_alpha_test", None),
        *[("ltt_any_violation", new_viol_pool[r], r, "share_any_lam_over_alpha_pool", spec.delta) for r in new_viol_pool],
        *[("ltt_any_violation", new_viol[r], r, "share_any_lam_over_alpha_test", None) for r in new_viol],
    ):
        p, s = _share_se(hits)
        for j, a in enumerate(alphas):
            add(name, rule, metric, p[j], s[j], bound, alpha=float(a),
                delta=spec.delta if rule.startswith("ltt") else None)
    for name, arr, rule in (("mondrian_mean_risk", mond_risk, "mondrian-crc"), ("crc_group_mean_risk", crcg_risk, "crc")):
        for gi, g in enumerate(names):
            vals = arr[:, gi]
            seen = ~np.isnan(vals[:, 0, 0])
            if seen.sum() < 2:
                continue
            m, s = _mean_se(vals[seen])
            for i, lam in enumerate(lams):
                for j, a in enumerate(alphas):
                    add(name, rule, "mean_test_risk", m[i, j], s[i, j], a, lam=float(lam), alpha=float(a),
                        group=f"{spec.group_by}={g}")
    for mode, t in targets:
        p, s = _share_se(t_miss_pool[mode])
        add("target_miss", f"target-{mode}", "share_missing_target_pool", p, s, spec.delta, delta=spec.delta, target=t,
            alpha=None)
        p, s = _share_se(t_miss[mode])
        add("target_miss", f"target-{mode}", "share_missing_target_test", p, s, None, delta=spec.delta, target=t,
            alpha=None)
        p, s = _share_se(t_infeasible[mode])
        add("target_miss", f"target-{mode}", "share_refused", p, s, None, delta=spec.delta, target=t, alpha=None)
        for rule, arr in ((f"target-{mode}", t_price[mode]), (f"target-{mode}-crc-oracle", t_oracle[mode])):
            ok = ~np.isnan(arr[:, 0])
            if ok.sum() >= 2:
                m, s = _mean_se(arr[ok])
                for k, metric in enumerate(("local_rate", "mean_cost", "accuracy")):
                    add("price", rule, metric, m[k], s[k], None, delta=spec.delta if "oracle" not in rule else None,
                        target=t, alpha=None)
    for rule, arr in price.items():
        m, s = _mean_se(arr)
        for k, i in enumerate(price_idx):
            for q, metric in enumerate(("local_rate", "mean_cost", "accuracy", *risk_cols)):
                add("price", rule, metric, m[k, q], s[k, q], None, lam=float(lams[i]), alpha=float(alphas[a_idx]),
                    delta=spec.delta if rule.startswith("ltt") else None)
    for r in out:
        r.setdefault("alpha", None)
    return out
