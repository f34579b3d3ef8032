"""The evaluation page: the paper's §VII figures and tables of one evaluation run, as one HTML page.

Every figure and table names the SQL view it was drawn from.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.report.figures import (curves_figure, fixed_accuracy_figure, gate_error_figure, pareto_figure,
                                realised_risk_figure, risk_figure, saving_interval_figure)
from cr2.report.page import Figure, TableBlock, banner, facts_table, figure_html, page, table_html
from cr2.report.styles import MethodStyles
from cr2.report.deploy import RULE_SUMMARY
from cr2.report.tables import (FixedAccuracySavings, MeanSaving, RouterComplexity, ablation_table, benchmark_table,
                               guarantee_price_table, informative_targets, operating_point_ci_table,
                               realised_risk_table, risk_check_table)


@dataclass
class ReportInputs:
    """The frames of every view the report shows, for one evaluation run, and the run's header facts."""

    header: dict
    pareto: pd.DataFrame
    fixed_accuracy: pd.DataFrame
    calibration_rules: pd.DataFrame
    risk_vs_alpha: pd.DataFrame
    local_rate: pd.DataFrame
    variants: pd.DataFrame
    gate_errors: pd.DataFrame
    benchmark_at_cost: pd.DataFrame
    complexity: pd.DataFrame
    default_alpha: float
    ablation: pd.DataFrame = field(default_factory=pd.DataFrame)
    methods: pd.DataFrame = field(default_factory=pd.DataFrame)
    extra_tables: list[TableBlock] = field(default_factory=list)
    deploy_decision: pd.DataFrame = field(default_factory=pd.DataFrame)  # which router to deploy: one row per rule, as shown
    deploy_cost: pd.DataFrame = field(default_factory=pd.DataFrame)  # the deploy rule's candidates, whole decision cost
    certified_validity: pd.DataFrame = field(default_factory=pd.DataFrame)  # the run's certified re-split cells
    certified_test_risk: pd.DataFrame = field(default_factory=pd.DataFrame)  # their deployed tables' test risks
    guarantee_run: dict | None = None  # the newest validity run (`cr2 guarantees`): source, re-splits, N_calib
    guarantees: pd.DataFrame = field(default_factory=pd.DataFrame)  # its bounded cells (guarantee_cells)
    guarantee_price: pd.DataFrame = field(default_factory=pd.DataFrame)  # v_guarantee_price rows of that run
    realised_risk: pd.DataFrame = field(default_factory=pd.DataFrame)  # v_realised_risk rows of the run
    mean_saving: pd.DataFrame = field(default_factory=pd.DataFrame)  # v_mean_saving_ci rows of the run
    operating_points_ci: pd.DataFrame = field(default_factory=pd.DataFrame)  # v_operating_points_ci, 'all', the run


