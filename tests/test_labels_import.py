"""Imported labels: accepted encodings are normalised; each kind of bad input fails with a clear message."""
from __future__ import annotations

import re

import pandas as pd
import pytest

from cr2.core.errors import DataValidationError
from cr2.labels.imported import validate_imported_labels

QUERIES = ["mmlu/anatomy/00000", "mmlu/anatomy/00001", "mbpp/11"]
MODELS = ["qwen3-1.7b", "qwen3-14b"]


def _frame(**cols) -> pd.DataFrame:
    base = {"query_id": QUERIES[:2] * 2, "model": ["qwen3-1.7b"] * 2 + ["qwen3-14b"] * 2, "correct": [1, 0, 1, 1]}
    base.update(cols)
    return pd.DataFrame(base)


@pytest.mark.parametrize("correct", [
    [True, False, True, True],
    [1, 0, 1, 1],
    [1.0, 0.0, 1.0, 1.0],  # lm-eval's per-sample acc
    ["1", "0", "true", " TRUE "],
    ["True", "False", "1.0", "1"],
])
def test_binary_encodings_are_accepted(correct):
    out = validate_imported_labels(_frame(correct=correct), QUERIES, MODELS)
    assert out["correct"].dtype == bool and out["correct"].tolist() == [True, False, True, True]
    assert list(out.columns) == ["query_id", "model_id", "correct", "output_tokens"]
    assert str(out["output_tokens"].dtype) == "Int64" and out["output_tokens"].isna().all()


def test_output_tokens_are_normalised_and_may_be_missing():
    out = validate_imported_labels(_frame(output_tokens=[12, None, 7.0, 0]), QUERIES, MODELS)
    assert out["output_tokens"].tolist()[0] == 12 and out["output_tokens"].isna().tolist() == [False, True, False, False]
    assert out["output_tokens"].tolist()[2:] == [7, 0]
    # model_id is accepted as the model column's name
    renamed = validate_imported_labels(_frame().rename(columns={"model": "model_id"}), QUERIES, MODELS)
    assert renamed["model_id"].tolist() == ["qwen3-1.7b"] * 2 + ["qwen3-14b"] * 2


@pytest.mark.parametrize("frame, message", [
    (_frame().drop(columns=["correct"]), r"lacks column correct; it needs query_id, model, correct"),
    (_frame().drop(columns=["query_id", "model"]), r"lacks columns query_id, model"),
    (_frame(model_id=["qwen3-1.7b"] * 4), "both 'model' and 'model_id'"),
    (_frame(query_id=["mmlu/anatomy/00000", "mmlu/anatomy/99999", "gsm8k/1", "mmlu/anatomy/00001"]),
     r"2 rows name query ids that are not in the warehouse, e.g. 'mmlu/anatomy/99999', 'gsm8k/1'"),
    (_frame(model=["qwen3-1.7b", "qwen3-32b", "qwen3-14b", "qwen3-14b"]),
     r"1 rows name models outside the pool, e.g. 'qwen3-32b'; known models: qwen3-1.7b, qwen3-14b"),
    (_frame(correct=[1, 2, 0, 1]), r"'correct' must be binary .* 1 rows are not, e.g. 2"),
    (_frame(correct=[1.0, 0.5, 0.0, 1.0]), r"'correct' must be binary .* e.g. 0.5"),
    (_frame(correct=["yes", "no", "1", "0"]), r"'correct' must be binary .* 2 rows are not, e.g. 'yes', 'no'"),
    (_frame(correct=[1, None, 0, 1]), r"'correct' has 1 null values"),
    (_frame(query_id=[QUERIES[0]] * 4),
     r"2 \(query_id, model\) pairs appear more than once \(4 rows\), e.g. \('mmlu/anatomy/00000', 'qwen3-1.7b'\)"),
    (_frame(output_tokens=[5, -3, 2, 1]), r"'output_tokens' must be ≥ 0; 1 rows are negative, e.g. -3"),
    (_frame(output_tokens=[5, 2.5, 2, 1]), r"'output_tokens' must hold whole numbers.* 2.5"),
    (_frame(output_tokens=[5, "many", 2, 1]), r"'output_tokens' must be a whole number .* e.g. 'many'"),
    (_frame(query_id=[None, QUERIES[1], QUERIES[0], QUERIES[1]]), r"'query_id' has 1 null values"),
])
def test_bad_imports_fail_with_a_message_naming_the_problem(frame, message):
    with pytest.raises(DataValidationError, match=message):
        validate_imported_labels(frame, QUERIES, MODELS)


