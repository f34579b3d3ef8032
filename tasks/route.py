"""Route queries online with the deployed CR² artefacts (teacher, gate, newest threshold table).

What a device would do (paper Algorithm 1): embed the query, score it with the gate at λ, accept
locally iff s ≥ τ*(λ; α), otherwise pick the edge model of best teacher utility p_m(x) − λ·c_m(x, ξ).
The channel state ξ is sampled from the deployed table's state distribution, or fixed by a given
distance with mean fading (|z|² = 1 on both links). An off-grid λ is an error naming the grid unless
routing.on_demand_calibration is set; then it is calibrated exactly on the val split first.

`OnlineRouter.load` reads everything once (the CLI routes one query; `cr2 serve` keeps it for every
request).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cr2.config import Config, StateDistribution
from cr2.crc import ThresholdTable
from cr2.errors import DataValidationError, UncalibratedOperatingPointError
from tasks.calibrate import load_threshold_table
from tasks.common import cache_dir, in_home
from tasks.prepare import cost_scales_key
from warehouse.db import Warehouse


def deployed_artifacts(wh: Warehouse, gate_fingerprint: str) -> dict:
    """Paths of the gate with this fingerprint and of the teacher trained with it (resolved against the home)."""
    arts = wh.df("SELECT kind, fingerprint, path, meta FROM artifacts")
    gate = arts[(arts["kind"] == "gate") & (arts["fingerprint"] == gate_fingerprint)]
    if gate.empty:
        raise UncalibratedOperatingPointError(f"the gate {gate_fingerprint} of the threshold table is not registered; "
                                              "run `cr2 train` and `cr2 calibrate`")
    key = json.loads(gate["meta"].iloc[0])["key"]
    teacher = arts[(arts["kind"] == "teacher") & arts["meta"].map(lambda m: json.loads(m)["key"] == key)]
    if teacher.empty:
        raise UncalibratedOperatingPointError(f"no teacher trained with gate {gate_fingerprint}; run `cr2 train`")
    out = {"teacher": {"path": str(in_home(wh.home, teacher["path"].iloc[0])), "fingerprint": teacher["fingerprint"].iloc[0]},
           "gate": {"path": str(in_home(wh.home, gate["path"].iloc[0])), "fingerprint": gate_fingerprint}}
    for k in ("teacher", "gate"):
        if not Path(out[k]["path"]).is_file():
            raise UncalibratedOperatingPointError(f"{k} checkpoint {out[k]['path']} is missing; run `cr2 train` again")
    return out


@dataclass
class OnlineRouter:
    """The deployed CR² router: artefacts loaded once, one `route` call per query."""

    config: Config
    home: Path
    table: ThresholdTable
    version: int
    teacher: Any
    gate: Any
    dist: StateDistribution
    cost_config: Config  # the config with T0/E0 fixed to the stored costs' scales
    encoder: Any = None
    counter: Any = None
    _lock: Any = field(default=None, repr=False)

    @classmethod
    def load(cls, config: Config, home: str | Path) -> "OnlineRouter":
        import threading

        from cr2.embed import load_encoder
        from cr2.tokenizer import qwen_token_counter
        from tasks.calibrate import load_modules

        with Warehouse(home, read_only=True) as wh:
            version = wh.scalar("SELECT max(version) FROM thresholds")
            table = load_threshold_table(wh, version)
            teacher, gate = load_modules(deployed_artifacts(wh, table.gate_fingerprint), home)
            scales = wh.scalar("SELECT value FROM meta WHERE key = ?", [cost_scales_key(table.dist_id, table.label_source)])
            spec = wh.scalar("SELECT spec FROM state_distributions WHERE dist_id = ?", [table.dist_id])
        if scales is None or spec is None:
            raise DataValidationError(f"no states or cost scales for '{table.dist_id}'; run `cr2 prepare` first")
        sc = json.loads(scales)  # T0/E0 of the stored costs: a new query is normalised exactly like them
        cost_config = config.model_copy(update={"cost": config.cost.model_copy(
            update={"normalisation": "fixed", "t0_s": sc["t0_s"], "e0_j": sc["e0_j"]})})
        encoder = load_encoder(config.embedding.max_seq_length, backend=config.embedding.backend,
                               cache_dir=cache_dir(Path(home)) / "encoders")
        counter = qwen_token_counter(cache_dir(Path(home)) / "tokenizers")
        return cls(config=config, home=Path(home), table=table, version=int(version), teacher=teacher, gate=gate,
                   dist=StateDistribution.model_validate(json.loads(spec)), cost_config=cost_config, encoder=encoder,
                   counter=counter, _lock=threading.Lock())

    def describe(self) -> dict:
        return {"gate_fingerprint": self.table.gate_fingerprint, "thresholds_version": self.version,
                "dist_id": self.table.dist_id, "label_source": self.table.label_source,
                "lams": list(self.table.lams), "alphas": list(self.table.alphas),
                "models": [m.id for m in self.config.models]}

    def _tau(self, lam: float, alpha: float) -> float:
        from cr2.crc import calibrate_table
        from cr2.utility import disagree_label
        from warehouse.routing_data import load_routing_sets

        if not self.table.has_lam(lam):
            if not self.config.routing.on_demand_calibration:
                self.table.lam_index(lam)  # raises, naming the grid
            with Warehouse(self.home, read_only=True) as wh:  # calibrate exactly λ on the table's own val set
                val = load_routing_sets(wh, tuple(m.id for m in self.config.models), dist_id=self.table.dist_id,
                                        label_source=self.table.label_source, seed=int(self.config.splits.seed),
                                        encoder=self.config.embedding.encoder)["val"]
            risks = disagree_label(self.teacher.predict_proba(val.embedding), val.cost, np.array([lam]))
            extra = calibrate_table(self.gate.score(val.embedding, np.array([lam])), risks, [lam], self.table.alphas,
                                    gate_fingerprint=self.table.gate_fingerprint, dist_id=self.table.dist_id,
                                    label_source=self.table.label_source, rule=self.table.rule)
            self.table = self.table.merge(extra)
        return self.table.tau(lam, alpha, self.table.gate_fingerprint)

    def route(self, question: str, choices: list[str] | None, lam: float, alpha: float, distance_m: float | None = None,
              benchmark: str = "mmlu", seed: int = 0) -> dict:
        """The CR² decision for one query: accept/defer, score s, τ*, and every model's utility."""
        from cr2.channel import channel_gain, downlink_rate_bps, sample_states, uplink_rate_bps
        from cr2.cost import compute_costs
        from cr2.embed import embed_texts, router_text
        from cr2.routing import route
        from cr2.utility import teacher_utility

        check_route_inputs(question, choices, lam, alpha, distance_m)
        with self._lock:  # torch modules and the tokenizer are shared across server threads
            tau = self._tau(float(lam), float(alpha))
            text = router_text(question, choices)
            emb = embed_texts([text], progress=False, encoder=self.encoder,
                              max_seq_length=self.config.embedding.max_seq_length)
            prompt_tokens = np.array(self.counter.count([text]), dtype=float)
            if distance_m is None:
                st = sample_states(self.dist, 1, seed)
                d, g_ul, g_dl = st.distance_m, st.gain_ul, st.gain_dl
            else:
                d = np.array([float(distance_m)])
                g_ul = g_dl = channel_gain(d, np.ones(1), self.dist.path_loss)  # mean fading |z|² = 1
            default_out = self.config.cost.default_output_tokens.get(benchmark)
            if default_out is None:
                raise DataValidationError(f"unknown benchmark '{benchmark}' for the output length; known: "
                                          f"{', '.join(sorted(self.config.cost.default_output_tokens))}")
            out_tokens = np.full((1, len(self.config.models)), float(default_out))
            costs = compute_costs(prompt_tokens, out_tokens, uplink_rate_bps(g_ul, self.config.communication),
                                  downlink_rate_bps(g_dl, self.config.communication), config=self.cost_config)
            proba = self.teacher.predict_proba(emb)
            score = self.gate.score(emb, lam)
        dec = route(score, tau, proba, costs.cost_norm, lam, self.config.routing.deferred_variant)
        util = teacher_utility(proba, costs.cost_norm, lam)[0]
        model_ids = [m.id for m in self.config.models]
        return {
            "accept_local": bool(dec.extra["gate_accept"][0]), "chosen_model": model_ids[int(dec.chosen[0])],
            "score": float(score[0]), "tau": float(tau), "lam": float(lam), "alpha": float(alpha),
            "distance_m": float(d[0]), "prompt_tokens": int(prompt_tokens[0]), "threshold_dist_id": self.table.dist_id,
            "thresholds_version": self.version, "label_source": self.table.label_source,
            "models": [{"model_id": m, "p_correct": float(proba[0, i]), "cost_norm": float(costs.cost_norm[0, i]),
                        "latency_s": float(costs.latency_s[0, i]), "energy_j": float(costs.energy_j[0, i]),
                        "utility": float(util[i])} for i, m in enumerate(model_ids)],
        }


