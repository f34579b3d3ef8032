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

from cr2.crc import ThresholdTable, calibrate_group_tables, calibrate_table, rule_for
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
    # emit crc_mean_risk (each crc rule's mean test risk per (λ, α)); `cr2 guarantees` turns it off: the certify stage
    # stores those re-splits for every certified router (cr2@crc … included), the one source of their verdicts
    crc_mean: bool = True
    # None: every rule. Otherwise only the bounded records of these rules (no prices), and only the calibrations they
    # need run: the confirmatory re-check of a flagged family (`cr2 guarantees`) re-splits just that family's rule
    rules: tuple[str, ...] | None = None

    def runs(self, rule: str) -> bool:
        """Whether this run calibrates and records `rule`."""
        return self.rules is None or rule in self.rules


def _metric(risk: str) -> str:
    """The price metric name of a risk, from its registry entry: oracle-disagreement → oracle_risk, …"""
    from cr2.crc import risk_spec

    return risk_spec(risk).metric


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


# Re-split tables are scratch: they are never stored, so they carry no provenance.
_UNTRACKED = dict(gate_fingerprint="-", dist_id="-", label_source="-")


@dataclass(frozen=True)
class _Pool:
    """What every re-split shares, prepared once: the pool's arrays, the deferred choice, the weights and their sums.

    The deferred choice depends only on the query and λ, not on the split, so it is computed once for the pool.
    Each row carries weights summed over the accepted rows of a split: risk r, 1 (local), c0 − c_def, y0 − y_def,
    then each realised risk's label; their suffix sums over the pool and over each group are built here too.
    """

    score: np.ndarray  # [n, n_lam] gate score s(x, λ)
    risk: np.ndarray  # [n, n_lam] bool, teacher risk label r(λ)
    proba: np.ndarray  # [n, M] teacher p_m(x)
    cost: np.ndarray  # [n, M] float64, c_m(x)
    correct: np.ndarray  # [n, M] bool, y_m(x)
    groups: np.ndarray  # [n] str
    lams: np.ndarray  # [n_lam] float64, ascending
    alphas: np.ndarray  # [n_a] float64, ascending
    names: list[str]  # [n_g] the groups, sorted
    g_index: np.ndarray  # [n] int, each row's index into names
    realised: dict[str, np.ndarray]  # realised risk name → [n, n_lam] bool label
    def_correct: np.ndarray  # [n, n_lam] float64, y of the deferred choice
    def_cost: np.ndarray  # [n, n_lam] float64, c of the deferred choice
    weights: np.ndarray  # [n, n_lam, 4 + len(realised)] per-row weights (see above)
    risk_cols: dict[str, int]  # price metric of each risk (teacher_risk, oracle_risk, …) → its weight column
    base_cost: np.ndarray  # [n_lam] Σ c_def over the pool: everything deferred
    base_acc: np.ndarray  # [n_lam] Σ y_def over the pool
    pool_sums: _SuffixSums  # over the whole pool
    group_pool: list[_SuffixSums]  # [n_g] over each group
    price_idx: list[int]  # λ indices of spec.price_lams
    a_idx: int  # α index of spec.price_alpha
    new_rules: dict[str, tuple[str, str]]  # rule name (crc-oracle, …) → (realised risk, "crc" | "ltt")
    targets: list[tuple[str, float]]  # the targets that are set: ("accuracy" | "budget", value)

    @property
    def n(self) -> int:
        return self.score.shape[0]

    @property
    def n_lam(self) -> int:
        return self.score.shape[1]

    @property
    def price_cols(self) -> list[int]:
        """Weight columns of a price row: local, cost, accuracy, then each risk's test mean."""
        return [1, 2, 3, *self.risk_cols.values()]

    @property
    def n_q(self) -> int:
        return 3 + len(self.risk_cols)


