"""The device side of CR²: load an exported gate with onnxruntime and make the accept/defer decision.

A device needs three files written by `cr2.export.export_gate` (or `cr2 export-gate DIR`):

    manifest.json     encoder name and dimension, opset, sha256 of the two files below
    gate.onnx         s = σ(Δ̂_φ(e, λ)/T): inputs embedding [batch, 384] float32, lam [batch] float64;
                      output score [batch] float32 (evaluated in float64 inside, rounded once)
    thresholds.json   τ*(λ; α) over the calibrated λ × α grid, τ* as float.hex strings (exact, ±inf kept)

and accepts a query locally (m0) iff s ≥ τ*(λ; α) (eq. cr2_rule), the comparison cr2.crc.accept makes.

This module imports only numpy, json, hashlib, pathlib and onnxruntime (plus cr2.errors, which is plain
Python): no torch, no training or calibration code, so it runs where only onnxruntime is installed.
The file formats are defined here; cr2.export writes them.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from cr2.errors import DataValidationError, UncalibratedOperatingPointError

MANIFEST_FORMAT = "cr2-device-export/1"
THRESHOLDS_FORMAT = "cr2-thresholds/1"
MANIFEST_FILE = "manifest.json"
GATE_FILE = "gate.onnx"
THRESHOLDS_FILE = "thresholds.json"
EXPORT_FILES = (GATE_FILE, THRESHOLDS_FILE)  # the files the manifest hashes
INPUT_EMBEDDING, INPUT_LAM, OUTPUT_SCORE = "embedding", "lam", "score"
GRID_RTOL = 1e-9  # relative tolerance when matching a requested λ or α to the grid (= cr2.crc.LAM_RTOL)


class DeviceDecision(NamedTuple):
    """The accept/defer decision of a batch: accept iff score ≥ tau (unpacks as (accept, score, tau))."""

    accept: np.ndarray  # [n] bool, True: answer locally with m0; False: defer to the edge
    score: np.ndarray  # [n] float32, s = σ(Δ̂/T)
    tau: float  # τ*(λ; α), exact in float32; −inf accepts all, +inf none


def sha256_file(path: str | Path) -> str:
    """Return the hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def encode_tau(tau: float) -> str:
    """Return τ as float.hex ('0x1.8p-1', 'inf', '-inf'): exact, and JSON has no ±inf."""
    return float(tau).hex()


def decode_tau(text: str) -> float:
    """Return the float written by encode_tau."""
    return float.fromhex(text)


def _grid_text(values: tuple[float, ...]) -> str:
    if len(values) <= 6:
        return "[" + ", ".join(f"{v:g}" for v in values) + "]"
    return f"[{values[0]:g} … {values[-1]:g}, {len(values)} points]"


def _grid_index(values: tuple[float, ...], x: float) -> int | None:
    for i, v in enumerate(values):
        if abs(v - x) <= GRID_RTOL * max(abs(v), abs(x)):
            return i
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataValidationError(f"{path}: missing; re-export the gate with `cr2 export-gate {path.parent}`") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataValidationError(f"{path}: not valid JSON ({exc}); re-export the gate with `cr2 export-gate`") from None
    if not isinstance(data, dict):
        raise DataValidationError(f"{path}: expected a JSON object; re-export the gate with `cr2 export-gate`")
    return data


def _require(data: dict[str, Any], keys: tuple[str, ...], where: Path) -> None:
    missing = [k for k in keys if k not in data]
    if missing:
        raise DataValidationError(f"{where}: missing field(s) {missing}; re-export the gate with `cr2 export-gate`")


