r"""Quantities of the main paper's theorems (arXiv 2605.18870, Sec. 4.4 and 5): pure functions.

* head laws Theta (:func:`draw_heads`): i.i.d. heads from a symmetric Gaussian law, the stationary law
  of the Sec. 6 Ornstein-Uhlenbeck process, or a two-point law; the empirical head law
  :math:`\Theta^H = \frac1H\sum_h\delta_{D_h}` approximates the mean-field :math:`\Theta` (NOTES.md §8);
* optimal transport between head clouds in the Frobenius metric (:func:`head_cloud_wasserstein2`) and the
  metric derivative :math:`|\Theta'_t|` of a recorded head law (:func:`head_metric_derivative`), the
  object of assumption (121) / Thm 4.16 (NOTES.md §4, §8);
* the Monte Carlo decomposition of :math:`G^2` over heads (:func:`gradient_mc_decomposition`, derived):
  :math:`\mathbb E\,G^2(\mu;\Theta^H) \approx G^2_\infty(\mu) + c(\mu)/H`;
* rate fits: :func:`fit_rate` (a power law over a stated range, with its 95% interval).

Statements marked *derived* are ours (NOTES.md §8 asks for the label), not the paper's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import ot
import torch
from scipy.spatial.distance import cdist

from ..observables.dissipation import mobility_from_lse
from ..observables.inputs import field_eval
from .fits import fit_power_law

__all__ = [
    "HEAD_LAWS",
    "draw_heads",
    "PERTURBATION_SHAPES",
    "fit_gronwall",
    "fit_rate",
    "gaussian_wasserstein2",
    "gradient_mc_decomposition",
    "head_cloud_wasserstein2",
    "head_metric_derivative",
    "ou_law_length",
    "per_head_velocities",
    "perturb_tokens",
    "weight_budget",
]

#: names of the head laws of :func:`draw_heads`
HEAD_LAWS = ("symmetric_gaussian", "ou_stationary", "two_point")


def _default_points(d: int) -> tuple[np.ndarray, np.ndarray]:
    """The two atoms of the default two-point law: A = 2 I, B = -I + (e_1 e_2^T + e_2 e_1^T)."""
    A = 2.0 * np.eye(d)
    B = -np.eye(d)
    B[0, 1] = B[1, 0] = 1.0
    return A, B


def draw_heads(
    law: str,
    paths: int,
    H: int,
    d: int,
    *,
    seed: int,
    scale: float = 1.0,
    sigma2: float = 1.0,
    p: float = 0.5,
    points: Sequence | None = None,
) -> np.ndarray:
    r"""i.i.d. heads from a law Theta, shape [paths, H, d, d] (float64).

    * ``symmetric_gaussian``: :math:`D = s(Z + Z^\top)`, Z with i.i.d. N(0, 1) entries (the authors'
      initial heads, NOTES.md §2), ``s = scale``;
    * ``ou_stationary``: :math:`D = I + \sqrt{\sigma^2}\,(Z + Z^\top)/2`, the stationary law of the Sec. 6
      OU process with F = I (NOTES.md §2: :math:`\mathrm{Var}\,S_{aa} = \sigma^2`,
      :math:`\mathrm{Var}\,S_{ab} = \sigma^2/2`);
    * ``two_point``: :math:`D = A` with probability p, B otherwise (``points = (A, B)``; default
      A = 2I, B = -I + e_1e_2^T + e_2e_1^T).

    Parameters
    ----------
    law : str
        One of :data:`HEAD_LAWS`.
    paths, H, d : int
        Independent draws (paths), heads per draw, dimension.
    seed : int
        Seed of a NumPy ``default_rng``; the same seed gives the same heads.
    scale, sigma2, p, points
        Parameters of the laws (see above).

    Raises
    ------
    ValueError
        Unknown law, p outside [0, 1], sigma2 < 0, scale <= 0, points of the wrong shape.

    Examples
    --------
    >>> draw_heads("two_point", 1, 4, 3, seed=0, p=1.0)[0, :, 0, 0]
    array([2., 2., 2., 2.])
    """
    if law not in HEAD_LAWS:
        raise ValueError(f"law must be one of {', '.join(HEAD_LAWS)}: got {law!r}")
    for name, v, low in (("paths", paths, 1), ("H", H, 1), ("d", d, 2)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise ValueError(f"{name} must be an integer >= {low}: got {v!r}")
    rng = np.random.default_rng(seed)
    if law == "symmetric_gaussian":
        if not scale > 0:
            raise ValueError(f"scale must be > 0: got {scale!r}")
        Z = rng.standard_normal((paths, H, d, d))
        return scale * (Z + np.swapaxes(Z, -1, -2))
    if law == "ou_stationary":
        if not sigma2 >= 0:
            raise ValueError(f"sigma2 must be >= 0 (a variance): got {sigma2!r}")
        Z = rng.standard_normal((paths, H, d, d))
        return np.eye(d) + math.sqrt(sigma2) * (Z + np.swapaxes(Z, -1, -2)) / 2
    if not 0 <= p <= 1:
        raise ValueError(f"p must lie in [0, 1] (a probability): got {p!r}")
    A, B = _default_points(d) if points is None else (np.asarray(q, float) for q in points)
    if A.shape != (d, d) or B.shape != (d, d):
        raise ValueError(f"the two points must be {d} x {d} matrices: got {A.shape} and {B.shape}")
    pick = rng.random((paths, H)) < p
    return np.where(pick[..., None, None], A, B)


def head_cloud_wasserstein2(A, B) -> float:
    r"""Exact W2 between two uniform head clouds in the Frobenius metric (``ot.emd2``).

    .. math:: W_2(\Theta_A, \Theta_B)^2 = \min_{\pi\in\Pi(\frac1H\mathbf 1, \frac1K\mathbf 1)}
              \sum_{h,k}\pi_{hk}\,\|A_h - B_k\|_F^2

    Parameters
    ----------
    A : array-like, shape=[H, d, d]
    B : array-like, shape=[K, d, d]

    Returns
    -------
    float
    """
    a = np.asarray(A, float).reshape(len(A), -1)
    b = np.asarray(B, float).reshape(len(B), -1)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"the head clouds must have matrices of one size: got {A.shape} and {B.shape}")
    # differences, not |a|^2 + |b|^2 - 2ab: equal clouds then have W2 = 0 exactly, not sqrt(round-off)
    M = cdist(a, b, metric="sqeuclidean")
    wa, wb = np.full(len(a), 1.0 / len(a)), np.full(len(b), 1.0 / len(b))
    cost = ot.emd2(wa, wb, M, numItermax=max(100_000, 20 * M.size))
    return math.sqrt(max(float(cost), 0.0))


def head_metric_derivative(heads, times) -> tuple[np.ndarray, np.ndarray]:
    r"""Metric derivative :math:`|\Theta'_t|` of a recorded empirical head law in W2, and its integral.

    .. math:: |\Theta'|(t_{k+1/2}) \approx \frac{W_2(\Theta_{t_k}, \Theta_{t_{k+1}})}{t_{k+1} - t_k},\qquad
              \int_0^{t_K}|\Theta'_t|\,dt \approx \sum_{k<K} W_2(\Theta_{t_k}, \Theta_{t_{k+1}})

    (Thm 4.16, assumption (121); NOTES.md §4, §8). The sum is the length of the recorded polygon, a
    lower bound of the length of the path that converges as the records refine.

    Parameters
    ----------
    heads : array-like, shape=[K, H, d, d]
        The heads at K records.
    times : array-like, shape=[K]
        Increasing record times.

    Returns
    -------
    speed : ndarray, shape=[K-1]
        The difference quotients.
    length : ndarray, shape=[K]
        The cumulative length, ``length[0] = 0``.
    """
    D = np.asarray(heads, float)
    t = np.asarray(times, float)
    if D.ndim != 4 or D.shape[0] != t.shape[0] or D.shape[0] < 2:
        raise ValueError(
            f"heads must have shape (K, H, d, d) with K = len(times) >= 2: got {D.shape} and {t.shape}"
        )
    if np.any(np.diff(t) <= 0):
        raise ValueError(f"times must increase strictly: got {t.tolist()}")
    steps = np.array([head_cloud_wasserstein2(D[k], D[k + 1]) for k in range(len(t) - 1)])
    return steps / np.diff(t), np.concatenate([[0.0], np.cumsum(steps)])


def _psd_sqrt(S: np.ndarray) -> np.ndarray:
    w, U = np.linalg.eigh(0.5 * (S + S.T))
    # round-off eigenvalues of a singular S (e.g. the duplicated entries of symmetric heads) set to 0:
    # their square roots (~1e-8) would otherwise bias W2 between nearby laws by percents
    w = np.where(w > 1e-12 * max(float(w.max()), 0.0), w, 0.0)
    return (U * np.sqrt(w)) @ U.T


def gaussian_wasserstein2(m1, S1, m2, S2) -> float:
    r"""W2 between two Gaussian laws (the Bures formula), e.g. the law of an OU head at two times.

    .. math:: W_2^2 = \|m_1 - m_2\|^2 + \mathrm{tr}\Bigl(S_1 + S_2
              - 2\bigl(S_2^{1/2} S_1 S_2^{1/2}\bigr)^{1/2}\Bigr)

    Used for :math:`|\Theta'_t|` *in law*: the Sec. 6 OU heads started from a Gaussian law stay Gaussian,
    so the metric derivative of their marginal law is that of its mean and covariance (NOTES.md §8: OU
    has finite :math:`\int|\Theta'_t|dt` in law, not pathwise).

    Parameters
    ----------
    m1, m2 : array-like, shape=[k]
    S1, S2 : array-like, shape=[k, k]
        Symmetric positive semi-definite (singular allowed: e.g. the 9 entries of a symmetric 3 x 3 head).

    Returns
    -------
    float
    """
    m1, m2 = np.asarray(m1, float).ravel(), np.asarray(m2, float).ravel()
    S1, S2 = np.asarray(S1, float), np.asarray(S2, float)
    if S1.shape != (m1.size, m1.size) or S2.shape != S1.shape or m2.shape != m1.shape:
        raise ValueError(
            f"means of one length k and k x k covariances expected: got {m1.shape}, {S1.shape}, "
            f"{m2.shape}, {S2.shape}"
        )
    r2 = _psd_sqrt(S2)
    cross = _psd_sqrt(r2 @ S1 @ r2)
    val = float(np.sum((m1 - m2) ** 2) + np.trace(S1) + np.trace(S2) - 2 * np.trace(cross))
    return math.sqrt(max(val, 0.0))


def weight_budget(heads, times, scale=None) -> dict:
    r"""The weight budget :math:`M_\theta(t)` of Sec. 5 and the derived a-priori Gronwall rate (NOTES.md §8).

    .. math:: M_\theta(t) = \int_0^t\!\int\|D\|_F^2\,d\Theta_\tau\,d\tau
              = \int_0^t \frac1H\sum_h \|c(\tau) D_h(\tau)\|_F^2\,d\tau,\qquad
              R(t) = \int_0^t \frac1H\sum_h (\lambda_h + \lambda_h^2)\,e^{2\lambda_h}\,d\tau,

    :math:`\lambda_h = \|c D_h\|_{op}`, with the effective heads :math:`c(\tau)D_h` (``scale`` = c, e.g.
    the layer scaling :math:`c = 1/((t_0 + \tau)\sqrt H)`, :meth:`attnflow.TransformerModel.head_scale`) and
    the normalised head law :math:`\Theta^H = \frac1H\sum_h\delta_{D_h}`. *Derived* (NOTES.md §8): R is a
    finite-particle Gronwall rate whose leading term is M. Trapezoid rule over the records.

    Parameters
    ----------
    heads : array-like, shape=[K, H, d, d]
    times : array-like, shape=[K]
    scale : callable or None
        ``scale(t) -> c(t)``; None: c = 1.

    Returns
    -------
    dict
        ``M`` and ``R``: ndarrays, shape=[K] (cumulative, 0 at times[0]); ``mean_sq_norm``: the integrand
        of M at each record, shape=[K].
    """
    D = np.asarray(heads, float)
    t = np.asarray(times, float)
    if D.ndim != 4 or D.shape[0] != t.shape[0] or D.shape[0] < 2:
        raise ValueError(
            f"heads must have shape (K, H, d, d) with K = len(times) >= 2: got {D.shape} and {t.shape}"
        )
    c = np.ones_like(t) if scale is None else np.array([float(scale(tau)) for tau in t])
    sq = (c**2) * np.mean(np.sum(D**2, axis=(-1, -2)), axis=1)
    lam = c[:, None] * np.linalg.norm(D, ord=2, axis=(-2, -1))
    rate = np.mean((lam + lam**2) * np.exp(2 * lam), axis=1)

    def cumtrapz(y):
        return np.concatenate([[0.0], np.cumsum(0.5 * (y[1:] + y[:-1]) * np.diff(t))])

    return {"M": cumtrapz(sq), "R": cumtrapz(rate), "mean_sq_norm": sq}


def ou_law_length(times, *, d: int = 3, sigma2: float = 1.0, s0: float = 4.0) -> np.ndarray:
    r"""*Derived*: the W2 length of the marginal law of one Sec. 6 OU head, in closed form.

    With f = I - D, g = sqrt(2 sigma^2), symmetric noise and D(0) = Z + Z^T (NOTES.md §2), D(t) is Gaussian
    with mean :math:`m(t) = (1 - e^{-t}) I` and covariance :math:`s(t) P`, :math:`s(t) = \sigma^2 +
    (s_0 - \sigma^2)e^{-2t}` (s_0 = 4), P the covariance of :math:`(Z + Z^\top)/2` (tr P = d(d+1)/2).
    Gaussians with proportional covariances are at
    :math:`W_2^2 = \|m_1 - m_2\|^2 + (\sqrt{s_1} - \sqrt{s_2})^2\,\mathrm{tr}P`, so

    .. math:: |\Theta'_t| = \sqrt{d\,e^{-2t} + \Bigl(\tfrac{d}{dt}\sqrt{s(t)}\Bigr)^2 \tfrac{d(d+1)}{2}},

    integrable on [0, inf): OU has finite length in law (NOTES.md §8), while each path has infinite length.

    Parameters
    ----------
    times : array-like, shape=[K]
        Increasing, from 0.

    Returns
    -------
    ndarray, shape=[K]
        :math:`\int_0^{t_k}|\Theta'_t|\,dt` (adaptive quadrature per interval).
    """
    from scipy.integrate import quad

    t = np.asarray(times, float)
    trP = d * (d + 1) / 2

    def speed(u: float) -> float:
        su = sigma2 + (s0 - sigma2) * math.exp(-2 * u)
        dsqrt = -(s0 - sigma2) * math.exp(-2 * u) / math.sqrt(su)
        return math.sqrt(d * math.exp(-2 * u) + dsqrt**2 * trP)

    pieces = [quad(speed, a, b, epsabs=1e-12, epsrel=1e-10)[0] for a, b in zip(t[:-1], t[1:], strict=True)]
    return np.concatenate([[quad(speed, 0.0, t[0])[0] if t[0] > 0 else 0.0], pieces]).cumsum()


def per_head_velocities(
    x: torch.Tensor, D: torch.Tensor, beta: float = 1.0, *, chunk: int = 256
) -> torch.Tensor:
    r"""The velocity of each head, :math:`V^h_i = P^\perp_{x_i} D_h\sum_j A^h_{ij} x_j` (eq. (10), V = D).

    Parameters
    ----------
    x : Tensor, shape=[n, d]
    D : Tensor, shape=[H, d, d]
    chunk : int
        Heads evaluated at once (memory ~ chunk n^2 floats).

    Returns
    -------
    Tensor, shape=[H, n, d]
        Their mean over h is the velocity v_i of the multi-head field.
    """
    out = []
    for Dc in torch.split(D, chunk):  # chunks bound the [chunk, n, n] attention arrays
        xs = x.unsqueeze(0).expand(Dc.shape[0], -1, -1).contiguous()
        out.append(field_eval(xs, Dc.unsqueeze(1), beta, ledger=False)[2].velocity)
    return torch.cat(out)


def _velocities_and_mobility(
    x: torch.Tensor, D: torch.Tensor, beta: float, chunk: int = 256
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`per_head_velocities` and the head mobilities (:func:`~attnflow.observables.mobility`,
    Cor. 4.8) from one field evaluation per chunk of heads: the mobility from the lse of the same
    evaluation (:func:`~attnflow.observables.dissipation.mobility_from_lse`; the same numbers as a separate
    ``mobility`` call, bit for bit: tests/test_theorems_mean_field.py),
    float64."""
    V, m = [], []
    for Dc in torch.split(D, chunk):
        xs = x.unsqueeze(0).expand(Dc.shape[0], -1, -1).contiguous()
        fe = field_eval(xs, Dc.unsqueeze(1), beta, ledger=False)[2]
        V.append(fe.velocity)
        m.append(mobility_from_lse(fe.lse, x.shape[0])[:, 0])
    return torch.cat(V).double(), torch.cat(m).double()


