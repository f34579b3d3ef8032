"""Typed settings of `cr2 label`, labelling with lm-evaluation-harness (the config's `labeling:` section or a
labeling YAML): backend, prompt templates, sandbox, chunking, sharding, task runner. Which label source a run
uses is configured in cr2/config/label_sources.py.

`LabelingSpec()` holds working defaults, so labeling runs without a `labeling:` section in the config;
`labeling_spec(config)` returns the config's section when it has one (see docs/labeling.md for the YAML).
The default templates mirror lm-evaluation-harness 0.4.13's standard tasks (tests/labeling pin them
against lm-eval's own YAML files):

| benchmark | lm-eval task it mirrors | output type | label |
|---|---|---|---|
| mmlu | `mmlu` (default, 0-shot) | multiple_choice, choices " A".." D" | `acc` |
| bbh  | `bbh_zeroshot_<task>` | generate_until "Q: {input}\\nA:" | `exact_match` after the `flexible-extract` filter |
| gpqa | `gpqa_main_zeroshot` | multiple_choice, choices " (A)".." (D)" | `acc` |
| mbpp | `mbpp` (3-shot, task ids 2–4) | generate_until until "[DONE]" | `pass_at_1`, run in cr2's sandbox |
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from cr2.config.base import Seed
from cr2.core.boundary import InputModel
from cr2.core.errors import ConfigError, InvalidValueError
from cr2.config.names import SourceName

BACKENDS = ("hf", "vllm", "api")


class _Strict(InputModel):
    """Unknown keys refused, numbers finite, bounds ordered (cr2.core.boundary.InputModel)."""


# ---------------------------------------------------------------- prompt templates
class TemplateSpec(_Strict):
    """One benchmark's lm-eval task template (Jinja over the doc fields listed in cr2/labels/lmeval/docs.py)."""

    description: str | None = Field(
        None, description="Jinja prefix of every prompt; None: lm-eval's per-task description (BBH) or none"
    )
    doc_to_text: str
    doc_to_choice: list[str] | None = Field(None, description="answer strings (multiple choice only)")
    doc_to_target: str | None = Field(None, description="target / few-shot answer (generative only)")
    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"
    num_fewshot: int = Field(0, ge=0)
    fewshot_task_ids: list[int] = Field(default_factory=list, description="MBPP task ids of the few-shot examples")
    until: list[str] | None = Field(None, description="stop sequences (generative only)")
    max_gen_toks: int | None = Field(None, ge=1, description="generation budget, tokens (generative only)")
    metric: Literal["acc", "acc_norm", "exact_match", "pass_at_1"]
    answer_filter: Literal["none", "strict-match", "flexible-extract"] = Field(
        "none", description="which lm-eval filter's score becomes the label (BBH reports two)"
    )


MMLU_TEMPLATE = TemplateSpec(
    description="The following are multiple choice questions (with answers) about {{subject}}.\n\n",
    doc_to_text="{{question.strip()}}\nA. {{choices[0]}}\nB. {{choices[1]}}\nC. {{choices[2]}}\nD. {{choices[3]}}\nAnswer:",
    doc_to_choice=["A", "B", "C", "D"],
    metric="acc",
)
GPQA_TEMPLATE = TemplateSpec(
    doc_to_text=(
        "What is the correct answer to this question:{{question}}\nChoices:\n(A) {{choices[0]}}\n(B) {{choices[1]}}\n"
        "(C) {{choices[2]}}\n(D) {{choices[3]}}\nAnswer:"
    ),
    doc_to_choice=["(A)", "(B)", "(C)", "(D)"],
    metric="acc",
)
BBH_TEMPLATE = TemplateSpec(
    description=None,
    doc_to_text="Q: {{input}}\nA:",
    doc_to_target="{{target}}",
    until=["</s>", "Q:", "<|im_end|>"],
    max_gen_toks=256,
    metric="exact_match",
    answer_filter="flexible-extract",
)
MBPP_TEMPLATE = TemplateSpec(
    doc_to_text=(
        "You are an expert Python programmer, and here is your task: {{text}} Your code should pass these tests:"
        "\n\n{{test_list[0]}}\n{{test_list[1]}}\n{{test_list[2]}}\n[BEGIN]\n"
    ),
    # few-shot examples show their code; the evaluated doc's target is the test code the metric runs
    doc_to_target="{% if is_fewshot is defined %}{{code}}\n[DONE]{% else %}{{reference}}{% endif %}",
    target_delimiter="",
    num_fewshot=3,
    fewshot_task_ids=[2, 3, 4],
    until=["[DONE]"],
    max_gen_toks=256,
    metric="pass_at_1",
)
DEFAULT_TEMPLATES: dict[str, TemplateSpec] = {
    "mmlu": MMLU_TEMPLATE, "bbh": BBH_TEMPLATE, "gpqa": GPQA_TEMPLATE, "mbpp": MBPP_TEMPLATE,
}


