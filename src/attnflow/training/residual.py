r"""The L-layer residual attention network and its depth limit (arXiv 2605.11059; NOTES.md §9).

Hidden states of n tokens in :math:`\mathbb R^d` pass through L residual layers of H attention heads,

.. math:: x^{l+1}_i = x^l_i + \frac1L\,\Gamma(x^l; \nu^H_l)_i,\qquad
          \Gamma(x;\nu)_i = \int V\sum_j \operatorname{softmax}_j\langle Qx_i, Kx_j\rangle\,x_j\,d\nu(Q,K,V),

attention only, unmasked, with the mean-field average
:math:`\nu^H_l = \frac1H\sum_h\delta_{\theta_{l,h}}` over the heads of layer l. :math:`\Gamma` is the
velocity of the attention flow of arXiv 2605.18870 eq. (10) on the flat geometry with score matrices
:math:`D = Q^\top K`; it is computed by the package's one attention field,
:func:`attnflow.dynamics.field.evaluate_torch` (differentiable PyTorch path). The residual update adds
:math:`+\Gamma`: the ``ascent`` direction of attnflow.

**Heads at initialisation.** Heads are iid from a law :math:`\nu_0`. We take :math:`\nu_0` uniform on a
dictionary of M atoms, each atom's Q, K, V drawn Xavier-uniform (:func:`xavier_atoms`). This keeps every
claim of the limit theorem (heads iid, bounded) and makes the limit exactly computable: as H and L grow,
the network tends to the McKean-Vlasov ODE :math:`\dot x = \Gamma(x; \nu_0)` whose field is the finite
average over the M atoms (:func:`limit_flow`, RK4 to rounding accuracy). H heads drawn from M atoms are
stored as per-layer counts :math:`c_{l,m}`: the layer's field is
:math:`\sum_m (c_{l,m}/H)\,\gamma(x;\theta_{l,m})`, identical to summing the H heads one by one (equal
heads give equal terms), at a cost of min(H, M) heads per layer. ``H=None`` is the mean-field network
:math:`H=\infty` (weights 1/M).

**Training.** Heads of layer l that start from the same atom receive the same gradient, hence stay equal
under AdamW; the per-atom parameter therefore represents all of its copies exactly, provided the optimiser
sees one copy's gradient (:func:`attnflow.training.depth.mean_field_gradients`).
"""

from __future__ import annotations

import math

import torch

from ..dynamics.field import evaluate_torch
from ..model.transformer import TransformerModel

__all__ = [
    "ResidualAttention",
    "adjoint_variables",
    "attention_velocity",
    "head_counts",
    "limit_flow",
    "token_loss",
    "xavier_atoms",
]

#: the flat-geometry, unscaled softmax attention whose velocity is Gamma (the residual adds +Gamma: ascent)
_FLAT = TransformerModel(direction="ascent", geometry="flat", backend="torch")


