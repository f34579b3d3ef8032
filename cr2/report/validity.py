"""The validity tables: one verdict per (router, rule, α, scenario), shown the same way everywhere.

`cr2 guarantees`, `cr2 results`, the HTML report and docs/results.md print the same rows: every verdict is
cr2.evaluation.validity.validity_verdict over the cells of one guarantee, read from one stored source —

- certified routers (`certified_verdicts`): the certify stage's re-splits of val ∪ test, stored with the evaluation
  run for every `<router>@<rule>` (cr2_warehouse.repository.certified_validity); the crc rules' promise E[risk] ≤ α at
  every λ, tested per λ;
- CR²'s deployed gate (`deployed_verdicts`): the promises only a `cr2 guarantees` run checks — ltt's P(some λ over α)
  ≤ δ, Mondrian CRC's per-group mean, the target mode's miss share (cr2_warehouse.repository.guarantee_cells).

The crc rules' mean risk of CR²'s gate is cr2@crc … of the first source, never recomputed by the second.
Beside each certified verdict, `deployed_table_risk` summarises the one table a user deploys (calibrated on val,
evaluated on test): a verdict over re-splits is about the rule, not about that table (`rule_promise_note` says what
each kind of rule promises about it).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from cr2.evaluation.validity import validity_verdict
from cr2.report.cells import EM_DASH, ci_cell, count_cell, lam_cell, num, pm_cell
from cr2.report.table import Table

CERTIFIED_COLUMNS = ["router", "rule", "risk", "alpha", "verdict", "n_cells", "n_violated", "worst_lam", "mean", "se",
                     "p_holm", "n_resplits", "note", "exact_verdict", "exact_n_differ", "exact_n_cells", "exact_p_holm",
                     "exact_worst_lam", "exact_note", "screening_verdict", "screening_n_resplits"]
CONFIRMED = "on the confirmatory re-splits (the screening ones flagged the family)"
NO_EXACT_STORED = ("no exact expectation stored (a run from before it was: re-run `cr2 evaluate`)")
DEPLOYED_COLUMNS = ["rule", "risk", "check", "promise", "alpha", "target", "verdict", "n_cells", "n_violated",
                    "worst_lam", "worst_group", "value", "se", "bound", "p_holm", "n_resplits", "note", "stage", "seed",
                    "screening_verdict", "screening_n_violated", "screening_n_cells", "screening_p_holm",
                    "screening_n_resplits", "screening_seed"]
SCREENING, CONFIRMATORY = "screening", "confirmatory"  # guarantees.stage: the run's re-splits; a flagged family's re-check
ONE_GROUP_NOTE = "one group: identical to crc (Mondrian CRC over a single group is pooled CRC; its verdict is cr2@crc's)"
# the promises a `cr2 guarantees` run checks beside the certified routers': (check, metric) → (kind, promise)
DEPLOYED_PROMISES = {
    ("mondrian_mean_risk", "mean_test_risk"): ("mean", "E[{risk} | group] ≤ α at every λ and group"),
    ("ltt_any_violation", "share_any_lam_over_alpha_pool"): ("share", "P(some λ has {risk} > α) ≤ δ"),
    ("target_miss", "share_missing_target_pool"): ("share", "P(the chosen point misses its target) ≤ δ"),
}
DEPLOYED_RISK_COLUMNS = ["router", "rule", "alpha", "metric", "n_lam", "n_above", "mean", "max", "max_lam", "max_lower",
                         "max_upper"]
# what a rule's promise is over (promise_kind), in the words every validity table prints under its rows
PROMISES_OVER_DRAWS = {
    "crc": "in expectation over calibration draws: about half of deployed tables can land above α",
    "ltt": "with probability ≥ 1 − δ over the calibration draw, the deployed table's risk is ≤ α (at every λ at once)",
}
CONTEXT_CHECKS = {("crc_group_mean_risk", "mean_test_risk"): "plain CRC per group: context, CRC promises no "
                                                             "per-group bound"}


def risk_of_rule(rule: str) -> str:
    """The risk a rule bounds, in the rule registry's words ('' for a rule the registry does not hold)."""
    from cr2.crc import RULE_REGISTRY, rule_risk

    base = rule.removeprefix("mondrian-")
    if rule.startswith("target-"):
        return "accuracy target" if rule.endswith("accuracy") else "cost budget"
    spec = rule_risk(base) if base in RULE_REGISTRY else None
    return spec.display if spec is not None else ""


