"""Dataset definitions: one YAML per benchmark under configs/datasets/ says everything cr2 needs to know.

A definition names the data file, the default subsets, the answer type (multiple-choice or generative), the
number of options, the prompt whose tokens are L_in(x), the lm-eval metric its labels use, and the default
output length L_out when no label run recorded one. Ingest, validation, the label simulator, the labeler and
the cost model all read it, so adding a benchmark is one YAML plus its data file (docs/new_benchmark.md).

Lookup is by name: configs/datasets/<name>.yaml, or a definition registered from another folder (a config's
`benchmarks.<name>.definition: path/to/file.yaml` registers it when the config loads).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from cr2.core.boundary import InputModel, load_yaml_file, shown
from cr2.core.errors import ConfigError, InvalidValueError, did_you_mean
from cr2.config.shipped import CONFIG_DIR

DATASETS_DIR = CONFIG_DIR / "datasets"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class _Strict(InputModel):
    """Unknown keys refused, numbers finite, bounds ordered (cr2.core.boundary.InputModel)."""


class PromptSpec(_Strict):
    """The zero-shot prompt whose tokens are L_in(x): `template` with {question} (stripped) and {choices},
    where {choices} joins one `choice` line per option ({letter}, {text}); generative benchmarks have none."""

    template: str = "{question}{choices}\nAnswer:"
    choice: str = "\n{letter}. {text}"


class OutputLengthDist(_Strict):
    """Log-normal output length of the label simulator on this benchmark (device model)."""

    median_tokens: float = Field(gt=0)
    sigma: float = Field(ge=0)
    max_tokens: int = Field(ge=1)


class SimulatedSpec(_Strict):
    """What the label simulator needs for this benchmark (only used by simulated label sources)."""

    output_tokens: OutputLengthDist
    accuracy_pct: dict[str, float] = Field(
        default_factory=dict, description="target accuracy per model name (%), for models the accuracy file lacks")


class LmEvalSpec(_Strict):
    """How `cr2 label` scores this benchmark with lm-evaluation-harness."""

    metric: Literal["acc", "acc_norm", "exact_match", "pass_at_1"]
    template: dict[str, Any] | None = Field(
        None, description="fields of cr2.config.lmeval.TemplateSpec; None: cr2's built-in template of this benchmark")


class DatasetDef(_Strict):
    """One dataset definition (configs/datasets/<name>.yaml)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="benchmark id: query ids start with '<name>/'")
    description: str = ""
    file: str = Field(description="Parquet file of the questions, relative to the config's data_dir (or absolute)")
    subsets: list[str] | None = Field(None, description="subsets kept by default (None: all)")
    answer: Literal["multiple-choice", "generative", "closed-set"] = Field(
        description="multiple-choice: lettered options, target a letter; generative: free text, target the exact "
        "answer; closed-set: the answer is one of a fixed set of strings that are not letters ('(A)', 'valid', '12'), "
        "the query's own `choices` or else the entry's `answer_set`; target one of them")
    choices: int | None = Field(None, ge=2, le=len(LETTERS), description="options per question (max; multiple "
                                "choice; closed-set: optional bound on the query's own choices)")
    answer_set: list[str] | None = Field(None, min_length=2, description="closed-set: the answers every query "
                                         "chooses from when it carries no `choices` of its own")
    min_choices: int | None = Field(None, ge=2, description="fewest options a question may have (default: choices)")
    requires_tests: bool = Field(False, description="every query must carry ≥ 1 test (code benchmarks)")
    target: Literal["required", "optional"] = Field(
        "required", description="required: every query carries its gold answer (non-empty); optional: a query may "
        "have none (null target): a benchmark whose labels are imported (`cr2 labels import`, labels.measured) — "
        "`cr2 label` cannot score such queries (docs/your_pool.md)")
    prompt: PromptSpec = PromptSpec()
    lm_eval: LmEvalSpec
    default_output_tokens: float = Field(gt=0, description="L_out when no label run recorded it, tokens")
    simulated: SimulatedSpec | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "DatasetDef":
        if self.answer == "multiple-choice":
            if self.choices is None:
                raise InvalidValueError("a multiple-choice benchmark needs `choices` (the number of options)")
            if self.min_choices is not None and self.min_choices > self.choices:
                raise InvalidValueError(f"min_choices ({self.min_choices}) exceeds choices ({self.choices})")
            if self.lm_eval.metric not in ("acc", "acc_norm"):
                raise InvalidValueError("lm_eval.metric of a multiple-choice benchmark is acc or acc_norm, not "
                                        f"{shown(self.lm_eval.metric)}")
        elif self.answer == "closed-set":
            if self.lm_eval.metric != "exact_match":
                raise InvalidValueError(f"lm_eval.metric of a closed-set benchmark is exact_match (the generated answer "
                                        f"must equal the target string), not {shown(self.lm_eval.metric)}")
            if self.answer_set is not None and (len(set(self.answer_set)) != len(self.answer_set)
                                                or any(not a.strip() for a in self.answer_set)):
                raise InvalidValueError(f"answer_set must hold distinct non-empty answers (got "
                                        f"{shown(self.answer_set)})")
            if self.min_choices is not None and self.choices is not None and self.min_choices > self.choices:
                raise InvalidValueError(f"min_choices ({self.min_choices}) exceeds choices ({self.choices})")
        else:
            if self.choices is not None or self.min_choices is not None or self.answer_set is not None:
                raise InvalidValueError("a generative benchmark has no `choices` or `answer_set`")
            if self.lm_eval.metric not in ("exact_match", "pass_at_1"):
                raise InvalidValueError(f"lm_eval.metric of a generative benchmark is exact_match or pass_at_1, "
                                 f"not {shown(self.lm_eval.metric)}")
        return self

    @property
    def multiple_choice(self) -> bool:
        return self.answer == "multiple-choice"

    @property
    def letters(self) -> str:
        """Option letters in order (A, B, …), as many as `choices`; empty for generative benchmarks."""
        return LETTERS[: self.choices or 0]

    @property
    def closed_set(self) -> bool:
        return self.answer == "closed-set"

    @property
    def choice_range(self) -> tuple[int, int]:
        """(fewest, most) options a question may have; (0, 0) for generative benchmarks and for closed-set ones
        without a `choices` bound."""
        if self.multiple_choice or (self.closed_set and self.choices is not None):
            return (self.min_choices or self.choices, self.choices)
        return (0, 0)

    @property
    def output_type(self) -> str:
        """lm-eval's output type: multiple_choice or generate_until."""
        return "multiple_choice" if self.multiple_choice else "generate_until"

    def prompt_text(self, question: str, choices) -> str:
        """The zero-shot prompt whose tokens are L_in(x): question, lettered options (multiple choice), 'Answer:'."""
        options = ""
        if choices is not None and len(choices):
            options = "".join(self.prompt.choice.format(letter=letter, text=text)
                              for letter, text in zip(LETTERS, choices))
        return self.prompt.template.format(question=question.strip(), choices=options)


