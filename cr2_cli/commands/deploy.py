"""`cr2 route | serve | export-gate`: the deployed router — one query, an HTTP server, the device export."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from cr2_cli.console import console, friendly
from cr2_cli.options import ConfigOpt, HomeOpt, RouterOpt, RuleOpt, deployed, home_dir


@friendly
def route(question: str = typer.Argument(..., help="the query text"),
          lam: float = typer.Option(1.0, "--lam", help="cost weight λ (must be on the calibrated grid)"),
          alpha: Optional[float] = typer.Option(None, "--alpha", help="risk level α (default: grids.default_alpha)"),
          distance_m: Optional[float] = typer.Option(None, "--distance-m", help="UE–edge distance, m (mean fading); "
                                                     "default: sample a state from the configured distribution"),
          choice: Optional[list[str]] = typer.Option(None, "--choice", help="a multiple-choice option (repeatable, A, B, …)"),
          benchmark: Optional[str] = typer.Option(None, help="benchmark whose default output length L_out is assumed "
                                                  "(default: the config's first enabled benchmark)"),
          seed: int = typer.Option(0, help="seed of the sampled channel state"),
          target_accuracy: Optional[float] = typer.Option(None, "--target-accuracy", help="instead of λ: the cheapest "
                                                          "(λ, α) certified to reach this accuracy (docs/guarantees.md)"),
          budget: Optional[float] = typer.Option(None, "--budget", help="instead of λ: the most accurate (λ, α) certified "
                                                 "to keep the mean normalised cost ≤ this budget"),
          router: str = RouterOpt, rule: Optional[str] = RuleOpt,
          config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Route one query with the deployed router and its threshold table: accept locally or defer to the edge."""
    from cr2_cli.render import print_route, print_target_choice
    from cr2.config import load_config
    from cr2_cli.online import route_query

    cfg = load_config(config)
    name = deployed(cfg, router, rule)
    a = cfg.grids.default_alpha if alpha is None else alpha
    if target_accuracy is not None or budget is not None:  # operate by target: CR²'s operating points
        if name != "cr2":
            raise typer.BadParameter(f"--target-accuracy/--budget choose CR²'s operating points; route '{name}' "
                                     "with --lam and --alpha on its calibrated grid")
        from cr2_cli.online import route_by_target

        out = route_by_target(cfg, home_dir(home, create=False), question, list(choice) if choice else None,
                              target_accuracy, budget, distance_m, benchmark, seed)
        lam, a = out["lam"], out["alpha"]
        print_target_choice(out)
    else:
        out = route_query(cfg, home_dir(home, create=False), question, list(choice) if choice else None, lam, a,
                          distance_m, benchmark, seed, router=name)
    print_route(out, lam, a)


@friendly
def serve(host: str = typer.Option("127.0.0.1", help="interface to listen on (beyond loopback only with a bearer "
                                   "token in $CR2_SERVE_TOKEN)"),
          port: int = typer.Option(8080, min=1, max=65535, help="TCP port"),
          router: str = RouterOpt, rule: Optional[str] = RuleOpt,
          config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Serve the deployed router over HTTP: /health, /route and OpenAI-compatible /v1/chat/completions."""
    import uvicorn

    from cr2.config import load_config
    from cr2_cli.serve import bind_socket, create_app, server_config

    cfg = load_config(config)
    name = deployed(cfg, router, rule)
    token = os.environ.get(cfg.serving.token_env) or None
    sock = bind_socket(host, port)  # a port in use fails here, before the deployment and encoder are loaded
    try:
        app_ = create_app(cfg, str(home_dir(home, create=False)), token=token, bind_host=host, router_name=name)
    except BaseException:
        sock.close()
        raise
    auth = f"bearer token from ${cfg.serving.token_env}" if token else "no token (loopback only)"
    console.print(f"cr2 serving {name} on http://{host}:{port} (docs at /docs; {auth})", highlight=False)
    uvicorn.Server(server_config(app_, cfg.serving, host=host, port=port)).run(sockets=[sock])


@friendly
def export_gate(out: Path = typer.Argument(..., help="output folder for the export and its manifest.json"),
                version: Optional[int] = typer.Option(None, help="threshold table version (default: newest)"),
                target_accuracy: Optional[list[float]] = typer.Option(None, "--target-accuracy", help="also ship the "
                                                                      "operating point certified for this accuracy "
                                                                      "target (repeatable; newest version only)"),
                budget: Optional[list[float]] = typer.Option(None, "--budget", help="also ship the operating point "
                                                             "certified for this mean-cost budget (repeatable)"),
                router: str = RouterOpt, rule: Optional[str] = RuleOpt,
                config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Export the deployed router for the device runtime (cr2.deploy.runtime): CR²'s gate (ONNX) and threshold table, or a
    certified router's state, table and cost inputs (--router knn --rule crc-avoidable)."""
    from cr2.config import load_config
    from cr2_cli.online import load_deployed_router

    cfg = load_config(config)
    name = deployed(cfg, router, rule)
    if name != "cr2":
        if target_accuracy or budget:
            raise typer.BadParameter(f"--target-accuracy/--budget ship CR²'s operating points; '{name}' ships its "
                                     "calibrated λ × α table")
        return _export_certified(cfg, home_dir(home, create=False), out, version, name)
    router_, _ = load_deployed_router(cfg, home_dir(home, create=False), version)
    table = router_.threshold_table_
    targets = None
    if target_accuracy or budget:  # certified target-mode points, computed on the host's val split
        from cr2_cli.online import load_online_router

        if version is not None:
            raise typer.BadParameter("--target-accuracy/--budget use the newest threshold version; drop --version")
        online = load_online_router(cfg, home_dir(home))
        targets = [online.choose_target(t, None) for t in target_accuracy or []]
        targets += [online.choose_target(None, b) for b in budget or []]
    from cr2.deploy.export import export_router

    m = export_router(router_, out, targets=targets)
    console.print(f"exported gate {table.gate_fingerprint} with thresholds of {table.dist_id} "
                  f"({len(table.lams)} λ × {len(table.alphas)} α) to {m['dir']}; ONNX parity max |Δs| = "
                  f"{m['parity']['max_abs_score_diff']:.2e}", highlight=False)


def _export_certified(cfg, home: Path, out: Path, version: Optional[int], name: str) -> None:
    """`cr2 export-gate --router R --rule X`: the certified router's state, table, cost inputs and manifest."""
    from cr2.deploy.deployment import decision_cost_inputs, deployed_router
    from cr2.deploy.certified_export import export_certified
    from cr2_warehouse.deployment import read_deployment

    deployment = read_deployment(home, cfg, version, name)
    m = export_certified(deployed_router(cfg, deployment), out, decision_cost_inputs(cfg, deployment))
    table = deployment.table
    console.print(f"exported {name} (thresholds version {deployment.version}, {table.dist_id}, {len(table.lams)} λ × "
                  f"{len(table.alphas)} α) to {m['dir']}: {m['bytes_total']:,} bytes; host parity: "
                  f"{m['parity']['n_decisions_differing']} of {m['parity']['n_probe']} probe queries × "
                  f"{m['parity']['n_lam'] * m['parity']['n_alpha']} operating points decided differently",
                  highlight=False)
