r"""What a study is: a pydantic config, a plan of runs on the run store, an analysis of those runs.

A study subclasses :class:`Study` and declares

* ``name`` (the registry key), ``description`` (one line: the claim it checks);
* ``Config``: a :class:`StudyConfig` (pydantic, frozen, unknown keys refused) whose defaults are the
  full-size study, and :meth:`Study.quick_params` the parameters of its quick variant (seconds, for CI);
* :meth:`Study.plan`: the runs, ``{run name: experiment config}``; the runner executes them on the run
  store (``out/runs/<name>/``) through :func:`attnflow.experiments.sweep.run_tasks`, so they resume
  after a kill and run locally or on a Dask cluster;
* :meth:`Study.analyse`: reads the finished runs and returns a :class:`StudyAnalysis` (the numbers of
  ``summary.json``, the Markdown of ``table.md``, the figures drawn through the injected callback).

Example
-------
>>> from attnflow.studies import Study, StudyConfig, StudyAnalysis
>>> class Decay(Study):
...     name, description = "decay", "G^2 decays along a frozen-weight flow"
...     class Config(StudyConfig):
...         n: int = 32
...     def quick_params(self):
...         return {"n": 8}
...     def plan(self, config):
...         return {}
...     def analyse(self, config, runs, out_dir, *, figures=None):
...         return StudyAnalysis(summary={"n": config.n}, table="| n |\n|---|\n| 8 |\n")
>>> Decay().config(quick=True).n
8
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

from ..experiments.config import ExperimentConfig
from ..experiments.store import open_run, read_meta
from .errors import StudyConfigError

__all__ = ["Study", "StudyAnalysis", "StudyConfig", "StudyRuns"]


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
    """The runs of a study as the analysis sees them: ``root/<name>/`` run directories.

    Attributes
    ----------
    root : Path
        The parent of the run directories (``<study dir>/runs``).
    configs : dict
        Run name -> validated experiment config, in plan order.
    results : dict
        Run name -> result of :func:`attnflow.experiments.sweep.run_tasks` (status, elapsed_s, skipped).
    """

    root: Path
    configs: dict[str, ExperimentConfig]
    results: dict[str, dict] = field(default_factory=dict)

    def path(self, name: str) -> Path:
        """The run directory of ``name``."""
        return self.root / name

    def open(self, name: str) -> xr.Dataset:
        """The stored dataset of run ``name`` (:func:`attnflow.experiments.store.open_run`)."""
        return open_run(self.path(name))

    def meta(self, name: str) -> dict:
        """The ``meta.json`` of run ``name`` (status, times, versions)."""
        return read_meta(self.path(name))


@dataclass(frozen=True)
class StudyAnalysis:
    """What an analysis hands back to the runner.

    Attributes
    ----------
    summary : dict
        Study-specific numbers of ``summary.json`` (the runner adds the study name, config, version,
        wall time and per-run status).
    table : str
        Markdown written to ``table.md`` (and printed by ``attnflow study show``).
    figures : dict
        Figure key -> file name in the output directory (empty when no callback was given).
    """

    summary: dict
    table: str
    figures: dict[str, str] = field(default_factory=dict)


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
    def plan(self, config: StudyConfig) -> dict[str, ExperimentConfig | dict]:
        """The runs of the study: run name (a directory name) -> experiment config, in run order."""

    @abc.abstractmethod
    def analyse(
        self,
        config: StudyConfig,
        runs: StudyRuns,
        out_dir: Path,
        *,
        figures: Callable[..., dict] | None = None,
    ) -> StudyAnalysis:
        """Read the finished runs, compute the numbers, draw the figures through ``figures`` (the plot
        layer's function for this study, injected by the caller; None: no figures)."""
