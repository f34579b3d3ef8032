"""Section "Is a difference real? 95 % intervals and seed variability": for the default and the measured scenario,
every learned router's saving vs KNN with its paired bootstrap interval (test-query noise) and its spread over the
seeds of the newest seed study (training noise), each word from an interval — Holm-adjusted where a family is read
together."""
from __future__ import annotations

import pandas as pd

from cr2.evaluation.statistics import holm_adjust, saving_verdict, t_interval
from cr2.config import HEADLINE_LAMS
from cr2.report.markdown import markdown_table
from cr2.report.tables import ci_cell
from cr2_cli.results import PAPER_TARGETS
from cr2_cli.resultsdoc.core import HOMES, Doc
from cr2_cli.resultsdoc.scenario_stats import (ALPHA, LEARNED, Scenario, banner, holm_line, kept, load, mean_sd, name,
                                              num, pick, router_family, seed_family, seed_routers, t_cell,
                                              target_family)

# scenario key → (title, the targets the per-target table shows, the seed-study command)
SCENARIOS = {
    "default": ("Default scenario", PAPER_TARGETS, "cr2 study seeds --n {n} --home var"),
    "mmlu-pro": ("Measured scenario (MMLU-Pro)", (0.55, 0.60, 0.65, 0.70, 0.75, 0.80),
                 "cr2 study seeds --n {n} -c configs/mmlu-pro-measured.yaml --home var/mmlu-pro"),
}
OP_METRICS = ("accuracy", "cost", "local_rate", "risk")

INTRO = """## Is a difference real? 95 % intervals and seed variability

Every comparison below is one number from one split and one training seed. Two kinds of noise, measured
separately (docs/method.md, "How sure is a comparison?"):
- **test-query noise** — a paired bootstrap over the test queries (one index array shared by every method; each
  method's frontier, fixed-accuracy cost and saving recomputed on every resample; percentile intervals; table
  `intervals`, views `v_operating_points_ci`, `v_fixed_accuracy_ci`, `v_mean_saving_ci`; the cached `intervals`
  task of `cr2 run`). A saving at a target, or a mean saving over the targets, exists on a resample only where both
  routers reach the target(s) on it: those intervals are conditional on the resamples kept, and every table says how
  many were kept (`intervals.n_resamples`);
- **training noise** — `cr2 study seeds` re-runs the split, teacher, gate, learned baselines, calibration and
  evaluation per seed (tables `seed_runs`, `seed_results`, view `v_seed_spread`).

A saving is called "cheaper" (or "dearer") only where its 95 % interval excludes 0; every other comparison is
"no difference detected". Where several savings are read together (the learned routers' mean savings; every
target × router), each is read a second time with its p-value taken from its interval
(`cr2.evaluation.statistics.interval_p_value`) and Holm-adjusted over the family: a direction then also needs the adjusted p
below 0.05, and the statements that change are listed. Over seeds, a word comes only from the 95 % t-interval of
the mean over the seeds and its one-sample t-test, Holm-adjusted over the family read together; mean ± sd is shown
beside it and carries no word."""


def render(doc: Doc) -> str:
    parts = [INTRO]
    for key in SCENARIOS:
        parts.append(scenario_part(doc, key))
    return "\n\n".join(parts) + "\n"


def scenario_part(doc: Doc, key: str) -> str:
    title, targets, seeds_cmd = SCENARIOS[key]
    s = load(doc, key)
    if s is None:
        return f"### {title}\n\n" + doc.missing(key, f"{title} (its evaluation run)")
    n_risk, n_solv = s.test_sizes()
    home, make = HOMES[key]
    study = (f"seed study `{s.study}` ({s.n_seeds} seeds; seed 0 is run `{s.run_id}`) from "
             f"`{seeds_cmd.format(n=s.n_seeds)}`" if s.study else "no seed study")
    out = [f"### {title} ({s.kind} labels)",
           f"{banner(s)} Warehouse `{home}` (`{make}`), newest full evaluation run `{s.run_id}`: {n_risk:,} test "
           f"queries, {n_solv:,} that some model solves; {kept(s.n_resamples)} paired resamples of the test queries; "
           f"{study}. This page: `make results-doc`."]
    if not s.study:
        out.append(doc.missing(key, f"a seed study (`{seeds_cmd.format(n=5)}`)"))
    out += [mean_saving_part(doc, s), per_target_part(doc, s, targets), points_part(doc, s), reading(doc, s)]
    return "\n\n".join(out)


