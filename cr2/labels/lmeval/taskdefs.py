"""cr2's lm-eval task definitions: one config dict per benchmark, reading an exported Parquet of docs.

Configs are passed to `lm_eval.simple_evaluate(tasks=[dict, ...])` with `TaskManager(include_defaults=False)`
(no scan of lm-eval's 14k built-in tasks, no dataset download). `data_files` and the datasets cache are
absolute paths: lm-eval resolves relative ones against the CWD, not the config.

The task config hash covers everything that can change a label — the template, the doc layout, the BBH
filter chains and descriptions lm-eval ships, the MBPP few-shot examples and the sandbox limits — and
nothing that cannot (file paths). It is recorded in `label_runs.task_config_hash` and is part of the run id.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from cr2.core.errors import ConfigError
from cr2.labels.lmeval.docs import DOCS_VERSION
from cr2.config.lmeval import SandboxSpec, TemplateSpec, output_type as benchmark_output_type

# lm-eval's bbh zeroshot template metric (tasks/bbh/zeroshot/_zeroshot_template_yaml)
BBH_EXACT_MATCH: dict[str, Any] = {
    "ignore_case": True,
    "regexes_to_ignore": ["\\.$", ",", "\n", "\\\\", '"'],
}
BBH_FILTERS = ("strict-match", "flexible-extract")


def task_name(benchmark: str) -> str:
    return f"cr2_{benchmark}"


def label_filter(benchmark: str, template: TemplateSpec) -> str:
    """The lm-eval filter whose score becomes the label ('none' unless the benchmark reports several)."""
    if benchmark == "bbh":
        if template.answer_filter not in BBH_FILTERS:
            raise ConfigError(f"templates.bbh.answer_filter must be one of {BBH_FILTERS} (got '{template.answer_filter}')")
        return template.answer_filter
    if template.answer_filter != "none":
        raise ConfigError(f"templates.{benchmark}.answer_filter: only bbh has answer filters (got '{template.answer_filter}')")
    return "none"


def _check_template(benchmark: str, t: TemplateSpec) -> str:
    output_type = benchmark_output_type(benchmark)
    if output_type == "multiple_choice":
        if not t.doc_to_choice:
            raise ConfigError(f"templates.{benchmark}: a multiple-choice template needs doc_to_choice")
        if t.metric not in ("acc", "acc_norm"):
            raise ConfigError(f"templates.{benchmark}.metric must be acc or acc_norm (got '{t.metric}')")
    else:
        if t.doc_to_target is None or t.max_gen_toks is None or t.until is None:
            raise ConfigError(f"templates.{benchmark}: a generative template needs doc_to_target, until and max_gen_toks")
        from cr2.config.dataset_defs import get_dataset

        expected = get_dataset(benchmark).lm_eval.metric
        if t.metric != expected:
            raise ConfigError(f"templates.{benchmark}.metric must be {expected} (got '{t.metric}')")
    if benchmark != "mbpp" and t.num_fewshot:
        # lm-eval would draw the examples from the chunk's own docs: prompts would depend on the chunking
        raise ConfigError(
            f"templates.{benchmark}.num_fewshot: few-shot prompts need a fixed example set, which cr2 has only "
            f"for mbpp (fewshot_task_ids); set num_fewshot: 0 for {benchmark}"
        )
    if t.metric == "pass_at_1" and benchmark != "mbpp":
        raise ConfigError(f"templates.{benchmark}.metric: pass_at_1 runs MBPP's sandboxed tests; a dataset-defined "
                          "benchmark scores generations with exact_match")
    if benchmark == "mbpp" and t.num_fewshot != len(t.fewshot_task_ids):
        raise ConfigError(
            f"templates.mbpp: num_fewshot ({t.num_fewshot}) must equal the number of fewshot_task_ids ({len(t.fewshot_task_ids)})"
        )
    label_filter(benchmark, t)
    return output_type


def _sandbox_kwargs(sandbox: SandboxSpec) -> dict[str, Any]:
    return {
        "timeout_s": sandbox.timeout_s, "memory_mb": sandbox.memory_mb, "max_processes": sandbox.max_processes,
        "max_output_mb": sandbox.max_output_mb, "user": sandbox.user, "python": sandbox.python,
    }


def task_config(
    benchmark: str,
    template: TemplateSpec,
    docs_path: Path,
    cache_dir: Path,
    sandbox: SandboxSpec | None = None,
    fewshot: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The lm-eval task config dict of `benchmark` over the docs Parquet at `docs_path`."""
    output_type = _check_template(benchmark, template)
    cfg: dict[str, Any] = {
        "task": task_name(benchmark),
        "dataset_path": "parquet",
        "dataset_kwargs": {"data_files": {"test": str(Path(docs_path).resolve())}, "cache_dir": str(Path(cache_dir).resolve())},
        "test_split": "test",
        "output_type": output_type,
        "description": "description",  # a doc field: rendered per doc in cr2.labels.lmeval.docs
        "doc_to_text": template.doc_to_text,
        "target_delimiter": template.target_delimiter,
        "fewshot_delimiter": template.fewshot_delimiter,
        "num_fewshot": template.num_fewshot,
        "metadata": {"version": 1.0, "cr2_docs_version": DOCS_VERSION},
    }
    if output_type == "multiple_choice":
        cfg["doc_to_choice"] = list(template.doc_to_choice or [])
        cfg["doc_to_target"] = "answer"
        cfg["metric_list"] = [
            {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
            {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
        ]
        return cfg
    cfg["doc_to_target"] = template.doc_to_target
    cfg["generation_kwargs"] = {
        "until": list(template.until or []), "do_sample": False, "temperature": 0.0, "max_gen_toks": template.max_gen_toks,
    }
    if benchmark == "bbh":
        from cr2.labels.lmeval.bbh import BBHAnswerFilter

        cfg["filter_list"] = [
            {"name": "strict-match", "filter": [{"function": "take_first"}]},
            {"name": "flexible-extract", "filter": [{"function": BBHAnswerFilter}, {"function": "take_first"}]},
        ]
        cfg["metric_list"] = [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True, **BBH_EXACT_MATCH}]
    elif benchmark == "mbpp":
        from cr2.labels.lmeval.mbpp import pass_at_1

        cfg["unsafe_code"] = True
        cfg["metric_list"] = [
            {"metric": pass_at_1, "aggregation": "mean", "higher_is_better": True, **_sandbox_kwargs(sandbox or SandboxSpec())}
        ]
        if template.num_fewshot:
            if not fewshot or len(fewshot) < template.num_fewshot:
                raise ConfigError(f"mbpp needs {template.num_fewshot} few-shot examples, got {len(fewshot or [])}")
            cfg["fewshot_config"] = {"sampler": "first_n", "samples": list(fewshot)}
    else:  # a benchmark with a dataset definition: exact match of the generation against doc_to_target
        cfg["metric_list"] = [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}]
    return cfg


