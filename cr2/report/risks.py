"""The page's tables of what α bounds (docs/results.md, "What α bounds, and the risks users feel") as objects
(cr2.report.table.Table): per rule and λ the teacher-referenced and realised risks with their intervals and the rule's
own risk against α; and the price of each rule over `cr2 guarantees`' re-splits. Words through the caller's `word`;
numbers through cr2.report.cells."""
from __future__ import annotations

import pandas as pd

from cr2.evaluation.families import change_verdict
from cr2.report.cells import ci_cell, lam_cell, num, pm_cell
from cr2.report.table import Table, Word, plain_word

RISK_NAME = {"teacher_risk": "teacher disagreement", "oracle_risk": "oracle disagreement",
             "avoidable_risk": "avoidable error"}


class RuleRisks(Table):
    """Per rule and λ at one α (v_realised_risk with its intervals, and each rule's own risk − α with its stored Holm
    p over its family — cr2.evaluation.own_risk.vs_alpha): the three risks, local accuracy and rate, cost,
    accuracy, and the word of own risk − α (larger / smaller / no difference detected); CR²'s rule in bold."""

    def __init__(self, v: pd.DataFrame, word: Word = plain_word):
        rows = [[lam_cell(r.lam), f"**{r.rule}**" if r.method == "cr2" else r.rule,
                 ci_cell(r.teacher_risk, r.teacher_risk_lower, r.teacher_risk_upper, ".4f"),
                 ci_cell(r.oracle_risk, r.oracle_risk_lower, r.oracle_risk_upper, ".4f"),
                 ci_cell(r.avoidable_risk, r.avoidable_risk_lower, r.avoidable_risk_upper, ".4f"),
                 num(r.local_accuracy, ".3f"), ci_cell(r.local_rate, r.local_rate_lower, r.local_rate_upper, ".3f"),
                 ci_cell(r.cost, r.cost_lower, r.cost_upper, ".4f"),
                 ci_cell(r.accuracy, r.accuracy_lower, r.accuracy_upper, ".4f"), RISK_NAME[r.own],
                 ci_cell(r.d, r.d_lower, r.d_upper, "+.4f"), f"{num(r.p_holm, '.2g')} ({r.family_size})",
                 word(change_verdict(r.d_lower, r.d_upper, r.p_holm))] for r in v.itertuples()]
        super().__init__(["λ", "rule", "teacher disagreement", "oracle disagreement (real labels)", "avoidable error",
                          "local acc.", "local rate", "cost", "accuracy", "own risk", "own risk − α",
                          "Holm p (family size)", "vs α (Holm over its family)"], rows)


class GuaranteePrice(Table):
    """Per λ and rule (v_guarantee_price rows at one α): the Monte-Carlo mean over re-splits of the local rate and
    mean cost (± their SE), the accuracy over all test rows and the mean of each risk."""

    def __init__(self, p: pd.DataFrame):
        rows = [[lam_cell(r.lam), r.rule, pm_cell(r.local_rate, r.local_rate_se, 4),
                 pm_cell(r.mean_cost, r.mean_cost_se, 4), num(r.accuracy, ".4f"), num(r.teacher_risk, ".4f"),
                 num(r.oracle_risk, ".4f"), num(r.avoidable_risk, ".4f")] for r in p.itertuples()]
        super().__init__(["λ", "rule", "local rate", "mean cost", "accuracy (all rows)", "teacher disagreement",
                          "oracle disagreement", "avoidable error"], rows)


class CertifiedByAlpha(Table):
    """Every certified router × rule of a scenario (rows of cr2.report.validity.certified_verdicts), one column per α:
    the verdict over its λ cells (cells over the bound / cells, the worst λ's mean ± SE), the check of its re-split
    means against their exact expectation, and the deployed table's own test risk (`deployed`: (router, rule, α) →
    row of deployed_table_risk). `label` names a router; `n_promise` / `n_exact` count the verdicts it prints."""

    def __init__(self, v: pd.DataFrame, deployed: dict, label=str, word: Word = plain_word):
        self.n_promise = self.n_exact = 0
        rows = []
        for (router, rule, risk), g in v.groupby(["router", "rule", "risk"], sort=False):
            row = {"router": label(router), "rule (its risk)": f"{rule} ({risk})"}
            for r in g.itertuples():
                d = deployed.get((router, rule, round(float(r.alpha), 12)))
                table = "" if d is None else (f"; deployed table: {d.n_above}/{d.n_lam} λ above α, largest "
                                              f"{ci_cell(d.max, d.max_lower, d.max_upper, '.4f')}")
                exact = (f"; mean vs its exact expectation: {word(r.exact_verdict)} ({r.exact_n_differ}/"
                         f"{r.exact_n_cells})" if isinstance(r.exact_verdict, str) else "")
                self.n_promise += isinstance(r.verdict, str)
                self.n_exact += isinstance(r.exact_verdict, str)
                row[f"α = {lam_cell(r.alpha)}"] = (
                    f"{word(r.verdict)} ({r.n_violated}/{r.n_cells}, worst λ = {num(r.worst_lam, '.3g')}: "
                    f"{num(r.mean, '.4f')} ± {num(r.se, '.4f')}){exact}{table}" if isinstance(r.verdict, str)
                    else f"— ({r.note}){exact}{table}")
            rows.append(row)
        self.set_records(rows, fill="— (not certified at this α)")
