"""Integrator interface: one class per method, each declaring its orders (diffrax practice).

An integrator advances the coupled system (tokens x, heads D) by one step: the deterministic drift
(x' = s v, D' = f(D, t)) by its Runge-Kutta rule, and the additive weight-noise increment
dW = g sqrt(dt) xi by Euler-Maruyama inside the same step (arXiv 2605.18870 Sec. 6). Each method states
``order``, its deterministic order of convergence, and ``strong_order``, its strong order when the
weights carry additive noise (g independent of D): the noise enters through its increment only, so no
method here exceeds strong order 1 (a higher order would need the iterated integrals of W). With
multiplicative noise (g depending on D) the increment scheme has strong order 1/2.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from decimal import Decimal
from typing import ClassVar

import numpy as np
import torch

from ..dynamics.assembly import FieldEval
from ..dynamics.system import VectorField

__all__ = ["Integrator", "check_dt", "check_t0", "grid_times"]


def check_dt(dt) -> float:
    """``dt`` as a float if it is a finite number > 0: the one check of the time step.

    Every entry calls it (the YAML config's ``integrator.dt``, :func:`attnflow.simulate`,
    :class:`attnflow.simulation.SimulationSpec`, :class:`attnflow.simulation.Simulator`, the density solver
    :class:`attnflow.pde.DensitySolver`), so a bad step gives the same message wherever it is given. It
    lives in the integrators' layer so that :mod:`attnflow.simulation` and :mod:`attnflow.pde` can both
    import it (``attnflow.simulation.spec`` re-exports it).

    Raises
    ------
    ValueError
        ``dt must be a finite number > 0: got ...``, with the fix.

    Examples
    --------
    >>> check_dt(0.01)
    0.01
    """
    if isinstance(dt, bool) or not isinstance(dt, numbers.Real) or not math.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt must be a finite number > 0: got {dt!r}; give a time step such as dt=0.01")
    return float(dt)


def check_t0(t0) -> float:
    """``t0`` as a float if it is a finite number: the one check of the initial time.

    Raises
    ------
    ValueError
        ``t0 must be finite: got ...``.
    """
    if isinstance(t0, bool) or not isinstance(t0, numbers.Real) or not math.isfinite(t0):
        raise ValueError(f"t0 must be finite: got {t0!r}; e.g. t0=0.0")
    return float(t0)


def _decimals(x: float) -> int:
    """Digits after the decimal point of the shortest repr of ``x`` (0.01 -> 2, 1e-05 -> 5, 20.0 -> 0)."""
    return max(-Decimal(repr(float(x))).normalize().as_tuple().exponent, 0)


def grid_times(times, steps, t0: float, dt: float) -> np.ndarray:
    """Exact time coordinates of recorded steps: ``t0 + k dt`` rounded to the decimals of ``t0`` and ``dt``.

    The state's clock ``t0 + k dt`` in binary floating point is not always the decimal time of the step
    (920 * 0.01 = 9.200000000000001), so ``ds.sel(time=9.2)`` would miss it. A time that lies on the grid of
    fixed steps (within 1e-9 of a step) becomes the float nearest to the decimal ``t0 + k dt``; a time off
    the grid (an adaptive integrator's) is kept as it is. The dynamics keep their own clock unchanged.

    Parameters
    ----------
    times : array-like
        The recorded times (the simulator's clock).
    steps : array-like of int
        The step index of each record.
    t0, dt : float
        Start time and step of the run.

    Returns
    -------
    numpy.ndarray
        float64 times.

    Examples
    --------
    >>> grid_times([0.0, 9.200000000000001], [0, 920], 0.0, 0.01).tolist()
    [0.0, 9.2]
    """
    times = np.asarray(times, dtype=np.float64)
    steps = np.asarray(steps, dtype=np.float64)
    decimals = _decimals(dt) + _decimals(t0)
    on_grid = np.abs(times - (t0 + steps * dt)) <= 1e-9 * np.maximum(1.0, np.abs(times))
    exact = np.round(t0 + steps * dt, decimals) if decimals <= 15 else times
    return np.where(on_grid, exact, times)


class Integrator(ABC):
    """Advance (x, D) by one step.

    ``step`` receives the evaluation ``first`` at (x, D, t) that the simulation loop already made
    (with the ledger), so the first stage is never computed twice.
    """

    #: deterministic order of convergence (weights frozen or smooth)
    order: ClassVar[int]
    #: strong order with additive weight noise added by the step
    strong_order: ClassVar[float] = 1.0
    #: name used in configs and results
    name: ClassVar[str]
    #: whether ``first`` must carry the unprojected velocity
    needs_raw: ClassVar[bool] = False

    def effective_order(self, stochastic: bool, additive: bool = True) -> float:
        """The order a run with this method really has: ``order`` without weight noise, else the strong
        order (``strong_order`` for additive noise, at most 1/2 for multiplicative noise)."""
        if not stochastic:
            return float(self.order)
        return float(self.strong_order) if additive else min(float(self.strong_order), 0.5)

    def stats(self) -> dict[str, float]:
        """Cumulative solver statistics of the run (adaptive substeps, implicit iterations); {} here."""
        return {}

    @abstractmethod
    def drift_step(
        self, field: VectorField, x: torch.Tensor, D: torch.Tensor, t: float, dt: float, first: FieldEval
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Advance (x, D) from t to t + dt with the deterministic drift only (x' = s v, D' = f(D, t)).

        Parameters
        ----------
        field : VectorField
        x : Tensor, shape=[P, n, d]
        D : Tensor, shape=[P, H, d, d]
        t, dt : float
        first : FieldEval
            The field at (x, D, t), already computed by the loop.

        Returns
        -------
        x_new : Tensor, shape=[P, n, d]
        D_new : Tensor, shape=[P, H, d, d]
        """

    def step(
        self,
        field: VectorField,
        x: torch.Tensor,
        D: torch.Tensor,
        t: float,
        dt: float,
        first: FieldEval,
        dW: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: the drift by :meth:`drift_step`, then the weight-noise increment ``dW`` (if any).

        Parameters
        ----------
        dW : Tensor or None, shape=[P, H, d, d]
            g sqrt(dt) xi, the noise added to the heads in this step (Euler-Maruyama).
        """
        x_new, D_new = self.drift_step(field, x, D, t, dt, first)
        if dW is not None:
            D_new = D_new + dW
        return x_new, D_new
