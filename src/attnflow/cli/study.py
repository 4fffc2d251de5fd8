"""``attnflow study list | run | show``: the registered studies (and any ``path/file.py:Class``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ._app import study_app
from .common import DeviceOption, SchedulerOption, check_device_cli, check_out_dir
from .errors import fail, reported
from .kinds import detect, refuse

#: files that make a directory one attnflow wrote (a study's, or another kind that `study show` names)
STUDY_MARKS = ("study.json", "tasks.json", "meta.json", "config.yaml", "data.zarr")


def parse_params(items: list[str] | None) -> dict:
    """``["H=[1, 10]", "window=[0.5, 1]"]`` -> ``{"H": [1, 10], "window": [0.5, 1]}`` (YAML values)."""
    import yaml

    from ..experiments.config import load_yaml

    params: dict = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise fail(f"a study parameter must read key=value: got {item!r}; e.g. --set paths=6", 2)
        try:
            params[key.strip()] = load_yaml(value)
        except yaml.YAMLError as exc:
            raise fail(
                f"the value of study parameter {key.strip()!r} is not valid YAML ({exc}): got {value!r}; "
                "quote it or close its brackets, e.g. --set H=[1,10,100]",
                2,
            ) from None
    return params


def runs_note(out: Path):
    """For an unexpected failure of a study: where the runs keep their tracebacks, if there are runs."""

    def note(exc: BaseException) -> str:
        runs = out / "runs"
        if runs.is_dir() and any(runs.iterdir()):
            return (
                f" (the meta.json of each run under {runs} holds its status and traceback; rerun the same "
                "command to resume)"
            )
        return ""

    return note


@study_app.command("list")
def study_list() -> None:
    """The registered studies and the claim each checks."""
    with reported("cannot list the studies"):
        from ..studies import available_studies

        studies = available_studies()
        width = max(map(len, studies), default=0)
        for name, description in studies.items():
            typer.echo(f"{name:<{width}}  {description}")


@study_app.command("run")
def study_run(
    name: Annotated[str, typer.Argument(help="A registered study (`attnflow study list`).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Study directory (runs, summary.json, table.md).")],
    quick: Annotated[
        bool, typer.Option("--quick", help="The study's quick variant (seconds to minutes).")
    ] = False,
    params: Annotated[
        list[str] | None,
        typer.Option("--set", "-s", help="A study parameter key=value (YAML value); repeatable."),
    ] = None,
    scheduler: SchedulerOption = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", "-j", min=1, help="Local worker processes (1: in this process)."),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume/--no-resume", help="Reuse finished runs, continue interrupted ones (default)."
        ),
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines or bars.")] = False,
    device: DeviceOption = None,
) -> None:
    """Run a study into a directory: its runs (resumable, local or Dask), summary.json, table.md, figures."""
    with reported(f"the study {name!r} failed", note=runs_note(out)):
        check_device_cli(device)
        check_out_dir(out)
        parsed = parse_params(params)
        from ..plot.studies import figures_for
        from ..studies import run_study

        summary = run_study(
            name,
            out,
            params=parsed,
            quick=quick,
            scheduler=scheduler,
            workers=workers,
            resume=resume,
            progress=not quiet,
            figures=figures_for(name),
            **({} if device is None else {"device": device}),
        )
    if not quiet:
        typer.echo(f"done: {out} (summary.json, table.md) in {summary['wall_time_s']:.0f} s")


@study_app.command("show")
def study_show(
    directory: Annotated[Path, typer.Argument(help="A study or reproduction directory.")],
) -> None:
    """The study, its status, the status of each run and its table."""
    with reported(f"cannot read the study {directory}"):
        from ..report.probe import is_probe

        if (
            directory.is_dir()
            and not any((directory / f).exists() for f in STUDY_MARKS)
            and not is_probe(directory)
        ):
            from ..studies import study_info

            study_info(directory)  # NotAStudyDirectoryError: its message says how to write one
        kind = detect(directory)
        if kind not in ("study", "reproduction"):
            raise refuse(kind, "study show", directory)
        show_study(directory, kind)


def check_study_file(directory: Path) -> None:
    """``study.json`` must be JSON naming a study (``CorruptFileError`` names the file and the fix)."""
    from ..experiments.files import CorruptFileError, read_json
    from ..studies.runner import STUDY_FILE

    fix = f"rerun `attnflow study run NAME --out {directory} --no-resume` to rebuild it"
    header = read_json(directory / STUDY_FILE, "study file", fix)
    if not isinstance(header, dict) or not isinstance(header.get("study"), str):
        raise CorruptFileError(f'{directory / STUDY_FILE} names no study (no "study" key); {fix}')


def show_study(directory: Path, kind: str = "study") -> None:
    """Print a study or reproduction directory (also ``attnflow info`` on one); ``kind`` opens the first
    line (``study`` or ``reproduction``)."""
    from ..studies import study_info

    check_study_file(directory)
    s = study_info(directory)
    typer.echo(f"{kind} {s['study']} ({s['dir']}){' quick' if s['quick'] else ''}: {s['description']}")
    counts = ", ".join(f"{v} {k}" for k, v in sorted(s["counts"].items()))
    wall = "" if s["wall_time_s"] is None else f", {s['wall_time_s']:.0f} s"
    typer.echo(f"  status: {s['status']} ({counts}{wall})  started {s['started']}  ended {s['ended']}")
    typer.echo(f"  config: {json.dumps(s['config'])}")
    for name, status in s["runs"].items():
        typer.echo(f"  {name}: {status}")
    if s["table"]:
        typer.echo("")
        typer.echo(s["table"], nl=False)
    elif s["status"] != "done":
        typer.echo(f"  no table yet: rerun `attnflow study run {s['study']} --out {directory}` to resume")
