"""Experiment configuration files (YAML): the public face of the config modules.

The implementation is split by concern:

* :mod:`attnflow.experiments.schema`: the pydantic schema (allowed values read from the core's
  registries), the YAML 1.2 loader, :func:`load_config`, :func:`dump_config`, :func:`config_diff`,
  :func:`with_overrides`, :func:`flatten_config`, :data:`EXAMPLE_YAML`;
* :mod:`attnflow.experiments.errors`: :class:`ConfigError` and its messages (key, value, allowed
  values, "did you mean");
* :mod:`attnflow.experiments.builder`: :func:`build`, a config -> :class:`attnflow.simulation.SimulationSpec`.
"""

from __future__ import annotations

from .builder import build as build
from .errors import ConfigError as ConfigError
from .schema import (
    EXAMPLE_YAML as EXAMPLE_YAML,
    ExperimentConfig as ExperimentConfig,
    config_diff as config_diff,
    dump_config as dump_config,
    flatten_config as flatten_config,
    load_config as load_config,
    load_yaml as load_yaml,
    with_overrides as with_overrides,
)

__all__ = [
    "EXAMPLE_YAML",
    "ConfigError",
    "ExperimentConfig",
    "build",
    "config_diff",
    "dump_config",
    "flatten_config",
    "load_config",
    "load_yaml",
    "with_overrides",
]
