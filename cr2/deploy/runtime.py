"""The device side of CR²: load an exported gate with onnxruntime and make the accept/defer decision.

A device needs three files written by `cr2.deploy.export.export_gate` (or `cr2 export-gate DIR`):

    manifest.json     encoder name and dimension, opset, sha256 of the two files below
    gate.onnx         s = σ(Δ̂_φ(e, λ)/T): inputs embedding [batch, 384] float32, lam [batch] float64;
                      output score [batch] float32 (evaluated in float64 inside, rounded once)
    thresholds.json   τ*(λ; α) over the calibrated λ × α grid, τ* as float.hex strings (exact, ±inf kept)

and accepts a query locally (m0) iff s ≥ τ*(λ; α) (eq. cr2_rule), the comparison cr2.crc.accept makes.

This module imports only numpy, json, hashlib, pathlib and onnxruntime (plus cr2.core.errors and cr2.crc, which
import only numpy): no torch and no training code, so it runs where only onnxruntime is installed. The
file formats are defined here (DeviceThresholds.to_json / from_json); cr2.deploy.export writes them. The thresholds
themselves are cr2.crc's ThresholdTable / GroupedThresholdTable — one lookup and validation for host and device.

A certified router's export has its own format (constants below; written and read by cr2.deploy.certified_export).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from cr2.crc import GroupedThresholdTable, ThresholdTable, grid_text, group_key, rule_risk
from cr2.core.errors import DataValidationError, InvalidValueError, UncalibratedOperatingPointError, UnknownNameError

MANIFEST_FORMAT = "cr2-device-export/1"
THRESHOLDS_FORMAT = "cr2-thresholds/1"
MANIFEST_FILE = "manifest.json"
GATE_FILE = "gate.onnx"
THRESHOLDS_FILE = "thresholds.json"
EXPORT_FILES = (GATE_FILE, THRESHOLDS_FILE)  # the files the manifest hashes
# a certified router's export (`cr2 export-gate --router knn --rule crc-avoidable`, cr2.deploy.certified_export.export_certified)
CERTIFIED_FORMAT = "cr2-certified-export/1"
ROUTER_FILE = "router.npz"  # the fitted router's state as OneShotRouter.save writes it (KNN: its index)
COSTS_FILE = "costs.json"  # the pool and the inputs of the decision cost ĉ (cr2.system.cost.compute_costs)
CERTIFIED_FILES = (ROUTER_FILE, THRESHOLDS_FILE, COSTS_FILE)
INPUT_EMBEDDING, INPUT_LAM, OUTPUT_SCORE = "embedding", "lam", "score"


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
    """thresholds.json as read on a device: a cr2.crc threshold table (pooled or Mondrian) plus what the export adds.

    A thin codec: the lookup, the grid matching and the validation are the table's own (cr2.crc.ThresholdTable /
    GroupedThresholdTable); this class only reads and writes the file format (τ* as float.hex strings) and keeps
    the export's certified target-mode operating points and the name of the risk α bounds.
    """

    table: ThresholdTable | GroupedThresholdTable
    n_calib: int  # N as shipped: calibration queries per λ (Mondrian: over all groups)
    targets: tuple = ()  # certified target-mode operating points: dicts with mode, target, delta, lam, alpha, tau
    # the risk α bounds (cr2.crc.RISKS): teacher-disagreement | oracle-disagreement | avoidable-error
    risk: str | None = "teacher-disagreement"

    # ------------------------------------------------------------ the table's fields, read through
    def __getattr__(self, name: str) -> Any:
        if name in ("lams", "alphas", "gate_fingerprint", "dist_id", "label_source", "rule", "score_dtype", "delta"):
            return getattr(self.table, name)
        raise AttributeError(name)

    @property
    def group_by(self) -> str | None:
        """Mondrian: the query attribute of the groups (e.g. "benchmark"); None for a pooled table."""
        return self.table.group_by if isinstance(self.table, GroupedThresholdTable) else None

    @property
    def group_taus(self) -> dict | None:
        """Mondrian: group value → [n_lam, n_alpha] τ*; None for a pooled table."""
        if not isinstance(self.table, GroupedThresholdTable):
            return None
        return {g: t.taus for g, t in self.table.tables.items()}

    @property
    def taus(self) -> np.ndarray:
        """[n_lam, n_alpha] τ* of a pooled table; +inf (defer) for a Mondrian one, as the file ships it."""
        if isinstance(self.table, GroupedThresholdTable):
            return np.full((len(self.table.lams), len(self.table.alphas)), np.inf)
        return self.table.taus

    # ------------------------------------------------------------ the file format
    @staticmethod
    def to_json(table: ThresholdTable | GroupedThresholdTable, targets: list[dict] | None = None) -> dict[str, Any]:
        """Return the thresholds.json object of a table (τ* as float.hex strings, exact).

        Optional fields (a reader that does not know them ignores them): "delta" (ltt), "group_by", "group_taus" and
        "group_n_calib" (Mondrian: one τ* grid and N per group; "taus" is then +inf everywhere, so a reader that
        does not know groups defers every query instead of applying some group's threshold), and "targets"
        (certified target-mode operating points: mode, target, delta, lam, alpha, tau); "risk",
        "risk_display" and "risk_definition": the risk the rule controls, so the device says what its α bounds.
        """
        grouped = isinstance(table, GroupedThresholdTable)
        risk = rule_risk(table.rule)
        pooled_taus = np.full((len(table.lams), len(table.alphas)), np.inf) if grouped else table.taus
        out: dict[str, Any] = {
            "format": THRESHOLDS_FORMAT,
            "lams": list(table.lams),
            "alphas": list(table.alphas),
            "taus": [[encode_tau(t) for t in row] for row in pooled_taus],  # rows λ, columns α
            "n_calib": int(table.n_calib),
            "gate_fingerprint": table.gate_fingerprint,
            "dist_id": table.dist_id,
            "label_source": table.label_source,
            "rule": table.rule,
            "risk": None if risk is None else risk.name,
            "risk_display": None if risk is None else risk.display,
            "risk_definition": None if risk is None else risk.definition,
            "score_dtype": table.score_dtype,
            "delta": table.delta,
        }
        if grouped:
            out["group_by"] = table.group_by
            out["group_taus"] = {g: [[encode_tau(v) for v in row] for row in t.taus] for g, t in table.tables.items()}
            out["group_n_calib"] = {g: int(t.n_calib) for g, t in table.tables.items()}
        if targets:
            out["targets"] = [{**t, "tau": encode_tau(float(t["tau"]))} for t in targets]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], where: Path | str = THRESHOLDS_FILE) -> "DeviceThresholds":
        """Return the thresholds of a parsed thresholds.json; raises DataValidationError when malformed."""
        where = Path(where)
        _require(data, ("format", "lams", "alphas", "taus", "n_calib", "gate_fingerprint", "dist_id", "label_source",
                        "rule", "score_dtype"), where)
        if data["format"] != THRESHOLDS_FORMAT:
            raise DataValidationError(f"{where}: format {data['format']!r}, expected {THRESHOLDS_FORMAT!r}; "
                                      "re-export with this version of cr2 (`cr2 export-gate`)")

        def grid(rows: Any, what: str) -> np.ndarray:
            try:
                return np.array([[decode_tau(t) for t in row] for row in rows], dtype=np.float64)
            except (TypeError, ValueError, AttributeError) as exc:
                raise DataValidationError(f"{where}: {what} must be float.hex strings ({exc})") from None

        n_calib = int(data["n_calib"])
        meta = {"gate_fingerprint": str(data["gate_fingerprint"]), "dist_id": str(data["dist_id"]),
                "label_source": str(data["label_source"]), "rule": str(data["rule"]),
                "score_dtype": str(data["score_dtype"]), "delta": data.get("delta")}
        lams = tuple(float(v) for v in data["lams"])
        alphas = tuple(float(v) for v in data["alphas"])
        try:
            taus = grid(data["taus"], "taus")
            if data.get("group_taus"):  # Mondrian thresholds, one grid per group
                if not isinstance(data["group_taus"], dict):
                    raise DataValidationError(f"{where}: group_taus must map groups to float.hex grids")
                group_by = str(data.get("group_by") or "benchmark")
                n_g = data.get("group_n_calib") or {}  # absent in older exports: N over all groups
                table: ThresholdTable | GroupedThresholdTable = GroupedThresholdTable(group_by=group_by, tables={
                    str(g): ThresholdTable(lams=lams, alphas=alphas, taus=grid(rows, f"group '{g}' thresholds"),
                                           n_calib=int(n_g.get(g, n_calib)), group=group_key(group_by, str(g)), **meta)
                    for g, rows in data["group_taus"].items()})
            else:
                table = ThresholdTable(lams=lams, alphas=alphas, taus=taus, n_calib=n_calib, **meta)
        except (InvalidValueError, UnknownNameError) as exc:  # the table's own validation, reported against the file
            raise DataValidationError(f"{where}: {exc}; re-export with `cr2 export-gate`") from None
        if taus.shape != (len(lams), len(alphas)):
            raise DataValidationError(f"{where}: taus has shape {taus.shape}, expected (n_lam, n_alpha) = "
                                      f"({len(lams)}, {len(alphas)})")
        try:
            targets = tuple({**t, "tau": decode_tau(t["tau"])} for t in data.get("targets") or ())
        except (TypeError, ValueError, KeyError) as exc:
            raise DataValidationError(f"{where}: targets must be objects with a float.hex tau ({exc})") from None
        # an export without "risk" was written when every rule controlled teacher disagreement
        return cls(table=table, n_calib=n_calib, targets=targets,
                   risk=data["risk"] if "risk" in data else "teacher-disagreement")

    # ------------------------------------------------------------ lookup (the table's)
    def lam_index(self, lam: float) -> int:
        """Return the grid row of λ; raises UncalibratedOperatingPointError naming the grid when off-grid."""
        return _on_device(lambda: _any_table(self.table).lam_index(lam))

    def alpha_index(self, alpha: float) -> int:
        """Return the grid column of α; raises UncalibratedOperatingPointError naming the grid when off-grid."""
        return _on_device(lambda: _any_table(self.table).alpha_index(alpha))

    def tau(self, lam: float, alpha: float, group: str | None = None) -> float:
        """Return τ*(λ; α) (exact in score_dtype; accept iff s ≥ τ*); Mondrian thresholds need the query's group."""
        if isinstance(self.table, GroupedThresholdTable):
            return _on_device(lambda: self.table.tau(lam, alpha, self.table.gate_fingerprint, group))
        return _on_device(lambda: self.table.tau(lam, alpha, self.table.gate_fingerprint))

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


def _any_table(table: ThresholdTable | GroupedThresholdTable) -> ThresholdTable:
    """The table whose λ/α grid is the shipped one (a Mondrian table's groups share it)."""
    return next(iter(table.tables.values())) if isinstance(table, GroupedThresholdTable) else table


def _on_device(lookup: Any) -> Any:
    """Run a table lookup; an off-grid (λ, α) error also says how to fix it on a device (re-export)."""
    try:
        return lookup()
    except UncalibratedOperatingPointError as exc:
        text = str(exc).replace("the calibrated grid", "the exported gate's calibrated grid")
        raise UncalibratedOperatingPointError(
            f"{text} (on a device: calibrate it on the host and re-export with `cr2 export-gate`)") from None


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

        Bit-identical to cr2.method.gate.MarginGate.score for the same (e, λ): both evaluate in float64 and round once.
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
        """Return the decision at the exported operating point certified for this target."""
        t = self.thresholds.target(target_accuracy, budget)
        score = self.score(embedding, float(t["lam"]))
        # eq. (cr2_rule) at the certified (λ, α, τ) of the target
        return DeviceDecision(accept=score.astype(np.float64) >= t["tau"], score=score, tau=float(t["tau"]))

    def fused(self, lam: float, dtype: Any = np.float64) -> Any:
        """Return the gate at one fixed λ as a cr2.method.fused_gate.FusedGate (NumPy only, ≈ 10× faster at batch 1).

        The weights are read from gate.onnx's float64 initializers (the `onnx` package parses the file;
        onnxruntime does not expose them). Score with .score_one(e) / .score(E) and compare with self.tau(λ, α)
        — float64 gives the same float32 scores as score() (tests/test_fused_gate.py), float32 agrees to ≈ 1e-6.
        """
        import onnx
        from onnx import numpy_helper

        from cr2.method.fused_gate import FusedGate

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
                f"λ grid {grid_text(t.lams)}, α grid {grid_text(t.alphas)}, dist={t.dist_id})")



__all__ = ["DeviceDecision", "DeviceGate", "DeviceThresholds", "decode_tau", "encode_tau",
           "sha256_file"]
