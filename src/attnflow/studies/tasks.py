"""The tasks a study's :meth:`~attnflow.studies.Study.plan` declares, and how much work they are.

Every piece of a study's work is a task run into its own directory of the one run store
(``<study dir>/runs/<name>/``), so it resumes after a kill, runs on ``workers`` local processes or a Dask
cluster, and reports progress:

* :class:`ParticleRun` an experiment config (:mod:`attnflow.experiments.store`); a plain config or
  config dict in a plan means the same;
* :class:`PdeRun` a density run (:mod:`attnflow.experiments.pde_runs`);
* :class:`TrainingRun` a training run (:mod:`attnflow.experiments.training_run`);
* :class:`ComputeTask` any other computation: a named, importable, pure function of JSON parameters whose
  result (named arrays and JSON values) is stored in its run directory
  (:mod:`attnflow.experiments.compute`): a reduced-model solve, a kernel evaluation, a real model's
  forward pass (a bridge function), a training loop of a few small networks.

:func:`estimate_s` gives a task's expected seconds on one core and :func:`choose_workers` the number of
local processes the work is worth: a pool of spawned processes costs seconds to start (imports, numba's
cache), so a small study runs in this process.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..experiments.builder import paths_computed
from ..experiments.config import ConfigError, ExperimentConfig, load_config
from ..experiments.schema import with_device
from ..experiments.sweep import INPUTS_DIR, task_spec

__all__ = [
    "PARALLEL_MIN_S",
    "PER_WORKER_MIN_S",
    "WORKER_START_S",
    "ComputeTask",
    "ParticleRun",
    "PdeRun",
    "Task",
    "TrainingRun",
    "choose_workers",
    "estimate_s",
    "normalise_plan",
]

#: below this many estimated seconds of work in all, a study runs in this process (issue 30: a small
#: study took 13.5 s on 2 spawned processes against 1.9 s in one; starting a worker costs seconds)
PARALLEL_MIN_S = 30.0
#: each extra local process must get at least this much estimated work
PER_WORKER_MIN_S = 15.0
#: seconds a pool of spawned local workers costs before its first task (imports, numba's cache): issue 30
#: measured a small study at 13.5 s on 2 spawned processes against 1.9 s in one on the loaded machine
WORKER_START_S = 10.0
#: work units of :func:`particle_work` per second on one core: the median over the committed full studies
#: (run elapsed times in docs/studies/*/summary.json: jko_stability 4e5, layer_scaling 7e6, noise_phase
#: 1.5e7-7e7, stability_input 1.1e8, stability_weights 1.5e8, massucco2026_robustness 8e8, massucco2026
#: 1.8e9 per s). The spread is wide (small n is dominated by per-step costs the model does not see), so an
#: estimate is good to an order of magnitude, which is what the choice of workers needs.
PARTICLE_WORK_PER_S = 1.0e8


def particle_work(cfg: ExperimentConfig) -> float:
    """The work of one particle run: paths computed x (n^2 H + overhead) x steps."""
    n = getattr(cfg.tokens, "n", 100)
    return float(paths_computed(cfg)) * (n * n * cfg.heads.H + 2000.0) * cfg.integrator.n_steps


@dataclass(frozen=True)
class ParticleRun:
    """A particle run: an experiment config (model, object or path; validated when the plan is read).

    Attributes
    ----------
    inputs : mapping
        Arrays the run starts from, by the config key that names their file: ``"tokens.path"`` (shape
        (n, d) or (paths, n, d)) and ``"heads.path"``. They are written into the run's own directory
        (``inputs/<sha1>.npy``) and the config points there: nothing is written outside the study
        directory, and other arrays make another config, so a finished run of other inputs is never reused.
    """

    config: ExperimentConfig | Mapping | str | Path
    inputs: Mapping[str, Any] = field(default_factory=dict)
    kind = "particle"

    def spec(self, device: str | None = None) -> dict:
        if not self.inputs:
            cfg = with_device(load_config(self.config), device)
            return {"kind": "particle", "config": cfg.model_dump(mode="json")}
        raw = (
            load_config(self.config).model_dump(mode="json")
            if not isinstance(self.config, Mapping)
            else dict(self.config)
        )
        raw = json.loads(json.dumps(raw, default=str))
        payload = {}
        for key, array in self.inputs.items():
            arr = np.ascontiguousarray(np.asarray(array, dtype=np.float64))
            sha1 = hashlib.sha1(arr.tobytes() + str(arr.shape).encode()).hexdigest()[:20]
            section, _, fld = key.partition(".")
            if key not in ("tokens.path", "heads.path"):
                raise ConfigError(f"ParticleRun inputs are 'tokens.path' and 'heads.path': got {key!r}")
            raw.setdefault(section, {})[fld] = f"{INPUTS_DIR}/{sha1}.npy"
            payload[key] = {"sha1": sha1, "data": arr.tolist()}
        cfg = with_device(load_config(raw), device).model_dump(mode="json")
        return task_spec({"kind": "particle", "config": cfg, "inputs": payload})


@dataclass(frozen=True)
class PdeRun:
    """A density (PDE) run: a PDE run config (:func:`attnflow.experiments.pde_runs.load_pde_config`).

    Attributes
    ----------
    cost_s : float
        Expected seconds on one core (for the choice of workers and the progress estimate).
    """

    config: Mapping | Any
    cost_s: float = 5.0
    kind = "pde"

    def spec(self, device: str | None = None) -> dict:
        cfg = self.config.model_dump(mode="json") if hasattr(self.config, "model_dump") else self.config
        return task_spec({"kind": "pde", "config": cfg})


@dataclass(frozen=True)
class TrainingRun:
    """A training run: a training config (:func:`attnflow.experiments.training_config.load_training_config`).

    Attributes
    ----------
    cost_s : float
        Expected seconds on one core.
    """

    config: Mapping | Any
    cost_s: float = 10.0
    kind = "training"

    def spec(self, device: str | None = None) -> dict:
        cfg = self.config.model_dump(mode="json") if hasattr(self.config, "model_dump") else self.config
        return task_spec({"kind": "training", "config": cfg})


@dataclass(frozen=True)
class ComputeTask:
    """A computation: ``fn(**params)``, ``fn`` named ``"package.module:function"``.

    The function must be pure (same parameters, same result: seed every random draw from ``params``) and
    return a mapping of names to numpy arrays (or tensors) and JSON values; the runner stores it in the
    task's run directory and :meth:`attnflow.studies.StudyRuns.result` reads it back.

    Attributes
    ----------
    fn : str
        The function, e.g. ``"attnflow.analysis.ntk:injectivity_curve"``; it must be importable in every
        worker (a user's study file is importable once :func:`attnflow.studies.get_study` loaded it).
    params : dict
        Its keyword arguments, JSON data.
    cost_s : float
        Expected seconds on one core (for the choice of workers and the progress estimate).
    """

    fn: str
    params: Mapping[str, Any] = field(default_factory=dict)
    cost_s: float = 1.0
    kind = "compute"

    def spec(self, device: str | None = None) -> dict:
        return task_spec({"kind": "compute", "fn": self.fn, "params": dict(self.params)})


Task = ParticleRun | PdeRun | TrainingRun | ComputeTask


def normalise_plan(
    plan: Any, study: str, device: str | None = None
) -> tuple[dict[str, dict], dict[str, float]]:
    """The task specs of a plan (name -> spec, validated) and their estimated seconds.

    A plan is a mapping of task names (plain directory names) to tasks; an experiment config (object,
    dict or path) stands for a :class:`ParticleRun`.

    Raises
    ------
    ConfigError
        The plan is not a mapping, a name is not a string, or a task's config breaks a rule (naming the task).
    """
    if not isinstance(plan, Mapping):
        raise ConfigError(
            f"plan() of study {study!r} must return a mapping of task names to tasks: got "
            f"{type(plan).__name__}; e.g. {{'solve': ComputeTask(fn='pkg.mod:fn', params={{...}})}}"
        )
    specs: dict[str, dict] = {}
    costs: dict[str, float] = {}
    for name, task in plan.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"plan() of study {study!r}: task names must be non-empty strings: got {name!r}"
            )
        if not isinstance(task, (ParticleRun, PdeRun, TrainingRun, ComputeTask)):
            task = ParticleRun(task)
        try:
            specs[name] = task.spec(device)
        except (ConfigError, ValueError, TypeError) as exc:
            raise ConfigError(f"task {name!r} of study {study!r}: {exc}") from None
        costs[name] = estimate_s(task, specs[name])
    return specs, costs


def estimate_s(task: Task, spec: dict | None = None) -> float:
    """Expected seconds of ``task`` on one core: the particle-run work model, or the task's ``cost_s``."""
    if isinstance(task, ParticleRun):
        cfg = load_config(spec["config"] if spec is not None else task.config)
        return particle_work(cfg) / PARTICLE_WORK_PER_S
    return float(task.cost_s)


def choose_workers(costs: Mapping[str, float], requested: int | None) -> int:
    """Local worker processes for tasks of these estimated seconds: ``requested`` when given, else the count
    with the least predicted wall time.

    With w workers the tasks take about ``max(total / w, longest)`` (the longest task cannot be shared:
    a study whose work sits in one task gains nothing from a second process) plus
    :data:`WORKER_START_S` to start the pool when w > 1. Below :data:`PARALLEL_MIN_S` of work in all, or
    with one task, one process; each worker must get at least :data:`PER_WORKER_MIN_S`; at most one per
    core and per task; a tie keeps fewer processes.

    Examples
    --------
    >>> choose_workers({"a": 100.0, "b": 100.0}, None) >= 1
    True
    >>> choose_workers({"big": 300.0, "small": 5.0}, None)  # the big task alone sets the wall time
    1
    """
    if requested is not None:
        return max(1, int(requested))
    total = float(sum(costs.values()))
    if total < PARALLEL_MIN_S or len(costs) < 2:
        return 1
    longest = float(max(costs.values()))
    most = max(1, min(len(costs), os.cpu_count() or 1, int(total // PER_WORKER_MIN_S)))
    best, best_s = 1, total
    for w in range(2, most + 1):
        wall = max(total / w, longest) + WORKER_START_S
        if wall < best_s:
            best, best_s = w, wall
    return best