def gradient_mc_decomposition(x: torch.Tensor, D: torch.Tensor, beta: float = 1.0) -> dict:
    r"""*Derived*: the head Monte Carlo decomposition of the paper's :math:`G^2` at frozen tokens.

    With heads i.i.d. from Theta, :math:`v_i = \frac1H\sum_h V^h_i` is a mean of i.i.d. vectors, so

    .. math:: \mathbb E|v_i|^2 = |\bar V_i|^2 + \frac1H\,\mathrm{tr}\,\mathrm{Cov}_\Theta(V_i),\qquad
              \mathbb E\,G^2(\mu;\Theta^H) \approx G^2_\infty(\mu) + \frac{c(\mu)}{H},

    :math:`G^2_\infty = \frac1n\sum_i b(x_i)|\bar V_i|^2`,
    :math:`c = \frac1n\sum_i b(x_i)\,\mathrm{tr}\,\mathrm{Cov}(V_i)`, with the mean, covariance and
    harmonic-mean mobility b (eq. (36)) estimated from the given heads (a large sample of Theta). The
    fluctuation of b with H is neglected (a further O(1/H) correction to the mean-field part).

    Parameters
    ----------
    x : Tensor, shape=[n, d]
    D : Tensor, shape=[H, d, d]
        A large i.i.d. sample of Theta (H >= 2).

    Returns
    -------
    dict
        ``G2_mean_field`` (the unbiased estimate
        :math:`\frac1n\sum_i b_i(|\bar V_i|^2 - \mathrm{tr\,Cov}_i/K)`
        from the K heads), ``c``, and ``G2_sample``: the G^2 of this very sample (= G2_mean_field + c/K).
    """
    if D.shape[0] < 2:
        raise ValueError(f"the decomposition needs a sample of at least 2 heads: got {D.shape[0]}")
    V, m = _velocities_and_mobility(x, D, beta)  # [H, n, d], [H, n]
    b = 1.0 / (1.0 / m).mean(0)  # harmonic mean over heads, eq. (36)
    Vbar = V.mean(0)
    var = V.var(0, unbiased=True).sum(-1)  # tr Cov, [n]
    K = D.shape[0]
    sample = float((b * (Vbar**2).sum(-1)).mean())
    c = float((b * var).mean())
    # |Vbar|^2 over-estimates |E V|^2 by tr Cov / K: remove the sample's own Monte Carlo bias
    return {"G2_mean_field": sample - c / K, "c": c, "G2_sample": sample}


