"""Section "Equal-risk comparison" and "Which router should I deploy?": every router certified under the same rules.

Numbers: table equal_risk of each scenario's newest evaluation run (cr2.evaluation.equal_risk; `cr2 run` writes it), the
scenario's newest seed study (seed_results rows `equal-risk:<question>`), the newest pool sweep (pool_results rows
`equal-risk:<question>`) and the newest premise study with a certified KNN. Words: a mean saving is a direction only
where its 95 % interval excludes 0 and its Holm-adjusted p (over its question's family) is below 0.05; a seed spread
only where the t-interval over seeds excludes 0 and its Holm-adjusted t-test p is below 0.05.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from cr2.evaluation.statistics import (CHEAPER, DEARER, NO_DIFFERENCE, holm_adjust, holm_of_intervals, saving_verdict,
                                       seed_t_interval)
from cr2.report.markdown import markdown_table
from cr2.report.tables import ci_cell
from cr2_cli.resultsdoc.core import Doc, label_kind
from cr2_cli.resultsdoc.scenario_stats import pick

NAMES = {"cr2": "CR²", "knn": "KNN", "mlp": "MLP", "embedllm": "EmbedLLM", "llmrank": "LLMRank",
         "llmrank-bench": "LLMRank + benchmark id"}
RULE_RISK = {"crc": "teacher disagreement, vs CR²'s frozen teacher", "crc-oracle": "oracle disagreement, on the labels",
             "crc-avoidable": "avoidable error, on the labels"}
SCENARIOS = (("default", "Default (simulated Qwen3 labels)"), ("mmlu-pro", "MMLU-Pro (measured)"),
             ("zeroeval-qwen", "ZeroEval Qwen ladder (measured)"), ("zeroeval-gemma", "ZeroEval Gemma ladder (measured)"))
QUESTIONS = ("gate-quality", "guarantee-price", "certified-score")
ALPHA = 0.01

INTRO = """## Equal-risk comparison: every router certified under the same rules

