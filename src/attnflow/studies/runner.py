"""Run a study into its directory and read one back: :func:`run_study`, :func:`study_info`.

Layout of a study directory::

    study.json      the study name, its validated config, the planned tasks (written before any task)
    runs/<name>/    one run directory per planned task (:mod:`attnflow.experiments.store`,
                    :mod:`attnflow.experiments.compute`, ...)
    summary.json    the analysis' numbers, its verdict records (``verdicts``) and, under the reserved key
                    ``run``, the runner's record: study, description, config, quick, status, versions,
                    per-task kind and status, figures. The same stored results give the same bytes.
    run_log.json    what changes from one run to the next: start and end times, wall time, command,
                    workers, per-task elapsed time, skipped, attempts
    table.md        the tables of the analysis, rendered by :mod:`attnflow.studies.render`
    tables.json     the table specs (columns and rows) the report renders as HTML
    *.png           the figures (when a figure callback is given)

Resuming. ``run_study`` on a directory that holds the same study skips the finished tasks and continues
the interrupted ones (particle runs from their checkpoints; a computation from its start), so a killed
study resumes; parameters that only change the analysis (e.g. an averaging window) re-analyse the
stored results. Parameters that change a task are refused before anything runs
(:class:`StudyMismatchError`) unless ``resume=False``, which reruns every task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..experiments.files import CorruptFileError, inside, read_bounded, read_json
from ..experiments.locking import DirectoryLock
from ..experiments.progress import overall_progress
from ..experiments.store import META_FILE, read_meta
from ..experiments.sweep import TASKS_FILE, run_tasks
from .base import RUN_KEY, Study
from .errors import NotAStudyDirectoryError
from .job import (
    ANALYSIS_TORCH_THREADS,
    LOG_FILE,
    RUNS_DIR,
    STUDY_FILE,
    SUMMARY_FILE,
    TABLE_FILE,
    TABLES_FILE,
    StudyJob,
    StudySummary,
    analysis_threads,
    versions,
)

__all__ = [
    "LOG_FILE",
    "RUNS_DIR",
    "STUDY_FILE",
    "SUMMARY_FILE",
    "TABLES_FILE",
    "TABLE_FILE",
    "ANALYSIS_TORCH_THREADS",
    "StudyJob",
    "StudySummary",
    "analysis_threads",
    "run_study",
    "study_info",
    "versions",
]


def run_study(
    study: Study | str,
    out_dir: str | Path,
    *,
    params: Mapping[str, Any] | None = None,
    quick: bool = False,
    scheduler: str | None = None,
    workers: int | None = None,
    resume: bool = True,
    progress: bool = False,
    figures: Callable[..., dict] | None = None,
    device: str | None = None,
) -> StudySummary:
    """Plan, run (resumably, locally or on Dask) and analyse a study into ``out_dir``.

    Parameters
    ----------
    study : Study or str
        A study, the name of a registered one (:func:`~attnflow.studies.available_studies`), or
        ``path/to/file.py:ClassName`` (:func:`~attnflow.studies.get_study`).
    out_dir : path
        The study directory (see the module docstring for its layout).
    params : mapping or None
        Study parameters (validated by the study's ``Config``); they override the quick variant's.
    quick : bool
        Start from the study's quick parameters (a run of seconds, for CI).
    scheduler : str or None
        Address of a Dask distributed scheduler, or ``"local"`` / ``"local:N"`` (a Dask cluster on this
        machine started for the study, :func:`~attnflow.experiments.sweep.local_cluster_size`); None runs
        locally.
    workers : int or None
        Local worker processes; 1 runs the tasks one after the other in this process. None picks by the
        work (:func:`attnflow.studies.tasks.choose_workers`: one process below 30 estimated seconds).
    resume : bool
        Reuse finished tasks and continue interrupted ones; ``False`` reruns every task.
    progress : bool
        One line per task on stdout and progress bars on stderr (bars only on a terminal).
    figures : callable or None
        The plot layer's figure function for this study (``attnflow.plot.figures_for(name)``), called as
        ``figures(data, out_dir) -> {key: file}`` (:data:`~attnflow.studies.base.FigureCallback`); None
        draws no figure (the study layer never imports the plot layer).
    device : str or None
        Run every particle run on this device (``cpu``, ``cuda``, ``cuda:N``; checked before anything
        runs); None keeps the devices of the planned configs.

    Returns
    -------
    StudySummary
        The summary also written to ``out_dir/summary.json``: the study's numbers, ``verdicts``, and the
        runner's record under ``run``.

    Raises
    ------
    StudyConfigError
        Bad parameters (rule, value, fix), before anything runs.
    StudyPlanError
        The plan declares no task.
    StudyMismatchError
        ``resume=True`` and ``out_dir`` holds runs of other configs.
    StudyRunError
        Some tasks failed (each task's ``meta.json`` keeps its traceback); ``summary.json`` records the
        per-task status and no analysis is made.
    StudyResultError
        The analysis' summary uses the reserved key ``run``, or its result has the wrong types.
    """
    job = StudyJob(
        study, out_dir, params=params, quick=quick, scheduler=scheduler, workers=workers, resume=resume,
        progress=progress, figures=figures, device=device,
    )  # fmt: skip
    job.out.mkdir(parents=True, exist_ok=True)
    with DirectoryLock(job.out, "study directory"):  # a second run_study on it is refused
        job.prepare()
        with overall_progress(job.work()) as overall:
            job.overall = overall
            run_tasks(
                job.specs,
                job.root,
                scheduler=scheduler,
                workers=job.n_workers,
                resume=resume,
                progress=progress,
                label=f"study {job.name}",
                run_progress=progress,
                on_result=job.task_done,
            )
        return job.finish()


def study_info(out_dir: str | Path) -> dict:
    """What a study directory holds: study, config, status, per-run status (live) and the table.

    Returns
    -------
    dict
        ``study``, ``description``, ``config``, ``quick``, ``status`` (``done``, ``failed``, or
        ``incomplete`` while runs are missing or unfinished), ``runs`` (name -> status, from each run's
        ``meta.json``), ``counts``, ``table`` (the Markdown of ``table.md``, or None), ``wall_time_s``.

    Raises
    ------
    NotAStudyDirectoryError
        If ``out_dir`` holds no ``study.json``.
    CorruptFileError
        ``study.json`` / ``summary.json`` unreadable, of the wrong layout or too large.
    UnsafePathError
        A file or a run it names resolves outside the directory.
    """
    out = Path(out_dir)
    path = out / STUDY_FILE
    if not path.is_file():
        kind = ""
        if (out / TASKS_FILE).is_file():
            kind = " (it is a sweep directory: attnflow.experiments.sweep_info describes it)"
        elif (out / META_FILE).is_file():
            kind = " (it is a run directory: attnflow.experiments.run_info describes it)"
        elif not out.is_dir():
            kind = " (no such directory)"
        raise NotAStudyDirectoryError(
            f"{out} is not a study directory: {STUDY_FILE} not found{kind}; write one with "
            "run_study(name, out_dir) (available_studies() names the studies)"
        )
    # a received directory: bounded regular files, inside the directory, of the right JSON types
    fix = "rerun the study (run_study(name, out_dir)) to rewrite it"
    header = read_json(inside(out, path, what="study file"), "the study file", fix)
    summary = {}
    if (out / SUMMARY_FILE).is_file() or (out / SUMMARY_FILE).is_symlink():
        summary = read_json(inside(out, out / SUMMARY_FILE, what="study summary"), "the study summary", fix)
    log = {}
    if (out / LOG_FILE).is_file() or (out / LOG_FILE).is_symlink():
        log = read_json(inside(out, out / LOG_FILE, what="study log"), "the study log", fix)
    if not (isinstance(header, dict) and isinstance(header.get("study"), str)):
        raise CorruptFileError(f"the study file {path} is not a JSON object naming its study; {fix}")
    layout_ok = isinstance(header.get("runs", []), list) and all(isinstance(o, dict) for o in (summary, log))
    if not layout_ok:
        raise CorruptFileError(f"the study file {path}, its summary or its log has the wrong layout; {fix}")
    if isinstance(summary.get(RUN_KEY), dict):  # format 2: the runner's record under "run"
        summary = StudySummary(summary, log)
        record = summary[RUN_KEY]
        stored = record.get("tasks", {})
        status_of = record.get("status")
    else:  # format 1 (committed before issue 30): the runner's keys at the top level
        stored = summary.get("runs", {})
        status_of = summary.get("status")
    stored = stored if isinstance(stored, dict) else {}
    # committed results (docs/studies/NAME) keep summary.json, table.md and figures, not the run directories
    committed = bool(summary) and not (out / RUNS_DIR).is_dir()
    runs = {}
    for name in header.get("runs", []):
        if committed:
            entry = stored.get(name) if isinstance(name, str) else None
            status = entry.get("status", "done") if isinstance(entry, dict) else "done"
            runs[str(name)] = f"{status} (run directory not stored)"
        else:
            if not isinstance(name, str) or not name:
                raise CorruptFileError(
                    f"the study file {path} names a run {name!r} that is not a name; {fix}"
                )
            meta = read_meta(inside(out / RUNS_DIR, out / RUNS_DIR / name, what="run directory"))
            st = meta.get("status", "pending")
            if st in ("running", "interrupted", "failed") and meta.get("n_steps"):
                st = f"{st} (step {meta.get('step', 0)} of {meta['n_steps']})"
            runs[name] = st
    counts: dict[str, int] = {}
    for st in runs.values():
        key = st.split(" (")[0]
        counts[key] = counts.get(key, 0) + 1
    finished = all(st.startswith("done") for st in runs.values())
    status = status_of or ("done" if committed else "incomplete")
    if status == "done" and not finished:
        status = "incomplete"
    table = None
    if (out / TABLE_FILE).is_file() or (out / TABLE_FILE).is_symlink():
        raw = read_bounded(
            inside(out, out / TABLE_FILE, what="study table"), 16 * 2**20, "the study table", fix
        )
        table = raw.decode("utf-8", "replace")
    return {
        "dir": str(out),
        "study": header["study"],
        "description": header.get("description", ""),
        "quick": header.get("quick", False),
        "config": header.get("config", {}),
        "status": status,
        "runs": runs,
        "counts": counts,
        "table": table,
        "started": summary.get("started", header.get("started")),
        "ended": summary.get("ended"),
        "wall_time_s": summary.get("wall_time_s"),
        "figures": summary.get("figures") or {},
        "attnflow_version": summary.get("attnflow_version"),
    }
