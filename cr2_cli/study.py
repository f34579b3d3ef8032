"""`cr2 study …`: studies that re-run the pipeline over cells (seeds, …), one module per command.

Each command lives in its own module (cr2_cli/study_<name>.py) and is registered on `study_app` in
cr2_cli/main.py, so adding a study is one module and one line there.
"""
from __future__ import annotations

import typer

study_app = typer.Typer(no_args_is_help=True, help="Studies over seeds and scenarios (Prefect flows; results in the "
                                                  "warehouse).")
