"""cr2's lm-eval task definitions are lm-eval's standard tasks: prompts, choices, stop sequences, answer
extraction and few-shot examples pinned against the YAML and Python files of the installed lm-eval.

No model runs here; these are fast.
"""
from __future__ import annotations

import ast
from pathlib import Path

import lm_eval
import pandas as pd
import pytest
from lm_eval.tasks._yaml_loader import load_yaml

from cr2.config import REPO_ROOT
from cr2.core.errors import ConfigError, DataValidationError
from cr2.labels.lmeval.docs import build_docs, mbpp_fewshot_docs, render
from cr2.config.lmeval import DEFAULT_TEMPLATES, LabelingSpec
from cr2.labels.lmeval.taskdefs import task_config, task_config_hash

TASKS = Path(lm_eval.__file__).parent / "tasks"
DATA = REPO_ROOT / "data" / "benchmarks"


def _queries(benchmark: str, n: int = 3, subsets: list[str] | None = None) -> pd.DataFrame:
    df = pd.read_parquet(DATA / f"{benchmark}.parquet")
    if subsets:
        df = df[df["subset"].isin(subsets)]
    return df.groupby("subset", sort=False).head(n)


def _doc(benchmark: str, **kw) -> dict:
    return build_docs(benchmark, _queries(benchmark, **kw), LabelingSpec().template(benchmark),
                      _bbh_descriptions() if benchmark == "bbh" else None).iloc[0].to_dict()


def _bbh_descriptions():
    from cr2.labels.lmeval.bbh import descriptions

    return descriptions()


# ---------------------------------------------------------------- MMLU
def test_mmlu_matches_lm_eval_mmlu_default():
    lm = load_yaml(TASKS / "mmlu" / "default" / "_default_template_yaml", resolve_func=False)
    t = DEFAULT_TEMPLATES["mmlu"]
    assert t.doc_to_text == lm["doc_to_text"] and t.doc_to_choice == lm["doc_to_choice"]
    assert t.num_fewshot == 0 and t.metric == "acc" and lm["output_type"] == "multiple_choice"


def test_mmlu_description_per_subject_is_lm_eval_s():
    subjects = sorted(pd.read_parquet(DATA / "mmlu.parquet", columns=["subset"])["subset"].unique())
    assert len(subjects) == 57
    t = DEFAULT_TEMPLATES["mmlu"]
    for subject in subjects:
        lm = load_yaml(TASKS / "mmlu" / "default" / f"mmlu_{subject}.yaml", resolve_func=False, recursive=False)
        assert render(t.description, {"subject": subject.replace("_", " ")}) == lm["description"], subject


def test_mmlu_doc_answer_and_prompt():
    q = _queries("mmlu", subsets=["abstract_algebra"]).iloc[[0]]
    doc = build_docs("mmlu", q, DEFAULT_TEMPLATES["mmlu"]).iloc[0]
    assert doc["query_id"] == q["query_id"].iloc[0]
    assert doc["answer"] == "ABCD".index(q["target"].iloc[0])
    assert doc["description"].startswith("The following are multiple choice questions (with answers) about abstract algebra.")


# ---------------------------------------------------------------- GPQA
def test_gpqa_matches_lm_eval_gpqa_main_zeroshot():
    lm = load_yaml(TASKS / "gpqa" / "zeroshot" / "_gpqa_zeroshot_yaml", resolve_func=False)
    t = DEFAULT_TEMPLATES["gpqa"]
    assert t.doc_to_choice == lm["doc_to_choice"] and lm["num_fewshot"] == t.num_fewshot == 0
    doc = _doc("gpqa", subsets=["main"])
    # same prompt under lm-eval's field names (Question, choice1..4)
    theirs = render(lm["doc_to_text"], {"Question": doc["question"],
                                        **{f"choice{i + 1}": c for i, c in enumerate(doc["choices"])}})
    assert render(t.doc_to_text, doc) == theirs


def test_gpqa_choices_get_lm_eval_s_preprocess():
    from cr2.labels.lmeval.docs import gpqa_preprocess

    assert gpqa_preprocess("  a  b [title] c ") == "a b. c"


# ---------------------------------------------------------------- BBH
def test_bbh_matches_lm_eval_bbh_zeroshot():
    from cr2.labels.lmeval.bbh import lmeval_bbh_tasks
    from cr2.labels.lmeval.taskdefs import BBH_EXACT_MATCH

    tasks = lmeval_bbh_tasks()
    subsets = set(pd.read_parquet(DATA / "bbh.parquet", columns=["subset"])["subset"])
    assert subsets <= set(tasks) and len(subsets) == 27
    template = load_yaml(TASKS / "bbh" / "zeroshot" / "_zeroshot_template_yaml", resolve_func=False)
    t = DEFAULT_TEMPLATES["bbh"]
    assert t.until == template["generation_kwargs"]["until"] and t.doc_to_target == template["doc_to_target"]
    metric = template["metric_list"][0]
    assert {k: metric[k] for k in BBH_EXACT_MATCH} == BBH_EXACT_MATCH
    for name in subsets:
        assert tasks[name]["doc_to_text"] == t.doc_to_text, name


