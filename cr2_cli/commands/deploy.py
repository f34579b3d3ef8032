"""`cr2 route | serve | export-gate`: the deployed router — one query, an HTTP server, the device export."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from cr2_cli.console import console, friendly
from cr2_cli.options import ConfigOpt, HomeOpt, home_dir
from cr2_cli.render import print_route, print_target_choice


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

        out = route_by_target(cfg, home_dir(home, create=False), question, list(choice) if choice else None,
                              target_accuracy, budget, distance_m, benchmark, seed)
        lam, a = out["lam"], out["alpha"]
        print_target_choice(out)
    else:
        out = route_query(cfg, home_dir(home, create=False), question, list(choice) if choice else None, lam, a,
                          distance_m, benchmark, seed)
    print_route(out, lam, a)


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
    app_ = create_app(cfg, str(home_dir(home, create=False)), token=token, bind_host=host)
    sock = bind_socket(host, port)  # a port in use fails here, before 'serving' is printed
    auth = f"bearer token from ${cfg.serving.token_env}" if token else "no token (loopback only)"
    console.print(f"cr2 serving on http://{host}:{port} (docs at /docs; {auth})", highlight=False)
    uvicorn.Server(server_config(app_, cfg.serving, host=host, port=port)).run(sockets=[sock])


@friendly
def export_gate(out: Path = typer.Argument(..., help="output folder for gate.onnx, thresholds.json, manifest.json"),
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

    router, _ = load_deployed_router(load_config(config), home_dir(home, create=False), version)
    table = router.threshold_table_
    targets = None
    if target_accuracy or budget:  # issue 21: certified target-mode points, computed on the host's val split
        from cr2_cli.online import OnlineRouter
        from cr2_cli.targets import choose_target

        if version is not None:
            raise typer.BadParameter("--target-accuracy/--budget use the newest threshold version; drop --version")
        online = OnlineRouter.load(load_config(config), home_dir(home))
        targets = [choose_target(online, t, None) for t in target_accuracy or []]
        targets += [choose_target(online, None, b) for b in budget or []]
    m = router.export(out, targets=targets)
    console.print(f"exported gate {table.gate_fingerprint} with thresholds of {table.dist_id} "
                  f"({len(table.lams)} λ × {len(table.alphas)} α) to {m['dir']}; ONNX parity max |Δs| = "
                  f"{m['parity']['max_abs_score_diff']:.2e}", highlight=False)
