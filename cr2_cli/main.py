"""The `cr2` command line: thin wrappers over flows/ and warehouse/ (errors print as one clear message)."""
from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Optional

import click
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

import cr2  # noqa: F401  (applies the offline / no-telemetry switches first)
from cr2.errors import Cr2Error, Cr2SqlError
from cr2_cli.console import cr2_cause, hide_cr2_tracebacks_on_console

app = typer.Typer(add_completion=False, no_args_is_help=True, help="CR²: cost-aware, risk-controlled device–edge LLM routing.")
config_app = typer.Typer(no_args_is_help=True, help="Show or check configuration files.")
app.add_typer(config_app, name="config")
labels_app = typer.Typer(no_args_is_help=True, help="Correctness label sources: list, import.")
app.add_typer(labels_app, name="labels")
from cr2_cli.study import study_app  # noqa: E402  (the `cr2 study …` group; its commands are registered below)

app.add_typer(study_app, name="study")
# markup=False: nothing printed is parsed as Rich markup — names, SQL results and questions may hold "[x]" or
# "[/x]" (issue 28, F9); styles are given as Text / style= where wanted
console = Console(markup=False)
err_console = Console(stderr=True, markup=False)

ConfigOpt = typer.Option(None, "--config", "-c", help="config YAML (default: configs/default.yaml)")
HomeOpt = typer.Option(None, "--home", help="warehouse folder (default: $CR2_HOME or var/)")


# commands that run a Prefect flow (the others need not pay for importing prefect)
FLOW_COMMANDS = frozenset({"ingest", "prepare", "train", "calibrate", "recalibrate", "run", "label_command",
                           "seeds_command", "premise_command"})

TRACEBACK_ENV = "CR2_TRACEBACK"


def _print_error(message: str) -> None:
    err_console.print("error: ", style="bold red", end="", highlight=False)
    err_console.print(message, highlight=False, markup=False, soft_wrap=True)


def friendly(fn):
    """Turn every error into a short message and a non-zero exit code, never a traceback: cr2's own errors
    exit with their code (2), anything else with 1 and a line saying how to see the traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            if fn.__name__ in FLOW_COMMANDS:  # a Cr2Error inside a flow: our one message, not Prefect's traceback
                hide_cr2_tracebacks_on_console()
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, click.ClickException):  # click's own exits and usage errors
            raise
        except Cr2Error as exc:
            _print_error(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            _print_error("interrupted; the warehouse keeps only completed writes (each write is one transaction)")
            raise typer.Exit(130) from None
        except Exception as exc:  # errors raised inside Prefect tasks arrive wrapped or re-raised as-is
            cause = _cr2_cause(exc)
            if cause is not None:
                _print_error(str(cause))
                raise typer.Exit(cause.exit_code) from None
            if os.environ.get(TRACEBACK_ENV):
                raise
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            _print_error(f"unexpected {type(exc).__name__}: {first} — this is a bug in cr2 (the warehouse keeps only "
                         f"completed writes); run again with {TRACEBACK_ENV}=1 to see the traceback, and report it")
            raise typer.Exit(1) from None

    return wrapper


_cr2_cause = cr2_cause


def _home(home: Optional[Path], create: bool = True) -> Path:
    """The warehouse folder; Prefect's own state (run history DB) goes to <home>/prefect unless PREFECT_HOME is set.

    create=False (commands that only read a warehouse): a folder without a warehouse is an error and nothing is
    created on disk."""
    from warehouse.db import DB_NAME, WarehouseError, default_home

    h = home.expanduser().resolve() if home else default_home()
    if not create and not (h / DB_NAME).is_file():
        raise WarehouseError(f"no warehouse at {h / DB_NAME}; run `cr2 run` (or `cr2 ingest`) first, or pass the "
                             "--home that holds it")
    if "PREFECT_HOME" not in os.environ:
        (h / "prefect").mkdir(parents=True, exist_ok=True)
        os.environ["PREFECT_HOME"] = str(h / "prefect")
    return h


# ------------------------------------------------------------------ config
@config_app.command("show")
@friendly
def config_show(config: Optional[Path] = ConfigOpt) -> None:
    """Print the resolved configuration (state distribution and hardware profile included)."""
    from cr2.config import load_config

    cfg = load_config(config)
    console.print(cfg.to_yaml(), highlight=False, markup=False)
    console.print(f"# config hash: {cfg.section_hash()}", highlight=False, markup=False)


@config_app.command("validate")
@friendly
def config_validate(file: Path = typer.Argument(..., help="config YAML to check")) -> None:
    """Check a config file; exit 0 when valid."""
    from cr2.config import load_config

    cfg = load_config(file)
    console.print(f"{file}: valid (hash {cfg.section_hash()}, {len(cfg.models)} models, "
                  f"{len(cfg.enabled_benchmarks)} benchmarks, states '{cfg.channel.distribution.name}')", highlight=False)


# ------------------------------------------------------------------ pipeline
@app.command()
@friendly
def ingest(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Load the selected benchmarks into the warehouse (validated, cached)."""
    from flows.ingest import ingest_flow

    t0 = time.perf_counter()
    summary = ingest_flow(config_path=str(config) if config else None, home=str(_home(home)))
    print_ingest_summary(summary)
    how = "cached: nothing changed, no work done" if summary.get("cached") else "computed"
    console.print(f"ingest finished in {time.perf_counter() - t0:.1f} s ({how}); warehouse: {_home(home) / 'cr2.duckdb'}")


