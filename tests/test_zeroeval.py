"""The ZeroEval data (issue 27): the shipped copies, the GSM8K / CRUXEval / MATH-L5 benchmark files derived from
them, and their catalogue entries."""
from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from cr2 import catalogue
from cr2.config import REPO_ROOT
from cr2.errors import DataValidationError
from cr2.zeroeval import BENCHMARKS, zeroeval_benchmark_frame

ZE = REPO_ROOT / "data" / "measured" / "zeroeval"
SHA256 = {"zeroeval_questions.parquet": "9205446913587f3f70377aa42dfc50a2098786e36bbf00cd0c4ea40ae0c20dc4",
          "zeroeval_outputs.parquet": "60df307ee9709a1fe7e7b6794f991781d6c1170202a11203aa7deac41383143f"}
COUNTS = {"gsm8k": 1319, "cruxeval": 800, "math_l5": 721}  # data/measured/zeroeval/README.md


@pytest.fixture(scope="module")
def questions() -> pd.DataFrame:
    return pd.read_parquet(ZE / "zeroeval_questions.parquet")


def test_zeroeval_files_are_byte_identical_copies():
    for name, digest in SHA256.items():
        assert hashlib.sha256((ZE / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmark_file_is_the_conversion_of_the_questions(questions, name):
    shipped = pd.read_parquet(REPO_ROOT / "data" / "benchmarks" / f"{name}.parquet")
    fresh = zeroeval_benchmark_frame(questions, name)
    assert len(shipped) == len(fresh) == COUNTS[name] and shipped["query_id"].is_unique
    for col in ("query_id", "subset", "question", "target", "source_benchmark", "source_item_id"):
        assert (shipped[col].to_numpy() == fresh[col].to_numpy()).all(), col
    assert shipped["target"].str.strip().ne("").all()
    definition = catalogue.get_benchmark(name)
    assert definition.answer == "generative" and definition.file == f"benchmarks/{name}.parquet"


def test_gsm8k_target_is_the_final_number(questions):
    frame = zeroeval_benchmark_frame(questions, "gsm8k")
    assert frame["target"].iloc[0] == "18"  # Janet's ducks: "#### 18" in openai/gsm8k
    assert frame["target"].str.fullmatch(r"-?[\d,]+(\.\d+)?").all()


def test_conversion_rejects_missing_answers_and_repeated_ids(questions):
    bad = questions.copy()
    bad.loc[bad["benchmark"] == "MATH-L5", "answer"] = bad.loc[bad["benchmark"] == "MATH-L5", "answer"].where(
        bad.loc[bad["benchmark"] == "MATH-L5", "item_id"] != "3", "  ")
    with pytest.raises(DataValidationError, match="no gold answer"):
        zeroeval_benchmark_frame(bad, "math_l5")
    dup = pd.concat([questions, questions[questions["item_id"] == "crux-test-#5"]])
    with pytest.raises(DataValidationError, match="more than once"):
        zeroeval_benchmark_frame(dup, "cruxeval")
