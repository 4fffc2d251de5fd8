r"""Weight processes Theta_t: how each head's matrix D_h moves with depth (time).

Every process defines the SDE :math:`dD_h = f_h(D_h, t)\,dt + g_h(D_h, t)\,dW_h` of
arXiv 2605.18870, eq. (10) (NOTES.md §1-2), integrated by Euler-Maruyama in the simulation loop:

    D <- D + f(D, t) dt + g(D, t) sqrt(dt) xi,

with ``xi = (Z + Z^T)/2`` (``noise="symmetric"``, the paper's choice: diagonal variance 1,
off-diagonal 1/2) or ``xi = Z`` (``noise="full"``), Z i.i.d. N(0, 1), independent per head, step
and path. ``drift`` and ``diffusion`` are evaluated on batched heads of shape (P, H, d, d).
The compiled multi-step loop (:mod:`attnflow.simulation.fused`) evaluates the drift and the noise
increment of the built-in processes in compiled code (the oscillating forcing it takes from
:meth:`Oscillating.forcing_at`); ``tests/test_fused_loop.py`` holds it to these classes.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

__all__ = [
    "FORCINGS",
    "FORCING_DIMS",
    "NOISE_KINDS",
    "PHASE_KINDS",
    "Constant",
    "CustomProcess",
    "OrnsteinUhlenbeck",
    "Oscillating",
    "PiecewiseConstant",
    "WeightProcess",
    "forcing_s1",
    "forcing_s2",
    "noise_matrix",
    "noise_scale",
    "relaxation_drift",
    "symmetric_part",
]

NOISE_KINDS = ("symmetric", "full")
PHASE_KINDS = ("per_head", "shared")
FORCINGS = ("s2", "s1")


def _check_noise(noise: str) -> None:
    if noise not in NOISE_KINDS:
        raise ValueError(f"unknown noise kind {noise!r}; valid: {', '.join(NOISE_KINDS)}")


# The formulas below are plain arithmetic, valid on tensors (the Python loop) and on numbers inside numba (the
# compiled loop of attnflow.simulation.fused compiles these very functions): each has this one definition.


def relaxation_drift(rate, target, D):
    """The drift f(D, t) = lambda (F(t) - D) of the OU and oscillating processes (eq. (10), Sec. 6).

    ``target`` is F (OU) or the forcing F(t + phi_h) (oscillating); tensors or numbers.
    """
    return rate * (target - D)


def symmetric_part(a, b):
    """(a + b)/2 as 0.5 (a + b): the symmetric noise shape (Z + Z^T)/2 with ``a = Z``, ``b = Z^T``
    (NOTES.md §1 / Sec. 6); tensors or the entries Z_ab, Z_ba."""
    return 0.5 * (a + b)


def noise_scale(g, dt):
    """g sqrt(dt): the factor of the Euler-Maruyama weight-noise increment g sqrt(dt) xi (eq. (10))."""
    return g * math.sqrt(dt)


def noise_matrix(z: torch.Tensor, noise: str) -> torch.Tensor:
    """The noise shape xi from i.i.d. normals z: (Z + Z^T)/2 (symmetric, NOTES.md §1 / Sec. 6) or Z (full).

    Parameters
    ----------
    z : Tensor, shape=[..., d, d]
        i.i.d. standard normals.
    noise : {"symmetric", "full"}
    """
    return symmetric_part(z, z.transpose(-1, -2)) if noise == "symmetric" else z


class WeightProcess(ABC):
    """Abstract weight process dD_h = f_h(D_h, t) dt + g_h(D_h, t) dW_h (eq. (10)).

    Subclasses are frozen dataclasses implementing :meth:`drift` (and :meth:`diffusion` when stochastic).

    Attributes
    ----------
    stochastic : bool
        Whether the process has a diffusion part (g != 0).
    noise : {"symmetric", "full"}
        Shape of the noise xi: (Z + Z^T)/2 or Z.
    additive : bool
        Whether g does not depend on D (additive noise: the integrators' strong order is 1, else 1/2).
    """

    stochastic: bool = False
    noise: str = "symmetric"
    additive: bool = True

    @abstractmethod
    def drift(self, D: torch.Tensor, t: float) -> torch.Tensor:
        """f(D, t) of dD = f dt + g dW (eq. (10)): shape (P, H, d, d) like ``D``."""

    def diffusion(self, D: torch.Tensor, t: float) -> torch.Tensor | float:
        """g(D, t): a float or a tensor broadcastable to (P, H, 1, 1). Deterministic processes: 0."""
        return 0.0

    def jump(self, D: torch.Tensor, t_new: float) -> torch.Tensor | None:
        """Value imposed at time ``t_new`` (piecewise-constant processes), else ``None``."""
        return None

    def validate(self, H: int, d: int) -> None:
        """Check that the process fits ``H`` heads of size ``d``; raise ``ValueError`` otherwise.

        The base process fits any size; processes with matrices of their own (targets, layers) override it.
        """
        return None

    def check_contract(self, D: torch.Tensor, t: float) -> None:
        """Evaluate f, g and the jump once at (D, t) and check their shapes and values before a run.

        Raises ``ValueError`` naming the callable, the shape (or value) received and the shape expected,
        so that a wrong user process fails before the first step instead of mid-run.
        """
        P, H = D.shape[:2]
        name = type(self).__name__
        f = self.drift(D, t)
        if not isinstance(f, torch.Tensor) or tuple(f.shape) != tuple(D.shape):
            got = tuple(f.shape) if isinstance(f, torch.Tensor) else type(f).__name__
            raise ValueError(
                f"{name}: the drift f(D, t) must return a tensor of the heads' shape {tuple(D.shape)}: "
                f"got {got}; return one (d, d) drift per path and head"
            )
        if not torch.isfinite(f).all():
            raise ValueError(f"{name}: the drift f(D, t) returned non-finite values at t = {t:g}")
        g = self.diffusion(D, t)
        if isinstance(g, torch.Tensor):
            try:
                ok = torch.broadcast_shapes(tuple(g.shape), (P, H, 1, 1)) == (P, H, 1, 1)
            except RuntimeError:
                ok = False
            if not ok:
                raise ValueError(
                    f"{name}: the diffusion g(D, t) must be a number or a tensor broadcastable to "
                    f"(P, H, 1, 1) = {(P, H, 1, 1)}: got shape {tuple(g.shape)}; return e.g. a tensor of "
                    "shape (P, H, 1, 1) or a float"
                )
            bad = not bool(torch.isfinite(g).all())
        elif isinstance(g, (int, float)) and not isinstance(g, bool):
            bad = not math.isfinite(g)
        else:
            raise ValueError(
                f"{name}: the diffusion g(D, t) must return a float or a tensor: got {type(g).__name__}"
            )
        if bad:
            raise ValueError(f"{name}: the diffusion g(D, t) returned non-finite values at t = {t:g}")
        j = self.jump(D, t)
        if j is not None and (not isinstance(j, torch.Tensor) or tuple(j.shape) != tuple(D.shape)):
            got = tuple(j.shape) if isinstance(j, torch.Tensor) else type(j).__name__
            raise ValueError(
                f"{name}: jump(D, t) must return None or the heads' shape {tuple(D.shape)}: got {got}"
            )

    def describe(self) -> dict:
        """JSON-friendly description stored in the run's attributes."""
        return {"process": type(self).__name__}


@dataclass(frozen=True)
class Constant(WeightProcess):
    """Frozen weights: f = 0, g = 0."""

    def drift(self, D, t):
        return torch.zeros_like(D)


def _as_matrix(F, name: str) -> torch.Tensor:
    t = torch.as_tensor(F, dtype=torch.float64)
    if t.ndim not in (2, 3) or t.shape[-1] != t.shape[-2]:
        raise ValueError(f"{name} must be a (d, d) or (H, d, d) matrix: got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite")
    return t


@dataclass(frozen=True)
class OrnsteinUhlenbeck(WeightProcess):
    r"""Ornstein-Uhlenbeck heads: f = F - D, g = sqrt(2 sigma^2) (Sec. 6, NOTES.md §2).

    With symmetric noise the stationary law is D = F + S, Var S_aa = sigma^2/lambda,
    Var S_ab = sigma^2/(2 lambda) (the paper: lambda = 1); with full noise Var S_ab = sigma^2/lambda.

    Parameters
    ----------
    F : array-like, shape=[d, d] or [H, d, d]
        Mean reversion target (the paper: identity). ``None`` means identity.
    sigma2 : float
        Noise level sigma^2 > 0 (paper: 1).
    noise : {"symmetric", "full"}
    rate : float
        Mean-reversion rate lambda in f = lambda (F - D) (paper: 1).
    """

    F: object = None
    sigma2: float = 1.0
    noise: str = "symmetric"
    rate: float = 1.0
    stochastic: bool = field(default=True, init=False)

    def __post_init__(self):
        _check_noise(self.noise)
        if not (self.sigma2 >= 0 and math.isfinite(self.sigma2)):
            raise ValueError(f"sigma2 must be a finite number >= 0: got {self.sigma2!r}")
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"rate must be a finite number > 0: got {self.rate!r}")
        object.__setattr__(self, "stochastic", self.sigma2 > 0)  # sigma^2 = 0: deterministic relaxation
        if self.F is not None:
            object.__setattr__(self, "F", _as_matrix(self.F, "F"))

    def target(self, D: torch.Tensor) -> torch.Tensor:
        d = D.shape[-1]
        if self.F is None:
            return torch.eye(d, dtype=D.dtype, device=D.device)
        return self.F.to(dtype=D.dtype, device=D.device)

    def drift(self, D, t):
        return relaxation_drift(self.rate, self.target(D), D)

    def diffusion(self, D, t):
        return math.sqrt(2.0 * self.sigma2)

    def validate(self, H, d):
        if self.F is not None:
            if self.F.shape[-1] != d or (self.F.ndim == 3 and self.F.shape[0] != H):
                raise ValueError(
                    f"OU target F has shape {tuple(self.F.shape)} but the heads are {H} x ({d}, {d})"
                )

    def describe(self):
        return {
            "process": "OrnsteinUhlenbeck",
            "sigma2": self.sigma2,
            "noise": self.noise,
            "rate": self.rate,
            "F": "identity" if self.F is None else self.F.tolist(),
        }


