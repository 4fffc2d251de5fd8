"""Experiment configuration files (YAML), validated once at load with pydantic.

The schema is fixed by ``docs/design.md`` (section "Experiment config schema"). Every section is a
pydantic model with ``extra="forbid"`` and strict types; errors are re-raised as
:class:`ConfigError` whose message names the dotted key, the value received and the allowed values,
and suggests the closest known key for a misspelt one::

    unknown key 'sigma' in weights; did you mean 'sigma2'?

:func:`build` turns a config into the core objects ``(model, x0, D0, simulate_kwargs)``.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..model.attention import ATTENTION_KINDS

__all__ = [
    "ConfigError",
    "ExperimentConfig",
    "EXAMPLE_YAML",
    "build",
    "config_diff",
    "dump_config",
    "load_config",
    "load_yaml",
    "with_overrides",
]


class ConfigError(ValueError):
    """An experiment config is invalid; the message names the key, the value and the fix."""


class _Section(BaseModel):
    # allow_inf_nan=False: every float of the schema must be finite (.inf / .nan are rejected by key)
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


# -- YAML 1.2 floats ---------------------------------------------------------------------------------
class _Yaml12Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with the YAML 1.2 float rule, so ``1e-3`` is the float 0.001.

    PyYAML implements YAML 1.1, whose floats need a dot and a signed exponent: ``1e-3`` and ``1.0e3``
    would be read as strings and then rejected by the strict schema.
    """


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


def load_yaml(text: str) -> Any:
    """Parse YAML text like ``yaml.safe_load``, but with YAML 1.2 floats (``1e-3``, ``-2E+4``, ``.5``)."""
    return yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader subclass


class ModelConfig(_Section):
    """``model:`` the attention dynamics (:class:`attnflow.TransformerModel`)."""

    direction: Literal["ascent", "descent"]
    attention: Literal[ATTENTION_KINDS] = "softmax"  # type: ignore[valid-type]
    beta: float = Field(1.0, gt=0, le=1e4)
    geometry: Literal["sphere", "flat"] = "sphere"
    causal: bool = False
    layer_scaling: float | None = Field(None, gt=0)
    backend: Literal["auto", "torch", "numba"] = "auto"
    sinkhorn_iters: int = Field(50, ge=1)


class ConstantWeights(_Section):
    """``weights: {process: constant}``: frozen heads."""

    process: Literal["constant"]


class OUWeights(_Section):
    """``weights: {process: ornstein_uhlenbeck, ...}``: f = rate (F - D), g = sqrt(2 sigma2)."""

    process: Literal["ornstein_uhlenbeck"]
    sigma2: float = Field(1.0, ge=0)
    noise: Literal["symmetric", "full"] = "symmetric"
    F: Literal["identity"] | list[list[float]] | list[list[list[float]]] = "identity"
    rate: float = Field(1.0, gt=0)


class OscillatingWeights(_Section):
    """``weights: {process: oscillating, ...}``: f_h = rate (F(t + phi_h) - D_h)."""

    process: Literal["oscillating"]
    forcing: Literal["s2", "s1"] = "s2"
    phases: Literal["per_head", "shared"] = "per_head"
    rate: float = Field(1.0, gt=0)


WeightsConfig = Annotated[
    Union[ConstantWeights, OUWeights, OscillatingWeights], Field(discriminator="process")  # noqa: UP007
]


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
    noise: float = Field(0.05, ge=0)


class VMFTokens(_TokensBase):
    """``tokens: {init: von_mises_fisher, n, d, clusters, kappa}``."""

    init: Literal["von_mises_fisher"]
    clusters: int = Field(3, ge=1)
    kappa: float = Field(50.0, gt=0)


class FileTokens(_Section):
    """``tokens: {init: file, path}``: a ``.npy`` array of shape (n, d) or (paths, n, d)."""

    init: Literal["file"]
    path: str


TokensConfig = Annotated[
    Union[UniformTokens, OctahedralTokens, VMFTokens, FileTokens], Field(discriminator="init")  # noqa: UP007
]


