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
    p over its family — cr2_cli.resultsdoc.risks.vs_alpha): the three risks, local accuracy and rate, cost,
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
