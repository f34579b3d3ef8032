"""Stage keys cover exactly what each stage reads (cr2_tasks.common: Reads, Stage.key, tracked_run).

1. Declarations are complete: every stage of `cr2 run` (and the pool summary, the recalibration evaluation and
   the premise inputs) runs once on a small slice through a read-tracking view of the config and of the
   warehouse; a config field or table read outside its Reads fails here.
2. Keys follow the declarations, field by field: for every leaf of the config (enumerated from the pydantic
   models, so a new field is covered without touching this file), a stage's key changes exactly when the field
   is among the stage's declared reads; likewise for a row changed in each table a stage reads. The store's
   artefact keys (cr2_tasks.common.Artefact: the teacher, each baseline, the ablated gates) are held to the same rule,
   for every config leaf and every row field.
3. Outputs decide: for a sample of fields, the prepare stages re-run on a copy of the warehouse with the field
   changed; every stage whose output (compared by content) changed has a new key, and a stage whose key stayed
   the same produced the same rows.
"""
from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefect import task

from cr2.config import load_config
from cr2.config.reads import covered, leaf_paths, value_at
from tests.conftest import run_stages_to_evaluate
from tests.conftest import write_small_benchmarks
from cr2_warehouse.db import Warehouse

SMALL = {"teacher": {"epochs": 2}, "gate": {"epochs": 2}, "evaluation": {"n_resplits": 10, "bootstrap": {"n_resamples": 200, "n_resamples_compare": 1000}},
         "grids": {"lam": {"min": 0.1, "max": 20.0, "n_log": 4, "extra": [0.0, 2.0]}},
         "baselines": {"params": {"mlp": {"epochs": 2}, "embedllm": {"epochs": 2}, "llmrank": {"epochs": 2},
                                  "knn": {"k_grid": [3]}}}}


@pytest.fixture(scope="module")
def slice_run(tmp_path_factory, one_torch_thread):
    """Every stage run once, tracked, on a small slice: {stage name: ReadCheck}, the stages with their inputs,
    the config and the home."""
    from cr2_tasks.ablation import ABLATION
    from cr2_tasks.certify import CERTIFY
    from cr2_tasks.common import tracked_run
    from cr2_tasks.equal_risk import EQUAL_RISK
    from cr2_tasks.intervals import INTERVALS
    from cr2_tasks.level import LEVEL
    from cr2_tasks.pools import POOL_SUMMARY
    from cr2_tasks.premise import PREMISE_INPUTS
    from cr2_tasks.recalibrate import EVALUATE_RECALIBRATION
    from cr2_tasks.report import REPORT

    root = tmp_path_factory.mktemp("stage-reads")
    data = write_small_benchmarks(root / "data", per_subset=12, subsets_per_benchmark=2)
    config = load_config(overrides={"data_dir": str(data), **SMALL})
    home = root / "home"
    checks, calls = {}, {}

    def run(stage, *inputs):
        calls[stage.name] = (stage, inputs)
        checks[stage.name] = tracked_run(stage, config, home, *inputs)
        return checks[stage.name].result

    done = run_stages_to_evaluate(run)
    ingested, trained, calibrated = done["ingest"], done["train"], done["calibrate"]
    baselines, evaluated = done["baselines"], done["evaluate"]
    certified = run(CERTIFY, trained, baselines, evaluated)
    run(EQUAL_RISK, evaluated, certified)
    run(INTERVALS, trained, evaluated)
    ablated = run(ABLATION, trained, evaluated)
    counts = {b: row["queries"] for b, row in ingested["benchmarks"].items()}
    run(REPORT, evaluated, counts, trained, baselines, ablated)
    run(POOL_SUMMARY, evaluated["run_id"])
    run(EVALUATE_RECALIBRATION, trained, {"before": calibrated, "after": calibrated})
    run(PREMISE_INPUTS, trained, baselines["routers"])
    run(LEVEL, evaluated["run_id"], 3, 40, 0)  # the A/A study on the run's stored sides (a few replicates)
    return {"checks": checks, "calls": calls, "config": config, "home": home}


STAGE_NAMES = ("ingest-queries", "prepare-embeddings", "prepare-splits", "prepare-states", "prepare-labels",
               "prepare-costs", "train-cr2", "calibrate-cr2", "fit-baselines", "evaluate", "intervals", "ablation",
               "certify", "equal-risk", "report", "pool-summary", "evaluate-recalibration", "premise-inputs", "level")


NO_CONFIG = {"report": "every setting it prints comes from the stored run (eval_runs), none from the config"}


@pytest.mark.parametrize("name", STAGE_NAMES)
def test_each_stage_reads_only_what_it_declares(slice_run, name):
    check = slice_run["checks"][name]
    check.verify()
    if name in NO_CONFIG:
        assert not check.config, f"{name} reads {sorted(check.config)}; it should read none: {NO_CONFIG[name]}"
    else:
        assert check.config, f"{name} read no config field at all: the tracking view was bypassed"


