r"""Gradients of a :class:`~attnflow.training.flow.TrainableFlow` by the adjoint method, with O(1) memory in
the number of steps.

For the discrete flow :math:`x_{k+1} = \Phi_k(x_k; \theta_{l(k)})` (one integrator step, retraction
included) and a scalar :math:`R = \sum_l r_l(x_{l m})` of the states at the layer boundaries, the adjoint
variables :math:`a_k = \partial R / \partial x_k` obey the backward recursion

.. math:: a_N = \nabla r_L(x_N), \qquad
          a_k = \Big(\frac{\partial \Phi_k}{\partial x_k}\Big)^{\!\top} a_{k+1} + [k = lm]\,\nabla r_l(x_k),
          \qquad \nabla_{\theta_l} R = \sum_{k \in \text{layer } l}
          \Big(\frac{\partial \Phi_k}{\partial \theta_l}\Big)^{\!\top} a_{k+1},

the discretisation of the backward adjoint ODE :math:`\dot a = -(\partial_x F)^\top a` of the continuous
flow that is *consistent* with the forward scheme (arXiv 2605.17660 derives the risk gradient from the
continuous adjoint equation; discretising it this way makes the gradient exact for the computed
trajectory, so it agrees with autograd to round-off). Each transposed Jacobian is one vector-Jacobian
product of a single step, taped and freed at once: the autograd graph is never longer than one step.

The forward states the recursion needs come from ``state``:

* ``"recomputed"`` (default, O(1) memory): only x_0 and x_N are kept; x_k is recovered from x_{k+1} by
  inverting the step, the fixed point :math:`x \leftarrow \mathrm{retract}(x + x_{k+1} - \Phi_k(x))` (a
  contraction with factor about dt Lip(F)), iterated to round-off. Where it does not contract (large
  heads, large dt) x_k is recomputed exactly by running the first k steps again from x_0 (O(k) time, still
  no stored states). ``flow.adjoint_info`` reports the iterations, the number of such recomputed steps
  and the error of the reconstructed x_0 against the true one (backward reconstruction amplifies
  round-off by the backward flow's growth: errors are reported, never hidden);
* ``"stored"``: the N + 1 states are kept during the forward pass (memory N P n d numbers, still far
  below autograd's graph of attention matrices, P H n^2 per stage per step).
"""

from __future__ import annotations

import torch

from .flow import TrainableFlow, check_tokens

__all__ = ["ADJOINT_STATES", "InverseStepError", "adjoint_flow", "invert_step", "recompute_state"]

#: how the adjoint obtains the forward states: recomputed backwards (O(1) memory) or stored
ADJOINT_STATES = ("recomputed", "stored")
#: the fixed point of the step inversion stops once max |Phi(x) - x_{k+1}| is below this
INVERSE_TOL = 1e-15
INVERSE_MAX_ITER = 200
#: ... or once it stalls below this (a stall above it after INVERSE_MAX_ITER iterations is an error)
STALL_TOL = 1e-12


class InverseStepError(RuntimeError):
    """The step could not be inverted (state='recomputed'): the fixed point did not converge."""


def invert_step(flow: TrainableFlow, y: torch.Tensor, D, V, k: int) -> tuple[torch.Tensor, int]:
    """x with ``flow.step(x, D, V, k) == y`` to round-off, by the fixed point of the module docstring.

    Returns
    -------
    x : Tensor, shape=[P, n, d]
    iterations : int
    """
    geometry = flow.model.geometry
    x = y
    best = prev = float("inf")
    for it in range(1, INVERSE_MAX_ITER + 1):
        res = y - flow.step(x, D, V, k)
        err = float(res.abs().max())
        # done at round-off, or once the contraction stalls below STALL_TOL (the round-off floor of the
        # step, which a slowly contracting fixed point approaches without ever reaching INVERSE_TOL)
        if err <= INVERSE_TOL or (err < STALL_TOL and err > 0.5 * prev):
            return x, it
        if it > 10 and err > 0.9 * prev and err >= STALL_TOL:
            break  # not contracting (dt Lip(F) near or above 1): give up early
        best, prev = min(best, err), err
        x = geometry.retract(x + res)
    raise InverseStepError(
        f"inverting step {k} did not converge in {it} iterations (residual {min(best, err):.2e}): the step "
        f"dt = {flow.dt:g} is too large for the contraction dt Lip(F) < 1; use state='stored' or more "
        "steps per layer"
    )