def _check_int(name: str, v, low: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{name} must be an integer >= {low}: got {v!r}")
    return v


def xavier_atoms(
    M: int, d: int, *, seed: int, gain: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""M heads (Q, K, V), each d x d matrix Xavier-uniform: entries :math:`U(-a, a)`,
    :math:`a = g\sqrt{6/(d + d)}` (Glorot and Bengio 2010; ``torch.nn.init.xavier_uniform_``), float64.

    Returns
    -------
    (Q, K, V) : Tensors, shape=[M, d, d]
    """
    _check_int("M (atoms of the head law)", M, 1)
    _check_int("d", d, 1)
    if not (math.isfinite(gain) and gain > 0):
        raise ValueError(f"gain must be a finite number > 0: got {gain!r}")
    g = torch.Generator().manual_seed(int(seed))
    a = gain * math.sqrt(6.0 / (2 * d))
    Q, K, V = ((2 * torch.rand(M, d, d, generator=g, dtype=torch.float64) - 1) * a for _ in range(3))
    return Q, K, V


def head_counts(L: int, H: int, M: int, *, seed: int) -> torch.Tensor:
    """Counts :math:`c_{l,m}` of the H iid heads of each of the L layers drawn uniformly from M atoms.

    Returns
    -------
    Tensor, shape=[L, M], int64, each row summing to H
    """
    _check_int("L", L, 1)
    _check_int("H", H, 1)
    _check_int("M", M, 1)
    g = torch.Generator().manual_seed(int(seed))
    idx = torch.randint(M, (L, H), generator=g)
    return torch.zeros(L, M, dtype=torch.int64).scatter_add_(1, idx, torch.ones_like(idx))


def attention_velocity(
    x: torch.Tensor, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, w: torch.Tensor
) -> torch.Tensor:
    r""":math:`\Gamma(x)_i = \sum_m w_m V_m \sum_j \mathrm{softmax}_j(\langle Q_m x_i, K_m x_j\rangle)\, x_j`.

    Computed by :func:`attnflow.dynamics.field.evaluate_torch` (flat geometry, beta = 1) on the heads with
    :math:`w_m > 0`, with score matrices :math:`Q_m^\top K_m` and values :math:`M' w_m V_m` (the field
    averages over its M' heads). Differentiable in x, Q, K, V.

    Parameters
    ----------
    x : Tensor, shape=[B, n, d]
    Q, K, V : Tensor, shape=[M, d, d]
    w : Tensor, shape=[M]
        Head weights (>= 0; summing to 1 for a probability law of heads).

    Returns
    -------
    Tensor, shape=[B, n, d]
    """
    active = torch.nonzero(w > 0).flatten()
    if active.numel() == 0:
        return torch.zeros_like(x)
    Qa, Ka, Va, wa = Q[active], K[active], V[active], w[active]
    D = Qa.transpose(-1, -2) @ Ka
    Ve = Va * (wa * active.numel()).to(Va.dtype)[:, None, None]
    B = x.shape[0]
    return evaluate_torch(
        _FLAT, x, D.expand(B, *D.shape), Ve.expand(B, *Ve.shape), 0.0, ledger=False
    ).velocity


class ResidualAttention(torch.nn.Module):
    r"""x^{l+1} = x^l + (1/L) Gamma(x^l; heads of layer l), L layers, H heads per layer (module docstring).

    Parameters
    ----------
    atoms : (Q, K, V), each Tensor of shape [M, d, d]
        The support of the head law at initialisation (:func:`xavier_atoms`).
    L : int
        Depth (>= 1).
    H : int or None
        Heads per layer, drawn iid uniformly from the atoms with ``seed``; None: H = infinity (every atom
        with weight 1/M in every layer, the mean-field network).
    seed : int
        Seed of the head draws.

    Attributes
    ----------
    Q, K, V : Parameter, shape=[L, M, d, d]
        Per-layer copies of the atoms (trained).
    weights : Tensor, shape=[L, M]
        :math:`c_{l,m}/H` (or 1/M).
    """

    def __init__(self, atoms, L: int, H: int | None, *, seed: int = 0):
        super().__init__()
        Q, K, V = (torch.as_tensor(a, dtype=torch.float64) for a in atoms)
        if Q.ndim != 3 or Q.shape[-1] != Q.shape[-2] or K.shape != Q.shape or V.shape != Q.shape:
            raise ValueError(
                f"atoms must be three tensors (Q, K, V) of one shape [M, d, d]: got {tuple(Q.shape)}, "
                f"{tuple(K.shape)}, {tuple(V.shape)}; build them with xavier_atoms(M, d, seed=...)"
            )
        _check_int("L", L, 1)
        M = Q.shape[0]
        self.L, self.H, self.M = L, H, M
        if H is None:
            w = torch.full((L, M), 1.0 / M, dtype=torch.float64)
        else:
            w = head_counts(L, H, M, seed=seed).to(torch.float64) / H
        self.register_buffer("weights", w)
        self.Q = torch.nn.Parameter(Q.expand(L, M, *Q.shape[1:]).clone())
        self.K = torch.nn.Parameter(K.expand(L, M, *K.shape[1:]).clone())
        self.V = torch.nn.Parameter(V.expand(L, M, *V.shape[1:]).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x^L from x^0 = x, shape=[B, n, d] -> [B, n, d] (x cast to the parameters' float64)."""
        if x.ndim != 3 or x.shape[-1] != self.Q.shape[-1]:
            raise ValueError(
                f"x must have shape [B, n, d] with d = {self.Q.shape[-1]}: got {tuple(x.shape)}; add a batch "
                "axis with x[None]"
            )
        x = x.to(self.Q.dtype)
        for l in range(self.L):
            x = x + attention_velocity(x, self.Q[l], self.K[l], self.V[l], self.weights[l]) / self.L
        return x


def limit_flow(x0: torch.Tensor, atoms, *, steps: int = 256, t1: float = 1.0) -> torch.Tensor:
    r"""x(t1) of the mean-field limit ODE at initialisation, :math:`\dot x = \Gamma(x; \nu_0)`, by classical
    RK4 with ``steps`` steps (differentiable in x0 and the atoms).

    With :math:`\nu_0` uniform on the M atoms the limit field is :func:`attention_velocity` with weights
    1/M. RK4's error is :math:`O(\mathrm{steps}^{-4})`; 256 steps reach about 1e-13 on the study's sizes
    (checked against scipy ``solve_ivp`` in the tests).

    Parameters
    ----------
    x0 : Tensor, shape=[B, n, d]
    atoms : (Q, K, V), Tensors of shape [M, d, d]
    steps : int
    t1 : float

    Returns
    -------
    Tensor, shape=[B, n, d]
    """
    _check_int("steps", steps, 1)
    Q, K, V = atoms
    if x0.ndim != 3 or x0.shape[-1] != Q.shape[-1]:
        raise ValueError(
            f"x0 must have shape [B, n, d] with d = {Q.shape[-1]} (the atoms' size): got {tuple(x0.shape)}; "
            "add a batch axis with x0[None]"
        )
    w = torch.full((Q.shape[0],), 1.0 / Q.shape[0], dtype=torch.float64)

    def f(x):
        return attention_velocity(x, Q, K, V, w)

    h = t1 / steps
    x = x0
    for _ in range(steps):
        k1 = f(x)
        k2 = f(x + 0.5 * h * k1)
        k3 = f(x + 0.5 * h * k2)
        k4 = f(x + h * k3)
        x = x + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def token_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    r"""Mean over inputs of :math:`\ell_b = \frac{1}{2n}\sum_i |x_{b,i} - y_{b,i}|^2`; [B, n, d] -> []."""
    return 0.5 * (out - target).square().sum(-1).mean()


def adjoint_variables(forward, x0: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Output and backpropagated variables :math:`p_{b,i}(0) = n\,\partial\ell_b/\partial x_{b,i}(0)`.

    ``forward`` maps x0 [B, n, d] to the output [B, n, d] (a :class:`ResidualAttention` or the limit flow);
    :math:`\ell_b` is the per-input loss of :func:`token_loss`, so p is O(1) per token whatever n and B.

    Returns
    -------
    (out, p0) : Tensors, shape=[B, n, d], detached
    """
    x = x0.detach().clone().requires_grad_(True)
    out = forward(x)
    B, n = x0.shape[:2]
    (g,) = torch.autograd.grad(token_loss(out, target), x)
    return out.detach(), g * (B * n)
