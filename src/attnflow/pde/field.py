r"""The velocity, first variation and energy of a density on a quadrature grid (arXiv 2605.18870, eq. (81)).

For a density :math:`u` on :math:`S^{d-1}` and heads :math:`D_h` (value matrix :math:`V_h = D_h`, as in
the paper's experiments), with scores :math:`s_h(x, y) = \beta\langle x, D_h y\rangle`:

.. math::
    m_h(x) = \int e^{s_h(x,y)} u(y)\,dy, \qquad
    W_h(x) = \int e^{s_h(x,y)} D_h y\, u(y)\,dy \,/\, N_h(x),

with :math:`N_h = m_h` for softmax attention (SA) and :math:`N_h = 1` for unnormalised attention (USA),
and the velocity :math:`v(x) = s\,\frac1H\sum_h P^\perp(x) W_h(x)` (``s = +1`` ascent, ``-1`` descent).
This is the mean-field limit of the particle field of :mod:`attnflow.dynamics` (NOTES.md §1, §10): for
an empirical :math:`u = \frac1n\sum_j\delta_{x_j}` it is the particle velocity. The energy
(eq. (20), continuum form of ``dynamics.assembly.energy_from_lse``) and its first variation are

.. math::
    E[u] = \frac{1}{2\beta H}\sum_h\iint e^{s_h(x,y)}\,u(x)u(y), \qquad
    \varphi(x) = \frac{\delta E}{\delta u}(x)
    = \frac{1}{2\beta H}\sum_h\int\big(e^{s_h(x,y)} + e^{s_h(y,x)}\big)u(y)\,dy.

The energy ledger of the density (continuum analogue of NOTES.md §3) is
:math:`\frac{d}{dt}E = \int\langle\nabla\varphi, v\rangle u + \varepsilon\int\varphi\,\Delta u
+ \frac{1}{2H}\sum_h\iint e^{s_h}\langle x, \dot D_h y\rangle u u`: the token term, the token-noise term
(generator :math:`\varepsilon\Delta`) and the explicit time dependence of the heads.

Integrals are quadratures on the grid's nodes; each row of scores is shifted before the exponential (by
the bound :math:`\beta|D^\top x_i|` in the compiled pass of :mod:`attnflow.pde.quadsums`, by the row maximum
in the NumPy form), so nothing overflows for any beta |D| the band limit admits. On
S^1, a head that commutes with rotations (:math:`D = [[a, -b], [b, a]]`, e.g. :math:`\beta I`) gives a
kernel of the angle difference, and the sums are circular convolutions done by FFT (``kernel="fft"``;
identical to the quadrature up to round-off, checked in the tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .quadsums import quadrature_sums

__all__ = [
    "ATTENTIONS",
    "KERNEL_METHODS",
    "QUADRATURE_BACKENDS",
    "DensityField",
    "density_field",
    "rotation_invariant",
]

#: attention kinds the density solver implements (the normalised and the unnormalised kernel)
ATTENTIONS = ("softmax", "usa")
KERNEL_METHODS = ("auto", "fft", "quadrature")
#: how the quadrature sums run: one compiled pass over node pairs (:mod:`attnflow.pde.quadsums`), or the
#: NumPy form that builds the N x N score matrix (the reference the compiled pass is tested against)
QUADRATURE_BACKENDS = ("numba", "numpy")


@dataclass
class DensityField:
    """The field of a density at one time.

    Attributes
    ----------
    velocity : ndarray, shape=[N, d]
        s (1/H) sum_h P_perp W_h at the nodes (tangent).
    grad_phi : ndarray, shape=[N, d]
        Tangent gradient of the first variation phi = dE/du.
    phi : ndarray, shape=[N]
    energy : float
    token_rate : float
        int <grad phi, v> u: dE/dt from the motion of the tokens.
    heads_rate : float
        dE/dt from the explicit motion of the heads (0 when no head rate is given).
    tangent : ndarray or None, shape=[2, N]
        The velocity's components on the S^2 grid's (e_theta, e_phi) basis, where the method has them
        (:mod:`attnflow.pde.coefficients`): the divergence of the flux then needs no projection.
    """

    velocity: np.ndarray
    grad_phi: np.ndarray
    phi: np.ndarray
    energy: float
    token_rate: float
    heads_rate: float
    tangent: np.ndarray | None = None


def rotation_invariant(D: np.ndarray, rtol: float = 1e-13) -> bool:
    """Whether a 2 x 2 head commutes with rotations (D = [[a, -b], [b, a]]): its kernel is a function of
    the angle difference (score a cos(theta - phi) + b sin(theta - phi))."""
    D = np.asarray(D)
    if D.shape != (2, 2):
        return False
    scale = max(np.abs(D).max(), 1e-300)
    return abs(D[0, 0] - D[1, 1]) <= rtol * scale and abs(D[0, 1] + D[1, 0]) <= rtol * scale


def _circular(k: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Circular convolution sum_q k[(i - q) mod N] g[q, ...] by FFT along axis 0."""
    fk = np.fft.rfft(k)
    n = k.shape[0]
    if g.ndim == 1:
        return np.fft.irfft(fk * np.fft.rfft(g), n=n)
    return np.fft.irfft(fk[:, None] * np.fft.rfft(g, axis=0), n=n, axis=0)