class HeadsConfig(_Section):
    """``heads: {init, H, scale, path}``; ``path`` only (and required) for ``init: file``."""

    init: Literal["symmetric_gaussian", "gaussian", "identity", "file"] = "symmetric_gaussian"
    H: int = Field(ge=1)
    scale: float = Field(1.0, gt=0, allow_inf_nan=False)
    path: str | None = None

    @model_validator(mode="after")
    def _path_iff_file(self):
        if (self.init == "file") != (self.path is not None):
            raise ValueError(
                "heads.path is required for heads.init 'file' and not allowed otherwise: "
                f"got init={self.init!r}, path={self.path!r}"
            )
        return self


class IntegratorConfig(_Section):
    """``integrator: {method, dt, t1}`` (t0 = 0; t1/dt must be a whole number)."""

    method: Literal["euler", "euler_printed", "heun", "rk4"] = "euler"
    dt: float = Field(gt=0)
    t1: float = Field(gt=0)

    @model_validator(mode="after")
    def _whole_steps(self):
        k = self.t1 / self.dt
        if not math.isfinite(k) or k > 1e12:
            raise ValueError(
                f"integrator.t1 / integrator.dt must be at most 1e12 steps: got {self.t1:g}/{self.dt:g} "
                f"= {k:.6g}; choose a larger dt or a smaller t1"
            )
        if round(k) < 1 or abs(k - round(k)) > 1e-9 * max(1.0, k):
            raise ValueError(
                f"integrator.t1 / integrator.dt must be a whole number of steps: got {self.t1:g}/{self.dt:g} "
                f"= {k:.6g}; choose t1 = {max(round(k), 1) * self.dt:g}"
            )
        return self

    @property
    def n_steps(self) -> int:
        return round(self.t1 / self.dt)


class RecordConfig(_Section):
    """``record: {every, positions, heads, ledger}``."""

    every: int = Field(10, ge=1)
    positions: bool = True
    heads: bool = False
    ledger: bool = True


_WEIGHT_KEYS = {
    "ornstein_uhlenbeck": ("weights.F", "give weights.F as 'identity' or a d x d (or H x d x d) matrix"),
    "oscillating": ("weights.forcing", "use weights.forcing 's1' for d = 2 and 's2' for d = 3"),
    "constant": ("weights", "check the weights section"),
}


def _weight_process(w):
    """The core weight process of a ``weights:`` section (raises ValueError from the core)."""
    from ..model.weights import Constant, OrnsteinUhlenbeck, Oscillating

    if isinstance(w, OUWeights):
        return OrnsteinUhlenbeck(
            F=None if w.F == "identity" else w.F, sigma2=w.sigma2, noise=w.noise, rate=w.rate
        )
    if isinstance(w, OscillatingWeights):
        return Oscillating(forcing=w.forcing, phases=w.phases, rate=w.rate)
    return Constant()


def _check_weights_fit(w, H: int, d: int, where: str):
    """Build the weight process and check it fits H heads of size d; ValueError naming the keys."""
    key, fix = _WEIGHT_KEYS[w.process]
    try:
        process = _weight_process(w)
        process.validate(H, d)
    except ValueError as exc:
        raise ValueError(
            f"{key} does not fit heads.H = {H} and {where} (weights.process {w.process!r}): {exc}; {fix}"
        ) from exc
    return process


