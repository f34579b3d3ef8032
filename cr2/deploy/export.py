"""Device export of the frozen gate and its threshold table (the artefacts cr2.deploy.runtime loads).

`export_gate(gate, table, out_dir)` writes, atomically (a temporary sibling directory, then a rename):

    gate.onnx         s = σ(Δ̂_φ(e, λ)/T) as an ONNX graph (opset 18, dynamic batch):
                        inputs  embedding [batch, 384] float32, lam [batch] float64 (one λ per row)
                        output  score [batch] float32
    thresholds.json   λ grid, α grid, τ*(λ; α) as float.hex strings (exact; ±inf survive), N_calib,
                      gate fingerprint, dist id, label source, rule, score dtype
    manifest.json     encoder name and dimension, opset, exporter, sha256 of both files, cr2 version,
                      and the parity measured at export time

Why the graph computes in float64. CRC thresholds are compared exactly (accept iff s ≥ τ*, τ* exact in
float32, cr2.crc), and MarginGate.score evaluates in float64 and rounds once to float32; a float32
graph would move scores by a few ulps and flip decisions at the calibration boundary. So the graph
takes the float32 embedding, widens it, runs every layer in float64 and rounds the score once. Three
pieces are written out in primitive ops because onnxruntime's CPU kernels would otherwise not be
float64-exact: LayerNorm (ONNX LayerNormalization keeps its statistics in float32 by default and stores
ε as float32), GELU (onnxruntime has no float64 Erf kernel; erf here is Cephes' rational approximation,
|Δ| ≤ 2e-15 against torch's), and every non-trivial constant (exported as float64 tensors: a Python
float would become a float32 constant). export_gate checks the result against MarginGate.score and
refuses to write an export whose scores differ by more than PARITY_ATOL.

Exporter: torch.onnx.export(dynamo=True) (the torch.export-based exporter with onnxscript; torch 2.13's
default, works offline). torch and onnx are imported inside the functions.
"""
from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from cr2.crc import GroupedThresholdTable, ThresholdTable, rule_risk
from cr2.core.data import EMBED_DIM
from cr2.inputs.embed import ENCODER_NAME
from cr2.core.errors import DataValidationError
from cr2.core.files import replace_dir, temp_dir_beside
from cr2.deploy.runtime import (
    CERTIFIED_FILES,
    EXPORT_FILES,
    GATE_FILE,
    INPUT_EMBEDDING,
    INPUT_LAM,
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    OUTPUT_SCORE,
    THRESHOLDS_FILE,
    DeviceThresholds,
    sha256_file,
)

OPSET = 18  # the dynamo exporter's lowest opset: the widest onnxruntime support (≥ 1.14)
PARITY_ATOL = 1e-5  # export fails when |s_onnx − s_torch| exceeds this on the probe set
PARITY_PROBES = 256  # random unit embeddings checked at every λ of the table at export time
EXPORTER = "torch.onnx.export(dynamo=True)"

# Cephes ndtr.c (S. L. Moshier, public domain): erf on |x| ≤ 1 = x·T(x²)/U(x²); erfc on 1 < x < 8 =
# e^{−x²}·P(x)/Q(x), on x ≥ 8 = e^{−x²}·R(x)/S(x). U, Q and S have an implicit leading 1.
_ERF_T = (9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3, 7.00332514112805075473e3,
          5.55923013010394962768e4)
_ERF_U = (3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3, 2.26290000613890934246e4,
          4.92673942608635921086e4)
_ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0, 4.86371970985681366614e1,
           1.96520832956077098242e2, 5.26445194995477358631e2, 9.34528527171957607540e2, 1.02755188689515710272e3,
           5.57535335369399327526e2)
_ERFC_Q = (1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2, 9.75708501743205489753e2,
           1.82390916687909736289e3, 2.24633760818710981792e3, 1.65666309194161350182e3, 5.57535340817727675546e2)
_ERFC_R = (5.64189583547755073984e-1, 1.27536670759978104416e0, 5.01905042251180477414e0, 6.16021097993053585195e0,
           7.40974269950448939160e0, 2.97886665372100240670e0)
_ERFC_S = (2.26052863220117276590e0, 9.39603524938001434673e0, 1.20489539808096656605e1, 1.70814450747565897222e1,
           9.60896809063285878198e0, 3.36907645100081516050e0)


