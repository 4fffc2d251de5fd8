r"""Fast summation backend: the softmax :class:`~attnflow.dynamics.pairsums.PairSums` on S^1 and S^2 in
:math:`O(nL)` and :math:`O(nL^2)` per head, by a truncated expansion of the kernel (non-causal only).

Method
------
Write the scores as :math:`s_{ij} = \beta\langle x_i, D x_j\rangle = \langle a_i, x_j\rangle` with
:math:`a_i = \beta D^\top x_i`, :math:`r_i = |a_i|`, :math:`\hat a_i = a_i/r_i`. For unit :math:`x`,

* on :math:`S^2` (plane-wave / Funk-Hecke expansion, DLMF §10.60(ii), with the addition theorem of
  spherical harmonics, DLMF 14.30.9),

  .. math:: e^{\langle a, x\rangle - r} = \sum_{l\ge0}(2l+1)\,\tilde\imath_l(r)\,P_l(\langle\hat a, x\rangle)
            = \sum_{l\ge0}\tilde\imath_l(r)\sum_{m=-l}^{l} F_{lm}(\hat a)F_{lm}(x),

  with :math:`\tilde\imath_l(r) = e^{-r} i_l(r)` the scaled modified spherical Bessel functions and
  :math:`F_{lm} = \sqrt{4\pi}\,Y_{lm}` the real spherical harmonics normalised to mean square 1;
* on :math:`S^1` (DLMF 10.35.2), with :math:`\tilde I_k(r) = e^{-r}I_k(r)`,

  .. math:: e^{\langle a, x\rangle - r} = \tilde I_0(r) + \sum_{k\ge1}\tilde I_k(r)\,
            \big(F_{k,c}(\hat a)F_{k,c}(x) + F_{k,s}(\hat a)F_{k,s}(x)\big),
            \quad F_{k,c} = \sqrt2\cos k\theta,\ F_{k,s} = \sqrt2\sin k\theta.

Keeping the degrees :math:`l < L` (``L`` is the *truncation degree*; :math:`L^2` features on
:math:`S^2`, :math:`2L-1` on :math:`S^1`), every sum over the cloud factorises:

.. math:: \sum_j e^{s_{ij} - r_i} g(x_j) \approx \sum_{l<L}\tilde\imath_l(r_i)\sum_m F_{lm}(\hat a_i)\,
          \mu_{lm}[g], \qquad \mu_{lm}[g] = \sum_j g(x_j) F_{lm}(x_j).

The moments :math:`\mu[g]` of :math:`g \in \{1, x_a, x_a x_b\}` (1 + d + d(d+1)/2 functions) are formed once
per path in :math:`O(nL^2)` and shared by every head; each head then evaluates its rows in :math:`O(nL^2)`.
The row shift is :math:`M_i = r_i` (``row_shift``), so nothing overflows; ``row_q`` is
:math:`x_i^\top[\sum_j e_{ij} x_j x_j^\top] x_i`. Column sums (non-symmetric :math:`D`) use
:math:`b_j = \beta D x_j` against the same moments of :math:`x`, with per-column shift :math:`|b_j|`
rescaled to the head's ``col_shift`` :math:`c = \max_j |b_j|`.

Error bound
-----------
Because :math:`|P_l| \le 1` on :math:`[-1, 1]` (DLMF 18.14.1) and :math:`|\cos| \le 1`, each truncated
pair weight is off by at most the tail

.. math:: T_L(r) = \sum_{l\ge L}(2l+1)\,\tilde\imath_l(r)\ (S^2), \qquad
          T_L(r) = 2\sum_{k\ge L}\tilde I_k(r)\ (S^1),

uniformly in :math:`x_j`. With :math:`|g| \le 1` for every :math:`g` above, the error of each of the sums
of row :math:`i` is at most :math:`n\,T_L(r_i)`, while the row sum itself is
:math:`\sum_j e^{s_{ij}-r_i} \ge n e^{-2r_i}` (every term is positive and :math:`s_{ij} \ge -r_i`). Hence,
for every configuration of the tokens,

.. math:: \frac{|\tilde S_i - S_i|}{S_i} \le B_L(r_i) := e^{2r_i}\,T_L(r_i) \le B_L(r_{\max}),

and the same bound holds for ``row_x`` and ``row_q`` relative to the row sum (which bounds them) and for
the column sums relative to the column mass. :math:`B_L` grows with :math:`r` (it is
:math:`e^{r}\sum_{l\ge L}(2l+1)i_l(r)`, each :math:`i_l` increasing), so :func:`truncation_degree` takes the
smallest ``L`` with :math:`B_L(r_{\max}) \le` ``tol`` at :math:`r_{\max} = \beta\max(|D^\top x_i|, |D x_j|)`
over paths and heads. The log-sum-exp is then off by at most ``tol`` (absolute) and the softmax mean by
:math:`2\,\mathrm{tol}/(1-\mathrm{tol})`. The bound is worst-case (a row whose whole cloud lies opposite
:math:`a_i`); for spread-out clouds the observed error is far smaller.

Round-off: the expansion adds terms of size up to the row's upper bound :math:`n` to get a row sum that
may be as small as :math:`n e^{-2r}`, so float64 round-off can reach about
:math:`\epsilon\,e^{2r}` relative, whatever ``L`` (measured on the adversarial cloud, all tokens
opposite their :math:`a_i`: 1.1-2.2 :math:`\epsilon e^{2r}` for r = 3..8, L = 20..80).
:func:`roundoff_estimate` is :math:`8\epsilon e^{2r}` (an estimate with a safety factor of about 4, not
a bound); the rule refuses a ``tol`` below it. In float64 this caps :math:`r_{\max}` at about 5.5 for
``tol`` = 1e-10 and 10 for ``tol`` = 1e-6.

Runs on whatever device the tensors are on (torch only: CPU and CUDA), in float64, chunked over rows so
that the temporaries stay under ``chunk_bytes`` (memory :math:`O(\text{chunk}\cdot L^2 + n)` per head).

References
----------
DLMF: NIST Digital Library of Mathematical Functions, https://dlmf.nist.gov (§10.35, §10.60, 14.30.9,
18.14.1). Fully normalised associated Legendre recurrences: S. A. Holmes and W. E. Featherstone,
J. Geodesy 76 (2002) 279-299. Backward ratio recurrence for Bessel functions: W. Gautschi, SIAM Review 9
(1967) 24-82.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np
import torch
from scipy.special import ive

from ..geometry import Geometry
from . import numba_backend
from .pairsums import PairSums
from .threads import torch_threads

__all__ = [
    "AUTO_MIN_N",
    "L_MAX",
    "auto_worthwhile",
    "pair_sums_fastsum",
    "relative_error_bound",
    "roundoff_estimate",
    "scaled_bessel",
    "sphere_features",
    "tail_bound",
    "truncation_degree",
]

#: largest truncation degree :func:`pair_sums_fastsum` accepts by default (L^2 = 16384 features on S^2)
L_MAX = 128
#: fewest tokens for which ``backend="auto"`` considers the fast summation (below, the direct O(n^2)
#: kernel always wins: measured break-even about 2-5 L^2 and L >= 6 for any useful tolerance)
AUTO_MIN_N = 1024


def auto_worthwhile(
    x: torch.Tensor, D: torch.Tensor, beta: float, tol: float, *, factor: float = 8.0
) -> bool:
    """Whether ``backend="auto"`` should take the fast summation for tokens ``x`` and heads ``D``.

    True when the tokens lie on S^1 or S^2 (d = 2, 3), n >= :data:`AUTO_MIN_N`, the truncation rule
    accepts ``tol`` (:func:`truncation_degree` of r = beta max(|D^T x_i|, |D x_j|), else the direct kernel)
    and n >= ``factor`` L^2. The factor 8 is the measured rule of docs/fastsum.md (cost ~1-1.6e-8 s per
    token L^2 against 5-7e-9 s per pair for the fused kernel, with the ledger); float32 runs use 16.
    """
    P, n, d = x.shape
    if d not in (2, 3) or n < AUTO_MIN_N:
        return False
    x64 = x.detach().to(torch.float64)
    D64 = beta * D.detach().to(torch.float64)
    r = max(
        float(torch.linalg.vector_norm(x64[:, None] @ D64, dim=-1).max()),
        float(torch.linalg.vector_norm(x64[:, None] @ D64.transpose(-1, -2), dim=-1).max()),
    )
    try:
        L = truncation_degree(r, tol, d)
    except ValueError:
        return False
    return n >= factor * L * L


_EPS64 = float(np.finfo(np.float64).eps)
_PARALLEL_WORK = 2**21  # n L^2 below which the numba passes run on one thread (a few ms of work)
_ROUNDOFF_SAFETY = 8.0  # observed worst case (antipodal clouds) 1.1-2.2 eps e^{2r}; see the module docstring


# --------------------------------------------------------------------------- the bound


def _tail_terms(r: float, top: int, d: int) -> np.ndarray:
    """Terms (2l+1) e^{-r} i_l(r) (d = 3) or (1 or 2) e^{-r} I_k(r) (d = 2) for degrees 0..top-1 (scipy)."""
    deg = np.arange(top, dtype=np.float64)
    if d == 3:
        rr = max(r, 1e-300)  # i_l(0) = [l == 0]; the formula is 0 * inf at r = 0 exactly
        return (2 * deg + 1) * np.sqrt(np.pi / (2 * rr)) * ive(deg + 0.5, rr)
    terms = 2.0 * ive(deg, r)
    terms[0] /= 2.0
    return terms


def _tails(r: float, top: int, d: int) -> np.ndarray:
    """T_L(r) for L = 0..top, summed from the small end (terms beyond are below 1e-300 relative)."""
    extra = top + int(3 * r) + 200  # beyond l ~ r + 30 sqrt(r) the terms decay faster than geometric
    terms = _tail_terms(r, extra, d)
    tails = np.cumsum(terms[::-1])[::-1]
    return np.append(tails, 0.0)[: top + 1]


def _check_dim(d: int) -> None:
    if d not in (2, 3):
        raise ValueError(
            f"fast summation is implemented on S^1 (d = 2) and S^2 (d = 3): got d = {d}; "
            "use the direct kernel (backend='torch' or 'numba')"
        )


def tail_bound(L: int, r: float, d: int = 3) -> float:
    r"""Uniform bound :math:`T_L(r)` on the error of one truncated pair weight :math:`e^{s_{ij}-r_i}`.

    Parameters
    ----------
    L : int
        Truncation degree (degrees ``0..L-1`` kept).
    r : float
        :math:`|a_i| = \beta|D^\top x_i|`.
    d : {2, 3}
        Ambient dimension (S^1 or S^2).

    Returns
    -------
    float
        :math:`\sum_{l\ge L}(2l+1)e^{-r}i_l(r)` (d = 3) or :math:`2\sum_{k\ge L}e^{-r}I_k(r)` (d = 2).
    """
    _check_dim(d)
    return float(_tails(float(r), int(L), d)[int(L)])


def relative_error_bound(L: int, r: float, d: int = 3) -> float:
    r"""Worst-case relative error :math:`B_L(r) = e^{2r}T_L(r)` of every row sum (module docstring)."""
    t = tail_bound(L, r, d)
    return math.exp(2.0 * r + math.log(t)) if t > 0 else 0.0


def roundoff_estimate(r: float) -> float:
    r"""Estimated worst-case float64 round-off of a row sum, relative: :math:`8\,\epsilon\,e^{2r}`."""
    return _ROUNDOFF_SAFETY * _EPS64 * math.exp(min(2.0 * r, 700.0))


def truncation_degree(r: float, tol: float, d: int = 3, *, L_max: int = L_MAX) -> int:
    r"""Smallest truncation degree ``L`` with :math:`B_L(r) = e^{2r}T_L(r) \le` ``tol``.

    Parameters
    ----------
    r : float
        :math:`r_{\max} = \beta\max_i|D^\top x_i|` (and :math:`\max_j|D x_j|` when column sums are needed).
    tol : float
        Requested relative error of every row sum, in (0, 1).
    d : {2, 3}
    L_max : int
        Largest acceptable degree.

    Raises
    ------
    ValueError
        When the rule needs ``L > L_max``, or when float64 round-off (:func:`roundoff_estimate`) may
        exceed ``tol``: the message names the rule, the values and the fix (the direct kernel).

    Examples
    --------
    >>> truncation_degree(5.0, 1e-10)
    24
    """
    _check_dim(d)
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ValueError(f"tol must be a relative error in (0, 1): got {tol!r}; e.g. tol=1e-10")
    r = float(r)
    if not (math.isfinite(r) and r >= 0):
        raise ValueError(f"r = beta |D^T x| must be finite and >= 0: got {r!r}; check beta and D")
    top = max(L_max, int(4 * r) + 60)
    with np.errstate(divide="ignore", over="ignore"):
        bounds = np.exp(2.0 * r + np.log(_tails(r, top, d)))
    ok = np.nonzero(bounds[1:] <= tol)[0]
    L = int(ok[0]) + 1 if ok.size else None
    if L is None or L > L_max:
        need = f"L = {L}" if L is not None else f"L > {top}"
        raise ValueError(
            f"beta |D| = {r:.4g} needs {need} > L_max = {L_max} for tol {tol:g} (rule: e^(2r) T_L(r) <= tol, "
            "the worst-case relative error of a row sum); use the direct kernel (backend='torch' or "
            "'numba'), raise tol, or raise L_max"
        )
    ro = roundoff_estimate(r)
    if ro > tol:
        raise ValueError(
            f"beta |D| = {r:.4g}: float64 round-off of the expansion may reach 8 eps e^(2r) = {ro:.3g} > "
            f"tol {tol:g} (L = {L}); use the direct kernel (backend='torch' or 'numba') or raise tol"
        )
    return L


# --------------------------------------------------------------------------- special functions


def scaled_bessel(r: torch.Tensor, L: int, d: int = 3) -> torch.Tensor:
    r"""Scaled Bessel functions :math:`e^{-r}i_l(r)` (d = 3) or :math:`e^{-r}I_l(r)` (d = 2), l < L.

    Computed by the backward ratio recurrence (Gautschi 1967)
    :math:`\rho_l = i_l/i_{l-1} = r/((2l+1) + r\rho_{l+1})` (d = 3; :math:`r/(2l + r\rho_{l+1})` for
    :math:`I_l`), started at :math:`\rho_N = 0` with :math:`N = \max(L, r) + 40`, then
    :math:`\tilde\imath_l = \tilde\imath_0\prod_{k\le l}\rho_k` with :math:`\tilde\imath_0(r) =
    (1 - e^{-2r})/(2r)` and :math:`\tilde I_0 =` ``torch.special.i0e``. Every ratio lies in [0, 1):
    no overflow, and the recurrence is stable in this direction (:math:`i_l` is the minimal solution).

    Parameters
    ----------
    r : Tensor, shape=[m], float64, r >= 0
    L : int
    d : {2, 3}

    Returns
    -------
    Tensor, shape=[L, m]
    """
    _check_dim(d)
    rmax = float(r.max()) if r.numel() else 0.0
    N = max(L, math.ceil(rmax)) + 40
    rho = torch.zeros_like(r)
    ratios = torch.empty((L, r.shape[0]), dtype=r.dtype, device=r.device)
    ratios[0] = 1.0
    for k in range(N, 0, -1):
        rho = r / ((2 * k + (1 if d == 3 else 0)) + r * rho)
        if k < L:
            ratios[k] = rho
    if d == 3:
        safe = r.clamp_min(1e-300)
        first = torch.where(r > 1e-8, -torch.expm1(-2.0 * r) / (2.0 * safe), 1.0 - r)
    else:
        first = torch.special.i0e(r)
    return torch.cumprod(ratios, dim=0) * first


def sphere_features(u: torch.Tensor, L: int) -> torch.Tensor:
    r"""Real harmonics of degree < L at unit vectors, normalised to mean square 1 on the sphere.

    d = 3: :math:`F_{lm} = \sqrt{4\pi}\,Y_{lm}`, rows ordered :math:`l^2 + l + m` (m = -l..l), with
    :math:`Y_{l0} = \bar P_l^0(z)`, :math:`Y_{l,m>0} = \sqrt2\bar P_l^m(z)\cos m\phi`,
    :math:`Y_{l,-m} = \sqrt2\bar P_l^m(z)\sin m\phi`, and the fully normalised Legendre functions from the
    recurrences (Holmes & Featherstone 2002, eqs. (11)-(13))
    :math:`\bar P_m^m = \sqrt{(2m+1)/(2m)}\,\sin\theta\,\bar P_{m-1}^{m-1}`,
    :math:`\bar P_{m+1}^m = \sqrt{2m+3}\,z\bar P_m^m`,
    :math:`\bar P_l^m = a_{lm}z\bar P_{l-1}^m - b_{lm}\bar P_{l-2}^m` with
    :math:`a_{lm} = \sqrt{(4l^2-1)/(l^2-m^2)}`,
    :math:`b_{lm} = \sqrt{(2l+1)((l-1)^2-m^2)/((2l-3)(l^2-m^2))}`. The addition theorem (DLMF 14.30.9)
    gives :math:`\sum_m F_{lm}(u)F_{lm}(v) = (2l+1)P_l(\langle u, v\rangle)`.

    d = 2: rows ``[1, sqrt2 cos k theta, sqrt2 sin k theta]`` for k = 1..L-1 (rows 2k-1, 2k).

    Parameters
    ----------
    u : Tensor, shape=[m, d], d in {2, 3}
        Unit vectors (normalised here once more, so that near-unit input is harmless).
    L : int

    Returns
    -------
    Tensor, shape=[K, m]
        K = L^2 (d = 3) or 2L - 1 (d = 2).
    """
    d = u.shape[-1]
    _check_dim(d)
    u = u / torch.linalg.vector_norm(u, dim=-1, keepdim=True)
    m_ = u.shape[0]
    rt2 = math.sqrt(2.0)
    if d == 2:
        theta = torch.atan2(u[:, 1], u[:, 0])
        k = torch.arange(1, L, dtype=u.dtype, device=u.device)[:, None] * theta[None]
        rows = torch.cat([torch.ones_like(theta)[None], rt2 * torch.cos(k), rt2 * torch.sin(k)])
        return rows[_s1_order(L, u.device)]
    z = u[:, 2].contiguous()
    phi = torch.atan2(u[:, 1], u[:, 0])
    sin_t = torch.hypot(u[:, 0], u[:, 1])
    out = torch.empty((L * L, m_), dtype=u.dtype, device=u.device)
    orders = torch.arange(1, L, dtype=u.dtype, device=u.device)
    mphi = orders[:, None] * phi[None]
    cos_m, sin_m = rt2 * torch.cos(mphi), rt2 * torch.sin(mphi)  # rows m = 1..L-1
    # diagonal Pbar_m^m = sqrt(4 pi) / sqrt(4 pi) * prod_k sqrt((2k+1)/(2k)) sin^m (F = sqrt(4 pi) Y)
    cdiag = torch.tensor(
        np.cumprod([1.0] + [math.sqrt((2 * k + 1) / (2 * k)) for k in range(1, L)]), dtype=u.dtype
    ).to(u.device)
    diag = torch.cumprod(torch.cat([torch.ones_like(sin_t)[None], sin_t.expand(L - 1, m_)]), dim=0)
    diag = diag * cdiag[:, None]  # (L, m): Pbar_m^m, row m
    prev2 = None
    prev = None
    for l in range(L):
        # cur[m] = Pbar_l^m for m = 0..l
        cur = torch.empty((l + 1, m_), dtype=u.dtype, device=u.device)
        if l >= 2:
            mm = np.arange(l - 1, dtype=np.float64)
            a = np.sqrt((4.0 * l * l - 1) / (l * l - mm * mm))
            b = np.sqrt((2 * l + 1) * ((l - 1) ** 2 - mm * mm) / ((2 * l - 3) * (l * l - mm * mm)))
            at = torch.tensor(a, dtype=u.dtype, device=u.device)[:, None]
            bt = torch.tensor(b, dtype=u.dtype, device=u.device)[:, None]
            torch.sub(at * z * prev[: l - 1], bt * prev2[: l - 1], out=cur[: l - 1])
        if l >= 1:
            torch.mul(prev[l - 1], math.sqrt(2 * l + 1) * z, out=cur[l - 1])
        cur[l] = diag[l]
        c = l * l + l
        out[c] = cur[0]
        if l >= 1:
            torch.mul(cur[1:], cos_m[:l], out=out[c + 1 : c + l + 1])
            torch.mul(cur[1:].flip(0), sin_m[:l].flip(0), out=out[c - l : c])
        prev2, prev = prev, cur
    return out


def _s1_order(L: int, device) -> torch.Tensor:
    """Row permutation [1, cos, ..., sin, ...] -> [1, cos 1, sin 1, cos 2, sin 2, ...] (degree blocks)."""
    idx = [0]
    for k in range(1, L):
        idx += [k, L - 1 + k]
    return torch.tensor(idx, device=device)


def _blocks(L: int, d: int) -> list[tuple[int, int]]:
    """Rows of degree l in the feature matrix of :func:`sphere_features`."""
    if d == 3:
        return [(l * l, (l + 1) * (l + 1)) for l in range(L)]
    return [(0, 1)] + [(2 * k - 1, 2 * k + 1) for k in range(1, L)]


# --------------------------------------------------------------------------- the backend


def _check(x: torch.Tensor, D: torch.Tensor, beta: float, geometry: Geometry, tol: float) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 3:
        raise ValueError(
            f"x must be a tensor of shape [P, n, d]: got {type(x).__name__} with shape "
            f"{tuple(getattr(x, 'shape', ()))}; add a path axis with x[None]"
        )
    P, n, d = x.shape
    _check_dim(d)
    if n < 1:
        raise ValueError(f"x needs at least one token: got shape {tuple(x.shape)}")
    if not isinstance(D, torch.Tensor) or D.ndim != 4 or D.shape[0] != P or D.shape[2:] != (d, d):
        raise ValueError(
            f"D must be a tensor of shape [P, H, d, d] = [{P}, H, {d}, {d}]: got "
            f"{tuple(getattr(D, 'shape', ()))}"
        )
    if D.shape[1] < 1 or not bool(torch.isfinite(D).all()):
        raise ValueError(
            f"D needs at least one head and finite entries: got shape {tuple(D.shape)}, "
            f"{int((~torch.isfinite(D)).sum())} non-finite entries; check the weight process"
        )
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a finite number > 0: got {beta!r}")
    if not isinstance(geometry, Geometry) or not geometry.unit_norm:
        raise ValueError(
            "fast summation expands the kernel in harmonics of the unit sphere: geometry must be the sphere, "
            f"got {getattr(geometry, 'name', geometry)!r}; use backend='torch' off the sphere"
        )
    geometry.check(x)
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ValueError(f"tol must be a relative error in (0, 1): got {tol!r}; e.g. tol=1e-10")


def _moment_functions(x: torch.Tensor, ledger: bool) -> torch.Tensor:
    """Columns g(x_j): [1, x_a, (x_a x_b for a <= b if ledger)], shape [m, 1 + d (+ d(d+1)/2)]."""
    cols = [torch.ones_like(x[:, :1]), x]
    if ledger:
        d = x.shape[1]
        cols.append(torch.stack([x[:, a] * x[:, b] for a in range(d) for b in range(a, d)], dim=1))
    return torch.cat(cols, dim=1)


def _query(q: torch.Tensor, L: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Shift r = |q| and the coefficient rows c_l(r) F_lm(q/|q|), shape [K, m], of query vectors q."""
    r = torch.linalg.vector_norm(q, dim=-1)
    u = torch.where((r > 0)[:, None], q, torch.ones_like(q))  # any direction when r = 0 (only l = 0 counts)
    F = sphere_features(u, L)
    c = scaled_bessel(r, L, d)
    for l, (s, e) in enumerate(_blocks(L, d)):
        F[s:e] *= c[l]
    return r, F