@pytest.mark.parametrize("subtask, response, expected", [
    ("boolean_expressions", " False, because not True is False.", "False"),
    ("date_understanding", " Let's see. The answer is (C).", "(C)"),
    ("multistep_arithmetic_two", " -12 is the result", "-12"),
    ("web_of_lies", " Yes.", "yes"),  # lm-eval lowercases here; exact_match ignores case
])
def test_bbh_answer_filter_is_lm_eval_s_flexible_extract(subtask, response, expected):
    from lm_eval.api.registry import get_filter

    from cr2.labels.lmeval.bbh import BBHAnswerFilter, lmeval_bbh_tasks

    doc = {"task": subtask, "input": "x", "target": expected}
    ours = BBHAnswerFilter().apply([[response]], [doc])[0][0]
    chain = next(f for f in lmeval_bbh_tasks()[subtask]["filter_list"] if f["name"] == "flexible-extract")["filter"]
    theirs = [[response]]
    for step in chain:
        fn = get_filter(step["function"])(**{k: v for k, v in step.items() if k != "function"})
        theirs = [r if isinstance(r, str) else list(r) for r in fn.apply(theirs, [doc])]
    assert ours == theirs[0] == expected  # lm-eval's chain ends with take_first: one string per doc


# ---------------------------------------------------------------- MBPP
def _lm_eval_mbpp_fewshot() -> list[dict]:
    """lm-eval's `list_fewshot_samples`, read without importing tasks/mbpp/utils.py (it loads code_eval from the hub)."""
    tree = ast.parse((TASKS / "mbpp" / "utils.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "list_fewshot_samples")
    ret = next(n for n in ast.walk(fn) if isinstance(n, ast.Return))
    return ast.literal_eval(ret.value)


def test_mbpp_matches_lm_eval_mbpp():
    lm = load_yaml(TASKS / "mbpp" / "mbpp.yaml", resolve_func=False)
    t = DEFAULT_TEMPLATES["mbpp"]
    assert t.doc_to_text == lm["doc_to_text"] and t.target_delimiter == lm["target_delimiter"]
    assert t.until == lm["generation_kwargs"]["until"] and t.num_fewshot == lm["num_fewshot"] == 3
    # the few-shot branch is lm-eval's; the evaluated doc's target adds MBPP's test_setup_code to the asserts
    fewshot_branch = lm["doc_to_target"].split("{% else %}")[0]
    assert t.doc_to_target.startswith(fewshot_branch)


def test_mbpp_fewshot_examples_are_lm_eval_s():
    ours = mbpp_fewshot_docs(pd.read_parquet(DATA / "mbpp.parquet"), [2, 3, 4])
    theirs = _lm_eval_mbpp_fewshot()
    assert [{k: d[k] for k in theirs[0]} for d in ours] == theirs


def test_mbpp_reference_runs_setup_then_asserts():
    df = pd.read_parquet(DATA / "mbpp.parquet")
    row = df[df["test_setup"].fillna("").str.strip() != ""].iloc[[0]]
    doc = build_docs("mbpp", row, DEFAULT_TEMPLATES["mbpp"]).iloc[0]
    assert doc["reference"].startswith(row["test_setup"].iloc[0]) and doc["reference"].endswith(row["tests"].iloc[0][-1])


def test_mbpp_metric_runs_the_completion_in_the_sandbox():
    from cr2.labels.lmeval.mbpp import pass_at_1

    tests = "assert add(2, 3) == 5"
    assert pass_at_1([tests], ["def add(a, b):\n    return a + b\n"], timeout_s=5) == 1.0
    assert pass_at_1([tests], ["def add(a, b):\n    return a - b\n"], timeout_s=5) == 0.0
    assert pass_at_1([tests], [["def add(a, b):\n    return a + b\n"]], timeout_s=5) == 1.0  # [resp] form


# ---------------------------------------------------------------- config, hashing, errors
def test_task_config_uses_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = task_config("mmlu", DEFAULT_TEMPLATES["mmlu"], Path("docs.parquet"), Path("cache"))
    assert Path(cfg["dataset_kwargs"]["data_files"]["test"]).is_absolute()
    assert Path(cfg["dataset_kwargs"]["cache_dir"]).is_absolute()


def test_task_config_hash_tracks_what_changes_a_label():
    spec = LabelingSpec()
    base = {b: task_config_hash(b, spec.template(b), spec.sandbox) for b in DEFAULT_TEMPLATES}
    assert len(set(base.values())) == 4
    changed = LabelingSpec(templates={"bbh": {"max_gen_toks": 64}})
    assert task_config_hash("bbh", changed.template("bbh"), changed.sandbox) != base["bbh"]
    assert task_config_hash("mmlu", changed.template("mmlu"), changed.sandbox) == base["mmlu"]
    tighter = LabelingSpec(sandbox={"timeout_s": 3})
    assert task_config_hash("mbpp", tighter.template("mbpp"), tighter.sandbox) != base["mbpp"]


@pytest.mark.parametrize("templates, message", [
    ({"gsm9k": {}}, "unknown benchmark 'gsm9k'"),
    ({"mmlu": {"doc_to_txt": "x"}}, "doc_to_txt"),
])
def test_bad_template_overrides_are_rejected(templates, message):
    with pytest.raises(Exception, match=message):
        LabelingSpec(templates=templates)


@pytest.mark.parametrize("templates, message", [
    ({"mmlu": {"metric": "exact_match"}}, "templates.mmlu.metric"),
    ({"mmlu": {"num_fewshot": 5}}, "templates.mmlu.num_fewshot"),  # examples would come from the chunk itself
    ({"bbh": {"answer_filter": "none"}}, "templates.bbh.answer_filter"),
])
def test_template_checks_name_the_field(templates, message):
    spec = LabelingSpec(templates=templates)
    benchmark = next(iter(templates))
    with pytest.raises(ConfigError, match=message):
        task_config(benchmark, spec.template(benchmark), Path("/x.parquet"), Path("/c"))


def test_docs_reject_malformed_queries():
    q = _queries("mmlu").iloc[[0]].copy()
    q["target"] = "E"
    with pytest.raises(DataValidationError, match="not one of"):
        build_docs("mmlu", q, DEFAULT_TEMPLATES["mmlu"])
