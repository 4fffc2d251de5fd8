r"""NTK injectivity of attention: log-partition features modulo affine functions.

Source: arXiv 2605.17660 (NOTES.md §9).

For a token law :math:`\mu` on :math:`\mathbb R^d` and attention parameters :math:`\theta = (Q, K)` the
feature of a query point :math:`x` is the log-partition function of the attention scores,

.. math:: \varphi_\theta(x) = \log\int e^{\langle Qx, Ky\rangle}\,d\mu(y) = \Lambda_\mu(A^\top x),
          \qquad A = Q^\top K,

where :math:`\Lambda_\mu(v) = \log\int e^{\langle v, y\rangle}d\mu(y)` is the cumulant generating function
of :math:`\mu`. The companion work states that the attention NTK is injective if and only if these
functions, over all parameters, are linearly independent modulo affine functions of :math:`x`. Numerically
we take N query points :math:`x_1..x_N`, P random parameters, the feature matrix
:math:`F_{kp} = \varphi_{\theta_p}(x_k)`, an orthonormal basis :math:`U` of the complement of the affine
functions :math:`\{1, x^{(1)}, \dots, x^{(d)}\}` sampled at the points, and the singular values of
:math:`S = U^\top F/\sqrt{NP}` (so :math:`SS^\top` is the empirical Gram matrix of the projected features,
a Monte Carlo estimate of the kernel restricted to non-affine functions). Injectivity on the points means
:math:`\sigma_{\min}(S) > 0` once :math:`P \ge N - d - 1`; a single Dirac :math:`\delta_{y_0}` gives
:math:`\varphi_\theta(x) = \langle x, Ay_0\rangle`, linear, so :math:`S = 0` up to rounding.

The cumulant generating functions are closed forms (no quadrature):

* discrete :math:`\mu = \sum_a w_a\delta_{y_a}`: :math:`\Lambda(v) = \operatorname{logsumexp}_a(\log w_a +
  \langle v, y_a\rangle)` (the row log-sum-exp of the attention field, here at query points off the
  support; a Dirac is the case of one atom);
* uniform law on :math:`S^{d-1}`: :math:`\int e^{\langle v,y\rangle}d\sigma(y) =
  \Gamma(d/2)(2/r)^{d/2-1}I_{d/2-1}(r)`, :math:`r = |v|` (standard; e.g. Watson, *Statistics on Spheres*,
  1983, the von Mises-Fisher normaliser), evaluated with the exponentially scaled Bessel function;
* Gaussian mixture :math:`\sum_k w_k N(m_k, s^2 I)`: :math:`\Lambda(v) = \operatorname{logsumexp}_k(\log w_k
  + \langle v, m_k\rangle + s^2|v|^2/2)` (the Gaussian moment generating function).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, ive, logsumexp

__all__ = [
    "DiscreteLaw",
    "GaussianMixtureLaw",
    "INJECTIVITY_RTOL",
    "UniformSphereLaw",
    "affine_complement",
    "attention_parameters",
    "dirac",
    "injectivity_curve",
    "log_partition_features",
    "ntk_singular_values",
    "sphere_points",
]

#: sigma_min / feature scale above which the projected features count as linearly independent: far above
#: the rounding floor of float64 features (about 1e-16, what a single Dirac gives) and far below what the
#: injective laws of the study give (1e-6 .. 1e-3, see docs/studies/ntk_injectivity)
INJECTIVITY_RTOL = 1e-10


def _as_points(name: str, a, d: int | None = None) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != 2 or (d is not None and arr.shape[1] != d) or arr.shape[0] < 1:
        want = f"[k, {d}]" if d is not None else "[k, d]"
        raise ValueError(f"{name} must be an array of shape {want} with k >= 1: got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite: found {int((~np.isfinite(arr)).sum())} non-finite entries")
    return arr


def _as_weights(weights, k: int, name: str) -> np.ndarray:
    if weights is None:
        return np.full(k, 1.0 / k)
    w = np.asarray(weights, dtype=np.float64).ravel()
    if w.shape != (k,) or not np.all(np.isfinite(w)) or np.any(w <= 0) or abs(w.sum() - 1.0) > 1e-12:
        raise ValueError(
            f"{name} weights must be {k} positive numbers summing to 1 (a probability vector): got "
            f"{w.tolist()}; pass None for equal weights"
        )
    return w


@dataclass(frozen=True, eq=False)
class DiscreteLaw:
    """The law :math:`\\sum_a w_a \\delta_{y_a}` (equal weights when ``weights`` is None).

    Parameters
    ----------
    atoms : array, shape=[k, d]
    weights : array, shape=[k], or None
    """

    atoms: np.ndarray
    weights: np.ndarray | None = None
    name: str = "discrete"

    def __post_init__(self):
        atoms = _as_points("atoms", self.atoms)
        object.__setattr__(self, "atoms", atoms)
        object.__setattr__(self, "weights", _as_weights(self.weights, atoms.shape[0], "atom"))

    @property
    def d(self) -> int:
        return int(self.atoms.shape[1])

    def log_mgf(self, v: np.ndarray) -> np.ndarray:
        """:math:`\\log\\sum_a w_a e^{\\langle v, y_a\\rangle}`; v shape=[..., d] -> shape=[...]."""
        return logsumexp(v @ self.atoms.T + np.log(self.weights), axis=-1)


def dirac(point) -> DiscreteLaw:
    """The single Dirac law :math:`\\delta_{y_0}` (features affine in x: the non-injective case)."""
    return DiscreteLaw(np.asarray(point, dtype=np.float64).reshape(1, -1), name="dirac")


@dataclass(frozen=True)
class UniformSphereLaw:
    """The uniform probability law on :math:`S^{d-1}` (d >= 2)."""

    d: int
    name: str = "uniform_sphere"

    def __post_init__(self):
        if isinstance(self.d, bool) or not isinstance(self.d, (int, np.integer)) or self.d < 2:
            raise ValueError(f"UniformSphereLaw needs d >= 2 (the sphere S^(d-1)): got d={self.d!r}")

    def log_mgf(self, v: np.ndarray) -> np.ndarray:
        """:math:`\\log[\\Gamma(d/2)(2/r)^{d/2-1}I_{d/2-1}(r)]`, r = |v|; shape=[..., d] -> [...]."""
        nu = self.d / 2 - 1
        r = np.linalg.norm(v, axis=-1)
        small = r < 2.0
        rs = np.where(small, 2.0, r)
        big = gammaln(self.d / 2) - nu * np.log(rs / 2) + np.log(ive(nu, rs)) + rs
        # r < 2: Gamma(nu+1) (2/r)^nu I_nu(r) = 1 + sum_{k>=1} (r^2/4)^k / (k! (nu+1)_k), summed term by term
        # and passed to log1p, so that Lambda ~ r^2/(2d) keeps its relative precision as r -> 0
        q = np.square(np.where(small, r, 0.0)) / 4
        term, tail = np.ones_like(q), np.zeros_like(q)
        for k in range(1, 30):  # terms < (1)^k / (k!)^2: 30 terms reach 1e-64
            term = term * q / (k * (nu + k))
            tail = tail + term
        return np.where(small, np.log1p(tail), big)


@dataclass(frozen=True, eq=False)
class GaussianMixtureLaw:
    """The mixture :math:`\\sum_k w_k N(m_k, s^2 I_d)`.

    Parameters
    ----------
    means : array, shape=[k, d]
    sigma : float
        Common standard deviation s > 0.
    weights : array, shape=[k], or None
    """

    means: np.ndarray
    sigma: float
    weights: np.ndarray | None = None
    name: str = "gaussian_mixture"

    def __post_init__(self):
        means = _as_points("means", self.means)
        object.__setattr__(self, "means", means)
        if not (isinstance(self.sigma, (int, float)) and math.isfinite(self.sigma) and self.sigma > 0):
            raise ValueError(f"sigma must be a finite number > 0 (the components' std): got {self.sigma!r}")
        object.__setattr__(self, "weights", _as_weights(self.weights, means.shape[0], "mixture"))

    @property
    def d(self) -> int:
        return int(self.means.shape[1])

    def log_mgf(self, v: np.ndarray) -> np.ndarray:
        """:math:`\\log\\sum_k w_k e^{\\langle v, m_k\\rangle + s^2|v|^2/2}`; shape=[..., d] -> [...]."""
        quad = 0.5 * self.sigma**2 * np.square(v).sum(-1, keepdims=True)
        return logsumexp(v @ self.means.T + quad + np.log(self.weights), axis=-1)


TokenLaw = DiscreteLaw | UniformSphereLaw | GaussianMixtureLaw


def sphere_points(N: int, d: int, *, seed: int) -> np.ndarray:
    """N points uniform on :math:`S^{d-1}` (normalised Gaussians), shape=[N, d], reproducible (``seed``)."""
    z = np.random.default_rng(seed).standard_normal((N, d))
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def attention_parameters(P: int, d: int, *, seed: int, scale: float = 1.0) -> np.ndarray:
    """P products :math:`A = Q^\\top K` of independent Gaussian Q, K with entries :math:`N(0, s^2/d)`.

    Returns
    -------
    array, shape=[P, d, d]
        Score matrices, so that :math:`\\langle Qx, Ky\\rangle = \\langle x, Ay\\rangle`.
    """
    if isinstance(P, bool) or not isinstance(P, (int, np.integer)) or P < 1:
        raise ValueError(f"the number of parameters P must be an integer >= 1: got {P!r}")
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number > 0 (the entries' std times sqrt(d)): got {scale!r}")
    rng = np.random.default_rng(seed)
    sd = scale / math.sqrt(d)
    Q = rng.standard_normal((P, d, d)) * sd
    K = rng.standard_normal((P, d, d)) * sd
    return np.swapaxes(Q, -1, -2) @ K


def log_partition_features(x: np.ndarray, A: np.ndarray, law: TokenLaw) -> np.ndarray:
    """Log-partition features :math:`F_{kp} = \\Lambda_\\mu(A_p^\\top x_k)` of the module docstring.

    Parameters
    ----------
    x : array, shape=[N, d]
        Query points.
    A : array, shape=[P, d, d]
        Score matrices :math:`Q^\\top K`.
    law : DiscreteLaw, UniformSphereLaw or GaussianMixtureLaw

    Returns
    -------
    array, shape=[N, P]
    """
    x = _as_points("x", x)
    d = x.shape[1]
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 3 or A.shape[1:] != (d, d):
        raise ValueError(f"A must have shape [P, {d}, {d}] (d of the points x): got {A.shape}")
    if law.d != d:
        raise ValueError(f"the token law lives in R^{law.d} but the points x in R^{d}; use one dimension")
    v = np.einsum("na,pab->npb", x, A)  # A_p^T x_n
    return law.log_mgf(v)


def affine_complement(x: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the vectors on the N points orthogonal to the affine functions 1, x^(1)..x^(d).

    Returns
    -------
    array, shape=[N, N - r]
        r = rank of [1, x] (d + 1 for points in general position).

    Raises
    ------
    ValueError
        If N <= d + 1 (nothing is left once the affine functions are projected out).
    """
    x = _as_points("x", x)
    N, d = x.shape
    if N <= d + 1:
        raise ValueError(
            f"affine functions on {N} points in R^{d} span everything: need N > d + 1 = {d + 1} points; "
            "take more query points"
        )
    aff = np.concatenate([np.ones((N, 1)), x], axis=1)
    u, s, _ = np.linalg.svd(aff, full_matrices=True)
    rank = int((s > s[0] * N * np.finfo(float).eps).sum())
    return u[:, rank:]


