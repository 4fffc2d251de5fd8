"""The YAML config of a training run (``attnflow train CONFIG --out DIR``), validated at load.

Sections: ``model`` (the attention dynamics, as in an experiment config; backend ``auto`` or ``torch``),
``flow`` (layers L, heads H, depth, steps, head parameterisation), ``task`` (``kind: measure`` with a
measure loss, or ``kind: two_class`` with ``loss: logistic``) and ``train`` (AdamW's learning rate and
weight decay, steps, gradient method, minibatch, recording and checkpoints). Allowed values are read from
the training package's registries (:data:`attnflow.training.losses.LOSSES`, ``HEAD_PARAMS``,
``GRADIENTS``, ``ADJOINT_STATES``); errors name the dotted key, the value and the allowed values.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import Field, model_validator

from ..integrators import INTEGRATORS
from ..training.adjoint import ADJOINT_STATES
from ..training.flow import HEAD_PARAMS
from ..training.losses import CLASS_LOSSES, LOSSES, MEASURE_LOSSES
from ..training.trainer import GRADIENTS
from .errors import format_choices, validate_mapping
from .fields import Section, choice
from .sections import ModelConfig
from .yaml_loader import load_config_source

__all__ = ["EXAMPLE_TRAINING_YAML", "TrainingConfig", "dump_training_config", "load_training_config"]


class FlowConfig(Section):
    """``flow:`` the trainable flow (:class:`attnflow.training.TrainableFlow`)."""

    d: int = Field(3, ge=2)
    layers: int = Field(ge=1)
    heads: int = Field(ge=1)
    t1: float = Field(1.0, gt=0)
    steps_per_layer: int = Field(1, ge=1)
    param: choice(lambda: tuple(HEAD_PARAMS)) = "dv"
    head_dim: int | None = Field(None, ge=1)
    integrator: choice(lambda: tuple(INTEGRATORS)) = "euler"
    init_scale: float = Field(0.5, ge=0)


class MeasureTaskConfig(Section):
    """``task: {kind: measure, ...}``: uniform clouds to a von Mises-Fisher mixture."""

    kind: Literal["measure"]
    loss: choice(lambda: LOSSES)
    paths: int = Field(16, ge=1)
    n: int = Field(16, ge=2)
    clusters: int = Field(2, ge=1)
    kappa: float = Field(20.0, gt=0, le=1e6)
    target_factor: int = Field(4, ge=1)

    @model_validator(mode="after")
    def _measure_loss(self):
        if self.loss not in MEASURE_LOSSES:
            raise ValueError(
                f"task.loss: the measure task needs a measure loss, got {self.loss!r}; use one of "
                f"{format_choices(MEASURE_LOSSES)}"
            )
        return self


class TwoClassTaskConfig(Section):
    """``task: {kind: two_class, ...}``: sequences of two classes, linear readout of a class token."""

    kind: Literal["two_class"]
    loss: choice(lambda: LOSSES) = "logistic"
    paths: int = Field(32, ge=2)
    n: int = Field(12, ge=2)
    angle: float = Field(math.pi / 3, ge=0, le=math.pi)
    spread: float = Field(0.5, ge=0)

    @model_validator(mode="after")
    def _class_loss(self):
        if self.loss not in CLASS_LOSSES:
            raise ValueError(
                f"task.loss: the two_class task needs {format_choices(CLASS_LOSSES)}, got {self.loss!r}"
            )
        return self


TASK_SECTIONS = (MeasureTaskConfig, TwoClassTaskConfig)
TaskConfig = Annotated[Union[MeasureTaskConfig, TwoClassTaskConfig], Field(discriminator="kind")]  # noqa: UP007


class TrainConfig(Section):
    """``train:`` AdamW and the loop."""

    steps: int = Field(ge=1)
    lr: float = Field(gt=0)
    weight_decay: float = Field(0.0, ge=0)
    gradient: choice(lambda: GRADIENTS) = "autograd"
    adjoint_state: choice(lambda: ADJOINT_STATES) = "recomputed"
    batch: int | None = Field(None, ge=1)
    record_every: int = Field(10, ge=1)
    checkpoint_every: int = Field(10, ge=1)


class TrainingConfig(Section):
    """A whole training run. Build one with :func:`load_training_config`."""

    name: str = "train"
    seed: int = Field(0, ge=0)
    model: ModelConfig
    flow: FlowConfig
    task: TaskConfig
    train: TrainConfig
    #: run even when the estimated memory or time per step exceeds this machine
    #: (:func:`attnflow.experiments.resources.check_resources`)
    allow_large: bool = False

    @model_validator(mode="after")
    def _fits(self):
        if self.model.backend not in ("auto", "torch"):
            raise ValueError(
                f"model.backend: a training run differentiates the flow on the PyTorch backend, got "
                f"{self.model.backend!r} (forward only); use 'torch' or 'auto'"
            )
        if self.train.batch is not None and self.train.batch > self.task.paths:
            raise ValueError(
                f"train.batch must be at most task.paths = {self.task.paths}: got {self.train.batch}; "
                "lower the batch or raise task.paths"
            )
        if self.flow.head_dim is not None and self.flow.param != "qkv":
            raise ValueError(f"flow.head_dim applies to param 'qkv' only: got param {self.flow.param!r}")
        return self


UNIONS = {"task": ("kind", TASK_SECTIONS)}

#: a small config that trains in seconds (``attnflow train`` docs, tests)
EXAMPLE_TRAINING_YAML = """\
name: measure-mmd
seed: 0
model: {direction: ascent, beta: 1.0}
flow: {d: 3, layers: 4, heads: 4, t1: 1.0, steps_per_layer: 2, param: dv}
task: {kind: measure, loss: mmd, paths: 32, n: 16, clusters: 2, kappa: 20.0}
train: {steps: 200, lr: 0.03, gradient: autograd, record_every: 20, checkpoint_every: 20}
"""


#: How :func:`load_training_config` calls a config, its class and its file, and how to fix a bad file.
_NAMES = ("training", "a training config", "a TrainingConfig", "training config file")
_FIX = "start from EXAMPLE_TRAINING_YAML in attnflow.experiments.training_config"


def _validate(data: Any, source: str) -> TrainingConfig:
    label = f"training config {source}"
    return validate_mapping(data, TrainingConfig, UNIONS, source, "training config", label)


def load_training_config(source: str | Path | dict | TrainingConfig) -> TrainingConfig:
    """Load and validate a training config from a YAML file, a dict or a config (returned as is).

    Raises
    ------
    ConfigError
        One line per problem: the dotted key, the value received and the allowed values or bound
        (e.g. ``train.lr must be greater than 0: got -0.1 (float)``).
    """
    return load_config_source(source, TrainingConfig, _validate, _NAMES, _FIX)


def dump_training_config(cfg: TrainingConfig) -> str:
    """The config as YAML (round-trips through :func:`load_training_config`)."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
