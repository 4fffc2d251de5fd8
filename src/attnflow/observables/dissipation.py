r"""Mobilities, the paper's strong upper gradient, the exact dissipation power and the martingale term.

Notation of arXiv 2605.18870 (NOTES.md §3, ``docs/design.md``), tokens x (P, n, d), heads D (P, H, d, d),
:math:`U^h_{ij} = \exp(\beta\langle x_i, D_h x_j\rangle)`:

* mobility (Cor. 4.8) :math:`m_h(x_i) = \frac1n\sum_j U^h_{ij}`;
* effective mobility (eq. (36)), the harmonic mean over heads
  :math:`b(x_i) = \bigl(\frac1H\sum_h m_h(x_i)^{-1}\bigr)^{-1}`;
* velocity :math:`v_i = \frac1H\sum_h P^\perp_{x_i}\sum_j A^h_{ij} V_h x_j` (eq. (10));
* the paper's strong upper gradient (Lemma 4.12, Sec. 6) :math:`G^2 = \frac1n\sum_i b(x_i)|v_i|^2`;
* the exact dissipation power
  :math:`\hat G^2 = \frac1n\sum_i\langle v_i, n P^\perp_{x_i}\nabla_{x_i}\mathcal{E}\rangle`, so that
  :math:`\frac{d}{dt}\mathcal{E} = s\,\hat G^2` along :math:`x' = s v` at frozen weights, for any D
  (symmetric or not) and any values V;
* the metric derivative in :math:`W_{m,2}` (Sec. 3) :math:`|\mu'|^2 = \frac1n\sum_i b(x_i)|x_i'|^2`;
* the martingale increment of (147) :math:`dM = \sum_h \langle g\,dW_h, C_h\rangle_F`.

:math:`\hat G^2 = G^2` for one symmetric head with V = D, and for identical heads; not in general (the
audit :mod:`attnflow.analysis.edi` measures the difference along trajectories).

All values come from :func:`attnflow.dynamics.field.evaluate_torch` and
:func:`attnflow.dynamics.assembly.martingale_increment` (the quantities the simulation loop records).
"""

from __future__ import annotations

import torch

from ..dynamics import assembly
from .inputs import check_heads, check_tokens, field_eval

__all__ = [
    "dissipation_power",
    "effective_mobility",
    "martingale_increment",
    "metric_derivative_sq",
    "mobility",
    "strong_upper_gradient_sq",
]


def mobility(x: torch.Tensor, D: torch.Tensor, beta: float = 1.0, *, causal: bool = False) -> torch.Tensor:
    r"""Head mobilities :math:`m_h(x_i) = \frac1n\sum_j \exp(\beta\langle x_i, D_h x_j\rangle)` (Cor. 4.8).

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
        Tokens on S^{d-1}.
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
    beta : float
    causal : bool
        Sum over j <= i only.

    Returns
    -------
    Tensor, shape=[P, H, n], float64
    """
    x = check_tokens(x)
    _, _, fe = field_eval(x, D, beta, causal=causal, ledger=False)
    return mobility_from_lse(fe.lse, x.shape[1])


def mobility_from_lse(lse: torch.Tensor, n: int) -> torch.Tensor:
    r"""Head mobilities (Cor. 4.8) from the log-sum-exp of a field evaluation that already ran:
    :math:`m_h(x_i) = \exp(\mathrm{lse}_{h,i}) / n`, ``lse`` of any shape, float64 (the one home of the
    formula: :func:`mobility` and :func:`attnflow.analysis.theorems.gradient_mc_decomposition` call it)."""
    return torch.exp(lse.to(torch.float64)) / n


def effective_mobility(
    x: torch.Tensor, D: torch.Tensor, beta: float = 1.0, *, causal: bool = False
) -> torch.Tensor:
    r"""Effective mobility, the harmonic mean of the head mobilities (eq. (36), uniform weights 1/H).

    .. math:: b(x_i) = \Bigl(\frac1H\sum_{h=1}^H \frac{1}{m_h(x_i)}\Bigr)^{-1}

    Returns
    -------
    Tensor, shape=[P, n], float64
    """
    m = mobility(x, D, beta, causal=causal)
    return 1.0 / (1.0 / m).mean(1)


