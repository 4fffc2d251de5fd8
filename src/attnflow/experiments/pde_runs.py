r"""Density runs of the Transformer PDE as experiments: YAML config (``model: pde``), store, resume.

A config marks a density run with ``model: pde``; the attention dynamics sit under ``dynamics:`` (the keys
of a particle run's ``model:`` section), the weight process and the heads are the particle runs' sections::

    name: pde_s1
    model: pde
    dynamics: {direction: ascent, attention: softmax, beta: 1.0}
    weights: {process: oscillating, forcing: s1}
    heads: {init: identity, H: 2, scale: 1.0}
    density: {init: von_mises_fisher, d: 2, centres: [[1, 0], [0, 1]], kappa: 6.0}
    pde: {band_limit: 48, eps: 0.0}
    integrator: {dt: 0.01, t1: 1.0}
    record: {every: 10}

Refused at load: a band limit below the minimum for beta |D| of the initial heads (the message gives the
minimum, :mod:`attnflow.pde.band`), a negative eps, a time step beyond the explicit stability limit.
:func:`run_pde` writes ``config.yaml``, ``meta.json`` (status), ``checkpoint.pt`` (the solver's state and
the records so far, replaced atomically every ``checkpoint_every`` steps) and, when done, ``data.zarr``
(:func:`attnflow.pde.records_to_dataset`; read it with :func:`open_pde_run`, which checks it against the
config first). A killed run resumes from its checkpoint and gives the same data as an uninterrupted one.
The directory is one of the run store (:mod:`attnflow.experiments.rundir`): its lock, claim, checkpoint
reader and writer, Zarr writer and checks.
"""

from __future__ import annotations

import copy
import os
import socket
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import numpy as np
import torch
import xarray as xr
import yaml
from pydantic import Field, model_validator

from ..model import heads as heads_mod
from ..pde import (
    BAND_TOL,
    DensitySolver,
    density_from_function,
    density_from_particles,
    make_grid,
    records_to_dataset,
    snapshot,
    von_mises_fisher_mixture,
)
from ..pde.field import KERNEL_METHODS
from ..pde.resources import PdeCost, pde_cost, pde_grid_size
from ..simulation import n_steps_for
from .errors import ConfigError, short_repr, validate_mapping
from .fields import Section, TimeGrid
from .files import MAX_NPY_BYTES, atomic_write_text, inside, read_npy, utc_now
from .progress import ProgressBar
from .resources import RunCost, check_resources
from .rundir import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    DATA_DIR,
    RUN_FILES,
    CorruptRunError,
    check_store_dims,
    checkpoint_bound,
    expected_steps,
    failure_fields,
    one_line,
    read_meta,
    restore_checkpoint,
    resume_hint,
    run_session,
    save_checkpoint,
    stopped_by_user,
    stored_config_diff,
    write_meta,
    write_zarr,
)
from .schema import (
    UNIONS as PARTICLE_UNIONS,
    HeadsConfig,
    ModelConfig,
    WeightsConfig,
    check_config_dict,
    check_weights_fit,
    flatten_config,
    read_config_file,
    weight_process,
)
from .store import open_run

__all__ = [
    "PdeRunConfig",
    "build_pde",
    "check_pde_resources",
    "is_pde_config",
    "load_pde_config",
    "open_pde_run",
    "pde_store_sizes",
    "run_pde",
    "verify_pde_run",
]


class UniformDensity(Section):
    """``density: {init: uniform, d}``."""

    init: Literal["uniform"]
    d: int = Field(ge=2, le=3)


class VMFDensity(Section):
    """``density: {init: von_mises_fisher, d, centres, kappa, weights}``: a mixture (truncated at L)."""

    init: Literal["von_mises_fisher"]
    d: int = Field(ge=2, le=3)
    centres: list[list[float]] = Field(min_length=1)
    kappa: float = Field(gt=0)
    weights: list[float] | None = None


class ParticleDensity(Section):
    """``density: {init: particles, path, kappa}``: kernel smoothing (bandwidth 1/sqrt(kappa)) of a ``.npy``
    cloud of shape (n, d)."""

    init: Literal["particles"]
    path: str
    kappa: float = Field(gt=0)


DensityConfig = Annotated[Union[UniformDensity, VMFDensity, ParticleDensity], Field(discriminator="init")]  # noqa: UP007