def _prepare_pool(score, risk, proba, cost, correct, groups, lams, alphas, spec: ResplitSpec,
                  realised: dict[str, np.ndarray] | None) -> _Pool:
    """Return the pool's split-independent preparation, after checking the inputs' shapes and the split size."""
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
    dchoice = np.stack([deferred_choice(proba, cost, float(lam), spec.variant) for lam in lams], axis=1)  # [n, n_lam]
    def_correct = correct[rows[:, None], dchoice].astype(np.float64)
    def_cost = cost[rows[:, None], dchoice]
    realised = {k: np.asarray(v, dtype=bool) for k, v in (realised or {}).items()}
    for k, v in realised.items():
        if v.shape != (n, n_lam):
            raise DataValidationError(f"realised risk '{k}' has shape {v.shape}, expected [n, n_lam] = {(n, n_lam)}")
    risk_cols = {_metric("teacher-disagreement"): 0, **{_metric(k): 4 + q for q, k in enumerate(realised)}}
    weights = np.stack([risk.astype(np.float64), np.ones((n, n_lam)), cost[:, :1] - def_cost,
                        correct[:, :1].astype(np.float64) - def_correct,
                        *[v.astype(np.float64) for v in realised.values()]], axis=2)
    return _Pool(
        score=score, risk=risk, proba=proba, cost=cost, correct=correct, groups=groups, lams=lams, alphas=alphas,
        names=names, g_index=g_index, realised=realised, def_correct=def_correct, def_cost=def_cost,
        weights=weights, risk_cols=risk_cols, base_cost=def_cost.sum(axis=0), base_acc=def_correct.sum(axis=0),
        pool_sums=_SuffixSums(score, weights),
        group_pool=[_SuffixSums(score[g_index == gi], weights[g_index == gi]) for gi in range(len(names))],
        price_idx=[int(np.argmin(np.abs(lams - v))) for v in spec.price_lams],
        a_idx=int(np.argmin(np.abs(alphas - spec.price_alpha))),
        new_rules={rule_for(proc, k): (k, proc) for k in realised for proc in ("crc", "ltt")
                   if spec.runs(rule_for(proc, k))},
        targets=[(m, t) for m, t in (("accuracy", spec.target_accuracy), ("budget", spec.budget))
                 if t is not None and spec.runs(f"target-{m}")],
    )