def strong_upper_gradient_sq(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float = 1.0,
    *,
    values: torch.Tensor | None = None,
    attention: str = "softmax",
    causal: bool = False,
) -> torch.Tensor:
    r"""The paper's squared strong upper gradient (Lemma 4.12, used in identity (147), Sec. 6).

    .. math:: G^2 = \frac1n\sum_{i=1}^n b(x_i)\,|v_i|^2,\qquad
              v_i = \frac1H\sum_h P^\perp_{x_i}\sum_j A^h_{ij} V_h x_j

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
    beta : float
    values : Tensor or None, shape=[P, H, d, d]
        Value matrices (None: V = D, the paper).
    attention : str
        Attention kind of the velocity (``attnflow.ATTENTION_KINDS``; paper: softmax).
    causal : bool

    Returns
    -------
    Tensor, shape=[P], float64
    """
    return field_eval(x, D, beta, values=values, attention=attention, causal=causal)[2].G2


def dissipation_power(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float = 1.0,
    *,
    values: torch.Tensor | None = None,
    attention: str = "softmax",
    causal: bool = False,
) -> torch.Tensor:
    r"""Exact dissipation power :math:`\hat G^2` (exact chain rule at frozen weights).

    .. math:: \hat G^2 = \frac1n\sum_i \langle v_i,\, n P^\perp_{x_i}\nabla_{x_i}\mathcal{E}\rangle,\qquad
              n\nabla_{x_i}\mathcal{E} = \frac{1}{2Hn}\sum_h \bigl(D_h y^h_i + D_h^\top z^h_i\bigr),

    with :math:`y^h_i = \sum_j U^h_{ij}x_j`, :math:`z^h_i = \sum_j U^h_{ji}x_j`; valid for symmetric and
    non-symmetric D and any V, so that :math:`\frac{d}{dt}\mathcal{E}(x_t, D) = s\hat G^2` along
    :math:`x' = s v` (``docs/design.md``). For symmetric D with V = D,
    :math:`\hat G^2 = \frac1n\sum_i\langle v_i, \frac1H\sum_h m_h(x_i) V^h_i\rangle` (NOTES.md §3).

    Parameters
    ----------
    x, D, beta, values, attention, causal
        As in :func:`strong_upper_gradient_sq`.

    Returns
    -------
    Tensor, shape=[P], float64
    """
    return field_eval(x, D, beta, values=values, attention=attention, causal=causal)[2].Ghat2


def metric_derivative_sq(
    x: torch.Tensor, D: torch.Tensor, velocity: torch.Tensor, beta: float = 1.0, *, causal: bool = False
) -> torch.Tensor:
    r"""Squared metric derivative of the empirical measure in :math:`W_{m,2}` (Sec. 3, eq. (36)).

    .. math:: |\mu'|^2 = \frac1n\sum_i b(x_i)\,|x_i'|^2

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
    velocity : Tensor, shape=[P, n, d]
        Token velocities x_i' (tangent at x_i), e.g. ``s * v`` of the dynamics.
    beta : float
    causal : bool

    Returns
    -------
    Tensor, shape=[P], float64
    """
    x = check_tokens(x)
    if not isinstance(velocity, torch.Tensor) or tuple(velocity.shape) != tuple(x.shape):
        raise ValueError(
            f"velocity must be a tensor of the tokens' shape {tuple(x.shape)}: got "
            f"{tuple(velocity.shape) if isinstance(velocity, torch.Tensor) else type(velocity).__name__}"
        )
    b = effective_mobility(x, D, beta, causal=causal)
    return (b * velocity.to(torch.float64).square().sum(-1)).mean(-1)


def martingale_increment(
    x: torch.Tensor, D: torch.Tensor, noise: torch.Tensor, beta: float = 1.0
) -> torch.Tensor:
    r"""Martingale increment of identity (147) for one weight-noise increment, left point (x, D).

    .. math:: dM = \sum_h \langle dS_h, C_h\rangle_F
              = \frac{1}{2Hn^2}\sum_{h,i,j} U^h_{ij}\, x_i^\top dS_h\, x_j,

    where :math:`dS_h = g\sqrt{dt}\,\xi_h` is the noise added to :math:`D_h` in the step.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
        Heads at the left point.
    noise : Tensor, shape=[P, H, d, d]
        The increment dS (already scaled by g sqrt(dt)).
    beta : float

    Returns
    -------
    Tensor, shape=[P], float64
    """
    x = check_tokens(x)
    Dv = check_heads(D, x)
    dS = check_heads(noise, x, "noise")
    if dS.shape != Dv.shape:
        raise ValueError(f"noise must have the heads' shape {tuple(Dv.shape)}: got {tuple(noise.shape)}")
    model, Dv, fe = field_eval(x, Dv, beta)
    return assembly.martingale_increment(fe, dS, model.head_scale(0.0, Dv.shape[1]))
