"""Projected Euler: the scheme of the authors' code (NOTES.md §1; arXiv 2605.18870 Sec. 6).

x_{k+1} = Pi(x_k + s dt v(x_k, D_k, t_k)),   v tangent (projected) velocity,
D_{k+1} = D_k + dt f(D_k, t_k)   (+ the noise increment, Euler-Maruyama).

The compiled multi-step loop (:mod:`attnflow.simulation.fused`) takes this step in compiled code for the
runs it serves; ``tests/test_fused_loop.py`` holds it to this class.
"""

from __future__ import annotations

from .base import Integrator

__all__ = ["ProjectedEuler", "euler_increment"]


def euler_increment(y, dt, rate):
    """y + dt rate: the explicit Euler update of the tokens (before the retraction Pi) and of the heads
    (Sec. 6 scheme). Plain arithmetic, valid on tensors and inside numba: the compiled loop of
    :mod:`attnflow.simulation.fused` compiles this very function (its one definition)."""
    return y + dt * rate


class ProjectedEuler(Integrator):
    """First-order projected Euler (order 1)."""

    order = 1
    strong_order = 1.0  # additive weight noise: Euler-Maruyama increment
    name = "euler"

    def drift_step(self, field, x, D, t, dt, first):
        x_new = field.retract(euler_increment(x, dt, field.token_rate(first)))
        D_new = euler_increment(D, dt, field.weight_rate(D, t))
        return x_new, D_new
