"""Greedy generation on a static KV cache for the hf backend: length buckets, token-id stops, rows refilled.

lm-eval's `generate_until` runs transformers' `generate` per padded batch with one stopping criterion per stop
string; each criterion decodes the tail of every row after every step, a batch runs until its slowest row
stops, and every step is an eager forward (on a GPU ≈ 30 ms of kernel dispatch for a 1.7B model, whatever the
batch). `StaticGenerator` produces the same greedy tokens another way:

- **length buckets.** Requests are grouped by prompt length, padded on the left to the bucket's length P (a
  power of two, at least 64). A bucket's rows share one KV cache of P + max_gen_toks slots per row, so every
  decode step of the bucket has one shape: [B, 1] tokens against [B, heads, P + G, dim] keys and values. A
  bucket too small to fill a batch joins the longer bucket before it (its rows fill that bucket's free slots),
  so a call runs as few passes as its requests allow and short prompts do not pay a long cache unless that
  saves a pass.
- **per-row cache positions.** Row b writes its next key/value at its own slot (P + tokens it generated) and
  attends to its own prompt and generation only (a per-row mask), so a finished row's slot can take a waiting
  request at any step: its prompt is prefilled (one forward of all rows taken in at once) into the slot's first
  P positions and decoding goes on. A row stops at its own end — end-of-sequence, `max_gen_toks` or a stop
  string (cr2/labels/lmeval/stops.py) — never at its batch's.
- **a compiled decode step on CUDA.** The step (forward + argmax) is compiled with torch.compile
  mode="reduce-overhead" (CUDA graphs) once per (batch, cache length); the first calls of a shape are timed as
  `compile_s`, apart from the generation time. The inductor cache lives under the cr2 home, so a scheduled
  re-label loads the compiled code instead of compiling again. On CPU (or `compile="off"`) the same loop runs
  eagerly. If compiling fails, the step runs eagerly and `compile_error` says why.
- **a prefill per refill, a host sync per `sync_every` steps.** New tokens are copied to the host every
  `sync_every` steps (1 on CPU, 4 on CUDA): the stop checks run there, and a row that finished inside the window
  costs at most `sync_every - 1` wasted steps.

Semantics: each request's tokens are those of transformers' greedy `generate` for that request alone, with
lm-eval's stopping criteria — i.e. lm-eval's generation at batch size 1. A batched lm-eval run gives the same
text whenever the answer is settled by the time its row stops (always, unless a stop string is hidden by skipping
special tokens in the final decode, where lm-eval's batched answer depends on its batch mates). Numerically the
forward differs from `generate`'s only in padding and masked cache slots: identical on CPU (tested), possibly
different in the last bits on a GPU, as any change of batch composition is for lm-eval itself.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

log = logging.getLogger(__name__)

PROMPT_BUCKET_MIN = 64
PREFILL_TOKENS = 16_384  # prompt tokens per prefill forward (its key/value copy is freed after each)
# generation settings that add a logits processor under greedy decoding: a model whose generation config sets
# one of them is left to transformers' generate (lm-eval's path)
_GREEDY_PROCESSORS = {
    "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0, "bad_words_ids": None, "min_length": 0, "min_new_tokens": None,
    "forced_bos_token_id": None, "forced_eos_token_id": None, "remove_invalid_values": False,
    "exponential_decay_length_penalty": None, "suppress_tokens": None, "begin_suppress_tokens": None,
    "sequence_bias": None, "guidance_scale": None, "watermarking_config": None, "renormalize_logits": False,
    "num_beams": 1,
}


def prompt_bucket(tokens: int, cap: int) -> int:
    """The padded prompt length of a prompt of `tokens`: the next power of two (at least 64), at most `cap`."""
    bucket = PROMPT_BUCKET_MIN
    while bucket < tokens:
        bucket *= 2
    return max(tokens, min(bucket, cap))


def batch_bucket(requests: int, cap: int, powers_of_two: bool) -> int:
    """Rows of a bucket's batch: its request count, at most `cap`; rounded up to a power of two when compiled
    (one compiled shape per batch size)."""
    want = max(1, min(requests, cap))
    if not powers_of_two:
        return want
    rows = 1
    while rows < want:
        rows *= 2
    return min(rows, cap)


def unsupported_reason(model: Any) -> str | None:
    """Why `model` cannot use the static path (None: it can): decoder-only, full attention only, sdpa, and no
    logits processor under greedy decoding."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False):
        return "not a decoder-only model"
    impl = getattr(config, "_attn_implementation", None)
    if impl != "sdpa":
        return f"attention implementation '{impl}' (the static path builds sdpa's boolean masks)"
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    if any(t != "full_attention" for t in layer_types):
        return "sliding-window or linear-attention layers"
    gen = getattr(model, "generation_config", None)
    for name, default in _GREEDY_PROCESSORS.items():
        value = getattr(gen, name, default) if gen is not None else default
        if value not in (default, None) and not (name in ("repetition_penalty", "encoder_repetition_penalty",
                                                          "guidance_scale") and value == 1.0):
            return f"generation_config.{name}={value!r} adds a logits processor"
    return None


