"""docs/results.md, "Simulator check (sim-to-real)": the stored sim-to-real runs — `cr2 simcheck` on MMLU-Pro, and
`cr2 study simcheck` on a pool the simulator was not fitted on (out of pool) and on the ZeroEval ladders (out of
sample, routing included). Every number is read from the view v_simcheck; "met" / "missed" are recomputed here
from the stored measured value, the simulated mean over seeds and the sim-to-real tolerance (docs/labels.md)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.report.markdown import text_table
from cr2.routers import routers_tagged
from cr2_cli.resultsdoc.core import Doc, label_kind
from cr2_cli.resultsdoc.pools import num, span

V2, V1 = "simulated-irt-v2", "simulated-irt-v1"
PHI_POOL = "phi-3-mini-4k-instruct"
LADDERS = {"zeroeval-gemma": "gemma", "zeroeval-qwen": "qwen"}
ROUTERS = routers_tagged("paper", "compared")  # CR² and the paper's baselines compared with KNN
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


# ---------------------------------------------------------------- what a run's rows say (pure, frames in)
def met(rows: pd.DataFrame) -> pd.Series:
    """Per row: |simulated mean − measured| ≤ tolerance (NaN where no tolerance is set)."""
    ok = (rows["mean"] - rows["measured"]).abs() <= rows["tolerance"] + 1e-12
    return ok.where(rows["tolerance"].notna())


def pick(rows: pd.DataFrame, source: str, statistic: str, section: str | None = None) -> pd.DataFrame:
    r = rows[(rows["source"] == source) & (rows["statistic"] == statistic)]
    return r if section is None else r[r["section"] == section]


def met_word(ok: pd.Series) -> str:
    """'met' / 'missed' for one target, 'k of n' for several ('–' without a tolerance)."""
    ok = ok.dropna()
    if ok.empty:
        return "–"
    if len(ok) == 1:
        return "met" if bool(ok.iloc[0]) else "missed"
    return f"{int(ok.sum())} of {len(ok)}"


def sign_counts(rows: pd.DataFrame, source: str) -> tuple[int, int]:
    """(router, target) points whose simulated mean saving vs KNN has the measured sign, and all points."""
    s = pick(rows, source, "saving_vs_knn_pct")
    return int((np.sign(s["mean"]) == np.sign(s["measured"])).sum()), len(s)


def router_savings(rows: pd.DataFrame, source: str) -> pd.DataFrame:
    """Per router: targets compared, targets with the measured sign, mean measured and mean simulated saving (%)."""
    s = pick(rows, source, "saving_vs_knn_pct").copy()
    s["same"] = np.sign(s["mean"]) == np.sign(s["measured"])
    return s.groupby("model").agg(n=("same", "size"), same=("same", "sum"), measured=("measured", "mean"),
                                  simulated=("mean", "mean"))


def _corr_cells(rows: pd.DataFrame, source: str, statistic: str = "correlation") -> tuple[str, str, str]:
    c = pick(rows, source, statistic)
    if c.empty:
        return "–", "–", "–"
    d = (c["mean"] - c["measured"]).abs()
    worst = c.loc[d.idxmax()]
    return (span(c["measured"], ".3f"),
            f"{span(c['mean'], '.3f')} (max \\|diff\\| {d.max():.3f}, {worst.model}–{worst.other})",
            met_word(met(c)))


def _one(rows: pd.DataFrame, source: str, statistic: str, model: str | None = None, section: str | None = None
         ) -> pd.Series | None:
    r = pick(rows, source, statistic, section)
    if model is not None:
        r = r[r["model"] == model]
    return None if r.empty else r.iloc[0]


# ---------------------------------------------------------------- MMLU-Pro
def _mmlu_part(doc: Doc) -> str:
    from cr2_warehouse.simcheck import simcheck_rows, simcheck_runs

    head = ["### On MMLU-Pro (`cr2 simcheck`)", ""]
    if not doc.has("mmlu-pro"):
        return "\n".join(head + [doc.missing("mmlu-pro", "the MMLU-Pro sim-to-real run")])
    with doc.warehouse("mmlu-pro") as wh:
        runs = simcheck_runs(wh)
        runs = runs[~runs["run_id"].str.startswith("simcheck-w-") & runs["has_routing"] & runs["has_fresh_fit"]]
        if runs.empty:
            return "\n".join(head + [doc.missing("mmlu-pro", f"no `cr2 simcheck` run is stored — run "
                                                              f"`{MMLU_COMMAND}`")])
        run = runs.iloc[0]
        rows = simcheck_rows(wh, run.run_id)
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
    table = []

    def row(label: str, stat: str, spec: str = ".3f") -> None:
        a, b = _one(rows, V2, stat, section="structure"), _one(rows, V1, stat, section="structure")
        if a is None:
            return
        table.append([label, num(a.measured, spec), num(a["mean"], spec),
                      num(b["mean"], spec) if b is not None else "–", f"± {num(a.tolerance, spec)}",
                      met_word(met(a.to_frame().T)), met_word(met(b.to_frame().T)) if b is not None else "–"])

    def values(v) -> str:
        return " / ".join(num(x, ".3f") for x in v)

    row("share some model solves", "solvable_share")
    acc = {s: pick(rows, s, "accuracy", "structure").set_index("model").reindex(models) for s in (V2, V1)}
    if not acc[V2].empty:
        table.append(["per-model accuracy", values(acc[V2]["measured"]), values(acc[V2]["mean"]),
                      values(acc[V1]["mean"]), "± 0.005", met_word(met(acc[V2])), met_word(met(acc[V1]))])
    m2, s2, w2 = _corr_cells(rows, V2)
    _, s1, w1 = _corr_cells(rows, V1)
    table.append(["pairwise correctness correlations", m2, s2, s1, "each ± 0.05", w2, w1])
    a = _one(rows, V2, "p_device_given_largest_wrong")
    if a is not None:
        row(f"P({a.model} right \\| {a.other} wrong)", "p_device_given_largest_wrong")
        big = {s: _one(rows, s, "accuracy_on_solvable", a.other) for s in (V2, V1)}
        table.append([f"accuracy of {a.other} on solvable questions", num(big[V2].measured, ".3f"),
                      num(big[V2]["mean"], ".3f"), num(big[V1]["mean"], ".3f") if big[V1] is not None else "–",
                      "", "", ""])
    same = {s: sign_counts(rows, s) for s in (V2, V1)}
    table.append(["fixed-accuracy saving vs KNN with the measured sign, (router, target) points", "",
                  f"{same[V2][0]} of {same[V2][1]}", f"{same[V1][0]} of {same[V1][1]}", "every point",
                  *("met" if same[s][0] == same[s][1] else "missed" for s in (V2, V1))])
    for stat, label in (("accuracy", "CR² accuracy (solvable test)"), ("risk", "CR² test risk")):
        cells = {}
        for s in (V2, V1):
            r = pick(rows, s, stat, "routing")
            r = r[(r["model"] == "cr2") & r["lam"].isin(LAMS)].set_index("lam").reindex(list(LAMS))
            cells[s] = r
        if cells[V2]["measured"].notna().any():
            table.append([f"{label} at λ = {' / '.join(f'{v:g}' for v in LAMS)}", values(cells[V2]["measured"]),
                          values(cells[V2]["mean"]), values(cells[V1]["mean"]), "", "", ""])
    out.append(text_table(["statistic", "measured", "v2 (mean over seeds)", "v1 (mean over seeds)", "tolerance", "v2",
                           "v1"], table, tight_empty=True).rstrip("\n"))
    targets = {s: met(pd.concat([pick(rows, s, st, "structure") for st in
                                 ("solvable_share", "accuracy", "correlation", "p_device_given_largest_wrong")]))
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
def _structure_table(rows: pd.DataFrame, with_v1: bool = True) -> str:
    """The structure and diagnostics of one `cr2 study simcheck` run: measured, v2 [5–95 %], tolerance, met."""
    head = ["statistic", "measured", "v2 mean [5–95 % over seeds]", "tolerance", "v2"]
    head += ["v1 mean", "v1"] if with_v1 else []
    table = []

    def add(label: str, r2: pd.DataFrame, r1: pd.DataFrame, sim: str, meas: str, tol: str) -> None:
        v1 = [span(r1["mean"], ".3f"), met_word(met(r1))] if with_v1 else []
        table.append([label, meas, sim, tol, met_word(met(r2)), *v1])

    r2, r1 = pick(rows, V2, "accuracy", "structure"), pick(rows, V1, "accuracy", "structure")
    add("accuracy per model", r2, r1, span(r2["mean"]), span(r2["measured"]), "± 0.005")
    r2, r1 = pick(rows, V2, "solvable_share"), pick(rows, V1, "solvable_share")
    if len(r2):
        a = r2.iloc[0]
        add("share some model solves", r2, r1, f"{a['mean']:.3f} [{a.q05:.3f}, {a.q95:.3f}]", f"{a.measured:.3f}",
            "± 0.02")
    m, s, _ = _corr_cells(rows, V2)
    add("pairwise correctness correlation", pick(rows, V2, "correlation"), pick(rows, V1, "correlation"), s, m,
        "each ± 0.05")
    r2, r1 = pick(rows, V2, "p_device_given_largest_wrong"), pick(rows, V1, "p_device_given_largest_wrong")
    if len(r2):
        a = r2.iloc[0]
        add(f"P({a.model} right \\| {a.other} wrong)", r2, r1, f"{a['mean']:.3f} [{a.q05:.3f}, {a.q95:.3f}]",
            f"{a.measured:.3f}", "± 0.03")
    for stat, label in (("knn_auc_correct", "20-NN AUC of correctness from e(x), per model"),
                        ("knn_auc_disagree", "20-NN AUC of a pair's disagreement")):
        r2, r1 = pick(rows, V2, stat), pick(rows, V1, stat)
        if len(r2):
            d = r2["mean"] - r2["measured"]
            add(label, r2, r1, f"{span(r2['mean'])} (simulated − measured: {span(d)})", span(r2["measured"]), "—")
    big = _one(rows, V2, "p_device_given_largest_wrong")
    if big is not None:
        pair = lambda r: r[(r["model"] == big.model) & (r["other"] == big.other)]  # noqa: E731
        r2, r1 = pair(pick(rows, V2, "knn_auc_disagree")), pair(pick(rows, V1, "knn_auc_disagree"))
        if len(r2):
            a = r2.iloc[0]
            add(f"20-NN AUC of {big.model} ≠ {big.other}", r2, r1, f"{a['mean']:.3f} [{a.q05:.3f}, {a.q95:.3f}]",
                f"{a.measured:.3f}", "—")
    return text_table(head, table).rstrip("\n")


def _latest_w_run(wh, routing: bool | None) -> tuple[pd.Series | None, pd.DataFrame]:
    from cr2_warehouse.simcheck import simcheck_rows, simcheck_runs

    runs = simcheck_runs(wh)
    runs = runs[runs["run_id"].str.startswith("simcheck-w-")]
    if routing is not None:
        runs = runs[runs["has_routing"] == routing]
    if runs.empty:
        return None, pd.DataFrame()
    return runs.iloc[0], simcheck_rows(wh, runs.iloc[0].run_id)


def _out_of_pool_part(doc: Doc) -> str:
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.pools import newest_study, pool_study_runs

    head = ["### The simulator on a pool it was not fitted on (out of pool)", ""]
    if not doc.has("pools"):
        return "\n".join(head + [doc.missing("pools", "the out-of-pool check")])
    with doc.warehouse("pools") as wh:
        sid = newest_study(wh, "pools")
        runs = pool_study_runs(wh, sid) if sid else pd.DataFrame()
    hit = runs[runs["pool"] == PHI_POOL] if len(runs) else runs
    home = doc.homes["pools"] / hit["home"].iloc[0] if len(hit) else None
    if home is None or not (home / "cr2.duckdb").is_file():
        return "\n".join(head + [doc.missing("pools", f"the {PHI_POOL} pool's warehouse of the pool study")])
    with Warehouse(home, read_only=True) as wh:
        run, rows = _latest_w_run(wh, None)
    if run is None:
        return "\n".join(head + [doc.missing("pools", f"no sim-to-real run on the {PHI_POOL} pool — run "
                                                      f"`{PHI_COMMAND}`")])
    names = list(json.loads(run.pool).values())
    seeds = int(pick(rows, V2, "solvable_share")["n_seeds"].max())
    scope = "routing included" if run.has_routing else "label structure and the label diagnostics only, no routing"
    out = head + [
        f"Run `{run.run_id}` (`{PHI_COMMAND}`, {scope}), on the pool's warehouse of study `{sid}`: {V2} with the "
        f"shape it fitted on the measured MMLU-Pro pool, run on the sweep's {PHI_POOL} pool ({' / '.join(names)}; "
        f"{int(run.n_questions):,} questions, {seeds} simulator seeds). Most of the pool's models are new to the "
        "simulator, but the questions are the ones its shape was fitted on: out of pool, NOT out of sample. "
        f"{label_kind('measured')} labels beside {label_kind(V2)} ones.", "", _structure_table(rows), ""]
    r2 = pick(rows, V2, "knn_auc_correct")
    if len(r2):
        out += [f"What this adds to the label structure: on measured labels a 20-NN on the MiniLM embedding ranks a "
                f"model's right and wrong answers with AUC {span(r2['measured'])}; on v2 labels with "
                f"{span(r2['mean'])} (mean over seeds; no interval is stored for these differences). In v2 the only "
                "text-predictable part is the shared item difficulty and per-model deviations are noise "
                "(docs/labels.md); a router trained on v2 labels can learn from the text only what that structure "
                "puts there.", ""]
    return "\n".join(out)


def _ladder_part(doc: Doc) -> str:
    out = ["### The simulator out of sample: the ZeroEval ladders", "",
           f"{V2} keeps the shape it fitted on MMLU-Pro (configs/labels/simulated-irt-v2.yaml) and takes each "
           "model's measured accuracy per benchmark as its marginal; everything else is out of sample: new models, "
           "new benchmarks, generative answers. With routing, every learned router and CR² is fitted on the measured "
           "labels and on each simulator seed's labels and swept over simcheck's own λ grid at the default α — a "
           "protocol coarser than the pipeline's, so its savings are not the ZeroEval section's.", ""]
    found = {}
    for key, name in LADDERS.items():
        if not doc.has(key):
            out.append(doc.missing(key, f"the {name} ladder's sim-to-real run"))
            continue
        with doc.warehouse(key) as wh:
            run, rows = _latest_w_run(wh, True)
        if run is None:
            out.append(doc.missing(key, f"no sim-to-real run with routing on the {name} ladder — run "
                                        f"`{ladder_command(name)}`"))
            continue
        found[name] = (run, rows)
    for name, (run, rows) in found.items():
        seeds = int(pick(rows, V2, "solvable_share")["n_seeds"].max())
        rseeds = int(pick(rows, V2, "accuracy", "routing")["n_seeds"].max())
        out += [f"**{name} ladder** — run `{run.run_id}` (`{ladder_command(name)}`; {int(run.n_questions):,} "
                f"queries; {seeds} simulator seeds for the structure, {rseeds} for routing; "
                f"{label_kind('measured')} vs {label_kind(V2)} labels):", "",
                _structure_table(rows, with_v1=False), ""]
    if found:
        out += ["Routing out of sample: at how many fixed-accuracy targets each router's saving vs KNN has the "
                "measured sign (the routing target of the sim-to-real check), and the mean saving vs KNN over those "
                "targets. The means are point estimates over simcheck's λ grid: simcheck stores no interval for "
                "them, so they carry no comparison — the per-ladder comparisons with intervals are the ZeroEval "
                "section's.", ""]
        names = list(found)
        head = ["router"] + [c for n in names for c in (f"{n}: targets with the measured sign",
                                                        f"{n}: mean saving vs KNN, measured / v2 (%)")]
        table = []
        tabs = {n: router_savings(rows, V2) for n, (_, rows) in found.items()}
        for r in ROUTERS:
            cells = [r]
            for n in names:
                t = tabs[n]
                if r in t.index:
                    x = t.loc[r]
                    cells += [f"{int(x.same)} of {int(x.n)}", f"{num(x.measured, '+.1f')} / {num(x.simulated, '+.1f')}"]
                else:
                    cells += ["–", "–"]
            table.append(cells)
        out += [text_table(head, table).rstrip("\n"), ""]
    return "\n".join(out)


def render(doc: Doc) -> str:
    out = ["## Simulator check (sim-to-real)", "",
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
           _mmlu_part(doc), "",
           "The default Qwen3 scenario is run under simulated-irt-v2 only; the label-level comparison of v1 and v2 "
           "on GPQA is `python scripts/sim_gpqa_v1_v2.py` (it embeds the questions, so it is not part of this "
           "page).", "", _out_of_pool_part(doc), "", _ladder_part(doc)]
    return "\n".join(out)
