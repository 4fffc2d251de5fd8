"""Parameter sweeps: the cartesian product of a grid over a base config, one run directory per task.

Layout of a sweep directory::

    tasks.json          {"base": config, "grid": {key: values}, "keys": [...], "tasks": {dir: {key: value}}}
    sweep.json          summary: status, error and traceback of every task, counts, times
    task-0000-H=2-sigma2=0.5/   a run directory (see :mod:`attnflow.experiments.store`)
    ...

Execution. Locally the tasks run in a ``ProcessPoolExecutor`` with the ``spawn`` context and
``min(tasks, os.cpu_count())`` workers (or ``workers``), each worker limiting torch to
``cpu_count // workers`` threads; ``workers=1`` runs the tasks one after the other in this process.
With ``scheduler=ADDRESS`` they run on an existing Dask distributed cluster
(``distributed.Client(address).submit``; the sweep directory must be visible to the workers), one
torch thread per task; ``scheduler="local"`` (or ``"local:N"``) starts a ``distributed.LocalCluster`` of
one-thread worker processes for the call and closes it after. Results do not depend on where a task
runs: each task is a seeded run.

Failures. A task that raises is recorded as ``failed`` (its traceback in its ``meta.json`` and in
``sweep.json``) and the others go on. A local worker that dies (killed, out of memory) breaks the
process pool: the pool is rebuilt and only the unfinished tasks are resubmitted (they resume from their
checkpoints), at most :data:`MAX_ATTEMPTS` times each. Workers exit when the sweep's main process dies,
so no orphan keeps writing a task directory. Resuming a sweep (the default) skips the finished tasks
whose stores verify (:func:`attnflow.experiments.store.verify_run`), reruns from scratch a "done" task
whose store does not, and resumes the others from their checkpoints.

Safety. The sweep directory is locked for the whole sweep and each task directory by the process that
runs it (:mod:`attnflow.experiments.locking`). Task names read from ``tasks.json`` must be plain names
inside the sweep directory, and a task directory is deleted (``resume=False``) only if it carries
attnflow's marker file.

Kinds of task. :func:`run_tasks`, the engine of sweeps and studies, runs every kind of task of the
one store through the same executors and resume rules: particle runs (an experiment config, optionally
with input arrays written into the run directory), PDE runs, training runs and computations (a named
pure function whose results are stored by :mod:`attnflow.experiments.compute`); see :func:`task_spec`.

Reading and combining a sweep's runs: :mod:`attnflow.experiments.sweep_data` (re-exported here).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError
from .files import (
    MARKER_FILE,
    CorruptFileError,
    UnsafePathError,
    atomic_write_bytes,
    atomic_write_text,
    confined,
    has_marker,
    utc_now,
    write_marker,
)
from .locking import DirectoryLock
from .rundir import clear_run_files
from .schema import ExperimentConfig, config_diff, load_config, load_yaml, with_overrides
from .store import CONFIG_FILE, DATA_DIR, META_FILE, RUN_FILES, read_meta, run_experiment
from .sweep_data import (
    SUMMARY_FILE,
    TASKS_FILE,
    SweepShapeError,
    dim_name,
    finished_status,
    open_sweep,
    read_index,
    run_finished,
    sweep_info,
)

__all__ = [
    "MAX_ATTEMPTS",
    "SUMMARY_FILE",
    "TASKS_FILE",
    "SchedulerError",
    "SweepMismatchError",
    "SweepShapeError",
    "dim_name",
    "open_sweep",
    "parse_grid",
    "read_index",
    "run_finished",
    "run_tasks",
    "run_sweep",
    "sweep_info",
]

#: How many times a task is submitted to a local pool that keeps breaking (a worker killed) before it
#: is recorded as failed.
MAX_ATTEMPTS = 3
#: Seconds between two checks, in a worker, that the sweep's main process is still alive.
_PARENT_POLL_S = 0.2


class SweepMismatchError(ValueError):
    """The sweep directory holds another sweep (base config or grid differ)."""


class SchedulerError(RuntimeError):
    """The Dask scheduler given as ``scheduler`` cannot be reached."""


#: ``scheduler`` value that starts a Dask cluster on this machine for the call (``local:N``: N workers)
LOCAL_SCHEDULER = "local"


def local_cluster_size(scheduler: str | None) -> int | None:
    """The worker count of a ``scheduler`` that names a cluster on this machine, else None.

    ``"local"`` is one worker process per core (``os.cpu_count()``), ``"local:N"`` N workers, each with one
    thread; any other value is the address of a running scheduler (None: no Dask).

    >>> local_cluster_size("local:3"), local_cluster_size("tcp://10.0.0.1:8786"), local_cluster_size(None)
    (3, None, None)
    """
    if scheduler is None:
        return None
    if scheduler == LOCAL_SCHEDULER:
        return max(1, os.cpu_count() or 1)
    head, sep, tail = scheduler.partition(":")
    if head != LOCAL_SCHEDULER or not sep:
        return None
    if not (tail.isascii() and tail.isdigit()) or int(tail) < 1:
        raise ValueError(
            f"scheduler {scheduler!r}: a local Dask cluster is 'local' (one worker per core) or 'local:N' "
            f"with N a whole number of workers >= 1, got N = {tail!r}; e.g. local:2"
        )
    return int(tail)


def _split_values(text: str) -> list[str]:
    """Split on commas outside brackets, so ``F=[[1,0],[0,1]],identity`` gives two values."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def parse_grid(items: list[str] | tuple[str, ...]) -> dict[str, list]:
    """Parse ``["heads.H=2,4", "weights.sigma2=0.5,1"]`` into ``{"heads.H": [2, 4], ...}``.

    Values are parsed as YAML with YAML 1.2 floats (:func:`attnflow.experiments.config.load_yaml`): ``2``
    is an int, ``0.5`` and ``1e-3`` are floats, ``true`` a bool.
    """
    grid: dict[str, list] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise ValueError(f"a grid must read key=v1,v2,...: got {item!r}; e.g. 'heads.H=2,4'")
        if key in grid:
            raise ValueError(f"grid key {key!r} given twice; list all its values in one item '{key}=v1,v2'")
        vals = []
        for v in _split_values(values):
            try:
                vals.append(load_yaml(v.strip()))
            except yaml.YAMLError as exc:
                raise ValueError(
                    f"grid value {v.strip()!r} of key {key!r} is not valid YAML ({exc}); quote it or close "
                    "its brackets, e.g. 'weights.F=[[1,0],[0,1]]'"
                ) from exc
        if len({json.dumps(v, sort_keys=True, default=str) for v in vals}) != len(vals):
            raise ValueError(f"grid key {key!r} has repeated values: {vals!r}")
        grid[key] = vals
    return grid


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return re.sub(r"[^A-Za-z0-9.+_-]", "", text.replace(" ", ""))[:16]


