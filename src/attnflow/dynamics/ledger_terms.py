r"""Per-step terms of the discrete energy-dissipation identity (arXiv 2605.18870 eq. (147); NOTES.md §3).

With U^h_ij = exp(beta <x_i, D_h x_j>), E = 1/(2 beta H n^2) sum U, and the weight SDE
dD_h = f_h dt + g_h dW_h (noise shape xi = (Z+Z^T)/2 or Z), Ito's formula gives at frozen tokens

    dE = sum_h <f_h, C_h>_F dt + (beta/2) sum_h g_h^2 sum_ij U_ij Var(x_i^T xi x_j) / (2Hn^2) dt + dM,
    dM = sum_h <g_h dW_h, C_h>_F,          C_h = sum_ij U_ij x_i x_j^T / (2 H n^2),

because d/dD exp(beta x^T D y) = beta U x y^T and d^2/dD^2 gives beta^2 U (x y^T)(x y^T). For the
symmetric noise Var(x^T xi y) = (|x|^2|y|^2 + <x,y>^2)/2, which is (1 + <x,y>^2)/2 on the sphere, so
the Ito part is (beta g^2/4) sum U (1 + <x_i,x_j>^2)/(2Hn^2) (NOTES.md §3 with beta = 1); for the
full noise Var = |x|^2 |y|^2 (1 on the sphere) and the Ito part is (beta g^2/2) sum U/(2Hn^2).
``FieldEval.ito_moment`` and ``FieldEval.ito_full`` carry these sums with the general norms, so the
flat geometry is exact too.

Under the layer scaling of Sec. 5 the heads act as c(t) D, so f, g and dW are replaced by
c f + c' D, c g and c dW.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..model.transformer import TransformerModel
from .field import FieldEval


@dataclass
class StepTerms:
    """Rates and increments of one step, per path (float64, shape [P])."""

    dtE_drift: torch.Tensor
    dtE_ito: torch.Tensor
    martingale: torch.Tensor


def _per_head_g2(g, P: int, H: int) -> torch.Tensor:
    g = torch.as_tensor(g, dtype=torch.float64)
    if g.ndim >= 2 and g.shape[-2:] == (1, 1):
        g = g[..., 0, 0]
    return (g**2).expand(P, H) if g.ndim <= 2 else (g**2).reshape(P, H)


def step_terms(
    model: TransformerModel,
    fe: FieldEval,
    D: torch.Tensor,
    t: float,
    drift: torch.Tensor,
    g,
    noise: torch.Tensor | None,
) -> StepTerms:
    """Drift and Ito rates of E at frozen tokens, and the martingale increment of one step.

    Parameters
    ----------
    model : TransformerModel
    fe : FieldEval
        Evaluation at (x_k, D_k, t_k) with the ledger.
    D : Tensor, shape=[P, H, d, d]
        D_k (raw, before layer scaling).
    t : float
    drift : Tensor, shape=[P, H, d, d]
        f(D_k, t_k).
    g : float or Tensor broadcastable to [P, H, 1, 1]
        Diffusion coefficient g(D_k, t_k) (0 for deterministic processes).
    noise : Tensor or None, shape=[P, H, d, d]
        The increment g sqrt(dt) xi added to D in this step (None: none).
    """
    P, H = D.shape[:2]
    f64 = torch.float64
    c = model.head_scale(t, H)
    cdot = model.head_scale_rate(t, H)
    f_eff = c * drift.to(f64) + (cdot * D.to(f64) if cdot != 0.0 else 0.0)
    C = fe.second_moment
    dtE_drift = (f_eff * C).sum(dim=(-1, -2, -3))
    g2 = _per_head_g2(g, P, H).to(C.device) * c**2
    beta = float(model.beta)
    noise_kind = getattr(model.weights, "noise", "symmetric")
    if noise_kind == "symmetric":
        dtE_ito = (beta / 4.0) * (g2 * fe.ito_moment).sum(-1)
    else:
        dtE_ito = (beta / 2.0) * (g2 * fe.ito_full).sum(-1)
    if noise is None:
        mart = torch.zeros(P, dtype=f64, device=C.device)
    else:
        mart = c * (noise.to(f64) * C).sum(dim=(-1, -2, -3))
    return StepTerms(dtE_drift=dtE_drift, dtE_ito=dtE_ito, martingale=mart)