class _Expansion:
    """Moments and row evaluation of one truncation degree: the numba kernel (S^2 on CPU) or torch."""

    def __init__(self, L: int, d: int, device: torch.device, rows: int, impl: str):
        self.L, self.d, self.rows = L, d, rows
        self.kernel = None
        if impl not in ("auto", "torch", "numba"):
            raise ValueError(f"impl must be 'auto', 'torch' or 'numba': got {impl!r}")
        if impl != "torch" and d == 3 and device.type == "cpu" and numba_backend.available():
            from . import fastsum_kernel  # numba compiles on first use only

            self.kernel = fastsum_kernel
            self.tables = fastsum_kernel.legendre_tables(L)
            # point ranges of the moments' partial sums, summed in order: a constant, not the thread count
            # (which would make the sums' last bits depend on where a task runs; issue 30)
            self.nparts = 8
        elif impl == "numba":
            raise ValueError(
                f"impl='numba' needs d = 3, CPU tensors and numba: got d = {d}, device {device.type}"
            )

    @contextlib.contextmanager
    def _threads(self, n: int) -> Iterator[None]:
        """One numba thread for small passes: a parallel launch costs ~50 us on idle cores but measured
        30-130 ms on 2 busy ones (load 12), against 0.4-0.9 ms for a whole pass at n = 1000, L = 13."""
        import numba

        saved = numba.get_num_threads()
        if n * self.L * self.L >= _PARALLEL_WORK or saved == 1:
            yield
            return
        numba.set_num_threads(1)
        try:
            yield
        finally:
            numba.set_num_threads(saved)

    def moments(self, x: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
        """mu[k, g] = sum_j F_k(x_j) G[j, g], shape [K, ng]."""
        if self.kernel is not None:
            nparts = max(1, min(self.nparts, x.shape[0] // 256))
            with self._threads(x.shape[0]):
                mu = self.kernel.moments(x.numpy(), G.numpy(), self.L, *self.tables, nparts)
            return torch.from_numpy(mu)
        K = self.L * self.L if self.d == 3 else 2 * self.L - 1
        mu = torch.zeros(K, G.shape[1], dtype=x.dtype, device=x.device)
        for s in range(0, x.shape[0], self.rows):
            mu += sphere_features(x[s : s + self.rows], self.L) @ G[s : s + self.rows]
        return mu

    def evaluate(self, q: torch.Tensor, mu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """r_i = |q_i| and S[i, g] = sum_j e^{<q_i, x_j> - r_i} G[j, g] (truncated), shapes [m], [m, ng]."""
        if self.kernel is not None:
            with self._threads(q.shape[0]):
                S, r = self.kernel.evaluate(
                    q.contiguous().numpy(), mu.contiguous().numpy(), self.L, *self.tables
                )
            return torch.from_numpy(r), torch.from_numpy(S)
        rs, Ss = [], []
        for s in range(0, q.shape[0], self.rows):
            r, Q = _query(q[s : s + self.rows], self.L, self.d)
            rs.append(r)
            Ss.append(Q.T @ mu)
        return torch.cat(rs), torch.cat(Ss)


def pair_sums_fastsum(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float,
    *,
    tol: float = 1e-10,
    ledger: bool = True,
    geometry: Geometry,
    L: int | None = None,
    L_max: int = L_MAX,
    chunk_bytes: int = 2**26,
    impl: str = "auto",
) -> PairSums:
    r"""Softmax pair sums of the field at (x, D) by fast summation on S^1 / S^2 (non-causal).

    Same role as :func:`attnflow.dynamics.torch_backend.pair_sums_torch` for softmax attention; the
    method and its error bound are in the module docstring.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d], d in {2, 3}
        Tokens on the unit sphere (computed in float64 whatever their dtype).
    D : Tensor, shape=[P, H, d, d]
        Score matrices (layer scaling already applied), any (not only symmetric).
    beta : float
    tol : float
        Worst-case relative error of every row sum: the truncation degree is
        :func:`truncation_degree` ``(beta max|D^T x|, tol, d)``.
    ledger : bool
        Also compute ``row_q`` and, for non-symmetric heads, ``col_x``.
    geometry : Geometry
        Must be the sphere.
    L : int or None
        Force the truncation degree (bypasses the rule and its guarantee; for convergence studies).
    L_max : int
        Largest degree the rule may choose.
    chunk_bytes : int
        Budget of the per-chunk feature matrices (PyTorch path).
    impl : {"auto", "torch", "numba"}
        The implementation: on S^2 with CPU tensors ``auto`` takes the fused numba kernel
        (:mod:`~attnflow.dynamics.fastsum_kernel`) when numba is installed, else the PyTorch path (CUDA,
        S^1); ``torch`` or ``numba`` force one (to compare them, or to time them).

    Returns
    -------
    PairSums
        float64; ``row_shift`` :math:`= r_i = \beta|D_h^\top x_i|`; ``attn_x`` is ``None`` (softmax).

    Examples
    --------
    >>> from attnflow.geometry import Sphere
    >>> x = Sphere().uniform((1, 50), 3, torch.Generator().manual_seed(0), torch.float64)
    >>> s = pair_sums_fastsum(x, torch.eye(3)[None, None].double(), 1.0, geometry=Sphere())
    >>> s.row_x.shape
    torch.Size([1, 1, 50, 3])
    """
    _check(x, D, beta, geometry, tol)
    if x.device.type != "cpu":
        return _pair_sums(x, D, beta, tol, ledger, L, L_max, chunk_bytes, impl)
    # many small O(n) torch ops: on a busy machine two intra-op threads wait on each other (measured on
    # 2 loaded cores: scaled_bessel at n = 1e5 took 0.05 s on one torch thread, 0.8-2.1 s on two)
    with torch_threads(1):
        return _pair_sums(x, D, beta, tol, ledger, L, L_max, chunk_bytes, impl)


def _pair_sums(x, D, beta, tol, ledger, L, L_max, chunk_bytes, impl) -> PairSums:
    P, n, d = x.shape
    H = D.shape[1]
    f64 = torch.float64
    x64 = x.detach().to(f64)
    D64 = beta * D.detach().to(f64)
    sym = torch.equal(D64, D64.transpose(-1, -2))
    colsums = ledger and not sym
    # r_max over rows (a_i = beta D^T x_i, i.e. x_i^T beta D) and, when needed, columns (b_j = beta D x_j)
    A_norm = torch.linalg.vector_norm(x64[:, None] @ D64, dim=-1)  # (P, H, n)
    r_max = float(A_norm.max())
    if colsums:
        r_max = max(
            r_max, float(torch.linalg.vector_norm(x64[:, None] @ D64.transpose(-1, -2), dim=-1).max())
        )
    if L is None:
        L = truncation_degree(r_max, tol, d, L_max=L_max)
    elif isinstance(L, bool) or not isinstance(L, int) or not 1 <= L <= L_max:
        raise ValueError(
            f"L must be an integer in [1, L_max = {L_max}]: got {L!r}; or pass L=None (the rule)"
        )
    K = L * L if d == 3 else 2 * L - 1
    ng = 1 + d + (d * (d + 1) // 2 if ledger else 0)
    rows = max(64, chunk_bytes // (8 * (3 * K + 2 * L + ng)))

    row_shift = torch.empty(P, H, n, dtype=f64, device=x.device)
    row_sum = torch.empty_like(row_shift)
    row_x = torch.empty(P, H, n, d, dtype=f64, device=x.device)
    row_q = torch.empty_like(row_shift) if ledger else None
    col_shift = torch.empty(P, H, dtype=f64, device=x.device) if colsums else None
    col_x = torch.empty_like(row_x) if colsums else None
    pairs = [(a, b) for a in range(d) for b in range(a, d)]
    qw = torch.tensor([1.0 if a == b else 2.0 for a, b in pairs], dtype=f64, device=x.device)

    ex = _Expansion(L, d, x.device, rows, impl)
    for p in range(P):
        xp = x64[p].contiguous()
        mom = ex.moments(xp, _moment_functions(xp, ledger))  # mu[g] = sum_j F(x_j) g(x_j)
        quad = torch.stack([xp[:, a] * xp[:, b] for a, b in pairs], dim=1) if ledger else None
        for h in range(H):
            Dh = D64[p, h]
            r, S = ex.evaluate(xp @ Dh, mom)  # a_i^T = beta x_i^T D; S[i, g] = sum_j e^{s_ij - r_i} g(x_j)
            row_shift[p, h] = r
            row_sum[p, h] = S[:, 0]
            row_x[p, h] = S[:, 1 : 1 + d]
            if ledger:
                row_q[p, h] = (quad * S[:, 1 + d :]) @ qw  # x_i^T [sum_j e_ij x_j x_j^T] x_i
            if colsums:
                if torch.equal(Dh, Dh.T):  # U^h symmetric: the column sums are the row sums
                    rho, zc = r, S[:, 1 : 1 + d]
                else:
                    rho, zc = ex.evaluate(xp @ Dh.T, mom[:, 1 : 1 + d])  # b_j^T = beta x_j^T D^T
                c = rho.max()
                col_shift[p, h] = c
                col_x[p, h] = torch.exp(rho - c)[:, None] * zc
    return PairSums(
        row_shift=row_shift,
        row_sum=row_sum,
        row_x=row_x,
        row_q=row_q,
        col_shift=col_shift,
        col_x=col_x,
    )
