r"""The kernel sums of the density solver as matrices on spherical-harmonic coefficients (constant heads).

For heads constant in time the kernel integrals of :mod:`attnflow.pde.field` are linear maps of the
density, fixed once and for all:

.. math:: m_h(x) = \int_{S^2} e^{\beta\langle x, D_h y\rangle}\,u(y)\,dy .

Everything else the field needs follows from :math:`m_h` and its surface gradient, since
:math:`\nabla_x e^{\beta\langle x, D y\rangle} = \beta D y\,e^{\beta\langle x, D y\rangle}`:
:math:`P^\perp(x)\int e^{s_h} D_h y\,u\,dy = \nabla_S m_h(x)/\beta`, hence (eq. (81) and the module
docstring of :mod:`attnflow.pde.field`)

.. math::
    v = \frac{s}{\beta H}\sum_h \frac{\nabla_S m_h}{m_h}\ \text{(softmax)}, \quad
    v = \frac{s}{\beta H}\sum_h \nabla_S m_h\ \text{(USA)}, \quad
    \varphi = \frac{1}{2\beta H}\sum_h (m_h + m_h^\top), \quad
    E = \frac{1}{2\beta H}\sum_h \int m_h u,

with :math:`m_h^\top` the same integral with :math:`D_h^\top` (:math:`= m_h` for a symmetric head) and
:math:`\nabla\varphi` the surface gradient of :math:`\varphi`.

Here :math:`u \mapsto m_h` is a real matrix from the :math:`(L+1)^2` real coordinates of the density's
coefficients (band ``L``) to those of :math:`m_h` truncated at the output band ``L'``
(:class:`KernelOperator`), computed once by quadrature: :math:`T_h = \mathcal A_{L'}\,K_h\,W\,\mathcal S_L`
(synthesis of each basis function on the solver's grid, the kernel matrix times the quadrature weights
-- the same quadrature as the compiled sums of :mod:`attnflow.pde.quadsums` -- and the analysis of each
column on a Gauss-Legendre grid fine enough that its aliasing is far below the truncation), stored as its
two parity blocks (:class:`_ParityBlocks`). A stage of the solver is then one matrix-vector product per
parity for all heads and two syntheses (values and gradient) per head.

Truncation. The output is not band-limited: :math:`e^{\beta\langle x, b\rangle}` (:math:`b = Dy`,
:math:`|b| \le r = \beta|D|_{op}`) has degree-``l`` weights :math:`(2l+1)e^{-r}i_l(|b|)`, so cutting
:math:`m_h` at ``L'`` changes every row sum of a positive density by at most the relative
:math:`e^{2r}T_{L'}(r)` of the band-limit rule (:mod:`attnflow.pde.band`). The output band is therefore
``L' = max(L, minimum_band_limit(r, 3, coef_tol))`` with the declared :data:`COEF_TOL`; the measured
difference from the compiled quadrature as a function of ``L'`` is in ``docs/performance.md`` (10.3).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .band import kernel_radius, minimum_band_limit
from .field import DensityField
from .grids import SphereGrid

__all__ = ["COEF_MAX_BYTES", "COEF_TOL", "KernelOperator", "coefficient_band"]

#: relative error of a kernel row sum allowed by the truncation of m_h at the output band L'
#: (the band-limit rule of attnflow.pde.band applied to the output; docs/performance.md 10.3)
COEF_TOL = 1e-14
#: ``quadrature="auto"`` uses the coefficient matrices only when they and their build fit in this many bytes
#: (:func:`estimated_bytes`: up to L = 48 for two symmetric heads)
COEF_MAX_BYTES = 512 * 2**20
_ROWS = 512  # output nodes per block of the kernel matrix while building (bounds memory to ~_ROWS N doubles)


@lru_cache(maxsize=16)
def _complex_orders(L: int) -> np.ndarray:
    """Indices of the coefficients with order m > 0 in ducc0's (healpy) layout (m-major, l = m..L)."""
    return np.flatnonzero(np.concatenate([np.full(L + 1 - m, m) for m in range(L + 1)]) > 0)


@lru_cache(maxsize=16)
def _parity_index(L: int) -> tuple[np.ndarray, np.ndarray]:
    """Real coordinates (:func:`to_real`) of even and of odd degree l."""
    deg = np.concatenate([np.arange(m, L + 1) for m in range(L + 1)])
    deg = np.concatenate([deg, deg[_complex_orders(L)]])
    return np.flatnonzero(deg % 2 == 0), np.flatnonzero(deg % 2 == 1)


