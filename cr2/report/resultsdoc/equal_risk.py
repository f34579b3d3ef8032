"""Section "Equal-risk comparison" and "Which router should I deploy?": every router certified under the same rules.

Numbers: table equal_risk of each scenario's newest evaluation run (cr2.evaluation.equal_risk; `cr2 run` writes it), the
scenario's newest seed study (seed_results rows `equal-risk:<question>`), the newest pool sweep (pool_results rows
`equal-risk:<question>`) and the newest premise study with a certified KNN. Every comparison is at ONE α (the run's
grids.default_alpha) and one rule per side. Words: a mean saving is a direction only where its Holm-adjusted
bootstrap p over its family (scenario × question × rule × α, docs/guarantees.md "One family rule") is below 0.05 —
which implies its 95 % interval excludes 0; a seed spread only where the t-interval over seeds excludes 0 and its
Holm-adjusted t-test p (same family) is below 0.05. The deploy decision is cr2.evaluation.deploy's rule.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from cr2.config.scenarios import scenarios
from cr2.core.errors import DataValidationError
from cr2.evaluation.deploy import contradictions
from cr2.evaluation.equal_risk import seed_spread
from cr2.evaluation.families import over_seeds
from cr2.evaluation.verdict_counts import interval_sides, word_counts
from cr2.report.deploy import RULE_SUMMARY, deploy_rows, whole_cost_by_rule_rows
from cr2.report.equal_risk import (RULE_RISK, CalibratedVsDefault, CertifiedValidityAt, EqualRiskScores,
                                   SeedEqualRisk, stored_word)
from cr2.report.headline import mean_grid_line
from cr2.report.markdown import markdown_table
from cr2.report.pools import across_pool_equal_risk_markdown
from cr2.report.premise_map import PremiseVsCertified
from cr2.report.resultsdoc.words import PLAIN, Words, label_kind, missing
from cr2.routers import reference_router, short_name

SCENARIOS = tuple((key, s.title) for key, s in scenarios().items() if s.is_run)  # configs/scenarios.yaml

INTRO = """## Equal-risk comparison: every router certified under the same rules

