"""Experiment layer: YAML configs, the resumable run store, sweeps (local processes or Dask).

cfg = load_config("ou.yaml")                  # validated ExperimentConfig
ds = run_experiment(cfg, "runs/ou")           # resumes an interrupted run of the same config
summary = run_sweep(cfg, {"heads.H": [2, 4]}, "runs/sweep")
ds = open_sweep("runs/sweep")                 # swept keys become dims (heads.H -> heads_H)
"""

from .builder import (
    ESTIMATORS as ESTIMATORS,
    estimator as estimator,
    paths_computed as paths_computed,
)
from .config import (
    EXAMPLE_YAML as EXAMPLE_YAML,
    ConfigError as ConfigError,
    ExperimentConfig as ExperimentConfig,
    build as build,
    config_diff as config_diff,
    dump_config as dump_config,
    load_config as load_config,
    with_overrides as with_overrides,
)
from .progress import ProgressBar as ProgressBar
from .store import (
    RunConfigMismatchError as RunConfigMismatchError,
    open_run as open_run,
    read_meta as read_meta,
    run_experiment as run_experiment,
    run_info as run_info,
)
from .sweep import (
    SweepMismatchError as SweepMismatchError,
    SweepShapeError as SweepShapeError,
    open_sweep as open_sweep,
    parse_grid as parse_grid,
    run_sweep as run_sweep,
    sweep_info as sweep_info,
)

__all__ = [
    "ESTIMATORS",
    "EXAMPLE_YAML",
    "ConfigError",
    "ExperimentConfig",
    "ProgressBar",
    "RunConfigMismatchError",
    "SweepMismatchError",
    "SweepShapeError",
    "build",
    "config_diff",
    "dump_config",
    "estimator",
    "load_config",
    "open_run",
    "open_sweep",
    "parse_grid",
    "paths_computed",
    "read_meta",
    "run_experiment",
    "run_info",
    "run_sweep",
    "sweep_info",
    "with_overrides",
]
