"""Integrator interface: one class per method, each declaring its order (diffrax practice)."""

from __future__ import annotations

from typing import ClassVar

import torch

from ..dynamics.field import FieldEval
from ..dynamics.system import VectorField


class Integrator:
    """Advance the deterministic part of (x, D) by one step.

    ``step`` receives the evaluation ``first`` at (x, D, t) that the simulation loop already made
    (with the ledger), so the first stage is never computed twice.
    """

    #: deterministic order of convergence on the tokens (weights frozen or smooth)
    order: ClassVar[int]
    #: name used in configs and results
    name: ClassVar[str]
    #: whether ``first`` must carry the unprojected velocity
    needs_raw: ClassVar[bool] = False

    def step(
        self, field: VectorField, x: torch.Tensor, D: torch.Tensor, t: float, dt: float, first: FieldEval
    ) -> tuple[torch.Tensor, torch.Tensor]:  # pragma: no cover - abstract
        """Advance (x, D) from t to t + dt with the deterministic drift (x' = s v, D' = f(D, t)).

        The Sec. 6 scheme of arXiv 2605.18870 is the projected Euler case; higher-order methods
        re-evaluate the field at retracted stage points. Noise and layer jumps are added by the loop.

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
            Heads after the drift only.
        """
        raise NotImplementedError