def guarantee_tables(inp: ReportInputs) -> list[TableBlock]:
    """The validity tables (docs/guarantees.md, cr2.report.validity): every certified router of the run over the
    certify stage's re-splits, and CR²'s deployed gate's other promises when a validity run (`cr2 guarantees`) is in
    the warehouse; each says why it is empty where it is."""
    from cr2.report.validity import (CertifiedValidity, certified_verdicts, DeployedPromises, deployed_risk_per_lam,
                                     deployed_table_risk, deployed_verdicts, rule_promise_note,
                                     stream_note)

    st = MethodStyles.from_frame(inp.methods)
    rule = ("Verdict: a one-sided test per cell of the promise (z = (mean − bound) / Monte-Carlo SE; a share: exact "
            "binomial), Holm at 5 % over the cells of one row: \"violation detected\" where Holm rejects a cell, "
            "else \"no violation detected\".")
    verdicts = certified_verdicts(inp.certified_validity)
    # the table objects `cr2 results` and `cr2 guarantees` print: the same cells on every surface
    certified = CertifiedValidity(verdicts, st.label, deployed=deployed_table_risk(inp.certified_test_risk)).frame()
    note = rule_promise_note(verdicts["rule"]) if len(verdicts) else ""
    out = [TableBlock("validity_certified", "Validity over re-splits: every certified router", "v_certified_validity",
                      "E[risk] ≤ α at every λ, over the certify stage's random calibration/test re-splits of val ∪ test; "
                      "each row names the risk its rule bounds. " + rule
                      + " Beside each verdict, the one table a user deploys (calibrated on val): its own test risk per "
                      "λ, summarised. " + note
                      + ("" if len(certified) else " This run stores no re-splits of a certified router "
                         "(evaluation.n_resplits = 0, or no certified router)."), certified),
           TableBlock("deployed_risk_per_lam", f"The deployed tables at α = {inp.default_alpha:g}, λ by λ",
                      "metrics, intervals",
                      "Each certified router's deployed threshold table (calibrated on val): its test risk — the risk "
                      "its rule bounds, over all test rows — at every λ with its 95 % paired-bootstrap interval over "
                      "the test queries; \"> α\" marks a λ whose test value is above α. " + note,
                      deployed_risk_per_lam(inp.certified_test_risk, inp.default_alpha))]
    if inp.guarantee_run is None:
        return out
    head = inp.guarantee_run
    where = f"{head['source']}, {int(head['n_resplits'])} re-splits, N_calib = {int(head['n_calib'])}"
    deployed = DeployedPromises(deployed_verdicts(inp.guarantees)).frame()
    out.append(TableBlock("guarantees_validity", "Validity over re-splits: CR²'s deployed gate (ltt, Mondrian, target)",
                          "v_guarantees", f"{where}. {stream_note(head)} LTT and target shares are against the pool's "
                          "exact risk. " + rule
                          + ("" if len(deployed) else " The run has no bounded promise beside the crc rules'."),
                          deployed))
    if not inp.guarantee_price.empty:
        out.append(TableBlock("guarantees_price", "What each guarantee costs beside plain CRC", "v_guarantee_price",
                              f"{where}. Mean over re-splits of the test local rate, cost and accuracy; target rows compare "
                              "the certified choice with the CRC point an oracle would pick on the test set itself.",
                              guarantee_price_table(inp.guarantee_price)))
    return out


def build_figures(inp: ReportInputs) -> list[Figure]:
    """Every figure of the report from its view's rows."""
    sim = bool(inp.header.get("labels_simulated"))
    st = MethodStyles.from_frame(inp.methods)
    kind = "SIMULATED" if sim else ("MEASURED" if str(inp.header.get("labels", "")).startswith("MEASURED") else None)
    a = inp.default_alpha
    at_alpha = lambda df: df[df["alpha"].isna() | np.isclose(df["alpha"].fillna(-1), a)]  # noqa: E731
    lo = inp.pareto["cost"].min()
    figs = [
        Figure("pareto_full", "Accuracy–cost Pareto curves (full range)", "v_pareto",
               "Frontier of each learned router over its λ sweep; CR² pools every α of the grid (its envelope). "
               "Squares: Always-m.", pareto_figure(inp.pareto, None, sim, st, kind)),
        Figure("pareto_zoom", "Accuracy–cost Pareto curves (zoomed operating region)", "v_pareto",
               "The same points in the low-cost operating region.", pareto_figure(inp.pareto, (max(0.0, lo - 0.02), 0.6), sim, st, kind)),
        Figure("fixed_accuracy", "Fixed-accuracy cost comparison", "v_fixed_accuracy",
               "At each target accuracy both reach: the minimum cost of CR² and of KNN (best operating point with "
               "accuracy ≥ target, no interpolation) and CR²'s saving versus KNN, for targets every method must work "
               "for (at or above each one's accuracy at its cheapest point).",
               fixed_accuracy_figure(informative_targets(inp.fixed_accuracy, inp.pareto), st)),
        *([Figure("saving_intervals", "Saving versus KNN with 95 % intervals", "v_fixed_accuracy_ci",
                  "Each learned router's fixed-accuracy saving versus KNN (interpolated frontier) at the informative "
                  "targets, with its 95 % paired bootstrap interval over the test queries (training, calibration and "
                  "split held fixed). An interval that crosses the dashed line is 'no difference detected'.",
                  saving_interval_figure(informative_targets(inp.fixed_accuracy, inp.pareto), st))]
          if "saving_lower" in inp.fixed_accuracy.columns and inp.fixed_accuracy["saving_lower"].notna().any() else []),
        Figure("calibration_rules", "Accuracy–cost curves for threshold-selection rules", "v_calibration_rules",
               f"The same gate with CRC (α = {a:g}), the empirical rule without the +1 correction (α = {a:g}) and a "
               "fixed threshold 0.5.", curves_figure(at_alpha(inp.calibration_rules.rename(columns={"rule": "method"})),
                                                    ["cr2", "cr2-empirical", "cr2-fixed-0.5"], "Threshold-selection rules", st)),
        Figure("risk_control", "Marginal false-acceptance risk (teacher disagreement) under CRC-calibrated thresholds",
               "v_risk_vs_alpha",
               "Test risk on the fixed split per α; band and dotted line: 5–95 % and mean over random "
               "calibration/test re-splits; dashed: y = α. The guarantee is pointwise in λ, not simultaneous. This "
               "risk is agreement with the teacher (a learned selector), not the error rate of local answers: see "
               "the next figure.",
               risk_figure(inp.risk_vs_alpha)),
        *([Figure("realised_risk", "Teacher-referenced vs realised risks", "v_realised_risk",
                  f"At α = {a:g}: CR²'s three risks on the test split — teacher disagreement (what the paper's rule "
                  "bounds), oracle disagreement on the real labels and avoidable errors — and the rules crc-oracle / "
                  "crc-avoidable that bound the latter two on the calibration split's real labels (docs/guarantees.md)."
                  + (" The labels are SIMULATED." if sim else ""),
                  realised_risk_figure(inp.realised_risk, a, st))] if not inp.realised_risk.empty else []),
        Figure("local_selection", "Local-model selection rate", "v_local_rate",
               f"Fraction of test queries answered on the device (CR² at α = {a:g}).",
               curves_figure(at_alpha(inp.local_rate), ["cr2", "full-info", *st.learned], "Local selection rate vs λ", st,
                             x="lam", y="local_rate", xlabel="cost weight λ", ylabel="local rate")),
        Figure("variants", "Deferred-branch variants", "v_variants",
               f"CR² edge-only (default), inclusive and fallback deferred branches at α = {a:g}, against the "
               "full-information reference.", curves_figure(at_alpha(inp.variants),
                                                            ["cr2", "cr2-inclusive", "cr2-fallback", "full-info"],
                                                            "Deferred-branch variants", st)),
        Figure("gate_errors", "Gate-error decomposition", "v_gate_errors",
               "False accepts (gate accepts while an edge model is teacher-preferred) and false defers.",
               gate_error_figure(inp.gate_errors, a)),
    ]
    return figs


