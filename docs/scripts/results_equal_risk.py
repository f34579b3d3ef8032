"""Print the equal-risk sections of docs/results.md ("Equal-risk comparison", "Which router should I deploy?").

    PYTHONPATH=. python docs/scripts/results_equal_risk.py --scenario default=var --scenario MMLU-Pro=var/mmlu-pro \
        [--pools var/mmlu-pro-sample] [--alpha 0.01]

Every number comes from the table equal_risk of each scenario's newest evaluation run (cr2.equal_risk; `cr2 run`
writes it), the scenario's newest seed study (seed_results rows `equal-risk:<question>`, `cr2 study seeds`) and the
newest pool sweep of --pools (pool_results rows `equal-risk:<question>`, `cr2 study pools`). Every verdict word comes
from cr2.bootstrap's verdict functions: a mean saving is a direction only where its 95 % interval excludes 0 and its
Holm-adjusted p (over its question's family) is below 0.05; a seed spread only where the t-interval over seeds
excludes 0; a pool family only from Holm-adjusted signed-rank tests.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from cr2.bootstrap import NO_DIFFERENCE, saving_verdict
from cr2.labels import is_simulated
from cr2_cli.results import _md, ci_cell
from warehouse.db import Warehouse
from cr2.metrics import bound_verdict
from warehouse.repository import (certified_validity, eval_run, newest_eval_run, newest_seed_study, run_equal_risk,
                                  seed_equal_risk)

NAMES = {"cr2": "CR²", "knn": "KNN", "mlp": "MLP", "embedllm": "EmbedLLM", "llmrank": "LLMRank",
         "llmrank-bench": "LLMRank + benchmark id"}
RULE_RISK = {"crc": "teacher disagreement, vs CR²'s frozen teacher", "crc-oracle": "oracle disagreement, on the labels",
             "crc-avoidable": "avoidable error, on the labels"}


def _cell(r) -> str:
    """'estimate [lower, upper]' with the stored verdict's word; an interval that excludes 0 without a word (the
    family-wise test does not confirm it) shows its Holm-adjusted p."""
    if r is None:
        return "–"
    text = ci_cell(r["estimate"], r["lower"], r["upper"])
    if r["verdict"] not in (None, NO_DIFFERENCE):
        return f"{text} **{r['verdict']}**"
    if saving_verdict(r["lower"], r["upper"]) not in (None, NO_DIFFERENCE) and pd.notna(r.get("p_holm")):
        return f"{text} (Holm p = {r['p_holm']:.2g})"
    return text


def _one(df: pd.DataFrame, **where) -> dict | None:
    d = df
    for k, v in where.items():
        d = d[d[k].isna()] if v is None else d[(d[k] - v).abs() < 1e-12] if isinstance(v, float) else d[d[k] == v]
    return None if d.empty else d.iloc[0].to_dict()


def scenario_tables(name: str, home: str, alpha: float) -> tuple[str, pd.DataFrame]:
    """The decomposition of one scenario at α (markdown) and its mean-saving rows (for the deploy table)."""
    with Warehouse(home, read_only=True) as wh:
        run_id = newest_eval_run(wh)
        rows = run_equal_risk(wh, run_id)
        source = eval_run(wh, run_id)["label_source"]
    label = "SIMULATED" if is_simulated(source) else "MEASURED"
    means = rows[rows["metric"] == "mean_saving_pct"]
    rules = [r for r in RULE_RISK if r in set(means["rule"].dropna())]
    baselines = list(dict.fromkeys(means.loc[means["question"] == "gate-quality", "against"]))
    fam = {q: int((means["question"] == q).sum()) for q in ("gate-quality", "guarantee-price", "certified-score")}
    out = [f"#### {name} — {label} labels (`{source}`), run `{run_id}`, α = {alpha:g}\n",
           f"Mean fixed-accuracy saving of CR² against each baseline, % [95 % CI] (positive: CR² cheaper); "
           f"Holm families: gate quality {fam['gate-quality']} tests, certified score {fam['certified-score']}.\n"]
    t = []
    for b in baselines:
        row = {"baseline": NAMES.get(b, b),
               "gate quality (both uncertified)": _cell(_one(means, question="gate-quality", against=b))}
        for rule in rules:
            row[f"certified at α, {rule} ({RULE_RISK[rule]})"] = _cell(
                _one(means, question="certified-score", against=b, rule=rule, alpha=alpha))
        t.append(row)
    out.append(_md(pd.DataFrame(t)))
    t = []
    for r in ["cr2", *baselines]:
        row = {"router": NAMES.get(r, r)}
        for rule in rules:
            row[f"{rule} ({RULE_RISK[rule]})"] = _cell(_one(means, question="guarantee-price", router=r, rule=rule,
                                                            alpha=alpha))
        t.append(row)
    out.append(f"\nPrice of the guarantee at α = {alpha:g}: each router certified vs itself uncertified, mean saving % "
               f"[95 % CI] (negative: the guarantee costs; Holm family {fam['guarantee-price']} tests).\n")
    out.append(_md(pd.DataFrame(t)))
    with Warehouse(home, read_only=True) as wh:
        valid = certified_validity(wh, run_id)
    if len(valid):
        v = valid[(valid["alpha"] - alpha).abs() < 1e-12].copy()
        v["router"], v["rule"] = zip(*v["method"].str.split("@", n=1))
        t = []
        for (router, rule), g in v.groupby(["router", "rule"], sort=False):
            worst = g.loc[g["risk_mean"].idxmax()]
            t.append({"router": NAMES.get(router, router), "rule (its risk)": f"{rule} ({RULE_RISK.get(rule, rule)})",
                      "worst λ": f"{worst['lam']:.3g}", "mean risk over re-splits at the worst λ": f"{worst['risk_mean']:.4f}",
                      "MC se": f"{worst['risk_se']:.4f}", f"≤ α = {alpha:g} (within 3 se) at every λ":
                          bound_verdict(g["risk_mean"], g["risk_se"], alpha)})
        out.append(f"\nValidity over random calibration/test re-splits at α = {alpha:g} (each rule's own risk; the "
                   f"promise is E[risk] ≤ α at every λ):\n")
        out.append(_md(pd.DataFrame(t)))
    return "\n".join(out), means.assign(scenario=name)


def seed_table(name: str, home: str) -> str:
    """The equal-risk savings over the seeds of the newest seed study: mean ± sd, the 95 % t-interval over seeds and
    a one-sample t-test against 0, Holm-adjusted per question (the seeds' comparisons are read together)."""
    with Warehouse(home, read_only=True) as wh:
        study = newest_seed_study(wh)
        if study is None:
            return ""
        d = seed_equal_risk(wh, study)
    if d.empty:
        return f"_{name}: seed study `{study}` has no equal-risk rows (made before the equal-risk stage)._\n"
    from cr2.bootstrap import holm_adjust, seed_t_interval

    rows = []
    for (metric, method, alpha), g in d.groupby(["metric", "method", "alpha"], dropna=False, sort=True):
        s = seed_t_interval(g["value"].to_numpy(dtype=float))
        if s.n < 2:
            continue
        rows.append({"question": metric.split(":", 1)[1], "comparison": method,
                     "α": "–" if pd.isna(alpha) else f"{alpha:g}", "seeds": s.n,
                     "mean ± sd": f"{s.mean:+.1f} ± {s.sd:.1f}", "lo": s.lower, "hi": s.upper, "p": s.p_value})
    t = pd.DataFrame(rows)
    t["p, Holm per question"] = np.nan
    for q, idx in t.groupby("question").groups.items():
        t.loc[idx, "p, Holm per question"] = holm_adjust(t.loc[idx, "p"].to_numpy())
    t["95 % t-interval over seeds"] = [f"[{lo:+.1f}, {hi:+.1f}]" for lo, hi in zip(t["lo"], t["hi"])]
    t["verdict"] = [(lambda w: "" if w == NO_DIFFERENCE else f"**{w}**")(saving_verdict(lo, hi, ph))
                    for lo, hi, ph in zip(t["lo"], t["hi"], t["p, Holm per question"])]
    t = t[["question", "comparison", "α", "seeds", "mean ± sd", "95 % t-interval over seeds", "p, Holm per question",
           "verdict"]]
    return (f"\nOver the seeds of study `{study}` (split, teacher, gate and learned baselines re-seeded; labels and "
            f"states fixed): a word only where the t-interval over seeds excludes 0 and the t-test's Holm-adjusted p "
            f"(per question) is below 0.05.\n\n" + _md(t, 2))


def deploy_table(means: pd.DataFrame, alpha: float) -> str:
    """Which certified router to deploy per scenario and risk at α: CR² unless a baseline is detectably cheaper."""
    rows = []
    for (scenario, rule), g in means[(means["question"] == "certified-score")
                                     & ((means["alpha"] - alpha).abs() < 1e-12)].groupby(["scenario", "rule"], sort=False):
        cheaper = g[g["verdict"] == "dearer"]  # CR² detectably dearer than these (Holm)
        best = g.loc[g["estimate"].idxmin()]  # the baseline with the lowest CR² saving: the cheapest point estimate
        if len(cheaper):
            pick = cheaper.loc[cheaper["estimate"].idxmin()]
            choice = f"{NAMES.get(pick['against'], pick['against'])}@{rule} (CR² detectably dearer)"
        elif (g["verdict"] == "cheaper").all():
            choice = f"CR²@{rule} (detectably cheaper than every baseline)"
        else:
            choice = f"any of CR² and the baselines @{rule}: no difference detected"
        rows.append({"scenario": scenario, "risk bounded at α": f"{RULE_RISK.get(rule, rule)} ({rule})",
                     "deploy": choice,
                     "cheapest baseline by point estimate: CR²'s saving vs it, % [95 % CI]":
                         f"{NAMES.get(best['against'], best['against'])}: {_cell(best.to_dict())}"})
    return _md(pd.DataFrame(rows))


def premise_deploy_table(home: str, rule: str = "crc") -> str:
    """By device/edge cost ratio: in every cell of the newest premise study with a certified KNN, CR² retrained vs
    KNN certified at the same α and rule (mean saving [95 % CI]); p-values read off the stored intervals
    (cr2.bootstrap.interval_p_value) and Holm-adjusted over the cells, which are read together."""
    from cr2.bootstrap import holm_adjust, interval_p_value
    from warehouse.premise import newest_premise_study, premise_view

    certified = f"knn@{rule}"
    with Warehouse(home, read_only=True) as wh:
        study = newest_premise_study(wh, certified)
        if study is None:
            return f"_(no premise study with a certified KNN in {home}: run `cr2 study premise`)_\n"
        v = premise_view(wh, study)
    d = v[(v["method"] == "cr2-retrain") & (v["reference"] == certified) & v["mean_over_targets"]].copy()
    d = d.sort_values(["cost_ratio_est"])
    d["p"] = [interval_p_value(e, lo, hi) for e, lo, hi in zip(d["saving_pct"], d["saving_lower_pct"],
                                                                 d["saving_upper_pct"])]
    d["p_holm"] = holm_adjust(d["p"].to_numpy())
    rows = []
    for r in d.itertuples():
        word = saving_verdict(r.saving_lower_pct, r.saving_upper_pct, r.p_holm)
        choice = {"cheaper": "CR²", "dearer": f"KNN@{rule}"}.get(word, "either: no difference detected")
        rows.append({"device speed": f"×{r.speed_factor:g}", "channel": r.channel,
                     "ĉ device / cheapest edge": f"{r.cost_ratio_est:.3f}",
                     "CR² vs certified KNN, mean saving % [95 % CI]": ci_cell(r.saving_pct, r.saving_lower_pct,
                                                                              r.saving_upper_pct),
                     "p, Holm over the cells": f"{r.p_holm:.2g}", "deploy (certified, same α and rule)": choice})
    return (f"Premise study `{study}` (CR² retrained per cell; KNN certified by `{rule}` at the same α; {len(rows)} "
            f"cells, sorted by the device/edge cost ratio):\n\n" + _md(pd.DataFrame(rows)))


def answers(means: pd.DataFrame, alpha: float) -> str:
    """The three questions answered in counts of verdicts over the scenarios (each verdict from the stored row:
    interval and Holm per scenario and question), at α, then over every α."""
    lines = []
    titles = {"gate-quality": "Gate quality (CR² vs each baseline, both uncertified)",
              "guarantee-price": "Price of the guarantee (each router certified vs itself uncertified)",
              "certified-score": "Which score certifies cheaper (CR² vs each baseline, both certified, same rule and α)"}
    for q, title in titles.items():
        d = means[means["question"] == q]
        at = d if q == "gate-quality" else d[(d["alpha"] - alpha).abs() < 1e-12]
        parts = []
        for label, sub in (((f"at α = {alpha:g}", at),) if q == "gate-quality" else
                           ((f"at α = {alpha:g}", at), ("over every α of certify.alphas", d))):
            c = sub["verdict"].value_counts()
            side = "CR²" if q != "guarantee-price" else "the certified router"
            parts.append(f"{label}: {side} cheaper in {int(c.get('cheaper', 0))}, dearer in {int(c.get('dearer', 0))}, "
                         f"no difference detected in {int(c.get(NO_DIFFERENCE, 0))} of {len(sub)} comparisons")
        lines.append(f"- **{title}** — " + "; ".join(parts if q != "gate-quality" else parts[:1]) + ".")
        dearer = at[at["verdict"] == "dearer"]
        if len(dearer):
            lines.append("  Dearer: " + ", ".join(sorted(
                f"{r.scenario}: {NAMES.get(r.router, r.router)} vs {NAMES.get(r.against, r.against)}"
                + (f" ({r.rule})" if isinstance(r.rule, str) else "") for r in dearer.itertuples())) + ".")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", action="append", required=True, help="NAME=HOME (repeatable)")
    ap.add_argument("--pools", default=None, help="the warehouse home of the pool sweep (its newest study)")
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--premise", action="append", default=[], help="NAME=HOME of a premise study (repeatable)")
    a = ap.parse_args()
    all_means, texts = [], []
    for spec in a.scenario:
        name, home = spec.split("=", 1)
        if not (Path(home) / "cr2.duckdb").is_file():
            raise SystemExit(f"--scenario {spec}: no warehouse at {home}")
        text, means = scenario_tables(name, home, a.alpha)
        texts.append(text + "\n" + seed_table(name, home))
        all_means.append(means)
    print(f"**The three questions over the {len(a.scenario)} scenarios** (each scenario's verdicts as stored: 95 % "
          f"interval and Holm per question):\n")
    print(answers(pd.concat(all_means, ignore_index=True), a.alpha))
    print("\n".join(texts))
    if a.pools:
        from cr2_cli.study_pools import equal_risk_pools_markdown

        from warehouse.pools import newest_pool_study

        with Warehouse(a.pools, read_only=True) as wh:
            study = newest_pool_study(wh)
        print(f"\n#### The MMLU-Pro pools (study `{study}`), at grids.default_alpha\n")
        print(equal_risk_pools_markdown(Path(a.pools), study))
    print(f"\n#### Which router should I deploy? (α = {a.alpha:g})\n")
    print(deploy_table(pd.concat(all_means, ignore_index=True), a.alpha))
    for spec in a.premise:
        name, home = spec.split("=", 1)
        print(f"\n**By device/edge cost ratio — {name}**\n")
        print(premise_deploy_table(home))


if __name__ == "__main__":
    main()
