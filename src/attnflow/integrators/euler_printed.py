"""The printed variant of the Sec. 6 scheme: normalise x + s dt W with the unprojected W.

    x_{k+1} = Pi(x_k + s dt (1/H) sum_h sum_j A_ij D_h x_j)     (arXiv 2605.18870, Sec. 6 display)

The radial part of W only rescales before the normalisation, so the scheme is consistent
(order 1) with the same ODE as :class:`ProjectedEuler`, but not identical to it at finite dt.
"""

from __future__ import annotations

from .base import Integrator


class PrintedEuler(Integrator):
    """First-order Euler with the unprojected velocity, as printed in the paper (order 1)."""

    order = 1
    strong_order = 1.0  # additive weight noise: Euler-Maruyama increment
    name = "euler_printed"
    needs_raw = True

    def drift_step(self, field, x, D, t, dt, first):
        x_new = field.retract(x + dt * field.raw_token_rate(first))
        D_new = D + dt * field.weight_rate(D, t)
        return x_new, D_new