def _score_graph(gate: Any) -> Any:
    """Return a torch module computing s = σ(Δ̂_φ(e_i, λ_i)/T) row by row in float64 (the exported function)."""
    import copy

    import torch
    from torch import nn

    def f64(values: Any) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.float64)

    def polevl(x: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x) + coef[0]
        for i in range(1, coef.shape[0]):
            out = out * x + coef[i]
        return out

    def p1evl(x: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:  # leading coefficient 1
        out = x + coef[0]
        for i in range(1, coef.shape[0]):
            out = out * x + coef[i]
        return out

    class ScoreGraph(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate = copy.deepcopy(gate).double().eval()
            for name, coef in {"erf_t": _ERF_T, "erf_u": _ERF_U, "erfc_p": _ERFC_P, "erfc_q": _ERFC_Q,
                               "erfc_r": _ERFC_R, "erfc_s": _ERFC_S}.items():
                self.register_buffer(name, f64(coef))
            self.register_buffer("sqrt_half", f64(math.sqrt(0.5)))
            self.register_buffer("ln_eps", f64(self.gate.norm.eps))
            self.register_buffer("two_pi_freq", 2.0 * math.pi * self.gate.film_frequencies)
            with torch.no_grad():  # T as MarginGate.score computes it in its float64 twin
                self.register_buffer("temperature", self.gate.temperature.detach().clone())

        def gelu(self, x: torch.Tensor) -> torch.Tensor:
            """GELU(x) = ½x(1 + erf(x/√2)), erf in float64 from primitive ops."""
            u = x * self.sqrt_half
            small = torch.clamp(u, -1.0, 1.0)
            z = small * small
            erf_small = small * polevl(z, self.erf_t) / p1evl(z, self.erf_u)
            a = torch.clamp(u.abs(), 1.0, 30.0)  # e^{−900} underflows to 0: no inf·0 beyond
            e = torch.exp(-a * a)
            erfc = torch.where(a < 8.0, e * polevl(a, self.erfc_p) / p1evl(a, self.erfc_q),
                               e * polevl(a, self.erfc_r) / p1evl(a, self.erfc_s))
            one_plus_erf = torch.where(u.abs() <= 1.0, 1.0 + erf_small, torch.where(u > 0, 2.0 - erfc, erfc))
            return 0.5 * x * one_plus_erf

        def forward(self, embedding: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
            g = self.gate
            x = embedding.to(torch.float64)
            mean = x.mean(dim=-1, keepdim=True)
            centred = x - mean
            var = (centred * centred).mean(dim=-1, keepdim=True)
            x_norm = centred / torch.sqrt(var + self.ln_eps) * g.norm.weight + g.norm.bias  # LN(e)
            h = g.w1(x_norm)  # h = W1 LN(e), [B, H]
            # eq. (psi_lambda), as MarginGate.psi (flatten instead of len(): the batch stays symbolic)
            log_lam = torch.log(lam.to(torch.float64))[:, None]
            angle = self.two_pi_freq[None, :] * log_lam
            trig = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).flatten(1)
            film = g.film(torch.cat([log_lam, trig], dim=1))  # (γ, β) = W_film ψ_λ, [B, 2H]
            gamma, beta = film[:, : g.hidden], film[:, g.hidden :]
            # eq. (film_gate): Δ̂ = W2 GELU(γ ⊙ h + β) + b2 (eval: no dropout), one λ per row
            margin = g.w2(self.gelu(gamma * h + beta)).squeeze(-1)
            # eq. (gate_score): s = σ(Δ̂ / T), rounded once to float32
            return torch.sigmoid(margin / self.temperature).to(torch.float32)

    return ScoreGraph().eval()


def _write_onnx(gate: Any, path: Path, fingerprint: str) -> None:
    """Export the score graph of `gate` to `path` (one file, weights inline) with cr2 metadata."""
    import logging

    import onnx
    import torch

    module = _score_graph(gate)
    example = (torch.zeros(2, EMBED_DIM, dtype=torch.float32), torch.ones(2, dtype=torch.float64))
    batch = torch.export.Dim("batch")
    quiet = [logging.getLogger(name) for name in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript")]
    levels = [log.level for log in quiet]
    try:
        for log in quiet:
            log.setLevel(logging.ERROR)
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                module, example, input_names=[INPUT_EMBEDDING, INPUT_LAM], output_names=[OUTPUT_SCORE],
                opset_version=OPSET, dynamo=True, external_data=False, verbose=False,
                dynamic_shapes={"embedding": {0: batch}, "lam": {0: batch}},
            )
    finally:
        for log, level in zip(quiet, levels):
            log.setLevel(level)
    model = program.model_proto
    model.doc_string = "cr2 margin gate: score = sigmoid(margin/T), float64 inside; accept iff score >= tau*"
    del model.metadata_props[:]
    for key, value in {"cr2.format": MANIFEST_FORMAT, "cr2.gate_fingerprint": fingerprint,
                       "cr2.encoder": ENCODER_NAME}.items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model)
    onnx.save_model(model, str(path))


def thresholds_json(table: ThresholdTable | GroupedThresholdTable, targets: list[dict] | None = None) -> dict[str, Any]:
    """Return the thresholds.json object of a table (the format is cr2.deploy.runtime's: DeviceThresholds.to_json)."""
    return DeviceThresholds.to_json(table, targets)


def read_threshold_table(path: str | Path) -> ThresholdTable:
    """Return the ThresholdTable stored in an export's thresholds.json (a directory or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / THRESHOLDS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataValidationError(f"{path}: not found; write an export with `cr2 export-gate DIR`") from None
    t = DeviceThresholds.from_json(data, path)
    if t.group_taus:
        raise DataValidationError(f"{path}: Mondrian thresholds (per {t.group_by}); read them with "
                                  "cr2.deploy.runtime.DeviceThresholds.from_json (its .table is the GroupedThresholdTable)")
    return t.table


def _parity(gate: Any, onnx_path: Path, lams: tuple[float, ...], seed: int = 0) -> dict[str, Any]:
    """Return the score parity of onnx_path against gate.score on random unit embeddings at every λ."""
    import onnxruntime as ort

    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((PARITY_PROBES, EMBED_DIM)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    lam = np.asarray(lams, dtype=np.float64)
    reference = gate.score(emb, lam)  # [n, L] float32
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    rows = np.repeat(emb, len(lam), axis=0)  # row i·L + j: embedding i at λ_j
    (out,) = session.run([OUTPUT_SCORE], {INPUT_EMBEDDING: rows, INPUT_LAM: np.tile(lam, len(emb))})
    onnx_scores = np.asarray(out).reshape(len(emb), len(lam))
    diff = np.abs(onnx_scores.astype(np.float64) - reference.astype(np.float64))
    return {"n_probe": PARITY_PROBES, "n_lam": len(lam), "max_abs_score_diff": float(diff.max()),
            "n_scores_not_bit_identical": int((onnx_scores != reference).sum()), "atol": PARITY_ATOL,
            "onnxruntime": ort.__version__}


def publish_export(tmp: Path, out_dir: Path, manifest: dict[str, Any]) -> None:
    """Write the manifest last, then move the finished export from tmp to out_dir (never a half-written export)."""
    (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    _replace_dir(tmp, out_dir)


def _replace_dir(tmp: Path, out_dir: Path) -> None:
    """Move tmp to out_dir; a previous export there is replaced, anything else is refused."""
    if out_dir.exists():
        if not out_dir.is_dir():
            raise DataValidationError(f"{out_dir} exists and is not a directory; pick another export directory")
        entries = {p.name for p in out_dir.iterdir()}
        if entries and not (entries <= {MANIFEST_FILE, *EXPORT_FILES} or entries <= {MANIFEST_FILE, *CERTIFIED_FILES}):
            raise DataValidationError(
                f"{out_dir} exists and holds files other than a cr2 gate export ({sorted(entries)[:5]}); "
                "pick an empty or new directory"
            )
    replace_dir(tmp, out_dir)


def export_gate(gate: Any, table: ThresholdTable | GroupedThresholdTable, out_dir: str | Path,
                encoder_name: str = ENCODER_NAME, targets: list[dict] | None = None) -> dict[str, Any]:
    """Write gate.onnx, thresholds.json and manifest.json to out_dir atomically; return the manifest.

    gate: the frozen cr2.method.gate.MarginGate; table: its ThresholdTable (FingerprintMismatchError when it was
    calibrated for another gate). out_dir is created, or replaced when it holds a previous export; a
    failure leaves it as it was. Raises DataValidationError when the exported scores differ from
    gate.score by more than PARITY_ATOL. The returned manifest carries `dir` besides the written fields.
    """
    import onnx
    import torch

    import cr2
    from cr2.method.checkpoint import fingerprint

    gate_fp = fingerprint(gate)
    table.check_fingerprint(gate_fp)
    if table.score_dtype != "float32":
        raise DataValidationError(f"the table was calibrated on {table.score_dtype} scores; the exported gate returns "
                                  "float32 (MarginGate.score): recalibrate with the gate's scores")
    embed_dim = int(gate.hparams["embed_dim"])
    if embed_dim != EMBED_DIM:
        raise DataValidationError(f"the gate takes {embed_dim}-dim embeddings, but {encoder_name} gives {EMBED_DIM}")
    out_dir = Path(out_dir).absolute()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir_beside(out_dir)
    try:
        _write_onnx(gate, tmp / GATE_FILE, gate_fp)
        parity = _parity(gate, tmp / GATE_FILE, table.scored_lams)
        if not parity["max_abs_score_diff"] <= PARITY_ATOL:
            raise DataValidationError(
                f"the exported gate's scores differ from MarginGate.score by up to {parity['max_abs_score_diff']:.3g} "
                f"(> {PARITY_ATOL:g}) on {PARITY_PROBES} probe embeddings; nothing was written to {out_dir}"
            )
        (tmp / THRESHOLDS_FILE).write_text(json.dumps(thresholds_json(table, targets), indent=1) + "\n", encoding="utf-8")
        manifest = {
            "format": MANIFEST_FORMAT,
            "cr2_version": getattr(cr2, "__version__", None),
            "encoder": {"name": encoder_name, "embedding_dim": embed_dim, "pooling": "mean", "normalize": "l2",
                        "text": "cr2.inputs.embed.router_text(question, choices)"},
            "gate": {
                "file": GATE_FILE, "fingerprint": gate_fp, "hparams": dict(gate.hparams), "opset": OPSET,
                "exporter": EXPORTER, "torch": torch.__version__, "onnx": onnx.__version__, "compute_dtype": "float64",
                "inputs": {INPUT_EMBEDDING: {"shape": ["batch", embed_dim], "dtype": "float32"},
                           INPUT_LAM: {"shape": ["batch"], "dtype": "float64"}},
                "outputs": {OUTPUT_SCORE: {"shape": ["batch"], "dtype": "float32"}},
            },
            "thresholds": {"file": THRESHOLDS_FILE, "dist_id": table.dist_id, "n_lam": len(table.lams),
                           "n_alpha": len(table.alphas), "n_calib": int(table.n_calib), "rule": table.rule,
                           "risk": None if rule_risk(table.rule) is None else rule_risk(table.rule).name,
                           "delta": table.delta, "group_by": getattr(table, "group_by", None)},
            "decision": "accept locally (m0) iff score >= tau*(lam; alpha), compared in float64",
            "parity": parity,
            "files": {name: {"sha256": sha256_file(tmp / name), "bytes": (tmp / name).stat().st_size}
                      for name in EXPORT_FILES},
        }
        publish_export(tmp, out_dir, manifest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return {**manifest, "dir": str(out_dir)}


__all__ = ["OPSET", "PARITY_ATOL", "export_gate", "read_threshold_table", "thresholds_json"]


def export_router(router, out_dir: str | Path, targets: list[dict] | None = None) -> dict[str, Any]:
    """Write a calibrated CR² router's device artefacts (gate.onnx + its threshold table + manifest) to `out_dir`;
    `targets`: certified target-mode operating points shipped beside the table (cr2.method.targets)."""
    from cr2.core.errors import UncalibratedOperatingPointError

    router._check_fitted()
    table = getattr(router, "threshold_table_", None)
    if table is None:
        raise UncalibratedOperatingPointError("export needs a calibrated router; call calibrate() first")
    return export_gate(router.gate_, table, out_dir, targets=targets)
