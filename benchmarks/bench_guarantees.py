"""Guarantees users can choose: does each calibration rule keep its promise, and what does it cost?

Over --resplits random calibration/test re-splits (default 500) of one exchangeable pool:
  crc       mean test false-acceptance risk per (λ, α) ≤ α                      (worst cell's z = (mean − α)/SE)
  ltt       share of re-splits where ANY λ of the grid has risk > α ≤ δ = 0.1     (per α; pool risk)
  mondrian  per-benchmark mean test risk per (λ, α) ≤ α                         (worst cell's z)
  target    share of re-splits whose chosen (λ, α) misses the target ≤ δ = 0.1    (accuracy target and budget)
with Monte-Carlo standard errors, and each rule's mean local rate, cost and accuracy beside plain CRC.

Pool: with --warehouse HOME, the val + test queries of that warehouse's deployed gate and teacher
(calibration size = the val size), exactly what `cr2 guarantees` checks; without it, a synthetic pool
with the default labels' structure and the default val + test sizes (cr2/evaluation/synthetic.py).
The summary is written to results/guarantees.json; with --warehouse every record (one per check × rule × λ
× α × group) is also stored in `guarantees` (views v_guarantees, v_guarantee_price; shown in the report).
"""
from __future__ import annotations

import math
import time

from _common import figure, limit_threads, parse_args, target, write_result

N_POOL_SYNTH = 4_300  # the default val + test size (10 % + 10 % of 21,501 queries)
N_CALIB_SYNTH = 2_150  # the default val size
ALPHAS = [0.002, 0.005, 0.01, 0.02, 0.05]
DELTA = 0.1
Z_CELLS = 3.4  # one-sided z at family level 0.05 over 140 (λ, α) cells (Bonferroni)


def _pool(args):
    import numpy as np

    if args.warehouse:
        from cr2.config import load_config
        from cr2_tasks.guarantees import validity_pool

        p = validity_pool(load_config(args.config), args.warehouse)
        return p, "warehouse val+test", p["label_source"]
    from cr2.config import load_config
    from cr2.evaluation.synthetic import make_pool

    lams = np.asarray(load_config().grids.lam.values())
    pool = make_pool(N_POOL_SYNTH, lams, seed=args.seed)
    from cr2.method.utility import risk_label

    realised = {k: risk_label(k, lams, correct=pool.correct, decision_cost=pool.cost)
                for k in ("oracle-disagreement", "avoidable-error")}  # the rules on the real labels
    return ({"score": pool.score, "risk": pool.risk, "proba": pool.proba, "cost": pool.cost, "correct": pool.correct,
             "groups": pool.benchmark, "lams": lams, "alphas": np.asarray(ALPHAS), "n_val": N_CALIB_SYNTH,
             "group_by": "benchmark", "realised": realised}, "synthetic (cr2/evaluation/synthetic.py)", "synthetic-irt-like")


