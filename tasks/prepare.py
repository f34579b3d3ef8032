"""Prepare tasks: embeddings, splits, channel states, labels and costs for every query (validated, cached).

Each task reads its inputs from the warehouse, calls the pure cr2 library, validates its output with the
GX suite named after the table, and writes in one transaction. Each is a Stage (cr2_tasks.common) whose Reads
declare the config fields, warehouse rows and files it reads: its key covers their values and content
fingerprints, the source of the code it runs and the warehouse epoch, so a task re-runs when one of them
changed (and tests/test_stage_reads.py fails if it reads anything else).
"""
from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from cr2.core.errors import DataValidationError
from cr2_tasks.common import Reads, Rows, Stage, stage_key
from cr2_tasks.store import tool_dir
from cr2.labels.simulator import SOURCE as SIMULATED_SOURCE
from cr2_warehouse.db import Warehouse
from cr2_warehouse.inputs import (cost_inputs, embedded_count, queries_to_embed, query_count, query_embeddings, query_ids,
                              split_inputs, write_costs, write_embeddings, write_splits, write_states)
from cr2_warehouse.labels import (label_coverage, label_source_counts, output_tokens, replace_label_source,
                              simulator_inputs)
from cr2_warehouse.validation import validate_frame

SIMULATED_SOURCES = (SIMULATED_SOURCE, "simulated-irt-v2")  # built-in simulators (docs/labels.md)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def _choices(column: pd.Series) -> list[list[str] | None]:
    """Choice lists as Python lists; None where a query has none (NULL reads back as None, NA or NaN)."""
    return [list(c) if isinstance(c, (list, tuple, np.ndarray)) else None for c in column]


# ------------------------------------------------------------------ embeddings
EMBED_CODE = "cr2.inputs.embed"  # keyed by encoder + text: an edit outside the encoder never re-embeds


@task(name="prepare-embeddings")
def embed_queries(config: Config, home: str) -> dict:
    """e(x) for every query whose text is new or changed since it was last embedded (incremental)."""
    from cr2.inputs.embed import embed_texts, load_encoder, router_texts

    enc = config.embedding.store_name
    with Warehouse(home) as wh:
        todo = queries_to_embed(wh, enc)
    if len(todo):
        texts = router_texts(list(todo["question"]), _choices(todo["choices"]))
        encoder = load_encoder(config.embedding.max_seq_length, backend=config.embedding.backend,
                               cache_dir=tool_dir(home, "encoders"))
        vectors = embed_texts(texts, batch_size=config.embedding.batch_size, max_seq_length=config.embedding.max_seq_length,
                              encoder=encoder)
        rows = pd.DataFrame({"query_id": todo["query_id"], "encoder": enc, "content_hash": todo["content_hash"],
                             "vector": list(vectors)})
        validate_frame("embeddings", rows.assign(norm=np.linalg.norm(vectors, axis=1)))
        with Warehouse(home) as wh:
            write_embeddings(wh, enc, rows)
    with Warehouse(home, read_only=True) as wh:
        total = embedded_count(wh, enc)
    return {"encoder": enc, "embedded": int(len(todo)), "total": total}


# ------------------------------------------------------------------ splits


@task(name="prepare-splits")
def assign_splits_task(config: Config, home: str) -> dict:
    """train / dev / val / test for every query under the configured seed (hash-based: stable under additions)."""
    from cr2.inputs.splits import assign_splits

    with Warehouse(home, read_only=True) as wh:
        q = split_inputs(wh)
    result = assign_splits(q["query_id"].to_numpy(), q["benchmark"].to_numpy(), q["subset"].to_numpy(), config.splits)
    rows = pd.DataFrame({"query_id": q["query_id"], "seed": config.splits.seed, "split": result.table_split(),
                         "stratum": result.stratum})
    validate_frame("splits", rows, n_queries=len(q))
    with Warehouse(home) as wh:
        write_splits(wh, config.splits.seed, rows)
    return {"seed": config.splits.seed, "counts": rows.groupby("split").size().to_dict()}


# ------------------------------------------------------------------ channel states