def _task_name(i: int, params: dict) -> str:
    parts = "-".join(f"{k.rsplit('.', 1)[-1]}={_short(v)}" for k, v in params.items())
    return f"task-{i:04d}-{parts}"[:96] if parts else f"task-{i:04d}"


def _plan(base: ExperimentConfig, grid: dict[str, list]) -> list[tuple[str, dict, ExperimentConfig]]:
    keys = list(grid)
    tasks, errors = [], []
    for i, combo in enumerate(itertools.product(*(grid[k] for k in keys))):
        params = dict(zip(keys, combo, strict=True))
        try:
            cfg = with_overrides(base, params)
        except ConfigError as exc:
            errors.append(f"{params}: {exc}")
            continue
        tasks.append((_task_name(i, params), params, cfg))
    if errors:
        raise ConfigError("invalid sweep grid:\n" + "\n".join(errors))
    return tasks


def _set_numba_threads(threads: int | None) -> None:
    """Give the fused kernel the same share of cores as torch (None: all of numba's threads)."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency; the torch path still works
        return
    numba.set_num_threads(
        numba.config.NUMBA_NUM_THREADS if threads is None else min(threads, numba.config.NUMBA_NUM_THREADS)
    )


def _exit_with_parent(parent_pid: int) -> None:
    """Pool initializer: exit this worker as soon as the sweep's main process is gone.

    A SIGKILLed main process cannot stop its workers; without this they would finish their task and
    take queued ones while a resumed sweep runs the same task directories.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_PARENT_POLL_S)
        os._exit(70)  # no cleanup: the task resumes from its checkpoint; its lock dies with us

    threading.Thread(target=watch, name="attnflow-parent-watch", daemon=True).start()


#: the kinds of task :func:`run_tasks` executes, each into its own run directory of the one store
TASK_KINDS = ("particle", "pde", "training", "compute")