def ntk_singular_values(x: np.ndarray, A: np.ndarray, law: TokenLaw) -> dict:
    """Singular values of the affine-projected, normalised feature matrix :math:`S = U^\\top F/\\sqrt{NP}`.

    Returns
    -------
    dict
        ``sv`` (descending, length min(N - r, P)), ``sigma_min`` (the (N-r)-th singular value; 0 when
        P < N - r, the rank cannot reach the dimension), ``scale`` (:math:`|F|_F/\\sqrt{NP}`, the size of
        the unprojected features, floor 1e-300), ``rel_min`` = sigma_min / scale, ``dim`` = N - r.
    """
    F = log_partition_features(x, A, law)
    N, P = F.shape
    U = affine_complement(x)
    S = U.T @ F / math.sqrt(N * P)
    sv = np.linalg.svd(S, compute_uv=False)
    dim = U.shape[1]
    sigma_min = float(sv[dim - 1]) if P >= dim else 0.0
    scale = max(float(np.linalg.norm(F) / math.sqrt(N * P)), 1e-300)
    return {"sv": sv, "sigma_min": sigma_min, "scale": scale, "rel_min": sigma_min / scale, "dim": dim}


def injectivity_curve(
    law: TokenLaw,
    x: np.ndarray,
    P_values: list[int],
    *,
    seed: int,
    scale: float = 1.0,
    rtol: float = INJECTIVITY_RTOL,
) -> dict:
    """Smallest singular value of the projected features as the number of parameters grows.

    The parameter sets are nested (the first P of ``max(P_values)`` draws), so a curve shows what adding
    parameters does.

    Parameters
    ----------
    law : token law
    x : array, shape=[N, d]
        Query points.
    P_values : list of int
        Numbers of parameters (each >= 1).
    seed : int
        Seed of the parameters (:func:`attention_parameters`).
    scale : float
        Parameter scale of :func:`attention_parameters`.
    rtol : float
        Decision threshold on ``rel_min`` at the largest P.

    Returns
    -------
    dict
        ``P``, ``sigma_min``, ``rel_min``, ``sigma_max``, ``scale`` (one entry per P), ``dim``,
        ``sv_last`` (all singular
        values at the largest P), and ``injective``: rel_min at the largest P > rtol and largest P >= dim.
    """
    Ps = sorted(int(p) for p in P_values)
    if not Ps or Ps[0] < 1:
        raise ValueError(f"P_values must be a non-empty list of integers >= 1: got {P_values!r}")
    A = attention_parameters(Ps[-1], x.shape[1], seed=seed, scale=scale)
    rows = [ntk_singular_values(x, A[:P], law) for P in Ps]
    last = rows[-1]
    return {
        "law": law.name,
        "P": Ps,
        "sigma_min": [r["sigma_min"] for r in rows],
        "rel_min": [r["rel_min"] for r in rows],
        "sigma_max": [float(r["sv"][0]) for r in rows],
        "scale": [r["scale"] for r in rows],
        "dim": last["dim"],
        "sv_last": last["sv"].tolist(),
        "injective": bool(Ps[-1] >= last["dim"] and last["rel_min"] > rtol),
    }