def eos_token_ids(model: Any) -> set[int]:
    """The ids on which transformers' generate ends a row (the model's generation config)."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        return set()
    return {int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])}


def _inductor_cache_is_default() -> bool:
    """Whether torch inductor's cache folder is its default (unset, or the temporary folder torch fills in on first
    use): then cr2 puts it under the home; a folder the user chose is kept."""
    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if current is None:
        return True
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:
        return False
    return os.path.abspath(current) == os.path.abspath(default_cache_dir())


@dataclass
class GenerationStats:
    """What the static path did (cumulative over a model's lifetime; diff two snapshots for one call)."""

    requests: int = 0
    generated_tokens: int = 0  # tokens generated for requests, each up to its own stop (first ones by prefill)
    decode_steps: int = 0  # batched decode steps
    row_steps: int = 0  # rows × decode steps (busy and idle rows)
    step_tokens: int = 0  # tokens of decode steps that went to a request (row_steps less idle and wasted rows)
    prefills: int = 0  # prefill forwards (a batch's first fill and every refill)
    compile_s: float = 0.0  # first calls of each compiled shape (compilation, CUDA-graph capture), s
    compiled_shapes: list[tuple[int, int]] = field(default_factory=list)  # (batch, cache length)
    compile_error: str | None = None
    decoded_windows: int = 0  # stop-check windows decoded to text
    compile_windows: list[tuple[float, float]] = field(default_factory=list)  # epoch s of each compiling call

    def snapshot(self) -> "GenerationStats":
        return dataclasses.replace(self, compiled_shapes=list(self.compiled_shapes),
                                   compile_windows=list(self.compile_windows))


@dataclass
class _Row:
    """One request in flight."""

    index: int  # the request's position in the call
    prompt: list[int]
    tokens: list[int] = field(default_factory=list)


def _row_cache(keys: list[Any], values: list[Any], write: Any, rows: Any) -> Any:
    """A transformers Cache whose layer l writes each row's new key/value at that row's own slot `write[b]`."""
    from transformers.cache_utils import Cache, CacheLayerMixin

    class RowSlotLayer(CacheLayerMixin):
        is_compileable = True
        is_sliding = False

        def __init__(self, k: Any, v: Any):
            super().__init__()
            self.keys, self.values = k, v
            self.is_initialized = True

        def lazy_initialization(self, key_states: Any, value_states: Any) -> None:  # allocated up front
            return None

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            # one new token per row: keys[b, :, write[b]] = key_states[b, :, 0]
            self.keys[rows, :, write] = key_states[:, :, 0]
            self.values[rows, :, write] = value_states[:, :, 0]
            return self.keys, self.values

        def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
            return self.keys.shape[-2], 0

        def get_seq_length(self) -> int:
            return 0

        def get_max_length(self) -> int:
            return self.keys.shape[-2]

    return Cache(layers=[RowSlotLayer(k, v) for k, v in zip(keys, values)])


@dataclass
class _Shape:
    """The device state of one (rows, cache length) decode shape, kept for the model's lifetime: the compiled step
    sees the same tensors on every call (no recompilation, CUDA graphs replayed on the same addresses)."""

    keys: list[Any]  # per layer [rows, kv heads, length, head dim], views of the generator's buffers
    values: list[Any]
    cache: Any  # a transformers Cache writing row b at write[b]
    tokens: Any  # [rows, 1] long: each row's newest token (the next step's input)
    positions: Any  # [rows, 1] long: its position (prompt tokens + generated before it)
    write: Any  # [rows] long: the cache slot its key/value goes to
    mask: Any  # [rows, 1, 1, length] bool: the slots each row attends to
    arange: Any  # [rows]


class StaticGenerator:
    """Greedy generation of token ids for one model (module docstring)."""

    def __init__(self, model: Any, device: Any, compile: str = "auto", compile_cache_dir: str | Path | None = None,
                 sync_every: int | None = None):
        import torch

        if compile not in ("auto", "on", "off"):
            raise ValueError(f"compile must be auto, on or off (got {compile!r})")
        self.model = model
        self.device = torch.device(device)
        cuda = self.device.type == "cuda"
        self.compile = cuda if compile == "auto" else compile == "on"
        self.compile_cache_dir = Path(compile_cache_dir) if compile_cache_dir else None
        self.sync_every = int(sync_every) if sync_every else (4 if cuda else 1)
        self.stats = GenerationStats()
        self._steps: dict[tuple[int, int], Callable[..., Any]] = {}
        self._calls: collections.Counter = collections.Counter()
        self._shapes: dict[tuple[int, int], _Shape] = {}
        self._arena: tuple[list[Any], list[Any]] | None = None  # per layer, one flat key and one value buffer

    # ------------------------------------------------------------ device state
    def _kv_dims(self) -> tuple[int, int]:
        cfg = self.model.config
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        return heads, getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads

    def _reserve(self, need: int) -> None:
        """Cache buffers of at least `need` elements per layer; grown by half again at least, since a growth moves
        every shape's addresses (its steps are compiled and captured again)."""
        import torch

        if self._arena is not None and self._arena[0][0].numel() >= need:
            return
        if self._arena is not None:
            need = max(need, self._arena[0][0].numel() * 3 // 2)
        self._arena = None
        self._shapes.clear()
        self._steps.clear()
        self._calls.clear()  # the shapes' steps are compiled (and captured) again: time them as compilation
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        dtype = next(self.model.parameters()).dtype
        flat = [torch.zeros(need, dtype=dtype, device=self.device) for _ in range(2 * self.model.config.num_hidden_layers)]
        self._arena = (flat[0::2], flat[1::2])

    def _shape(self, rows: int, length: int) -> _Shape:
        """The state of shape (rows, length); the cache views start at the same addresses for every shape (a
        captured CUDA graph stays valid); the buffers grow, and the shapes are rebuilt, when a larger one comes."""
        import torch

        heads, head_dim = self._kv_dims()
        need = rows * heads * length * head_dim
        self._reserve(need)
        key = (rows, length)
        if key not in self._shapes:
            view = (rows, heads, length, head_dim)
            keys = [k[:need].view(view) for k in self._arena[0]]
            values = [v[:need].view(view) for v in self._arena[1]]
            dev = self.device
            state = _Shape(keys, values, None, torch.zeros((rows, 1), dtype=torch.long, device=dev),
                           torch.zeros((rows, 1), dtype=torch.long, device=dev),
                           torch.zeros((rows,), dtype=torch.long, device=dev),
                           torch.zeros((rows, 1, 1, length), dtype=torch.bool, device=dev),
                           torch.arange(rows, device=dev))
            if self.compile:
                for t in keys + values:
                    torch._dynamo.mark_static_address(t)
            state.cache = _row_cache(keys, values, state.write, state.arange)
            self._shapes[key] = state
        return self._shapes[key]

    # ------------------------------------------------------------ the decode step
    def _step_fn(self, key: tuple[int, int]) -> Callable[..., Any]:
        if key in self._steps:
            return self._steps[key]
        import torch

        model = self.model

        def step(tokens: Any, positions: Any, mask: Any, cache: Any) -> Any:
            out = model(input_ids=tokens, position_ids=positions, attention_mask={"full_attention": mask},
                        past_key_values=cache, use_cache=True)
            # transformers' greedy choice: argmax of the float32 logits
            return torch.argmax(out.logits[:, -1].float(), dim=-1)

        fn: Callable[..., Any] = step
        if self.compile:
            self._prepare_compile_cache()
            fn = torch.compile(step, mode="reduce-overhead", fullgraph=True, dynamic=False)
            self.stats.compiled_shapes.append(key)
        self._steps[key] = fn
        return fn

    def _prepare_compile_cache(self) -> None:
        import torch

        if self.compile_cache_dir is not None and _inductor_cache_is_default():
            self.compile_cache_dir.mkdir(parents=True, exist_ok=True)
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(self.compile_cache_dir)
        dynamo = torch._dynamo.config
        # one compiled graph per (batch, cache length): allow more shapes than dynamo's default recompile limit
        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(dynamo, name):
                setattr(dynamo, name, max(int(getattr(dynamo, name)), 64))
        if hasattr(dynamo, "accumulated_recompile_limit"):
            dynamo.accumulated_recompile_limit = max(int(dynamo.accumulated_recompile_limit), 512)

    def _run_step(self, key: tuple[int, int], state: _Shape) -> Any:
        import torch

        args = (state.tokens, state.positions, state.mask, state.cache)
        fn = self._step_fn(key)
        self._calls[key] += 1
        if not (self.compile and self._calls[key] <= 3):
            return fn(*args)
        # the first calls of a compiled shape: compilation, CUDA-graph warm-up and capture
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        t0, started = time.perf_counter(), time.time()
        try:
            out = fn(*args)
        except Exception as exc:  # noqa: BLE001 - any compiler failure: decode eagerly and say why
            first = str(exc).splitlines()[0][:300] if str(exc) else ""
            self.stats.compile_error = f"{type(exc).__name__}: {first}"
            log.warning("compiling the decode step failed (%s); decoding eagerly", self.stats.compile_error)
            self.compile = False
            self._steps.clear()
            out = self._step_fn(key)(*args)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.stats.compile_s += time.perf_counter() - t0
        self.stats.compile_windows.append((started, time.time()))
        return out

    # ------------------------------------------------------------ generation
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        max_gen_toks: int,
        finished: Callable[[list[int]], bool],
        batch_size: int | Callable[[int], int],
        pad_token_id: int,
        max_prompt_tokens: int | None = None,
    ) -> list[list[int]]:
        """Each prompt's generated ids (greedy), each row ending at the first token after which `finished(tokens)`
        holds or at `max_gen_toks` tokens. `batch_size`: rows, or a function of the cache length (tokens);
        `max_prompt_tokens`: the longest padded prompt (the model's context minus `max_gen_toks`)."""
        import torch

        if max_gen_toks < 1:
            raise ValueError(f"max_gen_toks must be at least 1 (got {max_gen_toks})")
        out: list[list[int] | None] = [None] * len(prompts)
        buckets: dict[int, list[int]] = {}
        for i, p in enumerate(prompts):
            cap = 1 << 30 if max_prompt_tokens is None else max(len(p), max_prompt_tokens)
            buckets.setdefault(prompt_bucket(len(p), cap), []).append(i)

        def rows_for(plen: int) -> int:
            cap = batch_size(plen + max_gen_toks) if callable(batch_size) else int(batch_size)
            return max(1, cap)

        # a bucket that cannot fill a batch, or follows one that cannot, joins the longer bucket before it: its
        # rows take that bucket's free slots instead of running a pass of their own
        groups: list[tuple[int, list[int]]] = []
        for plen in sorted(buckets, reverse=True):
            if groups and (len(groups[-1][1]) < rows_for(groups[-1][0]) or len(buckets[plen]) < rows_for(plen)):
                groups[-1][1].extend(buckets[plen])
            else:
                groups.append((plen, list(buckets[plen])))
        heads, head_dim = self._kv_dims()
        plans = [(plen, members, batch_bucket(len(members), rows_for(plen), self.compile)) for plen, members in groups]
        self._reserve(max(rows * heads * (plen + max_gen_toks) * head_dim for plen, _, rows in plans))  # one growth
        with torch.no_grad():
            for plen, members, rows in plans:
                idx = sorted(members, key=lambda i: -len(prompts[i]))
                length = plen + max_gen_toks
                queue = [_Row(i, list(prompts[i])) for i in idx]
                for r in self._bucket(plen, length, rows, queue, max_gen_toks, finished, pad_token_id):
                    out[r.index] = r.tokens
        self.stats.requests += len(prompts)
        return [o if o is not None else [] for o in out]

    def _prefill(self, plen: int, take: list[_Row], slots: list[int], state: _Shape) -> list[int]:
        """Run the prompts of `take` (left-padded to `plen`), copy their keys/values into cache rows `slots` and
        set those rows' state; returns each row's first generated token. Prompts go through the model at most
        PREFILL_TOKENS tokens at a time, which bounds the memory of the prefill's own key/value copy."""
        import torch
        from transformers import DynamicCache

        dev = self.device
        per_forward = max(1, PREFILL_TOKENS // plen)
        firsts: list[int] = []
        for start in range(0, len(take), per_forward):
            part, where_list = take[start:start + per_forward], slots[start:start + per_forward]
            k = len(part)
            ids = torch.zeros((k, plen), dtype=torch.long)
            att = torch.zeros((k, plen), dtype=torch.long)
            for j, row in enumerate(part):
                n = len(row.prompt)
                ids[j, plen - n:] = torch.tensor(row.prompt, dtype=torch.long)
                att[j, plen - n:] = 1
            ids, att = ids.to(dev), att.to(dev)
            # transformers' generate: positions from the mask, padding at position 0
            positions = (att.cumsum(-1) - 1).masked_fill(att == 0, 0)
            cache = DynamicCache(config=self.model.config)
            out = self.model(input_ids=ids, attention_mask=att, position_ids=positions, past_key_values=cache,
                             use_cache=True, logits_to_keep=1)
            first = torch.argmax(out.logits[:, -1].float(), dim=-1)
            del out
            where = torch.tensor(where_list, dtype=torch.long, device=dev)
            for layer, (kc, vc) in enumerate(zip(state.keys, state.values)):
                kc[where, :, :plen] = cache.layers[layer].keys.to(kc.dtype)
                vc[where, :, :plen] = cache.layers[layer].values.to(vc.dtype)
            del cache
            length = state.mask.shape[-1]
            lens = att.sum(-1)
            cols = torch.arange(length, device=dev)
            state.mask[where, 0, 0] = (cols >= plen - lens[:, None]) & (cols < plen)  # the row's own prompt
            state.tokens[where, 0] = first
            state.positions[where, 0] = lens
            state.write[where] = plen
            self.stats.prefills += 1
            firsts.extend(first.tolist())
        return firsts

    def _bucket(self, plen: int, length: int, rows: int, queue: list[_Row], max_gen_toks: int,
                finished: Callable[[list[int]], bool], pad_token_id: int) -> list[_Row]:
        """Generate every row of one length bucket on a cache of `rows` × `length` slots."""
        import torch

        key = (rows, length)
        state = self._shape(rows, length)
        state.tokens.fill_(int(pad_token_id))
        state.positions.zero_()
        state.write.fill_(plen)
        state.mask.zero_()
        waiting = collections.deque(queue)
        active: list[_Row | None] = [None] * rows
        done: list[_Row] = []
        refill_at = max(1, rows // 4)  # a prefill is one eager forward: take rows in groups

        def push(row: _Row, token: int) -> bool:
            row.tokens.append(token)
            self.stats.generated_tokens += 1
            return len(row.tokens) >= max_gen_toks or finished(row.tokens)

        while waiting or any(a is not None for a in active):
            free = [s for s, a in enumerate(active) if a is None]
            if waiting and free and (len(free) >= min(refill_at, len(waiting)) or len(free) == rows):
                take = [waiting.popleft() for _ in range(min(len(free), len(waiting)))]
                slots = free[:len(take)]
                for slot, row, first in zip(slots, take, self._prefill(plen, take, slots, state)):
                    if push(row, first):
                        done.append(row)
                    else:
                        active[slot] = row
                continue
            window = []
            for _ in range(self.sync_every):
                # each row attends to the slot its new token's key/value is written to
                state.mask[state.arange, 0, 0, state.write] = True
                nxt = self._run_step(key, state)
                window.append(nxt.clone())
                state.tokens[:, 0] = nxt
                state.positions += 1
                state.write.add_(1).clamp_(max=length - 1)
                self.stats.decode_steps += 1
                self.stats.row_steps += rows
            for step_tokens in torch.stack(window).tolist():
                for slot, row in enumerate(active):
                    if row is None:
                        continue
                    self.stats.step_tokens += 1
                    if push(row, step_tokens[slot]):
                        done.append(row)
                        active[slot] = None
        return done
