"""Run a study into its directory and read one back: :func:`run_study`, :func:`study_info`.

Layout of a study directory::

    study.json      the study name, its validated config, the planned runs (written before any run)
    runs/<name>/    one run directory per planned run (:mod:`attnflow.experiments.store`)
    summary.json    the analysis' numbers + study, config, attnflow version, wall time, per-run status
    table.md        the analysis' Markdown table
    *.png           the figures (when a figure callback is given)

Resuming. ``run_study`` on a directory that holds the same study skips the finished runs and continues
the interrupted ones from their checkpoints (a killed study resumes); parameters that only change the
analysis (e.g. an averaging window) re-analyse the stored runs. Parameters that change a run are refused
before anything runs (:class:`StudyMismatchError`) unless ``resume=False``, which reruns every run.
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
from ..experiments.builder import paths_computed
from ..experiments.config import ConfigError, config_diff, load_config
from ..experiments.files import CorruptFileError, atomic_write_text, inside, read_bounded, read_json, utc_now
from ..experiments.locking import DirectoryLock
from ..experiments.progress import format_duration, overall_progress
from ..experiments.schema import with_device
from ..experiments.store import CONFIG_FILE, META_FILE, read_meta
from ..experiments.sweep import TASKS_FILE, run_tasks
from .base import Study, StudyRuns
from .errors import NotAStudyDirectoryError, StudyMismatchError, StudyRunError
from .registry import get_study

__all__ = ["RUNS_DIR", "STUDY_FILE", "SUMMARY_FILE", "TABLE_FILE", "run_study", "study_info", "versions"]

STUDY_FILE = "study.json"
SUMMARY_FILE = "summary.json"
TABLE_FILE = "table.md"
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


def run_work(cfg) -> float:
    """The work of one run for the overall time estimate: paths computed x n^2 x H x steps (+ overhead)."""
    n = getattr(cfg.tokens, "n", 100)
    return float(paths_computed(cfg)) * (n * n * cfg.heads.H + 2000.0) * cfg.integrator.n_steps


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


def _check_same_runs(root: Path, configs: dict) -> None:
    """Refuse (before anything runs) a directory whose runs hold other configs than the plan's."""
    by_keys: dict[str, list[str]] = {}
    for name, cfg in configs.items():
        path = root / name / CONFIG_FILE
        if not path.is_file():
            continue
        try:
            diff = config_diff(load_config(path), cfg)
        except ConfigError:
            diff = ["(unreadable config.yaml)"]
        if diff:
            by_keys.setdefault(", ".join(diff), []).append(name)
    if by_keys:
        what = "; ".join(f"{', '.join(names)} differ in {keys}" for keys, names in by_keys.items())
        raise StudyMismatchError(
            f"{root.parent} holds runs of other configs than these parameters plan ({what}), so the study "
            "cannot resume there; choose another out_dir or pass resume=False to overwrite it"
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
) -> dict:
    """Plan, run (resumably, locally or on Dask) and analyse a study into ``out_dir``.

    Parameters
    ----------
    study : Study or str
        A study or the name of a registered one (:func:`~attnflow.studies.available_studies`).
    out_dir : path
        The study directory (see the module docstring for its layout).
    params : mapping or None
        Study parameters (validated by the study's ``Config``); they override the quick variant's.
    quick : bool
        Start from the study's quick parameters (a run of seconds, for CI).
    scheduler : str or None
        Address of a Dask distributed scheduler; None runs locally.
    workers : int or None
        Local worker processes (default ``min(runs, os.cpu_count())``); 1 runs them one after the
        other in this process.
    resume : bool
        Reuse finished runs and continue interrupted ones; ``False`` reruns every run.
    progress : bool
        One line per run on stdout and progress bars on stderr (bars only on a terminal).
    figures : callable or None
        The plot layer's figure function for this study (``attnflow.plot.figures_for(name)``), passed
        to the analysis; None draws no figure (the study layer never imports the plot layer).
    device : str or None
        Run every run on this device (``cpu``, ``cuda``, ``cuda:N``; checked before anything runs);
        None keeps the devices of the planned configs.

    Returns
    -------
    dict
        The summary also written to ``out_dir/summary.json``.

    Raises
    ------
    StudyConfigError
        Bad parameters (rule, value, fix), before anything runs.
    StudyMismatchError
        ``resume=True`` and ``out_dir`` holds runs of other configs.
    StudyRunError
        Some runs failed (each run's ``meta.json`` keeps its traceback); ``summary.json`` records the
        per-run status and no analysis is made.
    """
    t_start = time.time()
    study = get_study(study) if isinstance(study, str) else study
    config = study.config(params, quick=quick)
    configs = {name: with_device(load_config(cfg), device) for name, cfg in study.plan(config).items()}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with DirectoryLock(out, "study directory"):  # a second run_study on it is refused
        root = out / RUNS_DIR
        if resume:
            _check_same_study(out, study.name)
            _check_same_runs(root, configs)
        header = {
            "format": 1,
            "study": study.name,
            "description": study.description,
            "quick": bool(quick),
            "params": dict(params or {}),
            "config": config.model_dump(mode="json"),
            "runs": list(configs),
            "attnflow_version": __version__,
            "started": utc_now(),
        }
        _write_json(out / STUDY_FILE, header)
        for stale in (SUMMARY_FILE, TABLE_FILE):  # until this call succeeds, the directory is not "done"
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
                    ""
                    if count["k"] == len(configs) or est != est
                    else f"; overall left {format_duration(est)}"
                )
                print(
                    f"[study {study.name}] run {count['k']}/{len(configs)} {name}: {what}{took}{left}",
                    flush=True,
                )
            if after_run is not None and res.get("status") == "done":
                # e.g. the figures of a regime whose runs are now all finished
                after_run(config, StudyRuns(root, configs, {}), out, name, figures=figures)

        with overall_progress({name: run_work(cfg) for name, cfg in configs.items()}) as overall:
            tracker["overall"] = overall
            results = run_tasks(
                configs,
                root,
                scheduler=scheduler,
                workers=workers,
                resume=resume,
                progress=progress,
                label=f"study {study.name}",
                run_progress=progress,
                on_result=report,
            )
        run_status = {
            name: {"dir": f"{RUNS_DIR}/{name}", **{k: v for k, v in res.items() if k != "traceback"}}
            for name, res in results.items()
        }
        failed = {name: res for name, res in results.items() if res["status"] != "done"}
        generic = {
            "study": study.name,
            "description": study.description,
            "config": config.model_dump(mode="json"),
            "quick": bool(quick),
            "attnflow_version": header["attnflow_version"],
            "versions": versions(),
            "command": " ".join(sys.argv),
            "started": header["started"],
            "runs": run_status,
        }
        if failed:
            summary = {
                **generic,
                "status": "failed",
                "ended": utc_now(),
                "wall_time_s": time.time() - t_start,
            }
            _write_json(out / SUMMARY_FILE, summary)
            lines = "\n  ".join(f"{name}: {res.get('error')}" for name, res in failed.items())
            raise StudyRunError(
                f"{len(failed)} of {len(configs)} runs of study {study.name!r} failed:\n  {lines}\n"
                f"(each run's meta.json under {root} keeps its traceback; rerun the same command to resume)"
            )
        analysis = study.analyse(config, StudyRuns(root, configs, results), out, figures=figures)
        summary = {**analysis.summary, **generic, "status": "done"}
        if analysis.figures:
            summary["figures"] = analysis.figures
        atomic_write_text(out / TABLE_FILE, analysis.table)
        summary["ended"] = utc_now()
        summary["wall_time_s"] = time.time() - t_start
        _write_json(out / SUMMARY_FILE, summary)
        return summary


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
    if not (isinstance(header, dict) and isinstance(header.get("study"), str)):
        raise CorruptFileError(f"the study file {path} is not a JSON object naming its study; {fix}")
    if not isinstance(header.get("runs", []), list) or not isinstance(summary, dict):
        raise CorruptFileError(f"the study file {path} or its summary has the wrong layout; {fix}")
    stored = summary.get("runs", {}) if isinstance(summary.get("runs", {}), dict) else {}
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
    status = summary.get("status", "done" if committed else "incomplete")
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
    }
