"""Numerics on the unit sphere S^{d-1} embedded in R^d.

The retraction ``project`` is the map Pi(y) = y / |y| of the paper's discrete scheme
(arXiv 2605.18870, Sec. 6), and ``tangent_projection`` is P_perp(x) v = v - <x, v> x
(the projection onto T_x S^{d-1}, Sec. 2, eq. (10)).

The arithmetic of these maps, once the norms and inner products are summed, is written once:
:func:`retraction`, :func:`tangent_component` and :func:`geodesic_point` are plain arithmetic, valid on
tensors and on numbers inside numba. The maps below call them, and the compiled loops
(:mod:`attnflow.simulation.fused`, :mod:`attnflow.dynamics.numba_assembly`) compile these very functions
(issue 30: one definition of each formula, checked by ``tests/test_fused_loop.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from .base import Geometry

__all__ = [
    "SPHERE_TOL",
    "Sphere",
    "check_on_sphere",
    "exp_map",
    "geodesic_distance",
    "geodesic_point",
    "log_map",
    "pairwise_geodesic_distance",
    "project",
    "retraction",
    "tangent_component",
    "tangent_projection",
]

#: Default tolerance on | |x_i| - 1 | used when validating user tokens.
SPHERE_TOL = 1e-6


def retraction(y, norm):
    """Pi(y) = y / |y| (the retraction of the Sec. 6 scheme) from ``norm`` = |y| (or a floor of it)."""
    return y / norm


def tangent_component(v, dot, x):
    """P_perp(x) v = v - <x, v> x (eq. (10)) from ``dot`` = <x, v>."""
    return v - dot * x


def geodesic_point(x, direction, cos_norm, sin_norm):
    """cos|u| x + sin|u| u/|u|: the point exp_x(u) of the great circle through x along the unit tangent
    ``direction`` = u/|u| (before the final renormalisation of :func:`exp_map`)."""
    return cos_norm * x + sin_norm * direction


def project(y: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    r"""Retraction onto the sphere, :math:`\Pi(y) = y / \|y\|` (Sec. 6 scheme).

    Parameters
    ----------
    y : Tensor, shape=[..., d]
        Points of R^d, none of them zero.
    eps : float
        Optional floor on the norm (0 keeps the exact map; a zero vector then gives nan, which the
        simulation loop reports as a non-finite state).

    Returns
    -------
    Tensor, shape=[..., d]
        Unit vectors.

    Examples
    --------
    >>> project(torch.tensor([[3.0, 4.0]]))
    tensor([[0.6000, 0.8000]])
    """
    norm = torch.linalg.vector_norm(y, dim=-1, keepdim=True)
    if eps > 0:
        norm = norm.clamp_min(eps)
    return retraction(y, norm)


def tangent_projection(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    r"""Project ``v`` onto the tangent space at ``x``: :math:`P^\perp_x v = v - \langle x, v\rangle x`.

    Parameters
    ----------
    x : Tensor, shape=[..., d]
        Unit vectors (base points).
    v : Tensor, shape=[..., d]
        Ambient vectors, broadcastable against ``x``.

    Returns
    -------
    Tensor, shape=[..., d]
    """
    return tangent_component(v, (x * v).sum(-1, keepdim=True), x)


def geodesic_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""Great-circle distance :math:`d(x, y) = 2\,\operatorname{atan2}(\|x - y\|, \|x + y\|)`.

    Equal to :math:`\arccos\langle x, y\rangle` for unit vectors, but accurate for nearby and for
    antipodal points (``arccos`` loses half the digits near 0 and needs clipping); exactly 0 for
    ``x == y``.

    Parameters
    ----------
    x, y : Tensor, shape=[..., d]
        Unit vectors (broadcastable).

    Returns
    -------
    Tensor, shape=[...]
    """
    return 2.0 * torch.atan2(torch.linalg.vector_norm(x - y, dim=-1), torch.linalg.vector_norm(x + y, dim=-1))


