r"""Power-law fits k(H) = a H^b with confidence intervals (arXiv 2605.18870, Sec. 6).

The paper fits the time-averaged strong upper gradient against the number of heads,
:math:`\overline{G^2}(H) \approx a H^b`, and reports 95% intervals for a and b. With three head
counts (H = 1, 10, 100) the log-log regression has a single degree of freedom, so the 95% t quantile
is :math:`t_{0.975, 1} \approx 12.71` and the intervals are wide; they are reported as they come.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def _as_positive(name: str, v) -> np.ndarray:
    a = np.asarray(v, dtype=float).ravel()
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{name} must be finite and > 0 for a log-log fit: got {a.tolist()}")
    return a


def fit_power_law(H, y, y_err=None, *, level: float = 0.95) -> dict:
    r"""Fit :math:`\log y = \log a + b \log H` by (weighted) least squares.

    Parameters
    ----------
    H : array-like, shape=[m]
        Abscissae (> 0), e.g. head counts.
    y : array-like, shape=[m]
        Ordinates (> 0), e.g. time-averaged G^2.
    y_err : array-like, shape=[m], or None
        Standard errors of ``y``. When given, the fit is weighted by ``1/sigma_i^2`` with
        :math:`\sigma_i = y_{err,i}/y_i` (the standard error of :math:`\log y_i` to first order), and
        the covariance is rescaled by the reduced chi^2 (as ``scipy.optimize.curve_fit`` with
        ``absolute_sigma=False``), so that the intervals reflect the scatter about the line.
    level : float
        Confidence level of the intervals (default 0.95).

    Returns
    -------
    dict
        ``a``, ``b``: best fit; ``a_ci``, ``b_ci``: intervals
        :math:`\hat\theta \pm t_{(1+\mathrm{level})/2,\, m-2}\, \mathrm{se}(\hat\theta)` (for a, the
        interval of :math:`\log a` exponentiated); ``b_se``, ``log_a_se``; ``r``: Pearson correlation of
        (log H, log y); ``cov``: 2x2 covariance of (log a, b); ``dof``; ``t``: the t quantile;
        ``level``; ``weighted``.

    Raises
    ------
    ValueError
        Fewer than three points (no degree of freedom left for an interval), non-positive values,
        mismatched lengths or a degenerate abscissa.

    Examples
    --------
    >>> f = fit_power_law([1, 10, 100], [2.0, 0.2, 0.02])
    >>> round(f["a"], 6), round(f["b"], 6)
    (2.0, -1.0)
    """
    Hs, ys = _as_positive("H", H), _as_positive("y", y)
    if Hs.shape != ys.shape:
        raise ValueError(f"H and y must have the same length: got {Hs.size} and {ys.size}")
    m = Hs.size
    if m < 3:
        raise ValueError(f"a power-law fit with intervals needs at least 3 points: got {m}")
    if not (0 < level < 1):
        raise ValueError(f"level must lie in (0, 1): got {level!r}")
    X, Y = np.log(Hs), np.log(ys)
    if np.ptp(X) == 0:
        raise ValueError(f"H must take at least two distinct values: got {Hs.tolist()}")
    if y_err is None:
        w = np.ones(m)
    else:
        e = np.asarray(y_err, dtype=float).ravel()
        if e.shape != ys.shape or not np.all(np.isfinite(e)) or np.any(e <= 0):
            raise ValueError(f"y_err must be finite, > 0 and of the length of y: got {e.tolist()}")
        w = (ys / e) ** 2
    A = np.stack([np.ones(m), X], 1)
    AtW = A.T * w
    normal = AtW @ A
    coef = np.linalg.solve(normal, AtW @ Y)
    res = Y - A @ coef
    dof = m - 2
    s2 = float(w @ res**2) / dof
    cov = s2 * np.linalg.inv(normal)
    t = float(stats.t.ppf(0.5 + level / 2, dof))
    log_a, b = float(coef[0]), float(coef[1])
    se_la, se_b = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
    r = float(np.corrcoef(X, Y)[0, 1]) if np.ptp(Y) > 0 else 0.0
    return {
        "a": math.exp(log_a),
        "b": b,
        "a_ci": [math.exp(log_a - t * se_la), math.exp(log_a + t * se_la)],
        "b_ci": [b - t * se_b, b + t * se_b],
        "log_a": log_a,
        "log_a_se": se_la,
        "b_se": se_b,
        "r": r,
        "cov": cov.tolist(),
        "dof": dof,
        "t": t,
        "level": level,
        "weighted": y_err is not None,
    }


def power_law_band(fit: dict, H) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Fitted curve and pointwise confidence band of :func:`fit_power_law` on a grid.

    :math:`\log k(H) = \log a + b \log H` with variance :math:`u^T C u`, :math:`u = (1, \log H)`;
    the band is :math:`\exp(\log k \pm t\, \sqrt{u^T C u})` with the fit's t quantile.

    Parameters
    ----------
    fit : dict
        Output of :func:`fit_power_law`.
    H : array-like, shape=[k]
        Grid (> 0).

    Returns
    -------
    (k, lower, upper) : three arrays, shape=[k]
    """
    Hs = _as_positive("H", H)
    u = np.stack([np.ones_like(Hs), np.log(Hs)], 1)
    mid = fit["log_a"] + fit["b"] * np.log(Hs)
    C = np.asarray(fit["cov"])
    half = fit["t"] * np.sqrt(np.einsum("ki,ij,kj->k", u, C, u))
    return np.exp(mid), np.exp(mid - half), np.exp(mid + half)


