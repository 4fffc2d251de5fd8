"""The experiment config schema (pydantic) and its YAML 1.2 loader.

The schema is fixed by ``docs/design.md`` (section "Experiment config schema"). Every section is a
pydantic model with ``extra="forbid"`` and strict types; errors are re-raised as
:class:`~attnflow.experiments.errors.ConfigError` naming the dotted key, the value received and the
allowed values.

The allowed values mirror the core: they are read from its registries whenever a config is validated
(:data:`CHOICES`), never copied, so a name added to a registry (an integrator in
:data:`attnflow.integrators.INTEGRATORS`, an attention kind...) is at once a valid config value. The
weight processes are those of :data:`attnflow.model.registry.WEIGHT_PROCESSES` that have a section
here (checked at import); the whole-step rule is :func:`attnflow.simulation.n_steps_for`.

:func:`attnflow.experiments.builder.build` turns a config into a :class:`attnflow.simulation.SimulationSpec`.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

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
from ..simulation import n_steps_for, simulator as simulator_module
from .errors import (
    ConfigError,
    format_choices,
    short_message,
    short_repr,
    validate_mapping,
)

__all__ = [
    "CHOICES",
    "EXAMPLE_YAML",
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_STEPS",
    "MAX_WRITTEN_NODES",
    "ExperimentConfig",
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


# -- YAML 1.2 floats, bounded -------------------------------------------------------------------------
#: The largest config file read (a config is a few hundred bytes; PyYAML reads ~1 MB/s).
MAX_CONFIG_BYTES = 256 * 1024
#: The most values written in a document (a d x d x H matrix of weights.F included); PyYAML builds
#: ~15000 nodes per second, so this bounds the time spent on a hostile document to about a second.
MAX_WRITTEN_NODES = 20_000
#: The deepest nesting of mappings and lists (a config nests 3 levels).
MAX_DEPTH = 32
#: The most nodes a config may have once its aliases are expanded (a "billion laughs" stops here).
MAX_NODES = 100_000


class YamlLimitError(yaml.YAMLError):
    """A YAML document beyond the limits of a config (depth, size after alias expansion, recursion),
    or one that PyYAML cannot construct."""


def _check_tree(root: Any, children: Callable[[Any], list], what: str) -> None:
    """Bound the depth and the expanded size of a tree whose nodes may be shared (aliases); no recursion.

    ``children(node)`` lists a node's children. The expanded size counts a shared node once per
    reference, memoised per node, so a tree of 10^30 nodes written in 3 kB is measured in microseconds.
    A node that contains itself (``&a [*a]``) is refused.
    """
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, expanded = stack.pop()
        key = id(node)
        kids = children(node)
        if not kids:
            size[key] = 1
            continue
        if expanded:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if size[key] > MAX_NODES:
                raise YamlLimitError(
                    f"{what} has more than {MAX_NODES} values once its aliases are expanded; write a config "
                    "without repeated aliases (a config has a few dozen values)"
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise YamlLimitError(f"{what} contains itself through an alias; remove the recursive alias")
        if depth > MAX_DEPTH:
            raise YamlLimitError(
                f"{what} is nested deeper than {MAX_DEPTH} levels; a config nests sections two levels deep"
            )
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((k, depth + 1, False) for k in kids if id(k) not in size)


def _node_children(node: yaml.Node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _data_children(obj: Any) -> list:
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return []


class _Yaml12Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with the YAML 1.2 float rule, so ``1e-3`` is the float 0.001, and bounds.

    PyYAML implements YAML 1.1, whose floats need a dot and a signed exponent: ``1e-3`` and ``1.0e3``
    would be read as strings and then rejected by the strict schema. The document's node graph is
    checked (:data:`MAX_DEPTH`, :data:`MAX_NODES` after alias expansion, no recursive alias) before any
    Python object is built.
    """

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        # PyYAML composes recursively: stop before Python's recursion limit does
        self._depth += 1
        self._nodes += 1
        try:
            if self._nodes > MAX_WRITTEN_NODES:
                raise YamlLimitError(
                    f"the document has more than {MAX_WRITTEN_NODES} values; a config has a few dozen"
                )
            if self._depth > MAX_DEPTH + 1:
                line = self.peek_event().start_mark.line + 1
                raise YamlLimitError(
                    f"the document is nested deeper than {MAX_DEPTH} levels (line {line}); a config nests "
                    "sections two levels deep"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None:
            _check_tree(node, _node_children, "the document")
        return node


_YAML12_FLOAT = re.compile(
    r"""^(?:
        [-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?        # 1.5, 1., 1.0e-3, 1.0E3
      | [-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?               # .5, -.5E+4
      | [-+]?[0-9][0-9_]*[eE][-+]?[0-9]+                      # 1e-3, -2E+4
      | [-+]?\.(?:inf|Inf|INF)                                # .inf, -.Inf
      | \.(?:nan|NaN|NAN)                                     # .nan
    )$""",
    re.VERBOSE,
)
# Appended after PyYAML's own resolvers: integers (``10``) still resolve to int first.
_Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789."))


def check_config_dict(source: dict, kind: str) -> None:
    """Bound a config given as a dict (depth, expanded size, shared nodes) as the YAML reader bounds a
    document; one home for the particle, PDE and training loaders.

    Raises
    ------
    ConfigError
        ``invalid <kind> config (dict): ...`` naming the limit that was passed.
    """
    try:
        _check_tree(source, _data_children, "the config dict")
    except YamlLimitError as exc:
        raise ConfigError(f"invalid {kind} config (dict): {exc}") from None


def load_yaml(text: Any) -> Any:
    """Parse YAML text (or an open file) like ``yaml.safe_load``, but with YAML 1.2 floats
    (``1e-3``, ``-2E+4``, ``.5``) and the bounds of :class:`_Yaml12Loader`.

    Raises
    ------
    yaml.YAMLError
        Invalid YAML, or :class:`YamlLimitError` for a document beyond the bounds or one whose values
        PyYAML cannot construct (``!!int 0x``, ``!!timestamp 2020-13-45``, an unhashable key...).
    """
    try:
        return yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError:
        raise
    except RecursionError:
        raise YamlLimitError("the document is nested too deeply to be read") from None
    except Exception as exc:  # noqa: BLE001 - untrusted input: whatever PyYAML's constructors raise
        raise YamlLimitError(f"a value cannot be constructed ({type(exc).__name__}: {exc})") from None


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


def _one_of(key: str) -> Any:
    """A string field whose allowed values are ``CHOICES[key]()`` (a ``literal_error`` otherwise)."""
    choices = CHOICES[key]

    def check(value: Any) -> Any:
        allowed = choices()
        if isinstance(value, str) and value in allowed:
            return value
        raise PydanticCustomError(
            "literal_error", "Input should be {expected}", {"expected": format_choices(allowed)}
        )

    return Annotated[str, BeforeValidator(check)]


class _Section(BaseModel):
    # allow_inf_nan=False: every float of the schema must be finite (.inf / .nan are rejected by key)
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class ModelConfig(_Section):
    """``model:`` the attention dynamics (:class:`attnflow.TransformerModel`)."""

    direction: _one_of("model.direction")
    attention: _one_of("model.attention") = "softmax"
    beta: float = Field(1.0, ge=transformer_module.BETA_MIN, le=transformer_module.BETA_MAX)
    geometry: _one_of("model.geometry") = "sphere"
    causal: bool = False
    layer_scaling: float | None = Field(
        None, ge=transformer_module.LAYER_SCALING_MIN, le=transformer_module.LAYER_SCALING_MAX
    )
    backend: _one_of("model.backend") = "auto"
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


# -- weights: one section per named process of attnflow.model.registry --------------------------------
class _WeightsSection(_Section):
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
    noise: _one_of("weights.noise") = "symmetric"
    F: Literal["identity"] | list[list[float]] | list[list[list[float]]] = "identity"
    rate: float = Field(1.0, gt=0)


class OscillatingWeights(_WeightsSection):
    """``weights: {process: oscillating, ...}``: f_h = rate (F(t + phi_h) - D_h)."""

    process: Literal["oscillating"]
    forcing: _one_of("weights.forcing") = "s2"
    phases: _one_of("weights.phases") = "per_head"
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
class _TokensBase(_Section):
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


class FileTokens(_Section):
    """``tokens: {init: file, path}``: a ``.npy`` array of shape (n, d) or (paths, n, d)."""

    init: Literal["file"]
    path: str


TOKEN_SECTIONS = (UniformTokens, OctahedralTokens, VMFTokens, FileTokens)
TokensConfig = Annotated[Union[TOKEN_SECTIONS], Field(discriminator="init")]  # noqa: UP007


class HeadsConfig(_Section):
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


#: The most steps a config may ask for (a guard against t1/dt typos such as dt = 1e-30).
MAX_STEPS = 10**12


class IntegratorConfig(_Section):
    """``integrator: {method, dt, t1, loop}`` (t0 = 0; t1/dt must be a whole number: :func:`n_steps_for`).

    ``loop`` is the step loop of :class:`attnflow.simulation.Simulator`: ``auto`` (the compiled multi-step
    loop when it can run the simulation), ``fused`` (required) or ``python``.
    """

    method: _one_of("integrator.method") = "euler"
    dt: float = Field(gt=0)
    t1: float = Field(gt=0)
    tol: float | None = None
    max_iter: int | None = None
    loop: _one_of("integrator.loop") = "auto"

    @model_validator(mode="after")
    def _loop(self):
        """``loop: fused`` only with the method the compiled loop runs (the rest is checked at build)."""
        if self.loop == "fused" and self.method != "euler":
            raise ValueError(
                f"integrator.loop: fused runs integrator.method euler only: got method {self.method!r}; use "
                "loop: auto (the Python loop then runs this method) or method: euler"
            )
        return self

    @model_validator(mode="after")
    def _options(self):
        """``tol`` (> 0) and ``max_iter`` (>= 1) only for the methods that take them (JKO, adaptive)."""
        takes = integrators_module.TOLERANCE_INTEGRATORS
        given = [k for k in ("tol", "max_iter") if getattr(self, k) is not None]
        if given and self.method not in takes:
            raise ValueError(
                f"integrator.{given[0]} applies only to integrator.method {' or '.join(takes)}: got method "
                f"{self.method!r}; remove integrator.{given[0]} or choose one of those methods"
            )
        if self.tol is not None and not self.tol > 0:
            raise ValueError(
                f"integrator.tol must be > 0 (the {self.method} solver stops when its residual is below it): "
                f"got {self.tol!r}; give e.g. tol: 1e-9"
            )
        if self.max_iter is not None and self.max_iter < 1:
            raise ValueError(f"integrator.max_iter must be an integer >= 1: got {self.max_iter!r}; e.g. 500")
        return self

    @property
    def options(self) -> tuple:
        """The integrator's options as (name, value) pairs (``max_iter`` is the adaptive method's
        ``max_substeps``)."""
        cap = integrators_module.TOLERANCE_INTEGRATORS.get(self.method, "max_iter")
        pairs = (("tol", self.tol), (cap, self.max_iter))
        return tuple((k, v) for k, v in pairs if v is not None)

    @model_validator(mode="after")
    def _whole_steps(self):
        k = self.t1 / self.dt
        if not math.isfinite(k) or k > MAX_STEPS:
            raise ValueError(
                f"integrator.t1 / integrator.dt must be at most {_short_float(MAX_STEPS)} steps: "
                f"got {self.t1:g}/{self.dt:g} = {k:.6g}; choose a larger dt or a smaller t1"
            )
        try:
            n_steps_for(0.0, self.t1, self.dt)
        except ValueError as exc:
            raise ValueError(f"integrator.t1 / integrator.dt: {exc}") from exc
        return self

    @property
    def n_steps(self) -> int:
        """Number of steps from 0 to t1 (:func:`attnflow.simulation.n_steps_for`)."""
        return n_steps_for(0.0, self.t1, self.dt)


class RecordConfig(_Section):
    """``record: {every, positions, heads, ledger}``."""

    every: int = Field(10, ge=1)
    positions: bool = True
    heads: bool = False
    ledger: bool = True


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


def check_device(device: str) -> str:
    """``device`` if it names a device this torch build can use: ``cpu``, ``cuda`` or ``cuda:N``.

    Checked when a config loads (and for ``--device`` options), never as a failed run (issue 12).

    Raises
    ------
    ValueError
        Another name, CUDA requested on a torch build or machine without it, or ``cuda:N`` beyond the
        devices present.
    """
    if not isinstance(device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N': got {device!r}")
    if device == "cpu":
        return device
    import torch  # the config layer imports torch only to check a CUDA request

    if not torch.cuda.is_available():
        raise ValueError(
            f"CUDA requested but this torch build has none; install a CUDA build or use device: cpu "
            f"(got device: {device}, torch {torch.__version__})"
        )
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise ValueError(
            f"device {device} requested but this machine has {torch.cuda.device_count()} CUDA device(s); "
            "use cuda:0 ... cuda:N-1 or device: cpu"
        )
    return device


def with_device(cfg: ExperimentConfig, device: str | None) -> ExperimentConfig:
    """``cfg`` with its ``device`` replaced (checked by :func:`check_device`); None returns ``cfg``."""
    return cfg if device is None else cfg.model_copy(update={"device": check_device(device)})


# -- the whole config ----------------------------------------------------------------------------------
class ExperimentConfig(_Section):
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
    precision: _one_of("precision") = "float64"
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
def _validate(data: Any, source: str) -> ExperimentConfig:
    return validate_mapping(data, ExperimentConfig, UNIONS, source, "experiment config", source)


def read_config_file(path: str | Path, what: str, fix: str) -> Any:
    """The parsed YAML of a config file: the one bounded reader of all three loaders (particle, PDE,
    training).

    The file must be a regular file (``/dev/zero``, a FIFO or a directory are refused at once: the open is
    non-blocking and checked with ``fstat``), of at most :data:`MAX_CONFIG_BYTES`, UTF-8, and YAML within
    the bounds of :class:`_Yaml12Loader`. Every failure is one :class:`ConfigError` of at most
    :data:`~attnflow.experiments.errors.MAX_MESSAGE_CHARS` characters naming the file and ``fix``.

    Raises
    ------
    ConfigError
    """
    from .files import read_bounded

    path = Path(path)
    name = short_repr(str(path))
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"{what} not found: {name}; {fix}")
    raw = read_bounded(path, MAX_CONFIG_BYTES, what, fix, error=ConfigError, allowed="a config may have")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} {name} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
            f"({exc.reason}); save it as UTF-8"
        ) from None
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(short_message(f"{what} {name} is not valid YAML: {exc}")) from None


