r"""The token noise of a step: the geodesic random walk of the entropic regularisation (NOTES.md §10).

With ``token_noise = eps > 0`` the tokens carry Brownian motion of generator :math:`\varepsilon\Delta` on
the sphere (the McKean-Vlasov equation of the mean-field PDE (81) with entropy), taken after the drift by
one geodesic random-walk step per time step (Lie-Trotter splitting, weak order 1):

.. math:: x \leftarrow \exp_x\!\big(\sqrt{2\varepsilon\,dt}\;P(x)\,z\big), \qquad z \sim N(0, I_d).

:func:`brownian_scale` is the factor :math:`\sqrt{2\varepsilon\,dt}` (plain arithmetic, valid in Python and
inside numba: the compiled loop of :mod:`attnflow.simulation.fused` compiles this very function, its one
definition); :func:`geodesic_random_walk` is the step on any geometry, with the geometry's tangent
projection and exp map (on the sphere :func:`attnflow.geometry.sphere.tangent_projection` and
:func:`~attnflow.geometry.sphere.exp_map`, whose arithmetic the compiled loop compiles too).
"""

from __future__ import annotations

import math

import torch

from ..geometry import Geometry

__all__ = ["brownian_scale", "geodesic_random_walk"]


def brownian_scale(eps, dt):
    """sqrt(2 eps dt): the standard deviation of one step of the Brownian motion of generator eps Delta
    (NOTES.md §10)."""
    return math.sqrt(2.0 * eps * dt)


def geodesic_random_walk(geometry: Geometry, x: torch.Tensor, z: torch.Tensor, eps: float, dt: float):
    """One geodesic random-walk step exp_x(sqrt(2 eps dt) P(x) z) of every token.

    Parameters
    ----------
    geometry : Geometry
    x : Tensor, shape=[P, n, d]
        Tokens after the drift of the step.
    z : Tensor, shape=[P, n, d]
        Standard normal draws.
    eps : float
        Token noise intensity (> 0).
    dt : float

    Returns
    -------
    Tensor, shape=[P, n, d]
    """
    return geometry.exp(x, geometry.tangent(x, brownian_scale(eps, dt) * z))
