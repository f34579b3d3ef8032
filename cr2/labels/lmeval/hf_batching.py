"""lm-eval's `hf` model with `batch_size: auto` sized from the requests at hand, not from the model's context length.

lm-eval's auto batch size runs forward passes of [batch, length] tokens from `max_batch_size` down, halving on
out-of-memory. For generation it probes at `max_length`, which defaults to the model's whole context — 40,960
tokens for Qwen3 — where even a 141 GB GPU fits a batch of 1–2, although cr2's longest prompt plus the
generation limit is about a thousand tokens. Here:

- **length from the requests.** Each `generate_until` call (one chunk of one benchmark) is split into groups by
  the length it needs — prompt tokens plus the request's `max_gen_toks` — rounded up to a power of two; each
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

import functools
import time
from typing import Any

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
        """HFLM whose `auto` batch size is probed at the length a group of requests needs (module docstring)."""

        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self._sized = self._max_length is None  # a max_length the user set is left alone
            self._probed: dict[int, int] = {}  # probe length, tokens → batch size found
            self.probe_s = 0.0  # wall time spent probing, s (cr2/labels/lmeval/estimate.py keeps it apart)
            self.size_log: list[dict[str, int]] = []  # one entry per generation group: what was sized and found

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
                probe = length_bucket(length, self.max_length)
            else:
                probe = int(self.max_length)
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

        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            if not self._sized or self.batch_size != "auto" or not requests:
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