def _kernel_sums(
    x: np.ndarray, wu: np.ndarray, Dm: np.ndarray, beta: float, fft: bool, quadrature: str = "numba"
):
    """Row shift M_i, Z_i = sum_q e^{s_iq - M_i} wu_q and Y_i = sum_q e^{s_iq - M_i} wu_q y_q
    for s_iq = beta <x_i, Dm y_q> on the grid's own nodes (x = y)."""
    if fft:
        n = x.shape[0]
        psi = 2 * np.pi * np.arange(n) / n
        s = beta * (Dm[0, 0] * np.cos(psi) + Dm[1, 0] * np.sin(psi))
        M = s.max()
        k = np.exp(s - M)
        Z = _circular(k, wu)
        Y = _circular(k, wu[:, None] * x)
        return np.full(n, M), Z, Y
    if quadrature == "numba":
        return quadrature_sums(x, wu, Dm, beta)
    S = beta * (x @ Dm @ x.T)
    M = S.max(axis=1)
    E = np.exp(S - M[:, None])
    return M, E @ wu, E @ (wu[:, None] * x)


def _tangent(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    return v - np.einsum("nd,nd->n", x, v)[:, None] * x


def density_field(
    x: np.ndarray,
    w: np.ndarray,
    u: np.ndarray,
    heads: np.ndarray,
    *,
    beta: float,
    attention: str,
    sign: float,
    heads_dot: np.ndarray | None = None,
    kernel: str = "auto",
    quadrature: str = "numba",
) -> DensityField:
    """Velocity, first variation, energy and energy rates of a density given at quadrature nodes.

    Parameters
    ----------
    x : ndarray, shape=[N, d]
        Quadrature nodes on S^{d-1} (the grid of :mod:`attnflow.pde.grids`).
    w : ndarray, shape=[N]
        Quadrature weights.
    u : ndarray, shape=[N]
        Density at the nodes (may dip below 0 by spectral undershoot: it enters linearly).
    heads : ndarray, shape=[H, d, d]
        Effective heads c(t) D_h (layer scaling applied), used as score and value matrices.
    beta : float
    attention : {"softmax", "usa"}
    sign : float
        +1 (ascent) or -1 (descent).
    heads_dot : ndarray or None, shape=[H, d, d]
        d/dt of the effective heads (for the heads' term of the ledger).
    kernel : {"auto", "fft", "quadrature"}
        ``fft`` (S^1 heads commuting with rotations only), ``quadrature``, or ``auto`` (fft where it applies).
    quadrature : {"numba", "numpy"}
        How the quadrature sums run (:data:`QUADRATURE_BACKENDS`): one compiled pass over node pairs
        (:mod:`attnflow.pde.quadsums`, the default) or the NumPy form with the N x N score matrix; the two
        agree to round-off.

    Returns
    -------
    DensityField
    """
    if attention not in ATTENTIONS:
        raise ValueError(
            f"the density solver implements attention in {ATTENTIONS}: got {attention!r}; run other kinds "
            "with particles (attnflow.simulate)"
        )
    if kernel not in KERNEL_METHODS:
        raise ValueError(f"unknown kernel method {kernel!r}; valid: {', '.join(KERNEL_METHODS)}")
    if quadrature not in QUADRATURE_BACKENDS:
        raise ValueError(
            f"unknown quadrature backend {quadrature!r}; valid: {', '.join(QUADRATURE_BACKENDS)} (numba: the "
            "compiled pass, numpy: the reference with the N x N score matrix)"
        )
    H = heads.shape[0]
    wu = w * u
    vel = np.zeros_like(x)
    gphi = np.zeros_like(x)
    phi = np.zeros(x.shape[0])
    energy = 0.0
    heads_rate = 0.0
    for h in range(H):
        Dm = heads[h]
        inv = rotation_invariant(Dm) and x.shape[1] == 2
        if kernel == "fft" and not inv:
            raise ValueError(
                "kernel='fft' needs S^1 heads that commute with rotations (D = [[a, -b], [b, a]], e.g. "
                f"beta I): head {h} is {Dm.tolist()}; use kernel='quadrature' or 'auto'"
            )
        fft = inv and kernel in ("auto", "fft")
        M, Z, Y = _kernel_sums(x, wu, Dm, beta, fft, quadrature)
        eM = np.exp(M)
        Wv = Y @ Dm.T  # sum_q e^{s - M} wu_q D y_q
        W = Wv / Z[:, None] if attention == "softmax" else eM[:, None] * Wv
        vel += _tangent(x, W)
        m = eM * Z
        energy += float(np.dot(wu, m))
        if np.array_equal(Dm, Dm.T):
            phi += 2 * m
            gphi += 2 * eM[:, None] * Wv
        else:
            Mt, Zt, Yt = _kernel_sums(x, wu, Dm.T, beta, fft, quadrature)
            eMt = np.exp(Mt)
            phi += m + eMt * Zt
            gphi += eM[:, None] * Wv + eMt[:, None] * (Yt @ Dm)
        if heads_dot is not None:
            heads_rate += float(np.dot(wu * eM, np.einsum("nd,nd->n", x @ heads_dot[h], Y)))
    vel *= sign / H
    phi /= 2 * beta * H
    gphi = _tangent(x, gphi) / (2 * H)
    token_rate = float(np.dot(wu, np.einsum("nd,nd->n", gphi, vel)))
    return DensityField(
        velocity=vel,
        grad_phi=gphi,
        phi=phi,
        energy=energy / (2 * beta * H),
        token_rate=token_rate,
        heads_rate=heads_rate / (2 * H),
    )
