"""Section "Is a difference real? 95 % intervals and seed variability": for the default and the measured scenario,
every learned router's saving vs KNN with its paired bootstrap interval (test-query noise) and its spread over the
seeds of the newest seed study (training noise), each word from an interval — Holm-adjusted where a family is read
together."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.evaluation.families import change_verdict, over_seeds
from cr2.report.cells import counts_cell
from cr2.report.headline import PAPER_TARGETS
from cr2.report.intervals import PointsWithSeeds, RouterMeanSavings, SeedRouterSavings, TargetSavings
from cr2.report.pools import family_sizes
from cr2.report.resultsdoc.scenario import (learned, Scenario, banner, holm_line, kept, name, num, router_family,
                                            seed_family, seed_routers, target_family)
from cr2.report.resultsdoc.words import PLAIN, Words, homes, missing
from cr2.report.table import rows_where as pick
from cr2.routers import method_router, reference_router, routers_tagged, short_name

# scenario key → (title, the targets the per-target table shows, the seed-study command)
SCENARIOS = {
    "default": ("Default scenario", PAPER_TARGETS, "cr2 study seeds --n {n} --home var"),
    "mmlu-pro": ("Measured scenario (MMLU-Pro)", (0.55, 0.60, 0.65, 0.70, 0.75, 0.80),
                 "cr2 study seeds --n {n} -c configs/mmlu-pro-measured.yaml --home var/mmlu-pro"),
}

INTRO = """## Is a difference real? 95 % intervals and seed variability

Every comparison below is one number from one split and one training seed. Two kinds of noise, measured
separately (docs/method.md, "How sure is a comparison?"):
- **test-query noise** — a paired bootstrap over the test queries (one index array shared by every method; each
  method's frontier, fixed-accuracy cost and saving recomputed on every resample; percentile intervals; table
  `intervals`, views `v_operating_points_ci`, `v_fixed_accuracy_ci`, `v_mean_saving_ci`; the cached `intervals`
  task of `cr2 run`). A mean saving averages over a grid of targets fixed from the validation split, and a target a
  router's frontier misses on a resample costs the cheapest Always-model that reaches it there, so every saving
  exists on every resample and every interval rests on all of them (docs/guarantees.md, "Estimands");
- **training noise** — `cr2 study seeds` re-runs the split, teacher, gate, learned baselines, calibration and
  evaluation per seed (tables `seed_runs`, `seed_results`, view `v_seed_spread`), every seed on the base run's grid.

