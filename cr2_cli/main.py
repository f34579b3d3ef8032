"""The `cr2` command line: the app and its table of contents.

Each command or command group lives in its own module under cr2_cli/commands/, named after the command
(`cr2 label`: commands/label.py; `cr2 labels …`: commands/labels.py; `cr2 study <name>`: commands/study_<name>.py);
what they print is in cr2_cli/render.py, the consoles and the one-line errors in cr2_cli/console.py, the shared
--config/--home options in cr2_cli/options.py. Adding a command is one module and one line here.
"""
from __future__ import annotations

import typer

from cr2_cli.commands import checks, config, deploy, labels, pipeline, query, recalibrate
from cr2_cli.commands.label import label_command
from cr2_cli.commands.study_pools import diagnostics_command, pools_command, simcheck_command
from cr2_cli.commands.study_level import level_command
from cr2_cli.commands.study_premise import premise_command
from cr2_cli.commands.study_routers import routers_command
from cr2_cli.commands.study_seeds import seeds_command
from cr2_cli.console import friendly

app = typer.Typer(add_completion=False, no_args_is_help=True, help="CR²: cost-aware, risk-controlled device–edge LLM routing.")
config_app = typer.Typer(no_args_is_help=True, help="Show or check configuration files.")
labels_app = typer.Typer(no_args_is_help=True, help="Correctness label sources: list, import.")
study_app = typer.Typer(no_args_is_help=True, help="Studies over seeds and scenarios (Prefect flows; results in the "
                                                  "warehouse).")
app.add_typer(config_app, name="config")
app.add_typer(labels_app, name="labels")
app.add_typer(study_app, name="study")

config_app.command("show")(config.config_show)
config_app.command("validate")(config.config_validate)

app.command()(pipeline.ingest)
app.command()(pipeline.prepare)
app.command()(pipeline.train)
app.command()(pipeline.calibrate)
app.command()(recalibrate.recalibrate)
app.command()(recalibrate.drift)
app.command()(deploy.serve)
app.command("export-gate")(deploy.export_gate)
app.command("results")(query.results)
app.command()(deploy.route)
app.command()(checks.guarantees)
app.command()(pipeline.run)
app.command()(checks.simcheck)

labels_app.command("import")(labels.labels_import)
labels_app.command("list")(labels.labels_list)

app.command()(query.sql)
app.command()(query.export)
app.command("label")(friendly(label_command, flow=True))

study_app.command("seeds")(friendly(seeds_command, flow=True))
study_app.command("premise")(friendly(premise_command, flow=True))
study_app.command("pools")(friendly(pools_command, flow=True))
study_app.command("diagnostics")(friendly(diagnostics_command, flow=True))
study_app.command("simcheck")(friendly(simcheck_command, flow=True))
study_app.command("routers")(friendly(routers_command, flow=True))
study_app.command("level")(friendly(level_command, flow=True))


def check_arguments(args: list[str]) -> None:
    """Every command-line argument is UTF-8 text (cr2.core.boundary.check_text): bytes that are not UTF-8 reach Python
    as surrogate escapes, which no command could print, store or route; refused here, before any command runs."""
    from cr2.core.boundary import check_text
    from cr2.core.errors import InvalidValueError
    from cr2_cli.console import print_error

    for i, arg in enumerate(args, start=1):
        try:
            check_text(arg, f"argument {i}")
        except InvalidValueError as exc:
            print_error(str(exc))
            raise SystemExit(2) from None


def main(argv: list[str] | None = None) -> None:
    import sys

    args = sys.argv[1:] if argv is None else list(argv)
    check_arguments(args)
    app(args=args, prog_name="cr2")


if __name__ == "__main__":
    main()