def recompute_state(flow: TrainableFlow, x0: torch.Tensor, k: int) -> torch.Tensor:
    """x_k by running the first k steps again from x0 (exact, O(k) time, no stored states)."""
    m = flow.steps_per_layer
    x = x0
    for j in range(k):
        D, V = flow.layer_heads(j // m)
        x = flow.step(x, D, V, j)
    return x


class _AdjointFlow(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, flow: TrainableFlow, state: str, trajectory: bool, x0: torch.Tensor, *params: torch.Tensor
    ):
        m = flow.steps_per_layer
        x = x0.detach()
        boundaries = [x]  # kept only for trajectory=True (else the output is the final state alone)
        stored = [x] if state == "stored" else None
        with torch.no_grad():
            for layer in range(flow.layers):
                D, V = flow.layer_heads(layer)
                for j in range(m):
                    x = flow.step(x, D, V, layer * m + j)
                    if stored is not None:
                        stored.append(x)
                if trajectory:
                    boundaries.append(x)
        ctx.flow, ctx.state, ctx.stored, ctx.trajectory = flow, state, stored, trajectory
        ctx.save_for_backward(x0.detach(), x)
        return torch.stack(boundaries) if trajectory else x.clone()

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        flow, state, stored, trajectory = ctx.flow, ctx.state, ctx.stored, ctx.trajectory
        x0, xN = ctx.saved_tensors
        params = [getattr(flow, name) for name in flow.param_names()]
        grads = [torch.zeros_like(p) for p in params]
        m, L = flow.steps_per_layer, flow.layers
        a = (g[L] if trajectory else g).clone()
        x = xN
        iterations = forward_recomputed = 0
        for k in range(flow.n_steps - 1, -1, -1):
            layer = k // m
            with torch.no_grad():
                D, V = flow.layer_heads(layer)
                if state == "stored":
                    x = stored[k]
                else:
                    try:
                        x, it = invert_step(flow, x, D, V, k)
                        iterations += it
                    except InverseStepError:
                        x = recompute_state(flow, x0, k)
                        forward_recomputed += 1
            with torch.enable_grad():
                xk = x.detach().requires_grad_(True)
                D, V = flow.layer_heads(layer)
                y = flow.step(xk, D, V, k)
                out = torch.autograd.grad(y, [xk, *params], a, allow_unused=True)
            a = out[0]
            for acc, gp in zip(grads, out[1:], strict=True):
                if gp is not None:
                    acc += gp
            if trajectory and k % m == 0:
                a = a + g[k // m]
        flow.adjoint_info = {
            "state": state,
            "reconstruction_error": float((x - x0).abs().max()) if state == "recomputed" else 0.0,
            "inverse_iterations": iterations,
            "forward_recomputed_steps": forward_recomputed,
        }
        return (None, None, None, a, *grads)


def adjoint_flow(
    flow: TrainableFlow, x0: torch.Tensor, *, state: str = "recomputed", trajectory: bool = False
) -> torch.Tensor:
    """The flow's forward pass whose backward pass is the adjoint recursion (module docstring).

    Use it like ``flow(x0)``: a loss built on the output and ``loss.backward()`` fill the gradients of
    ``x0`` (when it requires grad) and of the head parameters, without the autograd graph of the steps.

    Parameters
    ----------
    flow : TrainableFlow
    x0 : Tensor, shape=[P, n, d]
    state : {"recomputed", "stored"}
        Where the backward pass gets the forward states (module docstring).
    trajectory : bool
        Return the states at the layer boundaries, shape (L + 1, P, n, d), instead of the final one.

    Returns
    -------
    Tensor, shape=[P, n, d] or [L + 1, P, n, d]
    """
    if state not in ADJOINT_STATES:
        raise ValueError(f"unknown adjoint state {state!r}; valid: {', '.join(ADJOINT_STATES)}")
    x0 = check_tokens(flow, x0)
    params = [getattr(flow, name) for name in flow.param_names()]
    return _AdjointFlow.apply(flow, state, bool(trajectory), x0, *params)
