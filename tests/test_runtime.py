"""Device export: ONNX scores equal the torch gate's, decisions are identical at every (λ, α), files are guarded."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cr2.method.checkpoint import fingerprint
from cr2.config import GateSpec
from cr2.crc import accept, calibrate_table
from cr2.core.errors import DataValidationError, FingerprintMismatchError, UncalibratedOperatingPointError
from cr2.deploy.export import OPSET, PARITY_ATOL, export_gate, read_threshold_table
from cr2.method.gate import MarginGate, fit_gate
from cr2.deploy.runtime import DeviceGate, sha256_file
from cr2.method.utility import disagree_label
from cr2.evaluation.synthetic import make_routing_set

SMALL = GateSpec(epochs=3, batch_size=64, lr=3e-3, seed=0)
LAMS = tuple(np.geomspace(0.1, 20.0, 8))
# 0.001 < 1/(N + 1): τ* = +inf (accept nothing); 1.0: τ* = −inf (accept all) — both must survive the JSON
ALPHAS = (0.001, 0.05, 0.1, 0.2, 0.3, 1.0)
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(one_torch_thread):
    """Training and export here use one torch thread."""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A small fitted gate, its CRC table on a calibration split, a test split, and the export of both."""
    sets = [make_routing_set(n, seed=s) for n, s in ((600, 11), (200, 12), (400, 13), (400, 14))]
    rng = np.random.default_rng(0)
    proba = [np.clip(0.15 + 0.7 * s.correct + 0.1 * rng.standard_normal(s.correct.shape), 0.01, 0.99) for s in sets]
    (train, dev, cal, test), (p_train, p_dev, p_cal, _) = sets, proba
    gate = fit_gate(train, dev, p_train, p_dev, SMALL)
    lams = np.array(LAMS)
    table = calibrate_table(gate.score(cal.embedding, lams), disagree_label(p_cal, cal.cost, lams), lams, ALPHAS,
                            gate_fingerprint=fingerprint(gate), dist_id="default@v1-test", label_source="synthetic")
    out = tmp_path_factory.mktemp("export") / "gate-export"
    manifest = export_gate(gate, table, out)
    return {"gate": gate, "table": table, "cal": cal, "test": test, "dir": out, "manifest": manifest,
            "device": DeviceGate.load(out)}


def _copy(setup, tmp_path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(setup["dir"], target)
    return target


# ---------------------------------------------------------------- parity
def test_onnx_scores_equal_the_torch_gate_scores(setup):
    gate, device = setup["gate"], setup["device"]
    emb = np.concatenate([setup["test"].embedding, setup["cal"].embedding])
    worst = 0.0
    for lam in (*LAMS, 0.37, 3.0, 50.0):  # grid and off-grid λ: the score itself is defined for every λ > 0
        ref, got = gate.score(emb, lam), device.score(emb, lam)
        assert got.dtype == np.float32 and got.shape == ref.shape
        worst = max(worst, float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()))
        # the graph runs in float64 and rounds once, as MarginGate.score does: the same float32, bit for bit
        np.testing.assert_array_equal(got, ref, err_msg=f"λ={lam:g}")
    assert worst <= PARITY_ATOL
    assert setup["manifest"]["parity"]["max_abs_score_diff"] <= PARITY_ATOL


def test_decisions_are_identical_at_every_operating_point(setup):
    gate, table, device = setup["gate"], setup["table"], setup["device"]
    fp = fingerprint(gate)
    partial = 0
    for split in ("cal", "test"):  # the calibration split holds the scores each τ* sits just above
        emb = setup[split].embedding
        for lam in table.lams:
            ref_scores = gate.score(emb, lam)
            for alpha in table.alphas:
                tau = table.tau(lam, alpha, fp)
                decision = device.decide(emb, lam, alpha)
                assert decision.tau == tau
                np.testing.assert_array_equal(decision.accept, accept(ref_scores, tau), err_msg=f"{split} λ={lam:g} α={alpha:g}")
                partial += 0 < decision.accept.sum() < len(emb)
    assert partial >= 20  # the comparison is not vacuous: many operating points accept some queries and defer others


