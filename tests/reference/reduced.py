"""Reduced-model references integrated with scipy's DOP853 at rtol = atol = 1e-12.

Independent of attnflow (never import it).  Each reduced scalar ODE is paired with a direct
full-state integration of the token ODE

    x_i' = s * P_perp(x_i) sum_j A_ij V x_j,   P_perp(x) = I - x x^T,

so the two can check each other.  Attention kinds: ``"softmax"`` (A = row softmax of
beta <x_i, D x_j>) and ``"usa"`` (unnormalised: A_ij = exp(beta <x_i, D x_j>) / n).

Two tokens, D = a I (V = D = a I)
---------------------------------
x_1' = s P_perp(x_1)(A_11 a x_1 + A_12 a x_2) = s a A_12 (x_2 - cos(th) x_1), a vector of norm
|a| A_12 sin(th) pointing along the geodesic towards x_2 (for s a > 0).  Hence
d cos(th)/dt = <x_1', x_2> + <x_1, x_2'> = 2 s a A_12 sin^2(th), i.e.

    th' = -2 s a A_12(th) sin(th),
    softmax: A_12 = e^{beta a cos th} / (e^{beta a} + e^{beta a cos th}),
    usa:     A_12 = e^{beta a cos th} / 2.

Equiangular configurations, D = V = I, ascent (s = +1), one head
---------------------------------------------------------------
If all <x_i, x_j> = rho (i != j), then by permutation symmetry the Gram matrix stays
equiangular and rho' = 2 <x_1', x_2>.  With Z = e^beta + (n-1) e^{beta rho} (softmax),
x_1' = (e^{beta rho}/Z) sum_{j != 1} (x_j - rho x_1), so

    <x_1', x_2> = (e^{beta rho}/Z) [1 + (n-2) rho - (n-1) rho^2]
                = (e^{beta rho}/Z) (1 - rho)((n-1) rho + 1),

    softmax: rho' = 2 e^{beta rho} (1 - rho)((n-1) rho + 1) / (e^beta + (n-1) e^{beta rho})
    usa:     rho' = (2/n) e^{beta rho} (1 - rho)((n-1) rho + 1)

(these agree with shared/NOTES.md §5; checked numerically in tests/test_references_selfcheck.py).
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import logsumexp

RTOL = 1e-12
ATOL = 1e-12
_KINDS = ("softmax", "usa")


def _check_kind(kind: str) -> None:
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")


def _check_sign(sign: int) -> None:
    if sign not in (1, -1):
        raise ValueError(f"sign must be +1 or -1, got {sign}")


def _solve(rhs, y0: np.ndarray, t_eval: np.ndarray) -> np.ndarray:
    t_eval = np.asarray(t_eval, dtype=np.float64)
    sol = solve_ivp(
        rhs,
        (float(t_eval[0]), float(t_eval[-1])),
        np.asarray(y0, dtype=np.float64),
        method="DOP853",
        t_eval=t_eval,
        rtol=RTOL,
        atol=ATOL,
    )
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    return sol.y.T  # (len(t_eval), dim)


# --------------------------------------------------------------------------------------------
# two tokens
# --------------------------------------------------------------------------------------------
def two_tokens_angle_rhs(theta: float, *, a: float, beta: float, kind: str, sign: int) -> float:
    """Right-hand side th' of the two-token angle ODE with D = V = a I."""
    c = np.cos(theta)
    if kind == "softmax":
        # A_12 = e^{beta a c} / (e^{beta a} + e^{beta a c}) = 1 / (1 + e^{beta a (1 - c)})
        a12 = 1.0 / (1.0 + np.exp(beta * a * (1.0 - c)))
    else:
        a12 = 0.5 * np.exp(beta * a * c)
    return -2.0 * sign * a * a12 * np.sin(theta)


def two_tokens_angle(
    theta0: float,
    t_eval: np.ndarray,
    beta: float,
    D: float,
    kind: str = "softmax",
    sign: int = 1,
) -> np.ndarray:
    """Angle th(t) between two tokens on S^{d-1} for D = V = a I (``D`` is the scalar a).

    Returns an array of shape (len(t_eval),).  t_eval[0] is the initial time.
    """
    _check_kind(kind)
    _check_sign(sign)
    a = float(D)

    def rhs(_t, y):
        return [two_tokens_angle_rhs(y[0], a=a, beta=beta, kind=kind, sign=sign)]

    return _solve(rhs, np.array([theta0]), t_eval)[:, 0]


def attention_velocity(
    X: np.ndarray, D: np.ndarray, *, beta: float, kind: str, V: np.ndarray | None = None
) -> np.ndarray:
    """P_perp(x_i) sum_j A_ij V x_j for one head; X (n, d), D (d, d), V (d, d) or None (V = D)."""
    n = X.shape[0]
    Vm = D if V is None else V
    S = beta * (X @ D @ X.T)
    if kind == "softmax":
        A = np.exp(S - logsumexp(S, axis=1, keepdims=True))
    else:
        A = np.exp(S) / n
    W = A @ (X @ Vm.T)
    return W - np.sum(W * X, axis=1, keepdims=True) * X