def check_route_inputs(question: str, choices: list[str] | None, lam: float, alpha: float,
                       distance_m: float | None = None) -> None:
    """A DataValidationError naming the first bad input of one routing request (NaN and ±inf included)."""
    if not isinstance(question, str) or not question.strip():
        raise DataValidationError("the query text is empty; give the question to route, e.g. "
                                  "`cr2 route \"What is the capital of France?\" --lam 1`")
    if choices is not None:
        from cr2.embed import CHOICE_LETTERS

        if not all(isinstance(c, str) and c.strip() for c in choices):
            raise DataValidationError("every choice must be non-empty text")
        if len(choices) > len(CHOICE_LETTERS):
            raise DataValidationError(f"at most {len(CHOICE_LETTERS)} choices (A–Z), got {len(choices)}")
    if not (isinstance(lam, (int, float)) and math.isfinite(lam) and lam > 0):
        raise DataValidationError(f"λ must be a finite number > 0, got {lam}")
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and 0 < alpha < 1):
        raise DataValidationError(f"α must be a number in (0, 1), got {alpha}")
    if distance_m is not None and not (isinstance(distance_m, (int, float)) and math.isfinite(distance_m)
                                       and distance_m > 0):
        raise DataValidationError(f"distance_m must be a finite number of metres > 0, got {distance_m}")


def route_query(config: Config, home: str | Path, question: str, choices: list[str] | None, lam: float, alpha: float,
                distance_m: float | None = None, benchmark: str = "mmlu", seed: int = 0) -> dict:
    """The CR² decision for one query (loads the deployed artefacts for this one call)."""
    check_route_inputs(question, choices, lam, alpha, distance_m)
    return OnlineRouter.load(config, home).route(question, choices, lam, alpha, distance_m, benchmark, seed)
