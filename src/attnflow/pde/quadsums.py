r"""Compiled kernel sums of the density solver: one pass over node pairs, no N x N array.

For nodes :math:`x_i` (also the quadrature points :math:`y_q = x_q`), weights times density
:math:`w_q u_q` and a score matrix :math:`A` (a head :math:`D_h` or its transpose), the field of
:mod:`attnflow.pde.field` needs, per node,

.. math:: Z_i = \sum_q e^{s_{iq} - M_i}\,w_q u_q, \qquad Y_i = \sum_q e^{s_{iq} - M_i}\,w_q u_q\,y_q,
          \qquad s_{iq} = \beta\langle x_i, A y_q\rangle,

with any finite shift :math:`M_i` (the sums times :math:`e^{M_i}` do not depend on it). The NumPy form
(``field._kernel_sums`` with ``compiled=False``) builds the N x N scores, their row maxima and their
exponentials: five passes over N^2 doubles (32 MB at L = 20 on S^2, 156 MB at L = 30). Here each row is one
compiled loop over the nodes with the shift :math:`M_i = \beta|A^\top x_i|` (Cauchy-Schwarz: no score on
the sphere exceeds it, so :math:`e^{s - M} \le 1`; the smallest factor is :math:`e^{-2M_i}`, far from
underflow for every :math:`\beta|D|` the band-limit rule admits), and the exponential of the particle
kernel (:func:`attnflow.dynamics.numba_passes.exp_shifted`, float64, vectorised). The sums are the same
as the NumPy form's to round-off (``tests/test_pde_quadsums.py``: 1e-13 relative); they are summed in
another order, so a run differs from a run of the NumPy form in the last bits (and repeats bit for bit).
Rows run in parallel over numba's threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._numba_cache import refresh as _refresh_numba_cache
from ..dynamics.numba_passes import LOOP_FLAGS, exp_shifted

_refresh_numba_cache()  # drop numba's cached code compiled from since-edited sources (attnflow._numba_cache)

__all__ = ["quadrature_sums"]


@njit(parallel=True, fastmath=LOOP_FLAGS, cache=True)
def _sums(c, wc, a):  # pragma: no cover - compiled; tested through quadrature_sums
    """c: (3, N) node coordinates (a zero row on S^1); wc: (4, N) = w u (1, y); a: (N, 3) = beta A^T x_i.
    Returns M (N,), S (4, N): S[0] = Z, S[1:] = Y."""
    N = c.shape[1]
    M = np.empty(N)
    S = np.empty((4, N))
    c0, c1, c2 = c[0], c[1], c[2]
    w0, w1, w2, w3 = wc[0], wc[1], wc[2], wc[3]
    for i in prange(N):
        a0, a1, a2 = a[i, 0], a[i, 1], a[i, 2]
        m = np.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
        z = 0.0
        y0 = 0.0
        y1 = 0.0
        y2 = 0.0
        for q in range(N):
            e = exp_shifted(a0 * c0[q] + a1 * c1[q] + a2 * c2[q] - m)
            z += e * w0[q]
            y0 += e * w1[q]
            y1 += e * w2[q]
            y2 += e * w3[q]
        M[i] = m
        S[0, i] = z
        S[1, i] = y0
        S[2, i] = y1
        S[3, i] = y2
    return M, S


def quadrature_sums(
    x: np.ndarray, wu: np.ndarray, A: np.ndarray, beta: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row shift M, Z and Y of the module docstring (float64), for nodes on S^1 or S^2.

    Parameters
    ----------
    x : ndarray, shape=[N, d], d in {2, 3}
        Nodes, also the quadrature points.
    wu : ndarray, shape=[N]
        Quadrature weight times density at each node.
    A : ndarray, shape=[d, d]
        Score matrix: s_iq = beta <x_i, A x_q>.
    beta : float

    Returns
    -------
    M : ndarray, shape=[N]
    Z : ndarray, shape=[N]
    Y : ndarray, shape=[N, d]
    """
    x = np.asarray(x, dtype=np.float64)
    N, d = x.shape
    if d not in (2, 3):
        raise ValueError(f"quadrature_sums runs on S^1 or S^2 (d = 2 or 3): got nodes of shape {x.shape}")
    c = np.zeros((3, N))
    c[:d] = x.T
    wc = np.empty((4, N))
    wc[0] = wu
    wc[1:] = wu * c
    a = np.zeros((N, 3))
    a[:, :d] = beta * (x @ np.asarray(A, dtype=np.float64))  # row i: beta A^T x_i
    M, S = _sums(c, wc, a)
    return M, S[0], np.ascontiguousarray(S[1 : d + 1].T)