class ExperimentConfig(_Section):
    """A whole experiment: model, weights, initial conditions, integrator, recording, seeds, device.

    Build one with :func:`load_config`; turn it into core objects with :func:`build`.
    """

    name: str = "run"
    model: ModelConfig
    weights: WeightsConfig = Field(default_factory=lambda: ConstantWeights(process="constant"))
    tokens: TokensConfig
    heads: HeadsConfig
    integrator: IntegratorConfig
    record: RecordConfig = Field(default_factory=RecordConfig)
    paths: int = Field(1, ge=1)
    seed: int = Field(0, ge=0)
    precision: Literal["float64", "float32"] = "float64"
    device: str = "cpu"
    checkpoint_every: int = Field(200, ge=1)

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if not re.fullmatch(r"cpu|cuda(:\d+)?", v):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N': got {v!r}")
        return v

    @model_validator(mode="after")
    def _weights_fit_heads(self):
        """The weight process must fit ``heads.H`` heads of size ``tokens.d`` (checked here, not at run time).

        For ``tokens.init: file`` the dimension is known only once the file is read: :func:`build`
        checks it then.
        """
        d = getattr(self.tokens, "d", None)
        if d is not None:
            _check_weights_fit(self.weights, self.heads.H, d, f"tokens.d = {d}")
        return self

    @property
    def checkpoint_steps(self) -> int:
        """``checkpoint_every`` rounded up to a multiple of ``record.every``."""
        k = self.record.every
        return -(-self.checkpoint_every // k) * k


# -- error formatting ------------------------------------------------------------------------------
_UNIONS = {
    "weights": ("process", ConstantWeights, OUWeights, OscillatingWeights),
    "tokens": ("init", UniformTokens, OctahedralTokens, VMFTokens, FileTokens),
}


def _section_class(model_cls: type[BaseModel], name: str) -> type[BaseModel] | None:
    ann = model_cls.model_fields[name].annotation
    for cand in (ann, *get_args(ann)):
        if isinstance(cand, type) and issubclass(cand, BaseModel):
            return cand
    return None


def _check_keys(data: dict, model_cls: type[BaseModel], where: str, errors: list[str]) -> None:
    """Unknown keys with a difflib suggestion, recursing into sections (before pydantic runs)."""
    for key, value in data.items():
        allowed = list(model_cls.model_fields)
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; allowed keys: {', '.join(allowed)}"
            errors.append(f"unknown key {key!r} in {where}{hint}")
            continue
        if not isinstance(value, dict):
            continue
        sub_where = key if where == "the config" else f"{where}.{key}"
        if model_cls is ExperimentConfig and key in _UNIONS:
            tag, *classes = _UNIONS[key]
            by_tag = {get_args(c.model_fields[tag].annotation)[0]: c for c in classes}
            cls = by_tag.get(value.get(tag))
            if cls is None:
                continue  # the tag itself is wrong or missing: pydantic reports it
            allowed_here = list(cls.model_fields)
            for sub in value:
                if sub not in allowed_here:
                    close = difflib.get_close_matches(str(sub), allowed_here, n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    errors.append(
                        f"unknown key {sub!r} in {sub_where}{hint} (allowed keys for {tag} "
                        f"{value.get(tag)!r}: {', '.join(allowed_here)})"
                    )
            continue
        sub_cls = _section_class(model_cls, key)
        if sub_cls is not None:
            _check_keys(value, sub_cls, sub_where, errors)


def _allowed(model_cls: type[BaseModel], loc: tuple) -> list[str] | None:
    """Allowed literal values of the field at ``loc`` (None if not a Literal)."""
    cls: Any = model_cls
    ann = None
    for part in loc:
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or part not in cls.model_fields:
            return None
        ann = cls.model_fields[part].annotation
        cls = _section_class(cls, part)
    if ann is not None and get_origin(ann) is Literal:
        return [repr(a) for a in get_args(ann)]
    return None


def _format_error(err: dict, tags: dict[str, str]) -> str:
    loc = [str(p) for p in err["loc"]]
    # discriminated unions insert the tag value into the location: drop it
    if len(loc) >= 2 and loc[0] in _UNIONS and loc[1] == tags.get(loc[0]):
        loc = [loc[0], *loc[2:]]
    key = ".".join(loc) or "the config"
    typ, value = err["type"], err.get("input")
    if typ == "missing":
        return f"missing required key {key!r}"
    if typ == "union_tag_invalid" or typ == "union_tag_not_found":
        section, tag = loc[0], _UNIONS[loc[0]][0]
        allowed = [get_args(c.model_fields[tag].annotation)[0] for c in _UNIONS[section][1:]]
        got = value.get(tag) if isinstance(value, dict) else value
        if typ == "union_tag_not_found":
            return f"missing required key '{section}.{tag}'; allowed values: {', '.join(map(repr, allowed))}"
        close = difflib.get_close_matches(str(got), allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{section}.{tag}: got {got!r}; allowed values: {', '.join(map(repr, allowed))}{hint}"
    if typ == "literal_error":
        allowed = (err.get("ctx") or {}).get("expected", "")
        close = difflib.get_close_matches(str(value), re.findall(r"'([^']*)'", allowed), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{key}: got {value!r}; allowed values: {allowed}{hint}"
    if typ == "extra_forbidden":
        return f"unknown key {loc[-1]!r} in {'.'.join(loc[:-1]) or 'the config'}"
    msg = err["msg"].replace("Input should be", "must be")
    if typ == "value_error":
        msg = msg.removeprefix("Value error, ")
        return msg if key == "the config" or msg.startswith(key) else f"{key}: {msg}"
    return f"{key} {msg}: got {value!r} ({type(value).__name__})"


def _validate(data: dict, source: str) -> ExperimentConfig:
    if not isinstance(data, dict):
        raise ConfigError(
            f"invalid experiment config ({source}): expected a mapping of keys, got {type(data).__name__}"
        )
    errors: list[str] = []
    _check_keys(data, ExperimentConfig, "the config", errors)
    if not errors:
        try:
            return ExperimentConfig.model_validate(data)
        except ValidationError as exc:
            tags = {
                k: (data.get(k) or {}).get(_UNIONS[k][0]) for k in _UNIONS if isinstance(data.get(k), dict)
            }
            seen: list[str] = []
            for e in exc.errors():
                m = _format_error(e, tags)
                if m not in seen:
                    seen.append(m)
            errors = seen
    lines = "\n  ".join(errors)
    raise ConfigError(f"invalid experiment config ({source}):\n  {lines}")


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
        return _validate(copy.deepcopy(source), "dict")
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"config file not found: {str(path)!r}")
    try:
        data = load_yaml(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {exc}") from exc
    return _validate(data, str(path))


def dump_config(config: ExperimentConfig) -> str:
    """YAML text of a config with every default filled in (reloads to an equal config)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def config_diff(a: ExperimentConfig, b: ExperimentConfig) -> list[str]:
    """Dotted keys whose values differ between two configs (sorted)."""
    fa, fb = _flatten(a.model_dump(mode="json")), _flatten(b.model_dump(mode="json"))
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


# -- building the core objects ---------------------------------------------------------------------
@contextlib.contextmanager
def _building(*keys: str):
    """Re-raise a ValueError or OSError of the core or of a file read as a ConfigError naming the keys."""
    try:
        yield
    except ConfigError:
        raise
    except (ValueError, OSError) as exc:
        raise ConfigError(
            f"cannot build the experiment from {' / '.join(keys)}: {type(exc).__name__}: {exc}; "
            f"fix {' or '.join(keys)} in the config"
        ) from exc


def build(config: ExperimentConfig | dict | str | Path):
    """Core objects of an experiment.

    Returns
    -------
    model : attnflow.TransformerModel
    x0 : Tensor, shape=[paths, n, d]
    D0 : Tensor, shape=[paths, H, d, d]
    kwargs : dict
        Keyword arguments of :func:`attnflow.simulate` / :class:`attnflow.Simulator` (dt, t1,
        integrator, seed, record_every, positions, record_heads, ledger, dtype, device).

    Raises
    ------
    ConfigError
        When the config is valid on its own but its objects cannot be built: a file of
        ``tokens.path`` / ``heads.path`` missing or of the wrong shape, weights that do not fit the
        dimension of file tokens; the message names the keys.
    """
    import numpy as np
    import torch

    from ..model import heads as heads_mod, tokens as tokens_mod
    from ..model.transformer import TransformerModel

    cfg = load_config(config)
    dtype = {"float64": torch.float64, "float32": torch.float32}[cfg.precision]
    with _building("model", "weights"):
        weights = _weight_process(cfg.weights)
        m = cfg.model
        model = TransformerModel(
            direction=m.direction,
            attention=m.attention,
            beta=m.beta,
            geometry=m.geometry,
            weights=weights,
            causal=m.causal,
            layer_scaling=m.layer_scaling,
            sinkhorn_iters=m.sinkhorn_iters,
            backend=m.backend,
        )
    t, P, seed = cfg.tokens, cfg.paths, cfg.seed
    with _building("tokens.path" if isinstance(t, FileTokens) else "tokens"):
        if isinstance(t, UniformTokens):
            x0 = tokens_mod.uniform(P, t.n, t.d, seed=seed, dtype=dtype)
        elif isinstance(t, OctahedralTokens):
            x0 = tokens_mod.octahedral(P, t.n, t.d, seed=seed, noise=t.noise, dtype=dtype)
        elif isinstance(t, VMFTokens):
            x0 = tokens_mod.von_mises_fisher(
                P, t.n, t.d, seed=seed, clusters=t.clusters, kappa=t.kappa, dtype=dtype
            )
        else:
            x0 = tokens_mod.from_array(np.load(t.path), paths=P, dtype=dtype)
    d = x0.shape[-1]
    h = cfg.heads
    with _building("heads.path" if h.init == "file" else "heads"):
        if h.init == "symmetric_gaussian":
            D0 = h.scale * heads_mod.symmetric_gaussian(P, h.H, d, seed=seed, dtype=dtype)
        elif h.init == "gaussian":
            D0 = heads_mod.gaussian(P, h.H, d, seed=seed, scale=h.scale, dtype=dtype)
        elif h.init == "identity":
            D0 = heads_mod.identity(P, h.H, d, scale=h.scale, dtype=dtype)
        else:
            arr = np.load(h.path)
            D0 = h.scale * heads_mod.from_array(arr, paths=P, d=d, dtype=dtype)
            if D0.shape[1] != h.H:
                raise ConfigError(f"heads.H = {h.H} but the file {h.path!r} holds {D0.shape[1]} heads")
    if isinstance(t, FileTokens):  # d is known only now (ExperimentConfig checked the other inits)
        try:
            _check_weights_fit(cfg.weights, h.H, d, f"the tokens of tokens.path {t.path!r} (d = {d})")
        except ValueError as exc:
            raise ConfigError(f"cannot build the experiment {cfg.name!r}: {exc}") from exc
    kwargs = {
        "dt": cfg.integrator.dt,
        "t1": cfg.integrator.t1,
        "integrator": cfg.integrator.method,
        "seed": seed,
        "record_every": cfg.record.every,
        "positions": cfg.record.positions,
        "record_heads": cfg.record.heads,
        "ledger": cfg.record.ledger,
        "dtype": cfg.precision,
        "device": cfg.device,
    }
    return model, x0, D0, kwargs


EXAMPLE_YAML = """\
# attnflow experiment config (schema: docs/design.md, "Experiment config schema").
# Run it with:  attnflow run this.yaml --out runs/ou_H10
name: ou_H10                  # free text label

model:
  direction: descent          # required: ascent (x' = +v, tokens attract) | descent (x' = -v, authors' code)
  attention: softmax          # softmax | usa | relu | sigmoid | sinkhorn
  beta: 1.0                   # inverse temperature, 0 < beta <= 1e4
  geometry: sphere            # sphere (tokens on S^{d-1}) | flat (R^d)
  causal: false               # token i attends only to j <= i
  layer_scaling: null         # null, or t0 > 0: heads act as D / ((t0 + t) sqrt(H))
  backend: auto               # auto | torch | numba

weights:                      # how the heads D_h move with time
  process: ornstein_uhlenbeck # constant | ornstein_uhlenbeck | oscillating
  sigma2: 1.0                 # OU noise level sigma^2 >= 0
  noise: symmetric            # symmetric ((Z+Z^T)/2, the paper) | full (Z)
  F: identity                 # OU target: identity or a d x d (or H x d x d) matrix
  rate: 1.0                   # mean-reversion rate lambda
  # or: {process: oscillating, forcing: s2 (d=3) | s1 (d=2), phases: per_head | shared, rate: 1.0}
  # or: {process: constant} (frozen heads)

tokens:
  init: octahedral            # uniform | octahedral | von_mises_fisher (clusters, kappa) | file (path: x.npy)
  n: 300                      # tokens
  d: 3                        # dimension (tokens on S^{d-1})
  noise: 0.05                 # octahedral only: std of the Gaussian perturbation

heads:
  init: symmetric_gaussian    # symmetric_gaussian (Z+Z^T) | gaussian | identity | file (path: D.npy)
  H: 10                       # number of heads
  scale: 1.0                  # multiplies the initial heads

integrator:
  method: euler               # euler (projected, the authors') | euler_printed | heun | rk4
  dt: 0.01                    # time step
  t1: 20.0                    # final time (t1/dt must be a whole number)

record:
  every: 10                   # record every k-th step (the final state is always recorded)
  positions: true             # store the tokens (path, time, token, dim)
  heads: false                # store the heads (path, time, head, row, col)
  ledger: true                # energy, G2, Ghat2 and the energy-ledger residuals

paths: 20                     # independent trajectories
seed: 0                       # tokens, heads and noise streams all derive from it
precision: float64            # float64 | float32
device: cpu                   # cpu | cuda | cuda:N
checkpoint_every: 200         # steps between checkpoints (rounded up to a multiple of record.every)
"""