def build_tables(inp: ReportInputs) -> list[TableBlock]:
    """Every table of the report from its view's rows."""
    st = MethodStyles.from_frame(inp.methods)
    # the same table objects `cr2 results` prints, so both show the same words and numbers
    fixed = FixedAccuracySavings(informative_targets(inp.fixed_accuracy, inp.pareto)).frame()
    return [
        TableBlock("per_benchmark_by_cost", "Per-benchmark accuracy at representative cost targets", "v_benchmark_at_cost",
                   "Nearest reachable operating point to each pooled cost target; '–': unreachable. Avg is pooled.",
                   benchmark_table(inp.benchmark_at_cost, st)),
        TableBlock("fixed_accuracy_savings", "Cost saving versus KNN at matched accuracy (%) [95 % CI]",
                   "v_fixed_accuracy_ci",
                   "Positive: cheaper than KNN at the same target accuracy (each method's interpolated monotone "
                   "frontier). Brackets: 95 % paired bootstrap interval over the test queries. The words are the "
                   "tests' stored ones (the CR² vs KNN table of `cr2 results`): Holm over every learned router × "
                   "target of the run.", fixed),
        *([TableBlock("mean_saving", "Mean saving versus KNN over the validation target grid (%)", "v_mean_saving_ci",
                      "Mean of the per-target savings over every target the router and KNN reach; 95 % paired "
                      "bootstrap interval; the test's stored word: 'cheaper'/'dearer' only where the interval excludes 0 "
                      "and the Holm p over the run's learned routers is below 0.05, else 'no difference detected'.",
                      MeanSaving(inp.mean_saving).frame())] if len(inp.mean_saving) else []),
        *([TableBlock("operating_points_ci", "Operating points with 95 % intervals", "v_operating_points_ci",
                      f"CR² at α = {inp.default_alpha:g} and the learned baselines at λ ∈ {{{', '.join(f'{v:g}' for v in HEADLINE_LAMS)}}}, all test "
                      "benchmarks; 95 % paired bootstrap intervals over the test queries.",
                      operating_point_ci_table(inp.operating_points_ci, inp.default_alpha, HEADLINE_LAMS, st))]
          if len(inp.operating_points_ci) else []),
        TableBlock("router_complexity", "Router-head parameters and FLOPs (encoder excluded)", "v_router_complexity",
                   "CR² runs the gate on the device (and the teacher's heads only for deferred queries).",
                   RouterComplexity(inp.complexity).frame()),
        TableBlock("risk_check", "Risk control on the test split", "v_risk_vs_alpha",
                   "CRC bounds the expected false-acceptance risk by α at each λ; a single test split fluctuates around "
                   "it, so this table is context: the verdict is the validity table's (over re-splits).",
                   risk_check_table(inp.risk_vs_alpha)),
        TableBlock("ablation", "Ablation at c̄ = 0.45", "v_ablation",
                   "Each configuration's operating point nearest the cost anchor; local rate = share accepted by the gate.",
                   ablation_table(inp.ablation, inp.default_alpha)),
        *([TableBlock("realised_risk", "What α bounds and what users feel", "v_realised_risk",
                      f"CR² at α = {inp.default_alpha:g} under each rule: teacher disagreement (the paper's risk), oracle "
                      "disagreement on the real labels and avoidable error, over all test rows; local accuracy, local "
                      "rate, cost and accuracy over the solvable rows.",
                      realised_risk_table(inp.realised_risk, inp.default_alpha))] if not inp.realised_risk.empty else []),
        TableBlock("deploy_decision", "Which router to deploy", "deploy_decisions",
                   RULE_SUMMARY if len(inp.deploy_decision) else "No deploy decision stored for this run: a run made "
                   "before the deploy rule, or no rule certified at the default α — re-run `cr2 run`.",
                   inp.deploy_decision),
        TableBlock("deploy_cost", "The whole cost of a decision, per deploy candidate", "deploy_candidates",
                   "Every candidate of the deploy rule, simplest first (device model, router, worst-case decision FLOPs "
                   "— the figure the rule ranks by); the shared MiniLM embedding is paid by every candidate that runs "
                   "a router and is not in these columns.", inp.deploy_cost),
        *guarantee_tables(inp),
        *inp.extra_tables,
    ]


