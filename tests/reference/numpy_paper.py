"""Independent plain-NumPy reference for the Sec. 6 scheme of arXiv 2605.18870 (seeds/003).

This module must never import attnflow: it is the yardstick the package is measured against.
It is written for clarity, not speed: float64, dense n x n matrices, explicit Python loops over
paths and heads, ``np.einsum`` contractions and ``scipy.special.logsumexp`` for the row
normalisers.  All randomness is an input (``noise``), so a test can feed the package and this
reference the very same Gaussian increments.

Conventions (docs/design.md, shared/NOTES.md §1, §3)
----------------------------------------------------
* tokens ``x``: ``(P, n, d)``, heads ``D``: ``(P, H, d, d)``, values ``V``: ``(P, H, d, d)`` or
  ``None`` (V = D, the paper's choice).  V, when given, is held fixed in time.
* score ``s_ij^h = beta <x_i, D_h x_j>``, ``U^h_ij = exp(s_ij^h)``, ``A^h = softmax_j(s^h)``.
* energy ``E = 1/(2 beta H n^2) sum_{h,i,j} U^h_ij``  (eq. (20) for beta = 1).
* mobility ``m_h(x_i) = (1/n) sum_j U^h_ij``; effective mobility ``b`` = harmonic mean over heads.
* velocity ``v_i = (1/H) sum_h P_perp(x_i) sum_j A^h_ij V_h x_j``.
* paper's strong upper gradient ``G2 = (1/n) sum_i b(x_i) |v_i|^2``  (Lemma 4.12, Sec. 6).
* exact dissipation power ``Ghat2 = (1/n) sum_i <v_i, n P_perp(x_i) grad_i E>`` with
  ``n grad_i E = 1/(2 H n) sum_h (D_h y_i + D_h^T z_i)``, ``y_i = sum_j U_ij x_j``,
  ``z_i = sum_j U_ji x_j``.

Ito correction of the symmetric noise (derivation)
--------------------------------------------------
Let phi(D) = exp(beta x^T D y) with |x| = |y| = 1 and dD = f dt + g dS, where the symmetric
increment is dS = sqrt(dt) (Z + Z^T)/2, Z with iid N(0,1) entries.  Then

    x^T dS y = (sqrt(dt)/2) sum_{ab} Z_ab (x_a y_b + y_a x_b)
    Var(x^T dS y) = (dt/4) sum_{ab} (x_a y_b + y_a x_b)^2 = (dt/4)(2|x|^2|y|^2 + 2<x,y>^2)
                  = (dt/2)(1 + <x,y>^2),

so d<x^T D y>_t = g^2 (1 + <x,y>^2)/2 dt and Ito's formula gives

    d phi = phi beta x^T dD y + (1/2) phi beta^2 g^2 (1 + <x,y>^2)/2 dt
          = phi beta x^T f y dt + phi beta^2 (g^2/4)(1 + <x,y>^2) dt + phi beta g x^T dS y.

Summing with the prefactor 1/(2 beta H n^2) of E:

    d_tE (drift) = 1/(2 H n^2) sum U_ij x_i^T f_h x_j
    d_tE (Ito)   = beta (g^2/4) 1/(2 H n^2) sum U_ij (1 + <x_i, x_j>^2)
    dM           = 1/(2 H n^2) sum U_ij x_i^T (g dS_h) x_j.

(Cross-check: x^T dS y is Gaussian, so E exp(beta g x^T dS y) = exp(beta^2 g^2 dt (1+<x,y>^2)/4),
whose derivative in dt at 0 is the same Ito factor.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp

DriftFn = Callable[[np.ndarray, float], np.ndarray]


def _head_terms(X: np.ndarray, Dh: np.ndarray, Vh: np.ndarray, beta: float):
    """Quantities of one head at one path.  X (n, d), Dh (d, d), Vh (d, d)."""
    S = beta * np.einsum("ia,ab,jb->ij", X, Dh, X)  # s_ij = beta <x_i, D x_j>
    lse = logsumexp(S, axis=1)  # (n,)
    A = np.exp(S - lse[:, None])  # row-stochastic softmax
    U = np.exp(S)
    n = X.shape[0]
    m = np.exp(lse) / n  # mobility m_h(x_i) = (1/n) sum_j U_ij
    W = np.einsum("ij,ab,jb->ia", A, Vh, X)  # W_i = sum_j A_ij V x_j (unprojected)
    radial = np.einsum("ia,ia->i", X, W)
    Vproj = W - radial[:, None] * X  # P_perp(x_i) W_i
    y = np.einsum("ij,jb->ib", U, X)  # y_i = sum_j U_ij x_j
    z = np.einsum("ji,jb->ib", U, X)  # z_i = sum_j U_ji x_j
    grad_unscaled = np.einsum("ab,ib->ia", Dh, y) + np.einsum("ba,ib->ia", Dh, z)  # D y_i + D^T z_i
    return {"U": U, "m": m, "W": W, "Vproj": Vproj, "grad_unscaled": grad_unscaled}


def evaluate_path(
    X: np.ndarray,
    Dp: np.ndarray,
    Vp: np.ndarray | None,
    *,
    beta: float,
    f: np.ndarray | None,
    g: float,
) -> dict[str, np.ndarray | float]:
    """All ledger pieces at one path: X (n, d), Dp (H, d, d), Vp (H, d, d) or None.

    ``f`` (H, d, d) is the weight drift f_h(D_h, t) at this point (None: zero).

    Returns a dict with ``v`` (n, d) projected velocity, ``W`` (n, d) unprojected head-averaged
    field, ``m`` (H, n), ``b`` (n,), ``grad`` (n, d) = n P_perp grad_i E, and scalars ``E``,
    ``dtE_drift``, ``dtE_ito``, ``G2``, ``Ghat2``.
    """
    n, d = X.shape
    H = Dp.shape[0]
    if f is None:
        f = np.zeros_like(Dp)
    gram = X @ X.T  # <x_i, x_j>

    v = np.zeros((n, d))
    W_avg = np.zeros((n, d))
    grad = np.zeros((n, d))
    m_all = np.zeros((H, n))
    energy_sum = 0.0
    drift_sum = 0.0
    ito_sum = 0.0
    for h in range(H):
        Vh = Dp[h] if Vp is None else Vp[h]
        terms = _head_terms(X, Dp[h], Vh, beta)
        U = terms["U"]
        m_all[h] = terms["m"]
        v += terms["Vproj"] / H
        W_avg += terms["W"] / H
        grad += terms["grad_unscaled"]
        energy_sum += U.sum()
        drift_sum += np.einsum("ij,ia,ab,jb->", U, X, f[h], X)
        ito_sum += np.sum(U * (1.0 + gram**2))

    grad = grad / (2.0 * H * n)  # n grad_i E
    grad = grad - np.einsum("ia,ia->i", X, grad)[:, None] * X  # P_perp(x_i)
    b = 1.0 / np.mean(1.0 / m_all, axis=0)  # harmonic mean over heads
    norm = 2.0 * H * n**2
    return {
        "v": v,
        "W": W_avg,
        "m": m_all,
        "b": b,
        "grad": grad,
        "E": energy_sum / (beta * norm),
        "dtE_drift": drift_sum / norm,
        "dtE_ito": beta * (g**2 / 4.0) * ito_sum / norm,
        "G2": np.mean(b * np.einsum("ia,ia->i", v, v)),
        "Ghat2": np.mean(np.einsum("ia,ia->i", v, grad)),
    }


def martingale_increment(X: np.ndarray, Dp: np.ndarray, dS: np.ndarray, *, beta: float) -> float:
    """dM = 1/(2 H n^2) sum_{h,i,j} U^h_ij x_i^T dS_h x_j, with dS_h = g sqrt(dt) (Z+Z^T)/2.

    U is evaluated at the left point (X, Dp).  X (n, d), Dp (H, d, d), dS (H, d, d).
    """
    n = X.shape[0]
    H = Dp.shape[0]
    total = 0.0
    for h in range(H):
        U = np.exp(beta * np.einsum("ia,ab,jb->ij", X, Dp[h], X))
        total += np.einsum("ij,ia,ab,jb->", U, X, dS[h], X)
    return total / (2.0 * H * n**2)


def paper_scheme(
    x0: np.ndarray,
    D0: np.ndarray,
    *,
    dt: float,
    n_steps: int,
    beta: float = 1.0,
    sign: int = +1,
    drift: DriftFn | None = None,
    g: float = 0.0,
    noise: np.ndarray | None = None,
    projected: bool = True,
    V: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Run the Sec. 6 projected Euler / Euler-Maruyama scheme and its energy ledger (eq. (147)).

    Parameters
    ----------
    x0 : (P, n, d) unit tokens.
    D0 : (P, H, d, d) initial heads.
    dt, n_steps : step size and number of steps; t_k = k dt.
    beta : inverse temperature (paper: 1).
    sign : +1 ascent (printed formula), -1 descent (authors' code).
    drift : f(D (H, d, d), t) -> (H, d, d), called once per path and step; None means f = 0.
    g : scalar noise amplitude.
    noise : (n_steps, P, H, d, d) standard normal Z, or None (no noise; then g must be 0).
    projected : True: x <- Pi(x + s dt v) (authors' code); False: x <- Pi(x + s dt W) with the
        unprojected head average W (printed formula).
    V : (P, H, d, d) fixed value matrices, or None for V = D.

    Returns
    -------
    dict with
        ``t`` (K+1,), ``x`` (K+1, P, n, d), ``D`` (K+1, P, H, d, d), ``E`` (K+1, P),
        per step (K, ...): ``v`` (K, P, n, d), ``m`` (K, P, H, n), ``b`` (K, P, n),
        ``dtE_drift``, ``dtE_ito``, ``G2``, ``Ghat2``, ``dM`` (each (K, P)),
        cumulative (K+1, P): ``M``, ``R_paper``, ``R_exact`` where
        R(t_k) = E_k - E_0 - sum_{m<k} (dtE_drift + dtE_ito)_m dt - sign sum_{m<k} G2_m dt - M_k
        (Ghat2 in place of G2 for R_exact).
    """
    x0 = np.asarray(x0, dtype=np.float64)
    D0 = np.asarray(D0, dtype=np.float64)
    if sign not in (1, -1):
        raise ValueError(f"sign must be +1 or -1, got {sign}")
    if x0.ndim != 3 or D0.ndim != 4 or D0.shape[0] != x0.shape[0]:
        raise ValueError(f"x0 must be (P, n, d) and D0 (P, H, d, d); got {x0.shape}, {D0.shape}")
    P, n, d = x0.shape
    H = D0.shape[1]
    if noise is None and g != 0.0:
        raise ValueError("g != 0 needs a noise array of shape (n_steps, P, H, d, d)")
    if noise is not None:
        noise = np.asarray(noise, dtype=np.float64)
        if noise.shape != (n_steps, P, H, d, d):
            raise ValueError(f"noise must have shape {(n_steps, P, H, d, d)}, got {noise.shape}")
    if V is not None:
        V = np.asarray(V, dtype=np.float64)

    K = n_steps
    xs = np.zeros((K + 1, P, n, d))
    Ds = np.zeros((K + 1, P, H, d, d))
    E = np.zeros((K + 1, P))
    out_v = np.zeros((K, P, n, d))
    out_m = np.zeros((K, P, H, n))
    out_b = np.zeros((K, P, n))
    per_step = {k: np.zeros((K, P)) for k in ("dtE_drift", "dtE_ito", "G2", "Ghat2", "dM")}

    xs[0] = x0
    Ds[0] = D0
    for k in range(K):
        t = k * dt
        for p in range(P):
            X = xs[k, p]
            Dp = Ds[k, p]
            Vp = None if V is None else V[p]
            f = np.zeros_like(Dp) if drift is None else np.asarray(drift(Dp.copy(), t), dtype=np.float64)
            if f.shape != Dp.shape:
                raise ValueError(f"drift must return shape {Dp.shape}, got {f.shape}")
            ev = evaluate_path(X, Dp, Vp, beta=beta, f=f, g=g)
            E[k, p] = ev["E"]
            out_v[k, p] = ev["v"]
            out_m[k, p] = ev["m"]
            out_b[k, p] = ev["b"]
            for key in ("dtE_drift", "dtE_ito", "G2", "Ghat2"):
                per_step[key][k, p] = ev[key]

            # token step: projected Euler, retraction Pi(y) = y / |y|
            step = ev["v"] if projected else ev["W"]
            Y = X + sign * dt * step
            xs[k + 1, p] = Y / np.linalg.norm(Y, axis=1, keepdims=True)

            # weight step: Euler-Maruyama with symmetric noise
            if noise is None:
                dS = np.zeros_like(Dp)
            else:
                Z = noise[k, p]
                dS = g * np.sqrt(dt) * 0.5 * (Z + np.swapaxes(Z, -1, -2))
            per_step["dM"][k, p] = martingale_increment(X, Dp, dS, beta=beta)
            Ds[k + 1, p] = Dp + f * dt + dS

    for p in range(P):
        Dp = Ds[K, p]
        X = xs[K, p]
        tot = 0.0
        for h in range(H):
            tot += np.exp(beta * np.einsum("ia,ab,jb->ij", X, Dp[h], X)).sum()
        E[K, p] = tot / (2.0 * beta * H * n**2)

    def cumsum0(a: np.ndarray) -> np.ndarray:
        return np.concatenate([np.zeros((1, P)), np.cumsum(a, axis=0)], axis=0)

    M = cumsum0(per_step["dM"])
    dE = E - E[0][None, :]
    weight_part = cumsum0(per_step["dtE_drift"] + per_step["dtE_ito"]) * dt
    R_paper = dE - weight_part - sign * cumsum0(per_step["G2"]) * dt - M
    R_exact = dE - weight_part - sign * cumsum0(per_step["Ghat2"]) * dt - M

    return {
        "t": dt * np.arange(K + 1),
        "x": xs,
        "D": Ds,
        "E": E,
        "v": out_v,
        "m": out_m,
        "b": out_b,
        **per_step,
        "M": M,
        "R_paper": R_paper,
        "R_exact": R_exact,
    }
