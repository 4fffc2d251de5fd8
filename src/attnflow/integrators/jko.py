r"""JKO / minimizing-movement step for the tokens (NOTES.md §10; Jordan-Kinderlehrer-Otto 1998).

Each step solves, path by path, the implicit problem on the product of spheres

.. math:: x^{k+1} = \operatorname*{argmin}_{y \in (S^{d-1})^n}\;
          \Phi(y) = -s\,n\,\mathcal E(y; D_{k+1}, t_{k+1})
          + \frac{1}{2\,\tau}\sum_i w_i\, d_S(y_i, x^k_i)^2,

the particle form (multiplied by n) of
:math:`\mu_{k+1} = \operatorname{argmin}[-s\mathcal E(\mu) + W_{m,2}^2(\mu, \mu_k)/(2\tau)]`,
with s = +1 for ``ascent`` and -1 for ``descent``. The weights :math:`w_i` make the
minimizing movement a time discretisation of the simulated flow :math:`x_i' = s v_i`:

* softmax attention, one head: :math:`v_i = n P\nabla_{x_i}\mathcal E / m(x_i)` with the mobility
  :math:`m(x_i) = e^{\mathrm{lse}_i}/n` (Cor. 4.8), so :math:`w_i = m(x^k_i)` (mobility frozen at the
  previous step: the weighted metric :math:`W_{m,2}`, derived);
* unnormalised attention (``usa``), any number of heads: :math:`v_i = n P\nabla_{x_i}\mathcal E`, so
  :math:`w_i = 1` (the plain metric :math:`\frac1n\sum_i d(x_i, x_i^k)^2`).

Other kernels, several softmax heads (whose flow is not the gradient flow of E in any per-token metric:
each head carries its own mobility), fixed value matrices V != D, causal masks and non-symmetric heads are
refused. The heads move by explicit Euler in the drift (the weight process is given, not minimised).

Solver: Riemannian gradient descent preconditioned by :math:`\tau/w_i`, i.e. the direction
:math:`\delta_i = (\tau/w_i)\,s\,n P\nabla_{x_i}\mathcal E(y) + \log_{y_i}(x^k_i)` and the update
:math:`y_i \leftarrow \exp_{y_i}(\alpha\,\delta_i)`, with Armijo backtracking on :math:`\Phi` (so
:math:`\Phi` never increases). The first iterate from :math:`y = x^k` with :math:`\alpha = 1` is the
Lie-Euler step. It stops when the residual :math:`\max_i|\delta_i|` (radians) is at most ``tol`` or after
``max_iter`` iterations; iterations, residuals and unconverged steps are reported by :meth:`JKO.stats`.
Starting from :math:`x^k` gives :math:`\Phi(x^{k+1}) \le \Phi(x^k) = -s\,n\,\mathcal E(x^k)`, hence
:math:`s\,\mathcal E(x^{k+1}) \ge s\,\mathcal E(x^k)` at frozen heads for every step size: energy
stability at any :math:`\tau`.
"""

from __future__ import annotations

import math
import warnings

import torch

from ..geometry import exp_map, geodesic_distance, log_map
from .adaptive import check_cap, check_tolerance
from .base import Integrator
from .lie import require_sphere

__all__ = ["JKO", "jko_weights"]

#: Armijo constant and the most halvings of the step length per iteration
ARMIJO, MAX_HALVINGS = 1e-4, 40


def jko_weights(field, first, D: torch.Tensor) -> torch.Tensor:
    """The metric weights w_i of the minimizing movement (module docstring), shape [P, n], float64.

    Raises
    ------
    ValueError
        For a model whose flow is not a gradient flow of E in a per-token metric (rule, value, fix).
    """
    model = field.model
    H = D.shape[1]
    fix = "use attention 'usa' (any H) or 'softmax' with one head, V = D, no causal mask"
    if model.attention not in ("softmax", "usa") or (model.attention == "softmax" and H != 1):
        raise ValueError(
            f"the JKO step needs a flow that is the gradient flow of E: got attention {model.attention!r} "
            f"with H = {H} heads; {fix}"
        )
    if model.causal or field.V is not None:
        raise ValueError(
            f"the JKO step needs V = D and no causal mask: got causal={model.causal}, "
            f"V {'given' if field.V is not None else 'None'}; {fix}"
        )
    asym = float((D - D.transpose(-1, -2)).abs().max()) if D.numel() else 0.0
    if asym > 1e-10 * max(1.0, float(D.abs().max())):
        raise ValueError(
            f"the JKO step needs symmetric heads (E is the potential of the flow only then): "
            f"max |D - D^T| = {asym:.3g}; use symmetric heads (e.g. heads.init symmetric_gaussian)"
        )
    if model.attention == "usa":
        return torch.ones(first.lse.shape[0], first.lse.shape[-1], dtype=torch.float64, device=D.device)
    n = first.lse.shape[-1]
    return torch.exp(first.lse[:, 0].to(torch.float64) - math.log(n))


