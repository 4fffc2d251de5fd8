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

from abc import ABC, abstractmethod
from typing import ClassVar

import torch

from ..dynamics.assembly import FieldEval
from ..dynamics.system import VectorField

__all__ = ["Integrator"]


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