The certify stage of `cr2 run` certifies every router that predicts p̂ under the same rules (docs/guarantees.md,
"Certifying any router"), and the equal-risk stage compares them at the same α (table `equal_risk`,
`cr2 results --equal-risk`). Every comparison below is a paired fixed-accuracy saving: the mean, over a grid of
target accuracies fixed from the validation split before the test split is read (from the device model's to the
best Always-model's validation accuracy), of side A's saving against side B at the same target; a target a side's
frontier misses on a resample costs what the deployer would pay instead — the cheapest Always-model that reaches it
on that resample (docs/guarantees.md, "Estimands"). So every interval rests on all of its bootstrap resamples, and
its p-value is read off the same resamples (no normal approximation). Every comparison is at one α (the run's
grids.default_alpha) and one rule per side:

- **gate quality** — CR² uncertified (its gate at s ≥ 0.5, i.e. predicted margin ≥ 0) against the baseline
  uncertified (its one-shot argmax of p̂ − λĉ): whose score routes at the lower cost when nothing is guaranteed;
- **calibrated vs default threshold** — each router with its calibrated threshold at α against the same router
  with its default threshold: a change of decision rule, which can come out either way; it is not a price paid at
  equal risk (the two sides do not have the same realised risk), so no "price of the guarantee" is read from it;
- **which score certifies at the lower cost** — CR²@rule against baseline@rule at the same α: the comparison a user
  who needs the guarantee actually faces;
- **which router to deploy** — the deploy rule (docs/guarantees.md): every certified router, the same routers with
  the device switched off and the cheapest Always edge model, one test per pair on an antisymmetric estimand.

One family rule (docs/guarantees.md): each test's family is decided once by its question (here: one scenario ×
question × rule × α) and stored with it, with its Holm-adjusted p and its one word — "cheaper" / "dearer" only where
that Holm p is below 0.05, else "no difference detected". Every cell prints the stored word and its Holm p; `cr2
results`, the HTML report and the SQL views print the same word for the same test."""


@dataclass(frozen=True)
class ScenarioRun:
    """One scenario's newest evaluation run as the section reads it (run_id None: no run; every frame None where
    its warehouse is not built)."""

    key: str
    name: str
    built: bool
    run_id: str | None = None
    label_source: str | None = None
    alpha: float | None = None  # the α the run compares at (stored with it)
    rows: pd.DataFrame | None = None  # table equal_risk of the run
    validity: pd.DataFrame | None = None  # its certified re-split cells
    seed_study: str | None = None  # the newest seed study (None: none)
    seed_rows: pd.DataFrame | None = None  # its seed_results rows `equal-risk:<question>`
    decisions: pd.DataFrame | None = None  # deploy_decisions of the run
    candidates: pd.DataFrame | None = None  # deploy_candidates of the run


@dataclass(frozen=True)
class PremiseDeploy:
    """The newest premise study with a certified KNN (study None: none): its v_premise rows and how it was made."""

    study: str | None
    view: pd.DataFrame | None = None
    mode: str | None = None  # cr2.studies.premise_settings.mode of its settings (None: not recorded)
    command: str | None = None  # cr2.studies.premise_settings.command (None: not recorded)


@dataclass(frozen=True)
class EqualRiskData:
    scenarios: tuple[ScenarioRun, ...]
    pool_study: str | None = None  # the newest pool sweep (None: none, or no pools warehouse)
    pool_questions: pd.DataFrame | None = None  # cr2.studies.pools.across_pool_questions of its equal-risk rows
    routing_bench: dict | None = None  # the stored ROUTING_BENCH as read (None: not there)
    premise: PremiseDeploy | None = None  # None: no default warehouse


PREMISE_RULE = "crc"  # the rule the premise study's certified KNN is read under


def premise_reference(rule: str = PREMISE_RULE) -> str:
    """The certified reference router a premise study compares CR² with: `<reference>@<rule>`."""
    return f"{reference_router()}@{rule}"


def _verdicts(means: pd.DataFrame) -> pd.Series:
    return pd.Series([stored_word(r) for r in means.to_dict("records")], index=means.index, dtype=object)


def _family_sizes(means: pd.DataFrame, alpha: float) -> dict[tuple, int]:
    """The stored size of each (question, rule) family at α."""
    at = means[means["alpha"].isna() | ((means["alpha"] - alpha).abs() < 1e-12)]
    return {k: int(g["family_size"].max()) if g["family_size"].notna().any() else 0
            for k, g in at.groupby(["question", at["rule"].fillna("–")], sort=False)}


def page_alpha(alphas: dict[str, float | None]) -> float | None:
    """The one α the comparisons of every scenario are read at (each run's stored α); an error where they differ, since
    the page's families and its deploy table are stated at one α."""
    found = {k: a for k, a in alphas.items() if a is not None}
    if len(set(found.values())) > 1:
        raise DataValidationError(f"the scenarios' runs compare at different α ({', '.join(f'{k}: {a:g}' for k, a in found.items())}); "
                                  "the equal-risk section reads every scenario at one α: re-run them with one grids.default_alpha")
    return next(iter(found.values()), None)


def scenario_tables(sc: ScenarioRun, alpha: float, w: Words) -> tuple[str, pd.DataFrame]:
    """The comparisons of one scenario at α (markdown) and its mean-saving rows (for the answers and deploy table)."""
    key, name, run_id, rows, source, valid = sc.key, sc.name, sc.run_id, sc.rows, sc.label_source, sc.validity
    if run_id is None:
        return missing(key, f"{name}: no evaluation run"), pd.DataFrame()
    if rows.empty:
        return missing(key, f"{name}: run `{run_id}` has no equal-risk rows"), pd.DataFrame()
    means = rows[rows["metric"] == "mean_saving_pct"].copy()
    means["word"] = _verdicts(means)
    rules = [r for r in RULE_RISK if r in set(means["rule"].dropna())]
    baselines = list(dict.fromkeys(means.loc[means["question"] == "gate-quality", "against"]))
    fam = _family_sizes(means, alpha)
    b = int(rows["n_resamples"].max())
    n_t = int(means["n_targets"].max())
    out = [f"#### {name} — {label_kind(source)} labels (`{source}`), run `{run_id}`, α = {alpha:g}\n",
           f"Mean fixed-accuracy saving of CR² against each baseline, % [95 % CI] (positive: CR² at the lower cost), "
           f"over the {n_t} targets of the validation grid, every interval on all {b:,} resamples. "
           f"{mean_grid_line(means).strip()} Holm families: "
           f"gate quality {fam.get(('gate-quality', '–'), 0)} tests; certified score "
           + ", ".join(f"{r} {fam.get(('certified-score', r), 0)}" for r in rules) + ".\n"]
    out.append(EqualRiskScores(means, baselines, rules, alpha, w.word).markdown())
    out.append(f"\nCalibrated vs default threshold at α = {alpha:g}: each router with its calibrated threshold against "
               f"itself with its default one (margin ≥ 0; CR²: s ≥ 0.5), mean saving % [95 % CI] (negative: the "
               f"calibrated rule routes at a higher cost). A change of decision rule, not a comparison at equal realised risk. "
               f"Holm families: " + ", ".join(f"{r} {fam.get(('calibrated-vs-default', r), 0)}" for r in rules) + ".\n")
    out.append(CalibratedVsDefault(means, ["cr2", *baselines], rules, alpha, w.word).markdown())
    if len(valid):
        out.append(f"\nValidity over random calibration/test re-splits at α = {alpha:g} (each rule's own risk; the "
                   f"promise is E[risk] ≤ α at every λ; one-sided test per λ, Holm over the λ of each row — "
                   f"docs/guarantees.md, \"Validity over re-splits\"):\n")
        out.append(CertifiedValidityAt(valid, alpha, w.word).markdown())
    return "\n".join(out), means.assign(scenario=name, scenario_key=key)


def seed_table(sc: ScenarioRun, w: Words) -> str:
    """The equal-risk savings over the seeds of the newest seed study: mean ± sd, the 95 % t-interval over seeds and
    a one-sample t-test against 0, Holm-adjusted per family (question × rule at the default α), the same family as
    the base split's. Every seed averages over the base run's target grid, so every seed estimates one quantity."""
    study, d = sc.seed_study, sc.seed_rows
    if study is None:
        return ""
    if d.empty:
        return f"_Seed study `{study}` has no equal-risk rows (made before the equal-risk stage)._\n"
    spread = seed_spread(d)
    if spread.empty:
        return f"_Seed study `{study}` has fewer than two seeds with equal-risk rows: no spread over seeds._\n"
    # per family: question × rule at the default α
    table = SeedEqualRisk(spread, over_seeds(spread, ["question", "rule", "alpha_key"]), w.word)
    return (f"\nOver the seeds of study `{study}` (split, teacher, gate and learned baselines re-seeded; labels and "
            f"states fixed; every seed on the base run's target grid): a word only where the t-interval over seeds "
            f"excludes 0 and the t-test's Holm-adjusted p (per family: question × rule at the default α) is below "
            f"0.05.\n\n" + table.markdown())


TITLES = {"gate-quality": "Gate quality (CR² vs each baseline, both uncertified)",
          "calibrated-vs-default": "Calibrated vs default threshold (each router against itself; a change of rule, "
                                   "not a price at equal risk)",
          "certified-score": "Which score certifies at the lower cost (CR² vs each baseline, both certified, same "
                             "rule and α)"}


def answers(w: Words, means: pd.DataFrame, alpha: float) -> str:
    """The questions answered in counts of family-wise verdicts over the scenarios, at the one α."""
    lines = []
    for q, title in TITLES.items():
        d = means[means["question"] == q]
        at = d if q == "gate-quality" else d[(d["alpha"] - alpha).abs() < 1e-12]
        c = word_counts(at["word"])
        side = "CR²" if q != "calibrated-vs-default" else "the calibrated router"
        lines.append(f"- **{title}** — at α = {alpha:g}: {side} \"cheaper\" in {int(c.get('cheaper', 0))}, \"dearer\" "
                     f"in {int(c.get('dearer', 0))}, \"no difference detected\" in "
                     f"{int(c.get('no difference detected', 0))} of {len(at)} comparisons (each word from its own "
                     f"family's Holm correction).")
        for word in ("cheaper", "dearer"):
            hits = at[at["word"] == word]
            if len(hits):
                first = hits.iloc[0]
                lines.append(f"  {w.saving(first['lower'], first['upper'], first['p_holm'])}: " + ", ".join(sorted(
                    f"{r.scenario}: {short_name(r.router)} vs {short_name(r.against)}"
                    + (f" ({r.rule})" if isinstance(r.rule, str) else "") for r in hits.itertuples())) + ".")
    lines.append(_knn_direction(means, alpha))
    return "\n".join(lines) + "\n"


def _knn_direction(means: pd.DataFrame, alpha: float) -> str:
    """Per scenario, where CR²'s intervals against KNN lie (gate quality and every certified score at α): how many
    lie wholly below 0 and wholly above — a description of the intervals beside the corrected words, so a scenario
    whose every interval points one way says so even where Holm leaves the words at "no difference detected"."""
    d = means[(means["router"] == "cr2") & (means["against"] == reference_router())
              & ((means["question"] == "gate-quality") | ((means["question"] == "certified-score")
                                                          & ((means["alpha"] - alpha).abs() < 1e-12)))]
    parts = []
    for scenario, g in d.groupby("scenario", sort=False):
        below, above = interval_sides(g["lower"], g["upper"])
        words = word_counts(g["word"])
        parts.append(f"{scenario}: {below} of {len(g)} wholly below 0 (KNN costs less), {above} wholly above "
                     f"(words: {int(words.get('dearer', 0))} \"dearer\", {int(words.get('cheaper', 0))} \"cheaper\")")
    return ("- **CR² against KNN, where the intervals lie** (gate quality and certified score at α, per scenario; the "
            "words are the corrected ones above): " + "; ".join(parts) + ".") if parts else ""


ROUTING_BENCH = "benchmarks/results/routing.json"


def decision_us(b: dict | None) -> tuple[dict[str, float], str]:
    """Measured µs per decision at batch 1 (median over repeats) of each router in the stored routing benchmark `b`
    (`python benchmarks/bench_routing.py`), by its key there, and a line saying where and when it was measured."""
    if b is None:
        return {}, f"no stored `{ROUTING_BENCH}`: run `python benchmarks/bench_routing.py`"
    us = {f["key"][: -len(".b1_us")]: float(f["median"]) for f in b.get("figures", []) if f["key"].endswith(".b1_us")}
    m = b.get("machine", {})
    return us, (f"µs per decision: median at batch 1 of `{ROUTING_BENCH}` (measured {str(b.get('measured_at', '?'))[:10]}, "
                f"{m.get('cpus', '?')} CPUs, {b.get('config', {}).get('threads', '?')} thread, "
                f"{b.get('config', {}).get('data', 'its data')}); CR² with a device: gate and teacher on every query "
                "(`cr2-route`), without: the teacher alone (`cr2-edge`)")


def deploy_table(data: EqualRiskData) -> str:
    """Which router to deploy per scenario and rule: the stored decisions of each scenario's newest evaluation run
    (tables deploy_decisions / deploy_candidates, cr2.evaluation.deploy's rule) — the rows `cr2 results` and the HTML
    report print — and per scenario every candidate with the whole cost of its decisions."""
    rows, costs = [], []
    us, us_line = decision_us(data.routing_bench)
    for sc in data.scenarios:
        if sc.run_id is None:
            continue
        name, run_id, decisions, candidates = sc.name, sc.run_id, sc.decisions, sc.candidates
        rows_er = sc.rows.to_dict("records")
        for _, d in decisions.iterrows():
            bad = contradictions(d, rows_er)
            if bad:  # the page never prints a recommendation a stored test calls dearer
                raise DataValidationError(f"{name}: the deploy answer for {d['rule']} contradicts stored words: "
                                          + "; ".join(bad))
        if decisions.empty:
            rows.append({"scenario": name, "answer (the deploy rule)": f"– (run `{run_id}` stores no deploy decision: "
                         "re-run it)"})
            continue
        rows += deploy_rows(decisions, candidates, f"{name}, run `{run_id}`")
        costs += whole_cost_by_rule_rows(name, decisions, candidates, us)
    if not rows:
        return "_No scenario stores a deploy decision (runs made before the deploy rule)._\n"
    return (RULE_SUMMARY + "\n\n" + markdown_table(pd.DataFrame(rows)) + "\n\n**The whole cost of a decision, per "
            "candidate** (ranked simplest first: device model, router, worst-case decision FLOPs — what the rule ranks "
            "by; every candidate that runs a router also pays the shared MiniLM embedding; parameters and training "
            f"time as stored with the artefacts; {us_line}):\n\n" + markdown_table(pd.DataFrame(costs)))


def premise_deploy_table(p: PremiseDeploy, w: Words, rule: str = PREMISE_RULE) -> str:
    """By device/edge cost ratio: in every cell of the newest premise study with a certified KNN, CR² retrained vs
    KNN certified at the same α and rule (mean saving [95 % CI]), p from the cell's own bootstrap resamples and
    Holm-adjusted over the cells. The premise cells store no deploy rule's tests (no device-off or always-edge
    candidate): a cell's word is its comparison, never a deploy recommendation."""
    certified, study, v = premise_reference(rule), p.study, p.view
    if study is None:
        return missing("default", "a premise study with a certified KNN (`cr2 study premise --home var`)")
    how = f"{p.mode}; `{p.command}`" if p.command else "its settings were not recorded"
    d = v[(v["method"] == "cr2-retrain") & (v["reference"] == certified) & v["mean_over_targets"]].copy()
    if d.empty or "p_value" not in d or d["p_value"].isna().all():
        return missing("default", f"premise study `{study}` predates stored p-values; run it again")
    table = PremiseVsCertified(d, w.word)  # p_holm: v_premise's, over the study's cells (one family per comparison)
    return (f"Premise study `{study}` (CR² retrained per cell, {how}; KNN certified by `{rule}` at the same α; "
            f"{len(table)} cells, sorted by the device/edge cost ratio; a cell's word compares the two routers only — "
            f"the deploy rule's candidates are not evaluated per cell, so no cell recommends a router; the premise "
            f"section below has every study):\n\n" + table.markdown())


def render(data: EqualRiskData, words: Words = PLAIN) -> str:
    all_means, texts, present = [], [], []
    alpha = page_alpha({sc.key: sc.alpha for sc in data.scenarios if sc.built})
    for sc in data.scenarios:
        if not sc.built:
            texts.append(f"#### {sc.name}\n\n" + missing(sc.key))
            continue
        text, means = scenario_tables(sc, alpha, words)
        texts.append(text + "\n" + seed_table(sc, words))
        if len(means):
            all_means.append(means)
            present.append(sc.name)
    out = [INTRO, "", "Every table below is printed by `make results-doc` from the warehouses of `make run`, "
           "`make run-measured`, `make run-qwen`, `make run-gemma`, `make study-pools`, `cr2 study seeds --n 5` (default "
           "and MMLU-Pro) and `cr2 study premise --home var`."]
    means = pd.concat(all_means, ignore_index=True) if all_means else pd.DataFrame()
    if len(means):
        out += ["", f"**The questions over the {len(present)} scenarios** ({', '.join(present)}; each verdict from its "
                f"family's Holm correction, families per scenario × question × rule at α = {alpha:g}):", "",
                answers(words, means, alpha)]
    out += texts
    if data.pool_study is not None:
        out += [f"\n#### The MMLU-Pro pools (study `{data.pool_study}`), at grids.default_alpha\n",
                across_pool_equal_risk_markdown(data.pool_questions)]
    out.append("\n#### Which router should I deploy?" + ("" if alpha is None else f" (α = {alpha:g})") + "\n")
    out.append(deploy_table(data) if len(means) else missing("default"))
    if data.premise is not None:
        out += ["\n**By device/edge cost ratio — default scenario (SIMULATED labels)**\n",
                premise_deploy_table(data.premise, words)]
    return "\n".join(out)
