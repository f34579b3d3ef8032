"""`cr2 study simcheck` on a measured warehouse that is not MMLU-Pro: a ZeroEval Qwen2.5 slice."""
from __future__ import annotations

import pandas as pd
import pytest

from cr2.config import REPO_ROOT

QWEN = REPO_ROOT / "configs" / "zeroeval-qwen.yaml"
SLICE = """extends: {base}
data_dir: {data}
teacher: {{epochs: 2}}
gate: {{epochs: 2}}
splits: {{train: 0.6, val: 0.1, test: 0.3, dev_fraction: 0.1, seed: 0, min_stratum: 5}}
baselines: {{params: {{mlp: {{epochs: 2}}, embedllm: {{epochs: 2}}, llmrank: {{epochs: 2, n_clusters: 8}}, knn: {{k_grid: [3]}}}}}}
simcheck: {{structure_seeds: 2, routing_seeds: 1, sources: [simulated-irt-v2]}}
"""


def _slice(root, per_benchmark: int):
    """data_dir with the first `per_benchmark` items of CRUXEval and MATH-L5 and the full ZeroEval outputs."""
    import shutil

    (root / "benchmarks").mkdir(parents=True)
    (root / "measured" / "zeroeval").mkdir(parents=True)
    for name in ("cruxeval", "math_l5"):
        pd.read_parquet(REPO_ROOT / "data" / "benchmarks" / f"{name}.parquet").head(per_benchmark).to_parquet(
            root / "benchmarks" / f"{name}.parquet", index=False)
    src = REPO_ROOT / "data" / "measured" / "zeroeval" / "zeroeval_outputs.parquet"
    shutil.copy(src, root / "measured" / "zeroeval" / "zeroeval_outputs.parquet")
    return root


@pytest.mark.flow
def test_simcheck_on_a_zeroeval_warehouse_compares_measured_and_simulated(prefect_harness, tmp_path):
    from cr2_flows.ingest import ingest
    from cr2_flows.pools import study_simcheck_flow
    from cr2_flows.prepare import prepare
    from cr2.config import load_config
    from cr2_warehouse.db import Warehouse

    data = _slice(tmp_path / "data", per_benchmark=40)
    cfg_path = tmp_path / "qwen.yaml"
    cfg_path.write_text(SLICE.format(base=QWEN, data=data))
    cfg = load_config(cfg_path)
    home = tmp_path / "qwen"
    ingest(cfg, home)
    prepare(cfg, home)
    out = study_simcheck_flow(config_path=str(cfg_path), home=str(home), routing=True)
    assert out["n_questions"] == 80 and out["benchmarks"] == ["cruxeval", "math_l5"]
    with Warehouse(home, read_only=True) as wh:
        v = wh.df("SELECT * FROM v_simcheck WHERE run_id = ?", [out["run_id"]])
        meas = wh.df("SELECT * FROM simcheck WHERE run_id = ? AND source = 'measured'", [out["run_id"]])
    assert set(v["source"]) == {"simulated-irt-v2"} and set(v["section"]) == {"structure", "diagnostics", "routing"}
    # v2 is matched to the measured accuracy of every (model, benchmark): overall accuracy agrees closely
    acc = v[(v["statistic"] == "accuracy") & (v["section"] == "structure")]
    assert len(acc) == 4 and (acc["diff"].abs() < 0.02).all()
    # the measured diagnostics are the labels' own: P(device right | largest wrong) from the warehouse's labels
    with Warehouse(home, read_only=True) as wh:
        y = wh.df("SELECT query_id, model_id, correct FROM labels").pivot(index="query_id", columns="model_id",
                                                                          values="correct").astype(bool)
    wrong = ~y["qwen2.5-72b-instruct"]
    expected = y.loc[wrong, "qwen2.5-3b-instruct"].mean()
    got = meas[(meas["section"] == "diagnostics") & (meas["statistic"] == "p_device_right_given_largest_wrong")]
    assert got["value"].iloc[0] == pytest.approx(expected)
    assert {"knn_auc_correct", "knn_auc_disagree", "phi"} <= set(meas["statistic"])