def test_the_tracking_catches_an_undeclared_read(small_config, tmp_path):
    from cr2_tasks.common import Reads, Rows, Stage, UndeclaredReadError, tracked_run

    @task(name="reads-more-than-it-says")
    def sneaky(config, home: str) -> dict:
        with Warehouse(home, read_only=True) as wh:
            n = wh.count("splits")
        return {"seed": config.seed, "bits": config.splits.seed, "n": n}

    stage = Stage(sneaky, Reads(config=("splits",), rows=(Rows("queries"),)))
    Warehouse(tmp_path).close()
    check = tracked_run(stage, small_config, tmp_path)
    assert check.undeclared_config == ("seed",) and check.undeclared_tables == ("splits",)
    with pytest.raises(UndeclaredReadError, match="seed"):
        check.verify()
    fine = Stage(sneaky, Reads(config=("splits", "seed"), rows=(Rows("queries"), Rows("splits"))))
    assert tracked_run(fine, small_config, tmp_path).verify()["n"] == 0


# ---------------------------------------------------------------- keys follow the declarations
@contextlib.contextmanager
def kept_open(home: Path) -> Iterator[None]:
    """The warehouse held open for the block: every `Warehouse(home)` opened inside (each key opens one) attaches to
    the database this process already has open with the same settings, as DuckDB does, instead of starting the
    engine again (≈ 20 ms of CPU apiece: the tests below compute hundreds of keys)."""
    with Warehouse(home):
        yield


def _perturbed(value):
    """A different value of the same kind (None → a string: only the key is computed from it)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 1.5 + 0.25
    if isinstance(value, str):
        return value + "-x"
    if isinstance(value, (list, tuple)):
        return [*value, value[-1]] if value else ["x"]
    if isinstance(value, dict):
        return {**value, "perturbed-x": 1}
    return "perturbed"


def _with(model, path: str, value):
    """A copy of a config (or section) with the value at `path` replaced (no validation: keys only)."""
    head, _, rest = path.partition(".")
    if isinstance(model, dict):
        return {**model, head: _with(model[head], rest, value) if rest else value}
    return model.model_copy(update={head: _with(getattr(model, head), rest, value) if rest else value})


@pytest.mark.filterwarnings("ignore::UserWarning")  # perturbed values of another type than the field's (keys only)
@pytest.mark.slow  # every config field, every stage key (≈ 20 s): in `make test`, not in `make test-fast`
def test_every_config_field_changes_exactly_the_keys_that_declare_it(slice_run):
    config, home = slice_run["config"], slice_run["home"]
    calls = slice_run["calls"]
    with kept_open(home):
        _config_fields_change_exactly_their_keys(config, home, calls)


def _config_fields_change_exactly_their_keys(config, home, calls) -> None:
    leaves = list(leaf_paths(config))
    assert len(leaves) > 200 and "splits.seed" in leaves and "cost.normalisation" in leaves
    # a stage's key reads the config only at its declared paths (the tracked runs above checked the key too), so
    # it is a function of those values: only a covered field can change it. Each covered one must.
    base = {name: stage.key(config, home, *inputs) for name, (stage, inputs) in calls.items()}
    base_hash = {name: stage.reads.config_hash(config) for name, (stage, _) in calls.items()}
    missed, stray = [], []
    for leaf in leaves:
        changed = _with(config, leaf, _perturbed(value_at(config, leaf)))
        for name, (stage, inputs) in calls.items():
            declared = covered(leaf, stage.reads.config)
            moved = stage.reads.config_hash(changed) != base_hash[name]
            if declared and not moved:
                missed.append((name, leaf))
            if not declared and moved:
                stray.append((name, leaf))
    assert not missed, f"declared fields that leave the key unchanged: {missed[:20]}"
    assert not stray, f"undeclared fields that change the key: {stray[:20]}"
    # the whole key, warehouse parts included, for one field per section each stage declares
    sample = {}
    for leaf in leaves:
        sample.setdefault(leaf.split(".")[0], leaf)
    for leaf in ("splits.seed", "labels.source", "channel.distribution.name", "embedding.encoder", *sample.values()):
        changed = _with(config, leaf, _perturbed(value_at(config, leaf)))
        for name, (stage, inputs) in calls.items():
            try:
                key = stage.key(changed, home, *inputs)
            except Exception:  # a perturbed value the key cannot be computed from (an unknown catalogue file):
                key = None  # a failing key is a changed key — the stage cannot be cached under it
            assert (key != base[name]) == covered(leaf, stage.reads.config), (name, leaf)


def _artefacts(config):
    """Every artefact kind the store keeps a record of, with the given parts of one of its keys."""
    from cr2_tasks.ablation import ABLATION_GATE
    from cr2_tasks.baselines import baseline_artefact, baseline_names
    from cr2_tasks.train import TEACHER

    arts = {"teacher": (TEACHER, ()), "ablation-gate": (ABLATION_GATE, ("teacher-fingerprint", "sign-only"))}
    arts.update({f"router:{name}": (baseline_artefact(config, name), (name,)) for name in baseline_names(config)})
    return arts


@pytest.mark.filterwarnings("ignore::UserWarning")  # perturbed values of another type than the field's (keys only)
def test_every_config_and_row_field_changes_exactly_the_artefact_keys_that_declare_it(small_config):
    """The store's artefact keys (cr2_tasks.common.Artefact) follow their declarations like stage keys: a config leaf
    moves a key exactly when the artefact's Reads cover it, a row field exactly when its fields name it."""
    from cr2.core.hashing import ROW_FIELDS
    from cr2.evaluation.synthetic import make_routing_set
    from tests.test_store import _changed

    config = small_config
    sets = (make_routing_set(40, seed=1), make_routing_set(20, seed=2))
    arts = _artefacts(config)
    assert {"teacher", "ablation-gate", "router:knn", "router:mlp"} <= set(arts)
    base = {name: art.key(config, sets, *given) for name, (art, given) in arts.items()}
    wrong = []
    for leaf in leaf_paths(config):
        changed = _with(config, leaf, _perturbed(value_at(config, leaf)))
        for name, (art, given) in arts.items():
            try:
                key = art.key(changed, sets, *given)
            except Exception:  # a perturbed value the key cannot be computed from: a changed key
                key = None
            if (key != base[name]) != covered(leaf, art.reads.config):
                wrong.append((name, leaf))
    assert not wrong, f"config fields whose effect on an artefact key disagrees with its declaration: {wrong[:20]}"
    for field in ROW_FIELDS:
        changed_sets = tuple(_changed(data, field) for data in sets)
        read = field if field != "decision_cost" else "cost_est"  # ĉ: the estimate, when the rows carry one
        for name, (art, given) in arts.items():
            assert (art.key(config, changed_sets, *given) != base[name]) == (read in art.fields), (name, field)
    assert any("cost" in art.fields for art, _ in arts.values()) and "cost" not in arts["teacher"][0].fields