def pairwise_geodesic_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""Great-circle distances between all pairs of points.

    :math:`d_{ij} = 2\,\operatorname{atan2}(\|x_i - y_j\|, \|x_i + y_j\|)`.

    The norms come from ``torch.cdist`` without the matrix-product shortcut, so identical points
    are exactly 0 apart and small angles keep their relative precision (see :func:`geodesic_distance`).

    Parameters
    ----------
    x : Tensor, shape=[..., n, d]
    y : Tensor, shape=[..., m, d]

    Returns
    -------
    Tensor, shape=[..., n, m]
        Distances in radians, in [0, pi].
    """
    minus = torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist")
    plus = torch.cdist(x, -y, compute_mode="donot_use_mm_for_euclid_dist")
    return 2.0 * torch.atan2(minus, plus)


def check_on_sphere(x: torch.Tensor, name: str = "x", tol: float = SPHERE_TOL) -> None:
    """Raise ``ValueError`` unless every row of ``x`` has unit norm within ``tol``.

    Parameters
    ----------
    x : Tensor, shape=[..., d]
    name : str
        Name used in the message.
    tol : float
        Allowed deviation of the norms from 1.
    """
    if not torch.isfinite(x.detach()).all():
        raise ValueError(
            f"{name} must be finite: found {int((~torch.isfinite(x)).sum())} non-finite entries; "
            "remove nan/inf values before simulating"
        )
    dev = float((torch.linalg.vector_norm(x.detach(), dim=-1) - 1.0).abs().max()) if x.numel() else 0.0
    if dev > tol:
        raise ValueError(
            f"{name} must lie on S^{{d-1}}: max | |x_i| - 1 | = {dev:.3g} > {tol:g}; "
            "normalise with attnflow.geometry.project(x)"
        )


def log_map(z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    r"""Riemannian log map of the sphere, :math:`\log_z(x) = \theta\, u/\|u\|`.

    Here :math:`u = x - \langle x, z\rangle z`.

    :math:`\theta = \operatorname{atan2}(\|u\|, \langle x, z\rangle)` is the geodesic distance (accurate
    for nearby points, unlike ``arccos``). At ``x = z`` and at the antipode (where the map is undefined)
    it returns 0.

    Parameters
    ----------
    z : Tensor, shape=[..., d]
        Base points (unit vectors).
    x : Tensor, shape=[..., d]
        Unit vectors, broadcastable against ``z``.

    Returns
    -------
    Tensor, shape=[..., d]
        Tangent vectors at ``z``.
    """
    inner = (x * z).sum(dim=-1, keepdim=True)
    tangent = x - inner * z
    sine = torch.linalg.vector_norm(tangent, dim=-1, keepdim=True)
    angle = torch.atan2(sine, inner)
    return angle * tangent / sine.clamp_min(torch.finfo(x.dtype).tiny)


def exp_map(z: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    r"""Riemannian exp map, :math:`\exp_z(u) = \cos\|u\|\, z + \sin\|u\|\, u/\|u\|`, renormalised.

    Parameters
    ----------
    z : Tensor, shape=[..., d]
        Base points (unit vectors).
    u : Tensor, shape=[..., d]
        Tangent vectors at ``z``.

    Returns
    -------
    Tensor, shape=[..., d]
        Unit vectors (the final renormalisation removes round-off drift off the sphere).

    Examples
    --------
    >>> z = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    >>> x = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
    >>> torch.allclose(exp_map(z, log_map(z, x)), x)
    True
    """
    norm = torch.linalg.vector_norm(u, dim=-1, keepdim=True)
    direction = u / norm.clamp_min(torch.finfo(u.dtype).tiny)
    moved = geodesic_point(z, direction, torch.cos(norm), torch.sin(norm))
    return retraction(moved, torch.linalg.vector_norm(moved, dim=-1, keepdim=True))


@dataclass(frozen=True)
class Sphere(Geometry):
    """The unit sphere S^{d-1} in R^d, the token space of arXiv 2605.18870 (Sec. 2).

    Tangent projection P_perp(x) = I - x x^T (eq. (10)), retraction Pi(y) = y/|y| (the Sec. 6 scheme),
    geodesic distance by atan2, log/exp maps, uniform law = normalised standard Gaussians.

    Examples
    --------
    >>> s = Sphere()
    >>> s.retract(torch.tensor([[3.0, 4.0]]))
    tensor([[0.6000, 0.8000]])
    """

    name: ClassVar[str] = "sphere"
    unit_norm: ClassVar[bool] = True

    def tangent(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return tangent_projection(x, v)

    def retract(self, y: torch.Tensor) -> torch.Tensor:
        return project(y)

    def check(self, x: torch.Tensor, name: str = "x", tol: float | None = None) -> None:
        check_on_sphere(x, name, tol=self.tolerance(x.dtype) if tol is None else tol)

    def distance(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return geodesic_distance(x, y)

    def pairwise_distance(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return pairwise_geodesic_distance(x, y)

    def log(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return log_map(x, y)

    def exp(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return exp_map(x, v)

    def uniform(self, shape, d, generator, dtype):
        return project(torch.randn((*shape, d), generator=generator, dtype=dtype, device=generator.device))
