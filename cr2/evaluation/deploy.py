"""Which certified router to deploy: a decision rule stated before the data (docs/guarantees.md, "Which router to
deploy").

Inputs: the pairwise mean savings of every certified router against every other at one rule and the default α
(cr2.evaluation.equal_risk, question "pairwise": both orders of every pair, Holm over that family) and each router's
FLOPs per decision (cr2.method.complexity's convention). The rule:

1. a router is *beaten* where some other router is detectably cheaper than it (its Holm-corrected verdict
   "cheaper" against it, or the router's own verdict "dearer" against that one);
2. among the routers no other router beats, recommend the simplest — the fewest FLOPs per decision (ties: by name);
3. beside it, the largest 95 % upper bound over the more complex routers of what each could save over it (its
   saving's interval, one comparison at a time): the most a user could give up by keeping the simpler router,
   which is the number to weigh against the complexity.

"Not beaten" is absence of evidence, never equivalence: the upper bound says how large a saving the data cannot
rule out. No router is favoured by name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from cr2.core.errors import InvalidValueError
from cr2.evaluation.statistics import CHEAPER, DEARER


@dataclass(frozen=True)
class DeployDecision:
    """The decision of one (scenario, rule, α)."""

    rule: str
    alpha: float
    recommended: str  # the simplest router no other router is detectably cheaper than
    flops: Mapping[str, int]  # FLOPs per decision of every router compared
    beaten_by: Mapping[str, tuple[str, ...]]  # router → the routers detectably cheaper than it
    bound_router: str | None  # the more complex router whose saving over `recommended` has the largest upper bound
    bound_estimate: float | None  # its mean saving over `recommended`, %
    bound_upper: float | None  # the 95 % upper bound of that saving, %; None: no router is more complex
    n_tests: int  # the pairwise family's size (Holm)

    @property
    def unbeaten(self) -> tuple[str, ...]:
        return tuple(r for r in sorted(self.flops) if not self.beaten_by.get(r))


def _router(method: str) -> str:
    return method.split("@", 1)[0]


def deploy_decision(rows: Sequence[Mapping[str, Any]], flops: Mapping[str, int], rule: str, alpha: float
                    ) -> DeployDecision:
    """The decision from the pairwise mean-saving rows (question 'pairwise', metric mean_saving_pct) of `rule` at
    `alpha`; `flops`: FLOPs per decision of every router (a router without a count cannot be ranked: an error)."""
    mine = [r for r in rows if r.get("question") == "pairwise" and r.get("rule") == rule
            and r.get("alpha") is not None and abs(float(r["alpha"]) - float(alpha)) < 1e-12]
    if not mine:
        raise InvalidValueError(f"no pairwise comparison of certified routers under {rule} at α = {alpha:g}")
    routers = sorted({_router(r["method_a"]) for r in mine} | {_router(r["method_b"]) for r in mine})
    missing = [r for r in routers if r not in flops]
    if missing:
        raise InvalidValueError(f"no FLOPs per decision for {missing}: the deploy rule ranks routers by complexity")
    beaten: dict[str, set[str]] = {r: set() for r in routers}
    saving: dict[tuple[str, str], Mapping[str, Any]] = {}
    for r in mine:
        a, b = _router(r["method_a"]), _router(r["method_b"])
        saving[(a, b)] = r
        if r.get("verdict") == CHEAPER:
            beaten[b].add(a)
        elif r.get("verdict") == DEARER:
            beaten[a].add(b)
    unbeaten = [r for r in routers if not beaten[r]]
    if not unbeaten:  # a cycle of detected differences cannot happen with consistent savings; say so if it does
        raise InvalidValueError(f"every router is beaten by another under {rule} at α = {alpha:g}")
    pick = min(unbeaten, key=lambda r: (int(flops[r]), r))
    bound = None
    for other in routers:
        row = saving.get((other, pick))
        if other == pick or int(flops[other]) <= int(flops[pick]) or row is None:
            continue
        upper = row.get("upper")
        if upper is not None and np.isfinite(upper) and (bound is None or float(upper) > bound[2]):
            bound = (other, float(row["estimate"]), float(upper))
    return DeployDecision(rule, float(alpha), pick, {r: int(flops[r]) for r in routers},
                          {r: tuple(sorted(v)) for r, v in beaten.items()},
                          *(bound if bound is not None else (None, None, None)), len(mine))


__all__ = ["DeployDecision", "deploy_decision"]