def test_the_artefact_fits_read_only_what_their_declarations_name(small_config, tmp_path):
    """The artefacts' declarations are complete: the teacher's fit and the ablated gates' fit jobs (everything those
    fits are given), run on a read-tracking view of the config, read no config field outside their Reads; and the
    teacher, declared without costs, never reads one (fitted on rows with other costs, it is the same teacher)."""
    from cr2.method.checkpoint import fingerprint
    from cr2.config.reads import TrackedConfig, undeclared
    from cr2.evaluation.synthetic import make_routing_set
    from cr2_tasks.ablation import ABLATION_GATE, _fit_jobs
    from cr2_tasks.common import COST_FIELDS
    from cr2_tasks.train import TEACHER, fit_teacher
    from tests.test_store import _changed

    config = small_config.model_copy(update={"teacher": small_config.teacher.model_copy(update={"epochs": 1})})
    train, dev = make_routing_set(60, seed=1), make_routing_set(20, seed=2)
    tracked = TrackedConfig(config)
    teacher = fit_teacher(tracked, train, dev)
    assert tracked.reads and undeclared(tracked.reads, TEACHER.reads.config) == []
    assert not set(COST_FIELDS) & set(TEACHER.fields)
    for field in COST_FIELDS:
        again = fit_teacher(config, _changed(train, field), _changed(dev, field))
        assert fingerprint(again) == fingerprint(teacher), field
    tracked = TrackedConfig(config)
    _fit_jobs(tracked, str(tmp_path), teacher, train, dev)
    assert tracked.reads and undeclared(tracked.reads, ABLATION_GATE.reads.config) == []


ROW_EDITS = {  # every row of each table a key fingerprints, in columns its readers read (table: (columns, SQL))
    "queries": (("benchmark", "content_hash", "prompt_tokens", "subset"),
                "UPDATE queries SET benchmark = benchmark || '-x', content_hash = content_hash || 'x', "
                "prompt_tokens = prompt_tokens + 1, subset = subset || '-x'"),
    "embeddings": (("vector",), "UPDATE embeddings SET vector = list_transform(vector, lambda v: v * 0.5)::FLOAT[384]"),
    "splits": (("split",), "UPDATE splits SET split = CASE split WHEN 'train' THEN 'dev' "
               "WHEN 'dev' THEN 'val' WHEN 'val' THEN 'test' ELSE 'train' END"),
    "states": (("distance_m", "rate_ul_bps"), "UPDATE states SET distance_m = distance_m + 1, rate_ul_bps = rate_ul_bps * 2"),
    "labels": (("correct", "output_tokens"), "UPDATE labels SET output_tokens = output_tokens + 1, correct = NOT correct"),
    "costs": (("cost_norm", "cost_est_norm"), "UPDATE costs SET cost_norm = cost_norm * 2, cost_est_norm = cost_est_norm * 2"),
    "decisions": (("chosen_model",), "UPDATE decisions SET chosen_model = chosen_model || '-x'"),
    "equal_risk": (("estimate",), "UPDATE equal_risk SET estimate = estimate + 1"),
}


