"""lm-eval's `hf` model in cr2's variant: greedy generation on a static KV cache, and `auto` batches sized per length.

**Generation** (`generation: static`, the default): `generate_until` runs cr2's static-cache loop
(cr2/labels/lmeval/static_generation.py — length buckets, stop strings checked on token ids, a finished row's
slot refilled at once, a compiled decode step on CUDA) instead of transformers' `generate`; each request's text is
lm-eval's for that request (its tokens decoded and cut at the stop strings by lm-eval's own functions).
Requests it cannot serve exactly — sampling, generation kwargs other than greedy's, a model whose generation
config adds a logits processor, non-sdpa attention, `think_end_token`, `truncation` — go to lm-eval's
`generate_until`, as does everything with `generation: lm-eval`.

**Batch sizes.**

lm-eval's auto batch size runs forward passes of [batch, length] tokens from `max_batch_size` down, halving on
out-of-memory. For generation it probes at `max_length`, which defaults to the model's whole context — 40,960
tokens for Qwen3 — where even a 141 GB GPU fits a batch of 1–2, although cr2's longest prompt plus the
generation limit is about a thousand tokens. Here:

- **length from the requests.** On the static path a batch's cache holds padded prompt + `max_gen_toks` slots
  per row: `auto` probes at that length. On lm-eval's path each `generate_until` call (one chunk of one
  benchmark) is split into groups by the length it needs — prompt tokens plus the request's `max_gen_toks` — rounded up to a power of two; each
  group runs as its own lm-eval call with `max_length` set to that length, so the probe measures what the
  group's batches will hold. Every prompt fits its group's length, so nothing is truncated and labels are
  those of the model's full context; the sizing is not label-relevant (it is not part of the run id).
- **one probe per length.** lm-eval probes again on every call (five forward passes at the largest batch);
  the batch size found for a length is kept for the model's lifetime, so a run of many chunks probes a few
  times, not once per chunk. Loglikelihood calls probe at their longest request's length (lm-eval's own
  rule) and share the same memo.

A `max_length` set in the labeling settings is respected as lm-eval respects it (no sizing). With an integer
`batch_size` nothing changes: lm-eval already sorts a call's requests by length, so its batches hold prompts of
similar length.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
from typing import Any

log = logging.getLogger(__name__)
GENERATION_PATHS = ("static", "lm-eval")

MIN_BUCKET_TOKENS = 256


def _synchronize(device: Any) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def length_bucket(tokens: int, cap: int) -> int:
    """The group length of a request needing `tokens`: the next power of two (at least 256), at most `cap`."""
    bucket = MIN_BUCKET_TOKENS
    while bucket < tokens:
        bucket *= 2
    return max(1, min(bucket, cap))


@functools.cache
def sized_hflm_class() -> type:
    """The HFLM subclass (built on first use: lm-eval's hf model imports torch and transformers)."""
    from lm_eval.models.huggingface import HFLM

    class SizedHFLM(HFLM):
        """HFLM with cr2's static-cache generation and `auto` batches probed per length (module docstring)."""

        def __init__(self, *args: Any, generation: str = "static", compile: str = "auto",
                     compile_cache_dir: str | None = None, **kwargs: Any):
            if generation not in GENERATION_PATHS:
                raise ValueError(f"generation must be one of {GENERATION_PATHS} (got {generation!r})")
            super().__init__(*args, **kwargs)
            self._sized = self._max_length is None  # a max_length the user set is left alone
            self._probed: dict[int, int] = {}  # probe length, tokens → batch size found
            self.probe_s = 0.0  # wall time spent probing, s (cr2/labels/lmeval/estimate.py keeps it apart)
            self.size_log: list[dict[str, int]] = []  # one entry per generation group: what was sized and found
            self.generation = generation
            self._compile = compile
            self._compile_cache_dir = compile_cache_dir
            self._generator: Any = None
            self.gen_toks_cap: int | None = None  # caps every request's max_gen_toks (a warm-up of one step)
            self.fallback_reasons: list[str] = []  # why requests went to lm-eval's generate_until

        # ------------------------------------------------------------ batch sizes
        def _batch_for_length(self, length: int) -> int:
            """The `auto` batch size found at `length` tokens (probed once per length for the model's lifetime)."""
            probe = min(int(length), int(self.max_length))
            if probe not in self._probed:
                t0 = time.perf_counter()
                saved, self._max_length = self._max_length, probe
                try:
                    self._probed[probe] = int(super()._detect_batch_size())
                finally:
                    self._max_length = saved
                    _synchronize(self.device)
                    self.probe_s += time.perf_counter() - t0
            return self._probed[probe]

        def _model_max_length(self) -> int:
            saved, self._max_length = self._max_length, None
            try:
                return int(self.max_length)
            finally:
                self._max_length = saved

        def _detect_batch_size(self, requests: Any = None, pos: int = 0) -> int:
            if requests:
                _, context_enc, continuation_enc = requests[pos]
                length = len((context_enc + continuation_enc)[-(self.max_length + 1):][:-1])
                return self._batch_for_length(length_bucket(length, self.max_length))
            return self._batch_for_length(int(self.max_length))

        # ------------------------------------------------------------ generation
        @property
        def generation_stats(self) -> Any:
            """What the static path did so far (cr2.labels.lmeval.static_generation.GenerationStats)."""
            from cr2.labels.lmeval.static_generation import GenerationStats

            return self._generator.stats.snapshot() if self._generator is not None else GenerationStats()

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            if not requests:
                return []
            if self.gen_toks_cap is not None:
                requests = [_capped(r, self.gen_toks_cap, self.max_gen_toks) for r in requests]
            if self.generation == "static":
                return self._static_generate_until(requests, disable_tqdm)
            return self._lm_eval_generate_until(requests, disable_tqdm)

        def _static_reason(self) -> str | None:
            from cr2.labels.lmeval.static_generation import unsupported_reason

            if self.backend != "causal":
                return f"backend {self.backend}"
            if self.think_end_token is not None:
                return "think_end_token is set"
            if self.truncation or self.mixed_precision_dtype is not None:
                return "truncation or mixed precision is set"
            return unsupported_reason(self.model)

        def _fallback(self, reason: str, requests: list[Any], disable_tqdm: bool) -> list[str]:
            if reason not in self.fallback_reasons:
                self.fallback_reasons.append(reason)
                log.warning("static generation not used (%s): lm-eval's generate_until runs these requests", reason)
            return self._lm_eval_generate_until(requests, disable_tqdm)

        def _static_generate_until(self, requests: list[Any], disable_tqdm: bool) -> list[str]:
            from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs

            from cr2.labels.lmeval.static_generation import StaticGenerator, eos_token_ids
            from cr2.labels.lmeval.stops import StopMatcher

            reason = self._static_reason()
            if reason is not None:
                return self._fallback(reason, requests, disable_tqdm)
            if self._generator is None:
                self._generator = StaticGenerator(self.model, self.device, self._compile, self._compile_cache_dir)
            eos_text = self.tok_decode(self.eot_token_id, skip_special_tokens=False)
            eos_ids = eos_token_ids(self.model)
            vocab = int(self.model.get_output_embeddings().weight.shape[0])
            groups: dict[str, list[int]] = {}
            for i, req in enumerate(requests):  # lm-eval batches only requests with equal generation kwargs
                groups.setdefault(json.dumps(req.args[1], sort_keys=True, default=str), []).append(i)
            out: list[str] = [""] * len(requests)
            for idx in groups.values():
                part = [requests[i] for i in idx]
                gen_kwargs = part[0].args[1]
                kwargs = normalize_gen_kwargs(gen_kwargs, self.max_gen_toks)
                until = handle_stop_sequences(kwargs.pop("until", None), eos=eos_text)
                max_gen_toks = int(kwargs.pop("max_gen_toks"))
                other = sorted(k for k in kwargs if k not in ("do_sample", "temperature"))
                if kwargs.get("do_sample") or other or max_gen_toks < 1:
                    texts = self._fallback(f"generation kwargs {gen_kwargs}", part, disable_tqdm)
                else:
                    max_ctx_len = int(self.max_length) - max_gen_toks
                    prompts = [self._context_ids(r.args[0], max_ctx_len) for r in part]
                    matcher = StopMatcher(self.tokenizer, until, vocab)

                    def finished(tokens: list[int], matcher: Any = matcher) -> bool:
                        return tokens[-1] in eos_ids or matcher.fires(tokens)

                    batch: Any = self._batch_for_length if self.batch_size == "auto" else int(self.batch_size)
                    generated = self._generator.generate(prompts, max_gen_toks, finished, batch,
                                                         self.tokenizer.pad_token_id, max_prompt_tokens=max_ctx_len)
                    self._generator.stats.decoded_windows += matcher.decoded_windows
                    texts = [self._answer(tokens, until) for tokens in generated]
                for i, req, text in zip(idx, part, texts, strict=True):
                    out[i] = text
                    self.cache_hook.add_partial("generate_until", (req.args[0], req.args[1]), text)
            return out

        def _context_ids(self, context: str, max_ctx_len: int) -> list[int]:
            """A context's ids as lm-eval's tok_batch_encode gives them (its BOS rule, left truncation)."""
            from lm_eval.models.utils import has_bos_prefix

            special: dict[str, bool] = {}
            if has_bos_prefix(context, getattr(self.tokenizer, "bos_token", None)):
                special = {"add_special_tokens": False}
            elif self.add_bos_token is not None:
                special = {"add_special_tokens": self.add_bos_token}
            ids = list(self.tokenizer(context, truncation=False, **special)["input_ids"])
            return ids[-max_ctx_len:] if max_ctx_len else ids

        def _answer(self, tokens: list[int], until: list[str]) -> str:
            """lm-eval's answer from a generation's ids: decoded (special tokens skipped), cut at the stop strings."""
            from lm_eval.models.utils import postprocess_generated_text

            return postprocess_generated_text(generation=self.tok_decode(tokens), stop=until, think_end_token=None)

        def _lm_eval_generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            if not self._sized or self.batch_size != "auto":
                return super().generate_until(requests, disable_tqdm)
            cap = self._model_max_length()
            groups: dict[int, list[int]] = {}
            for i, req in enumerate(requests):
                context, gen_kwargs = req.args[0], req.args[1]
                gen_toks = int((gen_kwargs or {}).get("max_gen_toks", self.max_gen_toks))
                need = len(self.tok_encode(context)) + gen_toks
                groups.setdefault(length_bucket(need, cap), []).append(i)
            out: list[str | None] = [None] * len(requests)
            for length in sorted(groups, reverse=True):
                idx = groups[length]
                self._max_length = length
                try:
                    res = super().generate_until([requests[i] for i in idx], disable_tqdm)
                finally:
                    self._max_length = None
                self.size_log.append({"max_length": length, "requests": len(idx),
                                      "batch_size": self._probed.get(length, 0)})
                for i, r in zip(idx, res, strict=True):
                    out[i] = r
            return [r if r is not None else "" for r in out]

    return SizedHFLM


def _capped(request: Any, cap: int, default_gen_toks: int) -> Any:
    """`request` (a generate_until Instance) with max_gen_toks at most `cap`."""
    context, gen_kwargs = request.args[0], dict(request.args[1] or {})
    gen_kwargs["max_gen_toks"] = min(int(gen_kwargs.get("max_gen_toks", default_gen_toks)), int(cap))
    return dataclasses.replace(request, arguments=(context, gen_kwargs))
