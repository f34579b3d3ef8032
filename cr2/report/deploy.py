"""The deploy decision as table rows (cr2.evaluation.deploy's rule): one formatting for `cr2 results`, the HTML report
and docs/results.md."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from cr2.report.tables import ROUTER_NAMES
from cr2.report.validity import risk_of_rule


def _name(router: str) -> str:
    return ROUTER_NAMES.get(router, router)


def decisions(rows: Sequence[Mapping[str, Any]], flops: Mapping[str, int], alpha: float) -> list[tuple[str, Any]]:
    """(rule, DeployDecision or the reason there is none) per rule of the pairwise mean-saving rows at `alpha`."""
    from cr2.core.errors import InvalidValueError
    from cr2.evaluation.deploy import deploy_decision

    rules = list(dict.fromkeys(r["rule"] for r in rows if r.get("question") == "pairwise" and r.get("rule")))
    out: list[tuple[str, Any]] = []
    for rule in rules:
        try:
            out.append((rule, deploy_decision(rows, flops, rule, alpha)))
        except InvalidValueError as e:
            out.append((rule, str(e)))
    return out


def deploy_rows(found: Sequence[tuple[str, Any]], scenario: str | None = None) -> list[dict[str, str]]:
    """One row per rule: the router to deploy with its FLOPs, the routers detectably beaten (and by which), and the
    largest saving a more complex router could still have over it (estimate, 95 % upper bound)."""
    from cr2.method.complexity import format_flops

    rows = []
    for rule, d in found:
        head = {**({"scenario": scenario} if scenario else {}),
                "risk bounded at α": f"{risk_of_rule(rule) or rule} ({rule})"}
        if isinstance(d, str):
            rows.append({**head, "deploy (simplest not beaten)": f"– ({d})"})
            continue
        beaten = [f"{_name(r)} (by {', '.join(_name(x) for x in by)})" for r, by in d.beaten_by.items() if by]
        bound = ("no router is more complex" if d.bound_router is None else
                 f"{_name(d.bound_router)}: {d.bound_estimate:+.1f} %, at most {d.bound_upper:+.1f} %")
        rows.append({**head, "deploy (simplest not beaten)":
                     f"{_name(d.recommended)}@{rule} ({format_flops(d.flops[d.recommended])} FLOPs)",
                     "detectably beaten (Holm over the pairs)": "; ".join(beaten) or "none",
                     "most a more complex router could save over it (estimate, 95 % upper bound)": bound,
                     "pairwise tests": str(d.n_tests)})
    return rows


RULE_TEXT = ("The rule, fixed before the data (docs/guarantees.md, \"Which router to deploy\"): compare every certified "
             "router with every other at the same rule and α (mean saving over the validation grid, Holm over the "
             "ordered pairs of the scenario and rule); among the routers against which no other gets the word \"cheaper\", deploy "
             "the simplest (fewest FLOPs per decision, cr2.method.complexity). Not being beaten is absence of evidence, "
             "not equivalence: the last column is the largest saving the data cannot rule out for a more complex "
             "router — the number to weigh against its complexity.")