def task_spec(task: Any) -> dict:
    """The JSON spec ``{"kind": ..., ...}`` of a task given as an experiment config (a particle run) or as
    a spec dict with a ``kind`` (``particle`` / ``pde`` / ``training`` with a ``config``; ``compute`` with
    ``fn`` and ``params``); every config is validated here, before anything runs.

    Raises
    ------
    ConfigError
        A config breaks a rule, or the kind is unknown.
    """
    if isinstance(task, Mapping) and "kind" in task:
        kind = task["kind"]
        if kind not in TASK_KINDS:
            raise ConfigError(f"unknown task kind {kind!r}; valid: {', '.join(TASK_KINDS)}")
        if kind == "compute":
            from .compute import task_spec as compute_spec

            extra = set(task) - {"kind", "fn", "params"}
            if extra:
                raise ConfigError(f"a compute task has keys kind, fn, params: got also {sorted(extra)}")
            try:
                return compute_spec(task.get("fn"), task.get("params"))
            except (ValueError, TypeError) as exc:
                raise ConfigError(str(exc)) from None
        extra = set(task) - {"kind", "config", *(("inputs",) if kind == "particle" else ())}
        if extra or "config" not in task:
            keys = "kind, config and inputs" if kind == "particle" else "kind and config"
            raise ConfigError(f"a {kind} task has keys {keys}: got {sorted(task)}")
        if kind == "pde":
            from .pde_runs import load_pde_config

            return {"kind": "pde", "config": load_pde_config(task["config"]).model_dump(mode="json")}
        if kind == "training":
            from .training_config import load_training_config

            return {
                "kind": "training",
                "config": load_training_config(task["config"]).model_dump(mode="json"),
            }
        inputs = task.get("inputs")
        spec = {"kind": "particle", "config": load_config(task["config"]).model_dump(mode="json")}
        if inputs:
            spec["inputs"] = _check_inputs(inputs, spec["config"])
        return spec
    return {"kind": "particle", "config": load_config(task).model_dump(mode="json")}


#: where the input arrays of a particle task are written, inside its run directory
INPUTS_DIR = "inputs"


def _check_inputs(inputs: Mapping, cfg: dict) -> dict:
    """Validate the input arrays of a particle task: ``{dotted path key: {"sha1", "data"}}`` whose key holds
    the placeholder ``inputs/<sha1>.npy`` in the config."""
    out = {}
    for key, payload in inputs.items():
        if key not in ("tokens.path", "heads.path"):
            raise ConfigError(f"a particle task's inputs are tokens.path and heads.path: got {key!r}")
        section, field = key.split(".")
        want = f"{INPUTS_DIR}/{payload['sha1']}.npy"
        if cfg.get(section, {}).get(field) != want:
            raise ConfigError(f"the input {key} must be referenced in the config as {want!r}")
        out[key] = {"sha1": str(payload["sha1"]), "data": payload["data"]}
    return out


def resolve_inputs(spec: dict, task_dir: Path) -> dict:
    """The spec whose input-array paths point into ``task_dir/inputs/`` (absolute), where the task writes
    them; a spec without inputs unchanged."""
    if not spec.get("inputs"):
        return spec
    cfg = json.loads(json.dumps(spec["config"]))
    for key, payload in spec["inputs"].items():
        section, field = key.split(".")
        cfg[section][field] = str(Path(task_dir).resolve() / INPUTS_DIR / f"{payload['sha1']}.npy")
    return {**spec, "config": cfg}


def _write_inputs(spec: dict, task_dir: Path) -> None:
    import numpy as np

    folder = Path(task_dir) / INPUTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for payload in spec["inputs"].values():
        path = folder / f"{payload['sha1']}.npy"
        if not path.is_file():
            arr = np.asarray(payload["data"], dtype=np.float64)
            atomic_write_bytes(path, lambda fh, arr=arr: np.save(fh, arr))


def task_finished(run_dir: Path, spec: dict) -> tuple[bool, str | None]:
    """(finished, why not) of the run directory of ``spec`` (see :func:`finished_status`)."""
    kind = spec["kind"]
    if kind == "particle":
        return finished_status(run_dir, resolve_inputs(spec, run_dir)["config"])
    if kind == "compute":
        from .compute import compute_finished

        return compute_finished(run_dir, spec)
    try:
        status = read_meta(run_dir).get("status")
    except CorruptFileError as exc:
        return False, str(exc)
    if kind == "pde":
        from .pde_runs import load_pde_config

        cfg_file, data = run_dir / CONFIG_FILE, run_dir / DATA_DIR
        load = load_pde_config
    else:
        from .training_config import load_training_config
        from .training_run import CONFIG as TRAINING_CONFIG

        cfg_file, data = run_dir / TRAINING_CONFIG, run_dir / "summary.json"
        load = load_training_config
    if status != "done" or not data.exists() or not cfg_file.is_file():
        return False, None
    try:
        return load(cfg_file) == load(spec["config"]), None
    except ConfigError as exc:
        return False, str(exc)


