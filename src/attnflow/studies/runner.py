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

import json
import platform
import sys
import time
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..analysis.verdicts import VerdictRecord
from ..experiments.compute import TASK_FILE as COMPUTE_TASK_FILE
from ..experiments.config import ConfigError, config_diff, load_config
from ..experiments.files import CorruptFileError, atomic_write_text, inside, read_bounded, read_json, utc_now
from ..experiments.locking import DirectoryLock
from ..experiments.pde_runs import load_pde_config
from ..experiments.progress import format_duration, overall_progress
from ..experiments.store import CONFIG_FILE, META_FILE, read_meta
from ..experiments.sweep import TASKS_FILE, resolve_inputs, run_tasks
from ..experiments.training_config import load_training_config
from .base import RUN_KEY, Study, StudyResult, StudyRuns
from .errors import (
    NotAStudyDirectoryError,
    StudyMismatchError,
    StudyPlanError,
    StudyResultError,
    StudyRunError,
)
from .registry import get_study
from .render import Table, markdown
from .tasks import choose_workers, normalise_plan

__all__ = [
    "LOG_FILE",
    "RUNS_DIR",
    "STUDY_FILE",
    "SUMMARY_FILE",
    "TABLES_FILE",
    "TABLE_FILE",
    "StudySummary",
    "run_study",
    "study_info",
    "versions",
]

STUDY_FILE = "study.json"
SUMMARY_FILE = "summary.json"
TABLE_FILE = "table.md"
TABLES_FILE = "tables.json"
LOG_FILE = "run_log.json"
RUNS_DIR = "runs"


def versions() -> dict:
    """Python, platform and the versions of attnflow and the libraries its numbers depend on."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("attnflow", "torch", "numpy", "scipy", "xarray", "zarr", "numba", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, default=_json_default))


#: runner keys of the summary that change between two runs of the same study (kept in run_log.json)
_LOG_KEYS = ("started", "ended", "wall_time_s", "command", "workers")


class StudySummary(dict):
    """The summary of :func:`run_study` (as written to ``summary.json``).

    For one transition, the runner's keys of the old flat layout (``status``, ``config``, ``study``,
    ``quick``, ``runs``, ``figures``, ``wall_time_s``, ...) still read from it when the study's own summary
    has no such key: they come from ``summary["run"]`` and ``run_log.json``. New code reads
    ``summary["run"][...]``.
    """

    def __init__(self, data: dict, log: dict):
        super().__init__(data)
        self.log = log

    def __missing__(self, key: str) -> Any:
        run = dict.get(self, RUN_KEY, {})
        if key == "runs":
            return {
                name: {**t, **self.log.get("tasks", {}).get(name, {})}
                for name, t in run.get("tasks", {}).items()
            }
        if key in run:
            return run[key]
        if key in self.log:
            return self.log[key]
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


def _check_same_study(out: Path, name: str) -> None:
    """Refuse a directory that holds another study."""
    path = out / STUDY_FILE
    if path.is_file():
        other = json.loads(path.read_text()).get("study")
        if other != name:
            raise StudyMismatchError(
                f"{out} holds the study {other!r}, not {name!r}, so it cannot resume there; choose another "
                "out_dir or pass resume=False to overwrite it"
            )


def _task_diff(run_dir: Path, spec: dict) -> str | None:
    """What differs between the task stored in ``run_dir`` and ``spec`` (None: nothing, or nothing stored)."""
    kind = spec["kind"]
    if kind == "particle":
        path = run_dir / CONFIG_FILE
        if not path.is_file():
            return None
        try:
            diff = config_diff(load_config(path), load_config(resolve_inputs(spec, run_dir)["config"]))
        except ConfigError:
            return "(unreadable config.yaml)"
        return ", ".join(diff) or None
    if kind == "compute":
        path = run_dir / COMPUTE_TASK_FILE
        if not path.is_file():
            return None
        try:
            old = json.loads(path.read_text())
        except ValueError:
            return None  # a torn task file of a killed attempt: the task reruns
        if old.get("fn") != spec["fn"]:
            return f"fn ({old.get('fn')} -> {spec['fn']})"
        keys = sorted(
            k
            for k in {*old.get("params", {}), *spec["params"]}
            if old.get("params", {}).get(k) != spec["params"].get(k)
        )
        return f"params {', '.join(keys)}" if keys else None
    path = run_dir / CONFIG_FILE  # a PDE or a training run: config.yaml
    if not path.is_file():
        return None
    load = load_pde_config if kind == "pde" else load_training_config
    try:
        return None if load(path) == load(spec["config"]) else "config"
    except ConfigError:
        return "(unreadable config.yaml)"


def _check_same_runs(root: Path, specs: dict) -> None:
    """Refuse (before anything runs) a directory whose tasks hold other configs than the plan's."""
    by_keys: dict[str, list[str]] = {}
    for name, spec in specs.items():
        diff = _task_diff(root / name, spec)
        if diff:
            by_keys.setdefault(diff, []).append(name)
    if by_keys:
        what = "; ".join(f"{', '.join(names)} differ in {keys}" for keys, names in by_keys.items())
        raise StudyMismatchError(
            f"{root.parent} holds runs of other configs than these parameters plan ({what}), so the study "
            "cannot resume there; choose another out_dir or pass resume=False to overwrite it"
        )