def _reads_columns(read, table: str, columns: tuple[str, ...], config) -> bool:
    from cr2_tasks.common import Rows

    if table not in read.tables:
        return False
    if isinstance(read, Rows):
        return (read.when is None or read.when(config)) and (read.columns is None or bool(set(columns) & set(read.columns)))
    return True  # the routing view reads every column edited above


def test_a_changed_table_changes_exactly_the_keys_that_read_it(slice_run, tmp_path):
    config, calls = slice_run["config"], slice_run["calls"]
    home = tmp_path / "home"
    shutil.copytree(slice_run["home"], home, ignore=shutil.ignore_patterns("prefect-results"))
    read_tables = {t for stage, _ in calls.values() for r in stage.reads.rows for t in r.tables}
    assert read_tables <= set(ROW_EDITS) | {"models"}, f"tables no edit covers: {read_tables - set(ROW_EDITS)}"
    with kept_open(home):
        before = {name: stage.key(config, home, *inputs) for name, (stage, inputs) in calls.items()}
        for table, (columns, sql) in ROW_EDITS.items():
            with Warehouse(home) as wh:
                wh.con.execute(sql)
            after = {name: stage.key(config, home, *inputs) for name, (stage, inputs) in calls.items()}
            for name, (stage, _) in calls.items():
                reads = any(_reads_columns(r, table, columns, config) for r in stage.reads.rows)
                assert (after[name] != before[name]) == reads, (table, name, reads)
            before = after


# ---------------------------------------------------------------- outputs decide
PREPARE_OUTPUTS = {"prepare-embeddings": ("embeddings",), "prepare-splits": ("splits",), "prepare-states": ("states",),
                   "prepare-labels": ("labels",), "prepare-costs": ("costs",)}
OUTPUT_COLUMNS = {"labels": ("source", "query_id", "model_id", "correct", "output_tokens")}  # run_id names the key
SAMPLE_FIELDS = ("splits.seed", "splits.dev_fraction", "channel.seed", "channel.distribution.distance.high_m",
                 "labels.simulator.difficulty_sd", "cost.t0_s", "communication.rtt_s", "embedding.batch_size",
                 "teacher.epochs")


def _contents(home: Path) -> dict[str, str]:
    with Warehouse(home, read_only=True) as wh:
        return {t: wh.table_fingerprint(t, columns=OUTPUT_COLUMNS.get(t)) for ts in PREPARE_OUTPUTS.values() for t in ts}


@pytest.mark.slow  # each case re-runs the prepare stages, embedding included
@pytest.mark.parametrize("field", SAMPLE_FIELDS)
def test_a_stage_whose_output_changes_has_a_new_key(slice_run, tmp_path, field):
    """Re-run the prepare stages with one field changed on a copy of the warehouse (its own rows dropped first,
    so each stage writes afresh): an output that differs by content comes with a new key; an unchanged key
    comes with the same output."""
    config, calls = slice_run["config"], slice_run["calls"]
    value = value_at(config, field)
    changed = _with(config, field, _perturbed(value) if not isinstance(value, float) else value * 1.1)
    changed = type(config).model_validate(changed.model_dump())  # a valid config (validators, derived ids)
    home = tmp_path / "home"
    shutil.copytree(slice_run["home"], home, ignore=shutil.ignore_patterns("prefect-results"))
    before = _contents(home)
    keys_before = {name: calls[name][0].key(config, home) for name in PREPARE_OUTPUTS}
    for name, tables in PREPARE_OUTPUTS.items():  # in pipeline order: each key sees its upstream's new rows
        stage, inputs = calls[name]
        key_before, key_after = keys_before[name], stage.key(changed, home, *inputs)
        with Warehouse(home) as wh:
            for t in tables:
                wh.delete_where(t, None)
        stage.task.fn(changed, str(home), *inputs)
        after = _contents(home)
        out_changed = any(after[t] != before[t] for t in tables)
        if out_changed:
            assert key_after != key_before, f"{field}: {name} wrote different rows under the same key"
        if key_after == key_before:
            assert not out_changed, f"{field}: {name} kept its key but its rows changed"
        before = after