def _execute(spec: dict, task_dir: str, resume: bool, progress: bool) -> None:
    kind = spec["kind"]
    if kind == "particle":
        if spec.get("inputs"):
            write_marker(task_dir, "run")
            _write_inputs(spec, Path(task_dir))
        run_experiment(
            resolve_inputs(spec, Path(task_dir))["config"], task_dir, resume=resume, progress=progress
        )
        return
    if kind == "compute":
        from .compute import run_compute

        run_compute(spec["fn"], spec["params"], task_dir, resume=resume)
        return
    write_marker(task_dir, kind)
    if kind == "pde":
        from .pde_runs import run_pde

        run_pde(spec["config"], task_dir, resume=resume, progress=progress)
    else:
        from .training_run import run_training

        run_training(spec["config"], task_dir, progress=progress)


#: torch's intra-op threads inside every task, on every executor (this process, a pool worker, a Dask
#: worker): a torch reduction or product splits its work by the thread count, so the count reaches a
#: task's last bits. The tasks' torch work is small (the heavy sums run in the numba kernels, whose split
#: does not depend on the thread count: :data:`attnflow.dynamics.numba_kernel.SPLIT_ITEMS`), and small
#: torch ops run faster on one thread on a busy machine (:mod:`attnflow.dynamics.threads`)
TASK_TORCH_THREADS = 1


def _load_blas() -> None:
    """Load every BLAS a task may use before its thread limit is set: threadpoolctl limits the libraries
    loaded when the limit is entered, and SciPy loads its own OpenBLAS on the first ``import scipy.linalg``
    (which, inside a fresh Dask worker's first task, then ran on every core)."""
    import scipy.linalg  # noqa: F401 - loads SciPy's OpenBLAS


def _run_task(spec: dict, task_dir: str, resume: bool, threads: int | None, progress: bool = False) -> dict:
    """Run one task (in a worker process or this one); never raises, reports the failure instead.

    ``spec`` is a task spec (:func:`task_spec`) or, as before, an experiment config's JSON. ``threads``
    is numba's share of the cores (None: all of numba's threads).

    A task's numbers do not depend on where it runs (this process, a worker process, a Dask worker, whose
    nanny sets ``OPENBLAS_NUM_THREADS=1``; issue 30): inside a task, NumPy's / SciPy's BLAS (every copy,
    SciPy's loaded first) runs on one thread and torch on :data:`TASK_TORCH_THREADS`, whatever the caller's
    settings, and restored after; numba keeps ``threads`` (its kernels split the work independently of
    the thread count). ducc0 runs on its default of one thread. Without the limits, ``pde_particles``'
    ``s2.pde_error_sup_vs_refined`` changed by 4e-9 relative between a local run and Dask.
    """
    t0, c0 = time.monotonic(), time.process_time()
    if "kind" not in spec:
        spec = {"kind": "particle", "config": spec}
    import torch

    from ..dynamics.threads import launch_numba_threads

    launch_numba_threads()  # before torch's count: numba's launch would reset it (dynamics.threads)
    old_torch = torch.get_num_threads()
    try:
        torch.set_num_threads(TASK_TORCH_THREADS)
        if threads is not None:
            _set_numba_threads(threads)
        Path(task_dir).mkdir(parents=True, exist_ok=True)
        from threadpoolctl import threadpool_limits

        _load_blas()
        with threadpool_limits(limits=1, user_api="blas"):
            _execute(spec, task_dir, resume, progress)
        return {
            "status": "done",
            "elapsed_s": round(time.monotonic() - t0, 3),
            "cpu_s": round(time.process_time() - c0, 3),
        }
    except Exception as exc:  # noqa: BLE001 - one failing task must not lose the others
        return {
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
            "elapsed_s": round(time.monotonic() - t0, 3),
            "cpu_s": round(time.process_time() - c0, 3),
        }
    finally:
        if torch.get_num_threads() != old_torch:
            torch.set_num_threads(old_torch)
        if threads is not None:
            _set_numba_threads(None)


