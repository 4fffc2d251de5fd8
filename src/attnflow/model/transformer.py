"""The model: one frozen description of the attention dynamics (NOTES.md §1; arXiv 2605.18870 eq. (10))."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

from ..geometry import GEOMETRIES, Geometry, get_geometry
from .attention import check_attention_kind
from .weights import Constant, WeightProcess

__all__ = [
    "BACKENDS",
    "BETA_MAX",
    "BETA_MIN",
    "DIRECTIONS",
    "GEOMETRIES",
    "LAYER_SCALING_MAX",
    "LAYER_SCALING_MIN",
    "TransformerModel",
    "layer_scale",
]

DIRECTIONS = {"ascent": 1.0, "descent": -1.0}
BACKENDS = ("auto", "torch", "numba", "fastsum")
#: beta must lie in (0, BETA_MAX]. The softmax velocity is exact for any such beta (log-sum-exp);
#: the energy ledger (E ~ exp(beta <x, D y>)) leaves float64 once beta * max <x_i, D x_j> > 709, which
#: the simulation loop reports with a warning.
BETA_MAX = 1e4
#: beta must be a normal float64 (>= 2.2e-308): the energy carries 1/(2 beta), which is inf for a
#: subnormal beta such as 5e-324.
BETA_MIN = sys.float_info.min
#: layer_scaling t0 must lie in [LAYER_SCALING_MIN, LAYER_SCALING_MAX]: the rate of the head scale
#: divides by (t0 + t)^2, so t0^2 must be a normal float64 (sqrt(2.2e-308) = 1.5e-154 and
#: sqrt(1.8e308) = 1.3e154, rounded inwards).
LAYER_SCALING_MIN = 1e-150
LAYER_SCALING_MAX = 1e150


def layer_scale(t, t0, H):
    """The layer scaling of Sec. 5: c(t) = 1 / ((t0 + t) sqrt(H)) and dc/dt = -1 / ((t0 + t)^2 sqrt(H)).

    The one definition of the formula: :meth:`TransformerModel.head_scale` and
    :meth:`TransformerModel.head_scale_rate` call it, and the compiled loop
    (:mod:`attnflow.simulation.fused`) compiles this very function (plain arithmetic on floats, valid in
    Python and in numba).

    Parameters
    ----------
    t : float
    t0 : float
        The scaling's offset; NaN means no layer scaling (c = 1, dc/dt = 0).
    H : int
        Number of heads.

    Returns
    -------
    (float, float)
        c(t) and dc/dt. ``s * s`` overflows to inf (rate -0.0) where ``s**2`` would raise in Python.
    """
    if math.isnan(t0):
        return 1.0, 0.0
    s = t0 + t
    root = math.sqrt(H)
    return 1.0 / (s * root), -1.0 / (s * s * root)


@dataclass(frozen=True)
class TransformerModel:
    r"""Multi-head attention dynamics of tokens x_i on S^{d-1} (or R^d) with moving heads.

    x_i' = s * (1/H) sum_h P_perp(x_i) sum_j A^h_ij V_h x_j,  A^h = attention(beta <x_i, D_h x_j>)
    (arXiv 2605.18870, eq. (10) and Sec. 6; NOTES.md §1), with s = +1 for ``ascent`` and -1 for
    ``descent``.

    Parameters
    ----------
    direction : {"ascent", "descent"}
        Required. ``ascent``: attention pulls tokens together (transformer convention, the sign of
        the printed formula); ``descent``: gradient descent of +E (what the authors' code runs).
    attention : {"softmax", "usa", "relu", "sigmoid", "sinkhorn"}
    beta : float
        Inverse temperature, 0 < beta <= 1e4 (paper: 1).
    geometry : {"sphere", "flat"} or Geometry
        The token space (:mod:`attnflow.geometry`); a name is turned into the object, which the model
        holds. ``flat`` drops the tangent projection and the retraction (dynamics in R^d).
    weights : WeightProcess
        How the heads move with time (default: frozen).
    causal : bool
        Token i attends only to j <= i.
    layer_scaling : float or None
        If set to t0 > 0, every head acts as D / ((t0 + t) sqrt(H)) (and V likewise): the
        layer-dependent normalisation of Sec. 5 (z -> z / (t sqrt(H))), regularised at t = 0 by t0.
    sinkhorn_iters : int
        Sweeps of the log-domain Sinkhorn normalisation (attention="sinkhorn").
    token_noise : float
        eps >= 0: every token also carries Brownian motion on the sphere with generator eps Delta
        (McKean-Vlasov / entropic regularisation, NOTES.md §10), simulated by a geodesic random walk
        after each drift step (:meth:`attnflow.simulation.Simulator.step`); 0 (default) is the noiseless
        model of the paper.
        The most sweeps of the log-domain Sinkhorn normalisation (attention="sinkhorn"); it stops
        earlier once the column sums are within ``sinkhorn_tol`` of 1, and warns
        (:class:`attnflow.model.attention.SinkhornWarning`) with the error reached if it never is.
    sinkhorn_tol : float or None
        Column tolerance of Sinkhorn attention (None: 1e-10 in float64, 1e-4 in float32,
        :data:`attnflow.model.attention.SINKHORN_TOL`).
    backend : {"auto", "torch", "numba", "fastsum"}
        ``auto`` uses the fused numba kernel for softmax attention on CPU, else the PyTorch path;
        ``fastsum`` the O(n L^2) fast summation of softmax attention on S^1 / S^2
        (:mod:`attnflow.dynamics.fastsum`; relative error <= 1e-10 per row sum in float64, 1e-6 in float32).
    """

    direction: str
    attention: str = "softmax"
    beta: float = 1.0
    geometry: Geometry | str = "sphere"
    weights: WeightProcess = field(default_factory=Constant)
    causal: bool = False
    layer_scaling: float | None = None
    sinkhorn_iters: int = 50
    backend: str = "auto"
    token_noise: float = 0.0
    sinkhorn_tol: float | None = None

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ValueError(
                f"direction must be 'ascent' (tokens attract, x' = +v) or 'descent' (x' = -v, the "
                f"authors' code): got {self.direction!r}"
            )
        check_attention_kind(self.attention)
        if (
            isinstance(self.beta, bool)
            or not isinstance(self.beta, (int, float))
            or not (math.isfinite(self.beta) and BETA_MIN <= self.beta <= BETA_MAX)
        ):
            raise ValueError(
                f"beta must be a finite number in [{BETA_MIN:.3g}, {BETA_MAX:g}] (a normal float64, so that "
                f"the energy's 1/(2 beta) is finite): got {self.beta!r}; the paper uses beta = 1"
            )
        object.__setattr__(self, "geometry", get_geometry(self.geometry))
        if not isinstance(self.weights, WeightProcess):
            raise ValueError(
                f"weights must be a WeightProcess (Constant, OrnsteinUhlenbeck, Oscillating, ...): "
                f"got {type(self.weights).__name__}"
            )
        if self.layer_scaling is not None and (
            isinstance(self.layer_scaling, bool)
            or not isinstance(self.layer_scaling, (int, float))
            or not LAYER_SCALING_MIN <= self.layer_scaling <= LAYER_SCALING_MAX
        ):
            raise ValueError(
                f"layer_scaling must be None or an offset t0 in [{LAYER_SCALING_MIN:g}, "
                f"{LAYER_SCALING_MAX:g}] (so that (t0 + t)^2 is a normal float64): got "
                f"{self.layer_scaling!r}; choose t0 of the order of the time step or larger"
            )
        if (
            isinstance(self.sinkhorn_iters, bool)
            or not isinstance(self.sinkhorn_iters, int)
            or self.sinkhorn_iters < 1
        ):
            raise ValueError(f"sinkhorn_iters must be an integer >= 1: got {self.sinkhorn_iters!r}")
        if self.sinkhorn_tol is not None and (
            isinstance(self.sinkhorn_tol, bool)
            or not isinstance(self.sinkhorn_tol, (int, float))
            or not (math.isfinite(self.sinkhorn_tol) and self.sinkhorn_tol > 0)
        ):
            raise ValueError(
                f"sinkhorn_tol must be None (the dtype's default) or a finite tolerance > 0: got "
                f"{self.sinkhorn_tol!r}; e.g. 1e-10 in float64"
            )
        if self.attention == "sinkhorn" and self.causal:
            raise ValueError(
                "attention='sinkhorn' cannot be causal: the only doubly stochastic lower-triangular "
                "matrix is the identity (every token would attend only to itself); use causal=False "
                "or attention='softmax'"
            )
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; valid: {', '.join(BACKENDS)}")
        if (
            isinstance(self.token_noise, bool)
            or not isinstance(self.token_noise, (int, float))
            or not math.isfinite(self.token_noise)
            or self.token_noise < 0
        ):
            raise ValueError(
                f"token_noise eps must be a finite number >= 0 (the intensity of the generator eps Delta): "
                f"got {self.token_noise!r}; use 0 for noiseless tokens or e.g. token_noise=0.1"
            )

    @property
    def sign(self) -> float:
        """+1 for ascent, -1 for descent."""
        return DIRECTIONS[self.direction]

    def head_scale(self, t: float, H: int) -> float:
        """c(t) = 1 / ((t0 + t) sqrt(H)) under layer scaling, else 1 (Sec. 5; :func:`layer_scale`)."""
        return layer_scale(t, self._scaling_t0, H)[0]

    def head_scale_rate(self, t: float, H: int) -> float:
        """dc/dt (0 without layer scaling; :func:`layer_scale`)."""
        return layer_scale(t, self._scaling_t0, H)[1]

    @property
    def _scaling_t0(self) -> float:
        return math.nan if self.layer_scaling is None else float(self.layer_scaling)

    def describe(self) -> dict:
        """JSON-friendly description stored with results."""
        return {
            "direction": self.direction,
            "attention": self.attention,
            "beta": float(self.beta),
            "geometry": self.geometry.name,
            "causal": bool(self.causal),
            "layer_scaling": self.layer_scaling,
            "weights": self.weights.describe(),
            "backend": self.backend,
            "token_noise": float(self.token_noise),
        }
