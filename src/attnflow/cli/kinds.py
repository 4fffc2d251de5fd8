"""What a directory holds, for the commands that read one (info, plot, animate, report, study show,
pde-plot): every kind attnflow writes is recognised, and a command that cannot draw a kind says what it
found and which command reads it.

=============  =========================================  ================================
kind           written by                                 recognised by
=============  =========================================  ================================
sweep          ``attnflow sweep``                         ``tasks.json``
study          ``attnflow study run``                     ``study.json`` (a study name)
reproduction   ``attnflow reproduce``                     ``study.json`` (a reproduction)
pde run        ``attnflow run`` on a ``model: pde`` file  ``meta.json`` ``"kind": "pde"``
training run   ``attnflow train``                         the marker's kind, ``history.json``
probe          ``attnflow probe``                         ``probe.zarr``, or a probe's ``summary.json``
particle run   ``attnflow run``                           ``meta.json``/``config.yaml``/``data.zarr``
=============  =========================================  ================================
"""

from __future__ import annotations

from pathlib import Path

from .errors import CliError

__all__ = ["KINDS", "READERS", "detect", "refuse"]

#: the kinds, in the words the messages use
KINDS = ("particle run", "pde run", "training run", "study", "reproduction", "sweep", "probe")

#: for each kind, the commands that read it (the first is the one to suggest)
READERS: dict[str, tuple[str, ...]] = {
    "particle run": ("info", "plot", "animate", "report"),
    "pde run": ("info", "pde-plot"),
    "training run": ("info",),
    "study": ("info", "study show", "report"),
    "reproduction": ("info", "study show", "report"),
    "sweep": ("info", "plot", "report"),
    "probe": ("info", "report"),
}

_WHAT = {
    "particle run": "a particle run directory (attnflow run)",
    "pde run": "a PDE run directory (attnflow run on a `model: pde` config)",
    "training run": "a training run directory (attnflow train)",
    "study": "a study directory (attnflow study run)",
    "reproduction": "a reproduction directory (attnflow reproduce)",
    "sweep": "a sweep directory (attnflow sweep)",
    "probe": "a probe directory (attnflow probe)",
}

#: what each reading command does, for the refusals
_DOES = {
    "plot": "draws particle runs and sweeps",
    "animate": "animates the token cloud of a particle run",
    "report": "writes a page for particle runs, sweeps, studies, reproductions and probes",
    "study show": "shows study and reproduction directories",
    "pde-plot": "draws PDE runs",
    "info": "describes every kind",
}

#: where a kind's own figures are, when no other command draws it
_FIGURES = {
    "training run": "its figures are in {d}/figures (written by attnflow train)",
}


def detect(directory: Path) -> str:
    """The kind of ``directory`` (one of :data:`KINDS`).

    Raises
    ------
    CliError
        (exit 2) The path does not exist, is a file, or holds nothing attnflow writes.
    """
    from ..experiments.files import MARKER_FILE
    from ..experiments.store import CONFIG_FILE, DATA_DIR, META_FILE
    from ..experiments.sweep_data import TASKS_FILE
    from ..report.collect import json_object_or_empty, marked_kind
    from ..studies.runner import STUDY_FILE

    d = Path(directory)
    if not d.exists():
        raise CliError(
            f"{d} does not exist; give a directory written by attnflow (a run, PDE run, training run, "
            "sweep, study or reproduction)",
            2,
        )
    if not d.is_dir():
        raise CliError(f"{d} is a file; give a directory written by attnflow", 2)
    kind = marked_kind(d)  # sweep, study, reproduction, probe, run (any kind of run) or None
    if kind not in ("run", None):
        return kind
    marker = json_object_or_empty(d / MARKER_FILE)
    meta = json_object_or_empty(d / META_FILE)
    if marker.get("kind") == "training run" or (d / "history.json").is_file():
        return "training run"
    if meta.get("kind") == "pde":
        return "pde run"
    if kind == "run":
        return "particle run"
    raise CliError(
        f"{d} holds nothing attnflow writes (no {TASKS_FILE}, {STUDY_FILE}, {META_FILE}, {CONFIG_FILE} or "
        f"{DATA_DIR}); give a run, PDE run, training run, sweep, study, reproduction or probe directory",
        2,
    )


def describe(kind: str) -> str:
    """``'pde run'`` -> ``'a PDE run directory (attnflow run on a `model: pde` config)'``."""
    return _WHAT[kind]


def refuse(kind: str, command: str, directory: Path) -> CliError:
    """The refusal (exit 2) of ``attnflow COMMAND`` on a directory of a kind it does not read."""
    others = [c for c in READERS[kind] if c != command]
    use = " or ".join(f"`attnflow {c} {directory}`" for c in others)
    fig = _FIGURES.get(kind, "").format(d=directory) if (Path(directory) / "figures").is_dir() else ""
    tail = "; ".join(x for x in (fig, f"use {use}" if use else "") if x)
    return CliError(f"{directory} is {_WHAT[kind]}; `attnflow {command}` {_DOES[command]}; {tail}", 2)
