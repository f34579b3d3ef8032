"""docs/results.md, "Simulator check (sim-to-real)": the stored sim-to-real runs — `cr2 simcheck` on MMLU-Pro, and
`cr2 study simcheck` on a pool the simulator was not fitted on (out of pool) and on the ZeroEval ladders (out of
sample, routing included). Every number is read from the view v_simcheck; "met" / "missed" are recomputed on read
(cr2.studies.simcheck.with_met) from the stored measured value, the simulated mean over seeds and the sim-to-real
tolerance (docs/labels.md); the tables are cr2.report.simcheck objects."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.report.resultsdoc.words import PLAIN, Words, label_kind, missing
from cr2.report.simcheck import V1, V2, SimcheckRouterSigns, SimcheckStructure, SimcheckSummary, pick, span
from cr2.routers import routers_tagged

PHI_POOL = "phi-3-mini-4k-instruct"
LADDERS = {"zeroeval-gemma": "gemma", "zeroeval-qwen": "qwen"}
def compared() -> tuple[str, ...]:
    """CR² and the paper's baselines compared with KNN (the catalogue's tags, read when a page renders)."""
    return routers_tagged("paper", "compared")
LAMS = HEADLINE_LAMS
DUMP = ("python -c \"from cr2.config import load_config; from cr2.studies.pools import load_pool_rule, select_pools, "
        "pool_overrides; from cr2_flows.pools import pool_config; r = load_pool_rule('configs/pools/mmlu-pro.yaml'); "
        "p = next(p for p in select_pools(r) if p.pool_id == '{pool}'); print(pool_config(load_config("
        "'configs/mmlu-pro-pools-sample.yaml'), pool_overrides(p, r)).to_yaml())\" > var/pool-configs/{pool}.yaml")
MMLU_COMMAND = "cr2 simcheck --home var/mmlu-pro"
PHI_COMMAND = (f"cr2 study simcheck -c var/pool-configs/{PHI_POOL}.yaml --home var/mmlu-pro-sample/studies/pools/"
               f"{PHI_POOL} --no-routing")


def ladder_command(name: str) -> str:
    return f"cr2 study simcheck -c configs/zeroeval-{name}.yaml --home var/zeroeval-{name}"


@dataclass(frozen=True)
class SimRun:
    """A stored sim-to-real run (run None: none stored) with its v_simcheck rows and "met"
    (cr2.studies.simcheck.with_met), and what the section computes from them in the library."""

    run: pd.Series | None
    rows: pd.DataFrame | None = None
    signs: dict | None = None  # MMLU-Pro: source → cr2.studies.simcheck.sign_counts
    savings: pd.DataFrame | None = None  # a ladder: cr2.studies.simcheck.router_savings of V2
    study: str | None = None  # out of pool: the pool study whose pool warehouse holds the run
    found: bool = True  # out of pool: the pool's warehouse is there


@dataclass(frozen=True)
class SimcheckData:
    mmlu: SimRun | None  # the newest `cr2 simcheck` run with routing and a fresh fit (None: no warehouse)
    out_of_pool: SimRun | None  # the newest run on PHI_POOL (None: no pools warehouse)
    ladders: dict  # ladder key (LADDERS) → SimRun with routing, or None without its warehouse


# ---------------------------------------------------------------- MMLU-Pro
def _mmlu_part(sim: SimRun | None) -> str:
    head = ["### On MMLU-Pro (`cr2 simcheck`)", ""]
    if sim is None:
        return "\n".join(head + [missing("mmlu-pro", "the MMLU-Pro sim-to-real run")])
    if sim.run is None:
        return "\n".join(head + [missing("mmlu-pro", f"no `cr2 simcheck` run is stored — run `{MMLU_COMMAND}`")])
    run, rows = sim.run, sim.rows
    pool = json.loads(run.pool)
    models = list(pool)
    seeds = {s: int(pick(rows, s, "solvable_share")["n_seeds"].max()) for s in (V2, V1)
             if not pick(rows, s, "solvable_share").empty}
    rseeds = {s: int(pick(rows, s, "accuracy", "routing")["n_seeds"].max()) for s in (V2, V1)
              if not pick(rows, s, "accuracy", "routing").empty}
    out = head + [
        f"Run `{run.run_id}` (`{MMLU_COMMAND}`; docs/labels.md, \"The sim-to-real check\") on a stable "
        f"{int(run.n_questions):,}-question subsample of MMLU-Pro, measured pool "
        f"{' / '.join(pool.values())} (device first, m_ref last): {label_kind('measured')} labels beside "
        f"{label_kind(V2)} ones from {V2} and {V1}, matched to the measured accuracy of every (model, category); "
        f"simulator seeds for the label structure: {', '.join(f'{s} {n}' for s, n in seeds.items())}; for routing: "
        f"{', '.join(f'{s} {n}' for s, n in rseeds.items())}. Numbers from the view v_simcheck; \"met\" where the "
        "simulated mean over seeds is within the sim-to-real tolerance (docs/labels.md) of the measured value.", ""]
    out.append(SimcheckSummary(rows, models, sim.signs, LAMS).markdown()
               .rstrip("\n"))
    targets = {s: pd.concat([pick(rows, s, st, "structure") for st in
                             ("solvable_share", "accuracy", "correlation", "p_device_given_largest_wrong")])["met"]
               for s in (V2, V1)}
    out += ["", "Label-structure targets met (every tolerance row above): "
            + "; ".join(f"{s} {int(t.sum())} of {int(t.notna().sum())}" for s, t in targets.items()) + ". "
            + "The sign target compares one measured draw with the simulator's mean over seeds at every (router, "
            "target) point; where the measured savings are near 0, their sign is itself noise. CR²'s test risk is "
            "the false-acceptance rate at the run config's grids.default_alpha, on every test query. The full-set "
            "check "
            "(`cr2 simcheck --full`, all 12,032 questions) is not stored.", ""]
    return "\n".join(out)


# ---------------------------------------------------------------- out of pool / out of sample
def _out_of_pool_part(sim: SimRun | None) -> str:
    head = ["### The simulator on a pool it was not fitted on (out of pool)", ""]
    if sim is None:
        return "\n".join(head + [missing("pools", "the out-of-pool check")])
    if not sim.found:
        return "\n".join(head + [missing("pools", f"the {PHI_POOL} pool's warehouse of the pool study")])
    if sim.run is None:
        return "\n".join(head + [missing("pools", f"no sim-to-real run on the {PHI_POOL} pool — run `{PHI_COMMAND}`")])
    run, rows, sid = sim.run, sim.rows, sim.study
    names = list(json.loads(run.pool).values())
    seeds = int(pick(rows, V2, "solvable_share")["n_seeds"].max())
    scope = "routing included" if run.has_routing else "label structure and the label diagnostics only, no routing"
    out = head + [
        f"Run `{run.run_id}` (`{PHI_COMMAND}`, {scope}), on the pool's warehouse of study `{sid}`: {V2} with the "
        f"shape it fitted on the measured MMLU-Pro pool, run on the sweep's {PHI_POOL} pool ({' / '.join(names)}; "
        f"{int(run.n_questions):,} questions, {seeds} simulator seeds). Most of the pool's models are new to the "
        "simulator, but the questions are the ones its shape was fitted on: out of pool, NOT out of sample. "
        f"{label_kind('measured')} labels beside {label_kind(V2)} ones.", "", SimcheckStructure(rows).markdown().rstrip("\n"), ""]
    r2 = pick(rows, V2, "knn_auc_correct")
    if len(r2):
        out += [f"What this adds to the label structure: on measured labels a 20-NN on the MiniLM embedding ranks a "
                f"model's right and wrong answers with AUC {span(r2['measured'])}; on v2 labels with "
                f"{span(r2['mean'])} (mean over seeds; no interval is stored for these differences). In v2 the only "
                "text-predictable part is the shared item difficulty and per-model deviations are noise "
                "(docs/labels.md); a router trained on v2 labels can learn from the text only what that structure "
                "puts there.", ""]
    return "\n".join(out)


def _ladder_part(ladders: dict) -> str:
    out = ["### The simulator out of sample: the ZeroEval ladders", "",
           f"{V2} keeps the shape it fitted on MMLU-Pro (configs/labels/simulated-irt-v2.yaml) and takes each "
           "model's measured accuracy per benchmark as its marginal; everything else is out of sample: new models, "
           "new benchmarks, generative answers. With routing, every learned router and CR² is fitted on the measured "
           "labels and on each simulator seed's labels and swept over simcheck's own λ grid at the default α — a "
           "protocol coarser than the pipeline's, so its savings are not the ZeroEval section's.", ""]
    found = {}
    for key, name in LADDERS.items():
        sim = ladders[key]
        if sim is None:
            out.append(missing(key, f"the {name} ladder's sim-to-real run"))
        elif sim.run is None:
            out.append(missing(key, f"no sim-to-real run with routing on the {name} ladder — run "
                                    f"`{ladder_command(name)}`"))
        else:
            found[name] = sim
    for name, sim in found.items():
        run, rows = sim.run, sim.rows
        seeds = int(pick(rows, V2, "solvable_share")["n_seeds"].max())
        rseeds = int(pick(rows, V2, "accuracy", "routing")["n_seeds"].max())
        out += [f"**{name} ladder** — run `{run.run_id}` (`{ladder_command(name)}`; {int(run.n_questions):,} "
                f"queries; {seeds} simulator seeds for the structure, {rseeds} for routing; "
                f"{label_kind('measured')} vs {label_kind(V2)} labels):", "",
                SimcheckStructure(rows, with_v1=False).markdown().rstrip("\n"), ""]
    if found:
        out += ["Routing out of sample: at how many fixed-accuracy targets each router's saving vs KNN has the "
                "measured sign (the routing target of the sim-to-real check), and the mean saving vs KNN over those "
                "targets. The means are point estimates over simcheck's λ grid: simcheck stores no interval for "
                "them, so they carry no comparison — the per-ladder comparisons with intervals are the ZeroEval "
                "section's.", ""]
        table = SimcheckRouterSigns({n: sim.savings for n, sim in found.items()}, compared())
        out += [table.markdown().rstrip("\n"), ""]
    return "\n".join(out)


TITLE = "## Simulator check (sim-to-real)"


def render(data: SimcheckData, words: Words = PLAIN) -> str:
    out = [TITLE, "",
           "Does the label simulator behave like measured labels? Each check puts MEASURED correctness labels beside "
           "SIMULATED ones on the same questions (docs/labels.md, \"The sim-to-real check\"): the label structure "
           "against the sim-to-real tolerances (share some model solves ± 0.02, each pairwise correlation ± 0.05, "
           "P(device right | largest wrong) ± 0.03, accuracy ± 0.005), the label diagnostics "
           "(cr2.studies.diagnostics), and routing: whether each router's fixed-accuracy saving vs KNN has the "
           "measured sign. Simulated numbers are means over simulator seeds with their 5–95 % band; they are "
           "Monte-Carlo spread of the simulator, not intervals of the measured values.", "",
           "Commands that rebuild what it reads:", "", "```bash", MMLU_COMMAND,
           DUMP.format(pool=PHI_POOL), PHI_COMMAND, *(ladder_command(n) for n in LADDERS.values()),
           "make results-doc", "```", "",
           _mmlu_part(data.mmlu), "",
           "The default Qwen3 scenario is run under simulated-irt-v2 only; the label-level comparison of v1 and v2 "
           "on GPQA is `python scripts/sim_gpqa_v1_v2.py` (it embeds the questions, so it is not part of this "
           "page).", "", _out_of_pool_part(data.out_of_pool), "", _ladder_part(data.ladders)]
    return "\n".join(out)