def _plan(study: Study, config, device: str | None) -> tuple[dict[str, dict], dict[str, float]]:
    specs, costs = normalise_plan(study.plan(config), study.name, device)
    if not specs:
        raise StudyPlanError(
            f"study {study.name!r} plans no task: plan() returned an empty mapping. The rule: all the "
            "work of a study runs as tasks on the run store (so it resumes after a kill and runs on "
            "workers or Dask), and analyse() only reads their stored results. The fix: return the "
            "work from plan(), e.g. {'solve': ComputeTask(fn='my_module:solve', params={'seed': 0})} "
            "or {'run': experiment_config}, and read it in analyse() with runs.result('solve') or "
            "runs.open('run')"
        )
    return specs, costs


def _analyse(study: Study, config, runs: StudyRuns, out: Path, figures) -> tuple[dict, str, list, dict]:
    """Call the analysis; return (study summary, table markdown, table specs, figure files)."""
    res = study.analyse(config, runs, out)
    if not isinstance(res, StudyResult):
        raise StudyResultError(
            f"analyse() of study {study.name!r} must return a StudyResult: got {type(res).__name__}; return "
            "StudyResult(summary={...}, verdicts=[...], tables=[Table(...)])"
        )
    summary = dict(res.summary)
    _check_reserved(summary, study.name)
    if res.verdicts:
        if "verdicts" in summary:
            raise StudyResultError(
                f"study {study.name!r} gives verdict records twice (StudyResult.verdicts and "
                "summary['verdicts']); give them once, in StudyResult.verdicts"
            )
        bad = [type(r).__name__ for r in res.verdicts if not isinstance(r, VerdictRecord)]
        if bad:
            raise StudyResultError(
                f"StudyResult.verdicts of study {study.name!r} must be VerdictRecord objects: got {bad}; "
                "build them with record_test, record_identity or record_description (analysis.verdicts)"
            )
        summary["verdicts"] = [r.to_json() for r in res.verdicts]
    bad_tables = [type(t).__name__ for t in res.tables if not isinstance(t, Table)]
    if bad_tables:
        raise StudyResultError(
            f"StudyResult.tables of study {study.name!r} must be Table specs: got {bad_tables}; build them "
            "with attnflow.studies.render.Table(columns=[...], rows=[...])"
        )
    files: dict = {}
    if figures is not None:
        data = res.figure_data if res.figure_data is not None else summary
        files = dict(figures(data, out) or {})
    return summary, markdown(res.tables), [t.to_json() for t in res.tables], files


