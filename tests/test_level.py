"""The A/A level study (cr2.studies.level): the page's equal-risk test under an exactly true null, the Monte-Carlo error
of its p, and the results-page section that prints a stored study."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cr2.evaluation.fixed_accuracy import VIEW_TARGETS, MethodOutcomes, always_outcomes
from cr2.studies.level import (ABOVE, WITHIN, NullPair, aa_simulation, level_rows, level_verdict, p_mc_error)


def _pool(n: int = 500, k: int = 8, seed: int = 0):
    """Four Always-models and routers of different quality over one λ sweep (a threshold on a noisy score of the
    device's correctness): real, different sides that only the coin exchanges."""
    rng = np.random.default_rng(seed)
    acc, price = np.array([0.55, 0.7, 0.8, 0.9]), np.array([0.05, 0.3, 0.6, 1.0])
    y = rng.random((n, 4)) < acc
    c = np.tile(price, (n, 1)) * rng.uniform(0.8, 1.2, (n, 4))
    rows = np.arange(n)[:, None]

    def router(noise):
        score = y[:, 0] + rng.normal(0, noise, n)
        chosen = np.stack([np.where(score > th, 0, 3) for th in np.linspace(-1, 2, k)], axis=1)
        return MethodOutcomes(y[rows, chosen], c[rows, chosen], rows=np.ones(n, dtype=bool))

    routers = [router(s) for s in (0.3, 0.6, 0.9, 1.2)]
    return y, c, routers


def _families(routers):
    return {("gate-quality", None, None): [NullPair(f"0 vs {j}", routers[0], routers[j]) for j in (1, 2, 3)],
            ("certified-score", "crc", 0.01): [NullPair("1 vs 3", routers[1], routers[3])]}


def test_the_page_test_keeps_its_level_on_a_null_pool():
    """Under the label-permuted null the family-wise rate stays near or below 5 % (seeded; one-sided tolerance: at
    most 8 of 60, above which the exact binomial verdict would also say above)."""
    y, c, routers = _pool()
    n = y.shape[0]
    grid = np.round(np.arange(60, 86) / 100, 6)
    res = aa_simulation(_families(routers), always_outcomes(y, c, np.ones(n, dtype=bool)), VIEW_TARGETS, grid,
                        np.ones(n, dtype=bool), 60, 200, np.random.default_rng(1))
    assert [f.n_tests for f in res] == [3, 1] and all(f.n_replicates == 60 and f.n_resamples == 200 for f in res)
    for f in res:
        assert f.n_rejections <= 8 and level_verdict(f.n_rejections, f.n_replicates) == WITHIN
        assert f.se == pytest.approx(math.sqrt(f.rate * (1 - f.rate) / 60))
    rows = level_rows(res)
    assert rows[0]["verdict"] == WITHIN and rows[0]["p_threshold"] == pytest.approx(0.05 / 3)


def test_an_anti_conservative_test_is_detected():
    """The same null read at level 0.5 (a word wherever p < 0.5): the rate is far above 5 % and the verdict says so."""
    y, c, routers = _pool(seed=2)
    n = y.shape[0]
    fams = {("certified-score", "crc", 0.01): [NullPair("0 vs 3", routers[0], routers[3])]}
    (f,) = aa_simulation(fams, always_outcomes(y, c, np.ones(n, dtype=bool)), VIEW_TARGETS,
                         np.round(np.arange(60, 86) / 100, 6), np.ones(n, dtype=bool), 40, 100,
                         np.random.default_rng(3), level=0.5)
    assert f.rate > 0.2 and level_verdict(f.n_rejections, f.n_replicates) == ABOVE


def test_the_verdict_is_an_exact_one_sided_binomial_test_of_five_percent():
    assert level_verdict(5, 100) == WITHIN and level_verdict(9, 100) == WITHIN  # P(X ≥ 9 | 0.05) = 0.063
    assert level_verdict(10, 100) == ABOVE  # P(X ≥ 10 | 0.05) = 0.028
    assert level_verdict(0, 3) == WITHIN
    with pytest.raises(Exception, match="rejection rate"):
        level_verdict(4, 3)


def test_the_monte_carlo_error_of_p_at_the_holm_threshold():
    """p̂ = 2·X/B with X ~ Binomial(B, p/2): SE = √(p(2 − p)/B); at m = 5, B = 10,000: p* = 0.01, SE 0.00141, 50
    resamples behind the decision — and a simulation of p̂ agrees."""
    e = p_mc_error(5)
    assert e.threshold == pytest.approx(0.01) and e.se == pytest.approx(math.sqrt(0.01 * 1.99 / 10_000))
    assert e.tail_resamples == pytest.approx(50.0) and e.relative_se == pytest.approx(e.se / 0.01)
    x = np.random.default_rng(0).binomial(10_000, 0.005, 200_000)
    assert np.std(2 * x / 10_000) == pytest.approx(e.se, rel=0.02)
    assert p_mc_error(30).tail_resamples == pytest.approx(10_000 * 0.05 / 30 / 2)


def test_the_results_section_prints_a_stored_study_and_says_what_is_missing(tmp_path):
    from cr2_cli.resultsdoc import render_sections
    from cr2_cli.resultsdoc.core import Doc, mark
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.level import write_level_study

    y, c, routers = _pool(n=200, k=4)
    res = aa_simulation({("gate-quality", None, None): [NullPair("0 vs 1", routers[0], routers[1])]},
                        always_outcomes(y, c, np.ones(200, dtype=bool)), VIEW_TARGETS,
                        np.round(np.arange(60, 86) / 100, 6), np.ones(200, dtype=bool), 3, 50, np.random.default_rng(0))
    rows = pd.DataFrame(level_rows(res)).assign(run_id="eval-x", seed=0, wall_s=1.5,
                                                created_at=pd.Timestamp("2026-01-01"))
    home = tmp_path / "var"
    with Warehouse(home) as wh:
        write_level_study(wh, "level-test", rows)
    page = render_sections(Doc({"default": home, "mmlu-pro": tmp_path / "absent"}), ("level",), marked=True)
    assert "study `level-test` on run `eval-x`" in page and mark(WITHIN) in page
    assert "| gate-quality | 1 | 0.0 % ± 0.0 (0/3)" in page and "0.0500 ± 0.0031" in page
    assert "Not in this checkout" in page and "cr2 study level -c configs/mmlu-pro-measured.yaml" in page
    # a row stored under the verdict's earlier label is relabelled by the next writable open (warehouse/schema.sql),
    # so SQL shows the word the page prints
    with Warehouse(home) as wh:
        wh.con.execute("UPDATE level_study SET verdict = 'within the nominal 5 %'")
        wh.con.execute("UPDATE meta SET value = 'before-the-relabel' WHERE key = 'schema_digest'")
    with Warehouse(home) as wh:
        assert set(wh.df("SELECT DISTINCT verdict FROM level_study")["verdict"]) == {WITHIN}


def test_the_families_of_a_study_are_read_together_so_their_verdicts_are_holm_corrected():
    """17 of 200 alone is above 5 % (binomial p ≈ 0.016); read with 13 other families at 5 %, Holm keeps it within —
    and a rate far above 5 % stays above after the correction."""
    from cr2.studies.level import FamilyLevel, above_p

    one = FamilyLevel("certified-score", "crc", 0.01, 6, 200, 17, 40, 500)
    alone = level_rows([one])[0]
    assert alone["p_above"] == pytest.approx(above_p(17, 200)) and alone["p_above"] < 0.05 and alone["verdict"] == ABOVE
    many = level_rows([one] + [FamilyLevel("gate-quality", None, None, 5, 200, 10, 20, 500)] * 13)
    assert many[0]["p_above_holm"] == pytest.approx(min(1.0, 14 * above_p(17, 200))) and many[0]["verdict"] == WITHIN
    far = level_rows([FamilyLevel("gate-quality", None, None, 5, 200, 60, 90, 500)] * 14)
    assert all(r["verdict"] == ABOVE for r in far)


def test_the_replicate_b_puts_every_holm_threshold_on_a_step_of_p():
    """p = 2X/B: a threshold between two steps rejects more often than itself under the null; the A/A default B puts
    0.05/k on a step for every k ≤ 6, so a replicate tests at the page's level (B = 500 did not: 0.012 for 0.0083)."""
    from cr2.studies.level import AA_RESAMPLES, effective_level

    for k in range(1, 7):
        assert effective_level(0.05 / k, AA_RESAMPLES) <= 0.05 / k
        assert effective_level(0.05 / k, AA_RESAMPLES) == pytest.approx(0.05 / k, rel=1e-3)
    assert effective_level(0.05 / 6, 500) == pytest.approx(6 / 501) and 6 / 501 > 1.4 * 0.05 / 6
    rng = np.random.default_rng(0)  # the formula is the null's rejection rate: uniform share, binomial counts
    q = rng.random(400_000)
    x = rng.binomial(500, q)
    p = 2 * np.minimum(x, 500 - x) / 500
    assert (p < 0.05 / 6).mean() == pytest.approx(effective_level(0.05 / 6, 500), rel=0.05)
