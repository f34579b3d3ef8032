"""docs/results.md, "What α bounds, and the risks users feel": per rule, the teacher-referenced risk the
paper's α bounds beside the realised risks on the real test labels, at one α and the headline λ values, for the
default scenario and MMLU-Pro; the validity of every certified router and of CR²'s deployed gate over the stored
re-splits (one verdict per router, rule, α and scenario) and the price of each rule over `cr2 guarantees`' re-splits.

Every number is read from the stored evaluation run (v_realised_risk with v_operating_points_ci's intervals) and
the newest stored validity run (guarantees, v_guarantee_price); every verdict word comes from cr2's verdict
functions through `words` (one rule's own risk against α: the interval of risk − α, and Holm over the family of rules
× λ of one scenario; validity: cr2.evaluation.validity over the cells of one guarantee, cr2.report.validity).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.evaluation.validity import LEVEL
from cr2.report.markdown import markdown_table
from cr2.report.resultsdoc.words import PLAIN, Words, homes, label_kind, missing
from cr2.report.risks import CertifiedByAlpha, GuaranteePrice, RuleRisks
from cr2.report.styles import MethodStyles
from cr2.report.validity import (NO_EXACT_STORED, certified_verdicts, deployed_display, deployed_verdicts,
                                 rule_promise_note, stream_note)

SCENARIOS = (("default", "Default scenario", None), ("mmlu-pro", "Measured scenario — MMLU-Pro",
                                                      "configs/mmlu-pro-measured.yaml"))
RESPLITS = 500  # the re-splits the page's validity command asks for (the stored run says how many it made)


def _cfg(config: str | None) -> str:
    return f" -c {config}" if config else ""


def _home(key: str) -> str:
    return homes()[key][0]


@dataclass(frozen=True)
class RuleRun:
    """A scenario's newest full evaluation run (None: none) and its per-rule risks at the run's α and the headline λ,
    each with its own risk against α (cr2.evaluation.own_risk.vs_alpha; empty: no rows at α)."""

    run_id: str | None
    run: dict | None = None
    alpha: float | None = None
    risks: pd.DataFrame | None = None


@dataclass(frozen=True)
class Certified:
    """A scenario's newest full evaluation run (None: none), its certified re-split cells, its methods and each
    certified router's deployed table's own test risk (cr2.report.validity.deployed_table_risk)."""

    run_id: str | None
    run: dict | None = None
    cells: pd.DataFrame | None = None
    methods: pd.DataFrame | None = None
    deployed: pd.DataFrame | None = None


@dataclass(frozen=True)
class RiskScenario:
    """What the section reads of one scenario; rules, certified and guarantees are None without its warehouse."""

    key: str
    title: str
    config: str | None
    rules: RuleRun | None = None
    certified: Certified | None = None
    guarantees: tuple | None = None  # the newest `cr2 guarantees` run: (run, cells, price)
    alpha: float | None = None  # the α of the scenario's newest evaluation run (the price is read at it)


@dataclass(frozen=True)
class RisksData:
    scenarios: tuple[RiskScenario, ...]


def _risk_table(w: Words, sc: RiskScenario) -> str:
    key, title = sc.key, sc.title
    if sc.rules is None:
        return f"### {title}\n\n" + missing(key, "the evaluation run of the per-rule risks")
    run_id, run, alpha, v = sc.rules.run_id, sc.rules.run, sc.rules.alpha, sc.rules.risks
    if run_id is None:
        return f"### {title}\n\n" + missing(key, "a full evaluation run (`cr2 run`)")
    kind = label_kind(run["label_source"])
    head = (f"### {title} — {kind} labels\n\n"
            f"_Run `{run_id}` of `{_home(key)}` (labels `{run['label_source']}`, **{kind}**"
            + (": the \"real\" labels are the simulator's, so the realised risks are simulated errors, not "
               "measurements" if kind == "SIMULATED" else "") + "); reproduce the warehouse with "
            f"`{homes()[key][1]}`, this page with `make results-doc`._\n")
    if v.empty:
        return head + missing(key, f"rows of v_realised_risk at α = {alpha:g} in run `{run_id}`")
    n_test, n_eval, n_res = int(v["n_risk"].max()), int(v["n_evaluable"].max()), int(v["n_resamples"].max())
    text = [head, f"N_test = {n_test:,} (risks), {n_eval:,} solvable (local rate, cost, accuracy); intervals: "
                  f"{n_res:,} paired bootstrap resamples of the test queries. α = {alpha:g}.\n", RuleRisks(v, w.word).markdown()]
    text.append(_read_risks(w, v))
    return "\n".join(text)


def _read_risks(w: Words, v: pd.DataFrame) -> str:
    """The sentences under a per-rule table: every number from `v`, every word from a verdict function."""
    crc = v[v["method"] == "cr2"].sort_values("lam")
    paper = crc["rule"].iloc[0] if len(crc) else "crc"
    parts = []
    if len(crc):
        lams = " / ".join(f"{x:g}" for x in crc["lam"])
        parts.append(f"Under the deployed rule (`{paper}`) at λ = {lams}: teacher disagreement "
                     + " / ".join(f"{x:.4f}" for x in crc["teacher_risk"])
                     + ", oracle disagreement " + " / ".join(f"{x:.4f}" for x in crc["oracle_risk"])
                     + ", avoidable error " + " / ".join(f"{x:.4f}" for x in crc["avoidable_risk"])
                     + ", local rate " + " / ".join(f"{x:.3f}" for x in crc["local_rate"]) + ".")
    words = {}
    for r in v.itertuples():
        words.setdefault(r.rule, []).append(f"{r.lam:g}: {w.compare(r.d_lower, r.d_upper, r.p_holm)}")
    parts.append("Each rule's own risk against α (Holm over its family: that rule's method at α, every λ of its sweep × "
                 "every risk stored against α), by λ — "
                 + "; ".join(f"`{rule}` {', '.join(ws)}" for rule, ws in words.items()) + ".")
    return "\n" + "\n\n".join(parts) + "\n"


# ---------------------------------------------------------------- validity and price over re-splits
def _validity(w: Words, data: RisksData) -> str:
    text = ["### Validity over re-splits of val + test\n",
            "One verdict per (router, rule, α, scenario), the same one `cr2 guarantees`, `cr2 results`, the HTML report "
            "and every section of this page print (cr2.report.validity over cr2.evaluation.validity). Each "
            "certified router's re-splits are the certify stage's: val ∪ test re-split at random (N_calib = the val "
            "size) `evaluation.n_resplits` times, the rule re-calibrated on each calibration part and its risk measured "
            "on the rest; CR²'s deployed gate's other promises (ltt, Mondrian, the target mode) come from the newest "
            "`cr2 guarantees` run. **The test**: per cell (one λ; Mondrian: one group × λ; ltt and target: one share "
            "of re-splits) a one-sided test of the promise — z = (mean − bound) / its Monte-Carlo SE, or an exact "
            "binomial test of a share —; **the family**: the cells of one verdict, Holm-corrected at "
            f"{LEVEL:g}. \"violation detected\" where Holm rejects a cell, else \"no violation detected\": each verdict "
            "controls its own family-wise error over its cells, not across verdicts (a table of V verdicts whose "
            f"promises all hold shows on average at most {LEVEL:g}·V \"violation detected\"). A cell reads "
            "\"verdict (cells over the bound / cells tested, Holm p of the deciding cell)\". **The software check**: "
            "beside each certified verdict, each λ's Monte-Carlo mean against the exact expectation of the rule's test "
            "risk over re-splits (cr2.crc.expected_resplit_risk, a hypergeometric sum), two-sided, Holm over the λ "
            "cells — it sees an implementation that keeps the mean just under α, which the one-sided test cannot. "
            "Mondrian over one group is pooled CRC and gets no verdict of its own.\n"]
    prices = []
    counts = {"promise": 0, "exact": 0}  # the verdicts this section prints, counted from the rows it prints
    for sc in data.scenarios:
        key, title, config = sc.key, sc.title, sc.config
        command = f"cr2 guarantees --resplits {RESPLITS}{_cfg(config)} --home {_home(key)}"
        if sc.certified is None:
            text.append(f"**{title}.** " + missing(key, "the validity of the certified routers"))
            continue
        text.append(_certified_table(w, sc, counts))
        run, cells, price = sc.guarantees
        if run is None or cells.empty:
            text.append(f"**{title} — CR²'s deployed gate.** " + missing(key, f"a stored validity run — `{command}` "
                                                                               "stores one"))
            continue
        kind = label_kind(str(run["label_source"]))
        seed = run.get("seed")
        again = (command if seed is None or pd.isna(seed) else  # the stored run's own re-splits and stream
                 f"cr2 guarantees --resplits {int(run['n_resplits'])} --seed {int(seed)}{_cfg(config)} --home {_home(key)}")
        text.append(f"**{title} — CR²'s deployed gate, {kind} labels** (`{run['label_source']}`): run `{run['run_id']}`, "
                    f"{int(run['n_resplits']):,} re-splits, N_calib = {int(run['n_calib']):,}; reproduce with "
                    f"`{again}` (after `{homes()[key][1]}`). {stream_note(run)}\n")
        text.append(_deployed_table(w, cells, counts))
        prices.append((title, kind, price, sc.alpha))
    text.insert(2, _false_alarms(counts))  # after the heading and the test's description
    text.append(_price(prices))
    return "\n".join(text)


def _false_alarms(counts: dict[str, int]) -> str:
    """How many verdicts the section prints and how many false alarms to expect if every promise holds and every
    implementation is exact: each verdict's family-wise level summed (a union bound: LEVEL × count)."""
    total = counts["promise"] + counts["exact"]
    return (f"**How many verdicts, how many false alarms.** This section prints {total:,} verdicts at level {LEVEL:g} "
            f"each: {counts['promise']:,} promise verdicts and {counts['exact']:,} exact-expectation verdicts (counted "
            f"from the stored rows below). Were every promise kept and every implementation exact, the expected number "
            f"of verdicts reporting a problem is at most {LEVEL:g} × {total:,} = {LEVEL * total:.1f} (the sum of the "
            "levels; no correction across verdicts), so that many flags across the section are no evidence on their "
            "own; a flagged family (of a `cr2 guarantees` run, or of a certified router in the certify stage) is "
            "re-checked on an independent stream with 10× the re-splits, and the re-check's verdict is the one "
            "shown.\n")


