"""What goes in: benchmarks, the tokenizer, splits and the frozen encoder."""
from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from cr2.config.dataset_defs import DatasetDef
from cr2.core.errors import InvalidValueError
from cr2.config.base import Seed, StrictModel


class BenchmarkSpec(StrictModel):
    """A benchmark selected for the run: its dataset definition (configs/datasets/) plus this config's choices."""

    enabled: bool = True
    definition: DatasetDef = Field(description="the dataset definition; in YAML a path to a definition file, "
                                                 "default configs/datasets/<name>.yaml")
    file: str | None = Field(None, description="Parquet file, relative to data_dir (None: the definition's)")
    subsets: list[str] | Literal["all"] | None = Field(
        None, description="subsets to keep: a list, 'all', or None for the definition's default")

    @property
    def data_file(self) -> str:
        return self.file if self.file is not None else self.definition.file

    @property
    def selected_subsets(self) -> list[str] | None:
        """Subsets to keep, None for all."""
        if self.subsets == "all":
            return None
        return self.subsets if self.subsets is not None else self.definition.subsets


class TokenizerSpec(StrictModel):
    kind: Literal["qwen", "path"] = "qwen"
    path: str | None = Field(None, description="a Hugging Face tokenizer folder; overrides the packaged Qwen vocabulary")


class SplitSpec(StrictModel):
    train: float = Field(gt=0, lt=1)
    val: float = Field(gt=0, lt=1)
    test: float = Field(gt=0, lt=1)
    dev_fraction: float = Field(gt=0, lt=1, description="share of train held out as dev for checkpoint selection")
    seed: Seed = 0
    min_stratum: int = Field(20, ge=1, description="subsets smaller than this are stratified at benchmark level")

    @model_validator(mode="after")
    def _sum(self) -> "SplitSpec":
        if not math.isclose(self.train + self.val + self.test, 1.0, abs_tol=1e-9):
            raise InvalidValueError(f"train + val + test must be 1 (got {self.train + self.val + self.test})")
        return self


class EmbeddingSpec(StrictModel):
    encoder: str = "all-MiniLM-L6-v2"
    backend: Literal["onnx", "torch", "onnx-int8"] = Field(
        "onnx", description="runtime of the same network: onnxruntime over a cached ONNX export (default, ≈ 1.9× "
        "faster on CPU) or torch; onnx-int8 (opt-in) runs a dynamically int8-quantised copy, a slightly different "
        "function (benchmarks/bench_device.py measures its effect on routing)")
    batch_size: int = Field(32, ge=1)
    max_seq_length: int = Field(256, ge=8, le=512)

    @property
    def store_name(self) -> str:
        """The encoder name the warehouse keeps embeddings under: onnx and torch compute the same function
        (≈ 2e-7 apart) and share it; onnx-int8 is a different function and gets its own, so they never mix."""
        return f"{self.encoder}+int8" if self.backend == "onnx-int8" else self.encoder