@app.command()
@friendly
def prepare(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Embeddings, splits, channel states, labels and costs for every query (validated, cached)."""
    from flows.prepare import prepare_flow

    h = _home(home)
    t0 = time.perf_counter()
    summary = prepare_flow(config_path=str(config) if config else None, home=str(h))
    print_prepare_steps(summary)
    print_model_summary(h, config)
    console.print(f"prepare finished in {time.perf_counter() - t0:.1f} s; warehouse: {h / 'cr2.duckdb'}")


@app.command()
@friendly
def train(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Train the CR² teacher selector and margin gate on the prepared train split (cached)."""
    from flows.train import train_flow

    h = _home(home)
    print_train(train_flow(config_path=str(config) if config else None, home=str(h)))


@app.command()
@friendly
def calibrate(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt,
              lam: Optional[list[float]] = typer.Option(None, "--lam", help="extra λ to calibrate exactly (repeatable)"),
              rule: Optional[str] = typer.Option(None, "--rule", help="crc | ltt | crc-oracle | crc-avoidable | ltt-oracle | "
                                                 "ltt-avoidable | empirical (default: calibration.rule); the risk each "
                                                 "controls: docs/guarantees.md"),
              delta: Optional[float] = typer.Option(None, "--delta", help="ltt: P(some λ's threshold has risk > α) ≤ δ"),
              group: Optional[str] = typer.Option(None, "--group", help="Mondrian: benchmark | subset (none: pooled)"),
              small_group: Optional[str] = typer.Option(None, "--small-group", help="error | defer")) -> None:
    """Calibrate the threshold table τ*(λ; α) of the trained gate on the val split (new version)."""
    from flows.calibrate import calibrate_flow

    h = _home(home)
    print_calibrate(calibrate_flow(config_path=str(config) if config else None, home=str(h), extra_lams=list(lam or []),
                                   calibration=calibration_overrides(rule, delta, group, small_group)))


def calibration_overrides(rule: Optional[str], delta: Optional[float], group: Optional[str],
                          small_group: Optional[str]) -> dict:
    """config.calibration overrides from CLI flags (issue 21); `--rule crc` drops a configured δ."""
    out: dict = {}
    if rule is not None:
        out["rule"] = rule
        from cr2.crc import RULE_CATALOGUE

        if delta is None and not (rule in RULE_CATALOGUE and RULE_CATALOGUE[rule].needs_delta):
            out["delta"] = None
    if delta is not None:
        out["delta"] = delta
    if group is not None:
        out["group"] = None if group.lower() in ("none", "null", "") else group
    if small_group is not None:
        out["small_group"] = small_group
    return out


@app.command()
@friendly
def recalibrate(states: str = typer.Option(..., "--states", help="new state distribution: a name under configs/states "
                                          "or a YAML file"),
                only_if_drift: bool = typer.Option(False, "--only-if-drift", help="re-calibrate only when the drift "
                                                   "check detects a shift"),
                bands: bool = typer.Option(False, "--bands", help="also the Monte-Carlo re-split risk bands "
                                           "(evaluation.n_resplits; slower)"),
                baselines: bool = typer.Option(False, "--baselines", help="also evaluate the baselines under the new "
                                               "states"),
                config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Re-calibrate the frozen gate's thresholds on a new channel-state distribution (no retraining)."""
    from flows.recalibrate import recalibrate_flow

    h = _home(home)
    t0 = time.perf_counter()
    out = recalibrate_flow(states=states, config_path=str(config) if config else None, home=str(h),
                           only_if_drift=only_if_drift, bands=bands, baselines=baselines)
    for f in out["drift"]:
        console.print(f"drift {f['feature']:<12} KS D = {f['statistic']:.3f}, p_holm = {f['p_adjusted']:.3g}"
                      f"{'  DRIFT' if f['drifted'] else ''}", highlight=False)
    if out["skipped"]:
        console.print("no drift detected: thresholds kept as they are", highlight=False)
        return
    old, new = out["old_thresholds"], out["new_thresholds"]
    console.print(f"states {out['old_dist_id']} → {out['new_dist_id']}: thresholds v{old['version']} → v{new['version']} "
                  f"(N_calib = {new['n_calib']:,}; gate {new['gate_fingerprint']} unchanged)", highlight=False)
    from cr2.config import load_config
    from warehouse.db import Warehouse

    alpha = load_config(config).grids.default_alpha
    with Warehouse(h, read_only=True) as wh:
        df = wh.df("SELECT run_id, lam, alpha, risk, local_rate, accuracy, cost FROM operating_points WHERE method = 'cr2' "
                   "AND benchmark = 'all' AND run_id IN (?, ?) AND abs(alpha - ?) < 1e-12 AND lam IN (0.5, 2.0, 8.0)",
                   [out["before"]["run_id"], out["after"]["run_id"], alpha])
    table = Table(title=f"CR² on test under {out['new_dist_id']}, α = {alpha:g}: old thresholds (before) vs re-calibrated")
    for col in ("λ", "risk before", "risk after", "local before", "local after", "acc before", "acc after",
                "cost before", "cost after"):
        table.add_column(col, justify="right")
    b = df[df["run_id"] == out["before"]["run_id"]].set_index("lam")
    a = df[df["run_id"] == out["after"]["run_id"]].set_index("lam")
    for lam in sorted(set(a.index) & set(b.index)):
        table.add_row(f"{lam:g}", f"{b.at[lam, 'risk']:.4f}", f"{a.at[lam, 'risk']:.4f}", f"{100 * b.at[lam, 'local_rate']:.1f}%",
                      f"{100 * a.at[lam, 'local_rate']:.1f}%", f"{100 * b.at[lam, 'accuracy']:.1f}%",
                      f"{100 * a.at[lam, 'accuracy']:.1f}%", f"{b.at[lam, 'cost']:.3f}", f"{a.at[lam, 'cost']:.3f}")
    console.print(table)
    console.print(f"recalibrate finished in {time.perf_counter() - t0:.1f} s", highlight=False)


@app.command()
@friendly
def drift(states: str = typer.Option(..., "--states", help="candidate state distribution: a name or a YAML file"),
          n: int = typer.Option(2000, "--n", help="states to sample from it"),
          alpha: float = typer.Option(0.05, "--alpha", help="family-wise significance level (Holm)"),
          config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Test whether a state distribution departs from the deployed calibration states (KS per feature)."""
    from cr2.config import load_config, load_state_distribution
    from tasks.drift import drift_check

    load_state_distribution(states)  # a bad file or name fails here, before the warehouse is opened
    report = drift_check(load_config(config), _home(home, create=False), states, n, alpha)
    for line in report.lines():
        console.print(line, highlight=False, markup=False)


@app.command()
@friendly
def serve(host: str = typer.Option("127.0.0.1", help="interface to listen on (beyond loopback only with a bearer "
                                   "token in $CR2_SERVE_TOKEN)"),
          port: int = typer.Option(8080, min=1, max=65535, help="TCP port"),
          config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Serve the deployed router over HTTP: /health, /route and OpenAI-compatible /v1/chat/completions."""
    import uvicorn

    from cr2.config import load_config
    from cr2_cli.serve import bind_socket, create_app, server_config

    cfg = load_config(config)
    token = os.environ.get(cfg.serving.token_env) or None
    app_ = create_app(cfg, str(_home(home, create=False)), token=token, bind_host=host)
    sock = bind_socket(host, port)  # a port in use fails here, before 'serving' is printed
    auth = f"bearer token from ${cfg.serving.token_env}" if token else "no token (loopback only)"
    console.print(f"cr2 serving on http://{host}:{port} (docs at /docs; {auth})", highlight=False)
    uvicorn.Server(server_config(app_, cfg.serving, host=host, port=port)).run(sockets=[sock])


@app.command("export-gate")
@friendly
def export_gate_cmd(out: Path = typer.Argument(..., help="output folder for gate.onnx, thresholds.json, manifest.json"),
                    version: Optional[int] = typer.Option(None, help="threshold table version (default: newest)"),
                    target_accuracy: Optional[list[float]] = typer.Option(None, "--target-accuracy", help="also ship the "
                                                                          "operating point certified for this accuracy "
                                                                          "target (repeatable; newest version only)"),
                    budget: Optional[list[float]] = typer.Option(None, "--budget", help="also ship the operating point "
                                                                 "certified for this mean-cost budget (repeatable)"),
                    config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Export the deployed gate (ONNX) and its threshold table for the device runtime (cr2.runtime)."""
    from cr2.config import load_config
    from cr2_cli.online import load_deployed_router

    router, _ = load_deployed_router(load_config(config), _home(home, create=False), version)
    table = router.threshold_table_
    targets = None
    if target_accuracy or budget:  # issue 21: certified target-mode points, computed on the host's val split
        from cr2_cli.online import OnlineRouter
        from cr2_cli.targets import choose_target

        if version is not None:
            raise typer.BadParameter("--target-accuracy/--budget use the newest threshold version; drop --version")
        online = OnlineRouter.load(load_config(config), _home(home))
        targets = [choose_target(online, t, None) for t in target_accuracy or []]
        targets += [choose_target(online, None, b) for b in budget or []]
    m = router.export(out, targets=targets)
    console.print(f"exported gate {table.gate_fingerprint} with thresholds of {table.dist_id} "
                  f"({len(table.lams)} λ × {len(table.alphas)} α) to {m['dir']}; ONNX parity max |Δs| = "
                  f"{m['parity']['max_abs_score_diff']:.2e}", highlight=False)


@app.command("results")
@friendly
def results_cmd(alpha: Optional[float] = typer.Option(None, help="α of the CR² tables (default: grids.default_alpha)"),
                label_source: Optional[str] = typer.Option(None, help="newest run of this label source (default: newest)"),
                paper: bool = typer.Option(False, "--paper", help="also the paper's numbers beside ours"),
                config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Print the headline numbers of the newest evaluation run as markdown (what docs/results.md compares)."""
    from cr2.config import load_config
    from cr2_cli.results import comparison_markdown, results_markdown

    a = alpha if alpha is not None else load_config(config).grids.default_alpha
    print(results_markdown(_home(home), a, label_source))
    if paper:
        print(comparison_markdown(_home(home), a, label_source))


@app.command()
@friendly
def route(question: str = typer.Argument(..., help="the query text"),
          lam: float = typer.Option(1.0, "--lam", help="cost weight λ (must be on the calibrated grid)"),
          alpha: Optional[float] = typer.Option(None, "--alpha", help="risk level α (default: grids.default_alpha)"),
          distance_m: Optional[float] = typer.Option(None, "--distance-m", help="UE–edge distance, m (mean fading); "
                                                     "default: sample a state from the configured distribution"),
          choice: Optional[list[str]] = typer.Option(None, "--choice", help="a multiple-choice option (repeatable, A, B, …)"),
          benchmark: str = typer.Option("mmlu", help="benchmark whose default output length L_out is assumed"),
          seed: int = typer.Option(0, help="seed of the sampled channel state"),
          target_accuracy: Optional[float] = typer.Option(None, "--target-accuracy", help="instead of λ: the cheapest "
                                                          "(λ, α) certified to reach this accuracy (docs/guarantees.md)"),
          budget: Optional[float] = typer.Option(None, "--budget", help="instead of λ: the most accurate (λ, α) certified "
                                                 "to keep the mean normalised cost ≤ this budget"),
          config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Route one query with the deployed gate and threshold table: accept locally or defer to the edge."""
    from cr2.config import load_config
    from cr2_cli.online import route_query

    cfg = load_config(config)
    a = cfg.grids.default_alpha if alpha is None else alpha
    if target_accuracy is not None or budget is not None:  # issue 21: operate by target
        from cr2_cli.targets import route_by_target

        out = route_by_target(cfg, _home(home, create=False), question, list(choice) if choice else None, target_accuracy, budget,
                              distance_m, benchmark, seed)
        c = out["target_choice"]
        lam, a = out["lam"], out["alpha"]
        console.print(f"target {c['mode']} {c['target']:g}: chose λ={lam:g}, α={a:g} (τ = {c['tau']:.4f}) — certified "
                      f"with probability ≥ {1 - c['delta']:g} (LTT over {c['n_certified']} passing points, N = "
                      f"{c['n_select']} selection queries); on them accuracy {c['accuracy']:.3f}, mean cost {c['cost']:.3f}",
                      highlight=False)
    else:
        out = route_query(cfg, _home(home, create=False), question, list(choice) if choice else None, lam, a, distance_m, benchmark, seed)
    verdict = "ACCEPT locally on " + out["models"][0]["model_id"] if out["accept_local"] else f"DEFER to {out['chosen_model']}"
    console.print(Text(verdict, style="bold"), f" (score s = {out['score']:.4f}, τ*(λ={lam:g}; α={a:g}) = {out['tau']:.4f}, "
                  f"d = {out['distance_m']:.1f} m, {out['prompt_tokens']} prompt tokens)", highlight=False)
    console.print(risk_line(out, a), highlight=False, markup=False)
    table = Table(title=f"teacher utilities û = p − λ·c (labels {out['label_source']}, states {out['threshold_dist_id']})")
    for col in ("model", "p(correct)", "norm. cost", "latency s", "energy J", "utility"):
        table.add_column(col, justify="right")
    for m in out["models"]:
        mark = " ◀" if m["model_id"] == out["chosen_model"] else ""
        table.add_row(m["model_id"] + mark, f"{m['p_correct']:.3f}", f"{m['cost_norm']:.3f}", f"{m['latency_s']:.3f}",
                      f"{m['energy_j']:.2f}", f"{m['utility']:+.3f}")
    console.print(table)


def risk_line(out: dict, alpha: float) -> str:
    """What the threshold's α bounds, in words (issue 26): the rule and the risk it controls."""
    from cr2.crc import RULE_CATALOGUE

    rule = out.get("rule", "crc")
    if not out.get("risk"):
        return f"rule {rule}: uncalibrated, no risk is bounded"
    promise = RULE_CATALOGUE[rule].promise if rule in RULE_CATALOGUE else ""
    return (f"rule {rule}: α = {alpha:g} bounds the {out['risk_display']} risk ({out['risk']}) — {promise}"
            + ("; this is agreement with the teacher, not the error rate of local answers"
               if out["risk"] == "teacher-disagreement" else ""))


@app.command()
@friendly
def guarantees(resplits: Optional[int] = typer.Option(None, "--resplits", help="re-splits of val + test "
                                                      "(default: calibration.n_resplits)"),
               seed: Optional[int] = typer.Option(None, help="seed of the re-splits (default: config seed)"),
               config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Check every calibration rule's promise over random re-splits of val + test; store it (view v_guarantees)."""
    from cr2.config import load_config
    from tasks.guarantees import check_guarantees
    from warehouse.db import Warehouse

    h = _home(home)
    out = check_guarantees.fn(load_config(config), str(h), resplits, seed)
    print_guarantees(h, out["run_id"], out["source"])


def print_guarantees(home: Path, run_id: str, source: str) -> None:
    """The promises of one validity run (v_guarantees): worst cell per check against its bound, ± MC SE."""
    import pandas as pd

    from warehouse.db import Warehouse

    with Warehouse(home, read_only=True) as wh:
        v = wh.df("SELECT * FROM v_guarantees WHERE run_id = ? AND bound IS NOT NULL ORDER BY check_name, \"group\", alpha",
                  [run_id])
    from cr2.crc import RULE_CATALOGUE, rule_risk

    def risk_of(rule: str) -> str:  # issue 26: the risk each rule's α bounds
        base = rule.removeprefix("mondrian-")
        r = rule_risk(base) if base in RULE_CATALOGUE else None
        return r.display if r is not None else ("accuracy / cost target" if rule.startswith("target") else "")

    table = Table(title=f"guarantees run {run_id} ({source}): worst cell per check, ± Monte-Carlo SE")
    for col in ("check", "rule", "risk bounded", "α / target", "group", "worst", "± SE", "bound", "holds (3 SE)"):
        table.add_column(col, justify="right")
    for r in v.itertuples():
        at = f"{r.alpha:g}" if pd.notna(r.alpha) else (f"target {r.target:g}" if pd.notna(r.target) else "")
        table.add_row(r.check_name, r.rule, risk_of(r.rule), at, r.group if isinstance(r.group, str) else "all", f"{r.worst_value:.4f}",
                      f"{r.se_at_worst:.4f}" if pd.notna(r.se_at_worst) else "", f"{r.bound:g}",
                      "yes" if r.holds else "NO")
    console.print(table)


@app.command()
@friendly
def run(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Run the whole pipeline on the configured data (one flow, one process)."""
    from flows.run import run_flow

    h = _home(home)
    t0 = time.perf_counter()
    summary = run_flow(config_path=str(config) if config else None, home=str(h))
    print_ingest_summary(summary["ingest"])
    if "prepare" in summary:
        print_prepare_steps(summary["prepare"])
        print_model_summary(h, config)
    if "train" in summary:
        print_train(summary["train"])
    if "calibrate" in summary:
        print_calibrate(summary["calibrate"])
    if "evaluate" in summary:
        print_operating_points(h, config, summary["evaluate"])
        if "baselines" in summary:
            print_baselines(h, summary["baselines"], summary["evaluate"])
    console.print(f"\ncr2 run finished in {time.perf_counter() - t0:.1f} s")
    console.print(f"warehouse: {h / 'cr2.duckdb'}")
    if summary.get("report"):
        rep = summary["report"]
        note = "  (SIMULATED labels — see the banner)" if rep.get("labels_simulated") else "  (see the labels banner)"
        console.print(f"report:    {rep['path']}{note}", highlight=False)


@app.command()
@friendly
def simcheck(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt,
             full: bool = typer.Option(False, "--full", help="all 12,032 MMLU-Pro questions instead of the stable "
                                       "subsample simcheck.n_questions (embedding them all takes long on a CPU)"),
             structure_only: bool = typer.Option(False, "--structure-only", help="skip the routing part (no router "
                                                 "is fitted)")) -> None:
    """Sim-to-real check: measured MMLU-Pro labels vs the simulators on the same questions (docs/labels.md)."""
    from flows.simcheck import simcheck_flow

    h = _home(home)
    t0 = time.perf_counter()
    out = simcheck_flow(config_path=str(config) if config else None, home=str(h), full=full,
                        routing=not structure_only)
    print_simcheck(h, out)
    console.print(f"\ncr2 simcheck finished in {time.perf_counter() - t0:.1f} s"
                  f" ({'cached' if out.get('cached') else 'computed'}); run {out['run_id']}")
    console.print(f"warehouse: {h / 'cr2.duckdb'} (view v_simcheck)\nreport:    {out['report']}", highlight=False)


def print_simcheck(home: Path, out: dict) -> None:
    from warehouse.db import Warehouse

    with Warehouse(home, read_only=True) as wh:
        df = wh.df("""SELECT source, statistic, model, other, measured, mean, q05, q95, tolerance, meets_target
                      FROM v_simcheck WHERE run_id = ? AND tolerance IS NOT NULL
                      ORDER BY source DESC, statistic, model, other""", [out["run_id"]])
        sav = wh.df("""SELECT source, count(*) AS n, sum(meets_target::INT) AS same_sign FROM v_simcheck
                       WHERE run_id = ? AND statistic = 'saving_vs_knn_pct' GROUP BY source ORDER BY source DESC""",
                    [out["run_id"]])
    fit = out.get("fit", {})
    console.print(f"MMLU-Pro questions: {out['n_questions']:,}; fresh v2 fit: " +
                  ", ".join(f"{k} = {v}" for k, v in fit.items()), highlight=False)
    t = Table(title="measured vs simulated labels (mean and 5–95 % over simulator seeds)")
    for c in ("source", "statistic", "pair", "measured", "simulated", "band", "target", "ok"):
        t.add_column(c)
    for r in df.itertuples():
        t.add_row(r.source, r.statistic, f"{r.model}{' ~ ' + r.other if r.other else ''}", f"{r.measured:.3f}",
                  f"{r.mean:.3f}", f"[{r.q05:.3f}, {r.q95:.3f}]", f"±{r.tolerance:g}", "yes" if r.meets_target else "NO")
    console.print(t)
    for r in sav.itertuples():
        console.print(f"{r.source}: fixed-accuracy saving vs KNN has the measured sign at {int(r.same_sign or 0)} of "
                      f"{r.n} (router, target) points both label sets reach", highlight=False)


def print_ingest_summary(summary: dict) -> None:
    state = " — cached" if summary.get("cached") else ""
    table = Table(title=f"queries per benchmark (prompt tokens: {summary['tokenizer']}){state}")
    table.add_column("benchmark")
    table.add_column("queries", justify="right")
    table.add_column("mean prompt tokens", justify="right")
    total = 0
    for b, row in summary["benchmarks"].items():
        table.add_row(b, f"{row['queries']:,}", f"{row['mean_prompt_tokens']:.1f}")
        total += row["queries"]
    table.add_row("all", f"{total:,}", "")
    console.print(table)


def print_prepare_steps(summary: dict) -> None:
    parts = [f"{name}: {'cached' if step.get('cached') else 'computed'}" for name, step in summary.items()]
    emb = summary.get("embeddings", {})
    if emb and not emb.get("cached"):
        parts[0] += f" ({emb['embedded']:,} embedded)"
    console.print("prepare — " + "; ".join(parts), highlight=False)
    dearer = summary.get("costs", {}).get("device_dearer_share")
    if dearer:  # the paper's two-stage rule assumes the device model is never dearer than an edge model
        console.print(f"device model dearer than the cheapest edge model on {100 * dearer['estimated']:.1f} % of "
                      f"(query, state) rows under the pre-execution estimate ĉ (routing), "
                      f"{100 * dearer['realised']:.1f} % under the realised cost (v_cost_assumptions)", highlight=False)


def _label_note(wh, source: str) -> str:
    """'SIMULATED labels (…), not measured' / 'MEASURED labels (…) from <repository> @ <commit>' for a table title."""
    from cr2.labels import label_note
    from warehouse.labels import label_origin

    return label_note(source, label_origin(wh, source))


def print_model_summary(home: Path, config_path: Optional[Path]) -> None:
    """Per benchmark: queries, accuracy and mean normalised cost per model, under the configured labels and states."""
    from cr2.config import load_config
    from warehouse.db import Warehouse

    cfg = load_config(config_path)
    with Warehouse(home, read_only=True) as wh:
        df = wh.df("SELECT * FROM model_summary WHERE label_source = ? AND dist_id = ? ORDER BY benchmark, model_position",
                   [cfg.labels.source, cfg.channel.distribution.dist_id])
        note = _label_note(wh, cfg.labels.source)
    if df.empty:
        return
    table = Table(title=f"{note}; states: {cfg.channel.distribution.dist_id}")
    models = list(dict.fromkeys(df["model_id"]))
    table.add_column("benchmark")
    table.add_column("queries", justify="right")
    for m in models:
        table.add_column(f"{m}\nacc / cost", justify="right")
    for b, g in df.groupby("benchmark", sort=True):
        g = g.set_index("model_id")
        table.add_row(b, f"{int(g['queries'].iloc[0]):,}",
                      *[f"{100 * g.at[m, 'accuracy']:.1f}% / {g.at[m, 'mean_cost_norm']:.3f}" for m in models])
    console.print(table)


def print_train(summary: dict) -> None:
    state = "cached" if summary.get("cached") else "trained"
    for kind in ("teacher", "gate"):
        a = summary[kind]
        console.print(f"{kind}: {a['params']:,} parameters, {a['flops']:,} FLOPs/query, fingerprint {a['fingerprint']}, "
                      f"fit {a['fit_seconds']:.1f} s (best epoch {a['best_epoch']}) ({state})", highlight=False)


def print_calibrate(summary: dict) -> None:
    state = "cached" if summary.get("cached") else "calibrated"
    console.print(f"thresholds v{summary['version']}: {summary['n_lam']} λ × {summary['n_alpha']} α on N_calib = "
                  f"{summary['n_calib']:,} val queries (states {summary['dist_id']}, labels {summary['label_source']}) "
                  f"({state})", highlight=False)


def print_operating_points(home: Path, config_path: Optional[Path], evaluated: dict, lams=(0.5, 2.0, 8.0)) -> None:
    """CR² on the test split at the default α for a few λ: risk, local rate, accuracy, cost."""
    from cr2.config import load_config
    from warehouse.db import Warehouse

    cfg = load_config(config_path)
    alpha = cfg.grids.default_alpha
    with Warehouse(home, read_only=True) as wh:
        df = wh.df("SELECT * FROM operating_points WHERE run_id = ? AND method = 'cr2' AND benchmark = 'all' "
                   "AND abs(alpha - ?) < 1e-12 ORDER BY lam", [evaluated["run_id"], alpha])
        note = _label_note(wh, evaluated["label_source"])
    df = df[[any(abs(v - lam) < 1e-9 for lam in lams) for v in df["lam"]]]
    # risk, accuracy, cost and local rate on the paper's test set (the queries some model solves); risk_all over
    # every test query, the population CRC's guarantee is stated for (issue 16)
    table = Table(title=f"CR² on test, α = {alpha:g} (risk, local rate, accuracy, cost over the "
                        f"{evaluated['n_evaluable']:,} test queries some model solves; risk also over all "
                        f"{evaluated['n_test']:,}); {note}")
    # issue 26: the risk α bounds (teacher disagreement for the paper's rule) beside the realised risks on real labels
    for col in ("λ", "teacher risk", "…all rows", "oracle", "avoidable", "local acc.", "local", "accuracy", "cost"):
        table.add_column(col, justify="right")
    for r in df.itertuples():
        table.add_row(f"{r.lam:g}", f"{r.risk:.4f}", f"{r.risk_all:.4f}", f"{r.oracle_risk_all:.4f}",
                      f"{r.avoidable_risk_all:.4f}", "–" if r.local_accuracy != r.local_accuracy else f"{100 * r.local_accuracy:.1f}%",
                      f"{100 * r.local_rate:.1f}%", f"{100 * r.accuracy:.1f}%", f"{r.cost:.3f}")
    console.print(table)
    console.print("α bounds the risk of the calibration rule (calibration.rule; `crc`: teacher risk = teacher "
                  "disagreement, the paper's); oracle = oracle disagreement on the real test labels, avoidable = "
                  "answered wrongly on the device where an edge model was right, both over all test rows; local acc. "
                  "= the device's accuracy on what it accepted (docs/guarantees.md)", highlight=False)


def print_baselines(home: Path, baselines: dict, evaluated: dict) -> None:
    """Each baseline's size, fit time and test accuracy/cost at λ = 0 and λ = 2."""
    from warehouse.db import Warehouse

    with Warehouse(home, read_only=True) as wh:
        df = wh.df("SELECT method, lam, accuracy, cost FROM operating_points WHERE run_id = ? AND benchmark = 'all' "
                   "AND alpha IS NULL AND lam IN (0.0, 2.0)", [evaluated["run_id"]])
        note = _label_note(wh, evaluated["label_source"])
    at = {(r.method, r.lam): r for r in df.itertuples()}
    state = "cached" if baselines.get("cached") else "fitted"
    table = Table(title=f"baselines ({state}) on test; {note}")
    for col in ("router", "params", "FLOPs/query", "fit s", "acc λ=0", "acc / cost λ=2"):
        table.add_column(col, justify="right")
    for name, b in baselines["routers"].items():
        a0, a2 = at.get((name, 0.0)), at.get((name, 2.0))
        table.add_row(name, f"{b['params']:,}", f"{b['flops']:,}", f"{b['fit_seconds']:.1f}",
                      f"{100 * a0.accuracy:.1f}%" if a0 else "–",
                      f"{100 * a2.accuracy:.1f}% / {a2.cost:.3f}" if a2 else "–")
    console.print(table)


# ------------------------------------------------------------------ labels
@labels_app.command("import")
@friendly
def labels_import(file: Path = typer.Argument(..., help="long-form Parquet or CSV: query_id, model, correct[, output_tokens]"),
                  source: str = typer.Option(..., "--source", help="name of the imported label source"),
                  replace: bool = typer.Option(False, "--replace", help="overwrite an existing source of that name"),
                  home: Optional[Path] = HomeOpt) -> None:
    """Import labels produced elsewhere; nothing is written unless every row is valid."""
    from tasks.labels_import import import_labels

    out = import_labels(_home(home), file, source, replace)
    per = ", ".join(f"{m} {n:,}" for m, n in out["per_model"].items())
    console.print(f"imported {out['rows']:,} labels ({out['queries']:,} queries; {per}) as source '{source}'. "
                  f"Train on them with `labels: {{source: {source}}}` in your config.", highlight=False)


@labels_app.command("list")
@friendly
def labels_list(home: Optional[Path] = HomeOpt) -> None:
    """Label sources in the warehouse, with rows, models and how they were produced."""
    from warehouse.db import Warehouse

    with Warehouse(_home(home, create=False), read_only=True) as wh:
        df = wh.df("""SELECT l.source, count(*) AS rows, count(DISTINCT l.model_id) AS models,
                             count(DISTINCT l.query_id) AS queries, avg(l.correct::INT) AS accuracy,
                             string_agg(DISTINCT r.backend, ',') AS backend
                      FROM labels l LEFT JOIN label_runs r USING (run_id) GROUP BY l.source ORDER BY l.source""")
    table = Table(title="label sources (simulated-* sources are NOT measured)")
    for col in ("source", "rows", "models", "queries", "accuracy", "backend"):
        table.add_column(col)
    for r in df.itertuples():
        table.add_row(r.source, f"{r.rows:,}", str(r.models), f"{r.queries:,}", f"{100 * r.accuracy:.1f}%", str(r.backend))
    console.print(table)


# ------------------------------------------------------------------ warehouse access
@app.command()
@friendly
def sql(query: str = typer.Argument(..., help="one read-only query: SELECT / WITH / FROM / DESCRIBE / SHOW / SUMMARIZE / "
                                             "EXPLAIN"), home: Optional[Path] = HomeOpt,
        limit: int = typer.Option(50, min=0, help="rows to print"),
        timeout: float = typer.Option(60.0, "--timeout", help="stop the query after this many seconds "
                                      "(writers waiting for the warehouse wait longer: $CR2_LOCK_WAIT_S, 300 s)")) -> None:
    """Run one read-only SQL query on the warehouse and print the result as a table.

    The connection cannot touch files, the network or extensions (it can read the warehouse, nothing else),
    runs one statement, and is stopped after --timeout seconds."""
    from warehouse.db import open_user_query

    with open_user_query(_home(home, create=False)) as wh:
        df = wh.user_query(query, timeout_s=timeout)
    table = Table(show_lines=False)
    for col in df.columns:
        table.add_column(str(col))
    for row in df.head(limit).itertuples(index=False):
        table.add_row(*[_fmt(v) for v in row])
    console.print(table)
    if len(df) > limit:
        console.print(f"… {len(df) - limit} more rows (use --limit)")



def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


@app.command()
@friendly
def export(table: str = typer.Argument(..., help="table or view name"), home: Optional[Path] = HomeOpt,
           out: Optional[Path] = typer.Option(None, help="output folder (default: <home>/export)")) -> None:
    """Write a table or view to <home>/export/TABLE.parquet."""
    from warehouse.db import Warehouse

    with Warehouse(_home(home, create=False), read_only=True) as wh:
        path = wh.export(table, out)
    console.print(f"wrote {path}")


from cr2_cli.label import label_command  # noqa: E402  (imports cr2_cli.main lazily: no cycle)

app.command("label")(friendly(label_command))

from cr2_cli.study_seeds import seeds_command  # noqa: E402

study_app.command("seeds")(friendly(seeds_command))

from cr2_cli.study_premise import premise_command  # noqa: E402

study_app.command("premise")(friendly(premise_command))

from cr2_cli.study_pools import diagnostics_command, pools_command, simcheck_command  # noqa: E402

study_app.command("pools")(friendly(pools_command))
study_app.command("diagnostics")(friendly(diagnostics_command))
study_app.command("simcheck")(friendly(simcheck_command))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