def output_type(benchmark: str) -> str:
    """lm-eval output type of a benchmark (multiple_choice or generate_until), from its dataset definition."""
    from cr2.config.dataset_defs import get_dataset

    return get_dataset(benchmark).output_type


def dataset_template(benchmark: str) -> TemplateSpec | None:
    """The lm-eval template a dataset definition declares (configs/datasets/<name>.yaml, lm_eval.template), or None."""
    from cr2.config.dataset_defs import get_dataset

    definition = get_dataset(benchmark)
    if definition.lm_eval.template is None:
        return None
    return TemplateSpec.model_validate({"metric": definition.lm_eval.metric, **definition.lm_eval.template})


# ---------------------------------------------------------------- backends
class HFBackendSpec(_Strict):
    """lm-eval's `hf` model (transformers)."""

    dtype: str = Field("auto", description="torch dtype: auto | bfloat16 | float16 | float32")
    device: str | None = Field(None, description="cuda, cuda:1, cpu; None: cuda if available else cpu")
    batch_size: int | Literal["auto"] = 8
    max_batch_size: int = Field(64, ge=1, description="auto: the largest batch the probe tries")
    max_length: int | None = Field(
        None, ge=1, description="context length, tokens; None: the model's, with `auto` batches probed at the "
                                "length each group of requests needs (cr2/labels/lmeval/hf_batching.py)")
    trust_remote_code: bool = False
    generation: Literal["static", "lm-eval"] = Field(
        "static", description="static: cr2's static-KV-cache generation (length buckets, stop strings on token ids, "
                              "finished rows refilled, a compiled decode step on CUDA; the same text as lm-eval's); "
                              "lm-eval: lm-eval's generate_until (transformers generate)")
    compile: Literal["auto", "on", "off"] = Field(
        "auto", description="static generation: compile the decode step (torch.compile, CUDA graphs); auto: on CUDA only")
    num_threads: int | None = Field(
        None, ge=1, description="CPU only: torch intra-op threads of the labeling process (None: torch's default). "
                                "On a shared machine 1 avoids OpenMP spin-wait contention, which can slow a small "
                                "model down a hundredfold"
    )


class VLLMBackendSpec(_Strict):
    """lm-eval's `vllm` model (needs the `vllm` extra and a GPU)."""

    dtype: str = Field("auto", description="auto | bfloat16 | float16")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs per model replica")
    data_parallel_size: int = Field(1, ge=1, description="replicas inside one lm-eval process (vLLM DP)")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_model_len: int | None = Field(8192, ge=1, description="context length, tokens (prompt + generation)")
    batch_size: int | Literal["auto"] = "auto"
    enable_prefix_caching: bool = True
    seed: Seed = 0
    extra_args: dict[str, Any] = Field(default_factory=dict, description="passed through to vllm.LLM")


class APIBackendSpec(_Strict):
    """lm-eval's `local-completions` model: an OpenAI-compatible /v1/completions endpoint (e.g. `vllm serve`)."""

    base_url: str = "http://127.0.0.1:8000/v1/completions"
    base_urls: dict[str, str] = Field(
        default_factory=dict, description="model id → its own endpoint (one server per model); others use base_url"
    )
    served_model: str | None = Field(None, description="model name the server knows; None: the model's hf_name")
    tokenizer: str | None = Field(None, description="HF tokenizer name/folder; None: the model's hf_name/path")
    tokenizer_backend: Literal["huggingface", "tiktoken", "remote", "none"] = "huggingface"
    tokenized_requests: bool = True
    num_concurrent: int = Field(8, ge=1, description="requests in flight at once")
    batch_size: int = Field(1, ge=1, description="prompts per request")
    max_retries: int = Field(3, ge=0)
    timeout_s: int = Field(300, ge=1)
    max_length: int = Field(8192, ge=1, description="context length, tokens")


# ---------------------------------------------------------------- sandbox and orchestration
class SandboxSpec(_Strict):
    """Limits of the MBPP sandbox (cr2/labels/lmeval/sandbox.py)."""

    timeout_s: float = Field(10.0, gt=0, description="wall clock per program, s")
    memory_mb: int = Field(1024, ge=32, description="RLIMIT_AS, MiB")
    max_processes: int = Field(8, ge=1, description="RLIMIT_NPROC")
    max_output_mb: int = Field(8, ge=1, description="RLIMIT_FSIZE (stdout/stderr included), MiB")
    user: str | None = Field("nobody", description="run programs as this user when cr2 runs as root")
    python: str | None = Field(None, description="interpreter for the programs; None: cr2's, or a system python3")