def _certified_table(w: Words, sc: RiskScenario, counts: dict[str, int]) -> str:
    """Every certified router × rule of a scenario, one column per α: the verdict over its λ cells."""
    key, title, c = sc.key, sc.title, sc.certified
    run_id, run = c.run_id, c.run
    if run_id is None:
        return f"**{title} — certified routers.** " + missing(key, "a full evaluation run (`cr2 run`)")
    v = certified_verdicts(c.cells)
    if v.empty:
        return (f"**{title} — certified routers.** _(no rows: run `{run_id}` stores no re-splits of a certified "
                "router — evaluation.n_resplits = 0, or no certified router)_\n")
    label = MethodStyles.from_frame(c.methods).label
    n = v["n_resplits"].dropna()
    deployed = {(r.router, r.rule, round(float(r.alpha), 12)): r for r in c.deployed.itertuples()}
    table = CertifiedByAlpha(v, deployed, label, w.word)
    counts["promise"] += table.n_promise
    counts["exact"] += table.n_exact
    kind = label_kind(str(run["label_source"]))
    head = (f"**{title} — certified routers, {kind} labels** (`{run['label_source']}`): run `{run_id}`, "
            + (f"{int(n.max()):,} re-splits" if len(n) else "re-splits of the certify stage") + " per (λ, rule). "
            "After each verdict, the one threshold table a user deploys (calibrated on val): how many of its λ have a "
            "test risk above α, and the largest with its 95 % bootstrap interval over the test queries. "
            + rule_promise_note(v["rule"])
            + (" The run stores no exact expectations of its re-split means (stored before they were): no "
               "exact-expectation verdict here until `cr2 evaluate` runs again." if (v["exact_note"] == NO_EXACT_STORED).any()
               else "") + "\n")
    return head + "\n" + table.markdown() + "\n"


