"""The sim-to-real check as a task: measured MMLU-Pro labels vs simulated ones on the same questions.

Reads data/measured/ (cr2_warehouse.measured_files), embeds the questions (cached in the store, chunk by chunk),
computes the measured pool's costs (cr2.system.cost with the pool config), fits the v2 shape afresh (for the
record), simulates every configured source over several seeds, runs cr2.studies.simcheck, and writes tidy rows
to the `simcheck` table (view v_simcheck). docs/labels.md describes the check and its results.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task

from cr2.config import Config, load_config, resolve_config_path
from cr2.core.files import atomic_write
from cr2.core.errors import ConfigError
from cr2_tasks.common import Reads, Stage, stage_key
from cr2_tasks.store import cache_key, store, tool_dir
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import write_simcheck

SUBSAMPLE_SALT = "cr2-simcheck"
EMBED_CHUNK = 250  # questions embedded between two writes of the cache (progress survives an interrupt)


def subsample_rows(question_ids: np.ndarray, n: int | None) -> np.ndarray:
    """[n] sorted row indices of the stable subsample: the n questions with the smallest salted hash."""
    from cr2.core.hashing import stable_u64_array

    if n is None or n >= len(question_ids):
        return np.arange(len(question_ids))
    order = np.argsort(stable_u64_array([f"{SUBSAMPLE_SALT}\x1f{q}" for q in question_ids]), kind="stable")
    return np.sort(order[:n])


EMBEDDINGS = "simcheck-embeddings"  # the store's kind of one chunk of embedded questions


def _chunks(texts: list[str], config: Config) -> list[tuple[slice, tuple]]:
    """The chunks of `texts` (EMBED_CHUNK each, in order) and each chunk's key parts: the encoder setting and the
    digests of its texts — content-addressed, so the same texts in the same chunk find the same entry."""
    from cr2_warehouse.measured_files import text_keys

    spec, keys = config.embedding, text_keys(texts)
    return [(slice(s, s + EMBED_CHUNK), (spec.encoder, int(spec.max_seq_length), *keys[s:s + EMBED_CHUNK].tolist()))
            for s in range(0, len(texts), EMBED_CHUNK)]


def cached_embeddings(texts: list[str], config: Config, home: Path, progress: bool = True) -> np.ndarray:
    """e(x) of every text: each chunk from the store (kind EMBEDDINGS), embedded and stored where it is missing, so
    an interrupted run keeps the chunks it finished."""
    from cr2.inputs.embed import EMBED_DIM, embed_texts, load_encoder

    spec, st = config.embedding, store(home)
    encoder, parts, done = None, [], 0
    for chunk, key_parts in _chunks(texts, config):
        def compute(chunk=chunk) -> dict:
            nonlocal encoder
            if encoder is None:
                encoder = load_encoder(spec.max_seq_length, backend=spec.backend, cache_dir=st.tool("encoders"))
            return {"vectors": embed_texts(texts[chunk], batch_size=spec.batch_size,
                                           max_seq_length=spec.max_seq_length, encoder=encoder, progress=False)}

        value, hit = st.get_or_compute(EMBEDDINGS, key_parts, compute, "npz")
        parts.append(np.asarray(value["vectors"], dtype=np.float32))
        done += len(parts[-1])
        if progress and not hit:
            print(f"simcheck: embedded {done}/{len(texts)} questions", flush=True)
    return np.concatenate(parts) if parts else np.zeros((0, EMBED_DIM), dtype=np.float32)


def store_embeddings(texts: list[str], config: Config, home: Path, vectors: np.ndarray) -> None:
    """Put given vectors of `texts` into the store as cached_embeddings would find them (embeddings computed
    elsewhere, or stand-ins for a test)."""
    st = store(home)
    for chunk, key_parts in _chunks(texts, config):
        st.put(EMBEDDINGS, cache_key(EMBEDDINGS, *key_parts), {"vectors": np.asarray(vectors[chunk], np.float32)}, "npz")


def pool_costs(pool_cfg: Config, question_ids: np.ndarray, texts: list[str], generated_chars: np.ndarray,
               chars_per_token: float, home: Path) -> np.ndarray:
    """Normalised costs c_m(x, ξ) [n, M] of the measured pool: Qwen3-BPE prompt tokens, measured answer lengths."""
    from cr2.system.channel import rates, sample_channel
    from cr2.system.cost import costs_from_config
    from cr2.inputs.tokenizer import qwen_token_counter

    prompt_tokens = np.maximum(qwen_token_counter(tool_dir(home, "tokenizers")).count(texts), 1)
    # L_out,m(x) from the measured answer length [cr2 decision: chars_per_token, docs/labels.md]
    output_tokens = np.maximum(np.ceil(generated_chars / chars_per_token), 1.0)
    states = sample_channel(pool_cfg.channel, [f"mmlu_pro/{q}" for q in question_ids])
    r_ul, r_dl = rates(states, pool_cfg.communication)
    return costs_from_config(pool_cfg, prompt_tokens, output_tokens, r_ul, r_dl).cost_norm.astype(np.float32)


@task(name="simcheck")
def simcheck_task(config: Config, home: str, full: bool = False, routing: bool = True) -> dict:
    """Measured vs simulated labels on MMLU-Pro: label structure and routing outcomes, tidy rows → `simcheck`."""
    from cr2.core.data import RoutingSet
    from cr2.labels.fit_shape import fit_shape
    from cr2.studies.simcheck import RoutingCheckSpec, label_sweep, shape_record, simulate_source, split_sets
    from cr2.inputs.splits import assign_splits
    from cr2_warehouse.measured_files import read_measured_pool

    home_p = Path(home)
    spec = config.simcheck
    pool_cfg = load_config(resolve_config_path(spec.pool_config))
    model_ids = [m.id for m in pool_cfg.models]
    missing = [m for m in model_ids if m not in spec.measured_names]
    if missing:
        raise ConfigError(f"simcheck.measured_names has no measured name for pool model(s) {missing} of "
                          f"'{spec.pool_config}'; add them (names as in data/README.md, section Measured outputs)")
    pool = read_measured_pool(config.data_path, {m: spec.measured_names[m] for m in model_ids})
    rows_idx = subsample_rows(pool.question_id, None if full else spec.n_questions)
    sub_ids = pool.question_id[rows_idx]
    texts = [pool.texts[i] for i in rows_idx]
    groups = pool.category[rows_idx]
    n_choices = pool.n_choices[rows_idx]
    y_meas = pool.correct[rows_idx]
    embedding = cached_embeddings(texts, config, home_p)
    params = [m.params for m in pool_cfg.models]

    # the fresh fit (on every question for r; on the embedded subsample for ρ and w_s), recorded beside the
    # configured shape the simulation uses
    fit = None
    out: list[dict] = []
    if spec.refit:
        emb_full = np.zeros((len(pool.question_id), embedding.shape[1]))
        emb_full[rows_idx] = embedding
        mask = np.zeros(len(pool.question_id), dtype=bool)
        mask[rows_idx] = True
        fit = fit_shape(pool.correct, pool.category, pool.n_choices, emb_full, model_ids, embedded=mask,
                        seeds=tuple(range(3)))
        out = [{"source": "fit", "seed": None, "section": "fit", "statistic": k, "model": "", "other": "",
                "lam": None, "target": None, "value": float(getattr(fit, k))}
               for k in ("latent_correlation", "predictable_share", "subset_share", "measured_r2", "fitted_r2",
                         "r2_between")]

    def routing_sets(y: np.ndarray):
        data = RoutingSet(query_id=sub_ids.astype(object), benchmark=np.full(len(sub_ids), "mmlu_pro", dtype=object),
                          embedding=embedding, correct=y, cost=cost, model_ids=tuple(model_ids))
        return split_sets(data, split.split, split.dev)

    if routing:
        cost = pool_costs(pool_cfg, sub_ids, texts, pool.generated_chars[rows_idx], spec.chars_per_token, home_p)
        split = assign_splits([f"mmlu_pro/{g}/{q}" for g, q in zip(groups, sub_ids)], np.full(len(sub_ids), "mmlu_pro"),
                              groups, config.splits)

    sim = config.labels.simulator
    out += label_sweep(
        y_meas, groups, model_ids, pool_cfg.ref_model_id,
        lambda source, seed, targets: simulate_source(source, seed, sim, sub_ids, groups, texts, embedding, n_choices,
                                                      model_ids, params, targets),
        spec.sources, spec.structure_seeds, spec.routing_seeds, sets=routing_sets if routing else None,
        routing=(RoutingCheckSpec.from_config(config), config.teacher, config.gate, config.seed),
        progress=lambda line: print(line, flush=True))

    run_id = f"simcheck-{stage_key(SIMCHECK, config, home, full, routing)[-16:]}"
    with Warehouse(home_p) as wh:
        n_rows = write_simcheck(wh, run_id, len(rows_idx), pool={m: spec.measured_names[m] for m in model_ids},
                                rows=out, shape=shape_record(sim.shape, fit))
    return {"run_id": run_id, "n_questions": int(len(rows_idx)), "rows": n_rows,
            "fit": {} if fit is None else {k: getattr(fit, k) for k in ("latent_correlation", "predictable_share",
                                                                        "subset_share")}}


def build_simcheck_page(home: str, run_id: str) -> str:
    """Write <home>/report/simcheck.html for one simcheck run; returns its path."""
    from cr2.report.simcheck import render_simcheck_html
    from cr2_warehouse.simcheck import simcheck_page_frames

    with Warehouse(home, read_only=True) as wh:
        frames, run = simcheck_page_frames(wh, run_id)
    meta = {"run_id": run_id, "questions": f"{int(run['n_questions']):,} MMLU-Pro questions",
            "pool (model id → measured name)": run["pool"], "shape simulated / fresh fit": run["shape"],
            "created (UTC)": str(run["created_at"])[:19]}
    out = Path(home) / "report"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "simcheck.html"
    atomic_write(path, render_simcheck_html(meta, frames["structure"], frames["savings"], frames["cr2"],
                                            frames["points"], frames["fit"]))
    return str(path)


def _measured_files(config: Config) -> list[Path]:
    from cr2_warehouse.measured_files import OUTPUTS_FILE, QUESTIONS_FILE

    return [config.data_path / QUESTIONS_FILE, config.data_path / OUTPUTS_FILE]


def _pool(config: Config) -> list[str]:
    """The measured pool's config (simcheck.pool_config, loaded): the sections its costs are priced with."""
    pool = load_config(resolve_config_path(config.simcheck.pool_config))
    return [pool.section_hash("models", "hardware", "communication", "power", "cost", "channel")]


SIMCHECK = Stage(simcheck_task, Reads(
    config=("simcheck", "labels", "splits", "teacher", "gate", "embedding", "seed", "data_dir", "grids.default_alpha",
            "baselines.params", "evaluation.exclude_unsolvable"),
    files=_measured_files, derived=_pool, writes=("simcheck", "simcheck_runs")),
    upstream=lambda full=False, routing=True: [bool(full), bool(routing)])