class PdeSection(Section):
    """``pde: {band_limit, eps, kernel, band_tol}``."""

    band_limit: int = Field(ge=1)
    eps: float = 0.0
    kernel: Literal[KERNEL_METHODS] = "auto"  # type: ignore[valid-type]
    band_tol: float = Field(BAND_TOL, gt=0, lt=1)

    @model_validator(mode="after")
    def _eps(self):
        if self.eps < 0:
            raise ValueError(
                f"pde.eps (token noise intensity, generator eps * Laplacian) must be >= 0: got {self.eps!r}; "
                "use 0 for the paper's PDE"
            )
        return self


class PdeIntegrator(TimeGrid):
    """``integrator: {dt, t1}``: Lawson RK4 (:mod:`attnflow.pde.solver`); checked by the one time-grid rule
    (:class:`~attnflow.experiments.fields.TimeGrid`)."""

    dt: float = Field(allow_inf_nan=True)
    t1: float = Field(allow_inf_nan=True)


class PdeRecord(Section):
    every: int = Field(10, ge=1)


class PdeRunConfig(Section):
    """A density run of the Transformer PDE (module docstring)."""

    name: str = "pde_run"
    model: Literal["pde"]
    dynamics: ModelConfig
    weights: WeightsConfig = Field(default_factory=lambda: {"process": "constant"})
    heads: HeadsConfig
    density: DensityConfig
    pde: PdeSection
    integrator: PdeIntegrator
    record: PdeRecord = Field(default_factory=PdeRecord)
    seed: int = Field(0, ge=0)
    checkpoint_every: int = Field(100, ge=1)
    #: run even when the estimated memory or time per step exceeds this machine (:func:`check_pde_resources`)
    allow_large: bool = False

    @model_validator(mode="after")
    def _weights_fit(self):
        """The weight process must fit heads.H heads of size density.d (for a particle file: at build)."""
        d = getattr(self.density, "d", None)
        if d is not None:
            check_weights_fit(self.weights, self.heads.H, d, f"density.d = {d}")
        return self


#: The tagged sections of a PDE config (for the unknown-key messages of
#: :func:`attnflow.experiments.errors.validate_mapping`).
PDE_UNIONS = {
    "weights": PARTICLE_UNIONS["weights"],
    "density": ("init", (UniformDensity, VMFDensity, ParticleDensity)),
}
_PDE_FIX = "see the module docstring of attnflow.experiments.pde_runs for a PDE config"


def _raw(source: Any) -> Any:
    if isinstance(source, (str, Path)):
        return read_config_file(Path(source), "PDE config file", _PDE_FIX)
    return source


def is_pde_config(source: Any) -> bool:
    """Whether a YAML file / mapping is a density run (``model: pde``); a file that cannot be read or
    parsed is not (the particle loader then reports what is wrong with it)."""
    try:
        data = _raw(source)
    except ConfigError:
        return False
    return isinstance(data, dict) and data.get("model") == "pde"


def load_pde_config(source: str | Path | dict | PdeRunConfig) -> PdeRunConfig:
    """Load and validate a density-run config (a file is read by the bounded reader of every config,
    :func:`attnflow.experiments.schema.read_config_file`).

    Raises
    ------
    ConfigError
        The only error: one line per problem (the key, the rule, the value received), at most
        :data:`~attnflow.experiments.errors.MAX_MESSAGE_CHARS` characters in all.
    """
    if isinstance(source, PdeRunConfig):
        return source
    if isinstance(source, dict):
        check_config_dict(source, "PDE")
        data, label = copy.deepcopy(source), "dict"
    elif isinstance(source, (str, Path)):
        data, label = _raw(source), short_repr(str(source))
    else:
        raise ConfigError(
            f"a PDE config is a YAML file, a dict or a PdeRunConfig: got {type(source).__name__}"
        )
    return validate_mapping(data, PdeRunConfig, PDE_UNIONS, label, "PDE config", f"PDE config {label}")


