"""simulated-irt-v1: exact per-(model, benchmark) accuracies on the real default set, correlated errors,
the predictable share, reproducibility and stability, output lengths, and clear errors."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.inputs.datasets import select_queries
from cr2.config import load_config
from cr2.inputs.embed import router_texts
from cr2.core.errors import DataValidationError, UnknownNameError
from cr2.labels import SIMULATED_SOURCE, get_label_source
from cr2.labels.simulator import length_factors, load_accuracy_targets, simulate_labels

CFG = load_config()
SPEC = CFG.labels.simulator
MODEL_IDS = [m.id for m in CFG.models]
BENCHMARKS = ("mmlu", "bbh", "gpqa", "mbpp")


@pytest.fixture(scope="module")
def data():
    q = select_queries(CFG)
    texts = router_texts(list(q["question"]), [None if c is None else list(c) for c in q["choices"]])
    targets = load_accuracy_targets(CFG.data_path / SPEC.accuracy_file, CFG.models)
    args = (q["query_id"].to_numpy(), q["benchmark"].to_numpy(), q["subset"].to_numpy(), texts)
    return args, targets, simulate_labels(*args, CFG.models, targets, SPEC)


def test_targets_are_read_from_the_report_csv_as_fractions():
    t = load_accuracy_targets(CFG.data_path / SPEC.accuracy_file, CFG.models)
    assert t[("qwen3-1.7b", "mmlu")] == pytest.approx(0.6263)
    assert t[("qwen3-8b", "gpqa")] == pytest.approx(0.4444) and t[("qwen3-14b", "gpqa")] == pytest.approx(0.3990)
    assert len(t) == 16
    with pytest.raises(DataValidationError, match="no accuracy row for model 'qwen3-32b'"):
        load_accuracy_targets(CFG.data_path / SPEC.accuracy_file, ["qwen3-32b"])


def test_accuracy_matches_the_target_in_every_cell(data):
    (ids, bench, _, _), targets, lab = data
    assert lab.source == SIMULATED_SOURCE == "simulated-irt-v1"
    for b in BENCHMARKS:
        rows = bench == b
        n_b = int(rows.sum())
        for j, m in enumerate(MODEL_IDS):
            acc = lab.correct[rows, j].mean()
            msg = f"{m} {b}: {100 * acc:.2f} vs {100 * targets[(m, b)]:.2f}"
            assert abs(acc - targets[(m, b)]) <= 0.5 / n_b + 1e-12, msg
            assert abs(acc - targets[(m, b)]) <= 0.01
    gpqa = bench == "gpqa"
    assert lab.correct[gpqa, 2].mean() > lab.correct[gpqa, 3].mean()  # the report's 8B > 14B on GPQA survives


def test_errors_are_correlated_across_models(data):
    (_, bench, _, _), _, lab = data
    y = lab.correct
    for b in BENCHMARKS:
        r = bench == b
        small, large = y[r, 0], y[r, 3]
        # the larger model solves most of what the smaller solves; the smaller mostly fails where the larger fails
        assert small[large].mean() > small.mean() + 0.05, b
        assert large[small].mean() > 0.8, b
        # … but not all of it: each model has its own errors
        assert (small & ~large).sum() > 0, b


def test_a_share_of_difficulty_is_predictable_from_the_query(data):
    (_, bench, subs, _), _, lab = data
    for b in BENCHMARKS:
        r = bench == b
        share = lab.predictable[r].var() / lab.difficulty[r].var()
        assert abs(share - SPEC.predictable_share) < 0.05, f"{b}: {share:.3f}"
    # the subset (MMLU subject) carries part of it: subject means of the difficulty differ
    mm = bench == "mmlu"
    means = [lab.difficulty[mm & (subs == s)].mean() for s in np.unique(subs[mm])]
    assert np.std(means) > 0.5


def test_same_seed_same_labels_and_another_seed_other_labels(data):
    args, targets, lab = data
    idx = np.arange(0, len(args[0]), 7)  # a slice keeps the test quick
    part = tuple(a[idx] if isinstance(a, np.ndarray) else [a[i] for i in idx] for a in args)
    a = simulate_labels(*part, CFG.models, targets, SPEC)
    b = simulate_labels(*part, CFG.models, targets, SPEC)
    np.testing.assert_array_equal(a.correct, b.correct)
    np.testing.assert_array_equal(a.output_tokens, b.output_tokens)
    np.testing.assert_array_equal(a.latent, b.latent)
    c = simulate_labels(*part, CFG.models, targets, SPEC.model_copy(update={"seed": 1}))
    assert (c.correct != a.correct).mean() > 0.1


def test_adding_queries_barely_changes_the_others(data):
    args, targets, lab = data
    keep = np.flatnonzero(np.random.default_rng(0).random(len(args[0])) < 0.9)
    part = tuple(a[keep] if isinstance(a, np.ndarray) else [a[i] for i in keep] for a in args)
    sub = simulate_labels(*part, CFG.models, targets, SPEC)
    # the item noise and model deviations are per query; only standardisation and the rank cut see the set
    assert np.corrcoef(sub.latent[:, 0], lab.latent[keep, 0])[0, 1] > 0.999
    agree = (sub.correct == lab.correct[keep]).mean(axis=0)
    assert np.all(agree > 0.97), agree
    np.testing.assert_array_equal(sub.output_tokens, lab.output_tokens[keep])


def test_output_lengths_follow_the_configured_log_normal(data):
    (_, bench, _, _), _, lab = data
    f = length_factors([m.params for m in CFG.models])
    np.testing.assert_allclose(f[[0, 1, 3]], [1.0, 0.9, 1.1])
    assert 0.9 < f[2] < 1.1
    for b in BENCHMARKS:
        dist = SPEC.output_tokens[b]
        tok = lab.output_tokens[bench == b]
        assert tok.min() >= 1 and tok.max() <= dist.max_tokens
        med = np.median(tok, axis=0)
        np.testing.assert_allclose(med, dist.median_tokens * f, rtol=0.1, err_msg=b)
        # log-length spread ≈ σ (clipping and rounding shrink it a little)
        assert abs(np.log(tok[:, 0]).std() - dist.sigma) < 0.1, b
    assert lab.output_tokens.dtype == np.int64


def test_long_form_frame_and_registry(data):
    _, _, lab = data
    df = lab.to_frame()
    assert list(df.columns) == ["query_id", "model_id", "correct", "output_tokens"]
    assert len(df) == len(lab) * 4 and list(df["model_id"][:4]) == MODEL_IDS
    assert get_label_source("simulated-irt-v1") is simulate_labels
    with pytest.raises(UnknownNameError, match="did you mean 'simulated-irt-v"):
        get_label_source("simulated-irt-v3")


def test_bad_inputs_fail_clearly():
    ids, bench, subs, texts = ["mmlu/a/00000", "mmlu/a/00001"], ["mmlu"] * 2, ["a"] * 2, ["x y", "z"]
    targets = {(m, "mmlu"): 0.5 for m in MODEL_IDS}
    with pytest.raises(ValueError, match="no target accuracy"):
        simulate_labels(ids, ["mmlu", "bbh"], subs, texts, CFG.models, targets, SPEC)
    with pytest.raises(ValueError, match="fraction in"):
        simulate_labels(ids, bench, subs, texts, CFG.models, {**targets, ("qwen3-4b", "mmlu"): 62.6}, SPEC)
    with pytest.raises(ValueError, match="one entry per query"):
        simulate_labels(ids, bench, subs, texts[:1], CFG.models, targets, SPEC)
    with pytest.raises(ValueError, match="unique"):
        simulate_labels([ids[0]] * 2, bench, subs, texts, CFG.models, targets, SPEC)
    with pytest.raises(ValueError, match="model_params"):
        simulate_labels(ids, bench, subs, texts, MODEL_IDS, targets, SPEC)
    ok = simulate_labels(ids, bench, subs, texts, MODEL_IDS, targets, SPEC, model_params=[1, 2, 3, 4])
    assert ok.correct.sum(axis=0).tolist() == [1, 1, 1, 1]