def fit_rate(x, y, *, lo: float | None = None, hi: float | None = None) -> dict:
    r"""Fit :math:`y = a x^b` on the points with ``lo <= x <= hi`` (:func:`~.fits.fit_power_law`).

    Returns
    -------
    dict
        The fit (``b``, ``b_ci`` 95% t interval, ...) with ``range = [min x, max x]`` used and ``points``;
        or ``{"error": ...}`` when fewer than 3 positive points are in range.
    """
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(ys) & (ys > 0)
    if lo is not None:
        keep &= xs >= lo
    if hi is not None:
        keep &= xs <= hi
    if keep.sum() < 3:
        return {"error": f"fewer than 3 positive points in range [{lo}, {hi}]: {int(keep.sum())}"}
    f = fit_power_law(xs[keep], ys[keep])
    f["range"] = [float(xs[keep].min()), float(xs[keep].max())]
    f["points"] = int(keep.sum())
    return f


#: perturbation shapes of :func:`perturb_tokens`
PERTURBATION_SHAPES = ("random", "eigen", "one_token")


def perturb_tokens(x, eta: float, shape: str, *, seed: int = 0, D=None) -> np.ndarray:
    r"""A perturbed cloud :math:`u^\eta_0` in the W2 ball of radius eta around ``x`` (input stability, (127)).

    Each moved token follows a geodesic, :math:`x_i \mapsto x_i\cos\theta_i + w_i\sin\theta_i` with
    :math:`w_i` a unit tangent vector at :math:`x_i`:

    * ``random``: :math:`w_i` uniform tangent directions, :math:`\theta_i = \eta` for every token;
    * ``eigen``: :math:`w_i \propto P^\perp_{x_i} e`, e the top eigenvector of the mean head
      :math:`\frac1H\sum_h D_h` (``D`` required), :math:`\theta_i = \eta`;
    * ``one_token``: only token 0 moves, by :math:`\theta_0 = \sqrt n\,\eta` (at most pi).

    With the identity coupling the cost is :math:`\frac1n\sum_i\theta_i^2 = \eta^2`, so
    :math:`W_2(u^\eta_0, u_0) \le \eta` (geodesic cost), with equality for small eta.

    Parameters
    ----------
    x : array-like, shape=[n, d]
        Unit vectors.
    eta : float
        Radius, > 0.
    shape : str
        One of :data:`PERTURBATION_SHAPES`.
    seed : int
    D : array-like, shape=[H, d, d], or None

    Returns
    -------
    ndarray, shape=[n, d]
    """
    x = np.asarray(x, float)
    if shape not in PERTURBATION_SHAPES:
        raise ValueError(f"shape must be one of {', '.join(PERTURBATION_SHAPES)}: got {shape!r}")
    if not (math.isfinite(eta) and eta > 0):
        raise ValueError(f"eta must be a finite radius > 0: got {eta!r}")
    n, d = x.shape
    rng = np.random.default_rng(seed)
    theta = np.full(n, float(eta))
    if shape == "random":
        w = rng.standard_normal((n, d))
    elif shape == "eigen":
        if D is None:
            raise ValueError("shape 'eigen' needs the heads D (H, d, d): pass D=...")
        M = np.asarray(D, float).mean(0)
        vals, vecs = np.linalg.eigh(0.5 * (M + M.T))
        w = np.broadcast_to(vecs[:, -1], (n, d)).copy()
        w += 1e-9 * rng.standard_normal((n, d))  # a token parallel to e gets a random direction
    else:
        w = rng.standard_normal((n, d))
        theta = np.zeros(n)
        theta[0] = min(math.pi, math.sqrt(n) * eta)
    w -= np.sum(w * x, axis=1, keepdims=True) * x
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    y = x * np.cos(theta)[:, None] + w * np.sin(theta)[:, None]
    return y / np.linalg.norm(y, axis=1, keepdims=True)


