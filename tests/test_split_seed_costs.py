"""Costs say which splits they were estimated from: the pre-execution ĉ (cost_est_norm) uses the train split's
mean output length per (benchmark, model), so a second split seed in the same warehouse gets its own cost rows,
and the real `cr2 run` with seed 1 after seed 0 gives exactly the numbers of a fresh warehouse with seed 1."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import write_small_benchmarks
from warehouse.db import Warehouse

SMALL = """extends: default
data_dir: {data}
teacher: {{epochs: 2}}
gate: {{epochs: 2}}
grids: {{lam: {{min: 0.1, max: 20.0, n_log: 4, extra: [0.0, 2.0]}}}}
evaluation: {{n_resplits: 10}}
baselines: {{params: {{mlp: {{epochs: 2}}, embedllm: {{epochs: 2}}, llmrank: {{epochs: 2}}, knn: {{k_grid: [3]}}}}}}
splits: {{seed: {seed}}}
"""


def _costs(home, seed: int) -> pd.DataFrame:
    with Warehouse(home, read_only=True) as wh:
        return wh.df("SELECT * EXCLUDE (split_seed) FROM costs WHERE split_seed = ? ORDER BY query_id, draw, model_id",
                     [seed])


def test_two_seeds_keep_their_own_cost_estimates(small_config, tmp_path):
    from tasks.ingest import ingest_queries
    from tasks.prepare import (assign_splits_task, compute_costs_task, embed_queries, sample_states_task,
                               simulate_labels_task)

    def prepare(config, home):
        ingest_queries.fn(config, str(home))
        for step in (embed_queries, assign_splits_task, sample_states_task, simulate_labels_task, compute_costs_task):
            step.fn(config, str(home))

    seed1 = small_config.model_copy(update={"splits": small_config.splits.model_copy(update={"seed": 1})})
    both, fresh = tmp_path / "both", tmp_path / "fresh"
    prepare(small_config, both)
    zero = _costs(both, 0)
    prepare(seed1, both)
    prepare(seed1, fresh)
    pd.testing.assert_frame_equal(_costs(both, 1), _costs(fresh, 1))
    pd.testing.assert_frame_equal(_costs(both, 0), zero)  # seed 0's rows are kept, untouched
    # the estimates differ between seeds (different train splits); the realised costs do not (fixed T0/E0)
    assert not np.allclose(zero["cost_est_norm"], _costs(both, 1)["cost_est_norm"])
    np.testing.assert_allclose(zero["cost_norm"], _costs(both, 1)["cost_norm"])


@pytest.mark.flow
@pytest.mark.slow
def test_seed_1_after_seed_0_gives_the_numbers_of_a_fresh_warehouse(prefect_harness, tmp_path):
    from flows.run import run_flow

    data = write_small_benchmarks(tmp_path / "data", per_subset=12, subsets_per_benchmark=2)
    configs = {}
    for seed in (0, 1):
        configs[seed] = tmp_path / f"seed{seed}.yaml"
        configs[seed].write_text(SMALL.format(data=data, seed=seed))
    shared, fresh = tmp_path / "shared", tmp_path / "fresh"
    run_flow(config_path=str(configs[0]), home=str(shared))
    after = run_flow(config_path=str(configs[1]), home=str(shared))
    alone = run_flow(config_path=str(configs[1]), home=str(fresh))
    assert not after["prepare"]["splits"]["cached"] and not after["prepare"]["costs"]["cached"]
    assert after["prepare"]["embeddings"]["cached"] and after["prepare"]["states"]["cached"]

    def numbers(home, run_id):
        with Warehouse(home, read_only=True) as wh:
            return wh.df("SELECT method, benchmark, lam, alpha, accuracy, cost, local_rate FROM operating_points "
                         "WHERE run_id = ? ORDER BY ALL", [run_id])

    a, b = numbers(shared, after["evaluate"]["run_id"]), numbers(fresh, alone["evaluate"]["run_id"])
    assert len(a) > 0
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(_costs(shared, 1), _costs(fresh, 1))