def _write_summary(out: Path, summary: dict) -> None:
    summary["done"] = sum(t["status"] == "done" for t in summary["tasks"].values())
    summary["failed"] = sum(t["status"] == "failed" for t in summary["tasks"].values())
    atomic_write_text(out / SUMMARY_FILE, json.dumps(summary, indent=2, default=str) + "\n")


def _delete_task(out: Path, name: str) -> None:
    """Delete the run files of the task directory ``out/name``: confined, marked, and not in use."""
    path = confined(out, name, what="task directory")
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_dir() or not has_marker(path):
        raise UnsafePathError(
            f"{path} was not created by attnflow (no {MARKER_FILE} marker file), so it is not deleted; move "
            "or delete it yourself, or choose another out_dir"
        )
    with DirectoryLock(path, "task directory"):  # refused while a live process writes it
        clear_run_files(path, RUN_FILES)  # the run store's one deleter (marked directories only)
        for tmp in path.glob(".*.tmp"):  # leftovers of atomic writes cut short
            tmp.unlink()
        (path / MARKER_FILE).unlink()
    # the lock file stays (attnflow.experiments.locking: deleting it would let two processes lock two
    # different files), and with it the emptied directory; a rerun of the task reuses both


def _prepare_dir(out: Path, base: ExperimentConfig, grid: dict, tasks: list, resume: bool) -> None:
    index = {
        "format": 1,
        "base": base.model_dump(mode="json"),
        "grid": grid,
        "keys": list(grid),
        "tasks": {name: params for name, params, _ in tasks},
    }
    path = out / TASKS_FILE
    old_tasks: list[str] = []
    if path.is_file():
        try:
            old = read_index(out)
        except CorruptFileError:  # a hostile index (UnsafePathError) is refused, resume or not
            if resume:
                raise
            old = None  # resume=False: the old index is replaced; only marked task directories are deleted
        if old is not None:
            old_tasks = list(old["tasks"])
            same_grid = json.dumps(old.get("grid"), default=str) == json.dumps(grid, default=str)
            try:
                diff = config_diff(load_config(old["base"]), base)
            except ConfigError:
                diff = ["base"]
            if resume and (diff or not same_grid):
                what = []
                if diff:
                    what.append(f"base config keys {', '.join(diff)}")
                if not same_grid:
                    what.append(f"grid {old.get('grid')} -> {grid}")
                raise SweepMismatchError(
                    f"{out} holds a different sweep ({'; '.join(what)}), so it cannot be resumed; choose "
                    "another out_dir or pass resume=False to overwrite it"
                )
    for name, _, _ in tasks:
        confined(out, name, what="task directory")
    if not resume:
        # check every deletion before doing any, then delete the old tasks and the new ones' directories
        doomed = list(dict.fromkeys([*old_tasks, *(name for name, _, _ in tasks)]))
        for name in doomed:
            p = confined(out, name, what="task directory")
            if (p.exists() or p.is_symlink()) and not (p.is_dir() and has_marker(p)):
                raise UnsafePathError(
                    f"{p} was not created by attnflow (no {MARKER_FILE} marker file), so it is not deleted; "
                    "move or delete it yourself, or choose another out_dir"
                )
        for name in doomed:
            _delete_task(out, name)
        (out / SUMMARY_FILE).unlink(missing_ok=True)
    atomic_write_text(path, json.dumps(index, indent=2, default=str) + "\n")


