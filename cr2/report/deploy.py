"""The stored deploy decision (tables deploy_decisions, deploy_candidates; cr2.evaluation.deploy's rule) as table
rows: one formatting for `cr2 results`, the HTML report and its csv/tex tables, the Prefect artifact and
docs/results.md, so every surface prints the same answer."""
from __future__ import annotations

from typing import Any

import pandas as pd

from cr2.report.cells import ci_cell, num
from cr2.report.validity import risk_of_rule
from cr2.routers import short_name

ANSWER_COLUMN = "answer (the deploy rule)"
TITLE = "**Which router to deploy**"
RULE_SUMMARY = ("The rule, written before it was run (docs/guarantees.md, \"Which router to deploy\"; its hash is stored "
                "with each answer): candidates are every certified router at the rule and α, the same routers with the "
                "device switched off (`@no-device`) and the cheapest Always edge model (`always-edge`); each pair of "
                "candidates is tested once on the mean over the validation target grid of log(cost A / cost B) "
                "(paired bootstrap, Holm over the pairs); a candidate called \"dearer\" is out; the answer is the "
                "candidate with the lowest estimated cost, unless a simpler one — ranked by device model, router, then "
                "worst-case decision FLOPs (CR²: gate + teacher) — is shown non-inferior within Δ (one-sided, Holm); "
                "where a simpler candidate is neither out nor shown non-inferior the answer is \"undecided between\" "
                "them; \"no device\" where the answer runs no device model.")


def candidate_name(name: str) -> str:
    """A candidate's display name: 'KNN@crc-avoidable', 'KNN@no-device', 'always-edge'."""
    router, sep, rest = str(name).partition("@")
    return f"{short_name(router)}{sep}{rest}"


def _cost(c: pd.Series | None) -> str:
    if c is None:
        return "–"
    return ci_cell(c["geo_mean_cost"], c["geo_mean_cost_lower"], c["geo_mean_cost_upper"], ".4f")


def answer_text(d: pd.Series | dict, candidates: pd.DataFrame) -> str:
    """The one phrase of a decision every surface prints: 'deploy X', 'no device: X', or 'undecided between X (cost)
    and Y (cost)'."""
    by = {r["candidate"]: r for _, r in candidates.iterrows()} if len(candidates) else {}
    rec = str(d["recommended"])
    if d["answer"] == "undecided":
        names = [rec, *[n for n in str(d["undecided_with"]).split(",") if n]]
        devices = {bool(by[n]["device"]) for n in names if n in by}
        where = {frozenset({False}): " — none of them runs a device model",
                 frozenset({True}): " — every one runs a device model"}.get(frozenset(devices), "")
        return "undecided between " + " and ".join(f"{candidate_name(n)} ({_cost(by.get(n))})" for n in names) + where
    if d["answer"] == "no device":
        return f"no device: {candidate_name(rec)} ({_cost(by.get(rec))})"
    return f"deploy {candidate_name(rec)} ({_cost(by.get(rec))})"


def deploy_rows(decisions: pd.DataFrame, candidates: pd.DataFrame, scenario: str | None = None) -> list[dict[str, str]]:
    """One row per stored decision (rule): the answer, the cheapest candidate, those out, Δ and the families."""
    rows = []
    for _, d in decisions.iterrows():
        c = candidates[(candidates["rule"] == d["rule"]) & ((candidates["alpha"] - d["alpha"]).abs() < 1e-12)]
        by = {r["candidate"]: r for _, r in c.iterrows()}
        out = [candidate_name(n) for n in c.loc[c["status"] == "out", "candidate"]]
        rows.append({**({"scenario": scenario} if scenario else {}),
                     "risk bounded at α": f"{risk_of_rule(d['rule']) or d['rule']} ({d['rule']}), α = {d['alpha']:g}",
                     ANSWER_COLUMN: answer_text(d, c),
                     "cheapest (geometric-mean cost [95 % CI])": f"{candidate_name(d['cheapest'])} "
                                                                 f"({_cost(by.get(d['cheapest']))})",
                     "out (called \"dearer\" by a test)": ", ".join(out) or "none",
                     "Δ": f"{d['margin_pct']:g} %",
                     "tests (Holm)": f"{int(d['n_pairs'])} pairs, {int(d['n_noninferiority'])} non-inferiority",
                     "rule": f"`{d['rule_sha']}`"})
    return rows


def _flops(v: Any) -> str:
    from cr2.method.complexity import format_flops

    return "0" if v is None or pd.isna(v) or float(v) == 0 else format_flops(float(v))


