"""Classical fourth-order Runge-Kutta with retraction (projection method, see :mod:`.heun`)."""

from __future__ import annotations

from .base import Integrator


class RK4(Integrator):
    """Classical RK4 on the coupled (tokens, heads) drift (order 4)."""

    order = 4
    strong_order = 1.0  # additive weight noise: Euler-Maruyama increment
    name = "rk4"

    def drift_step(self, field, x, D, t, dt, first):
        h = 0.5 * dt
        k1, F1 = field.token_rate(first), field.weight_rate(D, t)
        x2, D2 = field.retract(x + h * k1), D + h * F1
        k2, F2 = field.token_rate(field(x2, D2, t + h)), field.weight_rate(D2, t + h)
        x3, D3 = field.retract(x + h * k2), D + h * F2
        k3, F3 = field.token_rate(field(x3, D3, t + h)), field.weight_rate(D3, t + h)
        x4, D4 = field.retract(x + dt * k3), D + dt * F3
        k4, F4 = field.token_rate(field(x4, D4, t + dt)), field.weight_rate(D4, t + dt)
        x_new = field.retract(x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4))
        D_new = D + dt / 6.0 * (F1 + 2 * F2 + 2 * F3 + F4)
        return x_new, D_new
