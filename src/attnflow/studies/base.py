r"""What a study is: a pydantic config, a plan of tasks on the run store, an analysis of their results.

A study is one file: a subclass of :class:`Study`, registered by the decorator
:func:`~attnflow.studies.study`, that declares

* ``name`` (the registry key), ``description`` (one line: the claim it checks);
* ``Config``: a :class:`StudyConfig` (pydantic, frozen, unknown keys refused) whose defaults are the
  full-size study, and :meth:`Study.quick_params` the parameters of its quick variant (seconds, for CI);
* :meth:`Study.plan`: its **tasks**, ``{task name: task}`` (:mod:`attnflow.studies.tasks`): a
  :class:`~attnflow.studies.tasks.ParticleRun` (an experiment config; a bare config means the same), a
  :class:`~attnflow.studies.tasks.PdeRun`, a :class:`~attnflow.studies.tasks.TrainingRun`, or a
  :class:`~attnflow.studies.tasks.ComputeTask` (``fn="package.module:function"``, JSON ``params``): any other
  computation, e.g. a reduced-model solve or a real model's forward pass through a bridge function. The
  runner executes every task into its run directory of the one store (``out/runs/<name>/``) through
  :func:`attnflow.experiments.sweep.run_tasks`: a killed study resumes (finished tasks are skipped), and
  it runs on ``workers`` local processes (chosen by the estimated work when not given) or a Dask cluster.
  An empty plan is an error (:class:`~attnflow.studies.errors.StudyPlanError`);
* :meth:`Study.analyse`: reads only the stored results (:class:`StudyRuns`: ``runs.result(name)`` of a
  computation, ``runs.open(name)`` of a particle or PDE run) and returns a :class:`StudyResult`: the
  numbers, the verdict records (:mod:`attnflow.analysis.verdicts`), table specs
  (:class:`~attnflow.studies.render.Table`, rendered to Markdown and HTML by one renderer) and the data of
  the figures, drawn by the plot layer's callback ``figures(data, out_dir) -> {key: file}``
  (:data:`FigureCallback`).

The runner writes ``summary.json`` (the study's numbers, ``verdicts``, and its own record under the
reserved key ``run``), ``run_log.json`` (times), ``table.md`` and the figures
(:mod:`attnflow.studies.runner`). A study in a file of its own runs the same way:
``attnflow study run path/to/my_study.py:MyStudy --out DIR`` or ``run_study("path/to/my_study.py:MyStudy",
DIR)``; ``docs/tutorials/07_write_a_study.py`` builds one end to end.

Example
-------
A study of two computations (the NTK feature curve of a token law for two seeds) and its analysis:

>>> import tempfile
>>> from attnflow.studies import (Column, ComputeTask, Study, StudyConfig, StudyResult, Table,
...                               run_study)
>>> class Curves(Study):
...     name, description = "curves_doc", "a single Dirac gives affine log-sum-exp features"
...     class Config(StudyConfig):
...         seeds: list[int] = [0, 1, 2]
...     def quick_params(self):
...         return {"seeds": [0, 1]}
...     def plan(self, config):
...         params = dict(law="dirac", d=3, N=8, P=[4, 16], scale=2.0, atoms=5, components=3, sigma=0.5)
...         return {f"seed{s}": ComputeTask(fn="attnflow.studies.ntk_injectivity:injectivity_task",
...                                         params={**params, "seed": s})
...                 for s in config.seeds}
...     def analyse(self, config, runs, out_dir):
...         rows = [{"seed": s, "injective": runs.result(f"seed{s}")["injective"]} for s in config.seeds]
...         return StudyResult(summary={"rows": rows},
...                            tables=[Table(columns=[Column("seed"), Column("injective")], rows=rows)])
>>> out = tempfile.mkdtemp()
>>> summary = run_study(Curves(), out, quick=True)
>>> summary["rows"], summary["run"]["status"], sorted(summary["run"]["tasks"])
([{'seed': 0, 'injective': False}, {'seed': 1, 'injective': False}], 'done', ['seed0', 'seed1'])
>>> print(open(f"{out}/table.md").read())
| seed | injective |
|---|---|
| 0 | no |
| 1 | no |
<BLANKLINE>
>>> run_study(Curves(), out, quick=True)["runs"]["seed0"]["skipped"]   # resumed: nothing recomputed
True
"""

from __future__ import annotations

import abc
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xarray as xr
from pydantic import BaseModel, ConfigDict, ValidationError

