"""``attnflow config example`` and ``attnflow config check``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import config_app
from .errors import reported


@config_app.command("example")
def config_example() -> None:
    """Print a documented example config (YAML with comments)."""
    from ..experiments.config import EXAMPLE_YAML

    typer.echo(EXAMPLE_YAML, nl=False)


@config_app.command("check")
def config_check(config: Annotated[Path, typer.Argument(help="YAML config file.")]) -> None:
    """Validate a config file and print it with every default filled in."""
    with reported(f"cannot check {config}"):
        from ..experiments.config import dump_config, load_config

        cfg = load_config(config)
        typer.echo(dump_config(cfg), nl=False)
