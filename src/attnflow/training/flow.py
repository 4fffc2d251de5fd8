r"""Differentiable simulation of the attention flow with trainable, layer-wise heads :math:`\Theta_t`.

The depth interval :math:`[0, T]` is cut into ``L`` layers of equal length; on layer ``l`` the heads
are constant, :math:`\Theta_t = \{(D^l_h, V^l_h)\}_{h=1}^H` for :math:`t \in [lT/L, (l+1)T/L)` (the
piecewise-constant head law of arXiv 2605.17660, NOTES.md §9), and the tokens follow the field of
arXiv 2605.18870 eq. (10),

.. math:: \dot x_i = s\,\frac1H \sum_h P(x_i)\,V^l_h \sum_j A^{l,h}_{ij} x_j,
          \qquad A^{l,h}_{ij} = \operatorname{softmax}_j(\beta\langle x_i, D^l_h x_j\rangle),

with the explicit sign ``s`` of ``model.direction`` (``ascent`` +1, ``descent`` -1) and the mean-field
scaling 1/H per head. Each layer takes ``steps_per_layer`` steps of an attnflow integrator
(:data:`attnflow.integrators.INTEGRATORS`, retraction after every stage). The field is always evaluated on
the PyTorch backend (:func:`attnflow.dynamics.field.evaluate_torch` through a
:class:`~attnflow.dynamics.system.VectorField` of the model with ``backend="torch"``): the numba kernel
is forward only, so a gradient never goes through it, and a model that names ``numba`` or ``fastsum``
is refused rather than silently switched.

Head parameterisations (``param``): ``"tied"`` (V = D, the paper's choice), ``"dv"`` (D and V free),
``"qkv"`` (:math:`D = Q^\top K`, Q and K of shape (k, d), and V free).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import torch

from ..dynamics.system import VectorField
from ..integrators import INTEGRATORS, get_integrator
from ..model.heads import from_qk
from ..model.transformer import TransformerModel
from ..model.weights import Constant
from ..random import path_generator

__all__ = ["HEAD_PARAMS", "TrainableFlow", "check_tokens", "grad_backend"]

#: head parameterisations: name -> the parameter tensors it trains
HEAD_PARAMS: dict[str, tuple[str, ...]] = {"tied": ("D",), "dv": ("D", "V"), "qkv": ("Q", "K", "V")}


def grad_backend(model: TransformerModel) -> str:
    """The backend a differentiable run takes: always ``"torch"``.

    Raises
    ------
    ValueError
        When ``model.backend`` names a forward-only backend (``numba``, ``fastsum``): a gradient is never
        routed through it, and the run is not switched silently either.
    """
    if model.backend not in ("auto", "torch"):
        raise ValueError(
            f"a differentiable simulation (grad=True) runs on the PyTorch backend only: got "
            f"model.backend={model.backend!r}, which is forward-only; use backend='torch' or 'auto' "
            "(the run then records backend='torch')"
        )
    return "torch"


def _positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}: got {value!r}")
    return value


def check_tokens(flow: TrainableFlow, x0: torch.Tensor) -> torch.Tensor:
    """Validate initial tokens of shape (P, n, d) (or (n, d), made P = 1) for ``flow``; float64 tensor out."""
    x0 = torch.as_tensor(x0)
    if x0.ndim == 2:
        x0 = x0.unsqueeze(0)
    if x0.ndim != 3 or x0.shape[-1] != flow.d:
        raise ValueError(
            f"x0 must have shape (P, n, d) or (n, d) with d = {flow.d} (the flow's dimension): got "
            f"{tuple(x0.shape)}; build tokens with attnflow.tokens.uniform(P, n, {flow.d}, seed=...)"
        )
    if x0.dtype != flow.dtype:
        raise ValueError(
            f"x0 must have the flow's dtype {flow.dtype}: got {x0.dtype}; convert with x0.to({flow.dtype})"
        )
    if not torch.isfinite(x0).all():
        raise ValueError("x0 must be finite: got nan or inf entries; check the token initialisation")
    return x0


class TrainableFlow(torch.nn.Module):
    r"""The attention flow over depth [0, T] with ``layers`` x ``heads`` trainable heads.

    Parameters
    ----------
    model : TransformerModel
        Direction (ascent/descent, required), attention kind, beta, geometry, layer scaling. Its weight
        process must be ``Constant`` (the heads are the parameters) and its backend ``auto`` or ``torch``.
    d : int
        Token dimension.
    layers : int
        Number L >= 1 of layers (pieces of constant heads).
    heads : int
        Heads H >= 1 per layer (mean-field scaling 1/H).
    t1 : float
        Depth T > 0.
    steps_per_layer : int
        Integrator steps per layer (dt = T / (L steps_per_layer)).
    param : {"tied", "dv", "qkv"}
        Head parameterisation (see the module docstring).
    head_dim : int or None
        k, rows of Q and K (``qkv`` only; default d).
    integrator : {"euler", "euler_printed", "heun", "rk4"}
    init_scale : float
        Heads start at I + init_scale G / sqrt(d) (D, V) or (I_{k,d} + init_scale G / sqrt(d)) (Q, K),
        G standard normal from the seeded ``heads`` / ``values`` streams.
    seed : int
    dtype : torch.dtype
        float64 by default.

    Examples
    --------
    >>> import attnflow as af
    >>> from attnflow.training.flow import TrainableFlow
    >>> flow = TrainableFlow(af.TransformerModel(direction="ascent"), d=3, layers=2, heads=2, t1=1.0,
    ...                      steps_per_layer=2, seed=0)
    >>> flow(af.tokens.uniform(1, 8, 3, seed=0)).shape
    torch.Size([1, 8, 3])
    """

    backend: ClassVar[str] = "torch"

    def __init__(
        self,
        model: TransformerModel,
        *,
        d: int,
        layers: int,
        heads: int,
        t1: float,
        steps_per_layer: int = 1,
        param: str = "dv",
        head_dim: int | None = None,
        integrator: str = "euler",
        init_scale: float = 0.5,
        seed: int = 0,
        dtype: torch.dtype = torch.float64,
    ):
        super().__init__()
        if not isinstance(model, TransformerModel):
            raise ValueError(f"model must be a TransformerModel: got {type(model).__name__}")
        if not isinstance(model.weights, Constant):
            raise ValueError(
                "a TrainableFlow trains its heads, so the model's weight process must be Constant: got "
                f"{type(model.weights).__name__}; build the model with the default weights"
            )
        grad_backend(model)
        self.requested_backend = model.backend
        self.model = dataclasses.replace(model, backend="torch")
        self.d = _positive_int("d", d, 2 if model.geometry.unit_norm else 1)
        self.layers = _positive_int("layers (L)", layers)
        self.heads = _positive_int("heads (H)", heads)
        self.steps_per_layer = _positive_int("steps_per_layer", steps_per_layer)
        if isinstance(t1, bool) or not isinstance(t1, (int, float)) or not (math.isfinite(t1) and t1 > 0):
            raise ValueError(f"t1 (the depth T) must be a finite number > 0: got {t1!r}")
        self.t1 = float(t1)
        if param not in HEAD_PARAMS:
            raise ValueError(
                f"unknown head parameterisation param={param!r}; valid: {', '.join(HEAD_PARAMS)}"
            )
        self.param = param
        if integrator not in INTEGRATORS:
            raise ValueError(f"unknown integrator {integrator!r}; valid: {', '.join(INTEGRATORS)}")
        self.integrator = get_integrator(integrator)
        if not (isinstance(init_scale, (int, float)) and math.isfinite(init_scale) and init_scale >= 0):
            raise ValueError(f"init_scale must be a finite number >= 0: got {init_scale!r}")
        self.dtype = dtype
        self.seed = seed
        k = d if head_dim is None else _positive_int("head_dim", head_dim)
        self.head_dim = k
        L, H = self.layers, self.heads
        g_heads = path_generator(seed, 0, "heads")
        g_values = path_generator(seed, 0, "values")
        sd = init_scale / math.sqrt(d)

        def near(shape, eye, gen):
            return torch.nn.Parameter(eye + sd * torch.randn(shape, generator=gen, dtype=dtype))

        if param == "qkv":
            eye_kd = torch.eye(k, d, dtype=dtype)
            self.Q = near((L, H, k, d), eye_kd, g_heads)
            self.K = near((L, H, k, d), eye_kd, g_heads)
        else:
            self.D = near((L, H, d, d), torch.eye(d, dtype=dtype), g_heads)
        if param != "tied":
            self.V = near((L, H, d, d), torch.eye(d, dtype=dtype), g_values)

    # -- geometry of depth -------------------------------------------------------------------------
    @property
    def n_steps(self) -> int:
        """Total number of integrator steps, L * steps_per_layer."""
        return self.layers * self.steps_per_layer

    @property
    def dt(self) -> float:
        """Step T / (L steps_per_layer)."""
        return self.t1 / self.n_steps

    def step_time(self, k: int) -> float:
        """Time t_k = k dt of step k."""
        return k * self.dt

    def layer_of(self, k: int) -> int:
        """Layer of step k."""
        return k // self.steps_per_layer

    def attrs(self) -> dict:
        """JSON-friendly description of the flow, recorded with every run (says ``backend='torch'``)."""
        return {
            "grad": True,
            "backend": self.backend,
            "requested_backend": self.requested_backend,
            "model": self.model.describe(),
            "d": self.d,
            "layers": self.layers,
            "heads": self.heads,
            "t1": self.t1,
            "steps_per_layer": self.steps_per_layer,
            "param": self.param,
            "head_dim": self.head_dim,
            "integrator": self.integrator.name,
            "seed": self.seed,
            "dtype": str(self.dtype).replace("torch.", ""),
        }

    # -- heads -------------------------------------------------------------------------------------
    def param_names(self) -> tuple[str, ...]:
        """Names of the head parameter tensors (``D``, ``V``, ``Q``, ``K``) this flow trains."""
        return HEAD_PARAMS[self.param]

    def layer_heads(self, layer: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Score and value matrices of one layer, each of shape (H, d, d) (V is None when tied)."""
        if self.param == "qkv":
            D = from_qk(self.Q[layer], self.K[layer])
        else:
            D = self.D[layer]
        return D, (None if self.param == "tied" else self.V[layer])

    def all_heads(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(D, V) of every layer, each of shape (L, H, d, d) (V = D when tied), detached."""
        with torch.no_grad():
            pairs = [self.layer_heads(layer) for layer in range(self.layers)]
            D = torch.stack([p[0] for p in pairs])
            V = torch.stack([p[0] if p[1] is None else p[1] for p in pairs])
        return D.clone(), V.clone()

    # -- one step and the forward pass ----------------------------------------------------------------
    def step(self, x: torch.Tensor, D: torch.Tensor, V: torch.Tensor | None, k: int) -> torch.Tensor:
        """Tokens after step k from x (shape (P, n, d)) with the layer heads D, V (shape (H, d, d)).

        The one step map both gradient methods differentiate (the adjoint by one-step vector-Jacobian
        products).
        """
        P = x.shape[0]
        De = D.unsqueeze(0).expand(P, *D.shape)
        Ve = None if V is None else V.unsqueeze(0).expand(P, *V.shape)
        field = VectorField(self.model, Ve)
        t = self.step_time(k)
        first = field(x, De, t, ledger=False, raw=self.integrator.needs_raw)
        x_new, _ = self.integrator.drift_step(field, x, De, t, self.dt, first)
        return x_new

    def forward(self, x0: torch.Tensor, *, trajectory: bool = False) -> torch.Tensor:
        """Integrate from x0 with plain autograd through every step.

        Parameters
        ----------
        x0 : Tensor, shape=[P, n, d]
        trajectory : bool
            Return the states at the layer boundaries, shape (L + 1, P, n, d), instead of the final state.
        """
        x = check_tokens(self, x0)
        states = [x]
        for layer in range(self.layers):
            D, V = self.layer_heads(layer)
            for j in range(self.steps_per_layer):
                x = self.step(x, D, V, layer * self.steps_per_layer + j)
            states.append(x)
        return torch.stack(states) if trajectory else x
