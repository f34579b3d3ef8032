"""What α bounds and what users feel: CR²'s teacher-referenced risk beside the realised risks, per rule.

For a warehouse's deployed gate and teacher (newest threshold table; nothing is retrained), on its fixed val/test
split: CR² under the deployed rule (`cr2`, normally the paper's crc) and under every compared rule of
cr2.evaluation.sweep.COMPARED_RULES (ltt, crc-oracle, crc-avoidable, ltt-oracle, ltt-avoidable; calibrated on val), at
one α and a few λ. Per cell: teacher disagreement (what crc's α bounds), oracle disagreement on the real test
labels, avoidable error — each over every test query, with a 95 % paired-bootstrap interval over test queries
(cr2.evaluation.statistics; test-query noise only, gate and calibration held fixed) — and local accuracy, local rate, mean
cost and accuracy over the solvable test queries (paper §VII-A), with the paired interval of each rule's local
rate and cost minus crc's.

This is cr2.evaluation.sweep.evaluate_cr2, the code `cr2 run` evaluates with, run in memory on the stored
artefacts, so the table is what the next `cr2 run` writes to operating_points / v_realised_risk.
Writes results/realised_risk_<label source>.json and prints a markdown table. With --store it also runs the
evaluate and report tasks of `cr2 run` on the stored gate, teacher, thresholds and baselines (no retraining:
a code change otherwise invalidates the training cache) and writes the evaluation run and the report into the
warehouse, so `cr2 results --home HOME` and HOME/report show the new rows.
"""
from __future__ import annotations

import time

from _common import limit_threads, parse_args, write_result

from cr2.config import HEADLINE_LAMS
from cr2.labels import is_simulated


def main() -> None:
    args = parse_args(__doc__, warehouse={"required": True, "help": "HOME of a warehouse with a deployed gate"},
                      config={"default": None, "help": "config file of that warehouse"},
                      alpha={"type": float, "default": 0.01, "help": "α of the table"},
                      lams={"type": float, "nargs": "+", "default": list(HEADLINE_LAMS), "help": "λ values of the table"},
                      bootstrap={"type": int, "default": 1000, "help": "bootstrap resamples of the test queries"},
                      seed={"type": int, "default": 0, "help": "seed of the bootstrap resamples"},
                      store={"action": "store_true", "help": "also write a full evaluation run + report to the warehouse"})
    limit_threads(1)
    import numpy as np
    import pandas as pd

    from cr2.evaluation.statistics import percentile_interval, resample_indices, resampled_means
    from cr2.config import load_config
    from cr2.evaluation.sweep import COMPARED_RULES, Evaluation, evaluate_cr2
    from cr2.evaluation.metrics import evaluable_mask, local_accuracy_terms, risk_per_query
    from cr2.report.markdown import markdown_table
    from cr2_cli.online import load_deployed_router
    from cr2_tasks.inputs import routing_args
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.routing_data import load_routing_sets

    t0 = time.perf_counter()
    cfg = load_config(args.config)
    router, version = load_deployed_router(cfg, args.warehouse)
    table = router.threshold_table_
    with Warehouse(args.warehouse, read_only=True) as wh:
        sets = load_routing_sets(wh, tuple(m.id for m in cfg.models), **routing_args(cfg),
                                 decision_cost=cfg.routing.decision_cost)
    val, test = sets["val"], sets["test"]
    keep = evaluable_mask(test) if cfg.evaluation.exclude_unsolvable else np.ones(len(test), dtype=bool)
    ev = Evaluation(run_id="bench", test=test, proba=router.proba(test.embedding), keep=keep)
    evaluate_cr2(ev, router, val, default_alpha=args.alpha, n_resplits=0, rng=np.random.default_rng(cfg.seed),
                 ltt_delta=cfg.calibration.delta or cfg.calibration.target_delta)
    secs_eval = time.perf_counter() - t0
    idx = resample_indices(len(test), args.bootstrap, np.random.default_rng(args.seed))  # shared: paired
    rows_keep = np.flatnonzero(keep)

    lams = [table.lams[table.lam_index(v)] for v in args.lams]  # the grid's own λ (an off-grid λ is an error)
    decisions = {(m, lam): d for m, lam, a, d in ev.decisions
                 if a is not None and abs(a - args.alpha) < 1e-12 and lam in lams
                 and (m == "cr2" or m.startswith("cr2-") and m[4:] in COMPARED_RULES)}
    out_rows = []
    for lam_g in lams:
        base = decisions[("cr2", lam_g)]
        cost_all = np.asarray(test.cost, dtype=np.float64)
        rows = np.arange(len(test))

        def solvable_parts(dec) -> tuple[np.ndarray, np.ndarray]:
            local = np.where(keep, (dec.chosen == 0).astype(np.float64), 0.0)
            cost = np.where(keep, cost_all[rows, dec.chosen], 0.0)
            return local, cost

        b_local, b_cost = solvable_parts(base)
        for method in ["cr2", *[m for m, lm in decisions if m != "cr2" and lm == lam_g]]:
            dec = decisions[(method, lam_g)]
            per = risk_per_query(test, dec, lam_g, ev.proba)  # over every test row
            cell = {"rule": table.rule if method == "cr2" else method[4:], "method": method, "lam": lam_g,
                    "alpha": args.alpha}
            for name, values in per.items():
                est = float(values.mean())
                iv = percentile_interval(resampled_means(values.astype(np.float64), idx), est)
                cell[name] = [round(est, 5), round(iv.lower, 5), round(iv.upper, 5)]
            la = local_accuracy_terms(test.subset(rows_keep), _sub(dec, rows_keep))
            cell["local_accuracy"] = round(float(la[:, 0].sum() / la[:, 1].sum()), 4) if la[:, 1].sum() else None
            local, cost = solvable_parts(dec)
            n_keep = keep.sum()
            cell["local_rate"] = round(float(local.sum() / n_keep), 4)
            cell["cost"] = round(float(cost.sum() / n_keep), 4)
            cell["accuracy"] = round(float(np.asarray(test.correct)[rows, dec.chosen][keep].mean()), 4)
            if method != "cr2":  # paired difference vs the deployed rule over the solvable rows of each resample
                for name, mine, theirs in (("local_rate", local, b_local), ("cost", cost, b_cost)):
                    d = mine - theirs  # 0 on unsolvable rows
                    m = resampled_means(np.stack([d, keep.astype(np.float64)], axis=1), idx)  # [B, 2]
                    iv = percentile_interval(m[:, 0] / m[:, 1], float(d.sum() / n_keep))
                    cell[f"{name}_vs_deployed"] = [round(iv.estimate, 4), round(iv.lower, 4), round(iv.upper, 4)]
            out_rows.append(cell)
    secs = time.perf_counter() - t0

    def ci(v) -> str:
        return f"{v[0]:.4f} [{v[1]:.4f}, {v[2]:.4f}]"

    label = table.label_source
    simulated = is_simulated(label)
    print(f"\n{'SIMULATED' if simulated else 'MEASURED'} labels ({label}); thresholds v{version} (rule {table.rule}), "
          f"N_val = {len(val):,}, N_test = {len(test):,} ({int(keep.sum()):,} solvable), α = {args.alpha:g}; "
          f"risks over all test queries with 95 % paired-bootstrap intervals ({args.bootstrap} resamples)\n")
    head = ["λ", "rule", "teacher disagreement", "oracle disagreement (real labels)", "avoidable error", "local acc.",
            "local rate", "Δ local vs crc", "cost", "Δ cost vs crc", "accuracy"]
    print(markdown_table(pd.DataFrame([
        [f"{c['lam']:g}", str(c["rule"]), ci(c["risk"]), ci(c["oracle_risk"]), ci(c["avoidable_risk"]),
         str(c["local_accuracy"]) if c["local_accuracy"] is not None else "–", f"{c['local_rate']:.4f}",
         ci(c["local_rate_vs_deployed"]) if "local_rate_vs_deployed" in c else "—", f"{c['cost']:.4f}",
         ci(c["cost_vs_deployed"]) if "cost_vs_deployed" in c else "—", f"{c['accuracy']:.4f}"]
        for c in out_rows], columns=head, dtype=object)), end="")
    stored = _store(cfg, args.warehouse, table, int(version)) if args.store else None
    write_result(f"realised_risk_{label}", {"stored_eval_run": stored,"warehouse": str(args.warehouse), "label_source": label,
                                            "labels_simulated": simulated, "thresholds_version": int(version),
                                            "deployed_rule": table.rule, "alpha": args.alpha, "n_val": len(val),
                                            "n_test": len(test), "n_solvable": int(keep.sum()),
                                            "bootstrap": args.bootstrap, "seconds_evaluate": round(secs_eval, 1),
                                            "seconds_total": round(secs, 1), "rows": out_rows})


