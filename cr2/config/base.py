"""Units converted once at load, and the strict base model every config section derives from."""
from __future__ import annotations

import math
from typing import Annotated

from pydantic import AfterValidator, Field

from cr2.core.boundary import InputModel

# a level in dB (or dBm) whose linear value is a finite, normal float: 10^(x/10) for |x| ≤ 3000 lies in 1e±300
MAX_DB = 3000.0


def db_to_linear(value_db: float) -> float:
    """Power ratio from decibels: 10^(x/10)."""
    return 10.0 ** (value_db / 10.0)


def dbm_to_w(value_dbm: float) -> float:
    """Watts from dBm: 10^((x − 30)/10)."""
    return 10.0 ** ((value_dbm - 30.0) / 10.0)


def _convertible_db(value: float) -> float:
    if not (math.isfinite(value) and abs(value) <= MAX_DB):
        raise ValueError(f"a level in dB must lie in [-{MAX_DB:g}, {MAX_DB:g}] (its linear value 10^(x/10) would "
                         f"overflow or vanish), got {value:g}")
    return value


# a dB / dBm field: finite and within ±MAX_DB, so converting it at load can neither overflow nor give 0
Decibels = Annotated[float, AfterValidator(_convertible_db)]


# A seed every consumer takes: numpy's generators refuse a negative one (at first use, deep in a run), and
# np.random.seed (lm-eval, vLLM) takes at most 32 bits; torch.manual_seed takes 64.
MAX_SEED = 2 ** 32 - 1
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]


class StrictModel(InputModel):
    """A config section: unknown keys refused, numbers finite, bounds ordered (cr2.core.boundary.InputModel)."""