def load_config(source: str | Path | dict | ExperimentConfig) -> ExperimentConfig:
    """Load and validate an experiment config from a YAML file, a dict or a config (returned as is).

    Raises
    ------
    ConfigError
        With one line per problem: the dotted key, the value received and the allowed values.
    """
    if isinstance(source, ExperimentConfig):
        return source
    if isinstance(source, dict):
        check_config_dict(source, "experiment")
        return _validate(copy.deepcopy(source), "dict")
    if not isinstance(source, (str, Path)):
        raise ConfigError(
            f"a config is a YAML file, a dict or an ExperimentConfig: got {type(source).__name__}"
        )
    path = Path(source)
    data = read_config_file(
        path, "config file", "give the path of a YAML config (see `attnflow config example`)"
    )
    return _validate(data, str(path))


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


# -- the documented example ----------------------------------------------------------------------------
def _alts(key: str) -> str:
    return " | ".join(CHOICES[key]())


def _weights_names() -> str:
    return " | ".join(get_args(c.model_fields["process"].annotation)[0] for c in WEIGHT_SECTIONS)


def _short_float(x: float) -> str:
    """``1e4`` rather than ``10000`` for round powers of ten."""
    text = f"{x:.0e}".replace("e+0", "e").replace("e+", "e")
    return text if float(text) == x else f"{x:g}"