from ..analysis.verdicts import VerdictRecord
from ..experiments.compute import read_compute
from ..experiments.config import ExperimentConfig
from ..experiments.pde_runs import open_pde_run
from ..experiments.store import open_run, read_meta
from .errors import StudyConfigError
from .render import Table
from .tasks import Task

__all__ = [
    "RUN_KEY",
    "FigureCallback",
    "Study",
    "StudyConfig",
    "StudyResult",
    "StudyRuns",
]


class StudyConfig(BaseModel):
    """Base of the parameters of a study: frozen, unknown keys refused.

    Give every field a ``description`` (what it is, its unit) and ``examples`` (a valid value): an
    error message quotes both as the fix.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


def _fix(model: type[BaseModel], key: str) -> str:
    info = model.model_fields.get(key)
    if info is None:
        return ""
    what = f"{key} is {info.description}" if info.description else ""
    example = f"e.g. {key}={info.examples[0]!r}" if info.examples else ""
    return "; ".join(p for p in (what, example) if p)


def validate_params(model: type[StudyConfig], params: Mapping[str, Any], study: str) -> StudyConfig:
    """Validate the parameters of ``study`` against ``model``: one line per problem (rule, value, fix).

    Raises
    ------
    StudyConfigError
        On an unknown key (with the closest valid one) or a value that breaks a rule.
    """
    if not isinstance(params, Mapping):
        raise StudyConfigError(
            f"the parameters of study {study!r} must be a mapping of keys: got {type(params).__name__} "
            f"{params!r}; give key=value pairs, e.g. {{{next(iter(model.model_fields), 'key')!r}: ...}}"
        )
    allowed = list(model.model_fields)
    errors = []
    for key in params:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            errors.append(f"unknown parameter {key!r}; {hint}(parameters of {study}: {', '.join(allowed)})")
    try:
        validated = model.model_validate({k: v for k, v in params.items() if k in allowed})
    except ValidationError as exc:
        for e in exc.errors():
            loc = [str(p) for p in e["loc"]]
            key = ".".join(loc) or "the parameters"
            rule = e["msg"].removeprefix("Value error, ").replace("Input should be", "must be")
            fix = _fix(model, loc[0]) if loc else ""
            errors.append(f"{key}: {rule}; got {e.get('input')!r}" + (f"; {fix}" if fix else ""))
    if not errors:
        return validated
    raise StudyConfigError(f"invalid parameters of study {study!r}:\n  " + "\n  ".join(errors))


@dataclass(frozen=True)
class StudyRuns:
    """The finished tasks of a study as the analysis sees them: ``root/<name>/`` run directories.

    Attributes
    ----------
    root : Path
        The parent of the run directories (``<study dir>/runs``).
    configs : dict
        Particle-run name -> validated experiment config, in plan order.
    results : dict
        Task name -> result of :func:`attnflow.experiments.sweep.run_tasks` (status, elapsed_s, skipped).
    specs : dict
        Task name -> task spec (``{"kind": ..., ...}``, :func:`attnflow.experiments.sweep.task_spec`), in
        plan order; every task of the plan, particle runs included.
    """

    root: Path
    configs: dict[str, ExperimentConfig]
    results: dict[str, dict] = field(default_factory=dict)
    specs: dict[str, dict] = field(default_factory=dict)

    def path(self, name: str) -> Path:
        """The run directory of ``name``."""
        return self.root / name

    def kind(self, name: str) -> str:
        """The kind of task ``name``: ``particle``, ``pde``, ``training`` or ``compute``."""
        if name in self.specs:
            return self.specs[name]["kind"]
        if name in self.configs:
            return "particle"
        raise KeyError(self._unknown(name))

    def _unknown(self, name: str) -> str:
        names = list(self.specs or self.configs)
        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"the plan has no task {name!r}; {hint}its tasks: {', '.join(names) or 'none'}"

    def open(self, name: str) -> xr.Dataset:
        """The stored dataset of particle run ``name`` (:func:`attnflow.experiments.store.open_run`) or of
        PDE run ``name`` (:func:`attnflow.experiments.pde_runs.open_pde_run`: its store verified against
        its config first)."""
        if self.specs.get(name, {}).get("kind") == "pde":
            return open_pde_run(self.path(name))
        return open_run(self.path(name))

    def result(self, name: str) -> dict[str, Any]:
        """The stored result of computation ``name``: name -> numpy array or JSON value
        (:func:`attnflow.experiments.compute.read_compute`).

        Raises
        ------
        KeyError
            ``name`` is no task of the plan, or not a computation.
        """
        kind = self.kind(name)
        if kind != "compute":
            raise KeyError(
                f"task {name!r} is a {kind} run, not a computation: read it with runs.open({name!r}) "
                f"(or runs.meta({name!r}))"
            )
        return read_compute(self.path(name))

    def results_of(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """The stored results of every computation whose name starts with ``prefix``, in plan order."""
        return {
            name: self.result(name)
            for name, spec in self.specs.items()
            if spec["kind"] == "compute" and name.startswith(prefix)
        }

    def meta(self, name: str) -> dict:
        """The ``meta.json`` of run ``name`` (status, times, versions)."""
        return read_meta(self.path(name))


#: The one signature of a figure callback: ``figures(data, out_dir) -> {figure key: file name}``, ``data``
#: being the ``figure_data`` of a :class:`StudyResult` (or its summary). The plot layer registers one per
#: study (:func:`attnflow.plot.studies.figures_for`); the study layer never imports it.
FigureCallback = Callable[[Mapping[str, Any], Path], dict]

#: the key of summary.json that holds the runner's record (study, config, tasks, status, figures); a
#: study's own summary may not use it
RUN_KEY = "run"


@dataclass(frozen=True)
class StudyResult:
    """What an analysis returns: numbers, verdict records, table specs and the data of its figures.

    Attributes
    ----------
    summary : dict
        The study's numbers (JSON data), written to ``summary.json`` next to the runner's record (key
        ``"run"``, reserved) and the records (key ``"verdicts"``).
    verdicts : list of VerdictRecord
        One record per verdict (:mod:`attnflow.analysis.verdicts`), written as ``summary["verdicts"]``.
    tables : list of Table
        Table specs (:class:`attnflow.studies.render.Table`): the runner renders them to ``table.md``
        (and stores them in ``tables.json`` for the HTML report). No hand-written Markdown.
    figure_data : dict or None
        What the study's figure callback draws (:data:`FigureCallback`); None: the summary itself.
    """

    summary: dict
    verdicts: list[VerdictRecord] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figure_data: dict | None = None


class Study(abc.ABC):
    """A registered study: parameters, the runs they plan, the analysis of those runs.

    Subclasses set ``name``, ``description`` and ``Config`` (class or instance attributes) and
    implement :meth:`plan` and :meth:`analyse`; :meth:`quick_params` defaults to no change.
    """

    #: registry key (letters, digits, underscores)
    name: str
    #: one line: the claim the study checks
    description: str
    #: the parameters (pydantic, frozen; defaults = the full-size study)
    Config: type[StudyConfig]
    #: keys of the summary (at any depth) that hold wall-clock or CPU times: they differ from one run to
    #: the next, so the reproducibility checks (a killed and resumed study gives the same summary.json)
    #: compare everything else bit for bit
    timing_keys: tuple[str, ...] = ()

    def quick_params(self) -> dict[str, Any]:
        """Parameters of the quick variant (seconds, for tests and CI); explicit parameters win."""
        return {}

    def config(self, params: Mapping[str, Any] | None = None, *, quick: bool = False) -> StudyConfig:
        """The validated parameters: defaults, then the quick variant's, then ``params``.

        Raises
        ------
        StudyConfigError
            Naming each bad key, its rule, the value received and the fix.
        """
        merged = {**(self.quick_params() if quick else {}), **dict(params or {})}
        return validate_params(self.Config, merged, self.name)

    @abc.abstractmethod
    def plan(self, config: StudyConfig) -> Mapping[str, Task | ExperimentConfig | dict]:
        """The tasks of the study, in run order: task name (a directory name) -> a task
        (:class:`~attnflow.studies.tasks.ParticleRun`, :class:`~attnflow.studies.tasks.PdeRun`,
        :class:`~attnflow.studies.tasks.TrainingRun`, :class:`~attnflow.studies.tasks.ComputeTask`; an
        experiment config stands for a particle run). Never empty: all the work of a study is in tasks."""

    @abc.abstractmethod
    def analyse(self, config: StudyConfig, runs: StudyRuns, out_dir: Path) -> StudyResult:
        """Read the stored task results (``runs``) and return a :class:`StudyResult` (numbers, verdict
        records, table specs, figure data). It computes nothing heavy: the runner writes ``summary.json``,
        ``table.md`` and the figures (a study may write a data file its figures read, inside
        ``out_dir``)."""
