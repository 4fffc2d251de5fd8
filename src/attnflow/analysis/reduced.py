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
from scipy.integrate import quad_vec, solve_ivp
from scipy.interpolate import CubicSpline
from scipy.optimize import brentq, minimize_scalar
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
    "equiangular_system",
    "equiangular_tokens",
    "jensen_boundary",
    "relu_softmax_limits",
    "transition_beta",
    "uniform_start_clustering_time",
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

    def _quad_setup(self, rho0: float, eps: float) -> tuple[float, float, float]:
        r0 = self.check_rho(rho0)
        if not (0 < eps < 1 - r0):
            raise ReducedModelError(
                f"eps must lie in (0, 1 - rho0) = (0, {1 - r0:g}): got {eps!r}; e.g. 1e-2"
            )
        # the rate vanishes at rho = z (ReLU: 0; softmax / USA: -1/(n-1)): integrate in u = ln(rho - z)
        z = 0.0 if self.attention == "relu" else -1.0 / (self.n - 1)
        return r0, z, 1.0 - eps

    def clustering_time_quad(self, rho0: float, eps: float = 1e-2, *, rtol: float = 1e-10) -> float:
        r""":math:`T_\varepsilon = \int_{\rho_0}^{1-\varepsilon} d\rho/\dot\rho(\rho)` by adaptive quadrature.

        The reduced flow is autonomous and :math:`\dot\rho > 0` on :math:`(\rho_0, 1)`, so the clustering
        time is this integral (an estimator independent of :meth:`clustering_time`'s ODE solve). The
        integral is taken in :math:`u = \ln(\rho - z)`, z the zero of the rate below :math:`\rho_0`
        (ReLU: 0; softmax, USA: :math:`-1/(n-1)`), so starts close to it (:math:`\rho_0 = c/n`) stay
        accurate. ``inf`` for ReLU from :math:`\rho_0 \le 0` (stationary).
        """
        r0, z, r1 = self._quad_setup(rho0, eps)
        if r0 <= z:
            return math.inf

        def f(u):
            e = math.exp(u)
            return e / float(self.rate(z + e))

        val, _err = quad_vec(f, math.log(r0 - z), math.log(r1 - z), epsabs=0.0, epsrel=rtol, limit=2000)
        return float(val)

    def log_time_derivatives(
        self, rho0: float, eps: float = 1e-2, *, rtol: float = 1e-10
    ) -> tuple[float, float, float]:
        r"""Softmax: :math:`T_\varepsilon` and its log-derivatives :math:`\partial_\beta\ln T`,
        :math:`\partial^2_\beta\ln T`.

        With :math:`T = \int d\rho/f`, :math:`\partial_\beta T = -\int f_\beta/f^2` and
        :math:`\partial^2_\beta T = \int (2f_\beta^2/f^3 - f_{\beta\beta}/f^2)`, where
        :math:`f_\beta = C(\rho)\sum_h w_h a_h(1-\rho)\alpha_h'(z_h)`,
        :math:`f_{\beta\beta} = C(\rho)\sum_h w_h a_h^2(1-\rho)^2\alpha_h''(z_h)`,
        :math:`\alpha(z) = 1/(e^z+m)`, :math:`\alpha' = -\alpha(1-m\alpha)`,
        :math:`\alpha'' = \alpha(1-m\alpha)(1-2m\alpha)`, :math:`m = n-1`, :math:`C = 2(1-\rho)(1+m\rho)`.
        All three integrals in one vector quadrature (``quad_vec``, relative tolerance ``rtol``).
        """
        if self.attention != "softmax":
            raise ReducedModelError(
                f"log_time_derivatives is written for softmax attention: got attention={self.attention!r}; "
                "use attention='softmax'"
            )
        r0, zlo, r1 = self._quad_setup(rho0, eps)
        m = self.n - 1
        a = np.asarray(self.a)
        w = np.asarray(self.w)

        def f(u):
            e = math.exp(u)
            rho = zlo + e
            C = 2.0 * (1.0 - rho) * (1.0 + m * rho)
            al = self.off_weight(rho)
            d1 = -al * (1.0 - m * al)
            d2 = al * (1.0 - m * al) * (1.0 - 2.0 * m * al)
            F = C * float((w * al).sum())
            Fb = C * float((w * a * (1.0 - rho) * d1).sum())
            Fbb = C * float((w * (a * (1.0 - rho)) ** 2 * d2).sum())
            # ratios first: F**3 underflows at huge n and beta (n = 2^80: F ~ 1e-190); Fb/F, Fbb/F are O(1)
            gb, gbb, iF = Fb / F, Fbb / F, 1.0 / F
            return np.array([iF, -gb * iF, (2.0 * gb * gb - gbb) * iF]) * e

        (T, dT, d2T), _err = quad_vec(
            f, math.log(r0 - zlo), math.log(r1 - zlo), epsabs=0.0, epsrel=rtol, limit=2000, norm="max"
        )
        s = dT / T
        return float(T), float(s), float(d2T / T - s * s)


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


