"""The ``attnflow`` command line (typer): run, sweep, info, plot, config, study, reproduce.

    attnflow config example > ou.yaml
    attnflow run ou.yaml --out runs/ou                    # resumes runs/ou if it was interrupted
    attnflow sweep ou.yaml --grid heads.H=2,4 --grid weights.sigma2=0.5,1 --out runs/sweep
    attnflow info runs/sweep
    attnflow plot runs/ou                                 # writes runs/ou/summary.png
    attnflow study run massucco2026 --out out/q --quick   # a registered study; `study show out/q`

Exit codes: 0 success, 1 a run or a task failed (or a directory cannot be resumed, read or written: in
use by another process, corrupt, not created by attnflow), 2 bad input (an invalid config or grid, a
config whose objects cannot be built, a missing file or directory). Every failure is reported on one
line (a config error lists its problems one per line) with the fix, never as a Python traceback.

Each command imports the layer it drives (experiments, studies, plot, analysis) when it runs: these pull in
Zarr, Dask, pydantic, POT and matplotlib, and ``attnflow --help`` or ``attnflow config example`` should not
pay for all of them. These are the only function-level imports of the package besides the optional numba
kernel.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import click
import typer

#: Plain (click) help pages: a flag is shown as a flag (``-q, --quiet``), not with a ``<bool>`` placeholder
#: as typer's rich help pages print it; ``--install-completion`` / ``--show-completion`` add shell
#: completion (docs/cli.md).
HELP_STYLE = {"rich_markup_mode": None}
app = typer.Typer(
    name="attnflow",
    help="Simulate multi-head attention dynamics on the sphere: run experiments, sweeps, plots.",
    no_args_is_help=True,
    add_completion=True,
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

PLOT_FILE = "summary.png"


#: Library messages speak Python (``resume=False``, ``out_dir``); on the command line they name the
#: flags that set the same thing. Python phrase -> command-line phrase, applied in this order.
CLI_PHRASES: tuple[tuple[str, str], ...] = (
    ("run_experiment(config, out_dir)", "`attnflow run CONFIG --out DIR`"),
    ("pass resume=False", "pass --no-resume"),
    ("rerun with resume=False", "rerun with --no-resume"),
    ("another out_dir", "another --out"),
    ("an empty or new out_dir", "an empty or new --out"),
    (
        "start from EXAMPLE_TRAINING_YAML in attnflow.experiments.training_config",
        "write one like `attnflow train --example`",
    ),
    ("attnflow.experiments.sweep_info describes it", "`attnflow info` describes it"),
    ("attnflow.experiments.run_info describes it", "`attnflow info` describes it"),
    ("attnflow.studies.available_studies() lists them", "`attnflow study list` describes them"),
)


def for_cli(message: str) -> str:
    """A library message with its Python arguments replaced by the flags of the command line.

    >>> for_cli("choose another out_dir or pass resume=False to overwrite it")
    'choose another --out or pass --no-resume to overwrite it'
    """
    for python, flag in CLI_PHRASES:
        message = message.replace(python, flag)
    return message


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"error: {for_cli(message)}", err=True)
    return typer.Exit(code)


#: The longest error line printed for an unexpected failure.
_MAX_ERROR_CHARS = 2000


def _one_line(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


def _os_error(exc: OSError) -> str:
    where = f" ({exc.filename})" if exc.filename else ""
    return f"{type(exc).__name__}: {exc.strerror or exc}{where}"


@contextlib.contextmanager
def _reported(action: str) -> Iterator[None]:
    """Map every failure inside a command to one error line and an exit status (the module's codes)."""
    from .experiments.config import ConfigError
    from .experiments.files import CorruptFileError, UnsafePathError
    from .experiments.locking import DirectoryLockedError

    try:
        yield
    except (typer.Exit, typer.Abort, click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
        raise
    except KeyboardInterrupt as exc:  # Ctrl-C: the run store checkpointed and says "interrupted"
        raise _fail(str(exc) or "interrupted (Ctrl-C); rerun the same command to resume", 130) from None
    except ConfigError as exc:
        raise _fail(str(exc), 2) from None
    except (CorruptFileError, UnsafePathError, DirectoryLockedError) as exc:
        raise _fail(str(exc), 1) from None
    except FileNotFoundError as exc:
        raise _fail(f"{action}: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 2) from None
    except OSError as exc:
        raise _fail(f"{action}: {_os_error(exc)}", 1) from None
    except Exception as exc:  # noqa: BLE001 - the CLI prints no traceback; the library keeps the details
        raise _fail(f"{action}: {_one_line(exc)}", 1) from None


def _check_output_dir(path: Path, option: str) -> None:
    """A file the command will write must have an existing directory (checked before any work)."""
    parent = path.parent
    if not parent.is_dir():
        raise _fail(
            f"{option} {path}: the directory {parent} does not exist; create it first or choose another path",
            2,
        )


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# -- config ----------------------------------------------------------------------------------------
@config_app.command("example")
def config_example() -> None:
    """Print a documented example config (YAML with comments)."""
    from .experiments.config import EXAMPLE_YAML

    typer.echo(EXAMPLE_YAML, nl=False)


@config_app.command("check")
def config_check(config: Annotated[Path, typer.Argument(help="YAML config file.")]) -> None:
    """Validate a config file and print it with every default filled in."""
    from .experiments.config import ConfigError, dump_config, load_config

    with _reported(f"cannot check {config}"):
        try:
            cfg = load_config(config)
        except ConfigError as exc:
            raise _fail(str(exc), 2) from None
        typer.echo(dump_config(cfg), nl=False)


# -- run / sweep -----------------------------------------------------------------------------------
#: the ``--device`` option of run, study run, reproduce and check-edi (checked by ``_check_device_cli``)
DeviceOption = Annotated[
    str | None, typer.Option("--device", help="cpu, cuda or cuda:N (checked before anything runs).")
]


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
    from .experiments.config import ConfigError, load_config
    from .experiments.files import CorruptFileError, UnsafePathError
    from .experiments.locking import DirectoryLockedError
    from .experiments.store import RunConfigMismatchError, read_meta, run_experiment, run_info

    def failed_status() -> bool:
        try:
            return read_meta(out).get("status") == "failed"
        except (CorruptFileError, OSError):
            return False

    if _is_pde_run(config):  # a density run of the Transformer PDE (``model: pde``): see `pde_run` below
        _pde_run(config, out, resume, quiet)
        return
    with _reported(f"the run {out} failed"):
        cfg = _with_device_cli(load_config(config), device)
        try:
            run_experiment(cfg, out, resume=resume, progress=not quiet)
        except (RunConfigMismatchError, CorruptFileError, UnsafePathError, DirectoryLockedError) as exc:
            raise _fail(str(exc)) from None
        except ConfigError as exc:  # valid on its own but cannot be built (a file missing, d of file tokens)
            where = f" (recorded in {out / 'meta.json'})" if failed_status() else ""
            raise _fail(f"{exc}{where}", 2) from None
        except OSError as exc:
            raise _fail(f"cannot write the run directory {out}: {_os_error(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - reported with a pointer to the traceback
            where = f" (traceback in {out / 'meta.json'})" if failed_status() else ""
            raise _fail(f"the run failed: {_one_line(exc)}{where}") from None
        if not quiet:
            info = run_info(out)
            typer.echo(f"done: {out} ({info['records']} records, {_size(sum(info['sizes'].values()))})")


@app.command()
def sweep(
    config: Annotated[Path, typer.Argument(help="Base YAML config file.")],
    grid: Annotated[
        list[str], typer.Option("--grid", "-g", help="key=v1,v2,... (dotted key, YAML values); repeatable.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Sweep directory.")],
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", help="Address of a Dask distributed scheduler.")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", "-j", min=1, help="Local worker processes.")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume/--no-resume", help="Skip finished tasks of the same sweep.")
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Run the cartesian product of the grids over a base config, one run directory per task."""
    from .experiments.config import ConfigError, load_config
    from .experiments.files import CorruptFileError, UnsafePathError
    from .experiments.locking import DirectoryLockedError
    from .experiments.sweep import SchedulerError, SweepMismatchError, parse_grid, run_sweep

    with _reported(f"the sweep {out} failed"):
        try:
            cfg = load_config(config)
            parsed = parse_grid(grid)
        except (ConfigError, ValueError) as exc:
            raise _fail(str(exc), 2) from None
        try:
            summary = run_sweep(
                cfg, parsed, out, scheduler=scheduler, workers=workers, resume=resume, progress=not quiet
            )
        except (
            SweepMismatchError,
            SchedulerError,
            CorruptFileError,
            UnsafePathError,
            DirectoryLockedError,
        ) as exc:
            raise _fail(str(exc)) from None
        except (ValueError, FileNotFoundError) as exc:  # ConfigError included
            raise _fail(str(exc), 2) from None
        except OSError as exc:
            raise _fail(f"cannot write the sweep directory {out}: {_os_error(exc)}") from None
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


# -- info / plot -----------------------------------------------------------------------------------
def _is_sweep(path: Path) -> bool:
    from .experiments.sweep import TASKS_FILE

    return (path / TASKS_FILE).is_file()


@app.command()
def info(
    directory: Annotated[Path, typer.Argument(help="A run, sweep, study or reproduction directory.")],
) -> None:
    """Summary of a run, sweep or study (reproduction) directory: config, status, progress, sizes."""
    with _reported(f"cannot read {directory}"):
        _info(directory)


def _info(directory: Path) -> None:
    from .experiments.store import CONFIG_FILE, META_FILE, run_info
    from .experiments.sweep import sweep_info

    if _is_sweep(directory):
        s = sweep_info(directory)
        typer.echo(f"sweep {s['dir']} (base config {s['name']!r})")
        typer.echo(f"  grid: {json.dumps(s['grid'])}")
        typer.echo(f"  tasks: {', '.join(f'{v} {k}' for k, v in sorted(s['counts'].items()))}")
        typer.echo(f"  size: {_size(s['size_bytes'])}  started {s['started']}  ended {s['ended']}")
        for name, row in s["tasks"].items():
            line = f"  {name}: {row['status']}"
            if row.get("progress"):
                line += f" ({row['progress']})"
            if row.get("error"):
                line += f": {row['error']}"
            typer.echo(for_cli(line))
        return
    if (directory / "study.json").is_file():  # a study or reproduction directory
        study_show(directory)
        return
    if not ((directory / META_FILE).is_file() or (directory / CONFIG_FILE).is_file()):
        raise _fail(
            f"{directory} is neither a run directory (meta.json) nor a sweep directory (tasks.json)", 2
        )
    r = run_info(directory)
    typer.echo(f"run {r['dir']} ({r['name']!r})")
    typer.echo(for_cli(f"  status: {r['status']}"))
    if r.get("n_steps"):
        pct = 100 * (r["step"] or 0) / r["n_steps"]
        typer.echo(f"  progress: step {r['step']}/{r['n_steps']} ({pct:.0f}%), {r['records']} records")
    typer.echo(f"  started {r['started']}  ended {r['ended']}")
    if r.get("error"):
        typer.echo(for_cli(f"  error: {r['error']}"))
    for k, v in r.get("config", {}).items():
        typer.echo(f"  {k}: {v}")
    typer.echo("  sizes: " + ", ".join(f"{k} {_size(v)}" for k, v in r["sizes"].items()))


@app.command()
def plot(
    directory: Annotated[Path, typer.Argument(help="A run or a sweep directory.")],
    output: Annotated[
        Path | None, typer.Option("--output", help=f"PNG file (default DIR/{PLOT_FILE}).")
    ] = None,
) -> None:
    """Figure of energy, G2 (log) and the residuals over time (bands over paths) and the final token cloud;
    a sweep gets one per task and an overlay of its grid (sweep.png). The title names H, beta, sigma^2,
    direction and init mode, and says "unfinished (t = a of b)" for a run that is not done."""
    if output is not None:
        _check_output_dir(output, "--output")
    fix = "the store is damaged; rerun the run with --no-resume"
    with _reported(f"cannot plot {directory} ({fix})"):
        _plot(directory, output)


def _plot(directory: Path, output: Path | None) -> None:
    import warnings

    from .experiments.store import DATA_DIR, open_run, read_meta
    from .plot.runs import plot_run, plot_sweep

    if _is_sweep(directory):
        from .experiments.sweep import read_index

        tasks = read_index(directory)["tasks"]
        names = [n for n in tasks if read_meta(directory / n).get("status") == "done"]
        if not names:
            raise _fail(f"no finished task in the sweep {directory}")
        runs = {}
        for name in names:
            ds = open_run(directory / name)
            p = plot_run(ds, directory / name / PLOT_FILE, title=name, status="done")
            typer.echo(str(p))
            runs[", ".join(f"{k}={v}" for k, v in tasks[name].items()) or name] = ds
        typer.echo(str(plot_sweep(runs, output or directory / "sweep.png", title=directory.name)))
        return
    if not (directory / DATA_DIR).is_dir():
        raise _fail(
            f"{directory} holds no data ({DATA_DIR}); run `attnflow run CONFIG --out {directory}` first", 2
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unfinished run is plotted as far as it went
        ds = open_run(directory)
    status = read_meta(directory).get("status")
    name = str(ds.attrs.get("name", directory.name))
    p = plot_run(ds, output or directory / PLOT_FILE, title=name, status=status)
    typer.echo(str(p))


# -- studies / reproduce ---------------------------------------------------------------------------
def _parse_params(items: list[str] | None) -> dict:
    """``["H=[1, 10]", "window=[0.5, 1]"]`` -> ``{"H": [1, 10], "window": [0.5, 1]}`` (YAML values)."""
    import yaml

    from .experiments.config import load_yaml

    params: dict = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"a study parameter must read key=value: got {item!r}; e.g. --set paths=6")
        try:
            params[key.strip()] = load_yaml(value)
        except yaml.YAMLError as exc:
            raise ValueError(
                f"the value of study parameter {key.strip()!r} is not valid YAML ({exc}): got {value!r}; "
                "quote it or close its brackets, e.g. --set H=[1,10,100]"
            ) from None
    return params


def _run_study_cli(name: str, out: Path, what: str, **kwargs) -> dict:
    """Run a study for the CLI, translating its errors into messages and exit codes."""
    from .experiments.locking import DirectoryLockedError
    from .studies import StudyConfigError, StudyMismatchError, StudyRunError, UnknownStudyError, run_study

    try:
        return run_study(name, out, **kwargs)
    except KeyboardInterrupt as exc:  # Ctrl-C: the run under way checkpointed and says "interrupted"
        raise _fail(f"{exc or 'interrupted (Ctrl-C)'}; rerun the same command to resume", 130) from None
    except (StudyConfigError, UnknownStudyError) as exc:
        raise _fail(str(exc), 2) from None
    except (StudyMismatchError, StudyRunError, DirectoryLockedError) as exc:
        raise _fail(str(exc)) from None
    except (ValueError, FileNotFoundError) as exc:  # a bad manifest or preset, a missing file
        raise _fail(str(exc), 2) from None
    except Exception as exc:  # noqa: BLE001 - an analysis or a figure failed; the runs are kept
        raise _fail(
            f"the {what} {name!r} failed: {type(exc).__name__}: {exc} (the meta.json of each run "
            f"under {out / 'runs'} holds its status and traceback; rerun the same command to resume)"
        ) from None


@study_app.command("list")
def study_list() -> None:
    """The registered studies and the claim each checks."""
    from .studies import available_studies

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
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", help="Address of a Dask distributed scheduler.")
    ] = None,
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
    from .plot.studies import figures_for

    _check_device_cli(device)
    try:
        parsed = _parse_params(params)
    except ValueError as exc:
        raise _fail(str(exc), 2) from None
    summary = _run_study_cli(
        name,
        out,
        "study",
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
def study_show(directory: Annotated[Path, typer.Argument(help="A study directory.")]) -> None:
    """The study, its status, the status of each run and its table."""
    from .studies import NotAStudyDirectoryError, study_info

    try:
        s = study_info(directory)
    except NotAStudyDirectoryError as exc:
        text = str(exc).replace("run_study(name, out_dir)", "`attnflow study run NAME --out DIR`")
        raise _fail(text.replace("available_studies()", "`attnflow study list`"), 2) from None
    typer.echo(f"study {s['study']} ({s['dir']}){' quick' if s['quick'] else ''}: {s['description']}")
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
    from .experiments.reproduce import available_reproductions
    from .plot.reproduction import plot_all
    from .studies import StudyConfigError, StudyMismatchError, StudyRunError, massucco2026

    _check_device_cli(device)
    known = available_reproductions()
    if name not in known and not Path(name).exists():
        raise _fail(f"unknown reproduction {name!r}; available: {', '.join(known)}", 2)
    try:
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
    except KeyboardInterrupt as exc:  # Ctrl-C: the run under way checkpointed and says "interrupted"
        raise _fail(f"{exc or 'interrupted (Ctrl-C)'}; rerun the same command to resume", 130) from None
    except StudyConfigError as exc:
        raise _fail(str(exc), 2) from None
    except (StudyMismatchError, StudyRunError) as exc:
        raise _fail(str(exc)) from None
    except (ValueError, FileNotFoundError) as exc:  # a bad manifest or preset, a missing file
        raise _fail(str(exc), 2) from None
    except Exception as exc:  # noqa: BLE001 - a run or a figure failed; its run directory keeps the traceback
        raise _fail(
            f"the reproduction {name!r} failed: {type(exc).__name__}: {exc} (the meta.json of each run "
            f"under {out / 'runs'} holds its status and traceback; rerun the same command to resume)"
        ) from None
    if not quiet:
        wall = summary.get("wall_time_s")
        typer.echo(
            f"done: {out} (summary.json, table.md, fig1-3){'' if wall is None else f' in {wall:.0f} s'}"
        )


@app.command("check-edi")
def check_edi(
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the full audit (every dt, every case) as JSON.")
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Small sizes (seconds), for a smoke check.")] = False,
    H: Annotated[list[int] | None, typer.Option("--H", help="Head counts (repeat the option).")] = None,
    weights: Annotated[
        list[str] | None,
        typer.Option("--weights", help="frozen, ou, oscillating, oscillating_shared (repeat the option)."),
    ] = None,
    device: DeviceOption = None,
) -> None:
    """Audit the discrete energy-dissipation identity (147): both residuals and their order in dt."""
    from .analysis.edi import check_edi_cli

    _check_device_cli(device)
    if json_path is not None:
        _check_output_dir(json_path, "--json")  # before the audit, not after it
    with _reported("the audit failed"):
        try:
            check_edi_cli(
                None if json_path is None else str(json_path), quick, H, weights, device=device or "cpu"
            )
        except ValueError as exc:
            raise _fail(str(exc), 2) from None


# -- training (issue 15): attnflow train CONFIG --out DIR ------------------------------------------------
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
    from .experiments.errors import ConfigError
    from .experiments.files import CorruptFileError
    from .experiments.locking import DirectoryLockedError
    from .experiments.store import RunConfigMismatchError
    from .experiments.training_config import EXAMPLE_TRAINING_YAML
    from .experiments.training_run import run_training
    from .plot.training import training_figures
    from .training.trainer import NonFiniteLossError

    if example:
        typer.echo(EXAMPLE_TRAINING_YAML, nl=False)
        return
    if config is None or out is None:
        raise _fail("attnflow train needs a CONFIG and --out DIR (or --example)", 2)
    try:
        summary = run_training(config, out, progress=not quiet, figures=training_figures)
    except ConfigError as exc:
        raise _fail(str(exc), 2) from None
    except (RunConfigMismatchError, DirectoryLockedError, CorruptFileError) as exc:
        raise _fail(str(exc)) from None
    except NonFiniteLossError as exc:
        raise _fail(f"{exc} (run directory {out}: meta.json says 'diverged')") from None
    if not quiet:
        final = summary["final"]
        metrics = ", ".join(f"{k} {v:.4g}" for k, v in final.items() if k != "step")
        typer.echo(f"done: {out} (step {summary['steps']}: {metrics})")


# -- version, report (issue 18) --------------------------------------------------------------------
def _print_version(value: bool) -> None:
    if value:
        from ._version import __version__

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


@app.command()
def report(
    directory: Annotated[Path, typer.Argument(help="A run, sweep, study or reproduction directory.")],
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
) -> None:
    """One self-contained HTML page of a directory: config, ledger and G^2 with bands, tables, verdicts,
    figures, a 3-D token cloud with a time slider (thinned, as the page states), links to the data."""
    from .report import NotReportableError, ReportLimits, write_report

    if output is not None:
        _check_output_dir(output, "--output")
    with _reported(f"cannot report on {directory}"):
        try:
            limits = ReportLimits(
                max_tokens=max_tokens, max_frames=max_frames, max_points=max_points, max_runs=max_runs
            )
            path = write_report(directory, output, limits=limits, theory_checks=theory_checks)
        except NotReportableError as exc:
            raise _fail(str(exc), 2) from None
        typer.echo(f"{path} ({_size(path.stat().st_size)})")
        if check:
            from .report.browser import Browser, BrowserError

            try:
                with Browser() as b:
                    load = b.open(path)
                    errors = b.console_errors
            except BrowserError as exc:
                raise _fail(f"--check: {exc}") from None
            typer.echo(f"loaded in headless Chromium in {load:.2f} s, {len(errors)} console errors")
            for e in errors:
                typer.echo(f"  {e}", err=True)
            if errors:
                raise typer.Exit(1)


# -- the Transformer PDE (issue 16): density runs (``model: pde`` configs) and their figures ---------------
def _is_pde_run(config: Path) -> bool:
    from .experiments.pde_runs import is_pde_config

    return is_pde_config(config)


def _pde_run(config: Path, out: Path, resume: bool, quiet: bool) -> None:
    from .experiments.pde_runs import run_pde

    with _reported(f"the PDE run {out} failed"):
        try:
            run_pde(config, out, resume=resume, progress=not quiet)
        except ValueError as exc:
            raise _fail(str(exc), 2) from None
    if not quiet:
        typer.echo(f"done: {out} (config.yaml, meta.json, data.zarr); figures: attnflow pde-plot {out}")


@app.command("pde-plot")
def pde_plot(
    directory: Annotated[
        Path, typer.Argument(help="A PDE run directory (attnflow run on a model: pde config).")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Figure directory (default: the run's).")
    ] = None,
) -> None:
    """Draw a density run: equal-area (Mollweide) maps and an animation on S^2, density curves on S^1."""
    import numpy as np

    from .experiments.store import open_run
    from .plot.pde import lat_lon_raster, plot_density_run

    with _reported(f"cannot draw {directory}"):
        ds = open_run(directory).load()
        target = directory if out is None else out
        target.mkdir(parents=True, exist_ok=True)
        coef = ds.coefficients.values[..., 0] + 1j * ds.coefficients.values[..., 1]
        d = int(ds.nodes.shape[1])
        from .pde import make_grid

        grid = make_grid(d, int(ds.attrs["band_limit"]))
        if d == 3:
            lat, lon, pts = lat_lon_raster()
            frames = np.stack([grid.evaluate(c, pts).reshape(lat.size, lon.size) for c in coef])
            files = plot_density_run(ds.time.values, frames, target, d=3, lat=lat, lon=lon)
        else:
            th = np.linspace(-np.pi, np.pi, 1024, endpoint=False)
            pts = np.stack([np.cos(th), np.sin(th)], 1)
            frames = np.stack([grid.evaluate(c, pts) for c in coef])
            files = plot_density_run(ds.time.values, frames, target, d=2, theta=th)
    typer.echo(f"wrote {', '.join(str(target / f) for f in files.values())}")


# -- device options (issue 12) -------------------------------------------------------------------------
def _check_device_cli(device: str | None) -> None:
    """Exit with code 2 and the rule when ``--device`` names a device this torch build cannot use."""
    from .experiments.schema import check_device

    if device is not None:
        try:
            check_device(device)
        except ValueError as exc:
            raise _fail(f"--device: {exc}", 2) from None


def _with_device_cli(cfg, device: str | None):
    """``cfg`` with ``--device`` applied (checked first)."""
    from .experiments.schema import with_device

    _check_device_cli(device)
    return with_device(cfg, device)


# -- issue 16: noisy tokens -------------------------------------------------------------------------
@app.command("critical-noise")
def critical_noise(
    beta: Annotated[list[float], typer.Option("--beta", help="Inverse temperatures (repeat the option).")],
    d: Annotated[int, typer.Option("--d", help="Ambient dimension: tokens on S^(d-1).")] = 3,
    attention: Annotated[str, typer.Option("--attention", help="softmax or usa.")] = "softmax",
    n: Annotated[int | None, typer.Option("--n", help="Tokens, for the finite-n value.")] = None,
) -> None:
    """The derived critical token noise eps_c(beta) below which the uniform state of ascent tokens with one
    identity head is unstable (docs/noisy_tokens.md)."""
    from .analysis.noise_stability import critical_token_noise

    try:
        rows = [
            (
                b,
                critical_token_noise(b, d, attention),
                critical_token_noise(b, d, attention, n=n) if n else None,
            )
            for b in beta
        ]
    except ValueError as exc:
        raise _fail(str(exc), 2) from None
    typer.echo(f"attention {attention}, S^{d - 1}, ascent, one identity head")
    for b, ec, ecn in rows:
        typer.echo(
            f"beta = {b:g}: eps_c = {ec:.6g} (mean field)" + ("" if ecn is None else f", {ecn:.6g} (n = {n})")
        )


# -- animate (issue 11) ----------------------------------------------------------------------------
@app.command()
def animate(
    directory: Annotated[Path, typer.Argument(help="A run directory recorded with positions.")],
    output: Annotated[
        Path | None,
        typer.Option("--output", help="Output file (default DIR/tokens.mp4; .gif without ffmpeg)."),
    ] = None,
    fps: Annotated[int, typer.Option("--fps", min=1, help="Frames per second.")] = 10,
    max_frames: Annotated[int, typer.Option("--max-frames", min=2, help="At most this many frames.")] = 200,
    mean: Annotated[
        bool, typer.Option("--mean", help="Animate the per-token mean over paths (shared init) not path 0.")
    ] = False,
    gif: Annotated[bool, typer.Option("--gif", help="Write a GIF even when ffmpeg is available.")] = False,
) -> None:
    """Animate a run's token cloud over time: MP4 through imageio-ffmpeg, GIF fallback."""
    if output is not None:
        _check_output_dir(output, "--output")
    with _reported(f"cannot animate {directory}"):
        import warnings

        from .experiments.store import DATA_DIR, open_run
        from .plot.runs import animate_run

        if not (directory / DATA_DIR).is_dir():
            raise _fail(f"{directory} holds no run data ({DATA_DIR}); give a run directory", 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an unfinished run is animated as far as it went
            ds = open_run(directory)
        try:
            p = animate_run(
                ds,
                output or directory / "tokens.mp4",
                fps=fps,
                max_frames=max_frames,
                mean=mean,
                fmt="gif" if gif else "auto",
            )
        except ValueError as exc:
            raise _fail(str(exc), 2) from None
        typer.echo(str(p))


def main() -> None:
    """Entry point of the ``attnflow`` script (pyproject: ``attnflow = "attnflow.cli:main"``)."""
    app()


if __name__ == "__main__":
    sys.exit(main())


# -- attnflow probe (issue 26): one self-contained block; its logic lives in attnflow.analysis.probe ---------
@app.command("probe")
def probe_command(
    model: Annotated[
        str,
        typer.Argument(help="minilm, minilm-l3, smollm2, a Hugging Face folder, an .onnx or a .gguf file."),
    ] = "minilm",
    out: Annotated[Path, typer.Option("--out", help="New directory: probe.zarr, summary, figures.")] = Path(
        "out/probe"
    ),
    corpus: Annotated[
        Path | None, typer.Option("--corpus", help="Text file, a sentence a line (default: shipped corpus).")
    ] = None,
    random_init: Annotated[
        int | None, typer.Option("--random-init", help="Probe the architecture at random init (seed).")
    ] = None,
    nulls: Annotated[int, typer.Option("--nulls", help="Random initialisations drawn as the null.")] = 3,
    sentences: Annotated[int, typer.Option("--sentences", help="First N sentences (0 = all).")] = 0,
    lengths: Annotated[str, typer.Option("--lengths", help="Lengths of the Jacobians.")] = "8,32,128",
    iterations: Annotated[int, typer.Option("--iterations", help="Power iterations per spectral norm.")] = 8,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples over sentences.")] = 1000,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Sentences per forward pass.")] = 64,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap and the power iterations.")] = 0,
    no_figures: Annotated[bool, typer.Option("--no-figures", help="Skip the PNG figures.")] = False,
) -> None:
    """Per-layer and per-head measurements of a real model and of its random-init nulls (docs/probe.md)."""
    with _reported(f"cannot probe {model}"):
        from .analysis.probe import ProbeConfig, run_probe

        if nulls < 0 or sentences < 0:
            raise _fail(f"--nulls and --sentences must be >= 0: got {nulls}, {sentences}", 2)
        try:
            lens = tuple(int(x) for x in lengths.split(",") if x.strip())
            config = ProbeConfig(
                batch_size=batch_size, bootstrap=bootstrap, seed=seed, null_seeds=tuple(range(nulls)),
                jacobian_lengths=lens, power_iterations=iterations,
            )  # fmt: skip
        except ValueError as exc:
            raise _fail(f"{exc}", 2) from None
        if corpus is None:
            from .studies.real_model import load_corpus

            texts = load_corpus()
        else:
            if not corpus.is_file():
                raise _fail(f"--corpus {corpus}: no such file; give a text file, one sentence a line", 2)
            texts = [line.strip() for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
        texts = texts[:sentences] if sentences else texts
        figures = None
        if not no_figures:
            from .plot.probe import plot_probe as figures
        try:
            summary = run_probe(
                model, texts, out, config, random_init=random_init, figures=figures,
                progress=lambda m: typer.echo(m, err=True),
            )  # fmt: skip
        except ValueError as exc:
            raise _fail(str(exc), 2) from None
        typer.echo(f"{out}: {summary['model']}, {summary['sentences']} sentences, {summary['seconds']} s")
