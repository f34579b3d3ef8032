"""Certified KNN's device export: its size in bytes and its per-query lookup time, beside CR²'s fused gate.

At the default train size (17,200 synthetic train queries, cr2/evaluation/synthetic.py, k chosen on dev as in `cr2 run`), a KNN
router is certified under crc-avoidable on a synthetic val split over the default λ grid × certify.alphas and
exported with cr2.deploy.certified_export.export_certified, the function behind `cr2 export-gate --router knn --rule crc-avoidable`.
Figures, batch 1, one thread:

  - export size: every file of the export (router.npz — the index: train embeddings [n_train, 384] float32 and
    their correctness [n_train, M] —, thresholds.json, costs.json) and their total, bytes;
  - certified decision: cr2.deploy.certified_export.DeviceCertifiedRouter.decide(e, ĉ, λ, α) on the loaded export (neighbour
    search, p̂, margin, τ lookup and comparison, best edge model), µs per query;
  - KNN p̂ alone: the neighbour search and mean (KNNRouter.predict_proba), µs per query;
  - CR²'s gate beside it, measured in the same process and interleaved: FusedGate (float32) score_one(e) ≥ τ*
    — the decision docs/benchmarks.md quotes at ≈ 20 µs. Its cost does not depend on the weights, so an untrained
    MarginGate of the default shape stands in for a trained one.

    .venv/bin/python benchmarks/bench_certified_export.py [--quick] [--repeats N]
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from _common import figure, limit_threads, parse_args, write_result, timed_us

LAM = 1.0  # on the default λ grid (grids.lam.extra)
ALPHA = 0.01


def main() -> None:
    args = parse_args(__doc__, n_train={"type": int, "default": 17_200, "help": "KNN train-set size (default: the "
                                                                                "default set's train + dev)"})
    limit_threads(1)
    import numpy as np

    from cr2.routers.certify import CertifiedRouter
    from cr2.config import load_config
    from cr2.deploy.deployment import Deployment, decision_cost_inputs
    from cr2.deploy.certified_export import export_certified
    from cr2.method.fused_gate import FusedGate
    from cr2.method.gate import MarginGate
    from cr2.routers import get_router
    from cr2.deploy.certified_export import DeviceCertifiedRouter
    from cr2.evaluation.synthetic import make_routing_set

    cfg = load_config()
    n_train = 2_000 if args.quick else args.n_train
    repeats = args.repeats or (2 if args.quick else 5)
    per_repeat = 200 if args.quick else 1_000
    train, dev, val = (make_routing_set(n_train, seed=1), make_routing_set(max(n_train // 10, 200), seed=2),
                       make_routing_set(max(n_train // 8, 500), seed=3))
    probe = make_routing_set(per_repeat, seed=4)
    knn = get_router("knn").fit(train, dev)
    certified = CertifiedRouter(knn, "knn", "crc-avoidable", alpha=ALPHA)
    table = certified.calibrate(val, cfg.grids.lam.values(), cfg.certify.alphas, dist_id="bench",
                                label_source="synthetic")
    # the cost inputs a real export ships (pool, T0/E0, L̂_out, state distribution, cost-model sections)
    stand_in = Deployment(version=0, table=table, trained={}, split=None, load_sets=None,
                          cost_scales={"t0_s": 1.0, "e0_j": 1.0, "output_token_estimates": None},
                          state_spec=cfg.channel.distribution.model_dump(mode="json"))
    costs = decision_cost_inputs(cfg, stand_in)
    out_dir = Path(tempfile.mkdtemp(prefix="cr2-bench-certified-")) / "export"
    manifest = export_certified(certified, out_dir, costs)
    device = DeviceCertifiedRouter.load(out_dir)

    fused = FusedGate.from_gate(MarginGate().eval(), LAM, np.float32)
    tau_gate = 0.5
    emb32 = [np.ascontiguousarray(probe.embedding[i], dtype=np.float32) for i in range(per_repeat)]
    emb_rows = [probe.embedding[i : i + 1] for i in range(per_repeat)]
    cost_rows = [probe.decision_cost[i : i + 1] for i in range(per_repeat)]
    from cr2.routers.certify import request_set

    batches = [request_set(emb_rows[i], cost_rows[i], knn.model_ids_) for i in range(per_repeat)]
    calls = {
        "certified": lambda i: device.decide(emb_rows[i], cost_rows[i], LAM, ALPHA),
        "knn_p_hat": lambda i: knn.predict_proba(batches[i]),
        "cr2_fused_gate": lambda i: fused.score_one(emb32[i]) >= tau_gate,
    }
    samples = {k: [] for k in calls}
    for _ in range(repeats):  # interleaved: load drift hits every path alike
        for key, fn in calls.items():
            samples[key].append(float(np.median(timed_us(fn, per_repeat))))

    files = manifest["files"]
    figures = [
        figure("export.bytes_total", "certified KNN export, total size", [manifest["bytes_total"]], "bytes"),
        *[figure(f"export.{name}.bytes", f"certified KNN export: {name}", [f["bytes"]], "bytes")
          for name, f in files.items()],
        figure("certified.p50_us", "certified KNN decision (DeviceCertifiedRouter.decide), batch 1, median", samples["certified"], "µs"),
        figure("knn_p_hat.p50_us", "KNN p̂ alone (neighbour search + mean), batch 1, median", samples["knn_p_hat"], "µs"),
        figure("cr2_fused_gate.p50_us", "CR² fused float32 gate score ≥ τ*, batch 1, median", samples["cr2_fused_gate"], "µs"),
        figure("certified_over_gate", "certified KNN decision ÷ CR² gate decision",
               [a / b for a, b in zip(samples["certified"], samples["cr2_fused_gate"])], "×"),
    ]
    write_result("certified_export", {
        "title": "Certified KNN device export: size and per-query lookup beside CR²'s gate",
        "quick": args.quick, "figures": figures,
        "details": {"n_train": n_train, "k": int(knn.k_), "n_models": len(knn.model_ids_), "n_lam": len(table.lams),
                    "n_alpha": len(table.alphas), "queries_per_repeat": per_repeat, "threads": 1,
                    "parity": manifest["parity"],
                    "command": "benchmarks/bench_certified_export.py" + (" --quick" if args.quick else "")},
        "notes": ["Each sample is the median µs per query over queries_per_repeat batch-1 calls; the paths are "
                  "interleaved per repeat. Synthetic embeddings (cr2/evaluation/synthetic.py) at the default train size: the "
                  "index size and the search cost depend on n_train and d = 384, not on the data."],
    })


if __name__ == "__main__":
    main()
