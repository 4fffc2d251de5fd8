"""Numerics on the unit sphere S^{d-1} embedded in R^d.

The retraction ``project`` is the map Pi(y) = y / |y| of the paper's discrete scheme
(arXiv 2605.18870, Sec. 6), and ``tangent_projection`` is P_perp(x) v = v - <x, v> x
(the projection onto T_x S^{d-1}, Sec. 2, eq. (10)).
"""

from __future__ import annotations

import torch

#: Default tolerance on | |x_i| - 1 | used when validating user tokens.
SPHERE_TOL = 1e-6


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
    return y / norm


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
    return v - (x * v).sum(-1, keepdim=True) * x


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