@task(name="prepare-states")
def sample_states_task(config: Config, home: str) -> dict:
    """ξ for every query (draws_per_query draws) under the configured, versioned state distribution."""
    from cr2.system.channel import rates, sample_states

    dist = config.channel.distribution
    with Warehouse(home, read_only=True) as wh:
        ids = query_ids(wh)
    st = sample_states(dist, ids, draws_per_query=config.channel.draws_per_query, seed=config.channel.seed)
    rate_ul_bps, rate_dl_bps = rates(st, config.communication)
    rows = pd.DataFrame({
        "dist_id": dist.dist_id, "query_id": st.query_id, "draw": st.draw, "distance_m": st.distance_m,
        "fading_ul": st.fading_ul, "fading_dl": st.fading_dl, "gain_ul": st.gain_ul, "gain_dl": st.gain_dl,
        "rate_ul_bps": rate_ul_bps, "rate_dl_bps": rate_dl_bps,
    })
    validate_frame("states", rows, low_m=dist.distance.low_m, high_m=dist.distance.high_m)
    meta = pd.DataFrame([{"dist_id": dist.dist_id, "name": dist.name, "version": dist.version,
                          "spec": json.dumps(dist.model_dump(mode="json"), sort_keys=True), "created_at": _now()}])
    with Warehouse(home) as wh:
        write_states(wh, dist.dist_id, meta, rows)
    return {"dist_id": dist.dist_id, "rows": len(rows), "mean_distance_m": float(rows["distance_m"].mean())}


# ------------------------------------------------------------------ labels (simulated default)


@task(name="prepare-labels")
def simulate_labels_task(config: Config, home: str) -> dict:
    """SIMULATED correctness labels y_m(x) and output lengths (docs/labels.md) under the configured simulator
    (simulated-irt-v1, or simulated-irt-v2 with its fitted shape)."""
    from cr2.inputs.embed import router_texts
    from cr2.labels.simulator import load_accuracy_targets, simulate_labels, with_dataset_targets

    source = config.labels.source
    if source not in SIMULATED_SOURCES:
        raise DataValidationError(f"labels.source '{source}' is not a simulator ({', '.join(SIMULATED_SOURCES)})")
    with Warehouse(home, read_only=True) as wh:
        q = simulator_inputs(wh)
        emb = query_embeddings(wh, config.embedding.store_name) if source == "simulated-irt-v2" else None
    sim = config.labels.simulator
    targets = load_accuracy_targets(config.data_path / sim.accuracy_file, config.models)
    targets = with_dataset_targets(targets, config.models, {
        b: spec.definition.simulated.accuracy_pct for b, spec in config.benchmarks.items()
        if spec.definition.simulated is not None})
    choices = _choices(q["choices"])
    if source == "simulated-irt-v2":
        from cr2.labels.simulator_v2 import simulate_labels_v2

        if sim.shape is None:
            raise DataValidationError("labels.source is simulated-irt-v2 but labels.simulator.shape is not set; "
                                      "set `shape: simulated-irt-v2` (configs/labels/simulated-irt-v2.yaml)")
        if len(emb) != len(q) or not np.array_equal(emb["query_id"].to_numpy(), q["query_id"].to_numpy()):
            raise DataValidationError(f"simulated-irt-v2 needs the embedding of every query: {len(emb):,} of {len(q):,} "
                                      "are embedded; run `cr2 prepare` (embeddings come first)")
        n_choices = np.array([len(c) if c is not None else 0 for c in choices], dtype=np.int64)
        labels = simulate_labels_v2(q["query_id"].to_numpy(), q["benchmark"].to_numpy(), q["subset"].to_numpy(),
                                    np.stack(emb["vector"].to_numpy()), n_choices, config.models, targets, sim, sim.shape)
    else:
        texts = router_texts(list(q["question"]), choices)
        labels = simulate_labels(q["query_id"].to_numpy(), q["benchmark"].to_numpy(), q["subset"].to_numpy(), texts,
                                 config.models, targets, sim)
    model_ids = [m.id for m in config.models]
    key = stage_key(LABELS, config, home)
    run_ids = {m: f"{source}:{m}:{key[-12:]}" for m in model_ids}
    rows = pd.DataFrame({
        "source": source,
        "query_id": np.repeat(q["query_id"].to_numpy(), len(model_ids)),
        "model_id": np.tile(model_ids, len(q)),
        "correct": labels.correct.reshape(-1),
        "output_tokens": labels.output_tokens.reshape(-1).astype(np.int32),
    })
    rows["run_id"] = rows["model_id"].map(run_ids)
    validate_frame("labels", rows, models=model_ids)
    now = _now()
    runs = pd.DataFrame([{"run_id": run_ids[m], "source": source, "model_id": m, "revision": None, "backend": "simulator",
                          "backend_args": json.dumps(sim.model_dump(mode="json"), sort_keys=True, default=str), "lm_eval_version": None,
                          "task_config_hash": None, "started_at": now, "finished_at": now, "status": "finished",
                          "done": len(q), "total": len(q)} for m in model_ids])
    with Warehouse(home) as wh:
        replace_label_source(wh, source, runs, rows)
    return {"source": source, "rows": len(rows)}


