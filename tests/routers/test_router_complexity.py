"""Golden sizes of the baseline heads against the paper's router-complexity table (Table router_complexity).

Exact: EmbedLLM parameters (90,714) and FLOPs (717.4 k); LLMRank parameters (608,516) and head FLOPs
(1.215 M) at k = 62 features; KNN (tested in test_router_knn). Documented differences: the MLP (no
sensible architecture reproduces 235,204 / 469.2 k; ours is 234,960 / 469.3 k, within 0.2 %), and
LLMRank's feature extractor, whose FLOPs are reported on top of the head.
"""
from __future__ import annotations

import numpy as np
import pytest

from cr2.method.complexity import count_parameters, format_flops

torch = pytest.importorskip("torch")

from cr2.routers.embedllm import PAPER_PARAMS as EMBEDLLM_PARAMS  # noqa: E402
from cr2.routers.embedllm import EmbedLLMNet, embedllm_flops  # noqa: E402
from cr2.routers.llmrank import PAPER_PARAMS as LLMRANK_PARAMS  # noqa: E402
from cr2.routers.llmrank import LLMRankNet, llmrank_head_flops, n_features  # noqa: E402
from cr2.routers.mlp import PAPER_FLOPS as MLP_PAPER_FLOPS  # noqa: E402
from cr2.routers.mlp import PAPER_PARAMS as MLP_PAPER_PARAMS  # noqa: E402
from cr2.routers.mlp import MLPNet, mlp_flops  # noqa: E402


def test_embedllm_golden_parameter_count():
    net = EmbedLLMNet(n_models=4)
    assert count_parameters(net) == EMBEDLLM_PARAMS == 90_714
    assert count_parameters(net) == 384 * 232 + 232 + 4 * 232 + 232 * 2 + 2


def test_embedllm_flops_reproduce_the_paper():
    assert embedllm_flops(4) == 4 * (2 * 384 * 232 + 232 + 2 * 232 * 2 + 2) == 717_352
    assert format_flops(embedllm_flops(4)) == "717.4 k"


def test_llmrank_golden_size_at_the_papers_pool():
    k = n_features(n_benchmarks=4, n_models=4, n_clusters=48)
    assert k == 62
    assert count_parameters(LLMRankNet(n_models=4, n_features=k)) == LLMRANK_PARAMS == 608_516
    assert llmrank_head_flops(4, k) == 1_215_232
    assert format_flops(llmrank_head_flops(4, k)) == "1.215 M"


def test_mlp_with_the_three_cost_inputs_has_the_papers_parameter_count():
    # 387 → 600 → 4: the 384-d embedding plus the estimated costs of the three non-reference models
    params, flops = count_parameters(MLPNet(n_models=4, n_extra=3)), mlp_flops(4, n_extra=3)
    assert params == MLP_PAPER_PARAMS == 235_204 == 387 * 600 + 600 + 600 * 4 + 4
    assert flops == 2 * 387 * 600 + 600 + 2 * 600 * 4 == 469_800
    assert abs(flops - MLP_PAPER_FLOPS) / MLP_PAPER_FLOPS < 0.002  # the paper prints 469.2 k


def test_fitted_mlp_finds_the_reference_column_and_has_the_golden_size(tiny_splits):
    from cr2.routers.mlp import MLPRouter

    train, dev, test = tiny_splits
    router = MLPRouter(epochs=1).fit(train, dev)
    ref = [j for j in range(train.n_models) if np.allclose(train.decision_cost[:, j], 1.0)]
    assert len(router.cost_columns_) == train.n_models - len(ref)
    if len(ref) == 1:
        assert router.n_params() == 235_204
    p = router.predict_proba(test)
    import dataclasses

    # p̂ reads the pre-execution decision cost only: a different realised cost changes nothing
    shifted = dataclasses.replace(test, cost=test.cost * 2, cost_est=test.decision_cost)
    assert np.array_equal(router.predict_proba(shifted), p)


def test_fitted_llmrank_has_the_golden_size(tiny_splits):
    from cr2.routers.llmrank import LLMRankRouter

    train, dev, _ = tiny_splits  # four benchmarks, four models → k = 62
    router = LLMRankRouter(epochs=1).fit(train, dev)
    assert router.features_.width == 62
    assert router.n_params() == 608_516
    assert router.head_flops() == 1_215_232
    assert router.flops_per_query() == 1_215_232 + 2 * 384 * 48 + 2 * 62
