"""The experiment config schema (pydantic): :class:`ExperimentConfig`, its loading, dumping and comparing.

The schema is fixed by ``docs/design.md`` (section "Experiment config schema"). Every section is a
pydantic model with ``extra="forbid"`` and strict types; errors are re-raised as
:class:`~attnflow.experiments.errors.ConfigError` naming the dotted key, the value received and the
allowed values. The schema is split by concern; this module holds the whole config and re-exports the
parts, so ``from attnflow.experiments.schema import X`` keeps working:

* :mod:`~attnflow.experiments.yaml_loader`: the bounded YAML 1.2 reader of every config file;
* :mod:`~attnflow.experiments.fields`: the field types shared by the particle, PDE and training schemas
  (``Section``, ``choice``, ``TimeGrid``: ``dt`` and ``t1`` checked once, by
  :func:`attnflow.simulation.n_steps_for`);
* :mod:`~attnflow.experiments.sections`: ``model``, ``weights``, ``tokens``, ``heads`` and the allowed
  values read from the core's registries (:data:`CHOICES`);
* :mod:`~attnflow.experiments.run_options`: ``integrator``, ``record``, the device check;
* :mod:`~attnflow.experiments.example`: :data:`EXAMPLE_YAML`.

:func:`attnflow.experiments.builder.build` turns a config into a :class:`attnflow.simulation.SimulationSpec`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, field_validator, model_validator

from .errors import ConfigError, validate_mapping
from .example import EXAMPLE_YAML
from .fields import Section
from .run_options import MAX_STEPS, IntegratorConfig, RecordConfig, check_device
from .sections import (
    CHOICES,
    TOKEN_SECTIONS,
    WEIGHT_SECTIONS,
    ConstantWeights,
    FileTokens,
    HeadsConfig,
    ModelConfig,
    OctahedralTokens,
    OscillatingWeights,
    OUWeights,
    TokensConfig,
    UniformTokens,
    VMFTokens,
    WeightsConfig,
    check_weight_sections,
    check_weights_fit,
    one_of,
    weight_process,
)
from .yaml_loader import (
    MAX_CONFIG_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    MAX_WRITTEN_NODES,
    Yaml12Loader,
    YamlLimitError,
    check_config_dict,
    load_config_source,
    load_yaml,
    read_config_file,
)

__all__ = [
    "CHOICES",
    "EXAMPLE_YAML",
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_STEPS",
    "MAX_WRITTEN_NODES",
    "TOKEN_SECTIONS",
    "UNIONS",
    "WEIGHT_SECTIONS",
    "ConstantWeights",
    "ExperimentConfig",
    "FileTokens",
    "HeadsConfig",
    "IntegratorConfig",
    "ModelConfig",
    "OUWeights",
    "OctahedralTokens",
    "OscillatingWeights",
    "RecordConfig",
    "TokensConfig",
    "UniformTokens",
    "VMFTokens",
    "WeightsConfig",
    "Yaml12Loader",
    "YamlLimitError",
    "check_config_dict",
    "check_device",
    "check_weight_sections",
    "check_weights_fit",
    "config_diff",
    "dump_config",
    "flatten_config",
    "load_config",
    "load_yaml",
    "read_config_file",
    "weight_process",
    "with_device",
    "with_overrides",
]

#: The name this loader had before the split (kept for code that imported it).
_Yaml12Loader = Yaml12Loader


def with_device(cfg: ExperimentConfig, device: str | None) -> ExperimentConfig:
    """``cfg`` with its ``device`` replaced (checked by :func:`check_device`); None returns ``cfg``."""
    return cfg if device is None else cfg.model_copy(update={"device": check_device(device)})


# -- the whole config ----------------------------------------------------------------------------------
class ExperimentConfig(Section):
    """A whole experiment: model, weights, initial conditions, integrator, recording, seeds, device.

    Build one with :func:`load_config`; turn it into a simulation with
    :func:`attnflow.experiments.build`.
    """

    name: str = "run"
    model: ModelConfig
    weights: WeightsConfig = Field(default_factory=lambda: ConstantWeights(process="constant"))
    tokens: TokensConfig
    heads: HeadsConfig
    integrator: IntegratorConfig
    record: RecordConfig = Field(default_factory=RecordConfig)
    paths: int = Field(1, ge=1)
    init: Literal["per_path", "shared"] = "per_path"
    seed: int = Field(0, ge=0)
    precision: one_of("precision") = "float64"
    device: str = "cpu"
    checkpoint_every: int = Field(200, ge=1)
    #: run even when the estimated memory or time per step exceeds this machine
    #: (:func:`attnflow.experiments.resources.check_resources`)
    allow_large: bool = False

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        return check_device(v)

    @model_validator(mode="after")
    def _weights_fit_heads(self):
        """The weight process must fit ``heads.H`` heads of size ``tokens.d`` (checked here, not at run time).

        For ``tokens.init: file`` the dimension is known only once the file is read:
        :func:`attnflow.experiments.build` checks it then.
        """
        d = getattr(self.tokens, "d", None)
        if d is not None:
            check_weights_fit(self.weights, self.heads.H, d, f"tokens.d = {d}")
        return self

    @property
    def checkpoint_steps(self) -> int:
        """``checkpoint_every`` rounded up to a multiple of ``record.every``."""
        k = self.record.every
        return -(-self.checkpoint_every // k) * k


#: The tagged unions of ExperimentConfig: section -> (tag key, section models).
UNIONS = {"weights": ("process", WEIGHT_SECTIONS), "tokens": ("init", TOKEN_SECTIONS)}


# -- loading, dumping, comparing -----------------------------------------------------------------------
#: How :func:`load_config` calls a config, its class and its file, and how to fix a bad file.
_NAMES = ("experiment", "a config", "an ExperimentConfig", "config file")
_FIX = "give the path of a YAML config (see `attnflow config example`)"


def _validate(data: Any, source: str) -> ExperimentConfig:
    return validate_mapping(data, ExperimentConfig, UNIONS, source, "experiment config", source)


def load_config(source: str | Path | dict | ExperimentConfig) -> ExperimentConfig:
    """Load and validate an experiment config from a YAML file, a dict or a config (returned as is).

    Raises
    ------
    ConfigError
        With one line per problem: the dotted key, the value received and the allowed values.
    """
    return load_config_source(source, ExperimentConfig, _validate, _NAMES, _FIX)


def dump_config(config: ExperimentConfig) -> str:
    """YAML text of a config with every default filled in (reloads to an equal config)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def flatten_config(config: ExperimentConfig | dict, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value of a config (or of a nested dict): ``{"heads.H": 2, "seed": 0, ...}``."""
    d: Any = config.model_dump(mode="json") if isinstance(config, ExperimentConfig) else config
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(flatten_config(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def config_diff(a: ExperimentConfig, b: ExperimentConfig) -> list[str]:
    """Dotted keys whose values differ between two configs (sorted)."""
    fa, fb = flatten_config(a), flatten_config(b)
    return sorted(k for k in set(fa) | set(fb) if fa.get(k, "<absent>") != fb.get(k, "<absent>"))


def with_overrides(
    source: str | Path | dict | ExperimentConfig, overrides: dict[str, Any]
) -> ExperimentConfig:
    """A config with dotted keys replaced, e.g. ``{"heads.H": 4, "weights.sigma2": 0.5}``, validated."""
    if isinstance(source, (str, Path)):
        source = load_config(source)
    data = source.model_dump(mode="json") if isinstance(source, ExperimentConfig) else copy.deepcopy(source)
    for dotted, value in overrides.items():
        node = data
        parts = dotted.split(".")
        for i, part in enumerate(parts[:-1]):
            if not isinstance(node.get(part), dict):
                raise ConfigError(
                    f"cannot set {dotted!r}: {'.'.join(parts[: i + 1])!r} is not a section of the config"
                )
            node = node[part]
        node[parts[-1]] = value
    return _validate(data, f"with {', '.join(f'{k}={v!r}' for k, v in overrides.items())}")
