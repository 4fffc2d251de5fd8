"""``attnflow reproduce NAME``: a published experiment, its figures and its audit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import app
from .common import DeviceOption, check_device_cli, check_out_dir
from .errors import fail, reported
from .study import runs_note


@app.command()
def reproduce(
    name: Annotated[
        str, typer.Argument(help="Reproduction to run, e.g. massucco2026 (Sec. 6 of arXiv 2605.18870).")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory (runs, figures, summary.json).")],
    quick: Annotated[
        bool,
        typer.Option(
            "--quick", help="Same model, fewer paths, fewer tokens and a shorter horizon (minutes)."
        ),
    ] = False,
    resume: Annotated[
        bool,
        typer.Option("--resume/--no-resume", help="Continue interrupted runs (default) or start afresh."),
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    paths: Annotated[int | None, typer.Option("--paths", help="Override the number of paths.")] = None,
    n: Annotated[int | None, typer.Option("--n", help="Override the number of tokens.")] = None,
    t1: Annotated[float | None, typer.Option("--t1", help="Override the final time.")] = None,
    H: Annotated[
        list[int] | None, typer.Option("--H", help="Head counts to run (repeat the option).")
    ] = None,
    device: DeviceOption = None,
) -> None:
    """Reproduce and audit a published experiment: figures 1-3, summary.json and the stored runs.

    The alias of `attnflow study run NAME` (runs one after the other in this process). Overrides
    (--paths, --n, --t1, --H) give a reduced run of the same model; summary.json records them.
    """
    with reported(f"the reproduction {name!r} failed", note=runs_note(out)):
        check_device_cli(device)
        check_out_dir(out)
        from ..experiments.reproduce import available_reproductions

        known = available_reproductions()
        if name not in known and not Path(name).exists():
            raise fail(f"unknown reproduction {name!r}; available: {', '.join(known)}", 2)
        from ..plot.reproduction import plot_all
        from ..studies import massucco2026

        summary = massucco2026.reproduce(
            name,
            out,
            quick=quick,
            resume=resume,
            progress=not quiet,
            figures=plot_all,
            paths=paths,
            n=n,
            t1=t1,
            H=H,
            **({} if device is None else {"device": device}),
        )
    if not quiet:
        wall = summary.get("wall_time_s")
        typer.echo(
            f"done: {out} (summary.json, table.md, fig1-3){'' if wall is None else f' in {wall:.0f} s'}"
        )
