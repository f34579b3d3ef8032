"""The router study (configs/studies/router-study.yaml): is a candidate router detectably cheaper than certified KNN
at equal risk (same rule, same α) on measured labels?

The pre-registration fixes the candidates (catalogued routers), the units (the measured pools of the pool rule; the
scenarios, reported beside them), the rule and α, the comparison and the success criterion before any test-split
number of the study exists. What lives here, pure:

- `load_router_study`: the pre-registration as a `RouterStudy`, checked against the catalogue and the rules;
- `study_config_data`: a unit's config with the candidates fitted beside its routers;
- `study_rows`: per candidate and unit, the stored equal-risk saving of `<candidate>@<rule>` against
  `<reference>@<rule>` at α (the pairwise question of cr2.evaluation.equal_risk: mean fixed-accuracy saving over the
  validation target grid, paired bootstrap over the test queries, interval and p from the same resamples), its Holm p
  over the candidate's family, its word, the share of the oracle headroom it captures and its 95 % upper bound;
- `study_summary`: per candidate, the pools where it is detectably cheaper / dearer and the success verdict.

Families (as pre-registered): per candidate, its tests over the pools; per candidate, its tests over the scenarios.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from cr2.core.errors import ConfigError

#: the gate-trained candidate takes its gate hyperparameters from the unit's own config (`gate` section)
GATE_FROM_CONFIG = "gate-avoidable"
MIN_CANDIDATES, MAX_CANDIDATES = 3, 6
POOLS, SCENARIOS = "pool", "scenario"  # the two kinds of unit; only pools enter the success criterion


@dataclass(frozen=True)
class Candidate:
    name: str  # a catalogue key
    what: str  # the pre-registered description


@dataclass(frozen=True)
class RouterStudy:
    """A pre-registered router study; `digest` is the content hash of its file (part of the study id)."""

    candidates: tuple[Candidate, ...]
    reference: str
    pool_rule: str
    pool_config: str
    scenarios: tuple[str, ...]
    rule: str
    alpha_key: str  # a dotted config path, e.g. "grids.default_alpha": each unit's own α
    success_share: float  # a candidate succeeds when detectably cheaper on at least this share of the pools …
    digest: str

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.candidates]

    def subject(self, candidate: str) -> str:
        """The certified candidate's name, e.g. 'knn-stack@crc-avoidable'."""
        from cr2.routers.certify import certified_name

        return certified_name(candidate, self.rule)

    @property
    def other(self) -> str:
        from cr2.routers.certify import certified_name

        return certified_name(self.reference, self.rule)

    def min_cheaper(self, n_pools: int) -> int:
        """Pools on which a candidate must be detectably cheaper (at least half: 7 of 13)."""
        return int(np.ceil(self.success_share * n_pools))


def load_router_study(path: str | Path, digest: str, routers: Sequence[str] | None = None) -> RouterStudy:
    """The pre-registration at `path` (its content hash `digest`); every candidate and the reference must be certifiable
    routers (default: cr2.routers.certify.certifiable_routers()) and the rule a calibrated rule of cr2.crc."""
    from cr2.core.boundary import load_yaml_file
    from cr2.core.errors import InvalidValueError
    from cr2.crc import RULES

    try:
        data = load_yaml_file(path)  # bounded: a regular file within the YAML budgets, no key twice
    except InvalidValueError as e:
        raise ConfigError(f"cannot read the router study: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a router study is a mapping (question, candidates, reference, pools, …)")
    try:
        cands = tuple(Candidate(str(c["name"]), " ".join(str(c.get("what", "")).split())) for c in data["candidates"])
        study = RouterStudy(
            candidates=cands, reference=str(data["reference"]), pool_rule=str(data["pools"]["rule"]),
            pool_config=str(data["pools"]["config"]), scenarios=tuple(str(s) for s in data.get("scenarios") or ()),
            rule=str(data["guarantee"]["rule"]), alpha_key=str(data["guarantee"]["alpha"]), success_share=0.5,
            digest=digest)
    except (KeyError, TypeError) as e:
        raise ConfigError(f"{path}: the router study lacks {e} (candidates, reference, pools.rule, pools.config, "
                          "guarantee.rule, guarantee.alpha)") from None
    if not MIN_CANDIDATES <= len(cands) <= MAX_CANDIDATES:
        raise ConfigError(f"{path}: {len(cands)} candidates; a study compares {MIN_CANDIDATES} to {MAX_CANDIDATES}")
    if len(set(study.names)) != len(cands) or study.reference in study.names:
        raise ConfigError(f"{path}: candidates must be distinct and differ from the reference {study.reference!r}")
    if study.rule not in RULES:
        raise ConfigError(f"{path}: guarantee.rule {study.rule!r} is not a calibrated rule ({', '.join(RULES)})")
    if routers is None:
        from cr2.routers.certify import certifiable_routers

        routers = certifiable_routers()
    unknown = [n for n in [*study.names, study.reference] if n not in routers]
    if unknown:
        raise ConfigError(f"{path}: {unknown} are not certifiable catalogued routers ({', '.join(routers)})")
    return study


