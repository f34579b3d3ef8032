"""docs/results.md, "The level of the equal-risk test": the stored A/A simulation (`cr2 study level`, table
level_study; cr2.studies.level) of the default scenario and of MMLU-Pro — per family, the rejection rate under the
label-permuted null with its Monte-Carlo SE and verdict against 5 %, and the Monte-Carlo error of the page's p near
the Holm thresholds."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from cr2.report.level import LevelTable
from cr2.report.resultsdoc.words import PLAIN, Words, missing

SCENARIOS = (("default", "configs/default.yaml", "var"), ("mmlu-pro", "configs/mmlu-pro-measured.yaml", "var/mmlu-pro"))


def command(config: str, home: str) -> str:
    return f"cr2 study level -c {config} --home {home}"


@dataclass(frozen=True)
class LevelStudy:
    """One scenario's newest level study: its rows (None: no warehouse) and their verdicts
    (cr2.studies.level.stored_level_verdicts)."""

    rows: pd.DataFrame | None
    verdicts: object = None


@dataclass(frozen=True)
class LevelData:
    studies: dict  # scenario key (SCENARIOS) → LevelStudy


TITLE = "## The level of the equal-risk test, measured (A/A)\n"


def render(data: LevelData, words: Words = PLAIN) -> str:
    parts = [TITLE,
             "Every equal-risk comparison is a paired bootstrap of a non-smooth statistic (a running-max frontier per "
             "resample, interpolation, the switch to an Always-model that costs less), so its level is measured rather than "
             "assumed. For each comparison of a family, an A/A replicate exchanges its two real sides query by query "
             "with a fair coin: the two mixed sides are exchangeable, so their true saving is exactly 0, and the page's "
             "test is applied unchanged (targets, grid, Always-model charge, Holm over the family, level 0.95) on a "
             "fresh bootstrap index. A family's rate is the share of replicates where any of its tests got a "
             "direction word (the family-wise error Holm promises to keep at or below 5 %), with its binomial "
             "Monte-Carlo SE; its verdict is an exact one-sided binomial test of \"rate ≤ 5 %\", Holm over the "
             "scenario's families (they are read together). The rate is "
             "conditional on the scenario's test queries and uses fewer resamples per replicate than the page "
             "(column B in the caption); since p = 2X/B moves in steps of 2/B, a Holm threshold 0.05/k between two steps "
             "rejects more often than 0.05/k (cr2.studies.level.effective_level), so B is chosen to put every threshold "
             "of a family of up to 6 tests on a step (B = 2,400; at B = 500 the first step of a 6-test family rejected "
             "at 0.012 instead of 0.0083, and such a study overstates the page's rate); the last two columns are the Monte-Carlo error of the page's own p at "
             "B = 10,000 at the family's first Holm threshold 0.05/m — SE = √(p(2 − p)/B), since p = 2·X/B with X "
             "the resamples on the minority side of 0 — and how many resamples a decision there rests on "
             "(B·p/2).\n"]
    for key, config, home in SCENARIOS:
        title = f"**{'Default scenario' if key == 'default' else 'MMLU-Pro (measured)'}**"
        study = data.studies[key]
        if study.rows is None:
            parts.append(f"{title}\n\n" + missing(key, f"no warehouse, so no level study (`{command(config, home)}`)"))
            continue
        rows = study.rows
        if rows.empty:
            parts.append(f"{title}\n\n" + missing(key, f"no level study is stored — run `{command(config, home)}`"))
            continue
        r0 = rows.iloc[0]
        parts.append(f"{title} — study `{r0['study_id']}` on run `{r0['run_id']}`: {int(r0['n_replicates'])} "
                     f"replicates × B = {int(r0['n_resamples'])} resamples, seed {int(r0['seed'])}, "
                     f"{float(r0['wall_s']):.0f} s (`{command(config, home)}`).\n\n"
                     + LevelTable(rows, study.verdicts, words.word).markdown())
    return "\n".join(parts)
