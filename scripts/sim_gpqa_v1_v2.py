"""Label structure of simulated-irt-v1 vs -v2 on the default Qwen3 pool, GPQA main (448 questions), seeds 0-4.

Run: PYTHONPATH=. python scripts/sim_gpqa_v1_v2.py  (embeds the 448 questions once, cached under <home>/cache/simcheck).
Prints mean / min / max over seeds of accuracy, pairwise correlations, P(device right | largest wrong), solvable share.
"""
from cr2.core.env import apply_offline_env

apply_offline_env()  # offline, and OMP_WAIT_POLICY before torch loads
import numpy as np, pandas as pd
from cr2.config import load_config
from cr2.inputs.embed import router_texts
from cr2.labels.simulator import load_accuracy_targets, simulate_labels
from cr2.labels.simulator_v2 import simulate_labels_v2
from cr2.studies.simcheck import label_structure
cfg = load_config()
q = pd.read_parquet("data/benchmarks/gpqa.parquet")
q = q[q["subset"] == "main"].reset_index(drop=True)
texts = router_texts(list(q["question"]), [list(c) for c in q["choices"]])
from cr2_tasks.simcheck import cached_embeddings
from cr2_warehouse.db import default_home
emb = cached_embeddings(texts, cfg, default_home())
targets = load_accuracy_targets(cfg.data_path / cfg.labels.simulator.accuracy_file, cfg.models)
ids = q["query_id"].to_numpy(); b = np.full(len(q), "gpqa"); s = q["subset"].to_numpy()
out = {}
for seed in range(5):
    spec = cfg.labels.simulator.model_copy(update={"seed": seed})
    y1 = simulate_labels(ids, b, s, texts, cfg.models, targets, spec).correct
    y2 = simulate_labels_v2(ids, b, s, emb, np.full(len(q), 4), cfg.models, targets, spec, spec.shape).correct
    for name, y in (("v1", y1), ("v2", y2)):
        for r in label_structure(y, cfg.model_ids, cfg.ref_model_id):
            out.setdefault((name, r["statistic"], r["model"], r["other"]), []).append(r["value"])
for k in sorted(out):
    if k[1] in ("solvable_share", "correlation", "p_device_given_largest_wrong", "accuracy"):
        print(k, round(float(np.mean(out[k])), 3), round(float(np.min(out[k])), 3), round(float(np.max(out[k])), 3))
