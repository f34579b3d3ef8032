"""docs/results.md, "The router study": the pre-registered candidates (configs/studies/router-study.yaml) against
certified KNN at equal risk on every measured pool and scenario, from the stored `cr2 study routers` rows."""
from __future__ import annotations

from cr2_cli.resultsdoc.core import Doc, label_kind

KEY = "pools"
STUDY = "configs/studies/router-study.yaml"
COMMAND = "cr2 study routers"


def render(doc: Doc) -> str:
    from cr2.studies.routers import POOLS, SCENARIOS, study_id, study_scenarios
    from cr2.report.router_study import router_study_markdown
    from cr2_warehouse.router_study import study_results, study_validity
    from cr2_warehouse.pools import pool_study_runs

    head = "## The router study: can a router beat certified KNN at equal risk?\n"
    if not doc.has(KEY):
        return head + "\n" + doc.missing(KEY, "no pool sweep, so no router study")
    homes = {k: str(doc.homes[k]) for k in study_scenarios() if k in doc.homes}  # the scenarios a study may name
    study, rows, summary, flops = study_results(str(doc.repo / STUDY), str(doc.homes[KEY]), homes, shipped=False)
    if rows["estimate"].notna().sum() == 0:
        return head + "\n" + doc.missing(KEY, f"no router study is stored (`{COMMAND}`)")
    sources, run_ids = {}, {}
    for kind, key in [(POOLS, KEY), *[(SCENARIOS, s) for s in study.scenarios]]:
        if doc.has(key):
            with doc.warehouse(key) as wh:
                runs = pool_study_runs(wh, study_id(study, kind))
            for r in runs.itertuples(index=False):
                sources[r.pool] = label_kind(r.label_source)
                run_ids[r.pool] = r.run_id
    pools = rows[rows["kind"] == POOLS]
    n_pools = pools["unit"].nunique()
    winners = [c for c, ok in zip(summary["candidate"], summary["success"]) if ok]
    cands = "; ".join(f"**{c.name}** — {c.what.rstrip('.')}" for c in study.candidates)
    text = [
        head,
        f"Pre-registered in `{STUDY}` (content hash `{study.digest}`, part of the study ids "
        f"`{study_id(study, POOLS)}` and `{study_id(study, SCENARIOS)}`), committed before any candidate existed; "
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
        router_study_markdown(rows, summary, flops, (POOLS, SCENARIOS), doc.word,
                              study_validity(str(doc.repo / STUDY), homes, shipped=False)),
    ]
    return "\n".join(text) + "\n"
