"""One study's run in phases (plan, prepare, tasks, analyse): :class:`StudyJob`, the one code path of
:func:`attnflow.studies.run_study` (one study) and :func:`attnflow.studies.run_all` (every study's tasks in
one pool); the layout of the directory it writes is in :mod:`attnflow.studies.runner`.
"""

from __future__ import annotations

import contextlib
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
from ..dynamics.threads import torch_threads
from ..experiments.compute import TASK_FILE as COMPUTE_TASK_FILE
from ..experiments.config import ConfigError, config_diff, load_config
from ..experiments.files import atomic_write_text, utc_now
from ..experiments.pde_runs import load_pde_config
from ..experiments.progress import format_duration
from ..experiments.store import CONFIG_FILE
from ..experiments.sweep import local_cluster_size, resolve_inputs
from ..experiments.training_config import load_training_config
from .base import RUN_KEY, Study, StudyResult, StudyRuns
from .errors import StudyMismatchError, StudyPlanError, StudyResultError, StudyRunError
from .registry import get_study
from .render import Table, markdown
from .tasks import choose_workers, normalise_plan

__all__ = [
    "ANALYSIS_TORCH_THREADS",
    "LOG_FILE",
    "RUNS_DIR",
    "STUDY_FILE",
    "SUMMARY_FILE",
    "TABLES_FILE",
    "TABLE_FILE",
    "StudyJob",
    "StudySummary",
    "analysis_threads",
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


#: torch's intra-op threads in a study's analysis (and its ``after_run`` figures), in the runner's own
#: process: on a loaded 2-core machine torch's OpenMP threads spin while waiting for each other (longtime's
#: analysis took 228.6 s of CPU on 2 threads, 51.5 s on one: docs/performance.md 10.8); the analyses' torch
#: work is small, the tasks run on one thread already (:data:`attnflow.experiments.sweep.TASK_TORCH_THREADS`)
ANALYSIS_TORCH_THREADS = 1


def analysis_threads() -> contextlib.AbstractContextManager[int]:
    """Torch on :data:`ANALYSIS_TORCH_THREADS` threads in the enclosed analysis; the count restored after."""
    return torch_threads(ANALYSIS_TORCH_THREADS)


class StudyJob:
    """One study's run in its three phases, the one code path of :func:`run_study` and
    :func:`attnflow.studies.run_all.run_all`.

    1. **plan** (the constructor): the parameters validated, the tasks planned and the local workers chosen;
       nothing is written, so bad parameters fail before anything runs.
    2. **prepare** (:meth:`prepare`, with the study directory locked): the resume checks, ``study.json``, the
       results of an earlier run removed (the study is not "done" until :meth:`finish` succeeds).
    3. **tasks**: the caller runs :attr:`specs` into :attr:`root`
       (:func:`attnflow.experiments.sweep.run_tasks`, alone or in a pool shared with other studies) and
       hands every result to :meth:`task_done`.
    4. **analyse** (:meth:`finish`, once every task has a result): the analysis (torch on one thread,
       :func:`analysis_threads`), ``summary.json``, ``table.md``, ``tables.json``, the figures,
       ``run_log.json``.

    Parameters are those of :func:`run_study`; ``t_start`` (``time.time()``) is when the run began (the
    wall time in ``run_log.json`` counts from it), ``key`` prefixes the task names in the progress
    estimate (:attr:`overall`) that :meth:`task_done` updates.
    """

    def __init__(
        self,
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
        t_start: float | None = None,
        key: str = "",
    ):
        local_cluster_size(scheduler)  # a malformed local:N is refused before anything is planned
        self.t_start = time.time() if t_start is None else t_start
        self.study = get_study(study) if isinstance(study, str) else study
        self.params = dict(params or {})
        self.quick = bool(quick)
        self.config = self.study.config(params, quick=quick)
        self.specs, self.costs = _plan(self.study, self.config, device)
        self.scheduler = scheduler
        self.n_workers = choose_workers(self.costs, workers) if scheduler is None else None
        self.resume, self.progress, self.figures, self.key = resume, progress, figures, key
        self.out = Path(out_dir)
        self.root = self.out / RUNS_DIR
        self.results: dict[str, dict] = {}
        self.overall = None  # an OverallProgress whose work names are key + task name
        self.configs: dict = {}
        self.header: dict = {}
        self.analysis_s = {"wall_s": 0.0, "cpu_s": 0.0}

    @property
    def name(self) -> str:
        return self.study.name

    @property
    def complete(self) -> bool:
        """Every planned task has a result."""
        return len(self.results) == len(self.specs)

    def work(self) -> dict[str, float]:
        """The estimated seconds of each task, by progress name (key + task name), for an OverallProgress."""
        return {self.key + name: max(c, 1e-3) for name, c in self.costs.items()}

    def prepare(self) -> None:
        """Check the directory (resume), write ``study.json``, remove an earlier run's results. Call it with
        the study directory locked (:class:`~attnflow.experiments.locking.DirectoryLock`)."""
        self.configs = {
            name: load_config(resolve_inputs(spec, self.root / name)["config"])
            for name, spec in self.specs.items()
            if spec["kind"] == "particle"
        }
        if self.resume:
            _check_same_study(self.out, self.name)
            _check_same_runs(self.root, self.specs)
        self.header = {
            "format": 2,
            "study": self.name,
            "description": self.study.description,
            "quick": self.quick,
            "params": self.params,
            "config": self.config.model_dump(mode="json"),
            "runs": list(self.specs),
            "tasks": {name: spec["kind"] for name, spec in self.specs.items()},
            "attnflow_version": __version__,
            "started": utc_now(),
        }
        _write_json(self.out / STUDY_FILE, self.header)
        for stale in (SUMMARY_FILE, TABLE_FILE, TABLES_FILE, LOG_FILE):  # not "done" until finish() succeeds
            (self.out / stale).unlink(missing_ok=True)

    def task_done(self, name: str, res: dict) -> None:
        """Record task ``name``'s result (``on_result`` of run_tasks): the progress line, the study's
        ``after_run`` hook (figures of a finished part while other tasks run)."""
        self.results[name] = res
        k, n = len(self.results), len(self.specs)
        overall = self.overall
        if overall is not None:
            overall.finish(self.key + name, skipped=bool(res.get("skipped")))
        if self.progress:
            what = "already complete, skipped" if res.get("skipped") else res["status"]
            took = "" if res.get("skipped") or "elapsed_s" not in res else f" in {res['elapsed_s']:.1f} s"
            est = overall.left_s() if overall is not None else float("nan")
            left = "" if k == n or est != est else f"; overall left {format_duration(est)}"
            print(f"[study {self.name}] task {k}/{n} {name}: {what}{took}{left}", flush=True)
        after_run = getattr(self.study, "after_run", None)
        if (
            after_run is not None
            and res.get("status") == "done"
            and not res.get("skipped")
            and k < n  # after the last task the analysis draws every figure at once
            and name in self.configs
        ):
            # e.g. the figures of a regime whose runs are now all finished; not for a task found complete
            # on a resume (the analysis draws every figure once the tasks are done: a resumed finished
            # study of 9 runs redrew each regime's figures 3 times over, ~20 CPU s at quick sizes)
            with analysis_threads():
                after_run(
                    self.config, StudyRuns(self.root, self.configs, {}, self.specs), self.out, name,
                    figures=self.figures,
                )  # fmt: skip

    def finish(self) -> StudySummary:
        """Analyse the finished tasks and write the study's results (see the class docstring).

        Raises
        ------
        StudyRunError
            Some tasks failed: ``summary.json`` records the per-task status and no analysis is made.
        StudyResultError
            The analysis' result breaks a rule.
        """
        results = {name: self.results[name] for name in self.specs if name in self.results}  # plan order
        failed = {name: res for name, res in results.items() if res["status"] != "done"}
        record = {
            "study": self.name,
            "description": self.study.description,
            "config": self.config.model_dump(mode="json"),
            "quick": self.quick,
            "status": "failed" if failed else "done",
            "attnflow_version": self.header["attnflow_version"],
            "versions": versions(),
            "tasks": {
                name: {"dir": f"{RUNS_DIR}/{name}", "kind": self.specs[name]["kind"], "status": res["status"]}
                for name, res in results.items()
            },
        }
        log = {
            "started": self.header["started"],
            "command": " ".join(sys.argv),
            "workers": "dask" if self.scheduler is not None else self.n_workers,
            "tasks": {
                name: {k: v for k, v in res.items() if k not in ("status", "traceback")}
                for name, res in results.items()
            },
        }

        def written(summary: dict) -> StudySummary:
            log["ended"] = utc_now()
            log["wall_time_s"] = time.time() - self.t_start
            _write_json(self.out / LOG_FILE, log)
            _write_json(self.out / SUMMARY_FILE, summary)
            return StudySummary(summary, log)

        if failed:
            for name, res in failed.items():
                record["tasks"][name]["error"] = res.get("error")
            written({RUN_KEY: record})
            lines = "\n  ".join(f"{name}: {res.get('error')}" for name, res in failed.items())
            raise StudyRunError(
                f"{len(failed)} of {len(self.specs)} tasks of study {self.name!r} failed:\n  {lines}\n"
                f"(each task's meta.json under {self.root} keeps its traceback; rerun the same command to "
                "resume)"
            )
        runs = StudyRuns(self.root, self.configs, results, self.specs)
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            with analysis_threads():
                summary, table, tables, files = _analyse(
                    self.study, self.config, runs, self.out, self.figures
                )
        finally:
            self.analysis_s = {"wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0}
        if files:
            record["figures"] = files
        atomic_write_text(self.out / TABLE_FILE, table)
        if tables:
            _write_json(self.out / TABLES_FILE, {"tables": tables})
        return written({**summary, RUN_KEY: record})
