"""Splits: 80/10/10 per benchmark on the real default set, deterministic, stable as queries are added."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.inputs.datasets import select_queries
from cr2.config import SplitSpec, load_config
from cr2.inputs.splits import SPLITS, assign_splits, block_pattern, split_fractions

CFG = load_config()
SPEC = CFG.splits


@pytest.fixture(scope="module")
def queries():
    q = select_queries(CFG)  # MMLU 14,042, BBH 6,511, GPQA main 448, MBPP test 500
    return q["query_id"].to_numpy(), q["benchmark"].to_numpy(), q["subset"].to_numpy()


def test_every_benchmark_of_the_default_set_is_split_80_10_10(queries):
    ids, bench, subs = queries
    a = assign_splits(ids, bench, subs, SPEC)
    frac = split_fractions(a, bench)
    assert {b: frac[b]["n"] for b in frac} == {"mmlu": 14042, "bbh": 6511, "gpqa": 448, "mbpp": 500}
    for b, f in frac.items():
        for s, target in zip(SPLITS, (0.8, 0.1, 0.1)):
            assert abs(f[s] - target) <= 0.015, f"{b} {s}: {f[s]:.4f}"
        # dev is 10 % of train (a hash draw: ±3 points of train even on GPQA's ≈ 358 train queries)
        assert abs(f["dev"] / f["train"] - SPEC.dev_fraction) <= 0.03, f"{b} dev/train: {f['dev'] / f['train']:.3f}"
    # every subject/task is balanced too, within one query per split beyond its exact share
    for key in set(zip(bench, subs)):
        sel = (bench == key[0]) & (subs == key[1])
        n = int(sel.sum())
        for s, target in zip(SPLITS, (0.8, 0.1, 0.1)):
            assert abs((a.split[sel] == s).sum() - target * n) <= 2, f"{key} {s}"
    assert set(a.stratum) == {f"{b}/{s}" for b, s in zip(bench, subs)}  # every subset has ≥ 20 queries


def test_same_seed_same_split_and_another_seed_another(queries):
    ids, bench, subs = queries
    a, b = assign_splits(ids, bench, subs, SPEC), assign_splits(ids, bench, subs, SPEC)
    np.testing.assert_array_equal(a.split, b.split)
    np.testing.assert_array_equal(a.dev, b.dev)
    other = assign_splits(ids, bench, subs, SPEC.model_copy(update={"seed": 1}))
    assert 0.2 < (other.split != a.split).mean() < 0.45  # independent 80/10/10 draws differ on 1 − 0.66 = 34 %


def test_adding_queries_never_moves_an_existing_one(queries):
    ids, bench, subs = queries
    full = assign_splits(ids, bench, subs, SPEC)
    rng = np.random.default_rng(0)
    keep = np.flatnonzero(rng.random(len(ids)) < 0.6)
    rng.shuffle(keep)  # a subset, in another order
    part = assign_splits(ids[keep], bench[keep], subs[keep], SPEC)
    np.testing.assert_array_equal(part.split, full.split[keep])
    np.testing.assert_array_equal(part.dev, full.dev[keep])


def test_appended_rows_keep_the_old_rows_and_fill_blocks_exactly():
    old = np.array([f"bbh/new_task/{i:05d}" for i in range(103)])
    new = np.array([f"bbh/new_task/{i:05d}" for i in range(180)])
    a = assign_splits(old, ["bbh"] * 103, ["new_task"] * 103, SPEC)
    b = assign_splits(new, ["bbh"] * 180, ["new_task"] * 180, SPEC)
    np.testing.assert_array_equal(b.split[:103], a.split)
    # each block of 10 consecutive ids holds exactly 8 train, 1 val, 1 test
    for k in range(18):
        block = b.split[10 * k: 10 * k + 10]
        assert [(block == s).sum() for s in SPLITS] == [8, 1, 1]


def test_ids_without_a_running_number_fall_back_to_hash_balance():
    n = 20_000
    ids = np.array([f"custom/{i}-x" for i in range(n)])  # no trailing integer
    a = assign_splits(ids, ["mmlu"] * n, ["custom"] * n, SPEC)
    f = split_fractions(a)["all"]
    # binomial: sd of the val share = sqrt(0.09/20000) = 0.2 points; 1.5 points is > 7 sd
    for s, target in zip(SPLITS, (0.8, 0.1, 0.1)):
        assert abs(f[s] - target) < 0.015
    half = assign_splits(ids[::2], ["mmlu"] * (n // 2), ["custom"] * (n // 2), SPEC)
    np.testing.assert_array_equal(half.split, a.split[::2])


def test_dev_is_inside_train_and_the_table_column_has_four_values(queries):
    ids, bench, subs = queries
    a = assign_splits(ids, bench, subs, SPEC)
    assert np.all(a.split[a.dev] == "train")
    table = a.table_split()
    assert set(table) == {"train", "dev", "val", "test"}
    assert np.array_equal(a.mask("train") | a.mask("dev"), a.mask("train+dev"))
    assert not np.any(a.mask("train") & a.mask("dev"))
    with pytest.raises(ValueError, match="unknown split"):
        a.mask("calib")


def test_small_subsets_pool_into_their_benchmark_stratum():
    ids = [f"mmlu/big/{i:05d}" for i in range(30)] + [f"mmlu/tiny/{i:05d}" for i in range(5)]
    subs = ["big"] * 30 + ["tiny"] * 5
    a = assign_splits(ids, ["mmlu"] * 35, subs, SPEC)
    assert set(a.stratum[:30]) == {"mmlu/big"} and set(a.stratum[30:]) == {"mmlu/*"}
    # the stratum label does not enter the assignment: pooling moves nobody
    b = assign_splits(ids, ["mmlu"] * 35, subs, SPEC.model_copy(update={"min_stratum": 1}))
    np.testing.assert_array_equal(a.split, b.split)
    assert set(b.stratum[30:]) == {"mmlu/tiny"}


def test_block_pattern_has_exact_counts():
    assert np.bincount(block_pattern(SPEC), minlength=3).tolist() == [8, 1, 1]
    other = SplitSpec(train=0.7, val=0.15, test=0.15, dev_fraction=0.1)
    assert np.bincount(block_pattern(other), minlength=3).tolist() == [14, 3, 3]
    odd = SplitSpec(train=0.6, val=0.2000001, test=0.1999999, dev_fraction=0.1)  # no small exact block
    assert np.bincount(block_pattern(odd), minlength=3).tolist() == [600, 200, 200]


def test_bad_inputs_fail_clearly():
    with pytest.raises(ValueError, match="unique"):
        assign_splits(["a/1", "a/1"], ["mmlu"] * 2, ["x"] * 2, SPEC)
    with pytest.raises(ValueError, match="must all be"):
        assign_splits(["a/1", "a/2"], ["mmlu"], ["x"] * 2, SPEC)
    assert len(assign_splits([], [], [], SPEC)) == 0
