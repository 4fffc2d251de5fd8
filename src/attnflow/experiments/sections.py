"""The sections of a particle experiment config that describe the system: ``model``, ``weights``,
``tokens``, ``heads``; the allowed values read from the core's registries (:data:`CHOICES`); the check
that a weight process fits the heads.

The allowed values mirror the core: they are read from its registries whenever a config is validated,
never copied, so a name added to a registry (an integrator in :data:`attnflow.integrators.INTEGRATORS`,
an attention kind...) is at once a valid config value. The weight processes are those of
:data:`attnflow.model.registry.WEIGHT_PROCESSES` that have a section here (checked at import).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import Field, field_validator, model_validator

from .. import geometry as geometry_module, integrators as integrators_module
from ..model import (
    attention as attention_module,
    heads as heads_module,
    tokens as tokens_module,
    transformer as transformer_module,
    weights as weights_module,
)
from ..model.registry import WEIGHT_PROCESSES, forcing_dimensions, make_weight_process
from ..model.weights import WeightProcess
from ..simulation import simulator as simulator_module
from .fields import Section, choice

__all__ = [
    "CHOICES",
    "TOKEN_SECTIONS",
    "WEIGHT_SECTIONS",
    "ConstantWeights",
    "FileTokens",
    "HeadsConfig",
    "ModelConfig",
    "OUWeights",
    "OctahedralTokens",
    "OscillatingWeights",
    "TokensConfig",
    "UniformTokens",
    "VMFTokens",
    "WeightsConfig",
    "check_weight_sections",
    "check_weights_fit",
    "one_of",
    "weight_process",
]


# -- allowed values, from the core -------------------------------------------------------------------
#: Dotted key -> the allowed values, read from the core's registries at each validation.
CHOICES: dict[str, Callable[[], tuple[str, ...]]] = {
    "model.direction": lambda: tuple(transformer_module.DIRECTIONS),
    "model.attention": lambda: tuple(attention_module.ATTENTION_KINDS),
    "model.geometry": lambda: tuple(geometry_module.GEOMETRIES),
    "model.backend": lambda: tuple(transformer_module.BACKENDS),
    "weights.noise": lambda: tuple(weights_module.NOISE_KINDS),
    "weights.forcing": lambda: tuple(weights_module.FORCINGS),
    "weights.phases": lambda: tuple(weights_module.PHASE_KINDS),
    "integrator.method": lambda: tuple(integrators_module.INTEGRATORS),
    "integrator.loop": lambda: tuple(simulator_module.LOOPS),
    "precision": lambda: tuple(simulator_module.DTYPES),
}


def one_of(key: str) -> Any:
    """A string field whose allowed values are ``CHOICES[key]()`` (a ``literal_error`` otherwise)."""
    return choice(CHOICES[key])


class ModelConfig(Section):
    """``model:`` the attention dynamics (:class:`attnflow.TransformerModel`)."""

    direction: one_of("model.direction")
    attention: one_of("model.attention") = "softmax"
    beta: float = Field(1.0, ge=transformer_module.BETA_MIN, le=transformer_module.BETA_MAX)
    geometry: one_of("model.geometry") = "sphere"
    causal: bool = False
    layer_scaling: float | None = Field(
        None, ge=transformer_module.LAYER_SCALING_MIN, le=transformer_module.LAYER_SCALING_MAX
    )
    backend: one_of("model.backend") = "auto"
    sinkhorn_iters: int = Field(50, ge=1)
    sinkhorn_tol: float | None = Field(None, gt=0)
    token_noise: float = 0.0

    @field_validator("token_noise")
    @classmethod
    def _token_noise(cls, v: float) -> float:
        if v < 0:
            raise ValueError(
                f"model.token_noise eps must be >= 0 (the tokens' Brownian motion has generator eps Delta): "
                f"got {v!r}; use 0 for noiseless tokens or a positive intensity such as 0.1"
            )
        return v

    def build(self, weights: WeightProcess) -> transformer_module.TransformerModel:
        """The :class:`attnflow.TransformerModel` of this section with the heads' weight process ``weights``.

        Raises
        ------
        ValueError
            From :class:`attnflow.TransformerModel` (a combination it refuses, e.g. causal Sinkhorn).
        """
        return transformer_module.TransformerModel(
            direction=self.direction,
            attention=self.attention,
            beta=self.beta,
            geometry=self.geometry,
            weights=weights,
            causal=self.causal,
            layer_scaling=self.layer_scaling,
            sinkhorn_iters=self.sinkhorn_iters,
            sinkhorn_tol=self.sinkhorn_tol,
            backend=self.backend,
            token_noise=self.token_noise,
        )


# -- weights: one section per named process of attnflow.model.registry --------------------------------
class _WeightsSection(Section):
    def params(self) -> dict[str, Any]:
        """Keyword parameters of :func:`attnflow.model.registry.make_weight_process`."""
        return self.model_dump(exclude={"process"})


class ConstantWeights(_WeightsSection):
    """``weights: {process: constant}``: frozen heads."""

    process: Literal["constant"]


class OUWeights(_WeightsSection):
    """``weights: {process: ornstein_uhlenbeck, ...}``: f = rate (F - D), g = sqrt(2 sigma2)."""

    process: Literal["ornstein_uhlenbeck"]
    sigma2: float = Field(1.0, ge=0)
    noise: one_of("weights.noise") = "symmetric"
    F: Literal["identity"] | list[list[float]] | list[list[list[float]]] = "identity"
    rate: float = Field(1.0, gt=0)


class OscillatingWeights(_WeightsSection):
    """``weights: {process: oscillating, ...}``: f_h = rate (F(t + phi_h) - D_h)."""

    process: Literal["oscillating"]
    forcing: one_of("weights.forcing") = "s2"
    phases: one_of("weights.phases") = "per_head"
    rate: float = Field(1.0, gt=0)


#: The ``weights.process`` sections. Each tag is a name of ``WEIGHT_PROCESSES`` and each key one of
#: its parameters (checked below). ``piecewise_constant`` has no section: its layers are an
#: (L, H, d, d) array, while a config's heads come from the ``heads`` section.
WEIGHT_SECTIONS: tuple[type[_WeightsSection], ...] = (ConstantWeights, OUWeights, OscillatingWeights)


def check_weight_sections() -> None:
    """Every weights section names a process of the registry and only keys that it takes (at import).

    Raises
    ------
    RuntimeError
        The schema and :data:`attnflow.model.registry.WEIGHT_PROCESSES` disagree.
    """
    for cls in WEIGHT_SECTIONS:
        name = get_args(cls.model_fields["process"].annotation)[0]
        entry = WEIGHT_PROCESSES.get(name)
        if entry is None:
            raise RuntimeError(
                f"the config section {cls.__name__} names the weight process {name!r}, which is not in "
                f"attnflow.model.registry.WEIGHT_PROCESSES ({', '.join(WEIGHT_PROCESSES)})"
            )
        extra = [k for k in cls.model_fields if k != "process" and k not in entry.params]
        if extra:
            raise RuntimeError(
                f"the config section {cls.__name__} has keys {extra} that the weight process {name!r} "
                f"does not take ({', '.join(entry.params)})"
            )


check_weight_sections()

WeightsConfig = Annotated[Union[WEIGHT_SECTIONS], Field(discriminator="process")]  # noqa: UP007


# -- tokens, heads, integrator, record -----------------------------------------------------------------
class _TokensBase(Section):
    n: int = Field(ge=1)
    d: int = Field(ge=2)


class UniformTokens(_TokensBase):
    """``tokens: {init: uniform, n, d}``."""

    init: Literal["uniform"]


class OctahedralTokens(_TokensBase):
    """``tokens: {init: octahedral, n, d, noise}`` (the authors' initial condition)."""

    init: Literal["octahedral"]
    d: int = Field(3, ge=2)
    noise: float = Field(0.05, ge=0, le=tokens_module.NOISE_MAX)


class VMFTokens(_TokensBase):
    """``tokens: {init: von_mises_fisher, n, d, clusters, kappa}``."""

    init: Literal["von_mises_fisher"]
    clusters: int = Field(3, ge=1)
    kappa: float = Field(50.0, gt=0, le=tokens_module.KAPPA_MAX)


class FileTokens(Section):
    """``tokens: {init: file, path}``: a ``.npy`` array of shape (n, d) or (paths, n, d)."""

    init: Literal["file"]
    path: str


TOKEN_SECTIONS = (UniformTokens, OctahedralTokens, VMFTokens, FileTokens)
TokensConfig = Annotated[Union[TOKEN_SECTIONS], Field(discriminator="init")]  # noqa: UP007


class HeadsConfig(Section):
    """``heads: {init, H, scale, path}``; ``path`` only (and required) for ``init: file``."""

    init: Literal["symmetric_gaussian", "gaussian", "identity", "file"] = "symmetric_gaussian"
    H: int = Field(ge=1)
    scale: float = Field(1.0, gt=0, le=heads_module.SCALE_MAX, allow_inf_nan=False)
    path: str | None = None

    @model_validator(mode="after")
    def _path_iff_file(self):
        if (self.init == "file") != (self.path is not None):
            raise ValueError(
                "heads.path is required for heads.init 'file' and not allowed otherwise: "
                f"got init={self.init!r}, path={self.path!r}"
            )
        return self


# -- weights that fit the heads ------------------------------------------------------------------------
def _forcing_fix() -> str:
    dims = sorted(forcing_dimensions().items(), key=lambda item: item[1])
    return "use weights.forcing " + " and ".join(f"{f!r} for d = {d}" for f, d in dims)


#: weights.process -> (the key to blame when the process does not fit the heads, how to fix it)
_WEIGHT_KEYS: dict[str, tuple[str, Callable[[], str]]] = {
    "ornstein_uhlenbeck": (
        "weights.F",
        lambda: "give weights.F as 'identity' or a d x d (or H x d x d) matrix",
    ),
    "oscillating": ("weights.forcing", _forcing_fix),
}


def weight_process(section: _WeightsSection) -> WeightProcess:
    """The core weight process of a ``weights:`` section, built by the registry.

    Raises
    ------
    ValueError
        From the registry or the process.
    """
    return make_weight_process(section.process, **section.params())


def check_weights_fit(section: _WeightsSection, H: int, d: int, where: str) -> WeightProcess:
    """The weight process of a section, checked to fit ``H`` heads of size ``d``.

    Raises
    ------
    ValueError
        Naming the config key to fix, ``heads.H`` and ``where`` (how d was found, e.g. ``tokens.d = 3``).
    """
    key, fix = _WEIGHT_KEYS.get(section.process, ("weights", lambda: "check the weights section"))
    try:
        process = weight_process(section)
        process.validate(H, d)
    except ValueError as exc:
        raise ValueError(
            f"{key} does not fit heads.H = {H} and {where} (weights.process {section.process!r}): "
            f"{exc}; {fix()}"
        ) from exc
    return process