def task_fingerprint(
    benchmark: str,
    template: TemplateSpec,
    sandbox: SandboxSpec | None = None,
    fewshot: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A JSON-able description of everything in the task that can change a label."""
    fp: dict[str, Any] = {
        "benchmark": benchmark, "output_type": benchmark_output_type(benchmark), "docs_version": DOCS_VERSION,
        "template": template.model_dump(mode="json"),
    }
    if benchmark == "bbh":
        from cr2.labels.lmeval import bbh

        fp["metric"] = BBH_EXACT_MATCH
        fp["filters"] = bbh.filter_fingerprint(template.answer_filter)
        if template.description is None:
            fp["descriptions"] = bbh.descriptions()
    if benchmark == "mbpp":
        from cr2.labels.lmeval.sandbox import JUDGE_VERSION

        fp["sandbox"] = _sandbox_kwargs(sandbox or SandboxSpec())
        fp["judge"] = JUDGE_VERSION  # how a verdict is reached (a new judge labels again)
        fp["fewshot"] = fewshot or []
    return fp


def task_config_hash(
    benchmark: str,
    template: TemplateSpec,
    sandbox: SandboxSpec | None = None,
    fewshot: list[dict[str, Any]] | None = None,
) -> str:
    """sha256 (16 hex) of `task_fingerprint`."""
    blob = json.dumps(task_fingerprint(benchmark, template, sandbox, fewshot), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
