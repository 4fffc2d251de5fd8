"""``attnflow train CONFIG --out DIR``: train an attention flow's heads (resumable)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import app
from .common import check_out_dir
from .errors import fail, reported


@app.command()
def train(
    config: Annotated[
        Path | None, typer.Argument(help="Training YAML config (see `attnflow train --example`).")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Training run directory.")] = None,
    example: Annotated[bool, typer.Option("--example", help="Print an example training config.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Train an attention flow's heads with AdamW; rerun the same command to resume an interrupted run.

    Writes checkpoint.pt, history.json, summary.json, head_law.npz, clouds.npz, landscape.npz and
    figures/ (loss, token clouds, head law, risk landscape) into the run directory.
    """

    def diverged(exc: BaseException) -> str:
        from ..training.trainer import NonFiniteLossError

        return (
            f" (run directory {out}: meta.json says 'diverged')"
            if isinstance(exc, NonFiniteLossError)
            else ""
        )

    with reported(f"the training run {out} failed", values_are_input=False, note=diverged):
        if example:
            from ..experiments.training_config import EXAMPLE_TRAINING_YAML

            typer.echo(EXAMPLE_TRAINING_YAML, nl=False)
            return
        if config is None or out is None:
            raise fail("attnflow train needs a CONFIG and --out DIR (or --example)", 2)
        check_out_dir(out)
        from ..experiments.errors import ConfigError
        from ..experiments.training_run import run_training
        from ..plot.training import training_figures

        try:
            summary = run_training(config, out, progress=not quiet, figures=training_figures)
        except ConfigError as exc:  # the shared config checker names every config an experiment config
            text = str(exc).replace("invalid experiment config", "invalid training config", 1)
            raise fail(text, 2) from None
    if not quiet:
        final = summary["final"]
        metrics = ", ".join(f"{k} {v:.4g}" for k, v in final.items() if k != "step")
        typer.echo(f"done: {out} (step {summary['steps']}: {metrics})")
