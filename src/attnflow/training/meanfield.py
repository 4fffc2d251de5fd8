r"""The risk gradient as a function on parameter space (mean-field picture of arXiv 2605.17660, NOTES.md §9).

With the mean-field scaling 1/H, the velocity of layer l is an average over its head law
:math:`\Theta_l = \frac1H\sum_h \delta_{\theta_h}`: :math:`v = \int f(x; \theta)\, d\Theta_l(\theta)`,
:math:`f(x;\theta)_i = P(x_i) V \sum_j A_{ij}(D) x_j` the single-head field. The first variation of the
risk :math:`R` with respect to :math:`\Theta_l` is a function on parameter space,

.. math:: \Psi_l(\theta) = \frac{\delta R}{\delta \Theta_l}(\theta)
          = \sum_{k \in \text{layer } l} \big\langle b_k,\; f(x_k; \theta)\big\rangle,
          \qquad b_k = s\,dt\, J_{\mathrm{retract}}(y_k)^{\top} a_{k+1},

for the projected Euler scheme :math:`x_{k+1} = \mathrm{retract}(y_k)`, :math:`y_k = x_k + s\,dt\,v(x_k)`,
with the adjoint :math:`a_{k+1} = \partial R/\partial x_{k+1}` and the explicit sign ``s`` of the
direction. Its gradient drives the heads as particles: :math:`H\,\nabla_{\theta_h} R = \nabla_\theta
\Psi_l(\theta_h)` exactly, so gradient descent on the heads is the particle discretisation of the
Wasserstein gradient flow of the head law (:func:`risk_first_variation`; tested against autograd).
:func:`risk_landscape` evaluates :math:`\Psi_l` on a plane of parameter space through the layer's mean
head, for the figures.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..dynamics.system import VectorField
from ..model.heads import from_qk
from .flow import TrainableFlow, check_tokens

__all__ = ["landscape_directions", "risk_first_variation", "risk_landscape"]


def _check_flow(flow: TrainableFlow) -> None:
    if flow.integrator.name != "euler":
        raise ValueError(
            "the first variation Psi_l is written for the projected Euler scheme: got integrator="
            f"{flow.integrator.name!r}; build the flow with integrator='euler'"
        )
    if flow.model.layer_scaling is not None:
        raise ValueError(
            "the first variation needs the plain mean-field scaling 1/H: got layer_scaling="
            f"{flow.model.layer_scaling!r}, which scales every head by 1/sqrt(H) as well; use "
            "layer_scaling=None"
        )


def _layer_sensitivities(
    flow: TrainableFlow, x0: torch.Tensor, loss_fn: Callable[[torch.Tensor], torch.Tensor], layer: int
) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """(k, x_k, b_k) for the steps of ``layer`` (module docstring), from one autograd pass."""
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < flow.layers:
        raise ValueError(f"layer must be an integer in [0, {flow.layers - 1}]: got {layer!r}")
    x = check_tokens(flow, x0).detach()
    m = flow.steps_per_layer
    states = [x]
    with torch.enable_grad():
        for lay in range(flow.layers):
            D, V = flow.layer_heads(lay)
            for j in range(m):
                x = flow.step(x, D, V, lay * m + j)
                states.append(x)
        loss = loss_fn(x)
        steps = range(layer * m, (layer + 1) * m)
        adj = torch.autograd.grad(loss, [states[k + 1] for k in steps])
    D, V = (
        (h.detach() for h in flow.layer_heads(layer))
        if flow.param != "tied"
        else (
            flow.layer_heads(layer)[0].detach(),
            None,
        )
    )
    out = []
    P = x0.shape[0]
    for k, a in zip(steps, adj, strict=True):
        xk = states[k].detach()
        field = VectorField(flow.model, None if V is None else V.expand(P, *V.shape))
        v = field(xk, D.expand(P, *D.shape), flow.step_time(k)).velocity
        with torch.enable_grad():
            y = (xk + flow.dt * field.sign * v).requires_grad_(True)
            (b,) = torch.autograd.grad(flow.model.geometry.retract(y), y, a)
        out.append((k, xk, flow.dt * field.sign * b))
    return out


def _single_head_fields(flow: TrainableFlow, thetas: dict, x: torch.Tensor, t: float) -> torch.Tensor:
    """f(x; theta_s) for S parameter points: shape (S, P, n, d)."""
    names = flow.param_names()
    if set(thetas) != set(names):
        raise ValueError(
            f"thetas must give exactly the flow's head parameters {names}: got {tuple(sorted(thetas))}"
        )
    D = from_qk(thetas["Q"], thetas["K"]) if flow.param == "qkv" else thetas["D"]
    V = None if flow.param == "tied" else thetas["V"]
    S, d = D.shape[0], flow.d
    P, n, _ = x.shape
    xs = x.unsqueeze(0).expand(S, P, n, d).reshape(S * P, n, d)
    Ds = D.unsqueeze(1).expand(S, P, d, d).reshape(S * P, 1, d, d)
    Vs = None if V is None else V.unsqueeze(1).expand(S, P, d, d).reshape(S * P, 1, d, d)
    return VectorField(flow.model, Vs)(xs, Ds, t).velocity.reshape(S, P, n, d)


def risk_first_variation(
    flow: TrainableFlow,
    x0: torch.Tensor,
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    layer: int,
    thetas: dict[str, torch.Tensor],
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    r""":math:`\Psi_l(\theta)` and :math:`\nabla_\theta\Psi_l(\theta)` at S points of parameter space.

    Parameters
    ----------
    flow : TrainableFlow
        Projected Euler, no layer scaling.
    x0 : Tensor, shape=[P, n, d]
    loss_fn : callable
        The risk as a function of the final tokens, scalar.
    layer : int
    thetas : dict
        One tensor per head parameter of the flow (``flow.param_names()``), each of shape (S, *head shape),
        e.g. ``{"D": (S, d, d), "V": (S, d, d)}``.

    Returns
    -------
    psi : Tensor, shape=[S]
    grads : dict of Tensor, shapes as ``thetas``
    """
    _check_flow(flow)
    sens = _layer_sensitivities(flow, x0, loss_fn, layer)
    with torch.enable_grad():
        th = {k: v.detach().clone().requires_grad_(True) for k, v in thetas.items()}
        psi = 0.0
        for k, xk, b in sens:
            f = _single_head_fields(flow, th, xk, flow.step_time(k))
            psi = psi + (f * b.unsqueeze(0)).sum(dim=(1, 2, 3))
        grads = torch.autograd.grad(psi.sum(), list(th.values()))
    return psi.detach(), dict(zip(th, grads, strict=True))


def landscape_directions(flow: TrainableFlow) -> tuple[dict, dict, tuple[str, str]]:
    """Two unit directions E1, E2 of head-parameter space and their names (for :func:`risk_landscape`).

    E1 adds the identity to the score part (D, or Q for ``qkv``), E2 the identity to V; for ``tied``
    heads E2 is the rotation generator e_1 e_2^T - e_2 e_1^T of D. Each has Frobenius norm 1.
    """
    d, k, dt = flow.d, flow.head_dim, flow.dtype
    eye = torch.eye(d, dtype=dt) / d**0.5
    zero = {name: torch.zeros_like(getattr(flow, name)[0, 0]) for name in flow.param_names()}
    e1, e2 = dict(zero), dict(zero)
    if flow.param == "qkv":
        e1["Q"] = torch.eye(k, d, dtype=dt) / min(k, d) ** 0.5
    else:
        e1["D"] = eye
    if flow.param == "tied":
        rot = torch.zeros(d, d, dtype=dt)
        rot[0, 1], rot[1, 0] = 2**-0.5, -(2**-0.5)
        e2["D"] = rot
        names = ("score identity", "score rotation")
    else:
        e2["V"] = eye
        names = ("score identity", "value identity")
    return e1, e2, names


def risk_landscape(
    flow: TrainableFlow,
    x0: torch.Tensor,
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    layer: int,
    *,
    points: int = 15,
) -> dict:
    r""":math:`\Psi_l` on the plane :math:`\bar\theta + \alpha E_1 + \beta E_2` through the layer's mean head.

    The square grid of ``points`` x ``points`` values of (alpha, beta) spans [-R, R]^2 with
    R = max(1, 1.25 max |head coordinate|), so that every head's projection lies inside it.

    Returns
    -------
    dict
        ``grid`` (points,); ``psi`` (points, points), indexed [alpha, beta]; ``heads`` (H, 2): the heads'
        coordinates along E1, E2 relative to the mean head; ``force`` (H, 2): :math:`-\nabla\Psi_l` at
        the heads along E1, E2 (projected on the plane); ``directions``: the names of E1 and E2.
    """
    _check_flow(flow)
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise ValueError(f"points must be an integer >= 2: got {points!r}")
    e1, e2, names = landscape_directions(flow)
    heads = {name: getattr(flow, name)[layer].detach() for name in flow.param_names()}
    mean = {name: h.mean(0) for name, h in heads.items()}

    def along(tensors, e):
        return sum((tensors[name] * e[name]).sum(dim=(-1, -2)) for name in tensors)

    dev = {name: heads[name] - mean[name] for name in heads}
    coords = torch.stack([along(dev, e1), along(dev, e2)], dim=-1)
    extent = max(1.0, 1.25 * float(coords.abs().max()))
    grid = torch.linspace(-extent, extent, points, dtype=flow.dtype)
    A, B = torch.meshgrid(grid, grid, indexing="ij")
    plane = {
        name: mean[name] + A.reshape(-1, 1, 1) * e1[name] + B.reshape(-1, 1, 1) * e2[name] for name in heads
    }
    psi, _ = risk_first_variation(flow, x0, loss_fn, layer, plane)
    _, g = risk_first_variation(flow, x0, loss_fn, layer, heads)
    return {
        "grid": grid,
        "psi": psi.reshape(A.shape),
        "heads": coords,
        "force": -torch.stack([along(g, e1), along(g, e2)], dim=-1),
        "directions": names,
    }
