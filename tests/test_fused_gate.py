"""The fused NumPy gate (cr2.method.fused_gate) computes the torch gate's scores and decisions at a fixed λ."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cr2.core.errors import DataValidationError
from cr2.method.fused_gate import FusedGate
from cr2.method.gate import MarginGate


@pytest.fixture(scope="module")
def gate():
    torch.manual_seed(0)
    g = MarginGate()
    with torch.no_grad():  # move every parameter off its initial value, so folding errors cannot hide
        for p in g.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return g.eval()


@pytest.fixture(scope="module")
def emb():
    x = np.random.default_rng(1).standard_normal((500, 384)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("lam", [0.1, 1.0, 8.0, 20.0])
def test_float64_fused_gate_equals_the_torch_gate(gate, emb, lam):
    ref = gate.score(emb, lam)
    fused = FusedGate.from_gate(gate, lam)
    got = fused.score(emb)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6)
    one = np.array([fused.score_one(np.ascontiguousarray(e, dtype=np.float64)) for e in emb])
    np.testing.assert_allclose(one, ref, rtol=0, atol=1e-6)
    assert np.array_equal(one.astype(np.float32), got)  # batch and single paths agree exactly


@pytest.mark.parametrize("lam", [0.5, 2.0])
def test_float32_fused_gate_is_close_to_the_torch_gate(gate, emb, lam):
    ref = gate.score(emb, lam)
    got = FusedGate.from_gate(gate, lam, dtype=np.float32).score(emb)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5)


def test_accept_compares_like_crc_accept(gate, emb):
    from cr2.crc import accept

    fused = FusedGate.from_gate(gate, 1.0)
    s = gate.score(emb, 1.0)
    tau = float(np.median(s))
    assert np.array_equal(fused.accept(emb, tau), accept(s, tau))


def test_fused_gate_does_not_depend_on_the_embedding_scale_the_way_layernorm_does_not(gate, emb):
    fused = FusedGate.from_gate(gate, 1.0)
    np.testing.assert_allclose(fused.score(emb * 3.0), gate.score(emb * 3.0, 1.0), atol=1e-6)


def test_bad_inputs_are_clear_errors(gate, emb):
    with pytest.raises(DataValidationError, match="λ must be positive"):
        FusedGate.from_gate(gate, 0.0)
    with pytest.raises(DataValidationError, match="expected \\[n, 384\\]"):
        FusedGate.from_gate(gate, 1.0).score(emb[:, :100])


def test_device_gate_fused_reads_the_export_and_equals_its_scores(gate, emb, tmp_path):
    from cr2.method.checkpoint import fingerprint
    from cr2.crc import calibrate_table
    from cr2.deploy.export import export_gate
    from cr2.deploy.runtime import DeviceGate

    lams = np.array([0.5, 1.0, 2.0])
    rng = np.random.default_rng(2)
    table = calibrate_table(gate.score(emb, lams), rng.random((len(emb), len(lams))) < 0.3, lams, [0.1, 0.2],
                            gate_fingerprint=fingerprint(gate), dist_id="test", label_source="synthetic")
    export_gate(gate, table, tmp_path / "export")
    device = DeviceGate.load(tmp_path / "export")
    for lam in lams:
        fused = device.fused(float(lam))
        np.testing.assert_allclose(fused.score(emb), device.score(emb, float(lam)), rtol=0, atol=1e-6)
        tau = device.tau(float(lam), 0.1)
        assert np.array_equal(fused.accept(emb, tau), device.decide(emb, float(lam), 0.1).accept)
    with pytest.raises(Exception, match="not on the exported gate's calibrated grid"):
        device.fused(0.37)
