r"""Lie-group integrators on the sphere: the rotation group SO(d) acting on S^{d-1}.

Every tangent velocity :math:`w` at :math:`y \in S^{d-1}` is the action of the skew matrix
:math:`\xi(y) = w y^\top - y w^\top \in \mathfrak{so}(d)` (since :math:`\xi(y)\,y = w` for unit
:math:`y \perp w`), so the token equation :math:`x_i' = s v_i` is :math:`x_i' = \xi_i(x)\,x_i`, one
generator per token. The methods here advance each token by the exponential of a combination of
these generators, so tokens stay on the sphere to round-off with no retraction (Iserles, Munthe-Kaas,
Norsett, Zanna, *Lie-group methods*, Acta Numerica 2000, Sec. 5; Hairer-Lubich-Wanner, *Geometric
Numerical Integration*, Sec. IV.8):

* :class:`LieEuler` (order 1): :math:`x_{k+1} = \exp(h\,\xi(x_k))\,x_k`, i.e. the geodesic step
  :math:`\exp_{x_k}(h s v_k)` of :func:`attnflow.geometry.exp_map`;
* :class:`RKMK2` (order 2): Heun's tableau in the Lie algebra (Runge-Kutta-Munthe-Kaas); at order 2 the
  :math:`\mathrm{dexp}^{-1}` correction is O(h^3) and is omitted;
* :class:`RKMK4` (order 4): the classical RK4 tableau in the Lie algebra with
  :math:`\mathrm{dexp}^{-1}_u(k) = k - \tfrac12[u, k] + \tfrac1{12}[u, [u, k]]`, truncated after the terms
  order 4 needs.

The heads (a vector space) are advanced by the same Runge-Kutta tableau (Euler, Heun, RK4). These methods
need unit-norm tokens (the sphere geometry).
"""

from __future__ import annotations

import torch

from ..geometry import exp_map
from .base import Integrator

__all__ = ["LieEuler", "RKMK2", "RKMK4", "generator", "require_sphere", "rotate"]


def require_sphere(field, method: str) -> None:
    """Raise unless the field's geometry has unit-norm tokens (the Lie-group action lives on the sphere)."""
    if not field.geometry.unit_norm:
        raise ValueError(
            f"integrator {method!r} moves tokens by rotations of S^{{d-1}} and needs geometry 'sphere': "
            f"got geometry {field.geometry.name!r}; use integrator 'euler', 'heun' or 'rk4' in flat space"
        )


def generator(y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    r"""The skew matrix :math:`\xi = w y^\top - y w^\top` whose action maps ``y`` to ``w``.

    Parameters
    ----------
    y : Tensor, shape=[..., d]
        Unit vectors.
    w : Tensor, shape=[..., d]
        Tangent vectors at ``y``.

    Returns
    -------
    Tensor, shape=[..., d, d]
    """
    return w.unsqueeze(-1) * y.unsqueeze(-2) - y.unsqueeze(-1) * w.unsqueeze(-2)


def rotate(u: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``exp(u) x`` for skew ``u`` (shape [..., d, d]) and points ``x`` (shape [..., d]), renormalised."""
    # contiguous copies: batched matrix_exp/matmul refuse some broadcast (expanded) layouts
    y = torch.einsum("...ij,...j->...i", torch.linalg.matrix_exp(u.contiguous()), x.contiguous())
    return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)


def _bracket(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b - b @ a


def _dexpinv(u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    c = _bracket(u, k)
    return k - 0.5 * c + _bracket(u, c) / 12.0


class LieEuler(Integrator):
    """Lie-Euler (geodesic Euler) step: each token moves along its great circle (order 1)."""

    order = 1
    strong_order = 1.0  # additive weight noise: Euler-Maruyama increment
    name = "lie_euler"

    def drift_step(self, field, x, D, t, dt, first):
        require_sphere(field, self.name)
        x_new = exp_map(x, dt * field.token_rate(first))
        return x_new, D + dt * field.weight_rate(D, t)


class RKMK2(Integrator):
    """Runge-Kutta-Munthe-Kaas with Heun's tableau (order 2)."""

    order = 2
    strong_order = 1.0
    name = "rkmk2"

    def drift_step(self, field, x, D, t, dt, first):
        require_sphere(field, self.name)
        k1, F1 = generator(x, field.token_rate(first)), field.weight_rate(D, t)
        x2 = exp_map(x, dt * field.token_rate(first))  # = exp(dt k1) x
        D2 = D + dt * F1
        k2, F2 = generator(x2, field.token_rate(field(x2, D2, t + dt))), field.weight_rate(D2, t + dt)
        return rotate(0.5 * dt * (k1 + k2), x), D + 0.5 * dt * (F1 + F2)


class RKMK4(Integrator):
    """Runge-Kutta-Munthe-Kaas with the classical RK4 tableau (order 4)."""

    order = 4
    strong_order = 1.0
    name = "rkmk4"

    def drift_step(self, field, x, D, t, dt, first):
        require_sphere(field, self.name)
        h = 0.5 * dt
        k1, F1 = generator(x, field.token_rate(first)), field.weight_rate(D, t)

        def stage(u: torch.Tensor, Ds: torch.Tensor, ts: float) -> tuple[torch.Tensor, torch.Tensor]:
            y = rotate(u, x)
            k = _dexpinv(u, generator(y, field.token_rate(field(y, Ds, ts))))
            return k, field.weight_rate(Ds, ts)

        k2, F2 = stage(h * k1, D + h * F1, t + h)
        k3, F3 = stage(h * k2, D + h * F2, t + h)
        k4, F4 = stage(dt * k3, D + dt * F3, t + dt)
        x_new = rotate(dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4), x)
        return x_new, D + dt / 6.0 * (F1 + 2 * F2 + 2 * F3 + F4)
