"""The commands that read a directory attnflow wrote: ``info``, ``plot``, ``animate`` (``report``,
``study show`` and ``pde-plot`` have their own modules). Each first finds the directory's kind
(:mod:`.kinds`): it describes or draws what it reads and refuses the other kinds naming the command that
reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ._app import app
from .common import check_output_file, size
from .errors import fail, for_cli, reported
from .kinds import detect, refuse

PLOT_FILE = "summary.png"


@app.command()
def info(
    directory: Annotated[
        Path,
        typer.Argument(help="A run, PDE run, training run, sweep, study, reproduction or probe directory."),
    ],
) -> None:
    """Summary of any directory attnflow writes: its kind, config, status, progress, sizes."""
    with reported(f"cannot read {directory}"):
        kind = detect(directory)
        if kind == "sweep":
            _sweep_info(directory)
        elif kind in ("study", "reproduction"):
            from .study import show_study

            show_study(directory, kind)
        elif kind == "pde run":
            _pde_info(directory)
        elif kind == "training run":
            _training_info(directory)
        elif kind == "probe":
            _probe_info(directory)
        else:
            _run_info(directory)


def _sweep_info(directory: Path) -> None:
    from ..experiments.sweep import sweep_info

    s = sweep_info(directory)
    typer.echo(f"sweep {s['dir']} (base config {s['name']!r})")
    typer.echo(f"  grid: {json.dumps(s['grid'])}")
    typer.echo(f"  tasks: {', '.join(f'{v} {k}' for k, v in sorted(s['counts'].items()))}")
    typer.echo(f"  size: {size(s['size_bytes'])}  started {s['started']}  ended {s['ended']}")
    for name, row in s["tasks"].items():
        line = f"  {name}: {row['status']}"
        if row.get("progress"):
            line += f" ({row['progress']})"
        if row.get("error"):
            line += f": {row['error']}"
        typer.echo(for_cli(line))


def _run_info(directory: Path) -> None:
    from ..experiments.store import run_info

    r = run_info(directory)
    typer.echo(f"run {r['dir']} ({r['name']!r})")
    typer.echo(for_cli(f"  status: {r['status']}"))
    if r.get("resume"):  # an interrupted run: how to go on, with the command's flags
        typer.echo(f"  resume with `attnflow run CONFIG --out {directory}` and its config.yaml")
    if r.get("n_steps"):
        pct = 100 * (r["step"] or 0) / r["n_steps"]
        typer.echo(f"  progress: step {r['step']}/{r['n_steps']} ({pct:.0f}%), {r['records']} records")
    typer.echo(f"  started {r['started']}  ended {r['ended']}")
    if r.get("error"):
        typer.echo(for_cli(f"  error: {r['error']}"))
    for k, v in r.get("config", {}).items():
        typer.echo(f"  {k}: {v}")
    typer.echo("  sizes: " + ", ".join(f"{k} {size(v)}" for k, v in r["sizes"].items()))


def _tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _sizes(directory: Path) -> str:
    parts = [
        f"{p.name} {size(_tree_size(p))}"
        for p in sorted(directory.iterdir())
        if not p.name.startswith(".") and not p.is_symlink()
    ]
    return ", ".join(parts)


def _pde_info(directory: Path) -> None:
    from ..experiments.rundir import CONFIG_FILE, read_meta

    meta = read_meta(directory)  # bounded, and never through a link out of the directory
    typer.echo(f"PDE run {directory}")
    typer.echo(f"  status: {meta.get('status')}  steps: {meta.get('steps')}")
    typer.echo(f"  started {meta.get('started')}  ended {meta.get('ended')}")
    if meta.get("error"):
        typer.echo(for_cli(f"  error: {meta['error']}"))
    cfg = directory / CONFIG_FILE
    if cfg.is_file():
        from ..experiments.config import load_yaml

        text = cfg.read_text(encoding="utf-8", errors="replace")
        try:
            data = load_yaml(text) or {}
        except Exception:  # noqa: BLE001 - the config is shown as far as it reads
            data = {}
        for k, v in data.items() if isinstance(data, dict) else ():
            typer.echo(f"  {k}: {json.dumps(v) if isinstance(v, dict | list) else v}")
    typer.echo(f"  sizes: {_sizes(directory)}")
    typer.echo(f"  figures: attnflow pde-plot {directory}")


def _training_info(directory: Path) -> None:
    from ..experiments.training_run import read_training_run

    r = read_training_run(directory)
    meta = r["meta"]
    typer.echo(f"training run {directory}")
    typer.echo(f"  status: {meta.get('status')}  step {meta.get('step')}/{meta.get('steps')}")
    if meta.get("error"):
        typer.echo(for_cli(f"  error: {meta['error']}"))
    final = (r.get("summary") or {}).get("final")
    if isinstance(final, dict):
        metrics = ", ".join(
            f"{k} {v:.4g}" if isinstance(v, int | float) else f"{k} {v}" for k, v in final.items()
        )
        typer.echo(f"  final: {metrics}")
    figures = directory / "figures"
    if figures.is_dir():
        typer.echo(f"  figures: {', '.join(sorted(p.name for p in figures.iterdir()))}")
    typer.echo(f"  sizes: {_sizes(directory)}")


def _probe_info(directory: Path) -> None:
    from ..experiments.files import read_json

    s = read_json(
        directory / "summary.json", "the probe summary", "rerun `attnflow probe` into a new directory"
    )
    if not isinstance(s, dict):
        raise fail(f"{directory / 'summary.json'} is not a JSON object; rerun `attnflow probe`", 1)
    arch = s.get("architecture") if isinstance(s.get("architecture"), dict) else {}
    typer.echo(f"probe {directory} ({s.get('model')!r}: {s.get('description')})")
    typer.echo("  architecture: " + ", ".join(f"{k} {v}" for k, v in arch.items()))
    typer.echo(f"  corpus: {s.get('sentences')} sentences, {s.get('tokens')} tokens")
    per_layer = s.get("per_layer") if isinstance(s.get("per_layer"), dict) else {}
    typer.echo(f"  models: {', '.join(map(str, per_layer))}")
    for m, row in list(per_layer.items())[:1]:
        for key in ("cos_hidden", "erank_gram", "sink_special"):
            vals = row.get(key) if isinstance(row, dict) else None
            if isinstance(vals, list):
                nums = " ".join(f"{v:.3g}" for v in vals if isinstance(v, float | int))
                typer.echo(f"  {m} {key} per layer: {nums}")
    typer.echo(f"  sizes: {_sizes(directory)}")
    typer.echo(f"  page: attnflow report {directory}")


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
    fix = "the store is damaged; rerun the run with --no-resume"
    with reported(f"cannot plot {directory} ({fix})"):
        if output is not None:
            check_output_file(output, "--output")
        kind = detect(directory)
        if kind not in ("particle run", "sweep"):
            raise refuse(kind, "plot", directory)
        _plot(directory, output, kind)


def _open_recorded(directory: Path, fix: str):
    """The dataset of the particle run ``directory``, an unfinished one as far as it went (its warning
    silenced); exit 2 naming ``fix`` when it holds no data yet."""
    import warnings

    from ..experiments.store import DATA_DIR, open_run

    if not (directory / DATA_DIR).is_dir():
        raise fail(f"{directory} holds no data ({DATA_DIR}); {fix}", 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unfinished run is read as far as it went
        return open_run(directory)


def _plot(directory: Path, output: Path | None, kind: str) -> None:
    from ..experiments.store import open_run, read_meta
    from ..plot.runs import plot_run, plot_sweep

    if kind == "sweep":
        from ..experiments.sweep import read_index

        tasks = read_index(directory)["tasks"]
        names = [n for n in tasks if read_meta(directory / n).get("status") == "done"]
        if not names:
            raise fail(f"no finished task in the sweep {directory}", 1)
        runs = {}
        for name in names:
            ds = open_run(directory / name)
            p = plot_run(ds, directory / name / PLOT_FILE, title=name, status="done")
            typer.echo(str(p))
            runs[", ".join(f"{k}={v}" for k, v in tasks[name].items()) or name] = ds
        typer.echo(str(plot_sweep(runs, output or directory / "sweep.png", title=directory.name)))
        return
    ds = _open_recorded(directory, f"run `attnflow run CONFIG --out {directory}` first")
    status = read_meta(directory).get("status")
    name = str(ds.attrs.get("name", directory.name))
    p = plot_run(ds, output or directory / PLOT_FILE, title=name, status=status)
    typer.echo(str(p))


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
    with reported(f"cannot animate {directory}"):
        if output is not None:
            check_output_file(output, "--output")
        kind = detect(directory)
        if kind != "particle run":
            raise refuse(kind, "animate", directory)
        from ..plot.runs import animate_run

        ds = _open_recorded(directory, "give a run directory")
        p = animate_run(
            ds,
            output or directory / "tokens.mp4",
            fps=fps,
            max_frames=max_frames,
            mean=mean,
            fmt="gif" if gif else "auto",
        )
        typer.echo(str(p))


__all__ = ["PLOT_FILE", "animate", "info", "plot"]