def forcing_s2(tau: torch.Tensor) -> torch.Tensor:
    """The paper's S^2 forcing F(tau) (Sec. 6, NOTES.md §2); tau of shape [...] -> [..., 3, 3]."""
    c, s = torch.cos(tau), torch.sin(tau)
    c2, s2 = torch.cos(2 * tau), torch.sin(2 * tau)
    row0 = torch.stack([2 + 1.5 * c, s2, s], -1)
    row1 = torch.stack([s2, 2 + 1.5 * s, c2], -1)
    row2 = torch.stack([s, c2, 2 + 1.5 * torch.cos(tau + math.pi / 4)], -1)
    return torch.stack([row0, row1, row2], -2)


def forcing_s1(tau: torch.Tensor) -> torch.Tensor:
    """The paper's S^1 forcing F(tau) (NOTES.md §2); tau of shape [...] -> [..., 2, 2]."""
    c, s2 = torch.cos(tau), torch.sin(2 * tau)
    row0 = torch.stack([2 + 1.5 * c, s2], -1)
    row1 = torch.stack([s2, 2 - 1.5 * c], -1)
    return torch.stack([row0, row1], -2)


_FORCING_FN = {"s2": forcing_s2, "s1": forcing_s1}
#: dimension d of each named forcing (Sec. 6: S^2 -> d = 3, S^1 -> d = 2)
FORCING_DIMS = {"s2": 3, "s1": 2}


