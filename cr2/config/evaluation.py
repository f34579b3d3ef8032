"""Evaluation settings: the paired bootstrap and the evaluation section."""
from __future__ import annotations


from pydantic import Field, field_validator

from cr2.core.boundary import shown
from cr2.core.errors import InvalidValueError
from cr2.config.base import Seed, StrictModel


# resamples of one bootstrap: the shared index is n_resamples × n_test integers (10,000 × 2,151 ≈ 86 MB), so
# 100,000 (p resolved to 2·10⁻⁵) is the most one machine here holds beside the run
MAX_RESAMPLES = 100_000
# re-splits of val ∪ test: each is one calibration and one evaluation of every cell; 100,000 is 200× the default
MAX_RESPLITS = 100_000


class BootstrapSpec(StrictModel):
    """Paired bootstrap over the test queries: one index array shared by every method."""

    n_resamples: int = Field(1000, ge=100, le=MAX_RESAMPLES, description="resamples of the per-point metric "
                             "intervals (≥ 1,000 for published intervals): the first rows of the shared index")
    n_resamples_compare: int = Field(10_000, ge=1_000, le=MAX_RESAMPLES, description="resamples of every "
                                     "comparison (savings and their p-values): p has resolution 2 / B, so a Holm "
                                     "family of dozens of tests needs ~10⁴")
    level: float = Field(0.95, gt=0, lt=1, description="nominal coverage of the percentile intervals")
    seed: Seed = Field(0, description="seed of the shared resample index")
    per_benchmark: bool = Field(True, description="intervals per benchmark too (besides 'all')")


class EvaluationSpec(StrictModel):
    exclude_unsolvable: bool = Field(True, description="drop test queries no model solves from accuracy/cost/local "
                                                       "rate (paper §VII-A); the risk always uses every test query")
    n_resplits: int = Field(200, ge=0, le=MAX_RESPLITS, description="random calibration/test re-splits for the "
                            "risk-vs-α bands (0: no Monte-Carlo bands, what `cr2 recalibrate` uses unless --bands)")
    fixed_rates: list[float] = Field(default_factory=lambda: [0.10, 0.20],
                                     description="fixed local rates f of the paper's ablation rows (accept the top f of "
                                                 "the calibration scores, no risk control)")
    bootstrap: BootstrapSpec = Field(default_factory=BootstrapSpec,
                                     description="paired bootstrap intervals of every operating point and saving")
    target_grid: list[float] | None = Field(None, description="target accuracies a mean saving averages over (a subset "
                                            "of 0.50, 0.51 … 0.99); null: fixed from the validation split "
                                            "(cr2.evaluation.fixed_accuracy.target_grid). A seed study sets the base "
                                            "run's grid so every seed estimates the same quantity")

    @field_validator("target_grid")
    @classmethod
    def _grid_on_view_targets(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return v
        import math

        if not v or any(not math.isfinite(t) or abs(round(t * 100) - t * 100) > 1e-6 or not 0.5 - 1e-9 <= t <= 0.99 + 1e-9
                        for t in v) or sorted(set(v)) != list(v):
            raise InvalidValueError(f"target_grid={shown(v)}: give distinct ascending targets among 0.50, 0.51 … 0.99")
        return [round(float(t), 2) for t in v]

    @field_validator("n_resplits")
    @classmethod
    def _zero_or_enough(cls, v: int) -> int:
        if 0 < v < 10:
            raise InvalidValueError(f"n_resplits={v}: use 0 (no bands) or at least 10 re-splits for a 5–95 % band")
        return v
