"""From a validated experiment config to a :class:`attnflow.simulation.SimulationSpec`.

spec = build("ou.yaml")
sim = Simulator.from_spec(spec)
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from ..model import heads as heads_mod, tokens as tokens_mod
from ..simulation import DTYPES, SimulationSpec
from .errors import ConfigError
from .files import MAX_NPY_BYTES, read_npy
from .schema import (
    ExperimentConfig,
    FileTokens,
    OctahedralTokens,
    UniformTokens,
    VMFTokens,
    check_weights_fit,
    load_config,
    weight_process,
)

__all__ = ["ESTIMATORS", "build", "estimator", "paths_computed"]

#: What the Monte Carlo mean over a run's paths estimates, per ``init`` mode (and for a deterministic
#: shared run, computed once); written into a run's ``meta.json`` and the reproduction summaries.
ESTIMATORS = {
    "per_path": "mean over paths of independent (x0, D0, noise) draws: initial-condition and noise spread",
    "shared": "mean over paths of one shared (x0, D0), only the weight noise differs between paths "
    "(the authors' Monte Carlo, NOTES section 6)",
    "deterministic": "one trajectory from one (x0, D0): the dynamics have no noise, so every path of a "
    "shared start is the same and the run is computed once (no spread over paths)",
}


def paths_computed(config: ExperimentConfig | dict | str | Path) -> int:
    """How many paths a config really integrates.

    ``init: shared`` with a deterministic weight process (no noise: ``oscillating``, ``constant``,
    ``ornstein_uhlenbeck`` with ``sigma2 = 0``) and noiseless tokens (``model.token_noise = 0``) makes
    every path identical, so such a run is computed once, as one path; otherwise ``config.paths``.

    Parameters
    ----------
    config : ExperimentConfig, dict or path of a YAML file

    Returns
    -------
    int
    """
    cfg = load_config(config)
    if cfg.init == "shared" and not _stochastic(cfg):
        return 1
    return cfg.paths


def _stochastic(cfg: ExperimentConfig) -> bool:
    """Whether the paths of a config differ by noise: noisy weights or Brownian tokens."""
    return weight_process(cfg.weights).stochastic or cfg.model.token_noise > 0


def estimator(config: ExperimentConfig | dict | str | Path) -> str:
    """The key of :data:`ESTIMATORS` that describes a config's mean over paths.

    Returns
    -------
    str
        ``"per_path"``, ``"shared"`` or ``"deterministic"`` (shared and computed once).
    """
    cfg = load_config(config)
    if cfg.init == "per_path":
        return "per_path"
    return "shared" if _stochastic(cfg) else "deterministic"


def _check_shared_file(arr: np.ndarray, per_path_ndim: int, key: str) -> None:
    """``init: shared`` takes one cloud / one set of heads from a file, not one per path."""
    if arr.ndim == per_path_ndim and arr.shape[0] != 1:
        raise ConfigError(
            f"init: shared copies one initial state to every path, but the file of {key} holds "
            f"{arr.shape[0]} paths (shape {tuple(arr.shape)}); give a file without the paths axis or "
            "set init: per_path"
        )


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


def build(config: ExperimentConfig | dict | str | Path) -> SimulationSpec:
    """The simulation an experiment config describes.

    Parameters
    ----------
    config : ExperimentConfig, dict or path of a YAML file

    Returns
    -------
    SimulationSpec
        Frozen: the model (with its weight process from :mod:`attnflow.model.registry`), the initial
        tokens ``x0`` [paths, n, d] and heads [paths, H, d, d], t0 = 0, t1, dt, the integrator, the
        seed, ``record_every`` and what to record, dtype and device. Run it with
        :meth:`attnflow.simulation.Simulator.from_spec`. With ``init: shared`` the tokens and heads
        of path 0 (the streams of :func:`attnflow.random.path_seed` for path 0, so the same draw as
        path 0 of ``init: per_path``) are copied to every path; a deterministic shared run has
        :func:`paths_computed` = 1 path.

    Raises
    ------
    ConfigError
        When the config is valid on its own but its objects cannot be built: a file of
        ``tokens.path`` / ``heads.path`` missing or of the wrong shape, weights that do not fit the
        dimension of file tokens; the message names the keys.
    """
    cfg = load_config(config)
    dtype = DTYPES[cfg.precision]
    with _building("model", "weights"):
        model = cfg.model.build(weight_process(cfg.weights))
    t, seed = cfg.tokens, cfg.seed
    P_run = paths_computed(cfg)
    P = 1 if cfg.init == "shared" else P_run  # paths drawn; a shared draw is copied to P_run paths
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
            arr = read_npy(t.path, None if cfg.allow_large else MAX_NPY_BYTES, what="tokens.path")
            if cfg.init == "shared":
                _check_shared_file(arr, 3, "tokens.path")
            x0 = tokens_mod.from_array(arr, paths=P, dtype=dtype)
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
            arr = read_npy(h.path, None if cfg.allow_large else MAX_NPY_BYTES, what="heads.path")
            if cfg.init == "shared":
                _check_shared_file(arr, 4, "heads.path")
            D0 = h.scale * heads_mod.from_array(arr, paths=P, d=d, dtype=dtype)
            if D0.shape[1] != h.H:
                raise ConfigError(f"heads.H = {h.H} but the file {h.path!r} holds {D0.shape[1]} heads")
    if P_run != P:
        x0 = x0.expand(P_run, *x0.shape[1:]).clone()
        D0 = D0.expand(P_run, *D0.shape[1:]).clone()
    if isinstance(t, FileTokens):  # d is known only now (ExperimentConfig checked the other inits)
        try:
            check_weights_fit(cfg.weights, h.H, d, f"the tokens of tokens.path {t.path!r} (d = {d})")
        except ValueError as exc:
            raise ConfigError(f"cannot build the experiment {cfg.name!r}: {exc}") from exc
    with _building("integrator", "record"):
        return SimulationSpec(
            model=model,
            x0=x0,
            heads=D0,
            t1=cfg.integrator.t1,
            dt=cfg.integrator.dt,
            t0=0.0,
            integrator=cfg.integrator.method,
            integrator_options=cfg.integrator.options,
            seed=seed,
            record_every=cfg.record.every,
            positions=cfg.record.positions,
            record_heads=cfg.record.heads,
            ledger=cfg.record.ledger,
            dtype=cfg.precision,
            device=cfg.device,
            loop=cfg.integrator.loop,
        )