@dataclass(frozen=True)
class Oscillating(WeightProcess):
    r"""Oscillating heads: f_h = F(t + phi_h) - D_h, g = 0 (Sec. 6, NOTES.md §2).

    Parameters
    ----------
    forcing : {"s2", "s1"} or callable
        The paper's forcing on S^2 (d = 3) or S^1 (d = 2), or a callable tau -> (..., d, d).
    phases : {"per_head", "shared"}
        ``per_head``: phi_h = 2 pi h / H (the paper's model). ``shared``: every head gets phi = 0
        (what produced the published figures, NOTES.md §2).
    rate : float
        lambda in f = lambda (F - D) (paper: 1).
    """

    forcing: object = "s2"
    phases: str = "per_head"
    rate: float = 1.0

    def __post_init__(self):
        if not callable(self.forcing) and self.forcing not in FORCINGS:
            raise ValueError(
                f"unknown forcing {self.forcing!r}; valid: {', '.join(FORCINGS)} or a callable tau -> F(tau)"
            )
        if self.phases not in PHASE_KINDS:
            raise ValueError(f"unknown phases {self.phases!r}; valid: {', '.join(PHASE_KINDS)}")
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"rate must be a finite number > 0: got {self.rate!r}")

    def forcing_at(self, t: float, H: int, dtype=torch.float64, device="cpu") -> torch.Tensor:
        """F^(h)(t) for h = 0..H-1: shape (H, d, d)."""
        h = torch.arange(H, dtype=torch.float64)
        phi = 2 * math.pi * h / H if self.phases == "per_head" else torch.zeros(H, dtype=torch.float64)
        fn = self.forcing if callable(self.forcing) else _FORCING_FN[self.forcing]
        return fn(t + phi).to(dtype=dtype, device=device)

    def drift(self, D, t):
        return relaxation_drift(self.rate, self.forcing_at(t, D.shape[1], D.dtype, D.device), D)

    def validate(self, H, d):
        if not callable(self.forcing) and FORCING_DIMS[self.forcing] != d:
            raise ValueError(
                f"forcing {self.forcing!r} is defined for d = {FORCING_DIMS[self.forcing]}, "
                f"but the tokens have d = {d}; use forcing='s1' for d=2, 's2' for d=3, or a callable"
            )

    def describe(self):
        return {
            "process": "Oscillating",
            "forcing": self.forcing if isinstance(self.forcing, str) else repr(self.forcing),
            "phases": self.phases,
            "rate": self.rate,
        }