def fit_depth_width(
    L,
    H,
    y,
    *,
    level: float = 0.95,
    gamma_bounds: tuple[float, float] = (0.0, 3.0),
    h_exponent: float | None = 0.5,
) -> dict:
    r"""Fit the depth-width error law :math:`e(L, H) = a L^{-\alpha} + b L^{-\gamma} H^{-\delta}` (the rate
    :math:`O(L^{-1} + L^{-1/3}H^{-1/2})` of arXiv 2605.11059 has :math:`\delta = 1/2`) by least squares on
    :math:`\log e`.

    Parameters
    ----------
    L, H : array-like, shape=[m]
        Depths (> 0) and head counts (> 0; ``inf`` for the mean-field network, where the second term
        vanishes).
    y : array-like, shape=[m]
        Errors (> 0).
    level : float
        Confidence level of the intervals.
    gamma_bounds : (float, float)
        Bounds of :math:`\alpha` and :math:`\gamma` (and a free :math:`\delta`) during the fit (a, b > 0
        through their logarithms).
    h_exponent : float or None
        The exponent :math:`\delta` of H, fixed (default 1/2, the claim), or None to fit it free (a fifth
        parameter, reported as ``delta`` with ``delta_ci``; then at least 6 points and two distinct finite
        H are needed). Fit it free before testing a fixed value.

    Returns
    -------
    dict
        ``a``, ``alpha``, ``b``, ``gamma`` and their intervals ``*_ci`` (:math:`\hat\theta \pm t\,
        \mathrm{se}`, for a and b the interval of the logarithm exponentiated), the covariance ``cov`` of
        (log a, alpha, log b, gamma[, delta]) from the Gauss-Newton matrix scaled by the residual
        variance, ``dof`` = m - (number of parameters), ``t``, ``rms_log_residual``, ``delta`` (fixed or
        fitted) and, when free, ``delta_ci``.

    Raises
    ------
    ValueError
        Fewer than 5 points, non-positive values, mismatched lengths, or no finite H (b and gamma would
        not be identifiable).
    """
    from scipy.optimize import least_squares

    Ls = _as_positive("L", L)
    Hs = np.asarray(H, dtype=float).ravel()
    ys = _as_positive("y", y)
    if not (Ls.shape == Hs.shape == ys.shape):
        raise ValueError(f"L, H and y must have one length: got {Ls.size}, {Hs.size}, {ys.size}")
    if np.any(np.isnan(Hs)) or np.any(Hs <= 0):
        raise ValueError(f"H must be > 0 (inf for the mean-field network): got {Hs.tolist()}")
    m = ys.size
    free = h_exponent is None
    k = 5 if free else 4
    if m < k + 1:
        raise ValueError(f"a {k}-parameter fit with intervals needs at least {k + 1} points: got {m}")
    if not np.any(np.isfinite(Hs)) or np.ptp(np.log(Ls)) == 0:
        raise ValueError("the fit needs at least one finite H and two distinct L")
    if free and np.unique(Hs[np.isfinite(Hs)]).size < 2:
        raise ValueError("a free H exponent needs at least two distinct finite H")
    if not (0 < level < 1):
        raise ValueError(f"level must lie in (0, 1): got {level!r}")
    finite = np.isfinite(Hs)
    lL = np.log(Ls)
    lH = np.where(finite, np.log(np.where(finite, Hs, 1.0)), 0.0)
    Y = np.log(ys)

    def resid(p):
        delta = p[4] if free else float(h_exponent)
        ih = np.where(finite, np.exp(-delta * lH), 0.0)
        return np.log(np.exp(p[0] - p[1] * lL) + np.exp(p[2] - p[3] * lL) * ih) - Y

    lo, hi = gamma_bounds
    best = None
    for a0 in (0.5, 1.0, 2.0):
        for g0 in (0.25, 0.5, 1.0):
            for d0 in (0.25, 0.5, 1.0) if free else (None,):
                p0 = [Y.max() + a0 * lL.min(), a0, Y[finite].max(), g0] + ([d0] if free else [])
                p0 = np.array(p0)
                p0[1], p0[3] = np.clip(p0[1], lo + 1e-6, hi - 1e-6), np.clip(p0[3], lo + 1e-6, hi - 1e-6)
                r = least_squares(
                    resid,
                    p0,
                    bounds=([-np.inf, lo, -np.inf, lo] + [lo] * free, [np.inf, hi, np.inf, hi] + [hi] * free),
                    xtol=1e-14,
                    ftol=1e-14,
                )
                if best is None or r.cost < best.cost:
                    best = r
    p, J = best.x, best.jac
    dof = m - k
    s2 = 2.0 * best.cost / dof
    cov = s2 * np.linalg.pinv(J.T @ J)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    t = float(stats.t.ppf(0.5 + level / 2, dof))
    return {
        "a": math.exp(p[0]),
        "alpha": float(p[1]),
        "b": math.exp(p[2]),
        "gamma": float(p[3]),
        "a_ci": [math.exp(p[0] - t * se[0]), math.exp(p[0] + t * se[0])],
        "alpha_ci": [float(p[1] - t * se[1]), float(p[1] + t * se[1])],
        "b_ci": [math.exp(p[2] - t * se[2]), math.exp(p[2] + t * se[2])],
        "gamma_ci": [float(p[3] - t * se[3]), float(p[3] + t * se[3])],
        "cov": cov.tolist(),
        "dof": dof,
        "t": t,
        "level": level,
        "rms_log_residual": float(np.sqrt(np.mean(best.fun**2))),
        "delta": float(p[4]) if free else float(h_exponent),
        **({"delta_ci": [float(p[4] - t * se[4]), float(p[4] + t * se[4])]} if free else {}),
    }
