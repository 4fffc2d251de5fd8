"""Run every registered study (or a selection) with the tasks of all of them in ONE pool: :func:`run_all`.

``attnflow study run-all --out DIR`` runs the union of the selected studies' tasks on one set of workers
(local processes, default one per core, or a Dask cluster), the longest estimated task first across the
studies, and analyses each study (figures, summary, table) as soon as its own tasks are done, while the
other studies' tasks keep the workers busy. Each study goes through the phases of
:class:`~attnflow.studies.job.StudyJob`, the code path of :func:`~attnflow.studies.run_study`, so
``DIR/<study>`` is what ``run_study(study, DIR/<study>)`` writes (same layout, same summary numbers bit for
bit: a task's numbers do not depend on where it runs), ``attnflow study show DIR/<study>`` reads it, and a
single-study run on it resumes. Killed and rerun, ``run_all`` resumes every study.

A study that fails (bad parameters, a directory holding another study, a failed task, an analysis that
raises) does not stop the others: its status and error are recorded. ``DIR/run_all.json`` records every
study's status, tasks, the time it was done (from the start), its tasks' wall and CPU seconds in the workers
and its analysis' wall and CPU seconds, and the totals.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..experiments.files import atomic_write_text, utc_now
from ..experiments.locking import DirectoryLock
from ..experiments.progress import overall_progress
from ..experiments.sweep import local_cluster_size, run_tasks
from .errors import StudyRunError, UnknownStudyError
from .job import RUNS_DIR, StudyJob
from .registry import available_studies

__all__ = ["RUN_ALL_FILE", "run_all", "select_studies"]

#: the record of a run-all, in its directory
RUN_ALL_FILE = "run_all.json"


def select_studies(only: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> list[str]:
    """The registered studies ``only`` names (all when None), less those ``exclude`` names, sorted.

    Raises
    ------
    UnknownStudyError
        A name in ``only`` or ``exclude`` is not a registered study (the message lists them), or nothing is
        left to run.
    """
    registered = sorted(available_studies())
    for option, names in (("only", only), ("exclude", exclude)):
        unknown = [n for n in (names or ()) if n not in registered]
        if unknown:
            raise UnknownStudyError(
                f"{option} names {', '.join(repr(n) for n in unknown)}, not a registered study; the "
                f"registered studies: {', '.join(registered)} (`attnflow study list`)"
            )
    chosen = [n for n in registered if only is None or n in set(only)]
    chosen = [n for n in chosen if n not in set(exclude or ())]
    if not chosen:
        raise UnknownStudyError(
            f"no study left to run (only {sorted(only) if only is not None else 'all'}, exclude "
            f"{sorted(exclude or ())}); name at least one of: {', '.join(registered)}"
        )
    return chosen


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process and its terminated, waited-for children (the workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run_all(
    out_dir: str | Path,
    *,
    only: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
    quick: bool = False,
    scheduler: str | None = None,
    workers: int | None = None,
    resume: bool = True,
    progress: bool = False,
    figures: Callable[[str], Callable[..., dict] | None] | None = None,
) -> dict:
    """Run the selected studies into ``out_dir/<study>``, their tasks in one pool.

    Parameters
    ----------
    out_dir : path
        The run-all directory: one study directory per study (the layout of
        :mod:`attnflow.studies.runner`) and ``run_all.json``.
    only, exclude : iterable of str or None
        Registered study names to run (None: every one) and to leave out (:func:`select_studies`).
    quick : bool
        Every study's quick variant.
    scheduler : str or None
        Address of a Dask distributed scheduler, or ``"local"`` / ``"local:N"`` (a Dask cluster on this
        machine started for the run-all, :func:`~attnflow.experiments.sweep.local_cluster_size`); None runs
        a local process pool.
    workers : int or None
        Local worker processes shared by all the studies' tasks; None: one per core (``os.cpu_count()``);
        1 runs the tasks one after the other in this process.
    resume : bool
        Reuse finished tasks and continue interrupted ones, study by study; ``False`` reruns every task.
    progress : bool
        One line per task and per finished study on stdout, a bar of the tasks on stderr (on a terminal).
    figures : callable or None
        ``figures(name)`` gives the plot layer's figure function of a study
        (``attnflow.plot.figures_for``); None draws no figure.

    Returns
    -------
    dict
        What ``run_all.json`` holds: ``studies`` (name -> ``status`` (``done`` / ``failed``), ``error``,
        ``tasks``, ``skipped``, ``failed_tasks``, ``done_after_s`` (seconds from the start until its results
        were written), ``tasks_wall_s`` and ``tasks_cpu_s`` (sums over its tasks run now, inside the
        workers), ``analysis_wall_s``, ``analysis_cpu_s``), ``wall_s``, ``cpu_s`` (this process and its
        local workers), ``workers``, ``status`` (``done`` when every study is).

    Raises
    ------
    UnknownStudyError
        ``only`` or ``exclude`` names an unregistered study (before anything runs).
    DirectoryLockedError
        Another process runs a run-all in ``out_dir``.
    """
    names = select_studies(only, exclude)
    local_cluster_size(scheduler)  # a malformed local:N is refused before anything is written
    t0, cpu0 = time.time(), _cpu_s()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n_workers = None if scheduler is not None else max(1, int(workers or os.cpu_count() or 1))
    record: dict[str, Any] = {
        "started": utc_now(),
        "command": " ".join(sys.argv),
        "quick": bool(quick),
        "workers": "dask" if scheduler is not None else n_workers,
        "cpus": os.cpu_count(),
        "load_before": list(os.getloadavg()),
        "studies": {},
    }
    rows: dict[str, dict] = record["studies"]
    with DirectoryLock(out, "run-all directory"), contextlib.ExitStack() as locks:
        jobs: dict[str, StudyJob] = {}
        for name in names:  # plan and prepare each study; one that cannot start does not stop the others
            rows[name] = {"status": "failed"}
            try:
                job = StudyJob(
                    name, out / name, quick=quick, scheduler=scheduler, workers=n_workers, resume=resume,
                    progress=progress, figures=figures(name) if figures is not None else None,
                    t_start=t0, key=f"{name}/",
                )  # fmt: skip
                job.out.mkdir(parents=True, exist_ok=True)
                locks.enter_context(DirectoryLock(job.out, "study directory"))
                job.prepare()
            except Exception as exc:  # noqa: BLE001 - reported in the study's row, the others go on
                rows[name].update(error=f"cannot start: {_error(exc)}", done_after_s=time.time() - t0)
                if progress:
                    print(f"[run-all] {name}: failed to start ({_error(exc)})", flush=True)
                continue
            jobs[name] = job
            rows[name].update(status="running", tasks=len(job.specs))
        _write(out, record, t0, cpu0)

        def analyse(job: StudyJob) -> None:
            row = rows[job.name]
            res = job.results.values()
            row.update(
                skipped=sum(bool(r.get("skipped")) for r in res),
                failed_tasks=sum(r["status"] != "done" for r in res),
                tasks_wall_s=sum(float(r.get("elapsed_s", 0.0)) for r in res),
                tasks_cpu_s=sum(float(r.get("cpu_s", 0.0)) for r in res),
            )
            try:
                job.finish()
                row["status"] = "done"
            except StudyRunError as exc:
                row["error"] = str(exc).splitlines()[0]
            except Exception as exc:  # noqa: BLE001 - an analysis that raises fails its study only
                row["error"] = f"analysis failed: {_error(exc)}"
            else:
                row.pop("error", None)
            if row["status"] != "done":
                row["status"] = "failed"
            row.update(
                done_after_s=time.time() - t0,
                analysis_wall_s=job.analysis_s["wall_s"],
                analysis_cpu_s=job.analysis_s["cpu_s"],
            )
            if progress:
                print(f"[run-all] {job.name}: {row['status']} after {row['done_after_s']:.0f} s", flush=True)
            _write(out, record, t0, cpu0)

        # a study found complete (every task skipped) is analysed once the workers have work, not before
        ready: list[StudyJob] = []
        owner: dict[str, tuple[StudyJob, str]] = {}
        order = []
        for job in jobs.values():
            for task, cost in job.costs.items():
                key = f"{job.name}/{RUNS_DIR}/{task}"
                owner[key] = (job, task)
                order.append((-cost, len(order), key, job.specs[task]))
        order.sort()  # the longest estimated first; equal estimates in study, then plan order

        def on_result(key: str, res: dict) -> None:
            job, task = owner[key]
            job.task_done(task, res)
            if job.complete:
                ready.append(job)
            if not res.get("skipped"):
                while ready:
                    analyse(ready.pop(0))

        work = {f"{job.name}/{t}": c for job in jobs.values() for t, c in job.work().items()}
        try:
            with overall_progress(work) as overall:
                for job in jobs.values():
                    job.overall = overall
                run_tasks(
                    {key: spec for _, _, key, spec in order},
                    out,
                    scheduler=scheduler,
                    workers=n_workers,
                    resume=resume,
                    progress=progress,
                    label="run-all",
                    run_progress=progress,
                    on_result=on_result,
                )
            while ready:
                analyse(ready.pop(0))
        except BaseException as exc:  # e.g. Ctrl-C: what was finished stays recorded; a rerun resumes
            for row in rows.values():
                if row["status"] == "running":
                    row.update(status="interrupted", error=_error(exc) or type(exc).__name__)
            _write(out, record, t0, cpu0, ended=True)
            raise
        for name, job in jobs.items():  # every task reports (run_tasks' on_result); kept as a safety net
            if rows[name]["status"] == "running":
                missing = len(job.specs) - len(job.results)
                error = f"{missing} of its {len(job.specs)} tasks never reported"
                rows[name].update(status="failed", error=error)
        return _write(out, record, t0, cpu0, ended=True)


def _write(out: Path, record: dict, t0: float, cpu0: float, *, ended: bool = False) -> dict:
    """Update the totals, write ``run_all.json`` (after every study: a killed run-all leaves a record)."""
    rows = record["studies"]
    record["wall_s"] = time.time() - t0
    record["cpu_s"] = _cpu_s() - cpu0
    record["done"] = sorted(n for n, r in rows.items() if r["status"] == "done")
    record["failed"] = sorted(n for n, r in rows.items() if r["status"] in ("failed", "interrupted"))
    if len(record["done"]) == len(rows):
        record["status"] = "done"
    elif any(r["status"] == "interrupted" for r in rows.values()):
        record["status"] = "interrupted"
    else:
        record["status"] = "failed" if ended else "running"
    if ended:
        record["ended"] = utc_now()
        record["load_after"] = list(os.getloadavg())
    atomic_write_text(out / RUN_ALL_FILE, json.dumps(record, indent=1) + "\n")
    return record
