"""A certified router's device export: write it (export_certified) and decide with it (DeviceCertifiedRouter).

`cr2 export-gate DIR --router knn --rule crc-avoidable` writes, atomically (cr2.deploy.export's temporary sibling and
rename):

    router.npz        the fitted router's state as OneShotRouter.save writes it — for KNN its index: the
                      L2-normalised train embeddings [n_train, 384] float32 and their correctness [n_train, M] float32,
                      whose mean over the k nearest is p̂ (k in the file's metadata)
    thresholds.json   τ(λ; α) of '<router>@<rule>' in cr2.deploy.runtime's cr2-thresholds/1 format (τ as float.hex; the
                      fingerprint is the router's score's)
    costs.json        the pool in order and the inputs of the decision cost ĉ (cr2.deploy.deployment.decision_cost_inputs)
    manifest.json     the certified name, the score, the encoder, every file's sha256 and bytes, and the parity

Why the device runs the library's own code: a certified threshold is exact for the score it was calibrated on
(cr2.routers.certify: float64 margins compared against the next float64 above a calibration score). A second
implementation of the neighbour search or of the margin could move a score by an ulp and flip a decision at the
boundary, so DeviceCertifiedRouter loads the router class by its catalogue name and decides with
cr2.routers.certify.CertifiedRouter; for KNN that imports numpy only (no torch, no onnxruntime). export_certified reads the
written export back this way and refuses to write one that decides any probe query unlike the host.

This module sits beside cr2.deploy.export rather than in it: it needs the router catalogue (cr2.routers), which imports
cr2.deploy.export for CR²'s own gate export.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from cr2.crc import GroupedThresholdTable, ThresholdTable, rule_risk
from cr2.inputs.embed import ENCODER_NAME
from cr2.core.errors import DataValidationError
from cr2.core.files import temp_dir_beside
from cr2.deploy.export import publish_export, thresholds_json
from cr2.deploy.runtime import (CERTIFIED_FILES, CERTIFIED_FORMAT, COSTS_FILE, MANIFEST_FILE, ROUTER_FILE, THRESHOLDS_FILE,
                         DeviceThresholds, _read_json, _require, sha256_file)

CERTIFIED_PROBES = 256  # random unit embeddings × random ĉ whose decisions the written export must reproduce


def export_certified(certified: Any, out_dir: str | Path, costs: dict[str, Any],
                     encoder_name: str = ENCODER_NAME, seed: int = 0) -> dict[str, Any]:
    """Write a certified router's device export to out_dir atomically; return the manifest (with `dir`).

        router.npz        the fitted router's state (OneShotRouter.save; KNN: its index, train embeddings + correctness)
        thresholds.json   τ(λ; α) of '<router>@<rule>' (cr2-thresholds/1; the fingerprint is the router's score's)
        costs.json        `costs`: the pool in order and the inputs of ĉ (cost scales, L̂_out, the cost-model config)
        manifest.json     the certified name, the score, the encoder, every file's sha256 and bytes, and the parity

    certified: a cr2.routers.certify.CertifiedRouter with its table set, around a router that saves its state (the catalogued
    baselines; CR²'s gate is exported by export_gate). Before anything is written the export is read back with
    DeviceCertifiedRouter and must decide exactly as `certified` on CERTIFIED_PROBES probe queries at
    every (λ, α) of the table (DataValidationError otherwise; out_dir is then left as it was).
    """
    import cr2

    table = getattr(certified, "threshold_table_", None)
    if table is None:
        raise DataValidationError(f"certified router '{certified.name}' has no threshold table to export; calibrate it "
                                  "or set its stored table first")
    if not callable(getattr(certified.router, "save", None)) or not hasattr(certified.router, "model_ids_"):
        raise DataValidationError(f"'{certified.name}': the router {type(certified.router).__name__} has no saved state "
                                  "to export; export CR² with `cr2 export-gate` (no --rule)")
    model_ids = list(costs.get("models") or [])
    if model_ids != list(certified.router.model_ids_):
        raise DataValidationError(f"costs['models'] {model_ids} is not the router's pool {list(certified.router.model_ids_)}")
    out_dir = Path(out_dir).absolute()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir_beside(out_dir)
    try:
        fingerprint = certified.router.save(tmp / ROUTER_FILE)
        (tmp / THRESHOLDS_FILE).write_text(json.dumps(thresholds_json(table), indent=1) + "\n", encoding="utf-8")
        (tmp / COSTS_FILE).write_text(json.dumps(costs, indent=1) + "\n", encoding="utf-8")
        risk = rule_risk(table.rule)
        manifest = {
            "format": CERTIFIED_FORMAT,
            "cr2_version": getattr(cr2, "__version__", None),
            "router": certified.name,
            "router_fingerprint": fingerprint,
            "score": ("the router's own local_score" if callable(getattr(certified.router, "local_score", None)) else
                      "utility margin s = (p̂_0 − λ·ĉ_0) − max_edge (p̂_m − λ·ĉ_m), float64 (cr2.routers.certify.margin_score)"),
            "encoder": {"name": encoder_name, "embedding_dim": int(certified.router.embed_dim_), "pooling": "mean",
                        "normalize": "l2", "text": "cr2.inputs.embed.router_text(question, choices)"},
            "thresholds": {"file": THRESHOLDS_FILE, "dist_id": table.dist_id, "n_lam": len(table.lams),
                           "n_alpha": len(table.alphas), "n_calib": int(table.n_calib), "rule": table.rule,
                           "risk": None if risk is None else risk.name, "score_dtype": table.score_dtype},
            "decision": "accept locally (m0) iff score >= tau(lam; alpha), else argmax over edge models of "
                        "p_hat_m - lam * c_hat_m (cr2.routers.certify.certified_decisions); load with "
                        "cr2.deploy.certified_export.DeviceCertifiedRouter",
            "files": {name: {"sha256": sha256_file(tmp / name), "bytes": (tmp / name).stat().st_size}
                      for name in CERTIFIED_FILES},
        }
        manifest["bytes_total"] = sum(f["bytes"] for f in manifest["files"].values())
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        manifest["parity"] = _certified_parity(certified, DeviceCertifiedRouter.load(tmp), table, seed)
        if manifest["parity"]["n_decisions_differing"]:
            raise DataValidationError(f"the export of '{certified.name}' decides {manifest['parity']['n_decisions_differing']}"
                                      f" probe queries unlike the host; nothing was written to {out_dir}")
        publish_export(tmp, out_dir, manifest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return {**manifest, "dir": str(out_dir)}


def _certified_parity(certified: Any, device: Any, table: ThresholdTable, seed: int) -> dict[str, Any]:
    """How the read-back export decides against the host on random unit embeddings and costs at every (λ, α)."""
    from cr2.routers.certify import request_set

    rng = np.random.default_rng(seed)
    dim, model_ids = int(certified.router.embed_dim_), list(certified.router.model_ids_)
    emb = rng.standard_normal((CERTIFIED_PROBES, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    cost = rng.uniform(0.0, 2.0, (CERTIFIED_PROBES, len(model_ids))).astype(np.float32)
    batch = request_set(emb, cost, model_ids)
    # p̂ once per side (the neighbour search is the expensive part), then every (λ, α) on each side's own p̂
    p_host, p_dev = certified.predict_proba(batch), device.certified.predict_proba(batch)
    differing = 0
    for lam in table.lams:
        for alpha in table.alphas:
            host = certified.decide(batch, lam, alpha, p_hat=p_host)
            dev = device.certified.decide(batch, lam, alpha, p_hat=p_dev)
            differing += int((host.chosen != dev.chosen).sum())
    return {"n_probe": CERTIFIED_PROBES, "n_lam": len(table.lams), "n_alpha": len(table.alphas),
            "max_abs_p_hat_diff": float(np.abs(p_host.astype(np.float64) - p_dev).max()),
            "n_decisions_differing": differing}


class DeviceCertifiedRouter:
    """A certified router `<router>@<rule>` exported by `cr2 export-gate --router … --rule …`: decide(e, ĉ, λ, α).

    The export holds the fitted router's state (router.npz; for KNN its index: the L2-normalised train embeddings
    [n_train, 384] float32 and their correctness [n_train, M] float32, whose k-neighbour mean is p̂), the threshold
    table (thresholds.json, bound to the router's fingerprint), the pool and the inputs of the decision cost ĉ
    (costs.json) and a manifest with every file's sha256. The decision is the library's own: the router class is
    loaded from its catalogue name (KNN imports numpy only) and cr2.routers.certify.CertifiedRouter decides, so a device and
    the host give the same decision on the same e(x) and ĉ. ĉ_m(x, ξ) [n, M] is the caller's: computed from the
    device's channel state with cr2.system.cost.compute_costs and the inputs in costs.json, as `cr2 route` computes it.
    """

    def __init__(self, directory: Path, manifest: dict[str, Any], certified: Any, thresholds: DeviceThresholds,
                 costs: dict[str, Any]) -> None:
        self.directory, self.manifest, self.certified = directory, manifest, certified
        self.thresholds, self.costs = thresholds, costs
        self.name: str = manifest["router"]
        self.model_ids: tuple[str, ...] = tuple(costs["models"])

    @classmethod
    def load(cls, directory: str | Path) -> "DeviceCertifiedRouter":
        """Return the certified router exported to `directory`, after checking every file's sha256 (a missing,
        altered or mismatched file is a DataValidationError naming the fix)."""
        from cr2.routers.certify import CertifiedRouter, parse_certified_name
        from cr2.routers import load_router

        directory = Path(directory)
        if not directory.is_dir():
            raise DataValidationError(f"{directory}: no such export directory; write one with "
                                      f"`cr2 export-gate {directory} --router knn --rule crc-avoidable`")
        where = directory / MANIFEST_FILE
        manifest = _read_json(where)
        _require(manifest, ("format", "router", "files"), where)
        if manifest["format"] != CERTIFIED_FORMAT:
            raise DataValidationError(f"{where}: format {manifest['format']!r}, expected {CERTIFIED_FORMAT!r} (a CR² "
                                      "gate export is read with cr2.deploy.runtime.DeviceGate.load)")
        for name in CERTIFIED_FILES:
            entry = manifest["files"].get(name) if isinstance(manifest["files"], dict) else None
            expected = entry.get("sha256") if isinstance(entry, dict) else None
            path = directory / name
            if expected is None or not path.is_file():
                raise DataValidationError(f"{path}: missing or not in the manifest; copy the whole export directory")
            if sha256_file(path) != expected:
                raise DataValidationError(f"{path}: sha256 does not match the manifest's; the file was altered or damaged "
                                          "in transfer: copy the export directory again, or re-export")
        thresholds = DeviceThresholds.from_json(_read_json(directory / THRESHOLDS_FILE), directory / THRESHOLDS_FILE)
        costs = _read_json(directory / COSTS_FILE)
        _require(costs, ("models",), directory / COSTS_FILE)
        name = parse_certified_name(manifest["router"])
        router = load_router(directory / ROUTER_FILE)  # verifies the state against its stored fingerprint
        if isinstance(thresholds.table, GroupedThresholdTable):
            raise DataValidationError(f"{directory / THRESHOLDS_FILE}: per-group thresholds; a certified router's table "
                                      "is pooled — re-export it with `cr2 export-gate --router … --rule …`")
        certified = CertifiedRouter(router, name.router, name.rule).set_threshold_table(thresholds.table)
        return cls(directory, manifest, certified, thresholds, costs)

    def decide(self, embedding: np.ndarray, decision_cost: np.ndarray, lam: float, alpha: float) -> Any:
        """The certified decisions (cr2.core.data.Decisions: chosen pool index, accepted_local, score) for e(x) [n, d]
        and ĉ [n, M] at a calibrated (λ, α); an off-grid λ or α is an error naming the grid."""
        from cr2.routers.certify import request_set

        emb = np.asarray(embedding, dtype=np.float32)
        emb = emb[None, :] if emb.ndim == 1 else emb
        cost = np.asarray(decision_cost, dtype=np.float32)
        cost = cost[None, :] if cost.ndim == 1 else cost
        if cost.shape != (len(emb), len(self.model_ids)):
            raise DataValidationError(f"decision_cost has shape {cost.shape}, expected [n, M] = [{len(emb)}, "
                                      f"{len(self.model_ids)}] (pool {', '.join(self.model_ids)})")
        return self.certified.decide(request_set(emb, cost, self.model_ids), float(lam), float(alpha))


__all__ = ["CERTIFIED_PROBES", "DeviceCertifiedRouter", "export_certified"]