class TaskRunnerSpec(_Strict):
    """Where the (model, shard) tasks run."""

    kind: Literal["threads", "dask", "ray"] = "threads"
    max_workers: int = Field(1, ge=1, description="threads: concurrent (model, shard) tasks in this process")
    dask_address: str | None = Field(None, description="existing Dask scheduler, e.g. tcp://10.0.0.5:8786; None: local cluster")
    dask_n_workers: int | None = Field(None, ge=1, description="local cluster workers; None: one per GPU group (or 1)")
    dask_threads_per_worker: int = Field(1, ge=1)
    dask_processes: bool = Field(True, description="local cluster: one process per worker (False: threads, for tests)")
    gpus_per_worker: int = Field(0, ge=0, description="Dask: worker i sees GPUs [i·g, (i+1)·g); Ray: num_gpus per task")
    ray_address: str | None = Field(None, description="existing Ray cluster ('auto'); None: a local one")


class LabelingSpec(_Strict):
    """Settings of `cr2 label` (proposed config section `labeling:`)."""

    source: SourceName = Field("lm-eval", description="labels.source value these labels are written under")
    backend: Literal["hf", "vllm", "api"] = "hf"
    hf: HFBackendSpec = HFBackendSpec()
    vllm: VLLMBackendSpec = VLLMBackendSpec()
    api: APIBackendSpec = APIBackendSpec()
    model_paths: dict[str, str] = Field(
        default_factory=dict, description="model id → local weights folder (default: the model's hf_name on the hub)"
    )
    revisions: dict[str, str] = Field(default_factory=dict, description="model id → hub revision (default: main)")
    templates: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="benchmark → fields of TemplateSpec that override the lm-eval defaults"
    )
    chunk_size: int = Field(128, ge=1, description="queries per lm-eval call and per warehouse transaction")
    shards: int = Field(1, ge=1, description="shards per model: one Prefect task per (model, shard)")
    retries: int = Field(2, ge=0, description="Prefect retries of a (model, shard) task")
    retry_delay_s: float = Field(30.0, ge=0)
    seed: Seed = 0
    sandbox: SandboxSpec = SandboxSpec()
    task_runner: TaskRunnerSpec = TaskRunnerSpec()
    staging_dir: str | None = Field(None, description="chunk files and scratch; None: <warehouse home>/labeling")
    log_samples: bool = Field(
        True, description="keep lm-eval's per-sample log (prompt, generation or log-likelihoods, score) as JSONL "
                          "under <staging_dir>/samples/<run>/"
    )

    @model_validator(mode="after")
    def _templates_valid(self) -> "LabelingSpec":
        for name in self.templates:
            try:
                self.template(name)  # raises on an unknown benchmark or field, or a bad value
            except ConfigError as exc:
                raise InvalidValueError(f"templates.{name}: {exc}") from None
        return self

    def template(self, benchmark: str) -> TemplateSpec:
        """The benchmark's template: cr2's built-in one (mirroring lm-eval) or its dataset definition's
        `lm_eval.template`, with this spec's overrides applied."""
        from cr2.config.dataset_defs import available
        from cr2.core.errors import UnknownNameError

        base = DEFAULT_TEMPLATES.get(benchmark)
        if base is None:
            try:
                base = dataset_template(benchmark)
            except UnknownNameError as exc:
                raise ConfigError(str(exc)) from None
        if base is None:
            raise ConfigError(
                f"no lm-eval template for benchmark '{benchmark}': add `lm_eval.template` (doc_to_text, and "
                f"doc_to_choice or doc_to_target/until/max_gen_toks) to its dataset definition "
                f"(docs/new_benchmark.md); built in: {', '.join(DEFAULT_TEMPLATES)}; defined: {', '.join(available())}")
        override = self.templates.get(benchmark, {})
        return TemplateSpec.model_validate({**base.model_dump(), **override})

    def with_overrides(self, **changes: Any) -> "LabelingSpec":
        """A validated copy with top-level fields replaced (None values are ignored)."""
        data = self.model_dump()
        data.update({k: v for k, v in changes.items() if v is not None})
        return LabelingSpec.model_validate(data)


def labeling_spec(config: Any) -> LabelingSpec:
    """The config's `labeling` section if it has one, else the defaults."""
    spec = getattr(config, "labeling", None)
    if spec is None:
        return LabelingSpec()
    if isinstance(spec, LabelingSpec):
        return spec
    return LabelingSpec.model_validate(spec.model_dump() if isinstance(spec, BaseModel) else spec)