def alpha_of(config_data: Mapping[str, Any], key: str) -> float:
    """The α a unit's config gives at the dotted path `key` (e.g. grids.default_alpha)."""
    value: Any = config_data
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise ConfigError(f"the router study's α {key!r} is not a field of the unit's config")
        value = value[part]
    return float(value)


def study_config_data(data: Mapping[str, Any], study: RouterStudy) -> dict[str, Any]:
    """A unit's config (as data) with the study's candidates fitted beside its baselines and certified by its rule at
    its α; the gate-trained candidate's gate is the unit's own `gate` section. evaluation.n_resplits stays the unit's:
    where it is > 0 the certify stage checks every candidate's validity over that many re-splits (a scenario; the
    pool sweep's units have none)."""
    import copy

    out = copy.deepcopy(dict(data))
    baselines = out["baselines"]
    baselines["routers"] = list(baselines["routers"]) + [n for n in study.names if n not in baselines["routers"]]
    if GATE_FROM_CONFIG in study.names:
        params = dict(baselines.get("params") or {})
        params[GATE_FROM_CONFIG] = {**params.get(GATE_FROM_CONFIG, {}), "gate": dict(out["gate"])}
        baselines["params"] = params
    certify = out["certify"]
    if certify.get("routers") is not None:
        certify["routers"] = list(certify["routers"]) + [n for n in [*study.names, study.reference]
                                                         if n not in certify["routers"]]
    if study.rule not in certify["rules"]:
        certify["rules"] = list(certify["rules"]) + [study.rule]
    alpha = alpha_of(out, study.alpha_key)
    if not any(abs(float(a) - alpha) < 1e-12 for a in certify["alphas"]):
        certify["alphas"] = sorted([*map(float, certify["alphas"]), alpha])
    return out


# ---------------------------------------------------------------- the analysis of stored rows
ROW_COLUMNS = ("kind", "unit", "candidate", "estimate", "lower", "upper", "p_value", "n_resamples", "headroom",
               "p_holm", "verdict", "headroom_share")


def study_rows(saving: pd.DataFrame, headroom: pd.DataFrame, study: RouterStudy, level: float = 0.95) -> pd.DataFrame:
    """Per candidate and unit: the saving vs the reference at equal risk with its interval and bootstrap p, its Holm p
    over the candidate's family (its pools; its scenarios), the word, and the share of the oracle headroom captured.

    saving: stored rows (kind, unit, subject, other, estimate, lower, upper, p_value, n_resamples) of the pairwise
    equal-risk question; headroom: (kind, unit, estimate) — the full-information router's mean saving vs the
    reference (%), the most any router could save. A unit where a candidate's comparison is missing keeps a row with
    NaN (and no word): it is reported, never dropped silently.
    """
    from cr2.evaluation.statistics import holm_of_stored, saving_verdict

    rows = []
    units: list[tuple] = []
    for frame in (saving, headroom):
        units += [u for u in map(tuple, frame[["kind", "unit"]].drop_duplicates().to_numpy()) if u not in units]
    room = {(r.kind, r.unit): r.estimate for r in headroom.itertuples(index=False)}
    for cand in study.names:
        mine = saving[(saving["subject"] == study.subject(cand)) & (saving["other"] == study.other)]
        found = {(r.kind, r.unit): r for r in mine.itertuples(index=False)}
        for kind, unit in units:
            r = found.get((kind, unit))
            rows.append({"kind": kind, "unit": unit, "candidate": cand,
                         **({c: getattr(r, c) for c in ("estimate", "lower", "upper", "p_value", "n_resamples")}
                            if r is not None else dict.fromkeys(("estimate", "lower", "upper", "p_value", "n_resamples"),
                                                                np.nan)),
                         "headroom": room.get((kind, unit), np.nan)})
    out = pd.DataFrame(rows, columns=list(ROW_COLUMNS[:9]))
    out["p_holm"], out["family_size"] = np.nan, np.nan
    for _, idx in out.groupby(["candidate", "kind"], sort=False).groups.items():
        out.loc[idx, "p_holm"] = holm_of_stored(out.loc[idx, "p_value"].tolist())
        out.loc[idx, "family_size"] = float(out.loc[idx, "p_value"].notna().sum())
    out["verdict"] = pd.Series([saving_verdict(lo, hi, None if pd.isna(p) else p, level)  # object: keeps Verdict
                                for lo, hi, p in zip(out["lower"], out["upper"], out["p_holm"])], index=out.index,
                               dtype=object)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = out["estimate"].to_numpy(float) / out["headroom"].to_numpy(float)
    out["headroom_share"] = np.where(out["headroom"].to_numpy(float) > 0, share, np.nan)
    return out


