"""A frozen description of one simulation: what the config builder returns and the Simulator consumes.

The whole-step rule ((t1 - t0)/dt must be a whole number of steps) lives here and only here:
:func:`n_steps_for`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..model.transformer import TransformerModel

__all__ = ["SimulationSpec", "n_steps_for"]


def n_steps_for(t0: float, t1: float, dt: float) -> int:
    """Number of steps from t0 to t1; raises unless (t1 - t0)/dt is a whole number (to 1e-9).

    Examples
    --------
    >>> n_steps_for(0.0, 1.0, 0.1)
    10
    """
    if not math.isfinite(t1) or t1 <= t0:
        raise ValueError(f"t1 must be a finite time > t0 = {t0:g}: got {t1!r}")
    k = (t1 - t0) / dt
    n = round(k)
    if n < 1 or abs(k - n) > 1e-9 * max(1.0, k):
        raise ValueError(
            f"(t1 - t0)/dt must be a whole number of steps: got ({t1:g} - {t0:g})/{dt:g} = {k:.6g}; "
            f"choose t1 = {t0 + max(n, 1) * dt:g} or another dt"
        )
    return n


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

    def __post_init__(self):
        if (
            isinstance(self.record_every, bool)
            or not isinstance(self.record_every, int)
            or self.record_every < 1
        ):
            raise ValueError(f"record_every must be an integer >= 1: got {self.record_every!r}")
        if (
            isinstance(self.dt, bool)
            or not isinstance(self.dt, (int, float))
            or not math.isfinite(self.dt)
            or self.dt <= 0
        ):
            raise ValueError(f"dt must be a finite number > 0: got {self.dt!r}")
        if not isinstance(self.t0, (int, float)) or not math.isfinite(self.t0):
            raise ValueError(f"t0 must be finite: got {self.t0!r}")
        n_steps_for(float(self.t0), float(self.t1), float(self.dt))

    @property
    def n_steps(self) -> int:
        """Number of steps from t0 to t1 (the whole-step rule, :func:`n_steps_for`)."""
        return n_steps_for(float(self.t0), float(self.t1), float(self.dt))