@dataclass(frozen=True)
class PiecewiseConstant(WeightProcess):
    r"""Heads constant on each layer: D(t) = layers[floor(t / layer_time)] (last layer after the end).

    The discrete transformer with L layers of (possibly different) heads. Between layers the weights
    jump; the energy ledger records the jump of E separately (it is no Ito integral).

    Parameters
    ----------
    layers : array-like, shape=[L, H, d, d]
    layer_time : float
        Duration of each layer (> 0).
    """

    layers: object = None
    layer_time: float = 1.0

    def __post_init__(self):
        t = torch.as_tensor(self.layers, dtype=torch.float64) if self.layers is not None else None
        if t is None or t.ndim != 4 or t.shape[-1] != t.shape[-2]:
            raise ValueError(
                f"layers must be an array of shape (L, H, d, d): got {None if t is None else tuple(t.shape)}"
            )
        if not (self.layer_time > 0 and math.isfinite(self.layer_time)):
            raise ValueError(f"layer_time must be a finite number > 0: got {self.layer_time!r}")
        object.__setattr__(self, "layers", t)

    def layer_index(self, t: float) -> int:
        """Index of the layer active at time t (the last one after the end, the first before 0)."""
        k = min(int(math.floor(t / self.layer_time + 1e-9)), self.layers.shape[0] - 1)
        return max(k, 0)

    def value_at(self, t: float, dtype=torch.float64, device="cpu") -> torch.Tensor:
        """Heads of the layer active at time t: shape (H, d, d)."""
        return self.layers[self.layer_index(t)].to(dtype=dtype, device=device)

    def drift(self, D, t):
        return torch.zeros_like(D)

    def jump(self, D, t_new):
        return self.value_at(t_new, D.dtype, D.device).expand_as(D)

    def validate(self, H, d):
        if self.layers.shape[1] != H or self.layers.shape[-1] != d:
            raise ValueError(
                f"layers have shape {tuple(self.layers.shape)} but the heads are {H} x ({d}, {d})"
            )

    def describe(self):
        return {
            "process": "PiecewiseConstant",
            "layers": int(self.layers.shape[0]),
            "layer_time": self.layer_time,
        }


@dataclass(frozen=True)
class CustomProcess(WeightProcess):
    r"""User drift f(D, t) and diffusion g(D, t) callables.

    Parameters
    ----------
    f : callable (D (P, H, d, d), t float) -> (P, H, d, d)
    g : callable (D, t) -> float or tensor broadcastable to (P, H, 1, 1), or None (deterministic)
    noise : {"symmetric", "full"}
    additive : bool
        Declare that g does not depend on D (additive noise: the integrators then have strong order 1);
        by default g(D, t) is treated as multiplicative (strong order 1/2).
    """

    f: Callable | None = None
    g: Callable | None = None
    noise: str = "symmetric"
    additive: bool = False

    def __post_init__(self):
        if not callable(self.f):
            raise ValueError(f"f must be a callable f(D, t) -> dD/dt: got {self.f!r}")
        if self.g is not None and not callable(self.g):
            raise ValueError(f"g must be a callable g(D, t) or None: got {self.g!r}")
        _check_noise(self.noise)
        object.__setattr__(self, "stochastic", self.g is not None)
        if not isinstance(self.additive, bool):
            raise ValueError(f"additive must be True or False: got {self.additive!r}")
        # unless declared additive, g(D, t) may depend on D: multiplicative noise (strong order 1/2)
        object.__setattr__(self, "additive", self.g is None or self.additive)

    def drift(self, D, t):
        out = self.f(D, t)
        if out.shape != D.shape:
            raise ValueError(f"f(D, t) must return shape {tuple(D.shape)}: got {tuple(out.shape)}")
        return out

    def diffusion(self, D, t):
        return 0.0 if self.g is None else self.g(D, t)

    def describe(self):
        return {"process": "CustomProcess", "f": repr(self.f), "g": repr(self.g), "noise": self.noise}