def whole_cost_rows(candidates: pd.DataFrame, rule: str) -> list[dict[str, str]]:
    """Every candidate of `rule` with the whole cost of its decisions, simplest first: what it runs, its decision FLOPs
    (the rule ranks by the worst case), what it holds and its cost, and its status in the decision."""
    c = candidates[candidates["rule"] == rule].sort_values("complexity_rank")
    return [{"rank": str(int(r["complexity_rank"])), "candidate": candidate_name(r["candidate"]),
             "device model": "yes" if r["device"] else "no", "router + shared embedding": "yes" if r["runs_router"] else "no",
             "device FLOPs": _flops(r["flops_device"]), "edge FLOPs per deferral": _flops(r["flops_edge"]),
             "worst case (ranked by)": _flops(r["flops_worst"]),
             "expected at its deferral share": _flops(r["flops_expected"])
             + ("" if pd.isna(r["defer_share"]) else f" ({num(100 * r['defer_share'], '.0f')} % deferred)"),
             "parameters": "–" if pd.isna(r["params"]) else f"{int(r['params']):,}",
             "stored MB": "–" if pd.isna(r["stored_bytes"]) else num(r["stored_bytes"], ".2f", 1e-6),
             "training s": "–" if pd.isna(r["fit_seconds"]) else num(r["fit_seconds"], ".1f"),
             "geometric-mean cost [95 % CI]": _cost(r), "status": str(r["status"])
             + (f" (called \"dearer\" than {', '.join(candidate_name(x) for x in str(r['out_by']).split(','))})"
                if r["out_by"] else "")}
            for _, r in c.iterrows()]


def deploy_markdown(decisions: pd.DataFrame, candidates: pd.DataFrame) -> str:
    """The decision of one run as markdown: the rule, one row per rule, and the whole-cost table of each rule."""
    from cr2.method.complexity import minilm_flops_per_token
    from cr2.report.markdown import markdown_table

    if decisions.empty:
        return (f"{TITLE}\n\n_(no deploy decision stored for this run: a run made before the deploy rule, or no "
                "rule certified at the default α — re-run `cr2 run`)_\n")
    parts = [TITLE, "", RULE_SUMMARY, "", markdown_table(pd.DataFrame(deploy_rows(decisions, candidates)))]
    for rule in decisions["rule"]:
        parts += ["", f"**The whole cost of a decision, {rule}** (the shared MiniLM embedding, {_flops(minilm_flops_per_token())} "
                  "FLOPs per token, is paid by every candidate that runs a router and is not in these columns)", "",
                  markdown_table(pd.DataFrame(whole_cost_rows(candidates, rule)))]
    return "\n".join(parts) + "\n"


__all__ = ["ANSWER_COLUMN", "RULE_SUMMARY", "TITLE", "answer_text", "candidate_name", "deploy_markdown", "deploy_rows",
           "whole_cost_rows"]


def decision_us_key(candidate: str) -> str | None:
    """The key of a candidate in the routing benchmark's µs-per-decision figures (None: an Always-edge candidate
    decides nothing): CR² with a device runs gate and teacher (`cr2-route`), without one the teacher (`cr2-edge`)."""
    from cr2.evaluation.deploy import ALWAYS_EDGE, NO_DEVICE

    if candidate == ALWAYS_EDGE:
        return None
    router, _, rule = candidate.partition("@")
    if router == "cr2":
        return "cr2-edge" if rule == NO_DEVICE else "cr2-route"
    return router


def whole_cost_by_rule_rows(scenario: str, decisions: pd.DataFrame, candidates: pd.DataFrame,
                            us: dict[str, float]) -> list[dict[str, str]]:
    """One row per (router, device on/off) of a scenario's stored decisions: its rule-free whole cost (whole_cost_rows
    of the first rule), its measured µs per decision (`us`, by decision_us_key), then per rule its geometric-mean
    cost and status."""
    by_rule = {}  # rule → (router, device) → (stored candidate, its whole-cost row in the stored rows' order)
    for rule in decisions["rule"]:
        stored = candidates[candidates["rule"] == rule].sort_values("complexity_rank")
        by_rule[rule] = {(str(c.router), bool(c.device)): (c.candidate, r)
                         for c, r in zip(stored.itertuples(), whole_cost_rows(candidates, rule))}
    rows = []
    for which, (cand, r) in next(iter(by_rule.values())).items():
        key = decision_us_key(cand)
        label = cand if not which[1] else f"{which[0]}@rule"  # the certified candidate: one row for every rule
        row = {"scenario": scenario, **{k: v for k, v in r.items() if k not in (
                   "geometric-mean cost [95 % CI]", "status", "expected at its deferral share")},
               "candidate": candidate_name(label), "µs per decision": "0" if key is None else num(us.get(key), ".1f")}
        for rule, per in by_rule.items():
            c = per.get(which)
            row[f"{rule}: geometric-mean cost [95 % CI], status"] = "–" if c is None else \
                f"{c[1]['geometric-mean cost [95 % CI]']}, {c[1]['status']}"
        rows.append(row)
    return rows