def _procedure(rule: str) -> str | None:
    from cr2.crc import RULE_REGISTRY

    return RULE_REGISTRY[rule].procedure if rule in RULE_REGISTRY else None


def _keep_verdicts(frame: pd.DataFrame, rows: list[dict]) -> pd.DataFrame:
    """The verdict column as the verdict function's own objects (an object column: pandas would turn them into plain
    strings, and a page refuses a word no verdict function produced)."""
    frame["verdict"] = pd.Series([r["verdict"] for r in rows], index=frame.index, dtype=object)
    return frame


def certified_verdicts(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per certified method `<router>@<rule>` and α: the verdict over its λ cells and the cell that decided it.

    cells: one row per (method, lam, alpha) with risk_mean, risk_se and (optionally) n_resplits — the certify stage's
    re-splits (cr2_warehouse.repository.certified_validity). A crc rule is tested (E[risk] ≤ α at every λ); an ltt rule's
    promise is about all λ at once, which per-λ re-splits cannot test: its row carries a note instead of a verdict.
    """
    if cells.empty:
        return pd.DataFrame(columns=CERTIFIED_COLUMNS)
    rows = []
    for (method, alpha), g in cells.groupby(["method", "alpha"], sort=True):
        router, _, rule = str(method).partition("@")
        g = g.sort_values("lam")
        n = g["n_resplits"].dropna() if "n_resplits" in g else pd.Series(dtype=float)
        base = {"router": router, "rule": rule, "risk": risk_of_rule(rule), "alpha": float(alpha),
                "n_resplits": int(n.max()) if len(n) else None, **_exact_fields(g)}
        if _procedure(rule) != "crc":
            rows.append({**base, "verdict": None, "n_cells": int(g["risk_mean"].notna().sum()), "n_violated": 0,
                         "worst_lam": np.nan, "mean": np.nan, "se": np.nan, "p_holm": np.nan,
                         "note": "not tested here: an ltt rule promises P(some λ has risk > α) ≤ δ, which per-λ "
                                 "re-splits cannot test (`cr2 guarantees` checks it on CR²'s deployed gate)"
                         if _procedure(rule) == "ltt" else f"rule '{rule}' makes no promise over re-splits"})
            continue
        v = validity_verdict(g["risk_mean"].to_numpy(float), g["risk_se"].to_numpy(float), float(alpha))
        if v.verdict is None:
            rows.append({**base, "verdict": None, "n_cells": 0, "n_violated": 0, "worst_lam": np.nan, "mean": np.nan,
                         "se": np.nan, "p_holm": np.nan, "note": "no re-splits stored (evaluation.n_resplits = 0)"})
            continue
        screen = {"screening_verdict": None, "screening_n_resplits": None}
        if "confirm_mean" in g and g["confirm_mean"].notna().any():  # flagged: the confirmatory re-check decides
            screen = {"screening_verdict": v.verdict, "screening_n_resplits": base["n_resplits"]}
            v = validity_verdict(g["confirm_mean"].to_numpy(float), g["confirm_se"].to_numpy(float), float(alpha))
            base["n_resplits"] = int(g["confirm_n"].max())
        rows.append({**base, **screen, "verdict": v.verdict, "n_cells": v.n_cells, "n_violated": v.n_violated,
                     "worst_lam": float(g["lam"].iloc[v.worst]), "mean": v.value, "se": v.se, "p_holm": v.p_holm,
                     "note": ""})
    frame = _keep_verdicts(pd.DataFrame(rows, columns=CERTIFIED_COLUMNS), rows)
    frame["screening_verdict"] = pd.Series([r.get("screening_verdict") for r in rows], index=frame.index, dtype=object)
    frame["exact_verdict"] = pd.Series([r["exact_verdict"] for r in rows], index=frame.index, dtype=object)
    return frame


def _exact_fields(g: pd.DataFrame) -> dict:
    """The two-sided test of a family's re-split means against their exact expectations (cr2.evaluation.validity.
    exactness_verdict over the λ cells): a software check beside the promise test, for every rule the certify stage
    re-splits (crc, ltt and their label variants: cr2.crc.exact says why the expectation is exact for them)."""
    from cr2.evaluation.validity import exactness_verdict

    none = {"exact_verdict": None, "exact_n_differ": 0, "exact_n_cells": 0, "exact_p_holm": np.nan,
            "exact_worst_lam": np.nan}
    if "exact_mean" not in g or not g["exact_mean"].notna().any():
        return {**none, "exact_note": NO_EXACT_STORED if g["risk_mean"].notna().any() else ""}
    # a family the screening re-splits flagged was re-split again on an independent stream: its cells decide
    confirmed = "confirm_mean" in g and g["confirm_mean"].notna().any()
    mean, se, n = ("confirm_mean", "confirm_se", "confirm_n") if confirmed else ("risk_mean", "risk_se", "n_resplits")
    v = exactness_verdict(g[mean].to_numpy(float), g[se].to_numpy(float), g["exact_mean"].to_numpy(float),
                          n=g[n].to_numpy(float) if n in g else None)
    if v.verdict is None:
        return {**none, "exact_note": NO_EXACT_STORED}
    return {"exact_verdict": v.verdict, "exact_n_differ": v.n_violated, "exact_n_cells": v.n_cells,
            "exact_p_holm": v.p_holm, "exact_worst_lam": float(g["lam"].iloc[v.worst]),
            "exact_note": CONFIRMED if confirmed else ""}


def deployed_verdicts(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per promise of CR²'s deployed gate in one `cr2 guarantees` run (rule, check, α or target): the verdict
    over its cells (Mondrian: every group × λ; ltt and target: one cell) and the cell that decided it; plain CRC per
    group as context, without a verdict.

    A family whose screening verdict was "violation detected" and that the run re-checked on its confirmatory stream
    (rows of stage 'confirmatory') reports the confirmatory verdict as THE verdict, with the screening one beside it
    (screening_*). A Mondrian family over one group is pooled CRC: no verdict of its own (ONE_GROUP_NOTE).

    cells: the run's bounded cells (cr2_warehouse.repository.guarantee_cells; no stage column: all screening)."""
    if cells.empty:
        return pd.DataFrame(columns=DEPLOYED_COLUMNS)
    keyed = cells.assign(_a=cells["alpha"].fillna(-1.0),
                         _t=cells["target"].fillna(-1.0) if "target" in cells else -1.0,
                         _s=cells["stage"].fillna(SCREENING) if "stage" in cells else SCREENING)
    by_family: dict[tuple, dict[str, dict]] = {}
    for (check, metric, rule, _a, _t, stage), g in keyed.groupby(["check_name", "metric", "rule", "_a", "_t", "_s"],
                                                                  sort=True):
        row = _deployed_row(check, metric, rule, None if _a < 0 else float(_a), None if _t < 0 else float(_t), g)
        if row is not None:
            by_family.setdefault((check, metric, rule, _a, _t), {})[stage] = row
    rows = []
    for stages in by_family.values():
        screen, confirm = stages.get(SCREENING), stages.get(CONFIRMATORY)
        if confirm is None or screen is None:
            rows.append(confirm or screen)
            continue
        rows.append({**confirm, **{f"screening_{k}": screen[k] for k in ("verdict", "n_violated", "n_cells", "p_holm",
                                                                          "n_resplits", "seed")}})
    rows = [{c: r.get(c) for c in DEPLOYED_COLUMNS} for r in rows]
    return _keep_verdicts(pd.DataFrame(rows, columns=DEPLOYED_COLUMNS), rows)


