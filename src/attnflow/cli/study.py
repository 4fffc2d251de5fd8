"""``attnflow study list | run | run-all | show``: the registered studies (and any ``path/file.py:Class``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ._app import study_app
from .common import (
    DeviceOption,
    ResumeOption,
    SchedulerOption,
    StudyQuietOption,
    check_device_cli,
    check_out_dir,
)
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
    resume: ResumeOption = True,
    quiet: StudyQuietOption = False,
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


def split_names(text: str | None, option: str) -> list[str] | None:
    """``"a,b"`` -> ``["a", "b"]`` (None stays None); an empty name is refused."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise fail(
            f"{option} takes comma-separated study names: got {text!r}; e.g. {option} longtime,real_model", 2
        )
    return names


def run_all_table(record: dict) -> str:
    """The per-study lines of a run-all (status, tasks, when done, the tasks' wall and CPU, the analysis'
    CPU) and the total, as aligned text."""
    head = (
        "study",
        "status",
        "tasks",
        "skipped",
        "done at s",
        "tasks wall s",
        "tasks CPU s",
        "analysis CPU s",
    )
    lines = [head]
    for name, r in record["studies"].items():
        num = [r.get(k) for k in ("done_after_s", "tasks_wall_s", "tasks_cpu_s", "analysis_cpu_s")]
        lines.append(
            (name, r["status"], str(r.get("tasks", "-")), str(r.get("skipped", "-")))
            + tuple("-" if v is None else f"{v:.1f}" for v in num)
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    text = [
        "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in lines
    ]
    for name, r in record["studies"].items():
        if r.get("error"):
            text.append(f"{name}: {r['error']}")
    cpu_tasks = sum(r.get("tasks_cpu_s", 0.0) for r in record["studies"].values())
    text.append(
        f"total: {len(record['done'])} of {len(record['studies'])} studies done in "
        f"{record['wall_s']:.1f} s wall, "
        f"{record['cpu_s']:.1f} s CPU (this process and its local workers; the tasks {cpu_tasks:.1f} s), "
        f"workers {record['workers']}"
    )
    return "\n".join(text)


@study_app.command("run-all")
def study_run_all(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Directory of the study directories and run_all.json.")
    ],
    quick: Annotated[bool, typer.Option("--quick", help="Every study's quick variant.")] = False,
    only: Annotated[
        str | None,
        typer.Option("--only", help="Comma-separated studies to run (default: every registered one)."),
    ] = None,
    exclude: Annotated[
        str | None, typer.Option("--exclude", help="Comma-separated studies to leave out.")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", "-j", min=1, help="Local worker processes shared by all tasks (default: the cores)."
        ),
    ] = None,
    scheduler: SchedulerOption = None,
    resume: ResumeOption = True,
    quiet: StudyQuietOption = False,
) -> None:
    """Run every registered study (or --only a,b / --exclude a,b), the tasks of all in one pool, the longest
    first; each study is analysed as soon as its tasks are done. OUT/<study> is what `study run` makes."""
    with reported("the run-all failed", note=runs_note(out)):
        check_out_dir(out)
        if workers is not None and scheduler is not None:
            raise fail(
                f"give --workers or --scheduler, not both: got -j {workers} and --scheduler {scheduler}", 2
            )
        from ..plot.studies import figures_for
        from ..studies import run_all

        record = run_all(
            out,
            only=split_names(only, "--only"),
            exclude=split_names(exclude, "--exclude"),
            quick=quick,
            scheduler=scheduler,
            workers=workers,
            resume=resume,
            progress=not quiet,
            figures=figures_for,
        )
    typer.echo(run_all_table(record))
    if record["failed"]:
        raise typer.Exit(1)


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
