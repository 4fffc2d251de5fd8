"""``attnflow run`` (a particle run, or a PDE run for a ``model: pde`` config) and ``attnflow sweep``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import app
from .common import DeviceOption, SchedulerOption, check_out_dir, size, with_device_cli
from .errors import fail, for_cli, reported


@app.command()
def run(
    config: Annotated[Path, typer.Argument(help="YAML config file (see `attnflow config example`).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory.")],
    resume: Annotated[
        bool,
        typer.Option(
            "--resume/--no-resume", help="Continue an interrupted run of the same config (or start afresh)."
        ),
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
    device: DeviceOption = None,
) -> None:
    """Run one experiment into a run directory (config.yaml, meta.json, data.zarr, checkpoint.pt)."""

    def failed_status() -> bool:
        from ..experiments.store import read_meta

        try:
            return read_meta(out).get("status") == "failed"
        except Exception:  # noqa: BLE001 - only decides whether to point to meta.json
            return False

    def where(exc: BaseException) -> str:
        return f" (traceback in {out / 'meta.json'})" if failed_status() else ""

    # a ValueError inside a run that started is a failure of the run (exit 1, with where its traceback is)
    with reported("the run failed", values_are_input=False, note=where):
        check_out_dir(out)
        from ..experiments.pde_runs import is_pde_config

        if is_pde_config(config):  # a density run of the Transformer PDE (``model: pde``)
            from .pde import pde_run

            with reported(f"the PDE run {out} failed"):  # its ValueErrors are config checks: exit 2
                pde_run(config, out, resume, quiet)
            return
        from ..experiments.config import ConfigError, load_config
        from ..experiments.store import run_experiment, run_info

        cfg = with_device_cli(load_config(config), device)
        try:
            run_experiment(cfg, out, resume=resume, progress=not quiet)
        except ConfigError as exc:  # valid on its own but cannot be built (a file missing, d of file tokens)
            recorded = f" (recorded in {out / 'meta.json'})" if failed_status() else ""
            raise fail(f"{exc}{recorded}", 2) from None
        if not quiet:
            info = run_info(out)
            typer.echo(f"done: {out} ({info['records']} records, {size(sum(info['sizes'].values()))})")


@app.command()
def sweep(
    config: Annotated[Path, typer.Argument(help="Base YAML config file.")],
    grid: Annotated[
        list[str], typer.Option("--grid", "-g", help="key=v1,v2,... (dotted key, YAML values); repeatable.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Sweep directory.")],
    scheduler: SchedulerOption = None,
    workers: Annotated[
        int | None, typer.Option("--workers", "-j", min=1, help="Local worker processes.")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume/--no-resume", help="Skip finished tasks of the same sweep.")
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Run the cartesian product of the grids over a base config, one run directory per task."""
    with reported(f"the sweep {out} failed"):
        check_out_dir(out)
        from ..experiments.config import load_config
        from ..experiments.sweep import parse_grid, run_sweep

        cfg = load_config(config)
        parsed = parse_grid(grid)
        summary = run_sweep(
            cfg, parsed, out, scheduler=scheduler, workers=workers, resume=resume, progress=not quiet
        )
    failed = {k: t for k, t in summary["tasks"].items() if t["status"] == "failed"}
    if not quiet:
        skipped = sum(bool(t.get("skipped")) for t in summary["tasks"].values())
        typer.echo(
            f"sweep {out}: {summary['done']} done ({skipped} already finished before), {len(failed)} failed, "
            f"{len(summary['tasks'])} tasks"
        )
    for name, t in failed.items():
        typer.echo(for_cli(f"failed: {name} {t['params']}: {t.get('error')}"), err=True)
    if failed:
        raise typer.Exit(1)