def _deployed_row(check: str, metric: str, rule: str, alpha: float | None, target: float | None,
                  g: pd.DataFrame) -> dict | None:
    """The verdict of one family of one stage (deployed_verdicts), or None for cells that are no promise."""
    n = int(g["n_resplits"].max()) if "n_resplits" in g and g["n_resplits"].notna().any() else None
    seed = g["seed"].dropna() if "seed" in g else pd.Series(dtype=object)
    base = {"rule": rule, "risk": risk_of_rule(rule), "check": check, "alpha": alpha, "target": target,
            "n_resplits": n, "stage": str(g["_s"].iloc[0]), "seed": int(seed.iloc[0]) if len(seed) else None}
    g = g.sort_values(["group", "lam"], na_position="first").reset_index(drop=True)
    if (check, metric) in CONTEXT_CHECKS:
        w = g.loc[g["value"].idxmax()]
        return {**base, "promise": "E[{risk} | group] per group (context: not a crc promise)".format(
            risk=base["risk"] or "risk"), "verdict": None, "n_cells": len(g), "n_violated": 0,
                "worst_lam": w["lam"], "worst_group": w["group"], "value": w["value"], "se": w["se"],
                "bound": w["bound"], "p_holm": np.nan, "note": CONTEXT_CHECKS[(check, metric)]}
    if (check, metric) not in DEPLOYED_PROMISES:
        return None
    kind, promise = DEPLOYED_PROMISES[(check, metric)]
    promise = promise.format(risk=base["risk"] or "risk")
    if rule.startswith("mondrian-") and g["group"].nunique() == 1:
        # one group: the per-group table is the pooled one, so this is crc's promise on the same re-splits — one event,
        # not a second verdict (and no second false alarm to count)
        w = g.loc[g["value"].idxmax()]
        return {**base, "promise": promise, "verdict": None, "n_cells": len(g), "n_violated": 0, "worst_lam": w["lam"],
                "worst_group": w["group"], "value": w["value"], "se": w["se"], "bound": w["bound"], "p_holm": np.nan,
                "note": ONE_GROUP_NOTE}
    v = validity_verdict(g["value"].to_numpy(float), g["se"].to_numpy(float), g["bound"].to_numpy(float),
                         kind=kind, n_resplits=n)
    w = g.iloc[max(v.worst, 0)]
    return {**base, "promise": promise, "verdict": v.verdict, "n_cells": v.n_cells, "n_violated": v.n_violated,
            "worst_lam": w["lam"], "worst_group": w["group"], "value": v.value, "se": v.se, "bound": v.bound,
            "p_holm": v.p_holm, "note": ""}