@dataclass
class _Tally:
    """What the re-splits measure, one slice [b] per re-split; filled in place by the _record_* functions."""

    crc_risk: np.ndarray  # [B, n_lam, n_a] crc test risk
    crc_viol: np.ndarray  # [B, n_a] bool: crc test risk > α at any λ
    crc_viol_pool: np.ndarray  # [B, n_a] bool: crc pool risk > α at any λ
    ltt_viol: np.ndarray  # [B, n_a] bool: ltt test risk > α at any λ
    ltt_viol_pool: np.ndarray  # [B, n_a] bool: ltt pool risk > α at any λ
    mond_risk: np.ndarray  # [B, n_g, n_lam, n_a] Mondrian test risk per group; NaN: group absent from the test set
    crcg_risk: np.ndarray  # [B, n_g, n_lam, n_a] plain crc test risk per group; NaN as above
    price: dict[str, np.ndarray]  # rule → [B, len(price_lams), n_q] test local rate, cost, accuracy, risks
    new_mean: dict[str, np.ndarray]  # crc rule on a realised risk → [B, n_lam, n_a] its test risk
    new_viol: dict[str, np.ndarray]  # ltt rule on a realised risk → [B, n_a] bool, test risk > α at any λ
    new_viol_pool: dict[str, np.ndarray]  # the same against the pool's risk
    t_miss: dict[str, np.ndarray]  # target mode → [B] bool, the chosen point misses on the test set
    t_miss_pool: dict[str, np.ndarray]  # … on the pool
    t_infeasible: dict[str, np.ndarray]  # … [B] bool, the mode refused
    t_price: dict[str, np.ndarray]  # … [B, 3] test local rate, cost, accuracy of the chosen point; NaN if refused
    t_oracle: dict[str, np.ndarray]  # … [B, 3] the same for the CRC oracle point; NaN if none meets the target

    @classmethod
    def empty(cls, pool: _Pool, B: int) -> "_Tally":
        n_lam, n_a, n_g = pool.n_lam, len(pool.alphas), len(pool.names)
        rules = pool.new_rules.items()
        return cls(
            crc_risk=np.full((B, n_lam, n_a), np.nan),  # NaN / False: a rule this run does not calibrate (spec.rules)
            ltt_viol=np.zeros((B, n_a), dtype=bool),
            ltt_viol_pool=np.zeros((B, n_a), dtype=bool),
            crc_viol=np.zeros((B, n_a), dtype=bool),
            crc_viol_pool=np.zeros((B, n_a), dtype=bool),
            mond_risk=np.full((B, n_g, n_lam, n_a), np.nan),
            crcg_risk=np.full((B, n_g, n_lam, n_a), np.nan),
            price={r: np.full((B, len(pool.price_idx), pool.n_q), np.nan)
                   for r in ("crc", "ltt", "mondrian", *pool.new_rules)},
            new_mean={r: np.empty((B, n_lam, n_a)) for r, (_, proc) in rules if proc == "crc"},
            new_viol_pool={r: np.empty((B, n_a), dtype=bool) for r, (_, proc) in rules if proc == "ltt"},
            new_viol={r: np.empty((B, n_a), dtype=bool) for r, (_, proc) in rules if proc == "ltt"},
            t_miss={m: np.zeros(B, dtype=bool) for m, _ in pool.targets},
            t_miss_pool={m: np.zeros(B, dtype=bool) for m, _ in pool.targets},
            t_infeasible={m: np.zeros(B, dtype=bool) for m, _ in pool.targets},
            t_price={m: np.full((B, 3), np.nan) for m, _ in pool.targets},
            t_oracle={m: np.full((B, 3), np.nan) for m, _ in pool.targets},
        )