def fit_gronwall(times, distances, *, level: float = 0.95) -> dict:
    r"""Fit the Gronwall form (127), :math:`W(t) = C_1 W(0) e^{C_2 t}`, by least squares on log W.

    .. math:: \log\frac{W(t)}{W(0)} = \log C_1 + C_2 t

    Parameters
    ----------
    times : array-like, shape=[K]
    distances : array-like, shape=[K]
        W(t) > 0, ``distances[0]`` = W(0).

    Returns
    -------
    dict
        ``C1``, ``C2``, their ``level`` t intervals ``C1_ci``, ``C2_ci``, ``range`` (the times fitted),
        ``max_ratio`` = max_t W(t)/(W(0) e^{C2 t}) (the C1 that makes the bound hold at every record).

    Examples
    --------
    >>> t = [0.0, 1.0, 2.0, 3.0]
    >>> round(fit_gronwall(t, [2 * math.exp(0.5 * s) for s in t])["C2"], 12)
    0.5
    """
    t = np.asarray(times, float)
    W = np.asarray(distances, float)
    if t.shape != W.shape or t.size < 3:
        raise ValueError(f"times and distances need one length >= 3: got {t.shape} and {W.shape}")
    if not np.all(np.isfinite(W)) or np.any(W <= 0):
        raise ValueError("distances must be finite and > 0 (a zero distance has no logarithm)")
    f = fit_power_law(np.exp(t), W / W[0], level=level)  # log y = log a + b t: a power law in e^t
    C2 = f["b"]
    return {
        "C1": f["a"],
        "C1_ci": f["a_ci"],
        "C2": C2,
        "C2_ci": f["b_ci"],
        "range": [float(t[0]), float(t[-1])],
        "max_ratio": float(np.max(W / (W[0] * np.exp(C2 * t)))),
        "level": level,
    }
