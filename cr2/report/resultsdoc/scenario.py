"""What the sections intervals, default_scenario and measured share (not a section): the stored run and seed study of
one scenario warehouse as read (cr2_cli.resultsdoc.scenario_stats.load), and the two rules that turn stored numbers
into words —

- a family of savings read together (routers, or targets × routers): each saving's word only from its Holm-adjusted
  p over the family, each p the one stored beside its interval (the same bootstrap resamples,
  cr2.evaluation.statistics.bootstrap_p_values); an uncorrected word of a family member is never printed;
- a saving over seeds: the 95 % t-interval over the seeds of the seed study and the one-sample t-test, Holm-adjusted
  over the family read together (cr2.evaluation.families.over_seeds); mean ± sd is shown, never read as a word.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from cr2.evaluation.families import over_seeds, stored_word
from cr2.report import cells
from cr2.report.resultsdoc.words import Words
from cr2.routers import routers_tagged, short_name

def learned() -> tuple[str, ...]:
    """Every learned router compared with KNN (the catalogue's `compared` tag, read when a page renders)."""
    return routers_tagged("compared")


def name(method: str) -> str:
    return short_name(method)


def num(v, fmt: str = "+.1f") -> str:
    return cells.num(v, fmt)


@dataclass(frozen=True)
class Scenario:
    """One scenario warehouse as the sections read it: its newest evaluation run and newest seed study."""

    key: str
    run_id: str
    source: str  # label source
    kind: str  # SIMULATED / MEASURED
    run: dict
    mean_saving: pd.DataFrame  # v_mean_saving_ci
    fixed: pd.DataFrame  # v_fixed_accuracy_ci, every target
    points: pd.DataFrame  # v_operating_points_ci, pooled over benchmarks
    study: str | None
    seed_runs: pd.DataFrame  # the study's seeds and their runs
    spread: pd.DataFrame  # v_seed_spread of the study
    queries: dict[str, int] = field(default_factory=dict)
    risk_tests: pd.DataFrame = field(default_factory=pd.DataFrame)  # intervals rows risk_all_minus_alpha
    alpha: float = float("nan")  # the α the tables quote: the one the run compares at (eval_runs.default_alpha)

    @property
    def n_seeds(self) -> int:
        return int(self.seed_runs["seed"].nunique()) if len(self.seed_runs) else 0

    @property
    def n_resamples(self) -> int | None:
        """The paired resamples of the test queries (every unconditional interval keeps all of them)."""
        v = self.points["n_resamples"].dropna()
        return int(v.max()) if len(v) else None

    def test_sizes(self) -> tuple[int, int]:
        """(test queries for the risk, test queries some model solves): CR²'s operating points."""
        c = self.points[self.points["method"] == "cr2"]
        return int(c["n_risk"].max()), int(c["n"].max())


def banner(s: Scenario) -> str:
    """The label-source line every table of a scenario sits under."""
    if s.kind == "SIMULATED":
        return f"**SIMULATED labels `{s.source}` — not measured.**"
    return f"**MEASURED labels `{s.source}`.**"


# ---------------------------------------------------------------- a family of stored intervals
def interval_family(w: Words, df: pd.DataFrame, est: str, lower: str, upper: str) -> pd.DataFrame:
    """df with p (stored beside each interval, from its own resamples) and the test's stored family, Holm p and word
    (cr2.evaluation.families: decided once by the test's question, so every surface prints the same word): p_holm,
    verdict (for counting) and word (for the page); verdict_holm / word_holm are the same columns under the names
    the sections read. Nothing is corrected here."""
    d = df.copy()
    if "p_holm" not in d.columns or (len(d) and d["p_holm"].isna().all()):
        raise ValueError("these intervals were stored without their family and Holm p (schema < 9): run `cr2 run` on "
                         "the warehouse again")
    d["p"] = d["p_value"].astype(float)
    d["p_holm"] = d["p_holm"].astype(float)
    d["verdict"] = pd.Series([stored_word(lo, hi, q, v) for lo, hi, q, v in zip(d[lower], d[upper], d["p_holm"],
                                                                                 df["verdict"])],
                             index=d.index, dtype=object)
    d["word"] = [w.saving(lo, hi, q) for lo, hi, q in zip(d[lower], d[upper], d["p_holm"])]
    d["verdict_holm"], d["word_holm"] = d["verdict"], d["word"]
    return d


def holm_line(d: pd.DataFrame, label, family: str) -> str:
    """One sentence naming the family its words are corrected over (the stored family's size)."""
    sizes = sorted({int(v) for v in d["family_size"].dropna()}) if "family_size" in d.columns else []
    n = sizes[0] if len(sizes) == 1 else int(np.isfinite(d["p"].to_numpy(float)).sum())
    return f"Every word above is corrected by Holm over the {n} tests of {family}."


# ---------------------------------------------------------------- over seeds
def seed_family(w: Words, spread: pd.DataFrame) -> pd.DataFrame:
    """Rows of v_seed_spread with their 95 % t-interval over seeds (lo, hi), the t-test p, its Holm adjustment over
    the rows (the family read together) and the word (only from the t-interval and the Holm-adjusted p), all from
    cr2.evaluation.families.over_seeds."""
    d = spread.copy()
    fam = over_seeds(d)
    for col, src in (("lo", "lo"), ("hi", "hi"), ("p_t", "p"), ("p_t_holm", "p_holm")):
        d[col] = fam[src].to_numpy()
    d["seed_verdict"] = fam["verdict"].tolist()
    d["seed_word"] = [w.saving(lo, hi, q) for lo, hi, q in zip(d["lo"], d["hi"], d["p_t_holm"])]
    return d


def target_family(w: Words, s: Scenario) -> pd.DataFrame:
    """Every learned router's saving vs KNN at every target both reach (v_fixed_accuracy_ci), read together: one
    family (targets × routers) for Holm, the same on every section that counts or quotes these words."""
    d = s.fixed[s.fixed["method"].isin(learned())].sort_values(["method", "target"]).reset_index(drop=True)
    return interval_family(w, d, "saving_vs_knn_pct", "saving_lower", "saving_upper")


def router_family(w: Words, s: Scenario) -> pd.DataFrame:
    """Every learned router's mean saving vs KNN over the validation grid (v_mean_saving_ci), read together."""
    d = s.mean_saving[s.mean_saving["method"].isin(learned())].copy()
    d["order"] = d["method"].map(learned().index)
    d = d.sort_values("order").reset_index(drop=True)
    return interval_family(w, d, "mean_saving_vs_knn_pct", "saving_lower", "saving_upper")


def seed_routers(w: Words, s: Scenario) -> pd.DataFrame:
    """The mean saving vs KNN over seeds, per learned router, read together (Holm over the routers)."""
    if s.spread.empty:
        return pd.DataFrame()
    d = s.spread[(s.spread["metric"] == "mean_saving_vs_knn_pct") & s.spread["method"].isin(learned())].copy()
    d["order"] = d["method"].map(learned().index)
    return seed_family(w, d.sort_values("order").reset_index(drop=True))


def kept(v) -> str:
    return "–" if v is None or pd.isna(v) else f"{int(v):,}"
