"""Route one query online with the deployed CR² artefacts (teacher, gate, newest threshold table).

What a device would do (paper Algorithm 1): embed the query, score it with the gate at λ, accept
locally iff s ≥ τ*(λ; α), otherwise pick the edge model of best teacher utility p_m(x) − λ·c_m(x, ξ).
The channel state ξ is sampled from the configured distribution, or fixed by a given distance with
mean fading (|z|² = 1 on both links). An off-grid λ is an error naming the grid unless
routing.on_demand_calibration is set; then it is calibrated exactly on the val split first.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cr2.config import Config
from cr2.errors import DataValidationError, UncalibratedOperatingPointError
from tasks.calibrate import load_threshold_table
from tasks.common import cache_dir
from tasks.prepare import cost_scales_key
from tasks.train import routing_args
from warehouse.db import Warehouse


def deployed_artifacts(wh: Warehouse, gate_fingerprint: str) -> dict:
    """Paths of the gate with this fingerprint and of the teacher trained with it."""
    arts = wh.df("SELECT kind, fingerprint, path, meta FROM artifacts")
    gate = arts[(arts["kind"] == "gate") & (arts["fingerprint"] == gate_fingerprint)]
    if gate.empty:
        raise UncalibratedOperatingPointError(f"the gate {gate_fingerprint} of the threshold table is not registered; "
                                              "run `cr2 train` and `cr2 calibrate`")
    key = json.loads(gate["meta"].iloc[0])["key"]
    teacher = arts[(arts["kind"] == "teacher") & arts["meta"].map(lambda m: json.loads(m)["key"] == key)]
    if teacher.empty:
        raise UncalibratedOperatingPointError(f"no teacher trained with gate {gate_fingerprint}; run `cr2 train`")
    out = {"teacher": {"path": teacher["path"].iloc[0], "fingerprint": teacher["fingerprint"].iloc[0]},
           "gate": {"path": gate["path"].iloc[0], "fingerprint": gate_fingerprint}}
    for k in ("teacher", "gate"):
        if not Path(out[k]["path"]).is_file():
            raise UncalibratedOperatingPointError(f"{k} checkpoint {out[k]['path']} is missing; run `cr2 train` again")
    return out


def route_query(config: Config, home: str | Path, question: str, choices: list[str] | None, lam: float, alpha: float,
                distance_m: float | None = None, benchmark: str = "mmlu", seed: int = 0) -> dict:
    """The CR² decision for one query: accept/defer, score s, τ*, and on deferral the edge utilities."""
    from cr2.channel import channel_gain, downlink_rate_bps, sample_states, uplink_rate_bps
    from cr2.cost import compute_costs
    from cr2.crc import calibrate_table
    from cr2.embed import embed_texts, router_text
    from cr2.routing import route
    from cr2.tokenizer import qwen_token_counter
    from cr2.utility import disagree_label, teacher_utility
    from tasks.calibrate import load_modules
    from warehouse.routing_data import load_routing_sets

    if lam <= 0:
        raise DataValidationError(f"λ must be > 0, got {lam:g}")
    with Warehouse(home, read_only=True) as wh:
        table = load_threshold_table(wh)
        arts = deployed_artifacts(wh, table.gate_fingerprint)
        teacher, gate = load_modules(arts)
        scales = wh.scalar("SELECT value FROM meta WHERE key = ?", [cost_scales_key(table.dist_id, table.label_source)])
        if not table.has_lam(lam):
            if not config.routing.on_demand_calibration:
                table.lam_index(lam)  # raises, naming the grid
            val = load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config))["val"]
            risks = disagree_label(teacher.predict_proba(val.embedding), val.cost, np.array([lam]))
            table = table.merge(calibrate_table(gate.score(val.embedding, np.array([lam])), risks, [lam], table.alphas,
                                                gate_fingerprint=table.gate_fingerprint, dist_id=table.dist_id,
                                                label_source=table.label_source, rule=table.rule))
    tau = table.tau(lam, alpha, arts["gate"]["fingerprint"])
    text = router_text(question, choices)
    emb = embed_texts([text], progress=False)
    prompt_tokens = np.array(qwen_token_counter(cache_dir(Path(home)) / "tokenizers").count([text]), dtype=float)
    dist = config.channel.distribution
    if distance_m is None:
        st = sample_states(dist, 1, seed)
        d, g_ul, g_dl = st.distance_m, st.gain_ul, st.gain_dl
    else:
        if distance_m <= 0:
            raise DataValidationError(f"--distance-m must be > 0, got {distance_m:g}")
        d = np.array([float(distance_m)])
        g_ul = g_dl = channel_gain(d, np.ones(1), dist.path_loss)  # mean fading |z|² = 1
    if scales is None:
        raise DataValidationError(f"no cost scales for states '{table.dist_id}'; run `cr2 prepare` first")
    sc = json.loads(scales)  # T0/E0 of the stored costs: a new query is normalised exactly like them
    cost_cfg = config.model_copy(update={"cost": config.cost.model_copy(
        update={"normalisation": "fixed", "t0_s": sc["t0_s"], "e0_j": sc["e0_j"]})})
    out_tokens = np.full((1, len(config.models)), float(config.cost.default_output_tokens.get(benchmark, 16)))
    costs = compute_costs(prompt_tokens, out_tokens, uplink_rate_bps(g_ul, config.communication),
                          downlink_rate_bps(g_dl, config.communication), config=cost_cfg)
    proba = teacher.predict_proba(emb)
    score = gate.score(emb, lam)
    dec = route(score, tau, proba, costs.cost_norm, lam, config.routing.deferred_variant)
    util = teacher_utility(proba, costs.cost_norm, lam)[0]
    model_ids = [m.id for m in config.models]
    return {
        "accept_local": bool(dec.extra["gate_accept"][0]), "chosen_model": model_ids[int(dec.chosen[0])],
        "score": float(score[0]), "tau": float(tau), "lam": lam, "alpha": alpha, "distance_m": float(d[0]),
        "prompt_tokens": int(prompt_tokens[0]), "threshold_dist_id": table.dist_id, "label_source": table.label_source,
        "models": [{"model_id": m, "p_correct": float(proba[0, i]), "cost_norm": float(costs.cost_norm[0, i]),
                    "latency_s": float(costs.latency_s[0, i]), "energy_j": float(costs.energy_j[0, i]),
                    "utility": float(util[i])} for i, m in enumerate(model_ids)],
    }