@dataclass(frozen=True)
class DeviceThresholds:
    """τ*(λ; α) as shipped in thresholds.json (the device's copy of a cr2.crc.ThresholdTable)."""

    lams: tuple[float, ...]  # [n_lam] ascending cost weights λ
    alphas: tuple[float, ...]  # [n_alpha] ascending risk levels α
    taus: np.ndarray  # [n_lam, n_alpha] float64 τ*, each exact in score_dtype; ±inf allowed
    n_calib: int  # N, calibration queries per λ
    gate_fingerprint: str  # the gate the thresholds were calibrated for
    dist_id: str  # channel-state distribution of the calibration set
    label_source: str  # where the correctness labels came from
    rule: str  # a cr2.crc.RULE_CATALOGUE name: crc | ltt | crc-oracle | …
    score_dtype: str  # dtype the scores were calibrated (and must be compared) in
    delta: float | None = None  # ltt: P(some λ has risk > α) ≤ δ, per α
    group_by: str | None = None  # Mondrian: the query attribute of group_taus (e.g. "benchmark")
    group_taus: dict | None = None  # Mondrian: group value → [n_lam, n_alpha] τ* (then `taus` is +inf: defer)
    targets: tuple = ()  # certified target-mode operating points: dicts with mode, target, delta, lam, alpha, tau
    # issue 26: the risk α bounds (cr2.crc.RISKS): teacher-disagreement | oracle-disagreement | avoidable-error
    risk: str | None = "teacher-disagreement"

    @classmethod
    def from_json(cls, data: dict[str, Any], where: Path | str = THRESHOLDS_FILE) -> "DeviceThresholds":
        """Return the thresholds of a parsed thresholds.json; raises DataValidationError when malformed."""
        where = Path(where)
        _require(data, ("format", "lams", "alphas", "taus", "n_calib", "gate_fingerprint", "dist_id", "label_source",
                        "rule", "score_dtype"), where)
        if data["format"] != THRESHOLDS_FORMAT:
            raise DataValidationError(f"{where}: format {data['format']!r}, expected {THRESHOLDS_FORMAT!r}; "
                                      "re-export with this version of cr2 (`cr2 export-gate`)")
        lams = tuple(float(v) for v in data["lams"])
        alphas = tuple(float(v) for v in data["alphas"])
        try:
            taus = np.array([[decode_tau(t) for t in row] for row in data["taus"]], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DataValidationError(f"{where}: taus must be float.hex strings ({exc})") from None
        if taus.shape != (len(lams), len(alphas)) or not lams or not alphas:
            raise DataValidationError(f"{where}: taus has shape {taus.shape}, expected (n_lam, n_alpha) = "
                                      f"({len(lams)}, {len(alphas)}) with both grids non-empty")
        if np.isnan(taus).any() or list(lams) != sorted(lams) or list(alphas) != sorted(alphas):
            raise DataValidationError(f"{where}: τ* must not be NaN and the λ and α grids must be ascending")
        taus.setflags(write=False)
        group_taus = None
        if data.get("group_taus"):  # issue 21: Mondrian thresholds, one grid per group
            try:
                group_taus = {str(g): np.array([[decode_tau(t) for t in row] for row in grid], dtype=np.float64)
                              for g, grid in data["group_taus"].items()}
            except (TypeError, ValueError, AttributeError) as exc:
                raise DataValidationError(f"{where}: group_taus must map groups to float.hex grids ({exc})") from None
            for g, grid in group_taus.items():
                if grid.shape != taus.shape or np.isnan(grid).any():
                    raise DataValidationError(f"{where}: group '{g}' thresholds have shape {grid.shape}, expected {taus.shape}")
                grid.setflags(write=False)
        try:
            targets = tuple({**t, "tau": decode_tau(t["tau"])} for t in data.get("targets") or ())
        except (TypeError, ValueError, KeyError) as exc:
            raise DataValidationError(f"{where}: targets must be objects with a float.hex tau ({exc})") from None
        return cls(lams=lams, alphas=alphas, taus=taus, n_calib=int(data["n_calib"]),
                   gate_fingerprint=str(data["gate_fingerprint"]), dist_id=str(data["dist_id"]),
                   label_source=str(data["label_source"]), rule=str(data["rule"]), score_dtype=str(data["score_dtype"]),
                   delta=None if data.get("delta") is None else float(data["delta"]),
                   group_by=data.get("group_by"), group_taus=group_taus, targets=targets,
                   # an export without "risk" predates issue 26, when every rule controlled teacher disagreement
                   risk=data["risk"] if "risk" in data else "teacher-disagreement")

    def lam_index(self, lam: float) -> int:
        """Return the grid row of λ; raises UncalibratedOperatingPointError naming the grid when off-grid."""
        i = _grid_index(self.lams, float(lam))
        if i is None:
            raise UncalibratedOperatingPointError(
                f"λ={float(lam):g} is not on the exported gate's calibrated grid {_grid_text(self.lams)}; pick a grid "
                f"value, or calibrate it on the host (`cr2 calibrate --lam {float(lam):g}`) and re-export (`cr2 export-gate`)"
            )
        return i

    def alpha_index(self, alpha: float) -> int:
        """Return the grid column of α; raises UncalibratedOperatingPointError naming the grid when off-grid."""
        j = _grid_index(self.alphas, float(alpha))
        if j is None:
            raise UncalibratedOperatingPointError(
                f"α={float(alpha):g} is not on the exported gate's calibrated grid {_grid_text(self.alphas)}; pick a "
                "grid value, or add it to grids.alpha on the host, re-calibrate and re-export (`cr2 export-gate`)"
            )
        return j

    def tau(self, lam: float, alpha: float, group: str | None = None) -> float:
        """Return τ*(λ; α) (exact in score_dtype; accept iff s ≥ τ*); Mondrian thresholds need the query's group."""
        i, j = self.lam_index(lam), self.alpha_index(alpha)
        if self.group_taus is None:
            return float(self.taus[i, j])
        if group not in self.group_taus:
            raise UncalibratedOperatingPointError(
                f"these thresholds are per {self.group_by} (Mondrian); pass the query's {self.group_by}, one of "
                f"{', '.join(sorted(self.group_taus))} (got {group!r})")
        return float(self.group_taus[group][i, j])

    def target(self, target_accuracy: float | None = None, budget: float | None = None) -> dict:
        """Return the exported target-mode operating point (lam, alpha, tau, delta, …) for this target."""
        mode, value = ("accuracy", target_accuracy) if target_accuracy is not None else ("budget", budget)
        for t in self.targets:
            if t["mode"] == mode and abs(float(t["target"]) - float(value)) <= 1e-12:
                return t
        have = ", ".join(f"{t['mode']} {t['target']:g}" for t in self.targets) or "none"
        raise UncalibratedOperatingPointError(
            f"no exported operating point for {mode} {value}; exported: {have}. Re-export with "
            f"`cr2 export-gate DIR --target-accuracy X` or `--budget B`")


class DeviceGate:
    """The exported gate and its threshold table on a device: score(e, λ) and decide(e, λ, α)."""

    def __init__(self, directory: Path, manifest: dict[str, Any], thresholds: DeviceThresholds, session: Any) -> None:
        self.directory = directory
        self.manifest = manifest
        self.thresholds = thresholds
        self.encoder_name: str = manifest["encoder"]["name"]
        self.embed_dim: int = int(manifest["encoder"]["embedding_dim"])
        self.gate_fingerprint: str = manifest["gate"]["fingerprint"]
        self._session = session

    # ------------------------------------------------------------ loading
    @classmethod
    def load(cls, directory: str | Path, *, num_threads: int = 1) -> "DeviceGate":
        """Return the gate exported to `directory`, after checking the manifest's sha256 of every file.

        num_threads: onnxruntime intra-op threads (1 is plenty for a 105k-parameter MLP).
        Raises DataValidationError when a file is missing, altered or inconsistent with the manifest.
        """
        import onnxruntime as ort

        directory = Path(directory)
        if not directory.is_dir():
            raise DataValidationError(f"{directory}: no such export directory; write one with `cr2 export-gate {directory}`")
        where = directory / MANIFEST_FILE
        manifest = _read_json(where)
        _require(manifest, ("format", "encoder", "gate", "files"), where)
        if manifest["format"] != MANIFEST_FORMAT:
            raise DataValidationError(f"{where}: format {manifest['format']!r}, expected {MANIFEST_FORMAT!r}; "
                                      "re-export with this version of cr2 (`cr2 export-gate`)")
        files, encoder, gate = manifest["files"], manifest["encoder"], manifest["gate"]
        if not (isinstance(files, dict) and isinstance(encoder, dict) and isinstance(gate, dict)):
            raise DataValidationError(f"{where}: files, encoder and gate must be JSON objects; re-export (`cr2 export-gate`)")
        _require(encoder, ("name", "embedding_dim"), where)
        _require(gate, ("fingerprint",), where)
        for name in EXPORT_FILES:
            path = directory / name
            expected = files.get(name, {}).get("sha256") if isinstance(files.get(name), dict) else None
            if expected is None:
                raise DataValidationError(f"{where}: lists no sha256 for {name}; re-export the gate with `cr2 export-gate`")
            if not path.is_file():
                raise DataValidationError(f"{path}: missing (the manifest lists it); copy the whole export directory")
            actual = sha256_file(path)
            if actual != expected:
                raise DataValidationError(
                    f"{path}: sha256 {actual[:16]}… does not match the manifest's {expected[:16]}…; the file was altered or "
                    "damaged in transfer: copy the export directory again, or re-export (`cr2 export-gate`)"
                )
        thresholds = DeviceThresholds.from_json(_read_json(directory / THRESHOLDS_FILE), directory / THRESHOLDS_FILE)
        gate_fp = gate["fingerprint"]
        if thresholds.gate_fingerprint != gate_fp:
            raise DataValidationError(
                f"{directory}: thresholds.json was calibrated for gate {thresholds.gate_fingerprint}, but gate.onnx is "
                f"gate {gate_fp}; re-export both together (`cr2 export-gate`)"
            )
        if thresholds.score_dtype != "float32":
            raise DataValidationError(f"{directory / THRESHOLDS_FILE}: thresholds were calibrated on {thresholds.score_dtype} "
                                      "scores, but gate.onnx returns float32; recalibrate with cr2's float32 gate scores")
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(num_threads)
        options.inter_op_num_threads = 1
        # basic (numerics-preserving) graph rewrites only: the graph must compute exactly what was exported
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        session = ort.InferenceSession(str(directory / GATE_FILE), options, providers=["CPUExecutionProvider"])
        meta = session.get_modelmeta().custom_metadata_map
        if meta.get("cr2.gate_fingerprint") != gate_fp:
            raise DataValidationError(f"{directory / GATE_FILE}: model fingerprint {meta.get('cr2.gate_fingerprint')!r} "
                                      f"differs from the manifest's {gate_fp!r}; re-export (`cr2 export-gate`)")
        return cls(directory, manifest, thresholds, session)

    # ------------------------------------------------------------ inference
    def _embedding(self, embedding: np.ndarray) -> np.ndarray:
        arr = np.asarray(embedding, dtype=np.float32)
        if arr.ndim == 1 and arr.shape[0] == self.embed_dim:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[1] != self.embed_dim:
            raise DataValidationError(f"embedding has shape {arr.shape}, expected [n, {self.embed_dim}] "
                                      f"({self.encoder_name} vectors)")
        if not np.isfinite(arr).all():
            raise DataValidationError("embedding contains NaN or ±inf; pass the encoder's L2-normalised vectors")
        return np.ascontiguousarray(arr)

    def score(self, embedding: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
        """Return the gate scores s = σ(Δ̂/T), float32 [n]; λ a scalar or one λ per row ([n]).

        Bit-identical to cr2.gate.MarginGate.score for the same (e, λ): both evaluate in float64 and round once.
        """
        arr = self._embedding(embedding)
        lam_arr = np.asarray(lam, dtype=np.float64)
        if lam_arr.ndim == 0:
            lam_arr = np.full(len(arr), float(lam_arr))
        if lam_arr.shape != (len(arr),):
            raise DataValidationError(f"λ has shape {lam_arr.shape}, expected a scalar or ({len(arr)},) like the embeddings")
        if not (np.isfinite(lam_arr) & (lam_arr > 0)).all():
            raise DataValidationError(f"λ must be positive and finite, got {lam!r}")
        if len(arr) == 0:
            return np.zeros(0, dtype=np.float32)
        (out,) = self._session.run([OUTPUT_SCORE], {INPUT_EMBEDDING: arr, INPUT_LAM: np.ascontiguousarray(lam_arr)})
        return np.asarray(out, dtype=np.float32)

    def tau(self, lam: float, alpha: float, group: str | None = None) -> float:
        """Return τ*(λ; α); raises UncalibratedOperatingPointError naming the grid when (λ, α) is off it."""
        return self.thresholds.tau(lam, alpha, group)

    def decide(self, embedding: np.ndarray, lam: float, alpha: float, group: str | None = None) -> DeviceDecision:
        """Return (accept [n] bool, score [n] float32, τ*): accept locally iff s ≥ τ*(λ; α).

        (λ, α) must be on the calibrated grid (else UncalibratedOperatingPointError naming it); Mondrian
        thresholds need the query's group.
        """
        tau = self.tau(lam, alpha, group)  # checked before scoring: an off-grid request fails fast
        if lam == 0:  # the accuracy-only end of the sweep: CR² defers everything (τ = +∞); the gate is not scored
            n = len(self._embedding(embedding))
            return DeviceDecision(accept=np.zeros(n, dtype=bool), score=np.full(n, -np.inf, dtype=np.float32), tau=tau)
        score = self.score(embedding, float(lam))
        # eq. (cr2_rule): accept locally (m0) iff s_φ(e(x), λ) ≥ τ*(λ; α), compared exactly (float32 widened)
        accept = score.astype(np.float64) >= tau
        return DeviceDecision(accept=accept, score=score, tau=tau)

    def decide_target(self, embedding: np.ndarray, target_accuracy: float | None = None,
                      budget: float | None = None) -> DeviceDecision:
        """Return the decision at the exported operating point certified for this target (issue 21)."""
        t = self.thresholds.target(target_accuracy, budget)
        score = self.score(embedding, float(t["lam"]))
        # eq. (cr2_rule) at the certified (λ, α, τ) of the target
        return DeviceDecision(accept=score.astype(np.float64) >= t["tau"], score=score, tau=float(t["tau"]))

    def fused(self, lam: float, dtype: Any = np.float64) -> Any:
        """Return the gate at one fixed λ as a cr2.fused_gate.FusedGate (NumPy only, ≈ 10× faster at batch 1).

        The weights are read from gate.onnx's float64 initializers (the `onnx` package parses the file;
        onnxruntime does not expose them). Score with .score_one(e) / .score(E) and compare with self.tau(λ, α)
        — float64 gives the same float32 scores as score() (tests/test_fused_gate.py), float32 agrees to ≈ 1e-6.
        """
        import onnx
        from onnx import numpy_helper

        from cr2.fused_gate import FusedGate

        self.thresholds.lam_index(lam)  # a fused gate is only useful at a calibrated λ
        model = onnx.load(str(self.directory / GATE_FILE))
        init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        arrays = {k.removeprefix("gate."): v for k, v in init.items() if k.startswith("gate.")}
        missing = {"norm.weight", "norm.bias", "w1.weight", "w1.bias", "film.weight", "film.bias", "w2.weight",
                   "w2.bias"} - set(arrays)
        freqs = self.manifest["gate"].get("hparams", {}).get("film_frequencies")
        if missing or freqs is None or not {"temperature", "ln_eps"} <= set(init):
            raise DataValidationError(f"{self.directory / GATE_FILE}: not a cr2 gate graph (missing "
                                      f"{sorted(missing) or 'temperature, ln_eps or the FiLM frequencies'}); "
                                      "re-export (`cr2 export-gate`)")
        # the graph's angle is (2π·f_k)·log λ with 2π·f_k formed in float64 at export: the same product here
        return FusedGate.from_arrays(arrays, freqs, float(init["temperature"]), float(lam), eps=float(init["ln_eps"]),
                                     dtype=dtype)

    def __repr__(self) -> str:
        t = self.thresholds
        return (f"DeviceGate({str(self.directory)!r}, gate={self.gate_fingerprint}, encoder={self.encoder_name}, "
                f"λ grid {_grid_text(t.lams)}, α grid {_grid_text(t.alphas)}, dist={t.dist_id})")


__all__ = ["DeviceDecision", "DeviceGate", "DeviceThresholds", "decode_tau", "encode_tau", "sha256_file"]