def flagged_families(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The families of deployed_verdicts whose verdict is "violation detected": rule, check, α, target — what a
    `cr2 guarantees` run re-checks on its confirmatory stream."""
    from cr2.evaluation.validity import VIOLATION

    if verdicts.empty:
        return pd.DataFrame(columns=["rule", "check", "alpha", "target"])
    hit = verdicts[[isinstance(v, str) and v == VIOLATION for v in verdicts["verdict"]]]
    return hit[["rule", "check", "alpha", "target"]].reset_index(drop=True)


def deployed_table_risk(points: pd.DataFrame) -> pd.DataFrame:
    """One row per certified method `<router>@<rule>` and α: its deployed threshold table's own test risk, for the risk
    its rule bounds (the rule registry's) — the mean over the table's λ, how many λ have a test risk above α, and the
    largest with its λ and 95 % bootstrap interval (NaN where the run stores none).

    points: per (method, lam, alpha, metric) the test value, lower and upper (cr2_warehouse.reads.certified_test_risk
    over cr2.evaluation.metrics.RISK_ALL_METRICS). A rule that bounds no risk has no row."""
    from cr2.crc import RULE_REGISTRY, rule_risk
    from cr2.evaluation.metrics import RISK_ALL_METRICS

    rows = []
    for (method, alpha), g in (points.groupby(["method", "alpha"], sort=True) if len(points) else ()):
        router, _, rule = str(method).partition("@")
        risk = rule_risk(rule) if rule in RULE_REGISTRY else None
        if risk is None:
            continue
        metric = RISK_ALL_METRICS[risk.name]
        g = g[g["metric"] == metric].dropna(subset=["value"]).sort_values("lam")
        if g.empty:
            continue
        value = g["value"].to_numpy(float)
        top = g.iloc[int(np.argmax(value))]
        rows.append({"router": router, "rule": rule, "alpha": float(alpha), "metric": metric, "n_lam": len(value),
                     "n_above": int((value > float(alpha)).sum()), "mean": float(value.mean()),
                     "max": float(top["value"]), "max_lam": float(top["lam"]), "max_lower": top.get("lower", np.nan),
                     "max_upper": top.get("upper", np.nan)})
    return pd.DataFrame(rows, columns=DEPLOYED_RISK_COLUMNS)


def deployed_risk_per_lam(points: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The deployed tables at `alpha`, λ by λ: one row per certified method `<router>@<rule>`, one column per λ, each
    cell the test risk its rule bounds with its 95 % bootstrap interval, marked "> α" where the value is above α
    (points: as deployed_table_risk's)."""
    from cr2.crc import RULE_REGISTRY, rule_risk
    from cr2.evaluation.metrics import RISK_ALL_METRICS

    if points.empty:
        return pd.DataFrame()
    at = points[np.isclose(points["alpha"].astype(float), float(alpha))]
    rows = []
    for method, g in at.groupby("method", sort=True):
        rule = str(method).partition("@")[2]
        risk = rule_risk(rule) if rule in RULE_REGISTRY else None
        if risk is None:
            continue
        g = g[g["metric"] == RISK_ALL_METRICS[risk.name]].dropna(subset=["value"]).sort_values("lam")
        row = {"method": str(method), "risk": risk.name}
        for r in g.itertuples():
            cell = ci_cell(r.value, getattr(r, "lower", np.nan), getattr(r, "upper", np.nan), ".4f")
            row[f"λ = {_lam(r.lam)}"] = cell + (" > α" if float(r.value) > float(alpha) else "")
        rows.append(row)
    return pd.DataFrame(rows).fillna(EM_DASH)


def promise_kind(rule: str) -> str | None:
    """What a rule's promise is over, from the rule registry: 'ltt' (a rule that needs δ: with probability ≥ 1 − δ over
    the calibration draw), 'crc' (in expectation over calibration draws), None (no promise, or not a registered rule)."""
    from cr2.crc import RULE_REGISTRY

    spec = RULE_REGISTRY.get(rule)
    if spec is None:
        return None
    return "ltt" if spec.needs_delta else "crc" if spec.procedure == "crc" else None


def rule_promise_note(rules) -> str:
    """One sentence on what the rules among `rules` promise about the deployed table, by kind (promise_kind), and which
    rules bound the deployed table itself (docs/guarantees.md); '' where none of them promises anything."""
    from cr2.crc import RULE_REGISTRY

    by_kind: dict[str, list[str]] = {}
    for rule in dict.fromkeys(str(r) for r in rules):
        if promise_kind(rule) is not None:
            by_kind.setdefault(promise_kind(rule), []).append(rule)
    if not by_kind:
        return ""
    said = "; ".join(f"{', '.join(by_kind[k])} — {PROMISES_OVER_DRAWS[k]}" for k in PROMISES_OVER_DRAWS if k in by_kind)
    ltt = ", ".join(name for name, spec in RULE_REGISTRY.items() if spec.needs_delta)
    return (f"What the rule promises about the deployed table: {said}. The rules that bound the deployed table itself "
            f"are the ltt rules ({ltt}; docs/guarantees.md).")


def _lam(v) -> str:
    return lam_cell(v, EM_DASH)


def _count(n) -> str:
    return count_cell(n, EM_DASH)


def confirm_note(r, word: Callable[[str | None], str]) -> str:
    """' — confirmatory, N re-splits …; the screening M said W' for a certified_verdicts row the confirmatory re-check
    decided (its screening re-splits flagged the family), else ''."""
    screen = getattr(r, "screening_verdict", None)
    if not isinstance(screen, str):
        return ""
    return (f" — confirmatory, {_count(r.n_resplits)} re-splits on an independent stream; the screening "
            f"{_count(r.screening_n_resplits)} said {word(screen)}")


def _verdict_cell(r, word: Callable[[str | None], str]) -> str:
    """A verdict with its family (cells rejected / tested, the Holm p), or why a row has none."""
    if isinstance(r.verdict, str):
        return f"{word(r.verdict)} ({r.n_violated}/{r.n_cells}, p = {r.p_holm:.2g})" + confirm_note(r, word)
    return f"— ({r.note})"


def _exact_cell(r, word: Callable[[str | None], str]) -> str:
    """The exact-expectation verdict with its family, or why a row has none."""
    if isinstance(getattr(r, "exact_verdict", None), str):
        cell = f"{word(r.exact_verdict)} ({r.exact_n_differ}/{r.exact_n_cells}, p = {r.exact_p_holm:.2g})"
        return cell + (f" — {CONFIRMED}" if getattr(r, "exact_note", "") == CONFIRMED else "")
    note = getattr(r, "exact_note", "") or ""
    return f"{EM_DASH} ({note})" if note else EM_DASH


def certified_display(v: pd.DataFrame, label: Callable[[str], str] = str,
                      word: Callable[[str | None], str] = lambda w: w or "—",
                      deployed: pd.DataFrame | None = None) -> pd.DataFrame:
    """certified_verdicts as shown: router, rule, risk bounded, α, worst λ, mean risk ± MC SE there, re-splits, the
    verdict with its family (Holm over the λ cells) and, where there is no verdict, why; with `deployed`
    (deployed_table_risk), beside each verdict the deployed table's own test risk (mean over λ, λ above α, the largest
    with its interval). `label` names a router, `word` marks a verdict word (docs/results.md's Doc.word)."""
    if v.empty:
        return pd.DataFrame()
    shown = pd.DataFrame({
        "router": [label(r) for r in v["router"]], "rule": v["rule"], "risk bounded": v["risk"],
        "α": v["alpha"].map(lambda a: f"{a:g}"), "worst λ": v["worst_lam"].map(_lam),
        "mean risk over re-splits ± MC SE (worst λ)": [pm_cell(m, s, missing_text=EM_DASH)
                                                        for m, s in zip(v["mean"], v["se"])],
        "re-splits": v["n_resplits"].map(_count),
        "E[risk] ≤ α at every λ: verdict (λ cells over α / tested, Holm p)": [
            _verdict_cell(r, word) for r in v.itertuples()],
        "mean = its exact expectation at every λ (two-sided): verdict (λ cells differing / tested, Holm p)": [
            _exact_cell(r, word) for r in v.itertuples()],
    }).reset_index(drop=True)
    if deployed is None:
        return shown
    at = {(r.router, r.rule, round(float(r.alpha), 12)): r for r in deployed.itertuples()}
    rows = [at.get((r.router, r.rule, round(float(r.alpha), 12))) for r in v.itertuples()]
    none = f"{EM_DASH} (no test rows stored)"
    shown["deployed table: test risk, mean over λ"] = [none if d is None else num(d.mean, ".4f") for d in rows]
    shown["deployed table: λ with test risk > α"] = [none if d is None else f"{_count(d.n_above)} of {_count(d.n_lam)}"
                                                     for d in rows]
    shown["deployed table: largest test risk [95 % CI] (its λ)"] = [
        none if d is None else f"{ci_cell(d.max, d.max_lower, d.max_upper, '.4f')} (λ = {_lam(d.max_lam)})"
        for d in rows]
    return shown


def deployed_display(v: pd.DataFrame, word: Callable[[str | None], str] = lambda w: w or "—") -> pd.DataFrame:
    """deployed_verdicts as shown: rule, risk, promise, α / target, the deciding cell (group, λ), its value ± MC SE
    against the bound, re-splits and the verdict with its family (or, for context rows, why there is none)."""
    if v.empty:
        return pd.DataFrame()

    def at(r) -> str:
        return f"α = {r.alpha:g}" if r.alpha is not None and pd.notna(r.alpha) else (
            f"target {r.target:g}" if r.target is not None and pd.notna(r.target) else "—")

    def cell(r) -> str:
        parts = [p for p in (None if r.worst_group is None or pd.isna(r.worst_group) else str(r.worst_group),
                             None if r.worst_lam is None or pd.isna(r.worst_lam) else f"λ = {r.worst_lam:g}") if p]
        return ", ".join(parts) or "all λ"

    return pd.DataFrame({
        "rule": v["rule"], "risk bounded": v["risk"], "promise": [r.promise or "—" for r in v.itertuples()],
        "at": [at(r) for r in v.itertuples()], "deciding cell": [cell(r) for r in v.itertuples()],
        "value ± MC SE": [pm_cell(a, b, missing_text=EM_DASH) for a, b in zip(v["value"], v["se"])],
        "bound": v["bound"].map(lambda b: "—" if pd.isna(b) else f"{b:g}"),
        "re-splits": v["n_resplits"].map(_count),
        "verdict (cells over the bound / tested, Holm p)": [_verdict_cell(r, word) for r in v.itertuples()],
        "screening → confirmatory re-check": [_recheck_cell(r, word) for r in v.itertuples()],
        "mean = its exact expectation": [_no_exact_reason(r.rule, r.note) for r in v.itertuples()],
    }).reset_index(drop=True)


class CertifiedValidity(Table):
    """Every certified router's validity over the certify stage's re-splits, one verdict per (router, rule, α):
    certified_display's cells (`cr2 results`, `cr2 guarantees` and the HTML report show this one table)."""

    LEFT = ("router", "rule", "risk bounded")  # the text columns a terminal justifies left

    def __init__(self, v: pd.DataFrame, label: Callable[[str], str] = str, deployed: pd.DataFrame | None = None,
                 why: str = "this run stores no re-splits of a certified router"):
        self.set_frame(certified_display(v, label, deployed=deployed), why)


class DeployedPromises(Table):
    """The promises of CR²'s deployed gate a validity run checked (ltt, Mondrian, target): deployed_display's cells
    (`cr2 guarantees` and the HTML report)."""

    LEFT = ("rule", "risk bounded", "promise")

    def __init__(self, v: pd.DataFrame, why: str = "the run has no bounded promise beside the crc rules'"):
        self.set_frame(deployed_display(v), why)


def _no_exact_reason(rule: str, note: str | None = None) -> str:
    """Why a deployed-gate promise has no exact-expectation test (cr2.crc.exact covers the certified rules' means)."""
    if note == ONE_GROUP_NOTE:
        return f"{EM_DASH} (one group: cr2@crc's, in the certified table)"
    if rule.startswith("mondrian-"):
        return f"{EM_DASH} (not derived: a group's calibration size varies over re-splits)"
    return f"{EM_DASH} (a share of re-splits, not a mean)"


def _seed_text(seed) -> str:
    return EM_DASH if seed is None or pd.isna(seed) else str(int(seed))


def _recheck_cell(r, word: Callable[[str | None], str]) -> str:
    """Where a family was re-checked: its screening verdict with its re-splits and seed, then the confirmatory stream's
    (the verdict column shows the confirmatory verdict); else why there was no re-check."""
    sv = getattr(r, "screening_verdict", None)
    if isinstance(sv, str):
        return (f"screening: {word(sv)} ({r.screening_n_violated}/{r.screening_n_cells}, p = {r.screening_p_holm:.2g}; "
                f"{_count(r.screening_n_resplits)} re-splits, seed {_seed_text(r.screening_seed)}) → confirmatory: "
                f"{_count(r.n_resplits)} re-splits, seed {_seed_text(r.seed)}")
    if isinstance(r.verdict, str):
        return f"{EM_DASH} (not flagged: the screening verdict is the verdict)"
    return EM_DASH


def stream_note(run: dict | None) -> str:
    """One sentence naming a validity run's streams: the screening seed (`cr2 guarantees --seed <it>` reproduces the
    run, its re-check included) and, where a family was flagged, the confirmatory stream's seed and re-splits."""
    if not run:
        return ""
    seed = run.get("seed")
    if seed is None or pd.isna(seed):
        head = "Seed: not stored (a run from before the seed was stored: it drew from the config's seed)."
    else:
        head = f"Seed {int(seed)} (`cr2 guarantees --seed {int(seed)}` reproduces this run)."
    cs = run.get("confirm_seed")
    if cs is None or pd.isna(cs):
        return head + " No family was flagged, so no confirmatory re-check ran."
    return (head + f" Families flagged \"violation detected\" were re-checked on an independent stream (seed {int(cs)}, "
            f"{_count(run.get('confirm_n_resplits'))} re-splits); their confirmatory verdict is the verdict shown.")


__all__ = ["CONFIRMATORY", "CertifiedValidity", "DeployedPromises", "ONE_GROUP_NOTE", "SCREENING", "certified_display",
           "certified_verdicts", "deployed_display",
           "deployed_risk_per_lam", "deployed_table_risk", "deployed_verdicts", "flagged_families", "stream_note",
           "promise_kind", "risk_of_rule", "rule_promise_note"]
