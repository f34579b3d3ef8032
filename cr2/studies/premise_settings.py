"""A premise study's recorded settings in words: how its retrained variant was trained, and the command that
reproduces it (table premise_studies; cr2.studies.premise holds the defaults a command leaves out)."""
from __future__ import annotations

import json

import pandas as pd

from cr2.config.scenarios import scenarios
from cr2.studies.premise import DEFAULT_CHANNELS, DEFAULT_RESAMPLES, DEFAULT_SPEEDS


def mode(row) -> str:
    """How a study's retrained variant was trained, from its recorded settings."""
    if row.retrain_from is None or pd.isna(row.retrain_from):
        return "retraining not recorded"
    if row.retrain_from == "base":
        return f"fine-tuned from the base fits ({int(row.retrain_epochs)} epochs)"
    return "from scratch (the command's default)"


def command(key: str, config: str | None, row) -> str | None:
    """The command that reproduces a study of scenario `key`'s warehouse from its recorded settings (None where none
    were recorded)."""
    if row.retrain_from is None or pd.isna(row.retrain_from):
        return None
    cfg = row.config if isinstance(row.config, str) and row.config else config
    parts = ["cr2 study premise"] + ([f"-c {cfg}"] if cfg else []) + [f"--home {scenarios()[key].home}"]
    speeds, channels = json.loads(row.speeds), json.loads(row.channels)
    if [float(s) for s in speeds] != [float(s) for s in DEFAULT_SPEEDS]:
        parts.append("--speeds " + ",".join(f"{s:g}" for s in speeds))
    if list(channels) != list(DEFAULT_CHANNELS):
        parts.append("--channels " + ",".join(channels))
    if int(row.n_resamples) != DEFAULT_RESAMPLES:
        parts.append(f"--resamples {int(row.n_resamples)}")
    if int(row.seed) != 0:
        parts.append(f"--seed {int(row.seed)}")
    if row.retrain_from == "base":
        parts.append(f"--retrain-from base --retrain-epochs {int(row.retrain_epochs)}")
    return " ".join(parts)
