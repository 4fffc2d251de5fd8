"""A frozen description of one simulation: what the config builder returns and the Simulator consumes.

The whole-step rule ((t1 - t0)/dt must be a whole number of steps) lives here and only here:
:func:`n_steps_for`. The checks of ``dt`` and ``t0`` live one layer down, in
:mod:`attnflow.integrators.base` (the particle simulation and the density solver of :mod:`attnflow.pde`
both call them); they are re-exported here, so ``from attnflow.simulation.spec import check_dt`` keeps
working.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields

import torch

from ..integrators.base import check_dt, check_t0
from ..model.transformer import TransformerModel

__all__ = ["MAX_STEPS", "SimulationSpec", "check_dt", "check_record_every", "check_t0", "n_steps_for"]

#: The most steps a run may take (a guard against t1/dt typos such as dt = 1e-30).
MAX_STEPS = 10**12


def _short_float(x: float) -> str:
    """``1e12`` rather than ``1000000000000`` for round powers of ten."""
    text = f"{x:.0e}".replace("e+0", "e").replace("e+", "e")
    return text if float(text) == x else f"{x:g}"


def check_record_every(record_every) -> int:
    """``record_every`` if it is an integer >= 1: the one check of the recording stride.

    Raises
    ------
    ValueError
        ``record_every must be an integer >= 1: got ...``.
    """
    if isinstance(record_every, bool) or not isinstance(record_every, int) or record_every < 1:
        raise ValueError(f"record_every must be an integer >= 1: got {record_every!r}; e.g. record_every=10")
    return record_every


def n_steps_for(t0: float, t1: float, dt: float) -> int:
    """Number of steps from t0 to t1: the one check of a time grid.

    ``dt`` must pass :func:`check_dt`, ``t0`` be finite, ``t1`` a finite time > t0, the number of steps
    at most :data:`MAX_STEPS` and ``(t1 - t0)/dt`` a whole number (to 1e-9).

    Raises
    ------
    ValueError
        Naming the rule, the values received and a corrected ``t1`` or ``dt``.

    Examples
    --------
    >>> n_steps_for(0.0, 1.0, 0.1)
    10
    """
    dt = check_dt(dt)
    t0 = check_t0(t0)
    if isinstance(t1, bool) or not isinstance(t1, numbers.Real) or not math.isfinite(t1) or t1 <= t0:
        raise ValueError(f"t1 must be a finite time > t0 = {t0:g}: got {t1!r}")
    k = (t1 - t0) / dt
    if not math.isfinite(k) or k > MAX_STEPS:
        raise ValueError(
            f"t1 / dt must be at most {_short_float(MAX_STEPS)} steps: got {t1 - t0:g}/{dt:g} = {k:.6g}; "
            "choose a larger dt or a smaller t1"
        )
    n = round(k)
    if n < 1 or abs(k - n) > 1e-9 * max(1.0, k):
        raise ValueError(
            f"(t1 - t0)/dt must be a whole number of steps: got ({t1:g} - {t0:g})/{dt:g} = {k:.6g}; "
            f"choose t1 = {t0 + max(n, 1) * dt:g} or another dt"
        )
    return n


#: The fields of a SimulationSpec that are not keyword options of the Simulator (what to run and record).
_NOT_SIMULATOR = ("model", "x0", "heads", "t1", "record_every", "positions", "record_heads")


@dataclass(frozen=True)
class SimulationSpec:
    """Everything one run needs: model, initial state, time grid, integrator, seed and what to record.

    Built by :func:`attnflow.experiments.build` from a config (or by hand); consumed by
    :meth:`attnflow.simulation.Simulator.from_spec` and :func:`attnflow.simulation.integrate`.

    Parameters
    ----------
    model : TransformerModel
    x0 : Tensor, shape=[P, n, d]
        Initial tokens.
    heads : Tensor, shape=[P, H, d, d]
        Initial score matrices D_h(0).
    t1, dt : float
        Final time and step; ``(t1 - t0)/dt`` must be whole (:func:`n_steps_for`).
    t0 : float
    values : Tensor or None, shape=[P, H, d, d]
        Fixed value matrices (None: V = D, the paper).
    integrator : str
        A name of :data:`attnflow.integrators.INTEGRATORS`.
    integrator_options : tuple of (str, value) pairs
        Options of the integrator (``tol``, ``max_iter`` / ``max_substeps``; see
        :func:`attnflow.integrators.get_integrator`); empty for the fixed-step methods.
    seed : int
        Seed of the weight-noise streams.
    record_every : int
        Record every k-th step (the initial and final states are always recorded).
    positions, record_heads, ledger : bool
        What to record.
    dtype : {"float64", "float32"}
    device : str
    first_path : int
        Global index of the first path (paths split across workers keep their noise streams).
    loop : {"auto", "fused", "python"}
        The step loop (:class:`attnflow.simulation.Simulator`'s ``loop``): the compiled multi-step loop when
        it can run the simulation (``auto``), required (``fused``) or never (``python``).
    noise_refine : int
        Fine Brownian draws per step (:class:`attnflow.random.BrownianSource`): with m, the run sees the
        Brownian path of a run at dt/m with the same seed.
    """

    model: TransformerModel
    x0: torch.Tensor
    heads: torch.Tensor
    t1: float
    dt: float
    t0: float = 0.0
    values: torch.Tensor | None = None
    integrator: str = "euler"
    integrator_options: tuple = ()
    seed: int = 0
    record_every: int = 1
    positions: bool = True
    record_heads: bool = False
    ledger: bool = True
    dtype: str = "float64"
    device: str = "cpu"
    first_path: int = 0
    loop: str = "auto"
    noise_refine: int = 1

    def __post_init__(self):
        check_record_every(self.record_every)
        n_steps_for(self.t0, self.t1, self.dt)  # dt, t0, t1 and the whole-step rule, checked once

    def simulator_options(self) -> dict:
        """The keyword arguments of :class:`attnflow.simulation.Simulator` besides model, x0 and heads."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_SIMULATOR} | {
            "integrator_options": dict(self.integrator_options)
        }

    @property
    def n_steps(self) -> int:
        """Number of steps from t0 to t1 (the whole-step rule, :func:`n_steps_for`)."""
        return n_steps_for(float(self.t0), float(self.t1), float(self.dt))