The certify stage of `cr2 run` certifies every router that predicts p̂ under the same rules (docs/guarantees.md,
"Certifying any router"), and the equal-risk stage compares them at the same α (table `equal_risk`,
`cr2 results --equal-risk`). CR²'s result against a baseline splits into three questions, each a paired
fixed-accuracy saving (mean over the target accuracies both sides reach, 95 % paired bootstrap over the test
queries on the evaluation's own resample index):

- **gate quality** — CR² uncertified (its gate at s ≥ 0.5, i.e. predicted margin ≥ 0) against the baseline
  uncertified (its one-shot argmax of p̂ − λĉ): whose score routes at the lower cost when nothing is guaranteed;
- **price of the guarantee** — each router certified at α against itself uncertified;
- **which score certifies at the lower cost** — CR²@rule against baseline@rule at the same α: the comparison a user
  who needs the guarantee actually faces.

Each question's tests are read together: a mean saving gets a word ("cheaper", "dearer") only where its 95 %
interval excludes 0 **and** its Holm-adjusted p over the question's family (every baseline × rule × α) is below
0.05; an interval that excludes 0 without a word shows its Holm p."""


def _cell(doc: Doc, r: dict | None, b: int | None = None) -> str:
    """'estimate [lower, upper]' with its word where it has a direction; an interval that excludes 0 without a word
    (the family-wise test does not confirm it) shows its Holm-adjusted p; with `b` (the resamples drawn), the resamples
    the interval kept when fewer (a resample that misses one of the averaged targets drops out)."""
    if r is None:
        return "–"
    text = ci_cell(r["estimate"], r["lower"], r["upper"])
    if b is not None and pd.notna(r.get("n_resamples")) and int(r["n_resamples"]) < b:
        text += f" ⟨{int(r['n_resamples']):,} kept⟩"
    word = saving_verdict(r["lower"], r["upper"], r.get("p_holm"))
    if word not in (None, NO_DIFFERENCE):
        return f"{text} **{doc.word(word)}**"
    if saving_verdict(r["lower"], r["upper"]) not in (None, NO_DIFFERENCE) and pd.notna(r.get("p_holm")):
        return f"{text} (Holm p = {r['p_holm']:.2g})"
    return text


def _one(df: pd.DataFrame, **where) -> dict | None:
    d = pick(df, **where)
    return None if d.empty else d.iloc[0].to_dict()


def _verdicts(means: pd.DataFrame) -> pd.Series:
    return pd.Series([saving_verdict(lo, hi, p) for lo, hi, p in zip(means["lower"], means["upper"], means["p_holm"])],
                     index=means.index, dtype=object)


def scenario_tables(doc: Doc, key: str, name: str, alpha: float) -> tuple[str, pd.DataFrame]:
    """The decomposition of one scenario at α (markdown) and its mean-saving rows (for the answers and deploy table)."""
    from warehouse.repository import certified_validity, eval_run, run_equal_risk

    with doc.warehouse(key) as wh:
        run_id = doc.newest_run(wh)
        if run_id is None:
            return doc.missing(key, f"{name}: no evaluation run"), pd.DataFrame()
        rows = run_equal_risk(wh, run_id)
        source = eval_run(wh, run_id)["label_source"]
        valid = certified_validity(wh, run_id)
    if rows.empty:
        return doc.missing(key, f"{name}: run `{run_id}` has no equal-risk rows"), pd.DataFrame()
    means = rows[rows["metric"] == "mean_saving_pct"].copy()
    means["word"] = _verdicts(means)
    rules = [r for r in RULE_RISK if r in set(means["rule"].dropna())]
    baselines = list(dict.fromkeys(means.loc[means["question"] == "gate-quality", "against"]))
    fam = {q: int((means["question"] == q).sum()) for q in QUESTIONS}
    b = int(rows["n_resamples"].max())  # the resamples drawn: the most any interval of the run kept
    kept = means["n_resamples"].astype(int)
    out = [f"#### {name} — {label_kind(source)} labels (`{source}`), run `{run_id}`, α = {alpha:g}\n",
           f"Mean fixed-accuracy saving of CR² against each baseline, % [95 % CI] (positive: CR² at the lower cost); "
           f"Holm families: gate quality {fam['gate-quality']} tests, certified score {fam['certified-score']}. Each "
           f"mean is over the targets both sides reach; a resample that misses one of them drops out, so each interval "
           f"is conditional on the resamples it kept: {kept.min():,} to {kept.max():,} of the {b:,} drawn over this "
           f"run's comparisons, and ⟨N kept⟩ marks a cell that kept fewer than all.\n"]
    t = []
    for base in baselines:
        row = {"baseline": NAMES.get(base, base),
               "gate quality (both uncertified)": _cell(doc, _one(means, question="gate-quality", against=base), b)}
        for rule in rules:
            row[f"certified at α, {rule} ({RULE_RISK[rule]})"] = _cell(
                doc, _one(means, question="certified-score", against=base, rule=rule, alpha=alpha), b)
        t.append(row)
    out.append(markdown_table(pd.DataFrame(t)))
    t = []
    for r in ["cr2", *baselines]:
        row = {"router": NAMES.get(r, r)}
        for rule in rules:
            row[f"{rule} ({RULE_RISK[rule]})"] = _cell(doc, _one(means, question="guarantee-price", router=r, rule=rule,
                                                                 alpha=alpha), b)
        t.append(row)
    out.append(f"\nPrice of the guarantee at α = {alpha:g}: each router certified vs itself uncertified, mean saving % "
               f"[95 % CI] (negative: the guarantee costs; Holm family {fam['guarantee-price']} tests).\n")
    out.append(markdown_table(pd.DataFrame(t)))
    if len(valid):
        v = valid[(valid["alpha"] - alpha).abs() < 1e-12].copy()
        v["router"], v["rule"] = zip(*v["method"].str.split("@", n=1))
        t = []
        for (router, rule), g in v.groupby(["router", "rule"], sort=False):
            worst = g.loc[g["risk_mean"].idxmax()]
            t.append({"router": NAMES.get(router, router), "rule (its risk)": f"{rule} ({RULE_RISK.get(rule, rule)})",
                      "worst λ": f"{worst['lam']:.3g}", "mean risk over re-splits at the worst λ": f"{worst['risk_mean']:.4f}",
                      "MC se": f"{worst['risk_se']:.4f}",
                      f"≤ α = {alpha:g} (within 3 se) at every λ": doc.bound(g["risk_mean"], g["risk_se"], alpha)})
        out.append(f"\nValidity over random calibration/test re-splits at α = {alpha:g} (each rule's own risk; the "
                   f"promise is E[risk] ≤ α at every λ):\n")
        out.append(markdown_table(pd.DataFrame(t)))
    return "\n".join(out), means.assign(scenario=name)


def seed_table(doc: Doc, key: str) -> str:
    """The equal-risk savings over the seeds of the newest seed study: mean ± sd, the 95 % t-interval over seeds and
    a one-sample t-test against 0, Holm-adjusted per question (the seeds' comparisons are read together)."""
    from warehouse.repository import newest_seed_study, seed_equal_risk

    with doc.warehouse(key) as wh:
        study = newest_seed_study(wh)
        if study is None:
            return ""
        d = seed_equal_risk(wh, study)
    if d.empty:
        return f"_Seed study `{study}` has no equal-risk rows (made before the equal-risk stage)._\n"
    rows = []
    for (metric, method, alpha), g in d.groupby(["metric", "method", "alpha"], dropna=False, sort=True):
        ti = seed_t_interval(g["value"].to_numpy(dtype=float))
        if ti.n < 2:
            continue
        rows.append({"question": metric.split(":", 1)[1], "comparison": method,
                     "α": "–" if pd.isna(alpha) else f"{alpha:g}", "seeds": ti.n,
                     "mean ± sd": f"{ti.mean:+.1f} ± {ti.sd:.1f}", "lo": ti.lower, "hi": ti.upper, "p": ti.p_value})
    t = pd.DataFrame(rows)
    t["p, Holm per question"] = np.nan
    for _, idx in t.groupby("question").groups.items():
        t.loc[idx, "p, Holm per question"] = holm_adjust(t.loc[idx, "p"].to_numpy())
    t["95 % t-interval over seeds"] = [f"[{lo:+.1f}, {hi:+.1f}]" for lo, hi in zip(t["lo"], t["hi"])]
    t["verdict"] = [(lambda w: "" if w == NO_DIFFERENCE else f"**{doc.word(w)}**")(saving_verdict(lo, hi, ph))
                    for lo, hi, ph in zip(t["lo"], t["hi"], t["p, Holm per question"])]
    t = t[["question", "comparison", "α", "seeds", "mean ± sd", "95 % t-interval over seeds", "p, Holm per question",
           "verdict"]]
    return (f"\nOver the seeds of study `{study}` (split, teacher, gate and learned baselines re-seeded; labels and "
            f"states fixed): a word only where the t-interval over seeds excludes 0 and the t-test's Holm-adjusted p "
            f"(per question) is below 0.05.\n\n" + markdown_table(t, 2))


def answers(doc: Doc, means: pd.DataFrame, alpha: float) -> str:
    """The three questions answered in counts of verdicts over the scenarios, at α, then over every α."""
    lines = []
    titles = {"gate-quality": "Gate quality (CR² vs each baseline, both uncertified)",
              "guarantee-price": "Price of the guarantee (each router certified vs itself uncertified)",
              "certified-score": "Which score certifies at the lower cost (CR² vs each baseline, both certified, "
                                 "same rule and α)"}
    for q, title in titles.items():
        d = means[means["question"] == q]
        at = d if q == "gate-quality" else d[(d["alpha"] - alpha).abs() < 1e-12]
        parts = []
        for label, sub in ((f"at α = {alpha:g}", at),) + (() if q == "gate-quality" else
                                                          (("over every α of certify.alphas", d),)):
            c = sub["word"].value_counts()
            side = "CR²" if q != "guarantee-price" else "the certified router"
            parts.append(f"{label}: {side} {doc.word(CHEAPER)} in {int(c.get(CHEAPER, 0))}, {doc.word(DEARER)} in "
                         f"{int(c.get(DEARER, 0))}, {doc.word(NO_DIFFERENCE)} in {int(c.get(NO_DIFFERENCE, 0))} of "
                         f"{len(sub)} comparisons")
        lines.append(f"- **{title}** — " + "; ".join(parts) + ".")
        for word in (CHEAPER, DEARER):
            hits = at[at["word"] == word]
            if len(hits):
                lines.append(f"  {doc.word(word)}: " + ", ".join(sorted(
                    f"{r.scenario}: {NAMES.get(r.router, r.router)} vs {NAMES.get(r.against, r.against)}"
                    + (f" ({r.rule})" if isinstance(r.rule, str) else "") for r in hits.itertuples())) + ".")
    return "\n".join(lines) + "\n"


def deploy_table(doc: Doc, means: pd.DataFrame, alpha: float) -> str:
    """Which certified router to deploy per scenario and risk at α: CR² unless a baseline is detectably cheaper."""
    rows = []
    cert = means[(means["question"] == "certified-score") & ((means["alpha"] - alpha).abs() < 1e-12)]
    for (scenario, rule), g in cert.groupby(["scenario", "rule"], sort=False):
        lower = g[g["word"] == DEARER]  # CR² detectably dearer than these (Holm)
        best = g.loc[g["estimate"].idxmin()]  # the baseline with the lowest CR² saving: the cheapest point estimate
        if len(lower):
            pick = lower.loc[lower["estimate"].idxmin()]
            choice = f"{NAMES.get(pick['against'], pick['against'])}@{rule} (CR² {doc.word(DEARER)})"
        elif (g["word"] == CHEAPER).all():
            choice = f"CR²@{rule} ({doc.word(CHEAPER)} than every baseline)"
        else:
            choice = f"any of CR² and the baselines @{rule}: {doc.word(NO_DIFFERENCE)}"
        rows.append({"scenario": scenario, "risk bounded at α": f"{RULE_RISK.get(rule, rule)} ({rule})",
                     "deploy": choice,
                     "lowest-cost baseline by point estimate: CR²'s saving vs it, % [95 % CI]":
                         f"{NAMES.get(best['against'], best['against'])}: {_cell(doc, best.to_dict())}"})
    return markdown_table(pd.DataFrame(rows))


def premise_deploy_table(doc: Doc, rule: str = "crc") -> str:
    """By device/edge cost ratio: in every cell of the newest premise study with a certified KNN, CR² retrained vs
    KNN certified at the same α and rule (mean saving [95 % CI]); p-values read off the stored intervals and
    Holm-adjusted over the cells, which are read together."""
    from cr2_cli.resultsdoc.premise import command, mode
    from warehouse.premise import newest_premise_study, premise_studies, premise_view

    certified = f"knn@{rule}"
    with doc.warehouse("default") as wh:
        study = newest_premise_study(wh, certified)
        if study is None:
            return doc.missing("default", "a premise study with a certified KNN (`cr2 study premise --home var`)")
        v = premise_view(wh, study)
        settings = premise_studies(wh)
    row = next(settings[settings["study_id"] == study].itertuples(), None)
    how = f"{mode(row)}; `{command('default', None, row)}`" if row is not None and command("default", None, row) else \
        "its settings were not recorded"
    d = v[(v["method"] == "cr2-retrain") & (v["reference"] == certified) & v["mean_over_targets"]].copy()
    d = d.sort_values(["cost_ratio_est"])
    d["p"], d["p_holm"] = holm_of_intervals(d["saving_pct"], d["saving_lower_pct"], d["saving_upper_pct"])
    rows = []
    for r in d.itertuples():
        word = saving_verdict(r.saving_lower_pct, r.saving_upper_pct, r.p_holm)
        choice = {CHEAPER: f"CR² ({doc.word(CHEAPER)})", DEARER: f"KNN@{rule} (CR² {doc.word(DEARER)})"}.get(
            word, f"either: {doc.word(NO_DIFFERENCE)}")
        rows.append({"device speed": f"×{r.speed_factor:g}", "channel": r.channel,
                     "ĉ device / cheapest edge": f"{r.cost_ratio_est:.3f}",
                     "CR² vs certified KNN, mean saving % [95 % CI]": ci_cell(r.saving_pct, r.saving_lower_pct,
                                                                              r.saving_upper_pct),
                     "p, Holm over the cells": f"{r.p_holm:.2g}", "deploy (certified, same α and rule)": choice})
    return (f"Premise study `{study}` (CR² retrained per cell, {how}; KNN certified by `{rule}` at the same α; "
            f"{len(rows)} cells, sorted by the device/edge cost ratio; the premise section below has every study):\n\n"
            + markdown_table(pd.DataFrame(rows)))


def render(doc: Doc) -> str:
    from warehouse.pools import newest_pool_study

    all_means, texts, present = [], [], []
    for key, name in SCENARIOS:
        if not doc.has(key):
            texts.append(f"#### {name}\n\n" + doc.missing(key))
            continue
        text, means = scenario_tables(doc, key, name, ALPHA)
        texts.append(text + "\n" + seed_table(doc, key))
        if len(means):
            all_means.append(means)
            present.append(name)
    out = [INTRO, "", "Every table below is printed by `make results-doc` from the warehouses of `make run`, "
           "`make run-measured`, `make run-qwen`, `make run-gemma`, `make study-pools`, `cr2 study seeds --n 5` (default "
           "and MMLU-Pro) and `cr2 study premise --home var`."]
    means = pd.concat(all_means, ignore_index=True) if all_means else pd.DataFrame()
    if len(means):
        out += ["", f"**The three questions over the {len(present)} scenarios** ({', '.join(present)}; each "
                f"verdict from its 95 % interval and Holm per question and scenario):", "", answers(doc, means, ALPHA)]
    out += texts
    if doc.has("pools"):
        from cr2_cli.study_pools import equal_risk_pools_markdown

        with doc.warehouse("pools") as wh:
            study = newest_pool_study(wh)
        if study is not None:
            out += [f"\n#### The MMLU-Pro pools (study `{study}`), at grids.default_alpha\n",
                    equal_risk_pools_markdown(doc.homes["pools"], study, word=doc.word)]
    out.append(f"\n#### Which router should I deploy? (α = {ALPHA:g})\n")
    out.append(deploy_table(doc, means, ALPHA) if len(means) else doc.missing("default"))
    if doc.has("default"):
        out += ["\n**By device/edge cost ratio — default scenario (SIMULATED labels)**\n", premise_deploy_table(doc)]
    return "\n".join(out)