def mean_saving_part(doc: Doc, s: Scenario) -> str:
    fam = router_family(doc, s)
    if fam.empty:
        return "_(no mean saving in this run: no learned router reaches a target together with KNN)_"
    n = int(fam["p"].notna().sum())
    rows = [{"router": name(r.method), "targets both reach": int(r.n_targets),
             "mean saving vs KNN % [95 % CI]": ci_cell(r.mean_saving_vs_knn_pct, r.saving_lower, r.saving_upper),
             "resamples kept (every target reached)": kept(r.n_resamples), "word (interval)": r.word,
             f"p, Holm over the {n} routers": num(r.p_holm, ".2g"), "word under Holm": r.word_holm}
            for r in fam.itertuples()]
    out = ["**Mean fixed-accuracy saving vs KNN over the targets both reach, base split** (v_mean_saving_ci)",
           markdown_table(pd.DataFrame(rows)).rstrip(),
           holm_line(fam, lambda r: f"{name(r.method)}'s mean saving", "the routers' mean savings")]
    sr = seed_routers(doc, s)
    if len(sr):
        k = len(sr)
        rows = [{"router": name(r.method), "seeds": int(r.n_seeds), "mean ± sd": mean_sd(r),
                 "min … max": f"{num(r.seed_min)} … {num(r.seed_max)}", "95 % t-interval over seeds": t_cell(r),
                 f"t-test p, Holm over the {k} routers": num(r.p_t_holm, ".2g"), "word (t-interval, Holm)": r.seed_word}
                for r in sr.itertuples()]
        out += [f"**The same mean saving over the seeds of study `{s.study}`** (v_seed_spread; each seed's own "
                f"targets both reach)", markdown_table(pd.DataFrame(rows)).rstrip()]
    return "\n\n".join(out)


def per_target_part(doc: Doc, s: Scenario, targets) -> str:
    fam = target_family(doc, s)
    shown = [t for t in targets if len(pick(fam, target=float(t)))]
    if not shown:
        return f"_(no learned router reaches the targets {', '.join(f'{t:.2f}' for t in targets)} with KNN)_"
    seeds = pd.DataFrame()
    if len(s.spread):
        sp = s.spread[(s.spread["metric"] == "saving_vs_knn_pct") & (s.spread["method"] == "cr2")]
        sp = sp[sp["target"].round(2).isin([round(t, 2) for t in shown])].sort_values("target").reset_index(drop=True)
        seeds = seed_family(doc, sp)
    knn = s.fixed[s.fixed["method"] == "knn"]
    rows = []
    for t in shown:
        at = pick(fam, target=float(t))
        row = {"target": f"{t:.2f}"}
        if "knn_cost" in s.fixed.columns and len(knn):
            k = pick(knn, target=float(t))
            row["KNN cost"] = num(k["knn_cost"].iloc[0] if len(k) else None, ".3f")
        for m in LEARNED:
            r = at[at["method"] == m]
            if r.empty:
                row[name(m)] = "–"
                continue
            r = next(r.itertuples())
            cell = f"{ci_cell(r.saving_vs_knn_pct, r.saving_lower, r.saving_upper)} {r.word}"
            row[name(m)] = cell + (f" (Holm: {r.word_holm})" if r.verdict != r.verdict_holm else "")
        row["resamples kept (min … max over the routers)"] = (f"{kept(at['n_resamples'].min())} … "
                                                              f"{kept(at['n_resamples'].max())}")
        if len(seeds):
            sr = pick(seeds, target=float(t))
            if len(sr):
                sr = next(sr.itertuples())
                row["CR² over seeds: mean ± sd"] = mean_sd(sr)
                row["95 % t-interval"] = t_cell(sr)
                row[f"word (t-test, Holm over the {len(seeds)} targets)"] = sr.seed_word
        rows.append(row)
    n = int(fam["p"].notna().sum())
    routers = fam["method"].nunique()
    return "\n\n".join([
        f"**Saving vs KNN at the targets, % [95 % CI]** (v_fixed_accuracy_ci, interpolated monotone frontier; the word "
        f"of each cell from its interval; \"(Holm: …)\" where Holm over the {n} tests of every target × router of "
        f"this run — {routers} routers — changes it)",
        markdown_table(pd.DataFrame(rows).fillna("–")).rstrip(),
        holm_line(fam, lambda r: f"{name(r.method)} at {r.target:.2f}", "every target × router")])


