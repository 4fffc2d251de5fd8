"""``attnflow report DIR``: one self-contained HTML page of a directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import app
from .common import check_output_file, size
from .errors import fail, reported
from .kinds import detect, refuse

#: the kinds ``attnflow report`` writes a page for (attnflow.report.collect)
REPORTED = ("particle run", "sweep", "study", "reproduction", "probe")


@app.command()
def report(
    directory: Annotated[Path, typer.Argument(help="A run, sweep, study, reproduction or probe directory.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="HTML file (default DIR/report.html).")
    ] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per cloud frame.")] = 400,
    max_frames: Annotated[int, typer.Option("--max-frames", min=1, help="Frames of the token cloud.")] = 60,
    max_points: Annotated[int, typer.Option("--max-points", min=2, help="Times per curve.")] = 400,
    max_runs: Annotated[int, typer.Option("--max-runs", min=1, help="Runs drawn (sweeps and studies).")] = 12,
    theory_checks: Annotated[
        Path | None,
        typer.Option("--theory-checks", help="Markdown page of verdicts (default: ../../theory_checks.md)."),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Load it in headless Chromium: load time, console errors.")
    ] = False,
    plotly: Annotated[
        str,
        typer.Option(
            "--plotly",
            help="inline: plotly.js in the page (4.6 MiB, one file); shared: one plotly-VERSION.min.js "
            "next to the page, shared by the pages written there (no network either way).",
        ),
    ] = "inline",
) -> None:
    """One self-contained HTML page of a directory: config, ledger and G^2 with bands, tables, verdicts,
    figures, a 3-D token cloud with a time slider (thinned, as the page states), links to the data."""
    with reported(f"cannot report on {directory}"):
        kind = detect(directory)  # before the output path: a missing directory is named as such
        if kind not in REPORTED:
            raise refuse(kind, "report", directory)
        if kind in ("study", "reproduction"):
            from .study import check_study_file

            check_study_file(directory)
        if output is not None:
            check_output_file(output, "--output")
        if plotly not in ("inline", "shared"):
            raise fail(f"--plotly must be inline or shared: got {plotly!r}", 2)
        if theory_checks is not None and not theory_checks.is_file():
            what = "is a directory" if theory_checks.is_dir() else "does not exist"
            raise fail(
                f"--theory-checks {theory_checks} {what}; give the Markdown page of verdicts "
                "(docs/theory_checks.md) or leave the option out",
                2,
            )
        from ..report import ReportLimits, write_report

        limits = ReportLimits(
            max_tokens=max_tokens, max_frames=max_frames, max_points=max_points, max_runs=max_runs
        )
        path = write_report(directory, output, limits=limits, theory_checks=theory_checks, plotly=plotly)
        typer.echo(f"{path} ({size(path.stat().st_size)})")
        if check:
            from ..report.browser import Browser, BrowserError

            try:
                with Browser() as b:
                    load = b.open(path)
                    errors = b.console_errors
            except BrowserError as exc:
                raise fail(f"--check: {exc}", 1) from None
            typer.echo(f"loaded in headless Chromium in {load:.2f} s, {len(errors)} console errors")
            for e in errors:
                typer.echo(f"  {e}", err=True)
            if errors:
                raise typer.Exit(1)