def main() -> None:
    args = parse_args(__doc__, warehouse={"default": None, "help": "HOME of a warehouse with a deployed gate (val+test)"},
                      config={"default": None, "help": "config file (with --warehouse)"},
                      resplits={"type": int, "default": None, "help": "re-splits (default 500; --quick 50)"},
                      seed={"type": int, "default": 0, "help": "seed of the pool (synthetic) and the re-splits"})
    limit_threads(1)
    import numpy as np
    import pandas as pd

    from cr2.evaluation.validity import validity_verdict

    from cr2.evaluation.guarantees import ResplitSpec, resplit_validity
    from cr2_tasks.guarantees import default_targets

    B = args.resplits or (50 if args.quick else 500)
    pool, source, label_source = _pool(args)
    tgt_acc, budget = default_targets(pool["correct"], pool["cost"])
    spec = ResplitSpec(n_calib=int(pool["n_val"]), n_resplits=B, delta=DELTA, target_accuracy=tgt_acc, budget=budget,
                       group_by=pool["group_by"])
    t0 = time.perf_counter()
    records = resplit_validity(pool["score"], pool["risk"], pool["proba"], pool["cost"], pool["correct"], pool["groups"],
                               pool["lams"], pool["alphas"], spec, np.random.default_rng(args.seed + 1),
                               progress=lambda b: print(f"  re-split {b}/{B}", flush=True) if b % 50 == 0 else None,
                               realised=pool.get("realised"))
    secs = time.perf_counter() - t0
    df = pd.DataFrame(records)
    full = not args.quick

    def z_worst(check: str) -> tuple[float, dict]:
        d = df[df.check_name == check]
        z = ((d.value - d.bound) / d.se).where(d.se > 0, np.where(d.value > d.bound, np.inf, -np.inf))
        row = d.loc[z.idxmax()]
        return float(z.max()), {"lam": float(row.lam), "alpha": float(row.alpha),
                                "group": row.group if isinstance(row.group, str) else "all",
                                "mean": round(float(row.value), 6), "se": round(float(row.se), 6)}

    figs, tables, notes = [], [], []
    z_crc, at_crc = z_worst("crc_mean_risk")
    figs.append(figure("crc_worst_z", f"crc: worst (mean risk − α)/SE over {len(pool['lams'])}×{len(ALPHAS)} (λ, α)",
                       [z_crc], "SE", target("<=", Z_CELLS), full))
    z_m, at_m = z_worst("mondrian_mean_risk")
    figs.append(figure("mondrian_worst_z", "mondrian: worst per-group (mean risk − α)/SE", [z_m], "SE",
                       target("<=", Z_CELLS), full))
    ltt = df[(df.check_name == "ltt_any_violation") & (df.metric == "share_any_lam_over_alpha_pool")]
    figs.append(figure("ltt_worst_share", "ltt: worst share of re-splits with any λ over α (over α)",
                       [float(ltt.value.max())], "", target("<=", DELTA), full))
    miss = df[(df.check_name == "target_miss") & (df.metric == "share_missing_target_pool")].set_index("rule")
    for rule in miss.index:
        figs.append(figure(f"{rule}_miss", f"{rule}: share of re-splits missing the target", [float(miss.loc[rule, 'value'])],
                           "", target("<=", DELTA), full))
    figs.append(figure("seconds_per_resplit", "seconds per re-split (all rules)", [secs / B], "s"))

    def fmt_se(v: float, se: float | None) -> str:
        return f"{v:.4f} ± {se:.4f}" if se is not None and not (isinstance(se, float) and math.isnan(se)) else f"{v:.4f}"

    rows = []
    for check, metric in (("ltt_any_violation", "share_any_lam_over_alpha_pool"),
                          ("ltt_any_violation", "share_any_lam_over_alpha_test"),
                          ("crc_any_violation", "share_any_lam_over_alpha_pool")):
        d = df[(df.check_name == check) & (df.metric == metric)]
        for r in d.itertuples():
            rows.append([r.rule, metric, f"{r.alpha:g}", fmt_se(r.value, r.se), f"≤ {r.bound:g}" if pd.notna(r.bound) else "—"])
    tables.append({"title": "Simultaneous over λ: share of re-splits where some λ has risk > α (± MC SE)",
                   "columns": ["rule", "measured on", "α", "share", "promise"], "rows": rows})
    crc = df[df.check_name == "crc_mean_risk"]
    rows = []
    for rule in sorted(set(crc.rule)):  # crc, and crc-oracle / crc-avoidable on their own labels
        for a in ALPHAS:
            d = crc[(crc.alpha == a) & (crc.rule == rule)]
            w = d.loc[d.value.idxmax()]
            v = validity_verdict(d.value.to_numpy(float), d.se.to_numpy(float), a)
            rows.append([rule, f"{a:g}", f"{w.lam:g}", fmt_se(w.value, w.se),
                         f"{v.verdict} ({v.n_violated}/{v.n_cells}, Holm p = {v.p_holm:.2g})"])
    tables.append({"title": "crc rules: mean test risk (each rule's own risk) per λ ≤ α — worst λ per α (± MC SE) "
                            "and the validity verdict (one-sided test per λ, Holm over the λ cells; docs/guarantees.md)",
                   "columns": ["rule", "α", "worst λ", "mean risk", "verdict (cells over α / tested)"], "rows": rows})
    rows = []
    for check in ("mondrian_mean_risk", "crc_group_mean_risk"):
        d = df[df.check_name == check]
        for (g, a), dd in d.groupby(["group", "alpha"]):
            w = dd.loc[dd.value.idxmax()]
            rows.append([w.rule, g, f"{a:g}", f"{w.lam:g}", fmt_se(w.value, w.se)])
    tables.append({"title": "Per benchmark: worst mean test risk over λ (± MC SE); Mondrian's verdict is over every "
                            "group × λ (next table), plain crc promises no per-group bound",
                   "columns": ["rule", "group", "α", "worst λ", "mean risk"], "rows": rows})
    mond = df[df.check_name == "mondrian_mean_risk"]
    rows = []
    for a, dd in mond.groupby("alpha"):
        v = validity_verdict(dd.value.to_numpy(float), dd.se.to_numpy(float), a)
        rows.append(["mondrian-crc", f"{a:g}", f"{v.verdict} ({v.n_violated}/{v.n_cells}, Holm p = {v.p_holm:.2g})"])
    tables.append({"title": "Mondrian: E[risk | group] ≤ α at every group × λ — the validity verdict (Holm over the cells)",
                   "columns": ["rule", "α", "verdict (cells over α / tested)"], "rows": rows})
    rows = []
    for r in df[df.check_name == "target_miss"].itertuples():
        rows.append([r.rule, f"{r.target:g}", r.metric, fmt_se(r.value, r.se)])
    tables.append({"title": f"Target mode (δ = {DELTA}): share of re-splits missing / refusing (± MC SE)",
                   "columns": ["mode", "target", "metric", "share"], "rows": rows})
    price = df[df.check_name == "price"]
    price = price.assign(lam=price.lam.fillna(-1.0), target=price.target.fillna(-1.0))  # pivot keys must not be NaN
    piv = price.pivot_table(index=["rule", "lam", "target"], columns="metric", values="value").reset_index()
    pse = price.pivot_table(index=["rule", "lam", "target"], columns="metric", values="se").reset_index()
    rows = [[r.rule, "" if r.lam < 0 else f"{r.lam:g}", "" if r.target < 0 else f"{r.target:g}",
             fmt_se(r.local_rate, e.local_rate), fmt_se(r.mean_cost, e.mean_cost), fmt_se(r.accuracy, e.accuracy)]
            for r, e in zip(piv.itertuples(), pse.itertuples())]
    tables.append({"title": f"Price: mean test local rate, cost and accuracy at α = {spec.price_alpha:g} (targets: the chosen point; "
                            "*-crc-oracle: the CRC point picked on the test set itself)",
                   "columns": ["rule", "λ", "target", "local rate ± SE", "mean cost ± SE", "accuracy ± SE"], "rows": rows})
    notes += [f"pool: {source}, {len(pool['groups'])} queries, calibration {spec.n_calib}, {B} re-splits, δ = {DELTA}; "
              f"targets fixed from the pool: accuracy {tgt_acc:g}, budget {budget:g}",
              f"worst crc cell: {at_crc}; worst mondrian cell: {at_m}",
              "ltt/target shares are against the pool's exact risk (the distribution the calibration set is drawn "
              "from in a re-split design); the *_test rows also count test-set noise and overstate misses"]
    if args.warehouse:
        import uuid

        from cr2_tasks.guarantees import write_guarantees

        out = write_guarantees(args.warehouse, records, uuid.uuid4().hex[:12], source, label_source)
        notes.append(f"stored in {args.warehouse}: guarantees run_id {out['run_id']}")
    write_result("guarantees", {"title": "validity and price of crc / ltt / Mondrian / target mode", "quick": args.quick,
                                "source": source, "n_resplits": B, "figures": figs, "tables": tables, "notes": notes})


if __name__ == "__main__":
    main()