def check_label_source(config: Config, wh: Warehouse) -> str:
    """The configured label source, which must cover every (query, model) pair; a clear error otherwise."""
    source = config.labels.source
    n_q = query_count(wh)
    n_m = len(config.models)
    have = label_coverage(wh, source, [m.id for m in config.models])
    if have != n_q * n_m:
        known = label_source_counts(wh)
        listing = ", ".join(f"{s} ({n:,} rows)" for s, n in zip(known["source"], known["n"])) or "none"
        raise DataValidationError(
            f"label source '{source}' covers {have:,} of {n_q * n_m:,} (query, model) pairs; sources in the warehouse: "
            f"{listing}. Label the missing pairs (`cr2 label`), import them (`cr2 labels import`), or set labels.source "
            f"to a simulator ({', '.join(SIMULATED_SOURCES)})")
    return source


# ------------------------------------------------------------------ costs


@task(name="prepare-costs")
def compute_costs_task(config: Config, home: str) -> dict:
    """c_m(x, ξ) for every (query, draw, model): latency, energy, raw and normalised cost (docs/cost-model.md)."""
    from cr2.system.cost import compute_costs, device_dearer_share, estimated_output_tokens, output_token_estimates

    dist_id = config.channel.distribution.dist_id
    source = config.labels.source
    seed = int(config.splits.seed)
    model_ids = [m.id for m in config.models]
    with Warehouse(home, read_only=True) as wh:
        st = cost_inputs(wh, dist_id, seed)
        lab = output_tokens(wh, source)
    if st.empty:
        raise DataValidationError(f"no channel states for '{dist_id}'; run `cr2 prepare` (states come before costs)")
    out_tok = lab.pivot(index="query_id", columns="model_id", values="output_tokens").reindex(columns=model_ids)
    out_tok = out_tok.reindex(st["query_id"]).to_numpy(dtype=float)
    defaults = np.array([config.cost.default_output_tokens.get(b, np.nan) for b in st["benchmark"]], dtype=float)
    out_tok = np.where(np.isnan(out_tok), defaults[:, None], out_tok)
    if np.isnan(out_tok).any():
        raise DataValidationError("no output length for some queries: add cost.default_output_tokens for their benchmark")
    reference_mask = (st["split"] == "train").to_numpy() if config.cost.normalisation == "reference" else None
    br = compute_costs(
        prompt_tokens=st["prompt_tokens"].to_numpy(dtype=float), output_tokens=out_tok,
        rate_ul_bps=st["rate_ul_bps"].to_numpy(), rate_dl_bps=st["rate_dl_bps"].to_numpy(),
        config=config, reference_mask=reference_mask,
    )
    # the pre-execution estimate L̂_out,m(x): per (benchmark, model) train mean; normalised with the same T0/E0
    train_rows = (st["split"] == "train").to_numpy()
    estimates = output_token_estimates(st["benchmark"].to_numpy(), out_tok, train_rows, config.cost)
    fixed = config.cost.model_copy(update={"normalisation": "fixed", "t0_s": float(br.t0_s), "e0_j": float(br.e0_j)})
    est = compute_costs(
        prompt_tokens=st["prompt_tokens"].to_numpy(dtype=float),
        output_tokens=estimated_output_tokens(st["benchmark"].to_numpy(), estimates, len(model_ids)),
        rate_ul_bps=st["rate_ul_bps"].to_numpy(), rate_dl_bps=st["rate_dl_bps"].to_numpy(), cost_spec=fixed,
        config=config,
    )
    n, m = out_tok.shape
    rows = pd.DataFrame({
        "dist_id": dist_id, "label_source": source, "split_seed": seed,
        "query_id": np.repeat(st["query_id"].to_numpy(), m), "draw": np.repeat(st["draw"].to_numpy(), m),
        "model_id": np.tile(model_ids, n),
        "latency_s": br.latency_s.reshape(-1), "energy_j": br.energy_j.reshape(-1),
        "cost_raw": br.cost_raw.reshape(-1), "cost_norm": br.cost_norm.reshape(-1),
        "cost_est_norm": est.cost_norm.reshape(-1),
    })
    validate_frame("costs", rows)
    # the paper's two-stage rule assumes m0 is never dearer than an edge model: how often that fails
    dearer = {"realised": device_dearer_share(br.cost_norm), "estimated": device_dearer_share(est.cost_norm)}
    scales = json.dumps({"t0_s": float(br.t0_s), "e0_j": float(br.e0_j), "normalisation": config.cost.normalisation,
                         "output_token_estimates": estimates, "model_ids": model_ids, "device_dearer_share": dearer})
    with Warehouse(home) as wh:  # with the T0/E0 used, so online routing normalises a new query as the costs were
        write_costs(wh, dist_id, source, seed, rows, scales)
    return {"dist_id": dist_id, "label_source": source, "split_seed": seed, "rows": len(rows), "t0_s": float(br.t0_s), "e0_j": float(br.e0_j),
            "device_dearer_share": dearer}