def run_sweep(
    config: ExperimentConfig | dict | str | Path,
    grid: dict[str, list],
    out_dir: str | Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    resume: bool = True,
    progress: bool = False,
) -> dict:
    """Run the cartesian product of ``grid`` over ``config``, one run directory per task.

    Parameters
    ----------
    config : ExperimentConfig, dict or YAML path
        The base config.
    grid : dict
        Dotted key -> list of values, e.g. ``{"heads.H": [2, 4], "weights.sigma2": [0.5, 1.0]}``
        (see :func:`parse_grid`). Every task's config is validated before anything runs.
    out_dir : path
        The sweep directory.
    scheduler : str or None
        Address of a Dask distributed scheduler (e.g. ``tcp://10.0.0.1:8786``), or ``"local"`` /
        ``"local:N"``: a Dask cluster on this machine started for the call (one worker per core, or N),
        one thread per worker (:func:`local_cluster_size`); None runs in a local process pool.
    workers : int or None
        Local worker processes (default ``min(tasks, os.cpu_count())``); 1 runs in this process.
    resume : bool
        Skip the finished tasks of a previous run of the same sweep and resume the others.
        ``False`` deletes the previous tasks.
    progress : bool
        Progress bar of the tasks on stderr (only when it is a terminal).

    Returns
    -------
    dict
        The summary written to ``sweep.json``: ``tasks`` (name -> params, status, error, traceback,
        elapsed_s), ``done`` and ``failed`` counts.
    """
    base = load_config(config)
    local_cluster_size(scheduler)  # a malformed local:N is refused before anything is written
    if not grid:
        raise ValueError(
            "the grid is empty: give at least one key and its values, e.g. grid={'heads.H': [2, 4]}"
        )
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    tasks = _plan(base, grid)
    with DirectoryLock(out, "sweep directory"):
        write_marker(out, "sweep")
        _prepare_dir(out, base, grid, tasks, resume)
        summary = {
            "grid": grid,
            "started": utc_now(),
            "ended": None,
            "scheduler": scheduler or "local",
            "tasks": {name: {"params": params, "status": "pending"} for name, params, _ in tasks},
        }
        _write_summary(out, summary)

        def finish(name: str, res: dict) -> None:
            summary["tasks"][name].update(res)
            _write_summary(out, summary)

        try:
            run_tasks(
                {name: cfg for name, _, cfg in tasks},
                out,
                scheduler=scheduler,
                workers=workers,
                resume=resume,
                progress=progress,
                label=f"sweep {out.name}",
                on_result=finish,
            )
        finally:
            summary["ended"] = utc_now()
            _write_summary(out, summary)
        return summary


def run_tasks(
    tasks: Mapping[str, ExperimentConfig | dict],
    out_dir: str | Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    resume: bool = True,
    progress: bool = False,
    label: str = "tasks",
    run_progress: bool = False,
    on_result: Callable[[str, dict], None] | None = None,
) -> dict[str, dict]:
    """Run named experiment configs, one run directory ``out_dir/<name>`` each (the engine of sweeps
    and studies).

    Parameters
    ----------
    tasks : mapping
        Run directory name -> task: an experiment config (a particle run) or a task spec with a ``kind``
        (:func:`task_spec`: a PDE run, a training run, a computation), validated here before anything
        runs. A name must be a plain name inside ``out_dir`` (:func:`attnflow.experiments.files.confined`).
    out_dir : path
        Parent directory of the run directories.
    scheduler, workers, resume, progress
        As in :func:`run_sweep`. With ``resume`` a task whose directory holds a finished run of the
        same config whose store verifies is skipped (``{"status": "done", "skipped": True}``); a "done"
        whose store does not verify is run again from scratch (its result says why, ``rerun``); one
        that holds another config fails with :class:`~attnflow.experiments.store.RunConfigMismatchError`.
    label : str
        Label of the progress bar of the tasks.
    run_progress : bool
        Also draw the step bar of each run (only when the tasks run one by one in this process).
    on_result : callable or None
        ``on_result(name, result)`` for every task, as soon as its result is known (skipped ones first).

    Returns
    -------
    dict
        Name -> result: ``status`` (``done`` or ``failed``), ``elapsed_s``, ``cpu_s`` (CPU seconds of
        the process that ran it, every thread, during the task), ``skipped``, ``rerun``,
        ``attempts`` (local pools rebuilt after a worker died), ``error`` and ``traceback`` of a failure.

    Raises
    ------
    UnsafePathError
        A task name escapes ``out_dir``.
    """
    from .progress import ProgressBar

    local_cluster_size(scheduler)  # a malformed local:N is refused before anything runs
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    configs = {name: task_spec(task) for name, task in tasks.items()}
    for name in configs:
        confined(out, name, what="task directory")
    results: dict[str, dict] = {}
    notes: dict[str, dict] = {}
    todo = []
    for name, cfg in configs.items():
        done, why = task_finished(out / name, cfg) if resume else (False, None)
        if done:
            results[name] = {"status": "done", "skipped": True}
            if on_result is not None:
                on_result(name, results[name])
            continue
        if why is not None:  # "done" but its store does not verify: run it again from scratch
            notes[name] = {"rerun": f"store failed verification: {why}"}
        todo.append((name, cfg, resume and why is None))
    bar = ProgressBar(
        len(configs),
        label,
        unit="tasks",
        initial=len(configs) - len(todo),
        enabled=None if progress else False,
    )
    failed = 0

    def finish(name: str, res: dict) -> None:
        nonlocal failed
        res = {**notes.get(name, {}), **res}
        results[name] = res
        failed += res["status"] == "failed"
        if on_result is not None:
            on_result(name, res)
        bar.update(1, extra=f"{failed} failed" if failed else "")

    try:
        if scheduler is not None and todo:
            _run_dask(scheduler, todo, out, finish)
        else:
            n_workers = min(len(todo), workers or os.cpu_count() or 1)
            if n_workers <= 1:
                for name, spec, task_resume in todo:
                    finish(name, _run_task(spec, str(out / name), task_resume, None, run_progress))
            else:
                _run_pool(todo, out, n_workers, finish)
    finally:
        bar.close()
    return results