class _ParityBlocks:
    """Matrices in real coordinates stored as their two parity blocks (even l -> even l', odd -> odd).

    The kernel is even under (x, y) -> (-x, -y) and Y_lm(-x) = (-1)^l Y_lm(x), so m_h(-x) = int k(x, y)
    u(-y) dy: the even part of u gives the even part of m_h, the odd the odd; the blocks hold half the
    entries of the full matrices (half the memory read per product). The entries between parities are zero
    up to round-off; the largest, relative to the largest entry, is kept in ``leak``.
    """

    def __init__(self, mats: list[np.ndarray], L: int, Lp: int):
        self.K, self.n_out = len(mats), (Lp + 1) ** 2
        self.inp, self.out = _parity_index(L), _parity_index(Lp)
        full = np.stack(mats)
        scale = np.abs(full).max()
        mask = np.ones(full.shape[1:], dtype=bool)
        self.blocks = []
        for i, o in zip(self.inp, self.out, strict=True):
            mask[np.ix_(o, i)] = False
            self.blocks.append(np.ascontiguousarray(full[:, o][:, :, i].reshape(-1, i.size)))
        self.leak = float(np.abs(full[:, mask]).max() / scale) if mask.any() else 0.0

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.blocks)

    def __call__(self, a: np.ndarray) -> np.ndarray:
        """The K products with the real coordinates ``a``, shape [K, (L'+1)^2]."""
        out = np.empty((self.K, self.n_out))
        for B, i, o in zip(self.blocks, self.inp, self.out, strict=True):
            out[:, o] = (B @ a[i]).reshape(self.K, -1)
        return out


def to_real(coef: np.ndarray, L: int) -> np.ndarray:
    """The (L+1)^2 real coordinates of a real function's coefficients: Re a_lm (all), Im a_lm (m > 0)."""
    return np.concatenate([coef.real, coef.imag[_complex_orders(L)]])


def from_real(vec: np.ndarray, L: int) -> np.ndarray:
    """Inverse of :func:`to_real` (``vec`` may stack several: shape [..., (L+1)^2])."""
    nc = (L + 1) * (L + 2) // 2
    out = vec[..., :nc].astype(np.complex128)
    out[..., _complex_orders(L)] += 1j * vec[..., nc:]
    return out


def coefficient_band(L: int, heads: np.ndarray, beta: float, tol: float = COEF_TOL) -> int:
    """The output band ``L' = max(L, minimum_band_limit(beta |D|, 3, tol))`` (module docstring)."""
    return max(int(L), minimum_band_limit(kernel_radius(heads, beta), 3, tol))


def _gl_grid(L: int, nt: int) -> SphereGrid:
    g = object.__new__(SphereGrid)
    object.__setattr__(g, "L", L)
    g._set_rings(nt)
    return g