def points_part(doc: Doc, s: Scenario) -> str:
    p = s.points
    d = p[p["lam"].isin(HEADLINE_LAMS) & (((p["method"] == "cr2") & ((p["alpha"] - ALPHA).abs() < 1e-12))
                                          | p["method"].isin(["knn", "mlp"]))]
    if d.empty:
        return "_(no CR², KNN or MLP operating point at the headline λ in this run)_"
    rows = []
    for r in d.sort_values(["lam", "method"]).itertuples():
        row = {"λ": f"{r.lam:g}", "router": name(r.method)}
        for m in OP_METRICS:
            row[f"{m} [95 % CI]"] = ci_cell(getattr(r, m), getattr(r, f"{m}_lower"), getattr(r, f"{m}_upper"), ".3f")
        for m in OP_METRICS:
            sp = pick(s.spread, method=r.method, metric=m, lam=float(r.lam), benchmark="all",
                      alpha=float(ALPHA) if r.method == "cr2" else None) if len(s.spread) else pd.DataFrame()
            row[f"{m}: seeds mean ± sd"] = mean_sd(next(sp.itertuples()), ".3f") if len(sp) else "–"
        rows.append(row)
    return (f"**Operating points, CR² at α = {ALPHA:g}, KNN and MLP** (v_operating_points_ci, "
            f"{kept(d['n_resamples'].max())} resamples each; seeds: v_seed_spread, mean ± sd only)\n\n"
            + markdown_table(pd.DataFrame(rows)).rstrip())


def risk_vs_alpha(doc: Doc, s: Scenario) -> str:
    """CR²'s test risk at α against α: on the base split from its bootstrap interval, over seeds from the t-interval
    of the mean risk (each family: the headline λ, Holm over them)."""
    c = s.points[(s.points["method"] == "cr2") & ((s.points["alpha"] - ALPHA).abs() < 1e-12)
                 & s.points["lam"].isin(HEADLINE_LAMS)].sort_values("lam")
    if c.empty:
        return ""
    base = "; ".join(f"λ = {r.lam:g}: {num(r.risk, '.4f')} [{num(r.risk_lower, '.4f')}, {num(r.risk_upper, '.4f')}], "
                     f"risk − α {doc.compare(r.risk_lower - ALPHA, r.risk_upper - ALPHA)}" for r in c.itertuples())
    out = (f"CR²'s test false-acceptance risk at α = {ALPHA:g} (solvable rows, 95 % interval; \"larger\" / "
           f"\"smaller\" only where the interval of risk − α excludes 0): {base}.")
    if s.spread.empty:
        return out
    sp = s.spread[(s.spread["method"] == "cr2") & (s.spread["metric"] == "risk") & (s.spread["benchmark"] == "all")
                  & ((s.spread["alpha"] - ALPHA).abs() < 1e-9) & s.spread["lam"].isin(HEADLINE_LAMS)]
    sp = sp.sort_values("lam")
    ivs = [t_interval(m - ALPHA, sd, n) for m, sd, n in zip(sp["seed_mean"], sp["seed_sd"], sp["n_seeds"])]
    ph = holm_adjust([i.p_value for i in ivs])
    seeds = "; ".join(
        f"λ = {lam:g}: {num(iv.mean + ALPHA, '.4f')} ± {num(iv.sd, '.4f')}, risk − α t-interval "
        f"[{num(iv.lower, '+.4f')}, {num(iv.upper, '+.4f')}], "
        f"{_compare(doc, iv.lower, iv.upper, q)}" for lam, iv, q in zip(sp["lam"], ivs, ph))
    return out + (f" Over the {s.n_seeds} seeds (mean ± sd; the word from the t-interval of risk − α and its t-test, "
                  f"Holm over the {len(ivs)} λ): {seeds}.")


def _compare(doc: Doc, lower: float, upper: float, p_adjusted: float) -> str:
    """larger / smaller only where the interval excludes 0 and the family-wise p is below 0.05."""
    if saving_verdict(lower, upper, p_adjusted) in ("cheaper", "dearer"):
        return doc.compare(lower, upper)
    return doc.saving(lower, upper, p_adjusted)


def reading(doc: Doc, s: Scenario) -> str:
    """What the tables say, each number and word from them."""
    fam = router_family(doc, s)
    lines = []
    if len(fam):
        lines.append("- **Mean saving vs KNN, base split:** " + "; ".join(
            f"{name(r.method)} {num(r.mean_saving_vs_knn_pct)} % [{num(r.saving_lower)}, {num(r.saving_upper)}] "
            f"{r.word}, under Holm {r.word_holm}" for r in fam.itertuples()) + ".")
    tf = target_family(doc, s)
    if len(tf):
        from cr2_cli.resultsdoc.core import counts

        lines.append(f"- **Every target × router ({len(tf)} savings):** by interval "
                     f"\"cheaper\" / \"dearer\" / \"no difference detected\" = {counts(tf['verdict'])}; under Holm "
                     f"{counts(tf['verdict_holm'])}.")
    sr = seed_routers(doc, s)
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
    r = risk_vs_alpha(doc, s)
    if r:
        lines.append("- **Risk:** " + r)
    return "**What the intervals say** (test-query noise; seeds where named)\n\n" + "\n".join(lines)
