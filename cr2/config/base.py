"""Units converted once at load, and the strict base model every config section derives from."""
from __future__ import annotations


from pydantic import BaseModel, ConfigDict




def db_to_linear(value_db: float) -> float:
    """Power ratio from decibels: 10^(x/10)."""
    return 10.0 ** (value_db / 10.0)


def dbm_to_w(value_dbm: float) -> float:
    """Watts from dBm: 10^((x − 30)/10)."""
    return 10.0 ** ((value_dbm - 30.0) / 10.0)


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
