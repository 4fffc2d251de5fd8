"""The typer applications of the command line (the root and its groups) and the root's options."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["HELP_STYLE", "app", "config_app", "study_app"]

#: Plain (click) help pages: a flag is shown as a flag (``-q, --quiet``), not with a ``<bool>`` placeholder
#: as typer's rich help pages print it; ``--install-completion`` / ``--show-completion`` add shell
#: completion (docs/cli.md).
HELP_STYLE = {"rich_markup_mode": None}
app = typer.Typer(
    name="attnflow",
    help="Simulate multi-head attention dynamics on the sphere: run experiments, sweeps, plots.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    **HELP_STYLE,
)
config_app = typer.Typer(help="Experiment config files.", no_args_is_help=True, **HELP_STYLE)
app.add_typer(config_app, name="config")
study_app = typer.Typer(
    help="Registered studies: a claim, its runs (resumable, local or Dask), summary.json, table.md, figures.",
    no_args_is_help=True,
    **HELP_STYLE,
)
app.add_typer(study_app, name="study")


def _print_version(value: bool) -> None:
    if value:
        from .._version import __version__

        typer.echo(f"attnflow {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the attnflow version and exit."
        ),
    ] = False,
) -> None:
    """Simulate multi-head attention dynamics on the sphere: run experiments, sweeps, studies, reports."""
