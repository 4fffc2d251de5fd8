r"""Linear stability of the uniform state of noisy tokens: the critical noise eps_c (*derived*, see
``docs/noisy_tokens.md``).

Model: one head D = I (or H identical heads), inverse temperature beta, ``ascent`` (s = +1), tokens with
Brownian motion of generator eps Delta. The mean-field density u (w.r.t. the surface measure) solves

.. math:: \partial_t u = \varepsilon\Delta u - s\,\nabla\cdot(u\,v[u]),\qquad
          v_{\rm USA}[u](x) = P_x\!\int e^{\beta\langle x,y\rangle}y\,u(y)\,d\sigma(y),\quad
          v_{\rm SA}[u] = v_{\rm USA}[u] \Big/ \!\int e^{\beta\langle x,y\rangle}u(y)\,d\sigma(y).

The uniform density :math:`u_0 = 1/|S^{d-1}|` is stationary. Since
:math:`P_x\int e^{\beta\langle x,y\rangle}y\,\delta(y)\,d\sigma = \nabla_S\,\frac1\beta(K\delta)(x)` with
:math:`K\delta = \int e^{\beta\langle\cdot,y\rangle}\delta(y)\,d\sigma(y)`, and the SA denominator enters only
through :math:`v_{\rm USA}[u_0] = 0`, a perturbation along a spherical harmonic of degree l grows at

.. math:: \sigma_l = l(l+d-2)\Big(s\,c\,\frac{\lambda_l(\beta)}{\beta} - \varepsilon\Big),\qquad
          c_{\rm USA} = u_0,\quad c_{\rm SA} = \frac{1}{\lambda_0(\beta)},

with the Funk-Hecke eigenvalues of :math:`e^{\beta t}` on :math:`S^{d-1}`,
:math:`u_0\lambda_l(\beta) = \Gamma(d/2)\,(2/\beta)^{d/2-1} I_{l+d/2-1}(\beta)` (modified Bessel functions).
They decrease in l, so the first mode to destabilise is l = 1 (the mean :math:`\frac1n\sum_i x_i`), and for
``ascent`` the uniform state is linearly unstable exactly when :math:`\varepsilon < \varepsilon_c` with

.. math:: \varepsilon_c^{\rm USA} = \Gamma(\tfrac d2)\Big(\frac2\beta\Big)^{d/2-1}
          \frac{I_{d/2}(\beta)}{\beta},
          \qquad \varepsilon_c^{\rm SA} = \frac{I_{d/2}(\beta)}{\beta\,I_{d/2-1}(\beta)};

on S^1: :math:`I_1(\beta)/\beta` and :math:`I_1(\beta)/(\beta I_0(\beta))`; on S^2:
:math:`i_1(\beta)/\beta` and :math:`(\coth\beta - 1/\beta)/\beta` (:math:`i_l` modified spherical Bessel);
both tend to 1/d as beta -> 0. For ``descent`` every :math:`\sigma_l < 0`: the uniform state is stable for
all eps >= 0.

Finite n (*derived*): the mean :math:`m = \frac1n\sum_i x_i` is, to linear order, an Ornstein-Uhlenbeck
process with rate :math:`(d-1)(\varepsilon - \varepsilon_c)` and the noise of free Brownian tokens, so for
:math:`\varepsilon > \varepsilon_c` the stationary :math:`n\,\mathbb E|m|^2 = \varepsilon/(\varepsilon -
\varepsilon_c)` (1 without interaction). Hence :math:`1/(n\,\mathbb E|m|^2) = 1 - \varepsilon_c/\varepsilon`
is linear in 1/eps with slope :math:`-\varepsilon_c`: :func:`fit_critical_noise` estimates eps_c from the
disordered side. With n tokens the self-pair j = i is in every row sum (it adds e^beta/n to the SA
denominator and nothing to the projected numerator) and n - 1 tokens act on each one:
:func:`critical_token_noise` with ``n`` gives this finite-n value.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, ive

__all__ = ["critical_token_noise", "fit_critical_noise", "funk_hecke_eigenvalue", "growth_rate"]

KERNELS = ("usa", "softmax")


def _check(beta: float, d: int, attention: str) -> None:
    if not (isinstance(beta, (int, float)) and math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a finite number > 0: got {beta!r}; e.g. beta=1")
    if isinstance(d, bool) or not isinstance(d, int) or d < 2:
        raise ValueError(f"d must be an integer >= 2 (tokens on S^(d-1)): got {d!r}; e.g. d=3")
    if attention not in KERNELS:
        raise ValueError(
            f"the linear stability of the uniform state is derived for attention 'usa' and 'softmax': "
            f"got {attention!r}; use one of those"
        )


def funk_hecke_eigenvalue(l: int, beta: float, d: int) -> float:
    r"""The eigenvalue :math:`u_0\lambda_l(\beta) = \Gamma(d/2)(2/\beta)^{d/2-1}I_{l+d/2-1}(\beta)` of the
    averaging operator :math:`f \mapsto \frac1{|S^{d-1}|}\int e^{\beta\langle\cdot, y\rangle}f(y)\,d\sigma(y)`
    on spherical harmonics of degree ``l`` (computed in log space)."""
    _check(beta, d, "usa")
    nu = l + d / 2.0 - 1.0
    log = gammaln(d / 2.0) + (d / 2.0 - 1.0) * math.log(2.0 / beta) + math.log(ive(nu, beta)) + beta
    return math.exp(log)


def growth_rate(l: int, eps: float, beta: float, d: int, attention: str, direction: str = "ascent") -> float:
    r"""Linear growth rate :math:`\sigma_l` of a degree-l perturbation of the uniform state (module doc)."""
    _check(beta, d, attention)
    s = {"ascent": 1.0, "descent": -1.0}[direction]
    lam = funk_hecke_eigenvalue(l, beta, d)
    coupling = lam / beta if attention == "usa" else lam / (beta * funk_hecke_eigenvalue(0, beta, d))
    return l * (l + d - 2) * (s * coupling - eps)


def critical_token_noise(beta: float, d: int, attention: str, n: int | None = None) -> float:
    r"""The critical noise eps_c below which the uniform state of ``ascent`` tokens is linearly unstable.

    Parameters
    ----------
    beta : float
    d : int
        Ambient dimension (tokens on S^{d-1}).
    attention : {"usa", "softmax"}
    n : int or None
        None: the mean-field value (module docstring). An integer: the finite-n value, with the coupling
        multiplied by (n - 1)/n and, for softmax, the self-pair e^beta/n added to the row mass.

    Returns
    -------
    float

    Examples
    --------
    >>> round(critical_token_noise(1e-6, 3, "softmax"), 6)  # -> 1/d as beta -> 0
    0.333333
    """
    _check(beta, d, attention)
    lam1, lam0 = funk_hecke_eigenvalue(1, beta, d), funk_hecke_eigenvalue(0, beta, d)
    if n is None:
        return lam1 / beta if attention == "usa" else lam1 / (beta * lam0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an integer >= 2 tokens or None (mean field): got {n!r}")
    f = (n - 1) / n
    if attention == "usa":
        return f * lam1 / beta
    return f * lam1 / (beta * (f * lam0 + math.exp(beta) / n))


def fit_critical_noise(eps, n_m2) -> dict:
    r"""Least-squares fit of :math:`1/(n\,\mathbb E|m|^2) = a + b/\varepsilon` on the disordered side.

    The derived form has a = 1 and b = -eps_c; the fit returns both free, with eps_c = -b/a (where the
    line crosses 0) and a 95% interval of eps_c from the delta method (t quantile, len - 2 dof).

    Parameters
    ----------
    eps : sequence of float
        Noise levels (> eps_c; at least 3).
    n_m2 : sequence of float
        Measured stationary n <|m|^2> at each eps.

    Returns
    -------
    dict
        ``eps_c``, ``eps_c_ci`` [lo, hi], ``intercept`` a, ``slope`` b, ``points``.
    """
    from scipy import stats

    e, y = np.asarray(eps, float), 1.0 / np.asarray(n_m2, float)
    if e.size < 3:
        raise ValueError(f"fit_critical_noise needs at least 3 noise levels: got {e.size}; add levels")
    X = np.stack([np.ones_like(e), 1.0 / e], 1)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    dof = e.size - 2
    s2 = float(resid @ resid) / dof if dof > 0 else 0.0
    cov = s2 * np.linalg.inv(X.T @ X)
    a, b = coef
    est = -b / a
    grad = np.array([b / a**2, -1.0 / a])
    se = math.sqrt(max(float(grad @ cov @ grad), 0.0))
    q = float(stats.t.ppf(0.975, dof)) if dof > 0 else float("inf")
    return {
        "eps_c": float(est),
        "eps_c_ci": [float(est - q * se), float(est + q * se)],
        "intercept": float(a),
        "slope": float(b),
        "points": int(e.size),
    }
