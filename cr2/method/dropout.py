"""Dropout whose masks are replayed: the Bernoulli draws torch's CPU dropout makes from one generator state,
drawn once and shared by every fit that starts from that state.

The gate's fits of one run (the gate and its ablated variants, a study's retrained cells) share the seed, the
architecture and the batch shapes, so they draw the same dropout masks from the same state of torch's generator;
those draws (serial mt19937, two 32-bit draws per element) are a third of a gate fit's time. torch's CPU kernel
draws element by element in memory order whatever the tensor's shape, so the masks of consecutive dropout calls
are consecutive slices of one flat draw from the starting state (tested). `MaskStream` holds that flat draw as
bits, stored once per (state, keep probability) in a content-addressed store (kind `dropout`); `ReplayDropout` takes its masks from a stream
and applies F.dropout's own arithmetic (noise = mask / (1 − p), out = x · noise), so values and gradients are
bit-identical to nn.Dropout's. Replaying does not consume the process' generator: only a fit that owns its
generator state (cr2.method.checkpoint.seeded_torch) and draws from it nothing but dropout masks may replay.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Iterator, Protocol

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from cr2.core.hashing import content_fingerprint

_CHUNK = 1 << 24  # elements drawn per call when a stream is made (a multiple of 8: whole bytes of bits)


def _draw(generator: torch.Generator, keep: float, n: int) -> np.ndarray:
    """n keep/drop draws of torch's CPU Bernoulli kernel from `generator` (advanced), bool [n]."""
    return torch.empty(n, dtype=torch.float32).bernoulli_(keep, generator=generator).numpy().astype(bool)


def _generator(state: torch.Tensor) -> torch.Generator:
    gen = torch.Generator()
    gen.set_state(state)
    return gen


class MaskStream:
    """The flat sequence of keep/drop draws from one torch generator state at keep probability `keep`.

    bits: the first n draws, packed (np.packbits); end_state: the generator's state after them, from which draws
    beyond n continue in order (a longer fit than the stream was made for still gets torch's own masks).
    """

    def __init__(self, bits: np.ndarray, n: int, end_state: torch.Tensor, keep: float) -> None:
        if len(bits) * 8 < n:
            raise ValueError(f"a mask stream of {n} draws needs {(n + 7) // 8} bytes of bits, got {len(bits)}")
        self.bits, self.n, self.keep = bits, int(n), float(keep)
        self._end_state = end_state
        self._beyond: torch.Generator | None = None
        self.position = 0

    def take(self, numel: int) -> np.ndarray:
        """The next `numel` draws (bool [numel]), as the next dropout call would draw them."""
        start, stop = self.position, self.position + int(numel)
        self.position = stop
        parts = []
        if start < self.n:
            end = min(stop, self.n)
            first = start // 8
            parts.append(np.unpackbits(self.bits[first:(end + 7) // 8])[start - 8 * first:end - 8 * first].astype(bool))
        if stop > self.n:
            if self._beyond is None:
                self._beyond = _generator(self._end_state)
            parts.append(_draw(self._beyond, self.keep, stop - max(start, self.n)))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


class Store(Protocol):
    """Where streams are kept: a content-addressed store (tasks/store.py: Store) — the value under
    (kind, key_parts) read back when present and accepted, else computed and stored atomically."""

    def get_or_compute(self, kind: str, key_parts: Sequence[Any], compute: Callable[[], Any], codec: str,
                       accept: Callable[[Any], bool] | None = None) -> tuple[Any, bool]: ...


def stream_key_parts(state: torch.Tensor, keep: float) -> tuple[str, ...]:
    """The store key parts of the stream of (state, keep): torch's version (its kernel defines the draws), keep and
    the generator state's fingerprint."""
    return ("cr2-dropout-stream-1", torch.__version__, repr(float(keep)),
            content_fingerprint(arrays={"state": state.numpy()}))


def mask_stream(store: Store, state: torch.Tensor, keep: float, n: int) -> MaskStream:
    """The stream of (at least) `n` draws from generator state `state` at `keep`: the store's `dropout` entry when it
    holds n draws or more, else drawn and stored (atomically: a reader sees a whole entry or none; two writers
    write the same)."""

    def draw() -> dict[str, np.ndarray]:
        gen = _generator(state)
        bits = np.empty((n + 7) // 8, dtype=np.uint8)
        for start in range(0, n, _CHUNK):
            stop = min(start + _CHUNK, n)
            bits[start // 8:(stop + 7) // 8] = np.packbits(_draw(gen, keep, stop - start))
        return {"bits": bits, "n": np.int64(n), "end_state": gen.get_state().numpy()}

    value, _ = store.get_or_compute("dropout", stream_key_parts(state, keep), draw, "npz",
                                    accept=lambda v: {"bits", "n", "end_state"} <= set(v) and int(v["n"]) >= n)
    return MaskStream(value["bits"], int(value["n"]), torch.from_numpy(np.array(value["end_state"])), keep)


class ReplayDropout(nn.Dropout):
    """nn.Dropout (the same module, no state) that takes its training masks from a MaskStream while `replaying`."""

    stream: MaskStream | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0 or self.stream is None:
            return F.dropout(x, self.p, self.training, self.inplace)
        noise = torch.from_numpy(self.stream.take(x.numel())).view(x.shape).to(x.dtype)
        noise.div_(1 - self.p)  # F.dropout on the CPU: noise = bernoulli(1 − p) / (1 − p), out = x · noise
        return x * noise

    @contextlib.contextmanager
    def replaying(self, stream: MaskStream) -> Iterator[None]:
        """Within the block, training masks come from `stream` (whose keep must be 1 − p)."""
        if stream.keep != 1 - self.p:
            raise ValueError(f"a stream drawn at keep {stream.keep} cannot replay dropout p = {self.p}")
        self.stream = stream
        try:
            yield
        finally:
            self.stream = None
