r"""Initial densities for the PDE solver and exact sampling of particles from a band-limited density.

* :func:`density_from_particles`: kernel smoothing of an empirical measure by the von Mises(-Fisher)
  kernel of concentration :math:`\kappa` (angular bandwidth :math:`h = \kappa^{-1/2}`), done exactly in
  coefficient space. By Funk-Hecke the kernel acts on degree ``l`` as the factor
  :math:`\lambda_l(\kappa) = I_l(\kappa)/I_0(\kappa)` on S^1 and :math:`i_l(\kappa)/i_0(\kappa)` on S^2
  (modified (spherical) Bessel functions, DLMF 10.35.2 and 10.60), so the smoothed density's
  coefficients are :math:`\lambda_l` times the empirical ones (S^1: :math:`\frac{1}{2\pi n}\sum_j
  e^{-ik\theta_j}`; S^2: :math:`\frac1n\sum_j \overline{Y_{lm}(x_j)}`, ducc0's adjoint synthesis).
* :func:`von_mises_fisher_mixture`: the same smoothing of weighted centres: a mixture of von Mises-Fisher
  densities truncated at the band limit (its coefficients beyond ``L`` are dropped, ``truncation_error``
  bounds what is lost).
* :func:`density_from_function`: a formula evaluated on the grid and projected on band ``L``.
* :func:`sample_density`: ``n`` i.i.d. points from a band-limited density by rejection against its
  maximum (proposal uniform on the sphere, acceptance :math:`\max(u, 0)/(1.05\,\max u)`): exact for the
  truncated density when it is nonnegative.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import ive

from ..random import path_seed
from .grids import CircleGrid, SpectralGrid

__all__ = [
    "density_from_function",
    "density_from_particles",
    "sample_density",
    "smoothing_factors",
    "von_mises_fisher_mixture",
]

KAPPA_MAX = 1e4


def smoothing_factors(kappa: float, degree: np.ndarray, d: int) -> np.ndarray:
    r"""Funk-Hecke factors :math:`\lambda_l(\kappa)` of the von Mises(-Fisher) kernel for each degree."""
    if isinstance(kappa, bool) or not isinstance(kappa, (int, float)) or not 0 < kappa <= KAPPA_MAX:
        raise ValueError(
            f"kappa (the smoothing concentration, bandwidth 1/sqrt(kappa)) must lie in (0, {KAPPA_MAX:g}]: "
            f"got {kappa!r}; e.g. kappa = 50 (bandwidth 0.14 rad)"
        )
    deg = np.asarray(degree, dtype=np.float64)
    if d == 2:
        return ive(deg, kappa) / ive(0, kappa)
    return ive(deg + 0.5, kappa) / ive(0.5, kappa)


def _points(x, d: int) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError(f"particles must have shape (n, {d}): got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("particles must be finite: found non-finite entries")
    dev = np.abs(np.linalg.norm(x, axis=1) - 1).max()
    if dev > 1e-6:
        raise ValueError(
            f"particles must lie on S^{d - 1}: max |abs(x_i) - 1| = {dev:.3g} > 1e-6; normalise with "
            "attnflow.geometry.sphere.project(x)"
        )
    return x


def _empirical(grid: SpectralGrid, x: np.ndarray, mass: np.ndarray) -> np.ndarray:
    """Coefficients of the measure sum_j mass_j delta_{x_j}, band-limited to L."""
    if isinstance(grid, CircleGrid):
        th = np.arctan2(x[:, 1], x[:, 0])
        k = np.arange(grid.L + 1)
        return (np.exp(-1j * np.outer(k, th)) @ mass) / (2 * math.pi)
    import ducc0

    loc = np.stack([np.arccos(np.clip(x[:, 2], -1, 1)), np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * math.pi)], 1)
    return ducc0.sht.adjoint_synthesis_general(
        map=mass[None].astype(np.float64), spin=0, lmax=grid.L, loc=np.ascontiguousarray(loc), epsilon=1e-13
    )[0]


def density_from_particles(grid: SpectralGrid, x, kappa: float) -> np.ndarray:
    """Coefficients of the von Mises(-Fisher) smoothing of the empirical measure of ``x``.

    Parameters
    ----------
    grid : SpectralGrid
    x : array-like, shape=[n, d]
        Points on the sphere.
    kappa : float
        Concentration of the smoothing kernel (angular bandwidth 1/sqrt(kappa)).

    Returns
    -------
    ndarray
        Coefficients (mass 1).
    """
    x = _points(x, grid.d)
    lam = smoothing_factors(kappa, grid.degree, grid.d)
    return lam * _empirical(grid, x, np.full(x.shape[0], 1.0 / x.shape[0]))


def von_mises_fisher_mixture(grid: SpectralGrid, centres, kappa: float, weights=None) -> np.ndarray:
    """Coefficients of a mixture of von Mises(-Fisher) densities (truncated at the band limit).

    Parameters
    ----------
    centres : array-like, shape=[c, d]
    kappa : float
    weights : array-like or None, shape=[c]
        Mixture weights (nonnegative, summing to 1); default equal.
    """
    c = _points(centres, grid.d)
    wts = np.full(c.shape[0], 1.0 / c.shape[0]) if weights is None else np.asarray(weights, np.float64)
    if wts.shape != (c.shape[0],) or (wts < 0).any() or abs(wts.sum() - 1) > 1e-12:
        raise ValueError(f"weights must be {c.shape[0]} nonnegative numbers summing to 1: got {weights!r}")
    lam = smoothing_factors(kappa, grid.degree, grid.d)
    return lam * _empirical(grid, c, wts)


def density_from_function(grid: SpectralGrid, f: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Coefficients of ``f`` (a function of points [N, d]) projected on band L, normalised to mass 1."""
    vals = np.asarray(f(grid.points), dtype=np.float64)
    if vals.shape != (grid.points.shape[0],) or not np.isfinite(vals).all():
        raise ValueError(
            f"the density formula must return finite values of shape ({grid.points.shape[0]},) on the grid: "
            f"got shape {vals.shape}"
        )
    coef = grid.analysis(vals)
    mass = grid.mass(coef)
    if not mass > 0:
        raise ValueError(f"the density formula has mass {mass:.3g} <= 0: give a nonnegative density")
    return coef / mass


def sample_density(grid: SpectralGrid, coef: np.ndarray, n: int, *, seed: int) -> np.ndarray:
    """``n`` i.i.d. points from the band-limited density ``coef`` (rejection sampling, module docstring).

    Returns
    -------
    ndarray, shape=[n, d]
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1: got {n!r}")
    rng = np.random.default_rng(path_seed(seed, 0, "tokens"))
    _, _, fine = grid.fine(coef, 4)
    bound = 1.05 * fine.max()
    if not bound > 0:
        raise ValueError("the density has no positive values: nothing to sample")
    out, filled = np.empty((n, grid.d)), 0
    while filled < n:
        m = int(1.2 * (n - filled) * bound * grid.area) + 16
        y = rng.standard_normal((m, grid.d))
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        ok = rng.random(m) * bound < np.maximum(grid.evaluate(coef, y), 0.0)
        acc = y[ok][: n - filled]
        out[filled : filled + acc.shape[0]] = acc
        filled += acc.shape[0]
    return out
