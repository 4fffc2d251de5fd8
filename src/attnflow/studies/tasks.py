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

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..experiments.builder import paths_computed
from ..experiments.config import ConfigError, ExperimentConfig, load_config
from ..experiments.schema import with_device
from ..experiments.sweep import task_spec

__all__ = [
    "PARALLEL_MIN_S",
    "PER_WORKER_MIN_S",
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
#: work units of :func:`particle_work` per second on one core (measured on the quick studies, float64)
PARTICLE_WORK_PER_S = 2.0e8


def particle_work(cfg: ExperimentConfig) -> float:
    """The work of one particle run: paths computed x (n^2 H + overhead) x steps."""
    n = getattr(cfg.tokens, "n", 100)
    return float(paths_computed(cfg)) * (n * n * cfg.heads.H + 2000.0) * cfg.integrator.n_steps


@dataclass(frozen=True)
class ParticleRun:
    """A particle run: an experiment config (model, object or path; validated when the plan is read)."""

    config: ExperimentConfig | Mapping | str | Path
    kind = "particle"

    def spec(self, device: str | None = None) -> dict:
        cfg = with_device(load_config(self.config), device)
        return {"kind": "particle", "config": cfg.model_dump(mode="json")}


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
    """Local worker processes for tasks of these estimated seconds: ``requested`` when given, else 1 below
    :data:`PARALLEL_MIN_S` of work in all, else as many as give each :data:`PER_WORKER_MIN_S` (at most one
    per core and per task)."""
    if requested is not None:
        return max(1, int(requested))
    total = float(sum(costs.values()))
    if total < PARALLEL_MIN_S or len(costs) < 2:
        return 1
    return max(1, min(len(costs), os.cpu_count() or 1, int(total // PER_WORKER_MIN_S)))
