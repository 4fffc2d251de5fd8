r"""The equiangular scalar-head reduced model (NOTES.md §7, [derived]; arXiv 2605.04279, seeds/000).

All pairwise inner products equal :math:`\rho`; heads are scalar, :math:`D_h = a_h I`, with value
:math:`I` and head weights :math:`w_h` (:math:`\sum_h w_h = 1`), so that
:math:`\dot x_i = \sum_h w_h P^\perp(x_i)\sum_j A^h_{ij} x_j`. By symmetry the configuration stays
equiangular and

.. math:: \dot\rho = 2(1-\rho)\bigl(1 + (n-1)\rho\bigr)\sum_h w_h\,\alpha_h(\rho),

:math:`\alpha_h` being the off-diagonal attention weight:
softmax :math:`1/(e^{\beta a_h(1-\rho)} + n - 1)`, USA :math:`e^{\beta a_h\rho}/n`,
ReLU :math:`\max(0, \beta a_h\rho)/n`. The particle system is :class:`attnflow.TransformerModel` with
``heads = a_h I`` and ``values = H w_h I`` (the model averages heads with 1/H).

* candidate critical inverse temperature (self weight = total off-diagonal weight; inflection of
  :math:`a\mapsto 1/(e^{\beta a(1-\rho)}+n-1)`): :math:`\beta_c(\rho) = \ln(n-1)/(a(1-\rho))`;
* clustering time :math:`T_\varepsilon`: the first time with :math:`\rho = 1-\varepsilon`;
* softmax entropy along the reduced flow: :math:`\dot S = \beta^2a^2 A_{ii}(1-A_{ii})(1-\rho)\dot\rho`.

The reduced ODE is integrated by scipy ``solve_ivp`` (DOP853, rtol 1e-10); the particles by attnflow's
RK4 (:func:`equiangular_particles`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.integrate import solve_ivp
from scipy.interpolate import CubicSpline
from scipy.special import entr

from ..model.transformer import TransformerModel
from ..observables.entropy import attention_entropy
from ..simulation import Simulator

__all__ = [
    "REDUCED_KINDS",
    "EquiangularModel",
    "ReducedModelError",
    "critical_beta",
    "crossing_time",
    "equiangular_particles",
    "equiangular_tokens",
]

REDUCED_KINDS = ("softmax", "usa", "relu")


class ReducedModelError(ValueError):
    """A parameter of the reduced model is out of range (message: rule, value, fix)."""


def _real(name: str, v) -> float:
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float, np.integer, np.floating))
        or not math.isfinite(v)
    ):
        raise ReducedModelError(f"{name} must be a finite real number: got {v!r}")
    return float(v)


@dataclass(frozen=True)
class EquiangularModel:
    r"""Scalar heads :math:`a_h I` with weights :math:`w_h` on an equiangular cloud of n tokens.

    Parameters
    ----------
    n : int
        Number of tokens, >= 2.
    beta : float
        Inverse temperature, > 0.
    a : sequence of float
        Head scales a_h > 0, one per head.
    w : sequence of float or None
        Head weights >= 0 summing to 1 (None: uniform 1/H).
    attention : {"softmax", "usa", "relu"}

    Raises
    ------
    ReducedModelError
        With the rule, the value received and the fix.

    Examples
    --------
    >>> m = EquiangularModel(n=32, beta=2.0, a=(1.0, 3.0), w=(0.5, 0.5))
    >>> round(m.clustering_time(0.0, 1e-2), 4)  # T_eps: rho reaches 0.99
    5.6588
    >>> round(critical_beta(32, 1.0), 4)  # ln(31)
    3.434
    """

    n: int
    beta: float
    a: tuple[float, ...] = (1.0,)
    w: tuple[float, ...] | None = None
    attention: str = "softmax"

    def __post_init__(self):
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or self.n < 2:
            raise ReducedModelError(
                f"n must be an integer >= 2 (an equiangular cloud needs two tokens): got n={self.n!r}; "
                "e.g. n=32"
            )
        beta = _real("beta", self.beta)
        if beta <= 0:
            raise ReducedModelError(
                f"beta must be > 0 (inverse temperature): got beta={self.beta!r}; e.g. beta=1.0"
            )
        a = tuple(_real("a_h", v) for v in np.atleast_1d(self.a))
        if not a or min(a) <= 0:
            raise ReducedModelError(f"every head scale a_h must be > 0: got a={a}; e.g. a=(1.0, 2.0)")
        w = (
            tuple([1.0 / len(a)] * len(a))
            if self.w is None
            else tuple(_real("w_h", v) for v in np.atleast_1d(self.w))
        )
        if len(w) != len(a):
            raise ReducedModelError(
                f"w must have one weight per head: got len(w)={len(w)} for len(a)={len(a)} heads "
                f"(a={a}, w={w}); give {len(a)} weights or w=None for uniform weights"
            )
        if min(w) < 0 or abs(sum(w) - 1.0) > 1e-9:
            raise ReducedModelError(
                f"head weights must be >= 0 and sum to 1: got w={w} (sum {sum(w):.12g}); normalise them, "
                f"e.g. w={tuple(round(v / sum(w), 6) for v in w) if sum(w) > 0 else (1.0,)}"
            )
        if self.attention not in REDUCED_KINDS:
            raise ReducedModelError(
                f"attention must be one of {', '.join(REDUCED_KINDS)}: got {self.attention!r}"
            )
        object.__setattr__(self, "n", int(self.n))
        object.__setattr__(self, "beta", beta)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "w", w)

    @property
    def H(self) -> int:
        return len(self.a)

    def check_rho(self, rho0: float) -> float:
        """Validate an initial inner product: -1/(n-1) < rho0 < 1."""
        r = _real("rho0", rho0)
        lo = -1.0 / (self.n - 1)
        if not (lo < r < 1):
            raise ReducedModelError(
                f"rho0 must lie in (-1/(n-1), 1) = ({lo:.4g}, 1) for an equiangular cloud of n={self.n}: "
                f"got {rho0!r}; e.g. rho0=0.0"
            )
        return r

    def off_weight(self, rho) -> np.ndarray:
        r"""Off-diagonal attention weights :math:`\alpha_h(\rho)`, shape=[H, ...]."""
        rho = np.asarray(rho, dtype=float)
        a = np.asarray(self.a).reshape((-1,) + (1,) * rho.ndim)
        if self.attention == "softmax":
            # 1 / (e^z + n - 1) written as e^{-z} / (1 + (n - 1) e^{-z}) for z > 0: no overflow at large beta
            z = self.beta * a * (1.0 - rho)
            e = np.exp(-np.abs(z))
            return np.where(z > 0, e / (1.0 + (self.n - 1) * e), 1.0 / (e + self.n - 1))
        if self.attention == "usa":
            return np.exp(self.beta * a * rho) / self.n
        return np.maximum(self.beta * a * rho, 0.0) / self.n

    def self_weight(self, rho) -> np.ndarray:
        r"""Diagonal attention weights :math:`A^h_{ii}(\rho)`, shape=[H, ...]."""
        rho = np.asarray(rho, dtype=float)
        a = np.asarray(self.a).reshape((-1,) + (1,) * rho.ndim)
        if self.attention == "softmax":
            return 1.0 / (1.0 + (self.n - 1) * np.exp(-self.beta * a * (1.0 - rho)))
        if self.attention == "usa":
            return np.exp(self.beta * a) / self.n + 0 * rho
        return np.maximum(self.beta * a, 0.0) / self.n + 0 * rho

    def rate(self, rho) -> np.ndarray:
        r""":math:`\dot\rho = 2(1-\rho)(1+(n-1)\rho)\sum_h w_h\alpha_h(\rho)` (NOTES §7)."""
        rho = np.asarray(rho, dtype=float)
        w = np.asarray(self.w).reshape((-1,) + (1,) * rho.ndim)
        return 2.0 * (1.0 - rho) * (1.0 + (self.n - 1) * rho) * (w * self.off_weight(rho)).sum(0)

    def rate_slope(self, rho) -> np.ndarray:
        r""":math:`d\dot\rho/d\rho = 2[(n-2-2(n-1)\rho)G + (1-\rho)(1+(n-1)\rho)G']`,
        :math:`G = \sum_h w_h\alpha_h` (ReLU at :math:`\rho = 0`: the right derivative)."""
        rho = np.asarray(rho, dtype=float)
        a = np.asarray(self.a).reshape((-1,) + (1,) * rho.ndim)
        w = np.asarray(self.w).reshape((-1,) + (1,) * rho.ndim)
        ba = self.beta * a
        if self.attention == "softmax":
            # ba e^z / (e^z + n - 1)^2 = ba alpha (1 - (n - 1) alpha), alpha = off_weight: no overflow
            alpha = self.off_weight(rho)
            dalpha = ba * alpha * (1.0 - (self.n - 1) * alpha)
        elif self.attention == "usa":
            dalpha = ba * np.exp(ba * rho) / self.n
        else:
            dalpha = np.where(rho >= 0, ba, 0.0) / self.n
        G = (w * self.off_weight(rho)).sum(0)
        dG = (w * dalpha).sum(0)
        n = self.n
        return 2.0 * ((n - 2 - 2 * (n - 1) * rho) * G + (1 - rho) * (1 + (n - 1) * rho) * dG)

    def linear_rate(self, rho, rho_lin: float = 0.0) -> np.ndarray:
        r"""The rate linearised at ``rho_lin``: :math:`\dot\rho(\rho_l) + \dot\rho'(\rho_l)(\rho - \rho_l)`
        (:meth:`rate_slope`; ReLU at 0: :math:`2\beta\rho\sum_h w_ha_h/n`)."""
        return self.rate(rho_lin) + self.rate_slope(rho_lin) * (np.asarray(rho, dtype=float) - rho_lin)

    def entropy_rate(self, rho) -> np.ndarray:
        r"""Softmax row entropy rate per head,
        :math:`\dot S^h = \beta^2a_h^2A^h_{ii}(1-A^h_{ii})(1-\rho)\dot\rho`, shape=[H, ...]
        (NOTES §7 with :math:`s = \beta a_h\langle x_i,x_j\rangle`)."""
        rho = np.asarray(rho, dtype=float)
        a = np.asarray(self.a).reshape((-1,) + (1,) * rho.ndim)
        Ad = self.self_weight(rho)
        return (self.beta * a) ** 2 * Ad * (1 - Ad) * (1 - rho) * self.rate(rho)

    def entropy(self, rho) -> np.ndarray:
        r"""Softmax row entropy :math:`S^h(\rho) = -A_{ii}\log A_{ii} - (n-1)\alpha\log\alpha`,
        shape=[H, ...]."""
        Ad, Ao = self.self_weight(rho), self.off_weight(rho)
        # entr(p) = -p log p with entr(0) = 0: a one-hot row at large beta has entropy 0, not NaN
        return entr(Ad) + (self.n - 1) * entr(Ao)

    def solve(self, rho0: float, times, *, linear: bool = False, rtol: float = 1e-10):
        r""":math:`\rho(t)` at ``times`` (solve_ivp DOP853, rtol, atol = rtol * 1e-2), shape=[len(times)]."""
        r0 = self.check_rho(rho0)
        t = np.asarray(times, dtype=float)
        f = (lambda _t, y: self.linear_rate(y)) if linear else (lambda _t, y: self.rate(y))
        sol = solve_ivp(f, (0.0, float(t[-1])), [r0], method="DOP853", t_eval=t, rtol=rtol, atol=rtol * 1e-2)
        if not sol.success:
            raise RuntimeError(f"solve_ivp failed: {sol.message}")
        return sol.y[0]

    def clustering_time(
        self, rho0: float, eps: float = 1e-2, *, t_max: float = 1e7, linear: bool = False, rtol: float = 1e-10
    ) -> float:
        r""":math:`T_\varepsilon`, the first time :math:`\rho = 1 - \varepsilon`, by a solve_ivp event
        (``inf`` if not reached before ``t_max``, e.g. ReLU from :math:`\rho_0 \le 0`)."""
        r0 = self.check_rho(rho0)
        if not (0 < eps < 1 - r0):
            raise ReducedModelError(
                f"eps must lie in (0, 1 - rho0) = (0, {1 - r0:g}): got {eps!r}; e.g. 1e-2"
            )
        if r0 >= 1 - eps:
            return 0.0

        def hit(_t, y):
            return y[0] - (1.0 - eps)

        hit.terminal, hit.direction = True, 1
        f = (lambda _t, y: self.linear_rate(y)) if linear else (lambda _t, y: self.rate(y))
        sol = solve_ivp(f, (0.0, t_max), [r0], method="DOP853", events=hit, rtol=rtol, atol=rtol * 1e-2)
        ev = sol.t_events[0]
        return float(ev[0]) if ev.size else math.inf


def critical_beta(n: int, a: float, rho: float = 0.0) -> float:
    r"""Candidate critical inverse temperature :math:`\beta_c = \ln(n-1)/(a(1-\rho))`
    (NOTES §7, [derived])."""
    if isinstance(n, bool) or n < 2 or a <= 0 or not (rho < 1):
        raise ReducedModelError(
            f"critical_beta needs n >= 2, a > 0, rho < 1: got n={n!r}, a={a!r}, rho={rho!r}"
        )
    return math.log(n - 1) / (a * (1.0 - rho))


def equiangular_tokens(n: int, rho: float, *, dtype=torch.float64) -> torch.Tensor:
    r"""n unit vectors of :math:`\mathbb R^n` with all pairwise inner products :math:`\rho`, shape=[n, n].

    Rows of the symmetric square root of the Gram matrix :math:`(1-\rho)I + \rho\mathbf 1\mathbf 1^\top`:
    :math:`\sqrt{1-\rho}\,I + \frac{\sqrt{1+(n-1)\rho} - \sqrt{1-\rho}}{n}\mathbf 1\mathbf 1^\top`.
    """
    EquiangularModel(n=n, beta=1.0).check_rho(rho)
    c = (math.sqrt(1 + (n - 1) * rho) - math.sqrt(1 - rho)) / n
    x = math.sqrt(1 - rho) * torch.eye(n, dtype=dtype) + c * torch.ones(n, n, dtype=dtype)
    return x / x.norm(dim=-1, keepdim=True)


def equiangular_particles(
    model: EquiangularModel, rho0: float, t1: float, dt: float, *, record_every: int = 1
) -> dict[str, np.ndarray]:
    r"""The particle system of ``model`` from an equiangular start, attnflow RK4 (ascent, sphere, torch).

    Returns
    -------
    dict
        ``time`` [T], ``rho`` [T] (mean pairwise inner product), ``spread`` [T] (max - min of the
        pairwise inner products: 0 while the cloud stays equiangular), ``entropy`` [T, H] (softmax row
        entropy of token 0 per head).
    """
    from ..observables.clustering import mean_pairwise_inner_product

    x0 = equiangular_tokens(model.n, model.check_rho(rho0))
    n, H = model.n, model.H
    eye = torch.eye(n, dtype=torch.float64)
    D = torch.stack([a * eye for a in model.a])
    V = torch.stack([H * w * eye for w in model.w])
    tm = TransformerModel(direction="ascent", attention=model.attention, beta=model.beta, backend="torch")
    sim = Simulator(tm, x0[None], D[None], dt=dt, values=V[None], integrator="rk4", ledger=False)
    out: dict[str, list] = {"time": [], "rho": [], "spread": [], "entropy": []}
    off = ~torch.eye(n, dtype=torch.bool)

    def on(rec):
        x = rec.x
        G = (x[0] @ x[0].T)[off]
        out["time"].append(rec.time)
        out["rho"].append(float(mean_pairwise_inner_product(x)[0]))
        out["spread"].append(float(G.max() - G.min()))
        out["entropy"].append(attention_entropy(x[0], D, model.beta)[0, :, 0].numpy())

    steps = int(round(t1 / dt))
    on(sim.record())
    sim.run(steps, record_every=record_every, on_record=on)
    if steps % record_every:
        on(sim.record())
    return {k: np.asarray(v) for k, v in out.items()}


def crossing_time(times, values, level: float) -> float:
    """First time a recorded increasing series reaches ``level`` (cubic spline on the 6 records around the
    crossing, error O(dt^4)); ``inf`` if never reached."""
    t, v = np.asarray(times, float), np.asarray(values, float)
    above = np.nonzero(v >= level)[0]
    if above.size == 0:
        return math.inf
    k = int(above[0])
    if k == 0:
        return float(t[0])
    lo, hi = max(0, k - 3), min(t.size, k + 3)
    cs = CubicSpline(t[lo:hi], v[lo:hi] - level)
    roots = [r for r in cs.roots(extrapolate=False) if t[k - 1] - 1e-12 <= r <= t[k] + 1e-12]
    return float(roots[0]) if roots else float(np.interp(level, v[k - 1 : k + 1], t[k - 1 : k + 1]))
