"""Helpers shared by the commands: sizes, output paths, the ``--device`` and ``--scheduler`` options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .errors import fail

__all__ = [
    "DeviceOption",
    "ResumeOption",
    "SchedulerOption",
    "StudyQuietOption",
    "check_device_cli",
    "check_out_dir",
    "check_output_file",
    "size",
    "with_device_cli",
]

#: the ``--device`` option of run, study run, reproduce and check-edi (checked by :func:`check_device_cli`)
DeviceOption = Annotated[
    str | None, typer.Option("--device", help="cpu, cuda or cuda:N (checked before anything runs).")
]


def _check_scheduler(value: str | None) -> str | None:
    """Refuse a malformed ``local:N`` at the command line (exit status 2), before anything is planned."""
    if value is not None and value.startswith("local:"):
        from ..experiments.sweep import local_cluster_size

        try:
            local_cluster_size(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


#: the ``--scheduler`` option of sweep and study run (the runner connects to it)
SchedulerOption = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        help="Address of a Dask distributed scheduler, or 'local' ('local:N'): a Dask cluster on this "
        "machine for this command, one worker per core (N workers).",
        callback=_check_scheduler,
    ),
]


#: the ``--resume/--no-resume`` option of study run and study run-all
ResumeOption = Annotated[
    bool,
    typer.Option("--resume/--no-resume", help="Reuse finished runs, continue interrupted ones (default)."),
]

#: the ``--quiet`` option of study run and study run-all
StudyQuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines or bars.")]


def size(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def check_output_file(path: Path, option: str) -> None:
    """A file the command will write must have an existing directory (checked before any work)."""
    parent = path.parent
    if not parent.is_dir():
        raise fail(
            f"{option} {path}: the directory {parent} does not exist; create it first or choose another path",
            2,
        )
    if path.is_dir():
        raise fail(f"{option} {path}: this is a directory; give a file name", 2)


def check_out_dir(path: Path, option: str = "--out") -> None:
    """A directory the command will create or reuse: it may not be a file, nor lie under one."""
    if path.exists() and not path.is_dir():
        raise fail(f"{option} {path}: this is a file, not a directory; choose a directory (new or empty)", 2)
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise fail(
                    f"{option} {path}: {parent} is a file, so no directory can be created under it; "
                    "choose another path",
                    2,
                )
            break


def check_device_cli(device: str | None) -> None:
    """Exit with code 2 and the rule when ``--device`` names a device this torch build cannot use."""
    from ..experiments.schema import check_device

    if device is not None:
        try:
            check_device(device)
        except ValueError as exc:
            raise fail(f"--device: {exc}", 2) from None


def with_device_cli(cfg, device: str | None):
    """``cfg`` with ``--device`` applied (checked first)."""
    from ..experiments.schema import with_device

    check_device_cli(device)
    return with_device(cfg, device)
