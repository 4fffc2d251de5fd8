"""The one simulation loop: :class:`Simulator` (stateful, resumable) and :func:`simulate`.

Each step k (arXiv 2605.18870 Sec. 6; NOTES.md §1-3):

1. evaluate the field at (x_k, D_k, t_k) once, with the energy-ledger pieces;
2. advance the deterministic part with the chosen integrator (tokens and weight drift);
3. add the weight noise g sqrt(dt) xi (Euler-Maruyama; xi = (Z+Z^T)/2 or Z, one draw of
   ``randn(H, d, d)`` per path from that path's noise stream) and any layer jump;
4. accumulate the ledger with left Riemann sums: int d_sE, int G^2, int Ghat^2 and the martingale M,
   so that at every recorded time

       R_paper = E_t - E_0 - int d_sE ds - s int G^2 ds - M_t - J_t     (eq. (147) with the paper's G^2)
       R_exact = E_t - E_0 - int d_sE ds - s int Ghat^2 ds - M_t - J_t  (exact chain rule)

   where J_t sums the energy jumps E(x, D_after) - E(x, D_before) of piecewise-constant (layered)
   weights at layer boundaries (zero for the continuous processes of the paper).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import xarray as xr

from .dynamics.field import FieldEval, energy_from_lse
from .dynamics.ledger_terms import step_terms
from .dynamics.system import VectorField
from .geometry.sphere import check_on_sphere
from .integrators import get_integrator
from .model import heads as heads_mod
from .model.transformer import TransformerModel
from .model.weights import noise_matrix
from .random import path_generators, randn_per_path
from .simulation.spec import SimulationSpec, n_steps_for

SCALARS = (
    "energy",
    "G2",
    "Ghat2",
    "dtE_drift",
    "dtE_ito",
    "int_dtE",
    "int_G2",
    "int_Ghat2",
    "martingale",
    "jumps",
    "residual_paper",
    "residual_exact",
)
DTYPES = {"float32": torch.float32, "float64": torch.float64}


class NonFiniteStateError(FloatingPointError):
    """The state became nan/inf. ``partial`` holds the dataset recorded up to then (or None)."""

    def __init__(self, message: str, partial: xr.Dataset | None = None):
        super().__init__(message)
        self.partial = partial


@dataclass
class Record:
    """One recorded time: tokens, optionally heads, and the ledger scalars (each shape [P])."""

    step: int
    time: float
    x: torch.Tensor
    D: torch.Tensor | None
    scalars: dict[str, torch.Tensor] = field(default_factory=dict)


def _dtype(dtype) -> torch.dtype:
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
        return DTYPES[dtype]
    if dtype not in DTYPES.values():
        raise ValueError(f"dtype must be torch.float32 or torch.float64: got {dtype!r}")
    return dtype


def _positive_finite(name: str, value) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0: got {value!r}")
    return float(value)


class Simulator:
    """Stateful integrator of one batch of paths; can be checkpointed and resumed bit for bit.

    Parameters
    ----------
    model : TransformerModel
    x0 : Tensor, shape=[P, n, d] (or [n, d] with ``paths``)
        Initial tokens (on S^{d-1} for the sphere geometry).
    heads : Tensor, shape=[P, H, d, d], [H, d, d] or [d, d]
        Initial score matrices D_h(0).
    dt : float
        Time step (> 0).
    t0 : float
        Initial time.
    values : Tensor or None
        Fixed value matrices V_h (same shapes as ``heads``); None: V = D (the paper).
    integrator : str
        ``euler`` (projected, the authors' code), ``euler_printed``, ``heun``, ``rk4``.
    seed : int
        Seed of the weight-noise streams (one per path).
    ledger : bool
        Compute the energy ledger (costs about one extra pass over the pairs).
    dtype : {"float64", "float32"} or torch dtype
    device : str or torch.device
    first_path : int
        Global index of the first path (a batch of paths split across workers keeps its streams).
    paths : int or None
        Number of paths when ``x0`` is one cloud (n, d).
    """

    def __init__(
        self,
        model: TransformerModel,
        x0,
        heads,
        *,
        dt: float,
        t0: float = 0.0,
        values=None,
        integrator: str = "euler",
        seed: int = 0,
        ledger: bool = True,
        dtype="float64",
        device="cpu",
        first_path: int = 0,
        paths: int | None = None,
    ):
        if not isinstance(model, TransformerModel):
            raise ValueError(f"model must be a TransformerModel: got {type(model).__name__}")
        self.model = model
        self.dtype = _dtype(dtype)
        self.device = torch.device(device)
        self.dt = _positive_finite("dt", dt)
        if not math.isfinite(t0):
            raise ValueError(f"t0 must be finite: got {t0!r}")
        x = torch.as_tensor(x0)
        if x.ndim == 2:
            x = x.unsqueeze(0).expand(paths or 1, -1, -1)
        if x.ndim != 3:
            raise ValueError(f"x0 must have shape (P, n, d) or (n, d): got {tuple(x.shape)}")
        if paths is not None and x.shape[0] != paths:
            raise ValueError(f"x0 has {x.shape[0]} paths but paths={paths}")
        P, n, d = x.shape
        if d < 2:
            raise ValueError(f"token dimension d must be >= 2: got d={d}")
        x = x.to(dtype=self.dtype, device=self.device).clone()
        if not torch.isfinite(x).all():
            raise ValueError("x0 must be finite: found non-finite entries")
        if model.geometry == "sphere":
            check_on_sphere(x, "x0", tol=1e-5 if self.dtype == torch.float32 else 1e-6)
        D = heads_mod.from_array(heads, paths=P, d=d, dtype=self.dtype, device=self.device)
        H = D.shape[1]
        V = None
        if values is not None:
            V = heads_mod.from_array(
                values, paths=P, d=d, dtype=self.dtype, device=self.device, name="values"
            )
            if V.shape[1] != H:
                raise ValueError(f"values have {V.shape[1]} heads but heads have {H}")
        model.weights.validate(H, d)
        self.integrator = get_integrator(integrator)
        self.field = VectorField(model, V)
        self.ledger = bool(ledger)
        self.seed = int(seed)
        self.first_path = int(first_path)
        self.gens = path_generators(seed, P, "noise", self.device, first=self.first_path)
        self.P, self.n, self.d, self.H = P, n, d, H
        self.x, self.D, self.t, self.step_index = x, D, float(t0), 0
        self.t0 = float(t0)
        z = torch.zeros(P, dtype=torch.float64, device=self.device)
        self.acc = {
            "int_dtE": z.clone(),
            "int_G2": z.clone(),
            "int_Ghat2": z.clone(),
            "martingale": z.clone(),
            "jumps": z.clone(),
        }
        self._warned_ledger = False
        self._fe: FieldEval | None = None
        self.E0: torch.Tensor | None = None

    @classmethod
    def from_spec(cls, spec: SimulationSpec) -> Simulator:
        """The Simulator of a :class:`attnflow.simulation.SimulationSpec` (at its initial state)."""
        return cls(
            spec.model,
            spec.x0,
            spec.heads,
            dt=spec.dt,
            t0=spec.t0,
            values=spec.values,
            integrator=spec.integrator,
            seed=spec.seed,
            ledger=spec.ledger,
            dtype=spec.dtype,
            device=spec.device,
            first_path=spec.first_path,
        )

    # -- state -----------------------------------------------------------------------------------
    def _current(self) -> FieldEval:
        if self._fe is None:
            self._fe = self.field(self.x, self.D, self.t, ledger=self.ledger, raw=self.integrator.needs_raw)
            if self.ledger and self.E0 is None:
                self.E0 = self._fe.energy.clone()
        return self._fe

    def state_dict(self) -> dict:
        """Everything needed to continue identically (tokens, heads, time, RNG states, ledger sums)."""
        self._current()
        return {
            "x": self.x.cpu().clone(),
            "D": self.D.cpu().clone(),
            "t": self.t,
            "step": self.step_index,
            "rng": [g.get_state() for g in self.gens],
            "acc": {k: v.cpu().clone() for k, v in self.acc.items()},
            "E0": None if self.E0 is None else self.E0.cpu().clone(),
        }

    def load_state_dict(self, sd: dict) -> None:
        """Restore a :meth:`state_dict` (same model, shapes and seed)."""
        if tuple(sd["x"].shape) != (self.P, self.n, self.d) or tuple(sd["D"].shape) != tuple(self.D.shape):
            raise ValueError(
                f"checkpoint shapes {tuple(sd['x'].shape)}, {tuple(sd['D'].shape)} do not match this run "
                f"{(self.P, self.n, self.d)}, {tuple(self.D.shape)}"
            )
        self.x = sd["x"].to(self.device, self.dtype)
        self.D = sd["D"].to(self.device, self.dtype)
        self.t, self.step_index = float(sd["t"]), int(sd["step"])
        for g, s in zip(self.gens, sd["rng"], strict=True):
            g.set_state(s)
        self.acc = {k: v.to(self.device) for k, v in sd["acc"].items()}
        self.E0 = None if sd["E0"] is None else sd["E0"].to(self.device)
        self._fe = None

    # -- stepping --------------------------------------------------------------------------------
    def _instant_rates(self, fe: FieldEval) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.model.weights
        terms = step_terms(
            self.model, fe, self.D, self.t, w.drift(self.D, self.t), w.diffusion(self.D, self.t), None
        )
        return terms.dtE_drift, terms.dtE_ito

    def record(self, *, with_heads: bool = False) -> Record:
        """Snapshot of the current state with the ledger scalars (each of shape [P])."""
        fe = self._current()
        sc: dict[str, torch.Tensor] = {}
        if self.ledger:
            drift, ito = self._instant_rates(fe)
            s = self.model.sign
            dE = fe.energy - self.E0
            base = dE - self.acc["int_dtE"] - self.acc["martingale"] - self.acc["jumps"]
            if not self._warned_ledger and not bool(torch.isfinite(fe.energy).all()):
                self._warned_ledger = True
                warnings.warn(
                    f"the energy ledger left float64 at t = {self.t:g} (E = exp(beta <x, D y>) / ... "
                    f"overflows once beta * max <x_i, D x_j> > 709; beta = {self.model.beta:g}): the "
                    "positions stay exact but energy, G2, Ghat2 and the residuals are inf/nan from here; "
                    "lower beta or the head scale, or run with ledger=False",
                    RuntimeWarning,
                    stacklevel=2,
                )
            sc = {
                "energy": fe.energy,
                "G2": fe.G2,
                "Ghat2": fe.Ghat2,
                "dtE_drift": drift,
                "dtE_ito": ito,
                **self.acc,
                "residual_paper": base - s * self.acc["int_G2"],
                "residual_exact": base - s * self.acc["int_Ghat2"],
            }
            sc = {k: v.detach().cpu().clone() for k, v in sc.items()}
        return Record(
            step=self.step_index,
            time=self.t,
            x=self.x.detach().cpu().clone(),
            D=self.D.detach().cpu().clone() if with_heads else None,
            scalars=sc,
        )

    def step(self, z: torch.Tensor | None = None) -> None:
        """Advance one step of size dt.

        Parameters
        ----------
        z : Tensor or None, shape=[P, H, d, d]
            Standard normal draws to use for this step's weight noise instead of the paths' own
            streams (which are then not advanced), e.g. a Brownian path drawn on a finer grid and
            summed (``attnflow.analysis.edi``). Ignored for deterministic weight processes.
        """
        fe = self._current()
        w = self.model.weights
        dt, t = self.dt, self.t
        x_new, D_new = self.integrator.step(self.field, self.x, self.D, t, dt, fe)
        noise = None
        g = w.diffusion(self.D, t)
        if w.stochastic:
            if z is None:
                z = randn_per_path(self.gens, (self.H, self.d, self.d), self.dtype, self.device)
            elif tuple(z.shape) != (self.P, self.H, self.d, self.d):
                raise ValueError(
                    f"z must have shape (P, H, d, d) = {(self.P, self.H, self.d, self.d)}: "
                    f"got {tuple(z.shape)}"
                )
            else:
                z = z.to(dtype=self.dtype, device=self.device)
            noise = (
                torch.as_tensor(g, dtype=self.dtype, device=self.device)
                * math.sqrt(dt)
                * noise_matrix(z, w.noise)
            )
            D_new = D_new + noise
        jump = w.jump(D_new, t + dt)
        jump_energy = None
        if jump is not None:
            if self.ledger and not torch.equal(jump, D_new):
                before = self.field(x_new, D_new, t + dt, ledger=False).lse
                after = self.field(x_new, jump, t + dt, ledger=False).lse
                jump_energy = energy_from_lse(after, self.model.beta) - energy_from_lse(
                    before, self.model.beta
                )
            D_new = jump.clone()
        if self.ledger:
            terms = step_terms(self.model, fe, self.D, t, w.drift(self.D, t), g, noise)
            self.acc["int_dtE"] = self.acc["int_dtE"] + (terms.dtE_drift + terms.dtE_ito) * dt
            self.acc["int_G2"] = self.acc["int_G2"] + fe.G2 * dt
            self.acc["int_Ghat2"] = self.acc["int_Ghat2"] + fe.Ghat2 * dt
            self.acc["martingale"] = self.acc["martingale"] + terms.martingale
            if jump_energy is not None:
                self.acc["jumps"] = self.acc["jumps"] + jump_energy
        if not (torch.isfinite(x_new).all() and torch.isfinite(D_new).all()):
            bad_x = (~torch.isfinite(x_new)).flatten(1).any(1)
            bad = (bad_x | (~torch.isfinite(D_new)).flatten(1).any(1)).nonzero().flatten().tolist()
            hint = (
                "; attention='usa' uses exp(beta <x, D y>) without normalisation, which overflows once "
                "beta * <x_i, D x_j> exceeds ~88 (float32) or ~709 (float64)"
                if self.model.attention == "usa"
                else ""
            )
            raise NonFiniteStateError(
                f"the state became non-finite at step {self.step_index + 1} (t = {t + dt:g}) in paths "
                f"{[p + self.first_path for p in bad]}: reduce dt (got {dt:g}) or beta "
                f"(got {self.model.beta:g}), or use dtype='float64'{hint}"
            )
        self.x, self.D = x_new, D_new
        self.t = self.t0 + (self.step_index + 1) * dt
        self.step_index += 1
        self._fe = None

    def run(
        self,
        n_steps: int,
        *,
        record_every: int = 1,
        on_record: Callable[[Record], None] | None = None,
        with_heads: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """Take ``n_steps`` steps, calling ``on_record`` whenever the global step index is a multiple
        of ``record_every`` (the caller records the initial state itself)."""
        for _ in range(n_steps):
            self.step()
            if on_record is not None and self.step_index % record_every == 0:
                on_record(self.record(with_heads=with_heads))
            if progress is not None:
                progress(1)


def records_to_dataset(
    records: list[Record], sim: Simulator, attrs: dict, *, positions: bool = True
) -> xr.Dataset:
    """Labelled dataset from records: dims (path, time, token, dim) and (path, time)."""
    times = np.array([r.time for r in records])
    coords = {
        "path": np.arange(sim.first_path, sim.first_path + sim.P),
        "time": times,
        "step": ("time", np.array([r.step for r in records])),
    }
    data = {}
    if positions:
        data["positions"] = (("path", "time", "token", "dim"), torch.stack([r.x for r in records], 1).numpy())
        coords["token"] = np.arange(sim.n)
        coords["dim"] = np.arange(sim.d)
    if records and records[0].D is not None:
        data["heads"] = (
            ("path", "time", "head", "row", "col"),
            torch.stack([r.D for r in records], 1).numpy(),
        )
        coords["head"] = np.arange(sim.H)
    if records and records[0].scalars:
        for k in SCALARS:
            data[k] = (("path", "time"), torch.stack([r.scalars[k] for r in records], 1).numpy())
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    return ds


def run_attrs(sim: Simulator, t1: float, record_every: int) -> dict:
    """Attributes describing a run (JSON-serialisable, stored with the data)."""
    from . import __version__

    return {
        "attnflow_version": __version__,
        "model": json.dumps(sim.model.describe()),
        "direction": sim.model.direction,
        "sign": sim.model.sign,
        "integrator": sim.integrator.name,
        "integrator_order": sim.integrator.order,
        "dt": sim.dt,
        "t0": sim.t0,
        "t1": float(t1),
        "record_every": int(record_every),
        "seed": sim.seed,
        "dtype": str(sim.dtype).replace("torch.", ""),
        "device": str(sim.device),
        "n": sim.n,
        "d": sim.d,
        "H": sim.H,
        "paths": sim.P,
        "ledger": int(sim.ledger),
    }


def simulate(
    model: TransformerModel,
    x0,
    heads,
    *,
    t1: float,
    dt: float,
    t0: float = 0.0,
    values=None,
    integrator: str = "euler",
    seed: int = 0,
    record_every: int = 1,
    positions: bool = True,
    record_heads: bool = False,
    ledger: bool = True,
    dtype="float64",
    device="cpu",
    paths: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> xr.Dataset:
    """Integrate the multi-head attention dynamics and return a labelled dataset.

    Parameters
    ----------
    model : TransformerModel
        Attention kind, beta, direction (ascent/descent), geometry and weight process.
    x0 : array-like, shape=[P, n, d] or [n, d]
        Initial tokens (see :mod:`attnflow.model.tokens`).
    heads : array-like, shape=[P, H, d, d], [H, d, d] or [d, d]
        Initial heads D_h(0) (see :mod:`attnflow.model.heads`).
    t1, dt : float
        Final time and step; (t1 - t0)/dt must be a whole number.
    values : array-like or None
        Fixed value matrices V_h; None uses V = D as in the paper.
    integrator : {"euler", "euler_printed", "heun", "rk4"}
    seed : int
        Seed of the weight noise (per-path streams, see :mod:`attnflow.random`).
    record_every : int
        Record every k-th step (the initial and final states are always recorded).
    positions, record_heads, ledger : bool
        What to record.
    dtype : {"float64", "float32"}
    device : str
        ``"cpu"`` or ``"cuda"``.

    Returns
    -------
    xarray.Dataset
        ``positions`` (path, time, token, dim), optional ``heads`` (path, time, head, row, col),
        and the ledger scalars (path, time): energy, G2, Ghat2, dtE_drift, dtE_ito, int_dtE, int_G2,
        int_Ghat2, martingale, residual_paper, residual_exact. Attributes hold the parameters.

    Raises
    ------
    NonFiniteStateError
        If the state becomes non-finite; its ``partial`` attribute holds what was recorded.

    Examples
    --------
    >>> import attnflow as af
    >>> model = af.TransformerModel(direction="ascent", beta=1.0)
    >>> x0 = af.tokens.uniform(2, 16, 3, seed=0)
    >>> ds = af.simulate(model, x0, af.heads.identity(2, 1, 3), t1=1.0, dt=0.1)
    >>> ds.positions.shape
    (2, 11, 16, 3)
    """
    if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 1:
        raise ValueError(f"record_every must be an integer >= 1: got {record_every!r}")
    sim = Simulator(
        model,
        x0,
        heads,
        dt=dt,
        t0=t0,
        values=values,
        integrator=integrator,
        seed=seed,
        ledger=ledger,
        dtype=dtype,
        device=device,
        paths=paths,
    )
    n_steps = n_steps_for(t0, t1, sim.dt)
    records = [sim.record(with_heads=record_heads)]
    try:
        sim.run(
            n_steps,
            record_every=record_every,
            on_record=records.append,
            with_heads=record_heads,
            progress=progress,
        )
    except NonFiniteStateError as err:
        err.partial = records_to_dataset(records, sim, run_attrs(sim, t1, record_every), positions=positions)
        raise
    if records[-1].step != sim.step_index:
        records.append(sim.record(with_heads=record_heads))
    return records_to_dataset(records, sim, run_attrs(sim, t1, record_every), positions=positions)
