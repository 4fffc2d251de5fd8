"""Heun's method (explicit trapezoid, RK2) with retraction; attention recomputed at each stage.

Stage points are retracted onto the sphere before the field is evaluated and the final combination is
retracted again: a projection method (Hairer, Lubich, Wanner, Geometric Numerical Integration,
Sec. IV.4), which keeps the order of the underlying Runge-Kutta method because the exact flow stays
on the sphere.
"""

from __future__ import annotations

from .base import Integrator


class Heun(Integrator):
    """Second-order Heun / RK2 (order 2)."""

    order = 2
    strong_order = 1.0  # additive weight noise: Euler-Maruyama increment
    name = "heun"

    def drift_step(self, field, x, D, t, dt, first):
        k1 = field.token_rate(first)
        F1 = field.weight_rate(D, t)
        x2 = field.retract(x + dt * k1)
        D2 = D + dt * F1
        k2 = field.token_rate(field(x2, D2, t + dt))
        F2 = field.weight_rate(D2, t + dt)
        return field.retract(x + 0.5 * dt * (k1 + k2)), D + 0.5 * dt * (F1 + F2)
