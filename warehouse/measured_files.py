"""Reading the measured MMLU-Pro files (data/measured/) and the sim-to-real embedding cache.

All file I/O of the simulator check lives here; cr2/studies/simcheck.py only sees arrays. The Parquet files are read
by the bounded table reader (cr2.core.boundary.read_table_file), like every other table file.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from cr2.core.boundary import read_table_file, shown
from cr2.core.errors import DataValidationError

QUESTIONS_FILE = "measured/mmlu_pro_questions.parquet"
OUTPUTS_FILE = "measured/mmlu_pro_outputs.parquet"


@dataclass(frozen=True)
class MeasuredPool:
    """Measured correctness of a pool on MMLU-Pro, questions in file order."""

    question_id: np.ndarray  # [n] str
    category: np.ndarray  # [n] str, one of 14
    n_choices: np.ndarray  # [n] int, number of options (≤ 10)
    texts: list[str]  # [n] router text (question + lettered options), what the encoder embeds
    model_ids: tuple[str, ...]  # pool order (device first)
    correct: np.ndarray  # [n, M] bool, measured y_m(x) (an unextracted answer counts as wrong)
    generated_chars: np.ndarray  # [n, M] float, length of the generated answer, characters


def read_measured_pool(data_dir: str | Path, measured_names: dict[str, str]) -> MeasuredPool:
    """The measured labels of `measured_names` ({model_id: name in the outputs file}, pool order)."""
    from cr2.inputs.embed import router_text

    data_dir = Path(data_dir)
    qpath, opath = data_dir / QUESTIONS_FILE, data_dir / OUTPUTS_FILE
    for p in (qpath, opath):
        if not p.is_file():
            raise DataValidationError(f"{p}: measured MMLU-Pro file not found; copy it from the source set "
                                      "(data/README.md, 'Measured MMLU-Pro outputs')")
    q = read_table_file(qpath).sort_values("question_id", kind="stable").reset_index(drop=True)
    out = read_table_file(opath, columns=["model", "question_id", "correct", "generated_chars"])
    known = set(out["model"].unique())
    missing = [name for name in measured_names.values() if name not in known]
    if missing:
        have = ", ".join(shown(str(k), 40) for k in sorted(map(str, known))[:8])
        raise DataValidationError(f"{opath}: no outputs for model(s) {missing}; the file has {have} …")
    out = out[out["model"].isin(set(measured_names.values()))]
    wide = out.pivot(index="question_id", columns="model", values="correct")
    chars = out.pivot(index="question_id", columns="model", values="generated_chars")
    names = list(measured_names.values())
    wide = wide.reindex(index=q["question_id"], columns=names)
    chars = chars.reindex(index=q["question_id"], columns=names)
    if wide.isna().any().any():
        bad = wide.columns[wide.isna().any()].tolist()
        raise DataValidationError(f"{opath}: model(s) {bad} lack outputs for some of the {len(q)} questions")
    options = [json.loads(s) for s in q["options_json"]]
    texts = [router_text(question, opts) for question, opts in zip(q["question"], options)]
    return MeasuredPool(
        question_id=q["question_id"].astype(str).to_numpy(),
        category=q["category"].astype(str).to_numpy(),
        n_choices=np.array([len(o) for o in options], dtype=np.int64),
        texts=texts,
        model_ids=tuple(measured_names),
        correct=wide.to_numpy(dtype=bool),
        generated_chars=chars.to_numpy(dtype=np.float64),
    )


def read_measured_correctness(data_dir: str | Path) -> tuple[list[str], np.ndarray]:
    """(model names of the outputs file, [n_questions, n_models] float: 1 right, 0 wrong, NaN no output) of every
    model on every MMLU-Pro question, question ids sorted; the extraction rule of docs/measured.md (a null `pred`
    counts as wrong)."""
    opath = Path(data_dir) / OUTPUTS_FILE
    if not opath.is_file():
        raise DataValidationError(f"{opath}: measured MMLU-Pro outputs not found (data/README.md, 'Measured MMLU-Pro "
                                  "outputs')")
    out = read_table_file(opath, columns=["model", "question_id", "pred", "correct"])
    out["ok"] = (out["correct"].fillna(False).astype(bool) & out["pred"].notna()).astype(np.float64)
    wide = out.pivot(index="question_id", columns="model", values="ok").sort_index()
    return [str(c) for c in wide.columns], wide.to_numpy(dtype=np.float64)


def text_keys(texts: Sequence[str]) -> np.ndarray:
    """[n] str: sha256 (first 32 hex) of each text, the key of its cached embedding."""
    return np.array([hashlib.sha256(t.encode("utf-8")).hexdigest()[:32] for t in texts])