# definitions registered from outside configs/datasets (by path), name → definition
_REGISTERED: dict[str, DatasetDef] = {}


def read_definition(path: str | Path) -> DatasetDef:
    """Load and validate one dataset definition (YAML); ConfigError naming the file and key on a problem."""
    path = Path(path)
    try:
        data = load_yaml_file(path)
    except InvalidValueError as exc:  # missing, not a regular file, too large, malformed YAML
        raise ConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a benchmark definition is a mapping of settings (see configs/datasets/mmlu.yaml)")
    data.setdefault("name", path.stem)
    if data["name"] != path.stem:
        raise ConfigError(f"{path}: name {shown(data['name'])} must equal the file name '{path.stem}'")
    try:
        return DatasetDef.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{path}: invalid benchmark definition: {problems} (docs/new_benchmark.md)") from None


def available() -> list[str]:
    """Names of every benchmark with a dataset definition (configs/datasets/ and registered definitions)."""
    return sorted({p.stem for p in DATASETS_DIR.glob("*.yaml")} | set(_REGISTERED))


def get_dataset(name: str) -> DatasetDef:
    """The dataset definition of `name`; UnknownNameError with a suggestion on a miss."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    path = DATASETS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise did_you_mean("benchmark", name, available())
    return read_definition(path)


def register(definition: DatasetDef) -> DatasetDef:
    """Make a definition from another folder findable by name (the labeler looks benchmarks up by name)."""
    _REGISTERED[definition.name] = definition
    return definition


def resolve(name: str, ref: str | Path | None = None) -> DatasetDef:
    """The definition of benchmark `name`: from the YAML at `ref` (registered), else the shipped one's."""
    if ref is None:
        return get_dataset(name)
    definition = read_definition(ref)
    if definition.name != name:
        raise ConfigError(f"benchmarks.{name}.definition: {ref} defines '{definition.name}', not '{name}'")
    return register(definition)