def _check_reserved(summary: dict, name: str) -> None:
    if RUN_KEY in summary:
        raise StudyResultError(
            f"the summary of study {name!r} uses the key {RUN_KEY!r}, which the runner reserves for its own "
            "record (study, config, tasks, status); rename that key of the study's summary"
        )


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
        Address of a Dask distributed scheduler; None runs locally.
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
    t_start = time.time()
    study = get_study(study) if isinstance(study, str) else study
    config = study.config(params, quick=quick)
    specs, costs = _plan(study, config, device)
    n_workers = choose_workers(costs, workers) if scheduler is None else None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with DirectoryLock(out, "study directory"):  # a second run_study on it is refused
        root = out / RUNS_DIR
        configs = {
            name: load_config(resolve_inputs(spec, root / name)["config"])
            for name, spec in specs.items()
            if spec["kind"] == "particle"
        }
        if resume:
            _check_same_study(out, study.name)
            _check_same_runs(root, specs)
        header = {
            "format": 2,
            "study": study.name,
            "description": study.description,
            "quick": bool(quick),
            "params": dict(params or {}),
            "config": config.model_dump(mode="json"),
            "runs": list(specs),
            "tasks": {name: spec["kind"] for name, spec in specs.items()},
            "attnflow_version": __version__,
            "started": utc_now(),
        }
        _write_json(out / STUDY_FILE, header)
        for stale in (SUMMARY_FILE, TABLE_FILE, TABLES_FILE, LOG_FILE):  # not "done" until this call succeeds
            (out / stale).unlink(missing_ok=True)

        count = {"k": 0}
        tracker = {"overall": None}
        after_run = getattr(study, "after_run", None)

        def report(name: str, res: dict) -> None:
            count["k"] += 1
            overall = tracker["overall"]
            overall.finish(name, skipped=bool(res.get("skipped")))
            if progress:
                what = "already complete, skipped" if res.get("skipped") else res["status"]
                took = "" if res.get("skipped") or "elapsed_s" not in res else f" in {res['elapsed_s']:.1f} s"
                est = overall.left_s()
                left = (
                    "" if count["k"] == len(specs) or est != est else f"; overall left {format_duration(est)}"
                )
                print(
                    f"[study {study.name}] task {count['k']}/{len(specs)} {name}: {what}{took}{left}",
                    flush=True,
                )
            if (
                after_run is not None
                and res.get("status") == "done"
                and not res.get("skipped")
                and count["k"] < len(specs)  # after the last task the analysis draws every figure at once
                and name in configs
            ):
                # e.g. the figures of a regime whose runs are now all finished; not for a task found complete
                # on a resume (the analysis draws every figure once the tasks are done: a resumed finished
                # study of 9 runs redrew each regime's figures 3 times over, ~20 CPU s at quick sizes)
                after_run(config, StudyRuns(root, configs, {}, specs), out, name, figures=figures)

        results: dict[str, dict] = {}
        if specs:
            with overall_progress({name: max(c, 1e-3) for name, c in costs.items()}) as overall:
                tracker["overall"] = overall
                results = run_tasks(
                    specs,
                    root,
                    scheduler=scheduler,
                    workers=n_workers,
                    resume=resume,
                    progress=progress,
                    label=f"study {study.name}",
                    run_progress=progress,
                    on_result=report,
                )
        results = {name: results[name] for name in specs if name in results}  # plan order, not finish order
        failed = {name: res for name, res in results.items() if res["status"] != "done"}
        record = {
            "study": study.name,
            "description": study.description,
            "config": config.model_dump(mode="json"),
            "quick": bool(quick),
            "status": "failed" if failed else "done",
            "attnflow_version": header["attnflow_version"],
            "versions": versions(),
            "tasks": {
                name: {"dir": f"{RUNS_DIR}/{name}", "kind": specs[name]["kind"], "status": res["status"]}
                for name, res in results.items()
            },
        }
        log = {
            "started": header["started"],
            "command": " ".join(sys.argv),
            "workers": "dask" if scheduler is not None else n_workers,
            "tasks": {
                name: {k: v for k, v in res.items() if k not in ("status", "traceback")}
                for name, res in results.items()
            },
        }

        def finish(summary: dict) -> StudySummary:
            log["ended"] = utc_now()
            log["wall_time_s"] = time.time() - t_start
            _write_json(out / LOG_FILE, log)
            _write_json(out / SUMMARY_FILE, summary)
            return StudySummary(summary, log)

        if failed:
            for name, res in failed.items():
                record["tasks"][name]["error"] = res.get("error")
            finish({RUN_KEY: record})
            lines = "\n  ".join(f"{name}: {res.get('error')}" for name, res in failed.items())
            raise StudyRunError(
                f"{len(failed)} of {len(specs)} tasks of study {study.name!r} failed:\n  {lines}\n"
                f"(each task's meta.json under {root} keeps its traceback; rerun the same command to resume)"
            )
        runs = StudyRuns(root, configs, results, specs)
        summary, table, tables, files = _analyse(study, config, runs, out, figures)
        if files:
            record["figures"] = files
        atomic_write_text(out / TABLE_FILE, table)
        if tables:
            _write_json(out / TABLES_FILE, {"tables": tables})
        return finish({**summary, RUN_KEY: record})


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