def tokens_full(
    x0: np.ndarray,
    D: np.ndarray,
    t_eval: np.ndarray,
    beta: float,
    kind: str = "softmax",
    sign: int = 1,
    V: np.ndarray | None = None,
) -> np.ndarray:
    """Direct integration of x_i' = sign P_perp(x_i) sum_j A_ij V x_j for n tokens, one frozen head.

    x0 (n, d) on the sphere, D (d, d), V (d, d) or None (V = D).  Returns (len(t_eval), n, d).
    The field is evaluated at x_i/|x_i| (identical on the sphere), which makes |x_i| a conserved
    quantity of the ODE itself; no retraction is applied to the output.
    """
    _check_kind(kind)
    _check_sign(sign)
    x0 = np.asarray(x0, dtype=np.float64)
    D = np.asarray(D, dtype=np.float64)
    n, d = x0.shape

    def rhs(_t, y):
        X = y.reshape(n, d)
        # Evaluate the field at X/|X| and project onto the tangent space there.  On the sphere
        # this is the same vector field, but off it d|x_i|^2/dt = 0 exactly, whereas the plain
        # I - x x^T makes the sphere exponentially unstable for descent (sign = -1):
        # d(|x|^2 - 1)/dt = -2 s <x, W> (|x|^2 - 1).
        Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
        return (sign * attention_velocity(Xn, D, beta=beta, kind=kind, V=V)).ravel()

    return _solve(rhs, x0.ravel(), t_eval).reshape(-1, n, d)


def two_tokens_full(
    x0: np.ndarray,
    D: np.ndarray,
    t_eval: np.ndarray,
    beta: float,
    kind: str = "softmax",
    sign: int = 1,
) -> np.ndarray:
    """Full-state two-token ODE, x0 (2, d), D (d, d) (V = D).  Returns (len(t_eval), 2, d)."""
    x0 = np.asarray(x0, dtype=np.float64)
    if x0.shape[0] != 2:
        raise ValueError(f"x0 must have shape (2, d), got {x0.shape}")
    return tokens_full(x0, D, t_eval, beta, kind, sign)


# --------------------------------------------------------------------------------------------
# equiangular configurations
# --------------------------------------------------------------------------------------------
def equiangular_rhs(rho: float, *, n: int, beta: float, kind: str) -> float:
    """rho' of the equiangular reduced model (D = V = I, ascent, one head)."""
    core = (1.0 - rho) * ((n - 1) * rho + 1.0)
    if kind == "softmax":
        # e^{beta rho} / (e^beta + (n-1) e^{beta rho}) = 1 / (e^{beta (1 - rho)} + n - 1)
        return 2.0 * core / (np.exp(beta * (1.0 - rho)) + (n - 1))
    return (2.0 / n) * np.exp(beta * rho) * core


def equiangular_rho(
    rho0: float, n: int, beta: float, t_eval: np.ndarray, kind: str = "softmax"
) -> np.ndarray:
    """rho(t) for n equiangular tokens, D = V = I, ascent.  Returns (len(t_eval),)."""
    _check_kind(kind)
    if not -1.0 / (n - 1) <= rho0 <= 1.0:
        raise ValueError(f"rho0 must lie in [-1/(n-1), 1] = [{-1.0 / (n - 1)}, 1], got {rho0}")

    def rhs(_t, y):
        return [equiangular_rhs(y[0], n=n, beta=beta, kind=kind)]

    return _solve(rhs, np.array([rho0]), t_eval)[:, 0]


def equiangular_initial(n: int, d: int, rho0: float, rng: np.random.Generator | None = None) -> np.ndarray:
    """n unit vectors in R^d (d >= n) with all pairwise inner products equal to rho0.

    Construction: with e_1..e_n orthonormal, c = (1/n) sum e_k and u_i = e_i - c (a centred
    regular simplex, |u_i|^2 = 1 - 1/n, <u_i, u_j> = -1/n, u_i orthogonal to c), set
    x_i = sqrt(1 - rho0) u_i + sqrt((1 + (n-1) rho0)/n) c/|c|; this needs rho0 >= -1/(n-1).
    If ``rng`` is given the configuration is rotated by a Haar-random orthogonal matrix.
    Returns (n, d).
    """
    if d < n:
        raise ValueError(f"need d >= n, got n={n}, d={d}")
    if not -1.0 / (n - 1) <= rho0 <= 1.0:
        raise ValueError(f"rho0 must lie in [-1/(n-1), 1], got {rho0}")
    E = np.eye(d)[:n]
    c = E.mean(axis=0)
    U = E - c
    c_hat = c / np.linalg.norm(c)
    X = np.sqrt(1.0 - rho0) * U + np.sqrt((1.0 + (n - 1) * rho0) / n) * c_hat
    if rng is not None:
        Q, R = np.linalg.qr(rng.standard_normal((d, d)))
        Q = Q * np.sign(np.diag(R))
        X = X @ Q.T
    return X
