r"""Distances between a token cloud and a density of the PDE solver (:mod:`attnflow.pde`).

* :func:`wasserstein2_to_density`: exact :math:`W_2` (geodesic cost, radians) between the empirical
  measure of a cloud and the quadrature measure :math:`\sum_q w_q u_q^+ \delta_{y_q}` of a density on a
  grid finer than the solver's (:meth:`attnflow.pde.SpectralGrid.fine`): on S^1 by POT's exact circle
  solver ``ot.wasserstein_circle`` (binary search of Hundrieser, Klatt and Munk), on S^2 by the
  network simplex ``ot.emd2``. The quadrature measure is within about one node spacing of the density
  in :math:`W_2`; the callers choose the refinement so that this is far below the sampling error.
* :func:`smoothed_l2_distance`: the :math:`L^2` distance between the von Mises(-Fisher) smoothings
  (concentration :math:`\kappa`) of the cloud and of the density, computed exactly from the spectral
  coefficients by Parseval (a kernel mean discrepancy): :math:`\|K_\kappa * (\mu_n - u)\|_{L^2}^2
  = \sum_l \lambda_l(\kappa)^2 \sum_m |\hat\mu_{n,lm} - \hat u_{lm}|^2` (weights :math:`2\pi` on S^1,
  conjugate-symmetric modes counted twice). For i.i.d. samples its mean square is exactly
  :math:`c/n`, so its rate in ``n`` is :math:`n^{-1/2}`.
"""

from __future__ import annotations

import math

import numpy as np
import ot
import torch

from ..geometry.sphere import pairwise_geodesic_distance
from ..pde.grids import SpectralGrid
from ..pde.initial import density_from_particles, smoothing_factors

__all__ = ["smoothed_l2_distance", "wasserstein2_to_density"]


def _cloud(x, d: int) -> np.ndarray:
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError(
            f"the cloud must have shape (n, {d}) to match the density on S^{d - 1}: got {x.shape}"
        )
    return x


def wasserstein2_to_density(x, nodes: np.ndarray, weights: np.ndarray, values: np.ndarray) -> float:
    r"""Exact :math:`W_2` (radians) between the cloud ``x`` and the quadrature measure of a density.

    Parameters
    ----------
    x : array-like, shape=[n, d]
        Tokens on S^{d-1} (d = 2 or 3).
    nodes : ndarray, shape=[N, d]
        Quadrature nodes.
    weights : ndarray, shape=[N]
        Quadrature weights.
    values : ndarray, shape=[N]
        Density at the nodes; negative undershoots are set to 0 and the measure renormalised.

    Returns
    -------
    float
    """
    d = nodes.shape[1]
    x = _cloud(x, d)
    mass = weights * np.maximum(values, 0.0)
    if not mass.sum() > 0:
        raise ValueError("the density has no positive mass on the nodes")
    mass = mass / mass.sum()
    if d == 2:
        u = (np.arctan2(x[:, 1], x[:, 0]) / (2 * math.pi)) % 1.0
        v = (np.arctan2(nodes[:, 1], nodes[:, 0]) / (2 * math.pi)) % 1.0
        a = np.full(u.size, 1.0 / u.size)
        loss = ot.wasserstein_circle(u[:, None], v[:, None], a[:, None], mass[:, None], p=2, eps=1e-12)
        return float(math.sqrt(max(float(np.asarray(loss).ravel()[0]), 0.0)) * 2 * math.pi)
    if d != 3:
        raise ValueError(f"densities live on S^1 or S^2: got nodes in dimension {d}")
    C = pairwise_geodesic_distance(torch.from_numpy(x), torch.from_numpy(nodes)).numpy() ** 2
    a = np.full(x.shape[0], 1.0 / x.shape[0])
    loss = ot.emd2(a, mass, C, numItermax=max(100_000, 50 * C.size))
    return float(math.sqrt(max(loss, 0.0)))


def smoothed_l2_distance(x, grid: SpectralGrid, coef: np.ndarray, kappa: float) -> float:
    r""":math:`\|K_\kappa * (\mu_n - u)\|_{L^2}` from spectral coefficients (module docstring).

    Parameters
    ----------
    x : array-like, shape=[n, d]
    grid : SpectralGrid
        The density's grid (band limit L); degrees above L are dropped, so choose kappa with
        lambda_L(kappa) negligible (the returned value is then exact to that level).
    coef : ndarray
        The density's coefficients.
    kappa : float
        Smoothing concentration.
    """
    x = _cloud(x, grid.d)
    lam = smoothing_factors(kappa, grid.degree, grid.d)
    diff = density_from_particles(grid, x, kappa) - lam * np.asarray(coef)
    mult = np.where(grid.degree == 0, 1.0, 2.0)
    if grid.d == 3:  # healpy layout: m = 0 entries come first (the first L + 1); m > 0 counted twice
        mult = np.ones(grid.degree.size)
        mult[grid.L + 1 :] = 2.0
        return float(math.sqrt(np.sum(mult * np.abs(diff) ** 2)))
    return float(math.sqrt(2 * math.pi * np.sum(mult * np.abs(diff) ** 2)))