def test_a_non_table_is_refused():
    with pytest.raises(DataValidationError, match="must be a table"):
        validate_imported_labels([{"query_id": QUERIES[0]}], QUERIES, MODELS)


# ------------------------------------------------------------------ ranges, types, and where
@pytest.mark.parametrize("tokens, shown", [
    ([5, 2147483653, 2, 1], "2147483653"),  # 2^31 + 5: was stored as a negative number (Int32 cast)
    ([5, 3_000_000_000, 2, 1], "3000000000"),
    ([5, 2 ** 40, 2, 1], str(2 ** 40)),  # was stored as 0
    ([5, 1e300, 2, 1], "1e+300"),  # was stored as 0
    ([5, "3000000000", 2, 1], "'3000000000'"),
    ([5, 10_000_001, 2, 1], "10000001"),
])
def test_f7_token_counts_beyond_the_bound_are_refused_naming_row_column_value(tokens, shown):
    with pytest.raises(DataValidationError, match=r"at most 10,000,000 tokens; 1 rows are larger \(first: row 2, "
                                                  rf"column 'output_tokens', value {re.escape(shown)}\)"):
        validate_imported_labels(_frame(output_tokens=tokens), QUERIES, MODELS)


def test_f7_the_bound_itself_and_64_bit_counts_below_it_are_exact():
    out = validate_imported_labels(_frame(output_tokens=[10_000_000, 0, "42", 7.0]), QUERIES, MODELS)
    assert out["output_tokens"].tolist() == [10_000_000, 0, 42, 7] and str(out["output_tokens"].dtype) == "Int64"


@pytest.mark.parametrize("column, values", [
    ("correct", [[True], [False, True], [1], [0]]),
    ("correct", [1, {"v": 1}, 0, 1]),
    ("output_tokens", [[3], [4], [5], [6]]),
    ("query_id", [[QUERIES[0]], QUERIES[1], QUERIES[0], QUERIES[1]]),
])
def test_f8_lists_and_mappings_are_refused_not_a_type_error(column, values):
    with pytest.raises(DataValidationError, match=rf"column '{column}' must hold one value per row, not lists.*"
                                                  rf"row \d, column '{column}', value"):
        validate_imported_labels(_frame(**{column: values}), QUERIES, MODELS)


def test_f8_a_parquet_list_column_is_refused(tmp_path):
    from cr2_warehouse.files import read_table_file

    path = tmp_path / "lists.parquet"
    _frame(correct=[[True], [False], [True], [True]]).to_parquet(path, index=False)
    with pytest.raises(DataValidationError, match=r"row 1, column 'correct', value \[True\]"):
        validate_imported_labels(read_table_file(path), QUERIES, MODELS)


def test_booleans_are_not_token_counts():
    with pytest.raises(DataValidationError, match=r"not true/false.*row 1, column 'output_tokens', value True"):
        validate_imported_labels(_frame(output_tokens=[True, 3, 4, 5]), QUERIES, MODELS)


@pytest.mark.parametrize("frame, where", [
    (_frame(query_id=["mmlu/anatomy/00000", "mmlu/anatomy/99999", "gsm8k/1", "mmlu/anatomy/00001"]),
     "row 2, column 'query_id', value 'mmlu/anatomy/99999'"),
    (_frame(model=["qwen3-1.7b", "qwen3-32b", "qwen3-14b", "qwen3-14b"]), "row 2, column 'model', value 'qwen3-32b'"),
    (_frame(correct=[1, 2, 0, 1]), "row 2, column 'correct', value 2"),
    (_frame(correct=[1.0, 0.5, 0.0, 1.0]), "row 2, column 'correct', value 0.5"),
    (_frame(correct=["1", "0", "yes", "0"]), "row 3, column 'correct', value 'yes'"),
    (_frame(correct=[1, None, 0, 1]), "row 2, column 'correct', value null"),
    (_frame(query_id=[QUERIES[0]] * 4), "row 2, column 'query_id', value 'mmlu/anatomy/00000'"),
    (_frame(output_tokens=[5, -3, 2, 1]), "row 2, column 'output_tokens', value -3"),
    (_frame(output_tokens=[5, 2.5, 2, 1]), "row 2, column 'output_tokens', value 2.5"),
    (_frame(output_tokens=[5, "many", 2, 1]), "row 2, column 'output_tokens', value 'many'"),
    (_frame(query_id=[QUERIES[0], None, QUERIES[0], QUERIES[1]]), "row 2, column 'query_id', value null"),
])
def test_every_row_level_refusal_names_row_column_and_value(frame, where):
    with pytest.raises(DataValidationError) as info:
        validate_imported_labels(frame, QUERIES, MODELS)
    assert where in str(info.value)