def _store(cfg, home: str, table, version: int) -> dict:
    """Run the evaluate and report tasks on the warehouse's stored artefacts; return the evaluation summary."""
    import time

    import pandas as pd

    from cr2_tasks.baselines import baseline_names
    from cr2_tasks.evaluate import evaluate
    from cr2_tasks.report import build_report
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import deployed_artifacts

    t0 = time.perf_counter()
    with Warehouse(home, read_only=True) as wh:
        trained = deployed_artifacts(wh, table.gate_fingerprint)
        arts = wh.df("SELECT kind, fingerprint, path, created_at FROM artifacts WHERE kind LIKE 'router:%' "
                     "AND label_source = ?", [table.label_source])
        counts = wh.df("SELECT benchmark, count(*) AS n FROM queries GROUP BY benchmark")
    arts = arts.sort_values("created_at").drop_duplicates("kind", keep="last")
    baselines = {k[7:]: {"fingerprint": f, "path": p} for k, f, p in zip(arts["kind"], arts["fingerprint"], arts["path"])
                 if k[7:] in baseline_names(cfg)}
    calibrated, fitted = {"version": version}, {"routers": baselines}
    evaluated = evaluate.fn(cfg, home, trained, calibrated, fitted)
    rep = build_report.fn(cfg, home, evaluated, {b: int(n) for b, n in zip(counts["benchmark"], counts["n"])}, trained,
                          fitted)
    print(f"stored evaluation run {evaluated['run_id']} and the report {rep['path']} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return {**evaluated, "report": rep["path"], "seconds": round(time.perf_counter() - t0, 1)}


def _sub(dec, idx):
    from cr2.evaluation.sweep import subset_decisions

    return subset_decisions(dec, idx)


if __name__ == "__main__":
    main()