def check_pde_resources(config) -> PdeCost:
    """Estimate a density run's memory and time per step (:func:`attnflow.pde.resources.pde_cost`) and
    refuse, before anything is allocated, one this machine cannot hold
    (:func:`attnflow.experiments.resources.check_resources`).

    Returns
    -------
    PdeCost
        The estimate (also when ``allow_large: true`` lets it pass).

    Raises
    ------
    ConfigError
        The estimate exceeds half the machine's memory or the longest time per step; the message names
        the estimate and the fix (a smaller band limit or fewer heads, or ``allow_large: true``).
    """
    cfg = load_pde_config(config)
    d = getattr(cfg.density, "d", 3)  # a particle file: S^2 is the larger of the two
    h, w = cfg.heads, cfg.weights
    fft = d == 2 and cfg.pde.kernel != "quadrature" and h.init == "identity" and w.process == "constant"
    n_steps = n_steps_for(0.0, cfg.integrator.t1, cfg.integrator.dt)
    cost = pde_cost(d, cfg.pde.band_limit, h.H, fft=fft, n_records=n_steps // cfg.record.every + 2)
    what = f"pde.band_limit = {cfg.pde.band_limit}, heads.H = {h.H}, S^{d - 1}, {cost.nodes} grid nodes"
    check_resources(
        RunCost(cost.memory_bytes, cost.seconds_per_step, what),
        allow_large=cfg.allow_large,
        name=cfg.name,
        fix="pde.band_limit or heads.H",
    )
    return cost


def build_pde(config) -> DensitySolver:
    """The :class:`attnflow.pde.DensitySolver` a config describes (refusals at load as ConfigError); the
    memory and time it would need are checked first (:func:`check_pde_resources`)."""
    cfg = load_pde_config(config)
    check_pde_resources(cfg)
    cap = None if cfg.allow_large else MAX_NPY_BYTES
    try:
        # the solver reads direction, attention, beta, geometry and the weights (pde/solver.py)
        model = cfg.dynamics.build(weight_process(cfg.weights))
        den = cfg.density
        if isinstance(den, ParticleDensity):
            x = read_npy(den.path, cap, what="density.path")
            d = int(x.shape[-1])
            check_weights_fit(cfg.weights, cfg.heads.H, d, f"the particles of density.path (d = {d})")
        else:
            d = den.d
        grid = make_grid(d, cfg.pde.band_limit)
        if isinstance(den, UniformDensity):
            u0 = density_from_function(grid, lambda p: np.ones(p.shape[0]))
        elif isinstance(den, VMFDensity):
            u0 = von_mises_fisher_mixture(grid, np.array(den.centres), den.kappa, den.weights)
        else:
            u0 = density_from_particles(grid, x, den.kappa)
        h = cfg.heads
        if h.init == "symmetric_gaussian":
            D0 = h.scale * heads_mod.symmetric_gaussian(1, h.H, d, seed=cfg.seed)
        elif h.init == "gaussian":
            D0 = heads_mod.gaussian(1, h.H, d, seed=cfg.seed, scale=h.scale)
        elif h.init == "identity":
            D0 = heads_mod.identity(1, h.H, d, scale=h.scale)
        else:
            D0 = h.scale * heads_mod.from_array(read_npy(h.path, cap, what="heads.path"), paths=1, d=d)
        return DensitySolver(
            model,
            u0,
            D0[0].numpy(),
            grid=grid,
            dt=cfg.integrator.dt,
            eps=cfg.pde.eps,
            seed=cfg.seed,
            kernel=cfg.pde.kernel,
            band_tol=cfg.pde.band_tol,
        )
    except (ValueError, OSError) as exc:
        raise ConfigError(f"cannot build the PDE run {cfg.name!r}: {exc}") from exc


def _dump(cfg: PdeRunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


#: The files of a PDE run directory (the store's, :data:`~attnflow.experiments.rundir.RUN_FILES`): the only
#: ones attnflow clears in it.
PDE_RUN_FILES = RUN_FILES
#: Version of the checkpoint layout (tensors only: :func:`_checkpoint_state`).
CHECKPOINT_FORMAT = 2
_FIX = "rerun with resume=False (the CLI's --no-resume) to start afresh"


def _checkpoint_state(solver: DensitySolver, records: list) -> dict:
    """The solver's state and the records so far as tensors and numbers only (``weights_only`` loadable)."""
    sd = solver.state_dict()
    monitors = list(records[0][4])
    return {
        "format": CHECKPOINT_FORMAT,
        "solver": {
            "u": torch.from_numpy(np.ascontiguousarray(sd["u"])),
            "D": sd["D"],
            "t": float(sd["t"]),
            "step": int(sd["step"]),
            "ledger_integral": float(sd["ledger_integral"]),
            "jumps": float(sd["jumps"]),
            "E0": float(sd["E0"]),
            "rng": list(sd["rng"]),
        },
        "records": {
            "t": torch.tensor([float(r[0]) for r in records], dtype=torch.float64),
            "u": torch.from_numpy(np.stack([r[1] for r in records])),
            "density": torch.from_numpy(np.stack([r[2] for r in records])),
            "heads": torch.from_numpy(np.stack([r[3] for r in records])),
            "monitors": {
                k: torch.tensor([float(r[4][k]) for r in records], dtype=torch.float64) for k in monitors
            },
        },
    }


def _restorer(solver: DensitySolver, n_steps: int, every: int):
    """``restore(state) -> records`` for :func:`~attnflow.experiments.rundir.restore_checkpoint`: loads
    ``solver`` and checks the records against the steps it has taken; any error is a refusal."""

    def restore(state: dict) -> list:
        sd, rec = dict(state["solver"]), state["records"]
        sd["u"] = sd["u"].numpy()
        solver.load_state_dict(sd)
        if not 0 <= solver.step_index <= n_steps:
            raise ValueError(f"step {solver.step_index} outside 0..{n_steps}")
        T = int(rec["t"].shape[0])
        want = int(np.count_nonzero(expected_steps(n_steps, every) <= solver.step_index))
        arrays = [rec["u"], rec["density"], rec["heads"], *rec["monitors"].values()]
        if T != want or any(int(a.shape[0]) != T for a in arrays):
            raise ValueError(
                f"{want} records expected at step {solver.step_index}, got {[tuple(a.shape) for a in arrays]}"
            )
        names = list(rec["monitors"])
        return [
            (
                float(rec["t"][i]),
                rec["u"][i].numpy().copy(),
                rec["density"][i].numpy().copy(),
                rec["heads"][i].numpy().copy(),
                {k: float(rec["monitors"][k][i]) for k in names},
            )
            for i in range(T)
        ]

    return restore


def pde_store_sizes(cfg: PdeRunConfig, d: int) -> dict[str, int]:
    """The length of every dimension of a finished PDE run's ``data.zarr`` on S^{d-1}
    (:func:`attnflow.pde.records_to_dataset`): records, grid nodes, coefficients, heads."""
    n_steps = n_steps_for(0.0, cfg.integrator.t1, cfg.integrator.dt)
    nodes, coefs = pde_grid_size(d, cfg.pde.band_limit)
    T = len(expected_steps(n_steps, cfg.record.every))
    return {
        "time": T,
        "node": nodes,
        "coef": coefs,
        "part": 2,
        "head": cfg.heads.H,
        "row": d,
        "col": d,
        "dim": d,
    }


def verify_pde_run(out_dir: str | Path, config=None) -> None:
    """Check a PDE run's ``data.zarr`` against its config before anything reads it: no link or FIFO in it,
    and every array of exactly the sizes the config writes (a store that declares others is refused
    before an array is allocated: :func:`~attnflow.experiments.rundir.check_store_dims`).

    Parameters
    ----------
    out_dir : path
    config : PdeRunConfig, dict, path or None
        The run's config (None: its ``config.yaml``).

    Raises
    ------
    CorruptRunError
        The config cannot be read, or an array's sizes are not the config's.
    UnsafePathError
        A link or a FIFO in the store, or a ``config.yaml`` that leads out of the directory.
    """
    out = Path(out_dir)
    fix = f"the run's store is not the one its config writes; {_FIX}"
    if config is None:
        config = inside(out, out / CONFIG_FILE, what="run file")  # nothing outside the directory is read
    try:
        cfg = load_pde_config(config)
    except ConfigError as exc:
        raise CorruptRunError(f"{out / CONFIG_FILE} cannot be read ({one_line(exc, 300)}); {_FIX}") from None
    d = getattr(cfg.density, "d", None)
    error = None
    for dim in (d,) if d is not None else (2, 3):  # particles from a file: S^1 or S^2
        try:
            check_store_dims(out / DATA_DIR, pde_store_sizes(cfg, dim), fix)
            return
        except CorruptRunError as exc:
            error = exc
    raise error


def open_pde_run(out_dir: str | Path) -> xr.Dataset:
    """The Dataset of a PDE run directory, its store verified first (:func:`verify_pde_run`).

    Raises
    ------
    FileNotFoundError, CorruptRunError, UnsafePathError
        No store; a store of other sizes than the config's; a link or a FIFO in it.
    """
    out = Path(out_dir)
    if not (out / DATA_DIR).is_dir() and not (out / DATA_DIR).is_symlink():
        raise FileNotFoundError(
            f"{out} is not a PDE run directory with data: {DATA_DIR} not found; create one with "
            "run_experiment(config, out_dir) on a model: pde config"
        )
    verify_pde_run(out)
    return open_run(out)


def run_pde(config, out_dir: str | Path, *, resume: bool = True, progress: bool = False) -> Path:
    """Run (or resume) a density run into ``out_dir`` (module docstring); returns ``out_dir``.

    The directory is one of the run store (:func:`attnflow.experiments.rundir.run_session`): locked while
    written, marked ``.attnflow``, a directory holding run files attnflow did not create is refused, the
    checkpoint holds tensors only (read with ``weights_only=True``, no larger than the run's memory bound),
    a finished run's store is verified against the config before it is returned. SIGTERM and Ctrl-C leave
    ``status: interrupted``; rerunning resumes from the last checkpoint.

    Raises
    ------
    ConfigError
        Invalid config or refused at load.
    RunConfigMismatchError
        ``out_dir`` holds a run of another config and ``resume`` is True.
    ForeignDirectoryError
        ``out_dir`` holds run files that attnflow did not create.
    CorruptRunError
        The checkpoint is not a tensors-only PDE checkpoint of this run (a pickle is refused unread), or
        a finished run's store is not the one its config writes.
    """
    cfg = load_pde_config(config)
    out = Path(out_dir)
    text = _dump(cfg)

    def compare(old: PdeRunConfig) -> list:
        a, b = flatten_config(old.model_dump(mode="json")), flatten_config(cfg.model_dump(mode="json"))
        return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]

    with run_session(
        out,
        kind="PDE run",
        run_files=PDE_RUN_FILES,
        config_diff=stored_config_diff(load_pde_config, compare),
        resume=resume,
    ) as resumable:
        same = resume and (out / CONFIG_FILE).is_file()
        meta = read_meta(out) if same else {}
        if same and meta.get("status") == "done" and (out / DATA_DIR).is_dir():
            verify_pde_run(out, cfg)  # a "done" is trusted only once its store is verified
            return out
        solver = build_pde(cfg)
        n_steps = n_steps_for(0.0, cfg.integrator.t1, cfg.integrator.dt)
        every = cfg.record.every
        ck = out / CHECKPOINT_FILE
        if resumable:
            records = restore_checkpoint(
                ck,
                fmt=CHECKPOINT_FORMAT,
                restore=_restorer(solver, n_steps, every),
                fix=_FIX,
                max_bytes=checkpoint_bound(check_pde_resources(cfg).memory_bytes),
                what="PDE checkpoint",
            )
        else:
            records = [snapshot(solver)]
        atomic_write_text(out / CONFIG_FILE, text)
        meta = {
            "name": cfg.name,
            "status": "running",
            "kind": "pde",
            "started": meta.get("started", utc_now()),
            "steps": n_steps,
            "step": solver.step_index,
            "pid": os.getpid(),
            "host": socket.gethostname(),
        }
        write_meta(out, meta)
        bar = ProgressBar(
            n_steps, cfg.name, unit="step", initial=solver.step_index, enabled=None if progress else False
        )
        try:
            while solver.step_index < n_steps:
                solver.step()
                k = solver.step_index
                if k % every == 0 or k == n_steps:
                    records.append(snapshot(solver))
                if k % cfg.checkpoint_every == 0 and k < n_steps:
                    save_checkpoint(ck, _checkpoint_state(solver, records))
                    meta["step"] = k
                    write_meta(out, meta)
                bar.update(1)
            ds = records_to_dataset(records, solver)
            ds.attrs["config_name"] = cfg.name
            write_zarr(ds, out / DATA_DIR)
            verify_pde_run(out, cfg)  # "done" is written only for a store that reopens as its config says
        except BaseException as exc:
            stopped = stopped_by_user(exc)
            msg = f"interrupted during step {solver.step_index + 1} of {n_steps}; {resume_hint('pde', out)}"
            meta.update(failure_fields(exc, msg if stopped else None))
            write_meta(out, meta)
            raise
        finally:
            bar.close()
        meta.update(status="done", ended=utc_now(), step=n_steps)
        meta.pop("error", None)
        meta.pop("traceback", None)
        write_meta(out, meta)
        ck.unlink(missing_ok=True)
    return out