def _deployed_table(w: Words, cells: pd.DataFrame, counts: dict[str, int]) -> str:
    v = deployed_verdicts(cells)
    counts["promise"] += sum(isinstance(x, str) for x in v["verdict"])
    if v.empty:
        return "_(no rows: the run has no bounded promise beside the crc rules')_\n"
    return markdown_table(deployed_display(v, w.word)) + "\n"


def _price(prices: list) -> str:
    if not prices:
        return ""
    alphas = sorted({a for *_, a in prices if a is not None})
    text = [f"### Price over the same re-splits (α = {' / '.join(f'{a:g}' for a in alphas) or '–'}, each scenario's run's)\n",
            "v_guarantee_price: per rule, the Monte-Carlo mean over re-splits of the test local rate, the mean cost "
            "(the pre-execution ĉ the validity check accounts) and the accuracy over **all** test rows (hence other "
            "values than the per-query tables above, which count solvable rows), and the mean of each risk. Means "
            "only: the page prints no comparison between rules here (the paired re-split differences are not "
            "stored).\n"]
    for title, kind, p, alpha in prices:
        p = p[p["target"].isna() & np.isclose(p["alpha"], alpha if alpha is not None else np.nan) & p["lam"].round(6).isin(
            [round(x, 6) for x in HEADLINE_LAMS])] if not p.empty else p
        if p.empty:
            text.append(f"**{title}** ({kind}): _(no price rows at α = {alpha if alpha is not None else '–'} and λ = "
                        f"{', '.join(f'{x:g}' for x in HEADLINE_LAMS)} in this run)_\n")
            continue
        text.append(f"**{title}** ({kind}):\n\n" + GuaranteePrice(p).markdown())
        crc = p[p["rule"] == "crc"].set_index("lam")
        if len(crc):
            lams = sorted(crc.index)
            text.append("Under the paper's rule, over the re-splits, the avoidable error is "
                        + " / ".join(f"{crc.loc[x, 'avoidable_risk']:.4f}" for x in lams)
                        + " and the teacher disagreement " + " / ".join(f"{crc.loc[x, 'teacher_risk']:.4f}" for x in lams)
                        + f" at λ = {' / '.join(f'{x:g}' for x in lams)} ({kind} labels): α = {alpha:g} bounds "
                        "the teacher disagreement, not the answers users get.\n")
    return "\n".join(text)