Each interval's p-value comes from the same bootstrap resamples (`cr2.evaluation.statistics.bootstrap_p_values`), so
interval and p never disagree. Where several savings are read together (the learned routers' mean savings; every
target × router) they are one family: a saving is called "cheaper" (or "dearer") only where its Holm-adjusted p
over the family is below 0.05; every other one is "no difference detected". Over seeds, a word comes only from the
95 % t-interval of the mean over the seeds and its one-sample t-test, Holm-adjusted over the same family; mean ± sd
is shown beside it and carries no word. CR² is read at the α each evaluation run stores (its grids.default_alpha)."""


@dataclass(frozen=True)
class IntervalsData:
    scenarios: dict  # scenario key (SCENARIOS) → its Scenario, None without its warehouse or evaluation run


def render(data: IntervalsData, words: Words = PLAIN) -> str:
    parts = [INTRO]
    for key in SCENARIOS:
        parts.append(scenario_part(words, key, data.scenarios[key]))
    return "\n\n".join(parts) + "\n"


def scenario_part(w: Words, key: str, s: Scenario | None) -> str:
    title, targets, seeds_cmd = SCENARIOS[key]
    if s is None:
        return f"### {title}\n\n" + missing(key, f"{title} (its evaluation run)")
    n_risk, n_solv = s.test_sizes()
    home, make = homes()[key]
    study = (f"seed study `{s.study}` ({s.n_seeds} seeds; seed 0 is run `{s.run_id}`) from "
             f"`{seeds_cmd.format(n=s.n_seeds)}`" if s.study else "no seed study")
    out = [f"### {title} ({s.kind} labels)",
           f"{banner(s)} Warehouse `{home}` (`{make}`), newest full evaluation run `{s.run_id}`: {n_risk:,} test "
           f"queries, {n_solv:,} that some model solves; {kept(s.n_resamples)} paired resamples of the test queries; "
           f"{study}. This page: `make results-doc`."]
    if not s.study:
        out.append(missing(key, f"a seed study (`{seeds_cmd.format(n=5)}`)"))
    out += [mean_saving_part(w, s), per_target_part(w, s, targets), points_part(w, s), reading(w, s)]
    return "\n\n".join(out)


def mean_saving_part(w: Words, s: Scenario) -> str:
    fam = router_family(w, s)
    if fam.empty:
        return "_(no mean saving in this run: no learned router reaches a target together with KNN)_"
    b = kept(fam["n_resamples"].min())
    out = [f"**Mean fixed-accuracy saving vs KNN over the validation target grid, base split** (v_mean_saving_ci; CR² "
           f"at α = {s.alpha:g}; every interval on all {b} resamples, a target a frontier misses costing the cheapest "
           f"Always-model that reaches it)",
           RouterMeanSavings(fam).markdown().rstrip(),
           holm_line(fam, lambda r: f"{name(r.method)}'s mean saving", "the routers' mean savings")]
    sr = seed_routers(w, s)
    if len(sr):
        k = len(sr)
        out += [f"**The same mean saving over the seeds of study `{s.study}`** (v_seed_spread; every seed on the "
                f"base run's target grid, so every seed estimates the same quantity; Holm over the same {k} routers)",
                SeedRouterSavings(sr).markdown().rstrip()]
    return "\n\n".join(out)


def per_target_part(w: Words, s: Scenario, targets) -> str:
    fam = target_family(w, s)
    shown = [t for t in targets if len(pick(fam, target=float(t)))]
    if not shown:
        return f"_(no learned router reaches the targets {', '.join(f'{t:.2f}' for t in targets)} with KNN)_"
    seeds = pd.DataFrame()
    if len(s.spread):
        sp = s.spread[(s.spread["metric"] == "saving_vs_knn_pct") & (s.spread["method"] == "cr2")]
        sp = sp[sp["target"].round(2).isin([round(t, 2) for t in shown])].sort_values("target").reset_index(drop=True)
        seeds = seed_family(w, sp)
    knn = s.fixed[s.fixed["method"] == reference_router()]
    table = TargetSavings(fam, shown, learned(), knn if "knn_cost" in s.fixed.columns and len(knn) else None, seeds)
    return "\n\n".join([
        f"**Saving vs KNN at the targets, % [95 % CI]** (v_fixed_accuracy_ci, interpolated monotone frontier, CR² at "
        f"α = {s.alpha:g}; each word the test's stored one, Holm over its family: the {family_sizes(fam)} tests of "
        f"every learned router × every target it and KNN reach in this run)",
        table.markdown().rstrip(),
        holm_line(fam, lambda r: f"{name(r.method)} at {r.target:.2f}", "every target × router")])


def _listed(names: list[str], conjunction: str) -> str:
    """'A', 'A and B', 'A, B and C' (or 'or')."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"


def points_part(w: Words, s: Scenario) -> str:
    p = s.points
    cr2 = method_router()
    beside = [m for m in routers_tagged("headline") if m != cr2]  # the catalogue's headline routers, CR² aside
    named = _listed([short_name(m) for m in beside], "and")
    d = p[p["lam"].isin(HEADLINE_LAMS) & (((p["method"] == cr2) & ((p["alpha"] - s.alpha).abs() < 1e-12))
                                          | p["method"].isin(beside))]
    if d.empty:
        return f"_(no {_listed([short_name(m) for m in (cr2, *beside)], 'or')} operating point at the headline λ in this run)_"

    def seed_row(method: str, metric: str, lam: float):
        sp = pick(s.spread, method=method, metric=metric, lam=lam, benchmark="all",
                  alpha=float(s.alpha) if method == cr2 else None) if len(s.spread) else pd.DataFrame()
        return next(sp.itertuples()) if len(sp) else None

    return (f"**Operating points, {short_name(cr2)} at α = {s.alpha:g}, {named}** (v_operating_points_ci, "
            f"{kept(d['n_resamples'].max())} resamples each; seeds: v_seed_spread, mean ± sd only)\n\n"
            + PointsWithSeeds(d, seed_row).markdown().rstrip())