def _run_pool(todo: list, out: Path, n_workers: int, finish) -> None:
    """Run the tasks in local spawn workers; a broken pool is rebuilt for the unfinished tasks."""
    threads = max(1, (os.cpu_count() or 1) // n_workers)
    pending = {name: (cfg, resume) for name, cfg, resume in todo}
    attempts = dict.fromkeys(pending, 0)
    while pending:
        broken: BrokenProcessPool | None = None
        with ProcessPoolExecutor(
            max_workers=min(n_workers, len(pending)),
            mp_context=get_context("spawn"),
            initializer=_exit_with_parent,
            initargs=(os.getpid(),),
        ) as pool:
            futs = {}
            for name, (cfg, resume) in pending.items():
                attempts[name] += 1
                futs[pool.submit(_run_task, cfg, str(out / name), resume, threads)] = name
            try:
                for fut in as_completed(futs):
                    name = futs[fut]
                    try:
                        res = fut.result()
                    except BrokenProcessPool as exc:  # a worker died: this task did not finish
                        broken = exc
                        continue
                    except Exception as exc:  # noqa: BLE001 - reported as the task's failure
                        res = _failure(exc)
                    pending.pop(name)
                    finish(name, {**res, "attempts": attempts[name]} if attempts[name] > 1 else res)
            except BaseException:  # Ctrl-C or a failing callback: queued tasks must not start
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        if broken is None:
            break
        for name in pending:  # a task that never started is not charged for the broken pool
            if not (out / name / META_FILE).is_file():
                attempts[name] -= 1
        for name in list(pending):
            cfg, _ = pending[name]
            if attempts[name] >= MAX_ATTEMPTS:
                pending.pop(name)
                finish(
                    name,
                    {
                        "status": "failed",
                        "attempts": attempts[name],
                        "error": f"a worker process died {attempts[name]} times while this task was "
                        f"queued or running ({broken}); a rerun of the sweep resumes it",
                    },
                )
            else:
                pending[name] = (cfg, True)  # resubmitted: it resumes from its checkpoint, if any


def _failure(exc: BaseException) -> dict:
    tb = "".join(traceback.format_exception(exc))
    return {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "traceback": tb}


def _result_or_failure(fut) -> dict:
    try:
        return fut.result()
    except Exception as exc:  # noqa: BLE001 - a dead worker fails its task only
        return _failure(exc)


def _run_dask(address: str, todo: list, out: Path, finish) -> None:
    import contextlib

    import distributed

    n_local = local_cluster_size(address)
    with contextlib.ExitStack() as stack:
        if n_local is not None:  # a cluster of this call: started here, closed when its tasks are done
            cluster = stack.enter_context(
                distributed.LocalCluster(
                    n_workers=min(n_local, max(1, len(todo))),
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                )
            )
            address = cluster.scheduler_address
        try:
            client = distributed.Client(address)
        except (OSError, ValueError) as exc:  # TimeoutError is an OSError; a malformed address a ValueError
            raise SchedulerError(
                f"cannot reach the Dask scheduler at {address!r} ({type(exc).__name__}: {exc}); check the "
                "address and that the scheduler runs, use scheduler='local' for a cluster on this machine, "
                "or run locally with scheduler=None"
            ) from None
        stack.enter_context(client)
        futs = {
            client.submit(_run_task, spec, str(out / name), resume, 1, pure=False): name
            for name, spec, resume in todo
        }
        for fut in distributed.as_completed(list(futs)):
            finish(futs[fut], _result_or_failure(fut))