def render(data: RisksData, words: Words = PLAIN) -> str:
    text = ["## What α bounds, and the risks users feel\n",
            "CR²'s CRC, as the paper defines it (eq. disagree_label), bounds **teacher disagreement**: how often the "
            "gate accepts a query locally while the teacher — a learned selector — prefers an edge model. Beside it "
            "every evaluated rule carries two **realised risks on the real test labels** (docs/guarantees.md): "
            "**oracle disagreement** (accepted locally while argmax_m y_m − λ·ĉ_m over the real correctness is an "
            "edge model) and **avoidable error** (accepted locally, the device wrong, some edge model right), and the "
            "**local accuracy** (the device's accuracy on what it accepted). The rules `crc-oracle` / "
            "`crc-avoidable` (and `ltt-oracle` / `ltt-avoidable`) calibrate the same gate on the val split's real "
            "labels with those losses.\n",
            "How to read the tables: risks are over every test query (the population the guarantees are stated "
            "for); local rate, cost and accuracy over the test queries some model solves (paper §VII-A). `[a, b]` is "
            "the stored 95 % paired-bootstrap interval over test queries (cr2.evaluation.statistics: test-query noise only, gate "
            "and calibration held fixed). \"own risk − α\" is the risk the rule calibrates minus α: its word is "
            "\"larger\" / \"smaller\" only where Holm's family-wise p across the scenario's rules × λ is below 0.05, "
            "each p from the bootstrap resamples of that difference itself (cr2.evaluation.statistics.bootstrap_p_values; "
            "the family: docs/guarantees.md, \"One family rule\"). One calibration split: a rule's risk may land above α on it (its promise is in expectation "
            "over calibration sets); the re-split check below tests the promise. The paired differences between "
            "rules (Δ local rate, Δ cost vs crc) are not stored in the warehouse, so the page prints none.\n"]
    for sc in data.scenarios:
        text.append(_risk_table(words, sc))
    text.append(_validity(words, data))
    return "\n".join(text)