def _is_v2(config: Config) -> bool:
    return config.labels.source == "simulated-irt-v2"


EMBEDDINGS = Stage(embed_queries, Reads(
    config=("embedding",),
    rows=(Rows("queries", columns=("query_id", "content_hash")),),  # the content hash covers the text embedded
    writes=("embeddings",)), code=(EMBED_CODE,))
SPLITS = Stage(assign_splits_task, Reads(
    config=("splits",),
    rows=(Rows("queries", columns=("query_id", "benchmark", "subset")),),
    writes=("splits",)))
STATES = Stage(sample_states_task, Reads(
    config=("channel", "communication"),
    rows=(Rows("queries", columns=("query_id",)),),
    writes=("states", "state_distributions")))
LABELS = Stage(simulate_labels_task, Reads(
    config=("labels", "models", "benchmarks", "data_dir", "embedding.encoder", "embedding.backend"),
    rows=(Rows("queries", columns=("query_id", "benchmark", "subset", "content_hash")),
          # simulated-irt-v2 reads the query embeddings (its text-predictable difficulty lives in the encoder space)
          Rows("embeddings", where=lambda c: {"encoder": c.embedding.store_name}, when=_is_v2)),
    files=lambda c: [c.data_path / c.labels.simulator.accuracy_file],
    writes=("labels", "label_runs")))
COSTS = Stage(compute_costs_task, Reads(
    config=("models", "reference_model", "communication", "power", "cost", "hardware", "channel.distribution",
            "labels.source", "splits.seed"),
    rows=(Rows("states", where=lambda c: {"dist_id": c.channel.distribution.dist_id}),
          Rows("labels", where=lambda c: {"source": c.labels.source}, columns=("query_id", "model_id", "output_tokens")),
          Rows("queries", columns=("query_id", "benchmark", "prompt_tokens")),
          Rows("splits", where=lambda c: {"seed": int(c.splits.seed)}, columns=("query_id", "split"))),
    writes=("costs",)))
