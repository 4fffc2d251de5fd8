r"""Spectral grids for a density on S^1 (Fourier) and S^2 (spherical harmonics through ducc0).

A density is held by its coefficients up to the band limit ``L``: on S^1 the complex Fourier
coefficients :math:`c_k`, :math:`k = 0..L`, of :math:`u(\theta) = \sum_{|k|\le L} c_k e^{ik\theta}`
(:math:`c_{-k} = \bar c_k`); on S^2 the orthonormal spherical-harmonic coefficients :math:`a_{lm}`,
:math:`0 \le m \le l \le L`, in ducc0's (healpy) layout. Nonlinear terms are formed on a quadrature
grid that is exact for products of two band-``L`` functions tested against band ``L``
(the 3/2 rule, which removes aliasing from quadratic terms):

* S^1: ``N = 3L + 1`` equispaced angles, weights :math:`2\pi/N`;
* S^2: Gauss-Legendre rings, ``nt = ceil((3L+1)/2) + 1`` colatitudes times ``nphi = 2 nt`` longitudes
  (exact for degree :math:`2\,nt - 1 \ge 3L` in :math:`\cos\theta` and Fourier modes below ``nphi``).

The divergence of a tangent flux is spectral: :math:`ik\,\hat F_\theta(k)` on S^1; on S^2 the spin-1
analysis of :math:`(F_\theta, F_\phi)` gives the gradient ("E") coefficients :math:`E_{lm}`, and
:math:`\widehat{\nabla\cdot F}_{lm} = -\sqrt{l(l+1)}\,E_{lm}` (for :math:`F = \nabla f`,
:math:`E_{lm} = \sqrt{l(l+1)}f_{lm}` and :math:`\Delta f = -l(l+1) f`; checked in the tests).

torch-harmonics (the other maintained SHT library) cannot be installed next to the torch this package
pins (its release needs torch 2.14), so ducc0 is the library used; ``docs/pde.md`` records its measured
accuracy and speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["CircleGrid", "SphereGrid", "SpectralGrid", "make_grid"]


def _check_L(L) -> int:
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 1:
        raise ValueError(f"band limit L must be an integer >= 1: got {L!r}")
    return int(L)


@dataclass(frozen=True)
class SpectralGrid:
    """Common data of a spectral grid: band limit, quadrature points and weights, degrees.

    Attributes
    ----------
    L : int
        Band limit (largest degree kept).
    d : int
        Ambient dimension (2: S^1, 3: S^2).
    points : ndarray, shape=[N, d]
        Quadrature nodes on the sphere.
    weights : ndarray, shape=[N]
        Quadrature weights (sum: the sphere's area, 2 pi or 4 pi).
    degree : ndarray, shape=[n_coef]
        Degree of each stored coefficient (|k| on S^1, l on S^2).
    """

    L: int
    d: int = field(init=False)
    points: np.ndarray = field(init=False, repr=False)
    weights: np.ndarray = field(init=False, repr=False)
    degree: np.ndarray = field(init=False, repr=False)

    @property
    def area(self) -> float:
        """|S^{d-1}|: 2 pi or 4 pi."""
        return 2 * math.pi if self.d == 2 else 4 * math.pi

    @property
    def laplacian(self) -> np.ndarray:
        """Eigenvalues of the Laplace-Beltrami operator per coefficient: -k^2 or -l(l+1)."""
        k = self.degree.astype(np.float64)
        return -(k**2) if self.d == 2 else -k * (k + 1)

    def integrate(self, values: np.ndarray) -> float:
        """Quadrature of grid values (exact for band <= 3L)."""
        return float(np.dot(self.weights, values))


@dataclass(frozen=True)
class CircleGrid(SpectralGrid):
    """Fourier grid on S^1 (module docstring).

    Examples
    --------
    >>> g = CircleGrid(4)
    >>> g.points.shape
    (13, 2)
    """

    def __post_init__(self):
        L = _check_L(self.L)
        N = 3 * L + 1
        theta = 2 * math.pi * np.arange(N) / N
        object.__setattr__(self, "d", 2)
        object.__setattr__(self, "theta", theta)
        object.__setattr__(self, "points", np.stack([np.cos(theta), np.sin(theta)], axis=1))
        object.__setattr__(self, "weights", np.full(N, 2 * math.pi / N))
        object.__setattr__(self, "degree", np.arange(L + 1))

    @property
    def n_points(self) -> int:
        return 3 * self.L + 1

    def analysis(self, values: np.ndarray) -> np.ndarray:
        """Coefficients c_k, k = 0..L, of grid values of shape [N] (band above L discarded)."""
        return np.fft.rfft(values)[: self.L + 1] / self.n_points

    def synthesis(self, coef: np.ndarray, n: int | None = None) -> np.ndarray:
        """Values on the grid (or on ``n`` equispaced angles 2 pi j / n, n > 2L) of shape [N]."""
        n = self.n_points if n is None else int(n)
        full = np.zeros(n // 2 + 1, dtype=np.complex128)
        full[: self.L + 1] = coef
        return np.fft.irfft(full * n, n=n)

    def tangent_basis(self, x: np.ndarray) -> np.ndarray:
        """e_theta = (-sin, cos) at points x of shape [N, 2]."""
        return np.stack([-x[:, 1], x[:, 0]], axis=1)

    def divergence(self, flux: np.ndarray) -> np.ndarray:
        """Coefficients of div F for a tangent flux F on the grid, shape [N, 2] (dealiased to L)."""
        ft = np.einsum("nd,nd->n", flux, self.tangent_basis(self.points))
        return 1j * self.degree * self.analysis(ft)

    def gradient(self, coef: np.ndarray) -> np.ndarray:
        """Tangent gradient of the band-limited function, on the grid, shape [N, 2]."""
        dtheta = self.synthesis(1j * self.degree * coef)
        return dtheta[:, None] * self.tangent_basis(self.points)

    def mass(self, coef: np.ndarray) -> float:
        """Integral of the function over S^1: 2 pi Re c_0."""
        return float(2 * math.pi * coef[0].real)

    def evaluate(self, coef: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values at arbitrary points x of shape [M, 2] (direct sum, O(M L))."""
        th = np.arctan2(x[:, 1], x[:, 0])
        k = np.arange(1, self.L + 1)
        return coef[0].real + 2 * (np.exp(1j * np.outer(th, k)) @ coef[1:]).real

    def fine(self, coef: np.ndarray, factor: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(points, weights, values) on an equispaced grid ``factor`` times finer than N."""
        n = factor * self.n_points
        th = 2 * math.pi * np.arange(n) / n
        pts = np.stack([np.cos(th), np.sin(th)], axis=1)
        return pts, np.full(n, 2 * math.pi / n), self.synthesis(coef, n)


def _gl_colatitudes(nt: int) -> np.ndarray:
    # ducc0's GL rings run from the north pole: cos(theta) = -(Gauss-Legendre nodes in ascending order)
    return np.arccos(-np.polynomial.legendre.leggauss(nt)[0])


@dataclass(frozen=True)
class SphereGrid(SpectralGrid):
    """Spherical-harmonic grid on S^2 through ducc0 (Gauss-Legendre rings; module docstring).

    Examples
    --------
    >>> g = SphereGrid(4)
    >>> g.nt, g.nphi, g.points.shape
    (8, 16, (128, 3))
    """

    def __post_init__(self):
        L = _check_L(self.L)
        nt = math.ceil((3 * L + 1) / 2) + 1
        object.__setattr__(self, "d", 3)
        self._set_rings(nt)
        deg = np.concatenate([np.arange(m, L + 1) for m in range(L + 1)])
        object.__setattr__(self, "degree", deg)

    def _set_rings(self, nt: int) -> None:
        import ducc0

        nphi = 2 * nt
        th = _gl_colatitudes(nt)
        ph = 2 * math.pi * np.arange(nphi) / nphi
        T, P = np.meshgrid(th, ph, indexing="ij")
        pts = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), np.cos(T)], axis=-1).reshape(-1, 3)
        w = np.repeat(ducc0.sht.get_gridweights("GL", nt) / nphi, nphi)
        basis_t = np.stack([np.cos(T) * np.cos(P), np.cos(T) * np.sin(P), -np.sin(T)], axis=-1).reshape(-1, 3)
        basis_p = np.stack([-np.sin(P), np.cos(P), np.zeros_like(P)], axis=-1).reshape(-1, 3)
        for name, val in (("nt", nt), ("nphi", nphi), ("points", pts), ("weights", w)):
            object.__setattr__(self, name, val)
        object.__setattr__(self, "_basis", (basis_t, basis_p))

    def _sht(self):
        import ducc0

        return ducc0.sht

    def analysis(self, values: np.ndarray) -> np.ndarray:
        """Coefficients a_lm, l <= L, of grid values of shape [N] (exact for band <= 2 nt - 1 - L)."""
        m = np.ascontiguousarray(values.reshape(1, self.nt, self.nphi))
        return self._sht().analysis_2d(map=m, spin=0, lmax=self.L, geometry="GL")[0]

    def synthesis(self, coef: np.ndarray, nt: int | None = None) -> np.ndarray:
        """Values on the grid (or on a GL grid of ``nt`` rings and 2 nt longitudes), shape [N]."""
        nt = self.nt if nt is None else int(nt)
        out = self._sht().synthesis_2d(
            alm=coef[None], spin=0, lmax=self.L, geometry="GL", ntheta=nt, nphi=2 * nt
        )
        return out.reshape(-1)

    def divergence(self, flux: np.ndarray) -> np.ndarray:
        """Coefficients of div F for a tangent flux F on the grid, shape [N, 3] (dealiased to L)."""
        bt, bp = self._basis
        return self.divergence_components(
            np.stack([np.einsum("nd,nd->n", flux, bt), np.einsum("nd,nd->n", flux, bp)])
        )

    def divergence_components(self, comp: np.ndarray) -> np.ndarray:
        """:meth:`divergence` of a flux given by its components on (e_theta, e_phi), shape [2, N]."""
        eb = self._sht().analysis_2d(
            map=np.ascontiguousarray(comp.reshape(2, self.nt, self.nphi)), spin=1, lmax=self.L, geometry="GL"
        )
        ell = self.degree.astype(np.float64)
        return -np.sqrt(ell * (ell + 1)) * eb[0]

    def gradient(self, coef: np.ndarray) -> np.ndarray:
        """Tangent gradient of the band-limited function on the grid, Cartesian, shape [N, 3]."""
        g = (
            self._sht()
            .synthesis_2d_deriv1(alm=coef[None], lmax=self.L, geometry="GL", ntheta=self.nt, nphi=self.nphi)
            .reshape(2, -1)
        )
        bt, bp = self._basis
        return g[0][:, None] * bt + g[1][:, None] * bp

    def mass(self, coef: np.ndarray) -> float:
        """Integral of the function over S^2: sqrt(4 pi) Re a_00."""
        return float(math.sqrt(4 * math.pi) * coef[0].real)

    def evaluate(self, coef: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values at arbitrary points x of shape [M, 3] (ducc0 ``synthesis_general``, accuracy 1e-13)."""
        loc = np.stack(
            [np.arccos(np.clip(x[:, 2], -1, 1)), np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * math.pi)], 1
        )
        return self._sht().synthesis_general(
            alm=coef[None], spin=0, lmax=self.L, loc=np.ascontiguousarray(loc), epsilon=1e-13
        )[0]

    def fine(self, coef: np.ndarray, factor: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(points, weights, values) on a GL grid with ``factor`` times as many rings."""
        fg = object.__new__(SphereGrid)
        object.__setattr__(fg, "L", self.L)
        fg._set_rings(factor * self.nt)
        return fg.points, fg.weights, self.synthesis(coef, factor * self.nt)


def make_grid(d: int, L: int) -> SpectralGrid:
    """The spectral grid of S^{d-1} (d = 2: :class:`CircleGrid`, d = 3: :class:`SphereGrid`)."""
    if d == 2:
        return CircleGrid(L)
    if d == 3:
        return SphereGrid(L)
    raise ValueError(
        f"the PDE solver runs on S^1 (d = 2) and S^2 (d = 3): got d = {d}; use particles "
        "(attnflow.simulate) in higher dimensions"
    )