def risk_vs_alpha(w: Words, s: Scenario) -> str:
    """CR²'s test risk at α against α, over ALL test rows (the population the guarantee is about): on the base split
    from the bootstrap of risk − α (its p from the same resamples), over seeds from the t-interval of the mean risk;
    each family the headline λ, Holm over them — the same family on both."""
    t = s.risk_tests
    c = t[(t["method"] == "cr2") & ((t["alpha"] - s.alpha).abs() < 1e-12) & t["lam"].isin(HEADLINE_LAMS)
          & (t["benchmark"] == "all")].sort_values("lam") if len(t) else t
    if c.empty:
        return ""
    if c["p_holm"].isna().any():
        raise ValueError("the risk-vs-α tests were stored without their family and Holm p (schema < 9): run `cr2 run` "
                         "on the warehouse again")
    ph = c["p_holm"].to_numpy(float)  # the stored test's Holm p over its family (cr2.evaluation.families)
    m = sorted({int(v) for v in c["family_size"]})
    base = "; ".join(f"λ = {r.lam:g}: risk {num(r.estimate + s.alpha, '.4f')}, risk − α {num(r.estimate, '+.4f')} "
                     f"[{num(r.lower, '+.4f')}, {num(r.upper, '+.4f')}], {_compare(w, r.lower, r.upper, q)}"
                     for r, q in zip(c.itertuples(), ph))
    out = (f"CR²'s test teacher-disagreement risk at α = {s.alpha:g} over all test rows (the risk its rule bounds; 95 % "
           f"interval of risk − α, \"larger\" / \"smaller\" only where its Holm-adjusted bootstrap p is below 0.05, "
           f"Holm over its family — the {'/'.join(map(str, m))} risk-vs-α tests of CR² at this α, every λ of its sweep "
           f"× every risk): {base}.")
    if s.spread.empty:
        return out
    sp = s.spread[(s.spread["method"] == "cr2") & (s.spread["metric"] == "risk_all") & (s.spread["benchmark"] == "all")
                  & ((s.spread["alpha"] - s.alpha).abs() < 1e-9) & s.spread["lam"].isin(HEADLINE_LAMS)]
    sp = sp.sort_values("lam")
    # risk − α over seeds, one family: the headline λ of CR² at this α
    iv = over_seeds(sp.assign(seed_mean=sp["seed_mean"] - s.alpha), verdict=change_verdict)
    seeds = "; ".join(
        f"λ = {lam:g}: {num(r.mean + s.alpha, '.4f')} ± {num(r.sd, '.4f')}, risk − α t-interval "
        f"[{num(r.lo, '+.4f')}, {num(r.hi, '+.4f')}], "
        f"{_compare(w, r.lo, r.hi, r.p_holm)}" for lam, r in zip(sp["lam"], iv.itertuples()))
    return out + (f" Over the {s.n_seeds} seeds (all rows; mean ± sd; the word from the t-interval of risk − α and its "
                  f"t-test, Holm over the same {len(iv)} λ): {seeds}.")


def _compare(w: Words, lower: float, upper: float, p_adjusted: float) -> str:
    """larger / smaller only where the family-wise p is below 0.05 (which implies the interval excludes 0)."""
    return w.compare(lower, upper, p_adjusted)


def reading(w: Words, s: Scenario) -> str:
    """What the tables say, each number and word from them."""
    fam = router_family(w, s)
    lines = []
    if len(fam):
        lines.append("- **Mean saving vs KNN, base split:** " + "; ".join(
            f"{name(r.method)} {num(r.mean_saving_vs_knn_pct)} % [{num(r.saving_lower)}, {num(r.saving_upper)}] "
            f"{r.word_holm} (Holm over the routers)" for r in fam.itertuples()) + ".")
    tf = target_family(w, s)
    if len(tf):
        lines.append(f"- **Every target × router ({len(tf)} savings), Holm over all of them:** "
                     f"\"cheaper\" / \"dearer\" / \"no difference detected\" = {counts_cell(tf['verdict_holm'])}.")
    sr = seed_routers(w, s)
    if len(sr) and len(fam):
        both = fam.merge(sr[["method", "seed_verdict", "seed_word", "lo", "hi", "n_seeds"]], on="method")
        diff = [f"{name(r.method)} (base split {r.word_holm}, over {int(r.n_seeds)} seeds {r.seed_word}, t-interval "
                f"[{num(r.lo)}, {num(r.hi)}])" for r in both.itertuples() if r.verdict_holm != r.seed_verdict]
        same = [f"{name(r.method)} {r.seed_word}" for r in both.itertuples() if r.verdict_holm == r.seed_verdict]
        text = "- **Base split vs seeds (mean saving, both Holm-adjusted):** "
        text += ("the word over seeds differs from the base split's for " + "; ".join(diff) + "." if diff else
                 "the word over seeds is the base split's for every router.")
        if same and diff:
            text += " The same for " + ", ".join(same) + "."
        lines.append(text)
    r = risk_vs_alpha(w, s)
    if r:
        lines.append("- **Risk:** " + r)
    return "**What the intervals say** (test-query noise; seeds where named)\n\n" + "\n".join(lines)
