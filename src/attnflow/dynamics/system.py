"""The coupled token-weight system seen by the integrators.

State (x, D): tokens (P, n, d) and heads (P, H, d, d). The deterministic part of the coupled ODE is

    x' = s v(x, D, t)            (s = +1 ascent, -1 descent; NOTES.md §1)
    D' = f(D, t)                 (drift of the weight process)

Integrators advance it through this object; the weight noise g dW is added by the integrator's
stochastic step (Euler-Maruyama, arXiv 2605.18870 Sec. 6) and layer jumps by the simulation loop.
"""

from __future__ import annotations

import torch

from ..model.transformer import TransformerModel
from .assembly import FieldEval
from .field import evaluate

__all__ = ["VectorField"]


class VectorField:
    """Callable field of a model with fixed value matrices ``V`` (``None``: V = D).

    Parameters
    ----------
    model : TransformerModel
    V : Tensor or None, shape=[P, H, d, d]
    """

    def __init__(self, model: TransformerModel, V: torch.Tensor | None = None):
        self.model = model
        self.V = V
        self.sign = model.sign
        self.geometry = model.geometry

    def __call__(
        self,
        x: torch.Tensor,
        D: torch.Tensor,
        t: float,
        *,
        ledger: bool = False,
        raw: bool = False,
        ito: bool = True,
    ) -> FieldEval:
        return evaluate(self.model, x, D, self.V, t, ledger=ledger, raw=raw, ito=ito)

    def token_rate(self, fe: FieldEval) -> torch.Tensor:
        """dx/dt = s v."""
        return self.sign * fe.velocity

    def raw_token_rate(self, fe: FieldEval) -> torch.Tensor:
        """s W: the unprojected mean head output (the printed scheme; equals s v off the sphere)."""
        return self.sign * (fe.raw_velocity if fe.raw_velocity is not None else fe.velocity)

    def weight_rate(self, D: torch.Tensor, t: float) -> torch.Tensor:
        """dD/dt drift f(D, t)."""
        return self.model.weights.drift(D, t)

    def retract(self, y: torch.Tensor) -> torch.Tensor:
        """The geometry's retraction (Pi(y) = y/|y| on the sphere, identity in R^d)."""
        return self.geometry.retract(y)