class JKO(Integrator):
    """Minimizing-movement (implicit) step for the tokens; energy-stable at any step (order 1).

    Parameters
    ----------
    tol : float
        Stopping tolerance (> 0) on the residual max_i |delta_i| in radians.
    max_iter : int
        Iteration cap (>= 1) per step; a step that reaches it warns and is counted as unconverged.
    """

    order = 1
    strong_order = 1.0
    name = "jko"

    def __init__(self, tol: float = 1e-9, max_iter: int = 500):
        self.tol = check_tolerance(tol, "the JKO tolerance tol", "tol=1e-9")
        self.max_iter = check_cap(max_iter, "the JKO iteration cap max_iter", "max_iter=500")
        self.steps = 0
        self.iterations: list[int] = []
        self.residuals: list[float] = []
        self.unconverged = 0

    def stats(self) -> dict[str, float]:
        """Steps, total and largest iteration counts, largest final residual, unconverged steps, tol, cap."""
        return {
            "jko_steps": float(self.steps),
            "jko_iterations": float(sum(self.iterations)),
            "jko_max_iterations": float(max(self.iterations, default=0)),
            "jko_max_residual": float(max(self.residuals, default=0.0)),
            "jko_unconverged": float(self.unconverged),
            "tol": self.tol,
            "max_iter": float(self.max_iter),
        }

    def drift_step(self, field, x, D, t, dt, first):
        require_sphere(field, self.name)
        D_new = D + dt * field.weight_rate(D, t)
        w = jko_weights(field, first, D)
        y, iters, res = self.solve(field, x, D_new, t + dt, dt, w)
        self.steps += 1
        self.iterations.append(iters)
        self.residuals.append(res)
        if res > self.tol:
            self.unconverged += 1
            warnings.warn(
                f"JKO step at t = {t:g} stopped at max_iter = {self.max_iter} with residual {res:.3g} > "
                f"tol = {self.tol:g} (energy still non-increasing in -sE); raise max_iter or lower dt",
                RuntimeWarning,
                stacklevel=2,
            )
        return y, D_new

    def solve(
        self, field, x: torch.Tensor, D: torch.Tensor, t: float, tau: float, w: torch.Tensor
    ) -> tuple[torch.Tensor, int, float]:
        """Minimise Phi from y = x (module docstring).

        Parameters
        ----------
        x : Tensor, shape=[P, n, d]
            The previous tokens x^k.
        D : Tensor, shape=[P, H, d, d]
            The heads at t.
        t, tau : float
            The time of the energy and the step.
        w : Tensor, shape=[P, n]
            Metric weights.

        Returns
        -------
        y : Tensor, shape=[P, n, d]
        iterations : int
        residual : float
            max_i |delta_i| at y (radians).
        """
        s, n = field.sign, x.shape[1]
        wt = (w / tau).to(x.dtype).unsqueeze(-1)  # [P, n, 1]

        def objective(y):
            fe = field(y, D, t, ledger=True)
            dist2 = (w * geodesic_distance(y, x).to(torch.float64) ** 2).sum(-1)
            return -s * n * fe.energy + dist2 / (2 * tau), fe

        y = x
        phi, fe = objective(y)
        alpha = torch.ones(x.shape[0], dtype=torch.float64, device=x.device)
        res, it, prev = math.inf, 0, None
        while it < self.max_iter:
            delta = s * fe.grad.to(x.dtype) / wt + log_map(y, x)  # preconditioned descent direction
            res = float(torch.linalg.vector_norm(delta, dim=-1).max())
            if res <= self.tol:
                break
            if prev is not None:  # Barzilai-Borwein length in the metric w/tau, per path
                step, old = prev
                num = (wt * step * step).sum((-1, -2)).to(torch.float64)
                den = -(wt * step * (delta - field.geometry.tangent(y, old))).sum((-1, -2)).to(torch.float64)
                bb = num / den.clamp_min(torch.finfo(torch.float64).tiny)
                alpha = torch.where(den > 0, bb.clamp(1e-8, 1e8), torch.ones_like(alpha))
            it += 1
            slope = ((wt * delta * delta).sum((-1, -2))).to(torch.float64)  # -dPhi/dalpha at 0
            roundoff = 1e-14 * (phi.abs() + 1.0)
            for _ in range(MAX_HALVINGS):
                cand = exp_map(y, alpha.to(x.dtype)[:, None, None] * delta)
                phi_c, fe_c = objective(cand)
                # Armijo; where the predicted decrease is below the objective's round-off the decrease
                # cannot be verified, and a step that keeps Phi within round-off is accepted
                tiny = alpha * slope < 1e3 * roundoff
                ok = (phi_c <= phi - ARMIJO * alpha * slope) | (tiny & (phi_c <= phi + roundoff))
                if bool(ok.all()):
                    break
                alpha = torch.where(ok, alpha, 0.5 * alpha)
            if not bool(ok.all()):
                # no verifiable decrease: the objective differences are at round-off; keep the paths that
                # decreased and stop (Phi is then within round-off of a stationary value)
                keep = (ok | (phi_c <= phi + roundoff))[:, None, None]
                y = torch.where(keep, cand, y)
                break
            prev = (alpha.to(x.dtype)[:, None, None] * delta, delta)
            y, phi, fe = cand, phi_c, fe_c
        return y, it, res