class KernelOperator:
    """The maps u -> m_h of the module docstring for constant heads on the grid of a density solver.

    Parameters
    ----------
    grid : SphereGrid
        The solver's grid (band limit L of the density, its quadrature nodes and weights).
    heads : ndarray, shape=[H, 3, 3]
        The effective heads (constant in time).
    beta : float
    out_band : int or None
        Output band L' of m_h (>= 1); None: :func:`coefficient_band` with :data:`COEF_TOL`.

    Attributes
    ----------
    out_band : int
    heads_map : _ParityBlocks
        The real matrices of u -> m_h (H of them, shape [(L'+1)^2, (L+1)^2]) as parity blocks.
    phi_map : _ParityBlocks or None
        u -> phi (only when a head is not symmetric; otherwise phi comes from the m_h).
    """

    def __init__(self, grid: SphereGrid, heads: np.ndarray, beta: float, out_band: int | None = None):
        if not isinstance(grid, SphereGrid):
            raise ValueError(
                f"the coefficient quadrature runs on S^2 (SphereGrid): got {type(grid).__name__}; use "
                "quadrature='numba' on S^1"
            )
        heads = np.asarray(heads, dtype=np.float64)
        if heads.ndim != 3 or heads.shape[1:] != (3, 3):
            raise ValueError(f"heads must have shape (H, 3, 3): got {heads.shape}")
        Lp = coefficient_band(grid.L, heads, beta) if out_band is None else out_band
        if isinstance(Lp, bool) or not isinstance(Lp, (int, np.integer)) or Lp < 1:
            raise ValueError(f"out_band must be an integer >= 1: got {Lp!r}")
        Lp = int(Lp)  # any L' >= 1: the syntheses evaluate band L' on any grid (no aliasing in a synthesis)
        self.grid, self.heads, self.beta, self.out_band = grid, heads.copy(), float(beta), Lp
        self.H = heads.shape[0]
        self.symmetric = all(np.array_equal(D, D.T) for D in heads)
        L = grid.L
        # the input side: every real basis function of band L on the solver's grid, times the weights
        n_in = (L + 1) ** 2
        WS = np.empty((grid.points.shape[0], n_in))
        for j in range(n_in):
            e = np.zeros(n_in)
            e[j] = 1.0
            WS[:, j] = grid.weights * grid.synthesis(from_real(e, L))
        # the output side: a GL grid exact for band L' + (L' + 7) (aliasing from degrees > L' + 7 only)
        out = _gl_grid(Lp, Lp + 4)
        mats = [self._matrix(out, D, WS) for D in heads]
        self.heads_map = _ParityBlocks(mats, L, Lp)
        self.phi_map = None
        if not self.symmetric:
            phi = sum(mats[h] + self._matrix(out, heads[h].T, WS) for h in range(self.H))
            self.phi_map = _ParityBlocks([phi / (2 * self.beta * self.H)], L, Lp)

    @property
    def nbytes(self) -> int:
        return self.heads_map.nbytes + (0 if self.phi_map is None else self.phi_map.nbytes)

    def _matrix(self, out: SphereGrid, A: np.ndarray, WS: np.ndarray) -> np.ndarray:
        x, y = out.points, self.grid.points
        B = np.empty((x.shape[0], WS.shape[1]))
        By = self.beta * (y @ A.T)  # row q: beta A y_q
        for i in range(0, x.shape[0], _ROWS):
            B[i : i + _ROWS] = np.exp(x[i : i + _ROWS] @ By.T) @ WS
        import ducc0

        Lp = self.out_band
        T = np.empty(((Lp + 1) ** 2, WS.shape[1]))
        maps = np.ascontiguousarray(B.T.reshape(WS.shape[1], 1, out.nt, out.nphi))
        for j in range(WS.shape[1]):
            a = ducc0.sht.analysis_2d(map=maps[j], spin=0, lmax=Lp, geometry="GL")[0]
            T[:, j] = to_real(a, Lp)
        return T

    def _values(self, vec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, Cartesian surface gradient) on the solver's grid of real coordinates at band L'."""
        return self._synth(from_real(vec, self.out_band))  # gradient on (e_theta, e_phi)

    def _synth(self, alm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values [N], surface gradient on (e_theta, e_phi) [2, N]) of band-L' coefficients."""
        import ducc0

        g, Lp = self.grid, self.out_band
        a = alm[None]
        val = ducc0.sht.synthesis_2d(alm=a, spin=0, lmax=Lp, geometry="GL", ntheta=g.nt, nphi=g.nphi)
        d = ducc0.sht.synthesis_2d_deriv1(alm=a, lmax=Lp, geometry="GL", ntheta=g.nt, nphi=g.nphi)
        return val.reshape(-1), d.reshape(2, -1)

    def _cartesian(self, comp: np.ndarray) -> np.ndarray:
        bt, bp = self.grid._basis
        return comp[0][:, None] * bt + comp[1][:, None] * bp

    def field(self, u_coef: np.ndarray, u: np.ndarray, *, attention: str, sign: float) -> DensityField:
        """The :class:`~attnflow.pde.field.DensityField` of the density with coefficients ``u_coef`` (grid
        values ``u``), constant heads (no heads' term: ``heads_rate = 0``)."""
        g, H, beta = self.grid, self.H, self.beta
        a = to_real(u_coef, g.L)
        wu = g.weights * u
        # velocity and grad phi on (e_theta, e_phi), shape [2, N]: one conversion to Cartesian at the end
        vel = np.zeros((2, g.points.shape[0]))
        phi = np.zeros(g.points.shape[0])
        gphi = np.zeros_like(vel)
        energy = 0.0
        alm = from_real(self.heads_map(a), self.out_band)
        for h in range(H):
            m, gm = self._synth(alm[h])
            vel += gm / m if attention == "softmax" else gm
            energy += float(np.dot(wu, m))
            if self.symmetric:
                phi += m
                gphi += gm
        vel *= sign / (beta * H)
        if self.symmetric:
            phi /= beta * H
            gphi /= beta * H
        else:
            phi, gphi = self._values(self.phi_map(a)[0])
        return DensityField(
            velocity=self._cartesian(vel),
            grad_phi=self._cartesian(gphi),
            phi=phi,
            energy=energy / (2 * beta * H),
            token_rate=float(np.dot(wu, (gphi * vel).sum(axis=0))),
            heads_rate=0.0,
            tangent=vel,
        )


def estimated_bytes(grid: SphereGrid, out_band: int, H: int, symmetric: bool) -> int:
    """Peak bytes of a :class:`KernelOperator` (before building it): its matrices, and while building the
    weighted basis functions on the grid (N x (L+1)^2), the kernel sums on the output grid
    ((L'+4) (2L'+8) x (L+1)^2) and one block of the kernel matrix."""
    n_in, n_out = (grid.L + 1) ** 2, (out_band + 1) ** 2
    n_grid, n_outgrid = grid.points.shape[0], (out_band + 4) * (2 * out_band + 8)
    build = n_in * (n_grid + n_outgrid) + _ROWS * n_grid
    # the full matrices while the parity blocks (half of them) are cut out
    return 8 * (3 * n_out * n_in * (H + (0 if symmetric else 1)) // 2 + build)