@dataclass(frozen=True)
class _Split:
    """One random calibration/test split of the pool, with the calibration set's sums (test = pool − calibration)."""

    pool: _Pool
    cal: np.ndarray  # [n_calib] row indices, sorted
    test: np.ndarray  # [n − n_calib] row indices
    cal_sums: _SuffixSums
    cal_base_cost: np.ndarray  # [n_lam] Σ c_def over the calibration set
    cal_base_acc: np.ndarray  # [n_lam] Σ y_def over the calibration set

    @property
    def n_test(self) -> int:
        return len(self.test)

    def test_means(self, taus: np.ndarray, col: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """([n_lam, n_a, k] test means of risk, local, cost, accuracy, realised risks…; [n_lam, n_a] pool mean
        of weight column `col`, the risk a rule controls) under taus."""
        p = self.pool
        pool, part = p.pool_sums.sums(taus), self.cal_sums.sums(taus)
        t = (pool - part) / self.n_test
        # cost = Σ c_def + Σ_accepted (c0 − c_def); accuracy likewise
        t[..., 2] += ((p.base_cost - self.cal_base_cost) / self.n_test)[:, None]
        t[..., 3] += ((p.base_acc - self.cal_base_acc) / self.n_test)[:, None]
        return t, pool[..., col] / p.n


def _draw_split(pool: _Pool, n_calib: int, rng: np.random.Generator) -> _Split:
    """Return a random split into n_calib calibration queries and the rest (one rng.permutation draw)."""
    perm = rng.permutation(pool.n)
    cal, test = np.sort(perm[:n_calib]), perm[n_calib:]
    return _Split(pool=pool, cal=cal, test=test, cal_sums=_SuffixSums(pool.score[cal], pool.weights[cal]),
                  cal_base_cost=pool.def_cost[cal].sum(axis=0), cal_base_acc=pool.def_correct[cal].sum(axis=0))


def _any_over_alpha(risk: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """[n_a] bool: the [n_lam, n_a] risk exceeds α at any λ."""
    return (risk > alphas[None, :]).any(axis=0)


def _record_crc(split: _Split, tally: _Tally, b: int) -> tuple[ThresholdTable, np.ndarray]:
    """Calibrate plain CRC on the teacher risk and record its test risk, violations and price.

    Returns the table (Mondrian's per-group check reuses its τ) and its test means (the target oracle reads them).
    """
    p = split.pool
    crc = calibrate_table(p.score[split.cal], p.risk[split.cal], p.lams, p.alphas, **_UNTRACKED)
    t_crc, pool_crc = split.test_means(crc.taus)
    tally.crc_risk[b] = t_crc[..., 0]
    tally.crc_viol[b] = _any_over_alpha(t_crc[..., 0], p.alphas)
    tally.crc_viol_pool[b] = _any_over_alpha(pool_crc, p.alphas)
    tally.price["crc"][b] = t_crc[p.price_idx, p.a_idx][:, p.price_cols]
    return crc, t_crc


def _record_crc_oracle(pool: _Pool, t_crc: np.ndarray, tally: _Tally, b: int) -> None:
    """Record the target mode's oracle: the cheapest / most accurate CRC point judged on the test set itself."""
    y_m, c_m, l_m = t_crc[..., 3], t_crc[..., 2], t_crc[..., 1]
    for mode, t in pool.targets:
        ok = (y_m >= t) if mode == "accuracy" else (c_m <= t)
        if ok.any():
            key = np.where(ok, c_m, np.inf) if mode == "accuracy" else np.where(ok, -y_m, np.inf)
            i, j = np.unravel_index(np.argmin(key), key.shape)
            tally.t_oracle[mode][b] = (l_m[i, j], c_m[i, j], y_m[i, j])


def _record_ltt(split: _Split, spec: ResplitSpec, tally: _Tally, b: int) -> None:
    """Calibrate Learn-then-Test on the teacher risk; record its violations (test and pool) and price."""
    p = split.pool
    ltt = calibrate_table(p.score[split.cal], p.risk[split.cal], p.lams, p.alphas, rule="ltt", delta=spec.delta,
                          **_UNTRACKED)
    t_ltt, pool_ltt = split.test_means(ltt.taus)
    tally.ltt_viol[b] = _any_over_alpha(t_ltt[..., 0], p.alphas)
    tally.ltt_viol_pool[b] = _any_over_alpha(pool_ltt, p.alphas)
    tally.price["ltt"][b] = t_ltt[p.price_idx, p.a_idx][:, p.price_cols]


def _record_realised_rules(split: _Split, spec: ResplitSpec, tally: _Tally, b: int) -> None:
    """Calibrate crc-/ltt- on each realised risk's own label; check each against that same label."""
    p = split.pool
    for rule, (k, proc) in p.new_rules.items():
        col = p.risk_cols[_metric(k)]
        tab = calibrate_table(p.score[split.cal], p.realised[k][split.cal], p.lams, p.alphas, rule=rule,
                              delta=spec.delta if proc == "ltt" else None, **_UNTRACKED)
        t_new, pool_new = split.test_means(tab.taus, col)
        if proc == "crc":
            tally.new_mean[rule][b] = t_new[..., col]
        else:
            tally.new_viol[rule][b] = _any_over_alpha(t_new[..., col], p.alphas)
            tally.new_viol_pool[rule][b] = _any_over_alpha(pool_new, p.alphas)
        tally.price[rule][b] = t_new[p.price_idx, p.a_idx][:, p.price_cols]


def _record_mondrian(split: _Split, spec: ResplitSpec, crc_taus: np.ndarray, tally: _Tally, b: int) -> None:
    """Calibrate Mondrian CRC (one table per group; small groups defer); record per-group test risks of it and of
    plain CRC (crc_taus), and Mondrian's price: each group's accepted rows under its own τ, summed over groups."""
    p = split.pool
    cal = split.cal
    mond = calibrate_group_tables(p.score[cal], p.risk[cal], p.groups[cal], p.lams, p.alphas, group_by=spec.group_by,
                                  small_group="defer", **_UNTRACKED)
    mond_tot = np.zeros((len(p.price_idx), p.n_q))
    for gi, g in enumerate(p.names):
        in_cal = p.g_index[cal] == gi
        n_test_g = int((p.g_index == gi).sum() - in_cal.sum())
        if n_test_g == 0:
            continue
        g_taus = mond.tables[g].taus if g in mond.tables else np.full((p.n_lam, len(p.alphas)), np.inf)
        cal_g = _SuffixSums(p.score[cal][in_cal], p.weights[cal][in_cal])
        for taus, arr in ((g_taus, tally.mond_risk), (crc_taus, tally.crcg_risk)):
            arr[b, gi] = (p.group_pool[gi].sums(taus)[..., 0] - cal_g.sums(taus)[..., 0]) / n_test_g
        acc_sum = p.group_pool[gi].sums(g_taus) - cal_g.sums(g_taus)  # [n_lam, n_a, k]
        mond_tot += acc_sum[p.price_idx, p.a_idx][:, p.price_cols]
    mond_tot[:, 1] += (p.base_cost - split.cal_base_cost)[p.price_idx]
    mond_tot[:, 2] += (p.base_acc - split.cal_base_acc)[p.price_idx]
    tally.price["mondrian"][b] = mond_tot / split.n_test


def _record_targets(split: _Split, spec: ResplitSpec, tally: _Tally, b: int, rng: np.random.Generator) -> None:
    """Run the target mode (cr2.method.targets.choose_by_target, which draws from rng) for each set target; record
    whether its chosen point misses the target on the test set and on the pool, or whether it refused, and its price."""
    p = split.pool
    cal, test = split.cal, split.test
    for mode, t in p.targets:
        try:
            ch = choose_by_target(p.score[cal], p.risk[cal], p.proba[cal], p.cost[cal], p.correct[cal], p.lams,
                                  p.alphas, rng=rng, delta=spec.delta, variant=spec.variant,
                                  **({"target_accuracy": t} if mode == "accuracy" else {"budget": t}))
        except TargetInfeasibleError:
            tally.t_infeasible[mode][b] = True  # a refusal never misses; it is counted and reported apart
            continue
        i = int(np.argmin(np.abs(p.lams - ch.lam)))
        acc_p = p.score[:, i].astype(np.float64) >= ch.tau
        y_all = np.where(acc_p, p.correct[:, 0], p.def_correct[:, i])
        c_all = np.where(acc_p, p.cost[:, 0], p.def_cost[:, i])
        y_t, c_t = y_all[test].mean(), c_all[test].mean()
        tally.t_miss[mode][b] = (y_t < t) if mode == "accuracy" else (c_t > t)
        tally.t_miss_pool[mode][b] = (y_all.mean() < t) if mode == "accuracy" else (c_all.mean() > t)
        tally.t_price[mode][b] = (acc_p[test].mean(), c_t, y_t)


def _record_resplit(split: _Split, spec: ResplitSpec, tally: _Tally, b: int, rng: np.random.Generator) -> None:
    """Calibrate every rule on one split's calibration set and record it on its test set (slice b of the tally).

    Only the target mode draws from rng, after the split's own permutation: keep that order, the stream is shared.
    With spec.rules, only the calibrations those rules need run (plain CRC: for itself, Mondrian's context rows and
    the target mode's oracle point).
    """
    pool = split.pool
    crc = None
    if spec.runs("crc") or spec.runs("mondrian-crc") or pool.targets:
        crc, t_crc = _record_crc(split, tally, b)
        _record_crc_oracle(pool, t_crc, tally, b)
    if spec.runs("ltt"):
        _record_ltt(split, spec, tally, b)
    _record_realised_rules(split, spec, tally, b)  # pool.new_rules holds the ones that run
    if spec.runs("mondrian-crc"):
        _record_mondrian(split, spec, crc.taus, tally, b)
    _record_targets(split, spec, tally, b, rng)  # pool.targets holds the ones that run


# ------------------------------------------------------------------ output records


def _row(spec: ResplitSpec, check: str, rule: str, metric: str, value: float, se: float | None, bound: float | None,
         **extra) -> dict:
    """One tidy record: the run's sizes, the check, the rule, the metric, its value ± se and its bound."""
    base = {"n_resplits": spec.n_resplits, "n_calib": spec.n_calib, "delta": None, "target": None, "group": None,
            "lam": None}
    return {**base, "check_name": check, "rule": rule, "metric": metric, "value": float(value),
            "se": None if se is None or not np.isfinite(se) else float(se),
            "bound": None if bound is None else float(bound), **extra}


def _crc_mean_records(pool: _Pool, spec: ResplitSpec, tally: _Tally) -> list[dict]:
    """crc_mean_risk: the mean test risk per (λ, α) of plain CRC and of the crc rules on realised risks, bound α."""
    out = []
    for rule, arr in (("crc", tally.crc_risk), *tally.new_mean.items()):
        m, s = _mean_se(arr)
        for i, lam in enumerate(pool.lams):
            for j, a in enumerate(pool.alphas):
                out.append(_row(spec, "crc_mean_risk", rule, "mean_test_risk", m[i, j], s[i, j], a, lam=float(lam),
                                alpha=float(a)))
    return out


def _violation_records(pool: _Pool, spec: ResplitSpec, tally: _Tally) -> list[dict]:
    """ltt_any_violation / crc_any_violation: the share of re-splits with any λ over α, against the pool (the check;
    bound δ for the ltt rules) and against the test split."""
    out = []
    for name, hits, rule, metric, bound in (
        ("ltt_any_violation", tally.ltt_viol_pool, "ltt", "share_any_lam_over_alpha_pool", spec.delta),
        ("ltt_any_violation", tally.ltt_viol, "ltt", "share_any_lam_over_alpha_test", None),
        ("crc_any_violation", tally.crc_viol_pool, "crc", "share_any_lam_over_alpha_pool", None),
        ("crc_any_violation", tally.crc_viol, "crc", "share_any_lam_over_alpha_test", None),
        *[("ltt_any_violation", v, r, "share_any_lam_over_alpha_pool", spec.delta)
          for r, v in tally.new_viol_pool.items()],
        *[("ltt_any_violation", v, r, "share_any_lam_over_alpha_test", None) for r, v in tally.new_viol.items()],
    ):
        p, s = _share_se(hits)
        for j, a in enumerate(pool.alphas):
            out.append(_row(spec, name, rule, metric, p[j], s[j], bound, alpha=float(a),
                            delta=spec.delta if rule.startswith("ltt") else None))
    return out


def _group_records(pool: _Pool, spec: ResplitSpec, tally: _Tally) -> list[dict]:
    """mondrian_mean_risk / crc_group_mean_risk: per group, the mean test risk per (λ, α) over the re-splits whose
    test set holds the group (at least two), bound α."""
    out = []
    for name, arr, rule in (("mondrian_mean_risk", tally.mond_risk, "mondrian-crc"),
                            ("crc_group_mean_risk", tally.crcg_risk, "crc")):
        for gi, g in enumerate(pool.names):
            vals = arr[:, gi]
            seen = ~np.isnan(vals[:, 0, 0])
            if seen.sum() < 2:
                continue
            m, s = _mean_se(vals[seen])
            for i, lam in enumerate(pool.lams):
                for j, a in enumerate(pool.alphas):
                    out.append(_row(spec, name, rule, "mean_test_risk", m[i, j], s[i, j], a, lam=float(lam),
                                    alpha=float(a), group=f"{spec.group_by}={g}"))
    return out


def _target_records(pool: _Pool, spec: ResplitSpec, tally: _Tally) -> list[dict]:
    """target_miss: per target, the share of re-splits missing it (pool: the check, bound δ; test) and refusing;
    then the price of the target mode and of its CRC oracle point (over at least two re-splits with a point)."""
    out = []
    for mode, t in pool.targets:
        p, s = _share_se(tally.t_miss_pool[mode])
        out.append(_row(spec, "target_miss", f"target-{mode}", "share_missing_target_pool", p, s, spec.delta,
                        delta=spec.delta, target=t, alpha=None))
        p, s = _share_se(tally.t_miss[mode])
        out.append(_row(spec, "target_miss", f"target-{mode}", "share_missing_target_test", p, s, None,
                        delta=spec.delta, target=t, alpha=None))
        p, s = _share_se(tally.t_infeasible[mode])
        out.append(_row(spec, "target_miss", f"target-{mode}", "share_refused", p, s, None, delta=spec.delta,
                        target=t, alpha=None))
        for rule, arr in ((f"target-{mode}", tally.t_price[mode]), (f"target-{mode}-crc-oracle", tally.t_oracle[mode])):
            ok = ~np.isnan(arr[:, 0])
            if ok.sum() >= 2:
                m, s = _mean_se(arr[ok])
                for k, metric in enumerate(("local_rate", "mean_cost", "accuracy")):
                    out.append(_row(spec, "price", rule, metric, m[k], s[k], None,
                                    delta=spec.delta if "oracle" not in rule else None, target=t, alpha=None))
    return out


def _price_records(pool: _Pool, spec: ResplitSpec, tally: _Tally) -> list[dict]:
    """price: each rule's mean test local rate, cost, accuracy and risks at the price λ values and the price α."""
    out = []
    for rule, arr in tally.price.items():
        m, s = _mean_se(arr)
        for k, i in enumerate(pool.price_idx):
            for q, metric in enumerate(("local_rate", "mean_cost", "accuracy", *pool.risk_cols)):
                out.append(_row(spec, "price", rule, metric, m[k, q], s[k, q], None, lam=float(pool.lams[i]),
                                alpha=float(pool.alphas[pool.a_idx]),
                                delta=spec.delta if rule.startswith("ltt") else None))
    return out


def _records(pool: _Pool, spec: ResplitSpec, tally: _Tally) -> list[dict]:
    """Every check family's records, in the table's order; alpha is None where a check has no α."""
    out = [*(_crc_mean_records(pool, spec, tally) if spec.crc_mean else []), *_violation_records(pool, spec, tally),
           *_group_records(pool, spec, tally), *_target_records(pool, spec, tally),
           *(_price_records(pool, spec, tally) if spec.rules is None else [])]
    if spec.rules is not None:  # a re-check: the bounded records of its rules only
        out = [r for r in out if r["rule"] in spec.rules and r["bound"] is not None]
    for r in out:
        r.setdefault("alpha", None)
    return out


# ------------------------------------------------------------------ streams and the confirmatory re-check
CONFIRM_FACTOR = 10  # a flagged family is re-checked on CONFIRM_FACTOR × the screening re-splits (capped, below)


def confirm_seed(seed: int) -> int:
    """The seed of a run's confirmatory stream: the first child of SeedSequence(seed) (numpy's spawn, independent of
    the screening stream default_rng(seed) draws), as a 63-bit integer so it is stored and shown like the run's own."""
    child = np.random.SeedSequence(int(seed)).spawn(1)[0]
    return int(child.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def confirm_resplits(n_resplits: int, factor: int = CONFIRM_FACTOR) -> int:
    """Re-splits of a confirmatory re-check: factor × the screening run's, at most the configs' bound on re-splits."""
    from cr2.config.evaluation import MAX_RESPLITS

    return int(min(int(n_resplits) * int(factor), MAX_RESPLITS))


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
    pool = _prepare_pool(score, risk, proba, cost, correct, groups, lams, alphas, spec, realised)
    tally = _Tally.empty(pool, spec.n_resplits)
    for b in range(spec.n_resplits):
        _record_resplit(_draw_split(pool, spec.n_calib, rng), spec, tally, b, rng)
        if progress is not None:
            progress(b + 1)
    return _records(pool, spec, tally)