SUMMARY_COLUMNS = ("candidate", "pools", "cheaper", "dearer", "no_difference", "missing", "median_saving",
                   "median_upper", "median_headroom_share", "success", "outcome")
SUCCEEDS, FAILS = "meets the success criterion", "does not meet the success criterion"


def study_summary(rows: pd.DataFrame, study: RouterStudy) -> pd.DataFrame:
    """Per candidate over the pools: how many detectably cheaper / dearer / no difference (Holm over its pools), the
    medians of its saving, of its 95 % upper bound and of the headroom share, and whether it meets the success
    criterion (cheaper on at least half of the pools, dearer on none; a missing comparison counts against it)."""
    from cr2.evaluation.statistics import CHEAPER, DEARER, NO_DIFFERENCE, Verdict

    out = []
    pools = rows[rows["kind"] == POOLS]
    for cand in study.names:
        mine = pools[pools["candidate"] == cand]
        words = [str(w) if w is not None else None for w in mine["verdict"]]
        n = len(mine)
        cheaper, dearer = words.count(CHEAPER), words.count(DEARER)
        missing = sum(w is None for w in words)
        success = bool(n > 0 and missing == 0 and dearer == 0 and cheaper >= study.min_cheaper(n))
        out.append({"candidate": cand, "pools": n, "cheaper": cheaper, "dearer": dearer,
                    "no_difference": words.count(NO_DIFFERENCE), "missing": missing,
                    "median_saving": float(np.nanmedian(mine["estimate"])) if mine["estimate"].notna().any() else np.nan,
                    "median_upper": float(np.nanmedian(mine["upper"])) if mine["upper"].notna().any() else np.nan,
                    "median_headroom_share": (float(np.nanmedian(mine["headroom_share"]))
                                              if mine["headroom_share"].notna().any() else np.nan),
                    "success": success, "outcome": Verdict(SUCCEEDS if success else FAILS)})
    return pd.DataFrame(out, columns=list(SUMMARY_COLUMNS), dtype=object)


__all__ = ["Candidate", "RouterStudy", "load_router_study", "study_config_data", "study_rows", "study_summary",
           "alpha_of"]


# ---------------------------------------------------------------- where a study is found (pure: files and hashes)
DEFAULT_STUDY = "configs/studies/router-study.yaml"


def study_scenarios() -> dict[str, Any]:
    """The scenarios a study may name — each one pipeline run — key → cr2.config.scenarios.Scenario (its config,
    None for the default config, and home), in configs/scenarios.yaml's order."""
    from cr2.config.scenarios import scenarios

    return {key: s for key, s in scenarios().items() if s.is_run}


def study_path(path: str) -> Path:
    """A study file named by the user: the file itself, or the path shipped with cr2 (configs/…)."""
    from cr2.config.shipped import shipped_path

    p = Path(path)
    return p if p.is_absolute() or p.is_file() else shipped_path(path)


def load_study(path: str = DEFAULT_STUDY) -> "RouterStudy":
    """The pre-registration at `path` (a file, or a path shipped with cr2) with its content hash."""
    from cr2.core.hashing import study_file_digest

    p = study_path(path)
    return load_router_study(p, study_file_digest(p))


def study_id(study: "RouterStudy", kind: str) -> str:
    """The study's id in a base warehouse: the pre-registration's content hash and the kind of unit it holds."""
    from cr2.core.hashing import study_id as stored_study_id

    return stored_study_id(f"routers-{kind}", study.digest)