def test_score_is_batch_invariant_and_takes_one_lambda_per_row(setup):
    device, emb = setup["device"], setup["test"].embedding[:40]
    lam = np.geomspace(0.1, 20.0, 40)
    per_row = device.score(emb, lam)
    np.testing.assert_array_equal(per_row, np.concatenate([device.score(emb[i : i + 1], lam[i]) for i in range(40)]))
    np.testing.assert_array_equal(device.score(emb[7], 2.0), device.score(emb[7:8], 2.0))  # one 1-D embedding
    assert device.score(np.zeros((0, 384), np.float32), 1.0).shape == (0,)


def test_onnx_gelu_matches_torch_to_float64_rounding():
    import torch
    from torch.nn import functional as F

    from cr2.deploy.export import _score_graph

    graph = _score_graph(MarginGate().eval())
    x = torch.linspace(-40.0, 40.0, 400_001, dtype=torch.float64)
    assert (graph.gelu(x) - F.gelu(x)).abs().max().item() <= 1e-14


# ---------------------------------------------------------------- the files
def test_thresholds_round_trip_exactly_including_infinities(setup):
    table, back = setup["table"], read_threshold_table(setup["dir"])
    np.testing.assert_array_equal(back.taus, table.taus)
    assert np.isposinf(back.taus[:, 0]).all() and np.isneginf(back.taus[:, -1]).all()
    assert (back.lams, back.alphas, back.n_calib) == (table.lams, table.alphas, table.n_calib)
    assert (back.gate_fingerprint, back.dist_id, back.label_source, back.rule, back.score_dtype) == (
        table.gate_fingerprint, table.dist_id, table.label_source, table.rule, table.score_dtype)
    raw = json.loads((setup["dir"] / "thresholds.json").read_text())
    assert raw["taus"][0][0] == "inf" and raw["taus"][0][-1] == "-inf"
    # a finite τ* is the float32 just above a calibration score: it must be exactly a float32 value
    finite = back.taus[np.isfinite(back.taus)]
    np.testing.assert_array_equal(finite.astype(np.float32).astype(np.float64), finite)


def test_manifest_names_encoder_opset_and_hashes(setup):
    m = json.loads((setup["dir"] / "manifest.json").read_text())
    assert m["encoder"] == {**m["encoder"], "name": "all-MiniLM-L6-v2", "embedding_dim": 384}
    assert m["gate"]["opset"] == OPSET and m["gate"]["fingerprint"] == fingerprint(setup["gate"])
    assert m["gate"]["inputs"]["lam"]["dtype"] == "float64" and m["gate"]["outputs"]["score"]["dtype"] == "float32"
    assert m["cr2_version"] == "0.1.0"
    for name in ("gate.onnx", "thresholds.json"):
        assert m["files"][name]["sha256"] == sha256_file(setup["dir"] / name)
    assert sorted(p.name for p in setup["dir"].iterdir()) == ["gate.onnx", "manifest.json", "thresholds.json"]
    assert not [p for p in setup["dir"].parent.iterdir() if p.name.startswith(".")]  # no temporary leftovers


@pytest.mark.parametrize("victim", ["gate.onnx", "thresholds.json"])
def test_an_altered_file_is_rejected_naming_it(setup, tmp_path, victim):
    d = _copy(setup, tmp_path)
    path = d / victim
    data = bytearray(path.read_bytes())
    if victim == "thresholds.json":  # a plausible edit: loosen one threshold
        data = bytearray(path.read_text().replace('"-inf"', '"0x0.0p+0"', 1).encode())
    else:
        data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(DataValidationError, match=rf"{victim}: sha256 .* does not match the manifest"):
        DeviceGate.load(d)


def test_a_tampered_manifest_or_missing_file_is_rejected(setup, tmp_path):
    d = _copy(setup, tmp_path)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["files"]["gate.onnx"]["sha256"] = "0" * 64
    (d / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataValidationError, match="gate.onnx: sha256 .* does not match the manifest"):
        DeviceGate.load(d)
    shutil.copy(setup["dir"] / "manifest.json", d / "manifest.json")
    (d / "thresholds.json").unlink()
    with pytest.raises(DataValidationError, match="thresholds.json: missing"):
        DeviceGate.load(d)
    (d / "manifest.json").unlink()
    with pytest.raises(DataValidationError, match="manifest.json: missing; re-export"):
        DeviceGate.load(d)
    with pytest.raises(DataValidationError, match="no such export directory"):
        DeviceGate.load(tmp_path / "nowhere")