def _comment(line: str, comment: str, column: int = 30) -> str:
    return f"{line.ljust(column)}# {comment}"


EXAMPLE_YAML = "\n".join(
    [
        '# attnflow experiment config (schema: docs/design.md, "Experiment config schema").',
        "# Run it with:  attnflow run this.yaml --out runs/ou_H10",
        _comment("name: ou_H10", "free text label"),
        "",
        "model:",
        _comment(
            "  direction: descent",
            "required: ascent (x' = +v, tokens attract) | descent (x' = -v, authors' code)",
        ),
        _comment("  attention: softmax", _alts("model.attention")),
        _comment(
            "  beta: 1.0", f"inverse temperature, 0 < beta <= {_short_float(transformer_module.BETA_MAX)}"
        ),
        _comment("  geometry: sphere", "sphere (tokens on S^{d-1}) | flat (R^d)"),
        _comment("  causal: false", "token i attends only to j <= i"),
        _comment("  layer_scaling: null", "null, or t0 > 0: heads act as D / ((t0 + t) sqrt(H))"),
        _comment("  backend: auto", _alts("model.backend")),
        _comment("  token_noise: 0.0", "eps >= 0: tokens' Brownian motion, generator eps Delta (0: none)"),
        "",
        _comment("weights:", "how the heads D_h move with time"),
        _comment("  process: ornstein_uhlenbeck", _weights_names()),
        _comment("  sigma2: 1.0", "OU noise level sigma^2 >= 0"),
        _comment("  noise: symmetric", "symmetric ((Z+Z^T)/2, the paper) | full (Z)"),
        _comment("  F: identity", "OU target: identity or a d x d (or H x d x d) matrix"),
        _comment("  rate: 1.0", "mean-reversion rate lambda"),
        "  # or: {process: oscillating, forcing: "
        + " | ".join(f"{f} (d={d})" for f, d in forcing_dimensions().items())
        + f", phases: {_alts('weights.phases')}, rate: 1.0}}",
        "  # or: {process: constant} (frozen heads)",
        "",
        "tokens:",
        _comment(
            "  init: octahedral",
            "uniform | octahedral | von_mises_fisher (clusters, kappa) | file (path: x.npy)",
        ),
        _comment("  n: 300", "tokens"),
        _comment("  d: 3", "dimension (tokens on S^{d-1})"),
        _comment("  noise: 0.05", "octahedral only: std of the Gaussian perturbation"),
        "",
        "heads:",
        _comment(
            "  init: symmetric_gaussian",
            "symmetric_gaussian (Z+Z^T) | gaussian | identity | file (path: D.npy)",
        ),
        _comment("  H: 10", "number of heads"),
        _comment("  scale: 1.0", "multiplies the initial heads"),
        "",
        "integrator:",
        _comment("  method: euler", f"{_alts('integrator.method')} (euler: projected, the authors')"),
        _comment("  dt: 0.01", "time step"),
        _comment("  t1: 20.0", "final time (t1/dt must be a whole number)"),
        "  # jko / adaptive_rkmk2 only: tol: 1e-9 (> 0), max_iter: 500 (iteration / substep cap)",
        "",
        "record:",
        _comment("  every: 10", "record every k-th step (the final state is always recorded)"),
        _comment("  positions: true", "store the tokens (path, time, token, dim)"),
        _comment("  heads: false", "store the heads (path, time, head, row, col)"),
        _comment("  ledger: true", "energy, G2, Ghat2 and the energy-ledger residuals"),
        "",
        _comment("paths: 20", "independent trajectories"),
        _comment(
            "init: per_path",
            "per_path (x0, D0 drawn per path) | shared (one x0, D0 for all paths: the authors' estimator)",
        ),
        _comment("seed: 0", "tokens, heads and noise streams all derive from it"),
        _comment("precision: float64", _alts("precision")),
        _comment("device: cpu", "cpu | cuda | cuda:N"),
        _comment(
            "checkpoint_every: 200", "steps between checkpoints (rounded up to a multiple of record.every)"
        ),
        "",
    ]
)
"""A documented example config (``attnflow config example``); the lists of names come from the registries."""
