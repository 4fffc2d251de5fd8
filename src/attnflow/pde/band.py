r"""The band limit the kernel :math:`e^{\beta\langle x, D y\rangle}` needs (too small: refused at load).

The velocity of the Transformer PDE (arXiv 2605.18870, eq. (81)) is a ratio of kernel integrals against
the density. Its angular content is that of the kernel, whose Funk-Hecke / Fourier expansion has
degree-``l`` weights :math:`e^{-r}I_l(r)` (S^1) or :math:`(2l+1)e^{-r}i_l(r)` (S^2) with
:math:`r = \beta\|D\|_{op}` (:mod:`attnflow.dynamics.fastsum`, where the tail :math:`T_L(r)` lives).
A density truncated at degree ``L`` carries a flux truncated at ``L``; we ask that the kernel truncated
at ``L`` reproduce every row sum :math:`\int e^{\beta\langle x, D y\rangle}u(y)\,dy` of a positive
density to the relative error ``tol``. The worst case of that relative error is
:math:`e^{2r}T_L(r)` (module docstring of :mod:`attnflow.dynamics.fastsum`), hence the rule

.. math:: L \ge L_{\min}(r) = \min\{L : e^{2r}T_L(r) \le \mathrm{tol}\}.
"""

from __future__ import annotations

import math

import numpy as np

from ..dynamics.fastsum import tail_bound

__all__ = ["BAND_TOL", "check_band_limit", "kernel_radius", "minimum_band_limit"]

#: default relative error of a kernel row sum allowed by the band-limit rule
BAND_TOL = 1e-6
_L_SEARCH = 2000


def kernel_radius(heads: np.ndarray, beta: float) -> float:
    r"""r = beta max_h |D_h|_op, the largest score :math:`|\beta\langle x, D_h y\rangle|` on the sphere.

    Parameters
    ----------
    heads : ndarray, shape=[H, d, d]
    beta : float
    """
    D = np.asarray(heads, dtype=np.float64)
    return float(beta * max(np.linalg.norm(Dh, 2) for Dh in D))


def minimum_band_limit(r: float, d: int, tol: float = BAND_TOL) -> int:
    r"""Smallest band limit ``L`` with :math:`e^{2r}T_L(r) \le` ``tol`` (module docstring).

    Parameters
    ----------
    r : float
        beta |D|_op (:func:`kernel_radius`).
    d : {2, 3}
        Ambient dimension: S^1 or S^2.
    tol : float
        Relative error of a kernel row sum, in (0, 1).

    Examples
    --------
    >>> minimum_band_limit(1.0, 2)
    8
    """
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ValueError(f"band_tol must lie in (0, 1): got {tol!r}; the default is {BAND_TOL:g}")
    if not (math.isfinite(r) and r >= 0):
        raise ValueError(f"beta |D| must be finite and >= 0: got {r!r}; check beta and the heads")
    lo = 0
    while lo < _L_SEARCH:
        t = tail_bound(lo, r, d)
        if t == 0.0 or 2.0 * r + math.log(t) <= math.log(tol):
            return max(lo, 1)
        lo += 1
    raise ValueError(f"beta |D| = {r:.4g} needs a band limit above {_L_SEARCH}: lower beta or |D|")


def check_band_limit(L: int, heads: np.ndarray, beta: float, d: int, tol: float = BAND_TOL) -> int:
    """Refuse a band limit ``L`` below :func:`minimum_band_limit` for these heads; return the minimum.

    Raises
    ------
    ValueError
        Naming the rule, the band limit received, beta |D| and the minimum band limit needed.
    """
    r = kernel_radius(heads, beta)
    need = minimum_band_limit(r, d, tol)
    if L < need:
        raise ValueError(
            f"band limit L = {L} is too small for beta |D| = {r:.4g} on S^{d - 1}: the kernel "
            f"exp(beta <x, D y>) needs L >= {need} (rule: e^(2r) T_L(r) <= band_tol = {tol:g}, the "
            "worst-case relative error of a kernel row sum truncated at degree L); set the band limit to "
            f"at least {need} or lower beta |D|"
        )
    return need