def test_off_grid_lambda_or_alpha_names_the_grid(setup):
    device, emb = setup["device"], setup["test"].embedding[:5]
    with pytest.raises(UncalibratedOperatingPointError, match=r"λ=0.37 is not on .* grid \[0.1 … 20, 8 points\]"):
        device.decide(emb, 0.37, 0.1)
    with pytest.raises(UncalibratedOperatingPointError, match=r"α=0.15 is not on .* grid \[0.001, 0.05, 0.1, 0.2, 0.3, 1\]"):
        device.decide(emb, LAMS[2], 0.15)
    # a grid value as read back from text (relative error ≤ 1e-9) is on the grid
    assert device.decide(emb, LAMS[2] * (1 + 1e-12), 0.1).tau == device.tau(LAMS[2], 0.1)


def test_bad_inputs_are_rejected_with_the_expected_shape(setup):
    device = setup["device"]
    with pytest.raises(DataValidationError, match=r"embedding has shape \(3, 383\), expected \[n, 384\]"):
        device.score(np.zeros((3, 383), np.float32), 1.0)
    with pytest.raises(DataValidationError, match="NaN"):
        device.score(np.full((2, 384), np.nan, np.float32), 1.0)
    with pytest.raises(DataValidationError, match="positive and finite"):
        device.score(np.zeros((2, 384), np.float32), 0.0)
    with pytest.raises(DataValidationError, match=r"λ has shape \(3,\)"):
        device.score(np.zeros((2, 384), np.float32), np.ones(3))


# ---------------------------------------------------------------- the device needs no torch
def test_the_runtime_imports_neither_torch_nor_training_code(setup):
    code = (
        "import json, sys\n"
        "import numpy as np\n"
        "from cr2.deploy.runtime import DeviceGate\n"
        f"g = DeviceGate.load({str(setup['dir'])!r})\n"
        "d = g.decide(np.ones((3, 384), np.float32) / 384 ** 0.5, g.thresholds.lams[0], g.thresholds.alphas[1])\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    heavy = {"torch", "onnx", "onnxscript", "scipy", "pandas", "pydantic", "yaml", "prefect", "duckdb", "transformers"}
    assert not heavy & {m.split(".")[0] for m in modules}
    # the thresholds are cr2.crc's own table (one lookup for host and device); cr2.crc imports only numpy
    crc = {"cr2.crc", "cr2.crc.registry", "cr2.crc.rules", "cr2.crc.table", "cr2.crc.mondrian", "cr2.crc.exact"}
    assert {m for m in modules if m == "cr2" or m.startswith("cr2.")} <= {"cr2", "cr2.core", "cr2.core.errors", "cr2.deploy", "cr2.deploy.runtime", *crc}
    assert "onnxruntime" in modules


# ---------------------------------------------------------------- export guards
def test_export_refuses_a_table_of_another_gate(setup, tmp_path):
    other = MarginGate().eval()
    with pytest.raises(FingerprintMismatchError):
        export_gate(other, setup["table"], tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_export_replaces_a_previous_export_but_never_foreign_files(setup, tmp_path, monkeypatch):
    d = _copy(setup, tmp_path)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    import cr2.deploy.export as export_mod

    # a failed export (here: parity out of tolerance) leaves the previous export untouched
    monkeypatch.setattr(export_mod, "_write_onnx", lambda gate, path, fp: path.write_bytes(b"not a model"))
    monkeypatch.setattr(export_mod, "_parity", lambda *a, **k: {"max_abs_score_diff": 1.0})
    with pytest.raises(DataValidationError, match="nothing was written"):
        export_gate(setup["gate"], setup["table"], d)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]  # the temporary directory is gone
    monkeypatch.undo()

    # a successful export over a previous one replaces it as a whole
    (d / "thresholds.json").write_text("stale")
    manifest = export_gate(setup["gate"], setup["table"], d)
    assert manifest["dir"] == str(d) and DeviceGate.load(d).tau(LAMS[0], 0.05) == setup["device"].tau(LAMS[0], 0.05)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]

    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("mine")
    with pytest.raises(DataValidationError, match="holds files other than a cr2 gate export"):
        export_gate(setup["gate"], setup["table"], foreign)
    assert (foreign / "todo.txt").read_text() == "mine"