def render_html(inp: ReportInputs, figures: list[Figure], tables: list[TableBlock]) -> str:
    """The self-contained report page."""
    h = inp.header
    esc = html.escape
    top = ""
    if h.get("labels_simulated"):
        top = banner("sim", "SIMULATED LABELS.", "Every number on this page is computed on correctness labels from the "
                     f"simulator <code>{esc(str(h['label source']))}</code> (docs/labels.md), not on measured model "
                     "outputs. They describe the simulator's assumptions as much as the routers; do not read them as a "
                     "reproduction of the paper.")
    elif str(h.get("labels", "")).startswith("MEASURED"):
        top = banner("measured", "MEASURED LABELS.", "Every number on this page is computed on per-query correctness "
                     f"measured from real model outputs: {esc(str(h['labels']))}"
                     + (f" ({esc(str(h['label origin']))})" if h.get("label origin") else "") + ".")
    facts = facts_table({k: v for k, v in h.items() if k != "labels_simulated"})
    # sql-text: shown to the user, never run (the page tells readers which `cr2 sql` reproduces a table)
    parts = [f"""<h1>CR² evaluation report</h1>{top}{facts}
<p>Every figure and table names the warehouse view it was drawn from: run
<code>cr2 sql "SELECT * FROM &lt;view&gt; WHERE run_id = '{esc(str(h.get('run_id')))}'"</code> to get its numbers.</p>"""]
    parts.append("<h2>Figures</h2>")
    parts += [figure_html(f) for f in figures]
    parts.append("<h2>Tables</h2>")
    for t in tables:
        parts.append(f'<section id="{t.key}"><h3>{esc(t.title)}</h3><p class="cap">{esc(t.caption)} View: '
                     f'<code>{t.view}</code>; also <a href="tables/{t.key}.csv">tables/{t.key}.csv</a> and '
                     f'<a href="tables/{t.key}.tex">tables/{t.key}.tex</a>.</p>' + table_html(t.frame) + "</section>")
    return page("cr2 report", "\n".join(parts))
