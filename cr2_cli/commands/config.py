"""`cr2 config show | validate`: the resolved configuration and a validity check of a config file."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cr2_cli.console import console, friendly
from cr2_cli.options import ConfigOpt


@friendly
def config_show(config: Optional[Path] = ConfigOpt) -> None:
    """Print the resolved configuration (state distribution and hardware profile included)."""
    from cr2.config import load_config

    cfg = load_config(config)
    console.print(cfg.to_yaml(), highlight=False, markup=False)
    console.print(f"# config hash: {cfg.section_hash()}", highlight=False, markup=False)


@friendly
def config_validate(file: Path = typer.Argument(..., help="config YAML to check")) -> None:
    """Check a config file; exit 0 when valid."""
    from cr2.config import load_config

    cfg = load_config(file)
    console.print(f"{file}: valid (hash {cfg.section_hash()}, {len(cfg.models)} models, "
                  f"{len(cfg.enabled_benchmarks)} benchmarks, states '{cfg.channel.distribution.name}')", highlight=False)
