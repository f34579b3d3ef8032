"""docs/results.md, "The router study": the pre-registered candidates (configs/studies/router-study.yaml) against
certified KNN at equal risk on every measured pool and scenario, from the stored `cr2 study routers` rows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from cr2.report.resultsdoc.words import PLAIN, Words, missing
from cr2.report.router_study import router_study_markdown

KEY = "pools"
STUDY = "configs/studies/router-study.yaml"
COMMAND = "cr2 study routers"
HEAD = "## The router study: can a router beat certified KNN at equal risk?\n"


@dataclass(frozen=True)
class RouterStudyData:
    """The stored router study (study None: no pools warehouse) as cr2_warehouse.router_study reads it."""

    study: Any  # the pre-registered study (cr2.studies.routers): candidates, rule, α key, reference, criterion
    rows: pd.DataFrame | None = None  # every unit's comparison
    summary: pd.DataFrame | None = None  # per candidate, the criterion's outcome
    flops: Any = None
    validity: pd.DataFrame | None = None  # each scenario's validity over re-splits
    kinds: tuple = ()  # cr2.studies.routers (POOLS, SCENARIOS)
    study_ids: tuple = ()  # the study id of each kind
    sources: dict | None = None  # unit → label kind (SIMULATED / MEASURED)
    run_ids: dict | None = None  # unit → its evaluation run


def render(data: RouterStudyData, words: Words = PLAIN) -> str:
    head, study, rows, summary = HEAD, data.study, data.rows, data.summary
    if study is None:
        return head + "\n" + missing(KEY, "no pool sweep, so no router study")
    if rows["estimate"].notna().sum() == 0:
        return head + "\n" + missing(KEY, f"no router study is stored (`{COMMAND}`)")
    sources, run_ids, (pools_kind, _) = data.sources, data.run_ids, data.kinds
    pools = rows[rows["kind"] == pools_kind]
    n_pools = pools["unit"].nunique()
    winners = [c for c, ok in zip(summary["candidate"], summary["success"]) if ok]
    cands = "; ".join(f"**{c.name}** — {c.what.rstrip('.')}" for c in study.candidates)
    text = [
        head,
        f"Pre-registered in `{STUDY}` (content hash `{study.digest}`, part of the study ids "
        f"`{data.study_ids[0]}` and `{data.study_ids[1]}`), committed before any candidate existed; "
        f"`{COMMAND}` runs every unit in a copy of its warehouse and prints these tables from the stored rows. "
        f"Candidates: {cands}.",
        "",
        f"Each candidate is certified by the same machinery as every router (`<router>@{study.rule}`, α = "
        f"`{study.alpha_key}` of each unit's config) and compared with `{study.other}`: mean fixed-accuracy saving "
        "over the validation target grid (a missed target costs the cheapest Always-model that reaches it), paired "
        "bootstrap over the test queries, interval and p from the same resamples. Family: per candidate, its "
        f"{n_pools} pool tests, Holm-adjusted; per candidate, its scenario tests, a family of their own. A word needs "
        "the Holm p < 0.05. Success (pre-registered): detectably \"cheaper\" on at least half of the pools "
        f"({study.min_cheaper(max(n_pools, 1))} of {n_pools}), \"dearer\" on none. Labels: pools "
        f"{', '.join(sorted({v for u, v in sources.items() if u in set(pools['unit'])})) or '—'}; scenarios "
        + ", ".join(f"{s} {sources.get(s, '—')}" for s in study.scenarios)
        + ". The oracle headroom is the full-information router's mean saving against uncertified KNN (the most any "
          "router could save); a share is the candidate's saving divided by it. The intervals hold the training, the "
          "calibration and the split fixed (test-query noise only). The last table is each scenario's validity over "
          f"the certify stage's re-splits under {study.rule} at the unit's α, for every candidate and the reference "
          "(one verdict per router, Holm over its λ cells; the pools are run without re-splits).",
        "",
        "Evaluation run per unit (in its home under `studies/routers/`): "
        + ", ".join(f"{u} `{r}`" for u, r in sorted(run_ids.items())) + ".",
        "",
        f"Candidates meeting the success criterion: {', '.join(winners) if winners else 'none'} "
        f"({len(winners)} of {len(summary)}).",
        "",
        router_study_markdown(rows, summary, data.flops, data.kinds, words.word, data.validity),
    ]
    return "\n".join(text) + "\n"
