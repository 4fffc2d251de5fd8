r"""AdamW training of the residual attention network of :mod:`attnflow.training.residual` (arXiv 2605.11059).

Full-batch ``torch.optim.AdamW`` on the token regression loss :func:`~attnflow.training.residual.token_loss`.
Before each step the gradient of a per-atom parameter :math:`\phi_{l,m}` (which stands for its
:math:`c_{l,m}` equal head copies, weight :math:`w_{l,m} = c_{l,m}/H`) is turned into the mean-field
gradient of one copy,

.. math:: g_{l,m} = L H\,\frac{\partial \mathcal R}{\partial\theta_{l,h}}
          = \frac{L}{w_{l,m}}\,\frac{\partial\mathcal R}{\partial\phi_{l,m}},

the scaling under which the per-head gradients have a limit as L, H grow (each head's share of the output is
1/(LH)). AdamW is invariant to a constant gradient scale except through its ``eps``; with this scaling the
gradients are O(1) and ``eps`` plays the same role at every (L, H), which is the adaptation of AdamW under
which the limit holds. Atoms absent from a layer (:math:`w_{l,m} = 0`) get a zero gradient; they never act.

The training task (:func:`contraction_task`): token clouds on the sphere, each to be moved halfway towards its
own mean, :math:`y_i = \bar x + \kappa(x_i - \bar x)` (clustering, what attention does).
"""

from __future__ import annotations

import math

import torch

from .residual import ResidualAttention, token_loss

__all__ = ["contraction_task", "mean_field_gradients", "sphere_clouds", "train_adamw"]


def sphere_clouds(B: int, n: int, d: int, *, seed: int) -> torch.Tensor:
    """B clouds of n tokens uniform on :math:`S^{d-1}`, shape=[B, n, d], float64, from ``seed``."""
    g = torch.Generator().manual_seed(int(seed))
    z = torch.randn(B, n, d, generator=g, dtype=torch.float64)
    return z / torch.linalg.vector_norm(z, dim=-1, keepdim=True)


def contraction_task(x: torch.Tensor, kappa: float = 0.5) -> torch.Tensor:
    r"""Targets :math:`y_i = \bar x + \kappa (x_i - \bar x)`, :math:`\bar x` each cloud's mean; [B, n, d]."""
    if not (math.isfinite(kappa) and 0 <= kappa <= 1):
        raise ValueError(f"kappa must lie in [0, 1] (the fraction of the spread kept): got {kappa!r}")
    mean = x.mean(dim=1, keepdim=True)
    return mean + kappa * (x - mean)


def mean_field_gradients(net: ResidualAttention) -> None:
    """Rescale the stored gradients of ``net``'s Q, K, V in place to one head copy's mean-field gradient
    :math:`(L/w_{l,m})\\,\\partial\\mathcal R/\\partial\\phi_{l,m}` (0 where :math:`w_{l,m} = 0`)."""
    w = net.weights
    factor = torch.where(w > 0, net.L / torch.where(w > 0, w, 1.0), 0.0)[:, :, None, None]
    for p in (net.Q, net.K, net.V):
        if p.grad is not None:
            p.grad.mul_(factor)


def train_adamw(
    net: ResidualAttention,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    lr: float = 1e-2,
    weight_decay: float = 1e-2,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> list[float]:
    """Train ``net`` in place with full-batch AdamW on :func:`token_loss` (deterministic: no sampling).

    Parameters
    ----------
    net : ResidualAttention
    x, y : Tensor, shape=[B, n, d]
        Training inputs and targets.
    steps : int
        Optimiser steps (>= 0).
    lr, weight_decay, betas, eps
        Of ``torch.optim.AdamW`` (decoupled weight decay), applied to the mean-field gradients.

    Returns
    -------
    list of float
        The loss before each step and after the last (length steps + 1).

    Raises
    ------
    ValueError
        On steps < 0, lr <= 0, weight_decay < 0, or a non-finite loss (naming the step and the last finite
        loss).
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an integer >= 0: got {steps!r}")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0: got {lr!r}; e.g. lr=1e-2")
    if not (math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be a finite number >= 0: got {weight_decay!r}")
    opt = torch.optim.AdamW(
        [net.Q, net.K, net.V], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=False
    )
    losses: list[float] = []
    for step in range(steps + 1):
        opt.zero_grad(set_to_none=True)
        loss = token_loss(net(x), y)
        value = float(loss.detach())
        if not math.isfinite(value):
            last = losses[-1] if losses else None
            raise ValueError(
                f"the training loss became non-finite at step {step} (last finite loss: {last}); lower lr"
            )
        losses.append(value)
        if step == steps:
            break
        loss.backward()
        mean_field_gradients(net)
        opt.step()
    return losses
