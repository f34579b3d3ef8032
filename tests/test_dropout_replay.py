"""Replayed dropout masks (cr2.method.dropout): the same masks, values, gradients and fitted gates as torch's own
dropout, from a stream drawn once and shared through the content-addressed store (tasks/store.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from cr2.config import GateSpec
from cr2.method.checkpoint import fingerprint
from cr2.evaluation.synthetic import make_routing_set
from cr2.method.dropout import ReplayDropout, mask_stream, stream_key_parts
from cr2.method.gate import fit_gate, gate_mask_stream
from cr2_tasks.store import Store, cache_key

SHAPES = [(8, 256, 32), (8, 100, 32), (3, 7, 5), (1,), (8, 256, 32)]


def _torch_dropout(xs, p, state):
    torch.set_rng_state(state)
    outs, grads = [], []
    for x in xs:
        x = x.clone().requires_grad_()
        y = F.dropout(x, p, True)
        (y * torch.arange(y.numel(), dtype=y.dtype).view(y.shape)).sum().backward()
        outs.append(y.detach())
        grads.append(x.grad)
    return outs, grads


@pytest.mark.parametrize("stored", [0, 1000, 10 ** 6])  # nothing stored, a part, all of it
def test_replayed_masks_give_torchs_dropout_values_and_gradients_bit_for_bit(tmp_path, stored):
    torch.manual_seed(5)
    xs = [torch.randn(s) for s in SHAPES]
    state = torch.get_rng_state()
    expected = _torch_dropout(xs, 0.1, state)
    drop = ReplayDropout(0.1).train()
    stream = mask_stream(Store(tmp_path), state, 1 - 0.1, stored)
    got_y, got_g = [], []
    with drop.replaying(stream):
        for x in xs:
            x = x.clone().requires_grad_()
            y = drop(x)
            (y * torch.arange(y.numel(), dtype=y.dtype).view(y.shape)).sum().backward()
            got_y.append(y.detach())
            got_g.append(x.grad)
    assert drop.stream is None
    for a, b in zip(expected[0] + expected[1], got_y + got_g):
        assert torch.equal(a, b)


def test_a_stored_stream_is_read_back_and_a_longer_one_replaces_it(tmp_path):
    state = torch.Generator().manual_seed(3).get_state()
    store = Store(tmp_path)
    first = mask_stream(store, state, 0.9, 5000).take(5000)
    path = store.path("dropout", cache_key("dropout", *stream_key_parts(state, 0.9)), "npz")
    stamp = path.stat().st_mtime_ns
    assert np.array_equal(mask_stream(store, state, 0.9, 4000).take(5000), first)  # read, not drawn again
    assert path.stat().st_mtime_ns == stamp
    longer = mask_stream(store, state, 0.9, 9000)
    assert np.array_equal(longer.take(5000), first) and path.stat().st_mtime_ns != stamp
    assert mask_stream(store, state, 0.9, 9000).n == 9000
    path.write_bytes(path.read_bytes()[:100])  # a damaged entry is drawn again, never trusted
    assert np.array_equal(mask_stream(store, state, 0.9, 5000).take(5000), first)
    other = mask_stream(store, state, 0.8, 5000).take(5000)  # another keep: another stream
    assert not np.array_equal(other, first)
    with pytest.raises(ValueError, match="cannot replay"):
        with ReplayDropout(0.3).replaying(longer):
            pass


def test_a_gate_fitted_with_replayed_masks_is_the_gate_fitted_without(tmp_path):
    train, dev = make_routing_set(300, seed=1), make_routing_set(80, seed=2)
    rng = np.random.default_rng(0)
    p_train, p_dev = rng.random(train.cost.shape), rng.random(dev.cost.shape)
    spec = GateSpec(epochs=2, hidden=32, lambdas_per_batch=4, batch_size=64)
    plain = fit_gate(train, dev, p_train, p_dev, spec)
    gate_mask_stream(Store(tmp_path), spec, train.embedding.shape[1], len(train))  # drawn once, before the fits
    assert len(list((tmp_path / "dropout").glob("dropout-*.npz"))) == 1
    replayed = fit_gate(train, dev, p_train, p_dev, spec, dropout_cache=Store(tmp_path))
    fresh = fit_gate(train, dev, p_train, p_dev, spec, dropout_cache=Store(tmp_path / "new"))  # drawn by the fit itself
    assert fingerprint(plain) == fingerprint(replayed) == fingerprint(fresh)
    assert plain.history_ == replayed.history_