def equiangular_system(
    model: EquiangularModel, rho0: float, *, perturb: float = 0.0, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""The particle system of ``model`` from an equiangular start: tokens x0 [n, n], heads
    :math:`D_h = a_h I` and values :math:`V_h = H w_h I` [H, n, n] (float64).

    ``perturb > 0`` adds ``perturb`` times a standard Gaussian (torch generator seeded by ``seed``) to
    every token of the equiangular start and renormalises.
    """
    x0 = equiangular_tokens(model.n, model.check_rho(rho0))
    p = _real("perturb", perturb)
    if p < 0:
        raise ReducedModelError(f"perturb must be >= 0 (a noise amplitude): got {perturb!r}; e.g. 1e-2")
    if p > 0:
        g = torch.Generator().manual_seed(int(seed))
        x0 = x0 + p * torch.randn(x0.shape, generator=g, dtype=x0.dtype)
        x0 = x0 / x0.norm(dim=-1, keepdim=True)
    n, H = model.n, model.H
    eye = torch.eye(n, dtype=torch.float64)
    D = torch.stack([a * eye for a in model.a])
    V = torch.stack([H * w * eye for w in model.w])
    return x0, D, V


def equiangular_particles(
    model: EquiangularModel,
    rho0: float,
    t1: float,
    dt: float,
    *,
    record_every: int = 1,
    perturb: float = 0.0,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    r"""The particle system of ``model`` from an equiangular start, attnflow RK4 (ascent, sphere, torch).

    ``perturb > 0`` adds ``perturb`` times a standard Gaussian (torch generator seeded by ``seed``) to
    every token of the equiangular start and renormalises: the cloud is then no longer equiangular, and
    ``rho[0]`` is the realised mean pairwise inner product.

    Returns
    -------
    dict
        ``time`` [T], ``rho`` [T] (mean pairwise inner product), ``spread`` [T] (max - min of the
        pairwise inner products: 0 while the cloud stays equiangular), ``entropy`` [T, H] (softmax row
        entropy of token 0 per head).
    """
    from ..observables.clustering import mean_pairwise_inner_product

    x0, D, V = equiangular_system(model, rho0, perturb=perturb, seed=seed)
    n = model.n
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


def uniform_start_clustering_time(
    model: EquiangularModel,
    d: int,
    eps: float,
    *,
    seed: int,
    t_max: float,
    rtol: float = 1e-7,
) -> dict[str, float]:
    r"""T_eps of the particle system of ``model`` (one head) from a generic start: n tokens i.i.d. uniform
    on :math:`S^{d-1}` (Gaussian rows normalised, numpy generator seeded by ``seed``).

    The field :math:`\dot x_i = P^\perp(x_i)\sum_j A_{ij}x_j`, :math:`A = \mathrm{softmax}(\beta a G)`
    or :math:`\max(0, \beta a G)/n` (:math:`G = XX^\top`), is integrated by scipy ``solve_ivp`` (RK45,
    ``rtol``, atol 1e-9) with a terminal event at :math:`\bar\rho = 1-\varepsilon`, :math:`\bar\rho` the
    mean pairwise inner product (the reduced model's :math:`\rho` when the cloud is equiangular).
    A direct numpy field: attnflow's Simulator costs too much per step for n = 256, d = 256 on a shared CPU.

    Returns
    -------
    dict
        ``T`` (``inf`` if not reached by ``t_max``), ``rho0`` (realised initial mean inner product),
        ``rho_end``, ``min_inner_end`` (smallest pairwise inner product at the end).
    """
    if model.H != 1:
        raise ReducedModelError(f"uniform starts are run for one head: got H={model.H}; use a=(a,)")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 2:
        raise ReducedModelError(f"d must be an integer >= 2 (the sphere S^(d-1)): got d={d!r}; e.g. d=n")
    if not (0 < _real("eps", eps) < 1):
        raise ReducedModelError(f"eps must lie in (0, 1): got {eps!r}; e.g. 0.05")
    if not _real("t_max", t_max) > 0:
        raise ReducedModelError(f"t_max must be > 0: got {t_max!r}; e.g. 1e4")
    n, d = model.n, int(d)
    ba = model.beta * model.a[0]
    x0 = np.random.default_rng(int(seed)).standard_normal((n, d))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)

    def rho_bar(y):
        s = y.reshape(n, d).sum(0)
        return (s @ s - n) / (n * (n - 1))

    def field(_t, y):
        X = y.reshape(n, d)
        G = X @ X.T
        if model.attention == "softmax":
            E = np.exp(ba * (G - G.max(1, keepdims=True)))
            A = E / E.sum(1, keepdims=True)
        elif model.attention == "relu":
            A = np.maximum(0.0, ba * G) / n
        else:
            A = np.exp(ba * G) / n
        V = A @ X
        V -= (V * X).sum(1, keepdims=True) * X
        return V.ravel()

    def hit(_t, y):
        return rho_bar(y) - (1.0 - eps)

    hit.terminal, hit.direction = True, 1
    sol = solve_ivp(field, (0.0, float(t_max)), x0.ravel(), method="RK45", rtol=rtol, atol=1e-9, events=hit)
    Xf = sol.y[:, -1].reshape(n, d)
    ev = sol.t_events[0]
    return {
        "T": float(ev[0]) if ev.size else math.inf,
        "rho0": float(rho_bar(x0.ravel())),
        "rho_end": float(rho_bar(sol.y[:, -1])),
        "min_inner_end": float((Xf @ Xf.T).min()),
    }


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


def transition_beta(
    n: int,
    rho0: float,
    eps: float = 1e-2,
    *,
    definitions: tuple[str | float, ...] = ("curvature",),
    a: float = 1.0,
    rtol: float = 1e-10,
    span: tuple[float, float] = (0.05, 8.0),
    grid: int = 33,
) -> dict[str | float, float]:
    r"""The clustering transition :math:`\beta^*` of :math:`T_\varepsilon(\beta)` (softmax, one head a).

    ``ln T`` rises from a plateau (small beta) to slope :math:`a(1-\rho_0)` (large beta, the initial
    rate :math:`\propto e^{-\beta a(1-\rho_0)}`); the transition is located, per definition,

    * ``"curvature"`` (no parameter): where :math:`\partial^2_\beta\ln T_\varepsilon` is largest, i.e.
      where the slope rises fastest;
    * a fraction ``f`` in (0, 1): where :math:`\partial_\beta\ln T_\varepsilon = f\,a(1-\rho_0)`.

    Derivatives are exact quadratures (:meth:`EquiangularModel.log_time_derivatives`). The search runs on
    ``grid`` log-spaced betas in ``span`` times the candidate :math:`\beta_c` (shared by the
    definitions), refined by a bounded scalar maximisation (curvature, xatol 1e-7 beta_c) or brentq
    (fraction, xtol 1e-10 beta_c). ``nan`` when the maximum sits at an end of the span or the slope never
    reaches the level inside it.

    Returns
    -------
    dict
        definition -> beta*.
    """
    bc = critical_beta(n, a, rho0)
    fracs = {}
    for d in definitions:
        if d == "curvature":
            continue
        f = _real("definition", d)
        if not 0 < f < 1:
            raise ReducedModelError(
                f"a definition must be 'curvature' or a slope fraction in (0, 1): got {d!r}; e.g. 0.5"
            )
        fracs[d] = f

    def der(b: float) -> tuple[float, float, float]:
        return EquiangularModel(n=n, beta=float(b), a=(a,)).log_time_derivatives(rho0, eps, rtol=rtol)

    bs = bc * np.geomspace(span[0], span[1], grid)
    vals = np.array([der(b) for b in bs])
    out: dict[str | float, float] = {}
    for d in definitions:
        if d == "curvature":
            k = int(np.argmax(vals[:, 2]))
            if k in (0, grid - 1):
                out[d] = math.nan
                continue
            res = minimize_scalar(
                lambda b: -der(b)[2],
                bounds=(bs[k - 1], bs[k + 1]),
                method="bounded",
                options={"xatol": 1e-7 * bc},
            )
            out[d] = float(res.x)
            continue
        level = fracs[d] * a * (1.0 - rho0)
        above = np.nonzero(vals[:, 1] >= level)[0]
        if above.size == 0 or above[0] == 0:
            out[d] = math.nan
            continue
        k = int(above[0])
        out[d] = float(brentq(lambda b, lv=level: der(b)[1] - lv, bs[k - 1], bs[k], xtol=1e-10 * bc))
    return out


def jensen_boundary(
    n: int, rho0: float, eps: float = 1e-2, *, spread: float = 0.5, rtol: float = 1e-10, grid: int = 41
) -> list[float]:
    r"""Where two heads :math:`\bar a(1\mp s)` (weights 1/2) and one head :math:`\bar a` cluster equally fast.

    The reduced model depends on beta and the scales only through :math:`\beta a_h`, so the boundary is a
    value of :math:`x = \beta\bar a(1-\rho_0)`; returned are all :math:`x` in
    :math:`[0.05, 20]\ln(n-1)` where :math:`\ln(T_{\rm hom}/T_{\rm het})` changes sign (brentq, xtol
    1e-10 relative), T by :meth:`EquiangularModel.clustering_time_quad`. The candidate (Jensen at
    :math:`\rho_0`) is :math:`x = \ln(n-1)`.
    """
    if not 0 < spread < 1:
        raise ReducedModelError(f"spread must lie in (0, 1) (a_h = a_mean (1 -+ spread) > 0): got {spread!r}")
    c = 1.0 / (1.0 - rho0)

    def g(x: float) -> float:
        het = EquiangularModel(n=n, beta=x * c, a=(1.0 - spread, 1.0 + spread))
        hom = EquiangularModel(n=n, beta=x * c, a=(1.0,))
        return math.log(
            hom.clustering_time_quad(rho0, eps, rtol=rtol) / het.clustering_time_quad(rho0, eps, rtol=rtol)
        )

    xs = math.log(n - 1) * np.geomspace(0.05, 20.0, grid)
    gs = np.array([g(x) for x in xs])
    out = []
    for k in np.nonzero(np.sign(gs[1:]) != np.sign(gs[:-1]))[0]:
        out.append(float(brentq(g, xs[k], xs[k + 1], xtol=1e-10 * xs[k])))
    return out


def relu_softmax_limits(beta: float, rho0: float, eps: float) -> tuple[float, float]:
    r"""The :math:`n\to\infty` limits of :math:`T_\varepsilon` at fixed :math:`\rho_0 > 0` ([derived]).

    For fixed :math:`\rho > 0`, :math:`(1+(n-1)\rho)/n \to \rho`, so the ReLU rate tends to
    :math:`2\beta\rho^2(1-\rho)` and the softmax rate (:math:`(1+(n-1)\rho)/(e^{\beta(1-\rho)}+n-1)\to\rho`)
    to :math:`2\rho(1-\rho)`, uniformly on :math:`[\rho_0, 1-\varepsilon]`; integrating
    :math:`1/(\rho^2(1-\rho)) = 1/\rho^2 + 1/\rho + 1/(1-\rho)`:

    .. math:: T^{\rm ReLU}_\infty = \frac{1}{2\beta}\Bigl[\frac1{\rho_0} - \frac1{1-\varepsilon}
              + \ln\frac{(1-\varepsilon)(1-\rho_0)}{\varepsilon\rho_0}\Bigr],\qquad
              T^{\rm soft}_\infty = \frac12\ln\frac{(1-\varepsilon)(1-\rho_0)}{\varepsilon\rho_0}.
    """
    if not (0 < rho0 < 1 - eps < 1) or beta <= 0:
        raise ReducedModelError(
            f"relu_softmax_limits needs beta > 0 and 0 < rho0 < 1 - eps < 1: got beta={beta!r}, "
            f"rho0={rho0!r}, eps={eps!r}"
        )
    L = math.log((1 - eps) * (1 - rho0) / (eps * rho0))
    return (1.0 / rho0 - 1.0 / (1.0 - eps) + L) / (2.0 * beta), 0.5 * L
