"""Evaluation settings: the paired bootstrap and the evaluation section."""
from __future__ import annotations


from pydantic import Field, field_validator

from cr2.core.errors import InvalidValueError
from cr2.config.base import StrictModel


class BootstrapSpec(StrictModel):
    """Paired bootstrap over the test queries: one index array shared by every method."""

    n_resamples: int = Field(1000, ge=100, description="resamples of the test queries (≥ 1,000 for published intervals)")
    level: float = Field(0.95, gt=0, lt=1, description="nominal coverage of the percentile intervals")
    seed: int = Field(0, description="seed of the shared resample index")
    per_benchmark: bool = Field(True, description="intervals per benchmark too (besides 'all')")


class EvaluationSpec(StrictModel):
    exclude_unsolvable: bool = Field(True, description="drop test queries no model solves from accuracy/cost/local "
                                                       "rate (paper §VII-A); the risk always uses every test query")
    n_resplits: int = Field(200, ge=0, description="random calibration/test re-splits for the risk-vs-α bands "
                            "(0: no Monte-Carlo bands, what `cr2 recalibrate` uses unless --bands)")
    fixed_rates: list[float] = Field(default_factory=lambda: [0.10, 0.20],
                                     description="fixed local rates f of the paper's ablation rows (accept the top f of "
                                                 "the calibration scores, no risk control)")
    bootstrap: BootstrapSpec = Field(default_factory=BootstrapSpec,
                                     description="paired bootstrap intervals of every operating point and saving")

    @field_validator("n_resplits")
    @classmethod
    def _zero_or_enough(cls, v: int) -> int:
        if 0 < v < 10:
            raise InvalidValueError(f"n_resplits={v}: use 0 (no bands) or at least 10 re-splits for a 5–95 % band")
        return v
