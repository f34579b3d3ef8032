"""Costs say which splits they were estimated from: the pre-execution ĉ (cost_est_norm) uses the train split's
mean output length per (benchmark, model), so a second split seed in the same warehouse gets its own cost rows,
and the real `cr2 run` with seed 1 after seed 0 gives exactly the numbers of a fresh warehouse with seed 1."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import SMALL_RUN, copy_of
from cr2_warehouse.db import Warehouse

def _costs(home, seed: int) -> pd.DataFrame:
    with Warehouse(home, read_only=True) as wh:
        return wh.df("SELECT * EXCLUDE (split_seed) FROM costs WHERE split_seed = ? ORDER BY query_id, draw, model_id",
                     [seed])


def test_two_seeds_keep_their_own_cost_estimates(small_config, tmp_path):
    from cr2_tasks.ingest import ingest_queries
    from cr2_tasks.prepare import (assign_splits_task, compute_costs_task, embed_queries, sample_states_task,
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
def test_seed_1_after_seed_0_gives_the_numbers_of_a_fresh_warehouse(small_cli_run, tmp_path):
    """Seed 0's `cr2 run` is the test run's shared one (conftest.small_cli_run), continued in a copy."""
    from cr2_flows.run import run_flow

    seed1 = tmp_path / "seed1.yaml"
    seed1.write_text(SMALL_RUN.format(data=small_cli_run["data"], seed=1))
    assert small_cli_run["result"].returncode == 0, small_cli_run["result"].stderr[-6000:]
    shared, fresh = copy_of(small_cli_run["home"], tmp_path / "shared"), tmp_path / "fresh"
    after = run_flow(config_path=str(seed1), home=str(shared))
    alone = run_flow(config_path=str(seed1), home=str(fresh))
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
