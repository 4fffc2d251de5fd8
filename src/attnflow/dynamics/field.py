r"""The vector field of the token dynamics and, in the same pass, the energy-ledger pieces.

This is the PyTorch reference path (CPU and CUDA). For tokens x (P, n, d) and heads D (P, H, d, d):

* scores s^h_ij = beta <x_i, D_h x_j> (masked to j <= i when causal), row log-sum-exp lse^h_i;
* W^h_i = sum_j A^h_ij V_h x_j, velocity v_i = (1/H) sum_h P_perp(x_i) W^h_i
  (arXiv 2605.18870, eq. (10) and the Sec. 6 scheme; NOTES.md §1);
* energy E = 1/(2 beta H n^2) sum_{h,i,j} exp(s^h_ij) (eq. (20) with beta = 1; NOTES.md §3);
* mobility m_h(x_i) = exp(lse^h_i)/n (Cor. 4.8) and its harmonic mean over heads b(x_i) (eq. (36));
* G^2 = (1/n) sum_i b(x_i) |v_i|^2 (Lemma 4.12, Sec. 6);
* n P_perp grad_{x_i} E = (1/(2Hn)) P_perp sum_h (D_h y^h_i + D_h^T z^h_i), y^h_i = sum_j U_ij x_j,
  z^h_i = sum_j U_ji x_j, U = exp(s): the exact gradient of E for any (non-symmetric) D, so that
  Ghat^2 = (1/n) sum_i <v_i, n P_perp grad_i E> gives dE/dt = s Ghat^2 at frozen weights;
* C_h = sum_ij U_ij x_i x_j^T / (2Hn^2), so that the weight-drift part of dE/dt is sum_h <f_h, C_h>_F;
* sum_ij U_ij (1 + <x_i, x_j>^2) / (2Hn^2) per head (Ito factor of the symmetric noise).

Exponentials are only ever taken of shifted scores (log-sum-exp); ledger quantities are accumulated in
float64 whatever the working precision, and overflow only where E itself exceeds float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..geometry.sphere import tangent_projection
from ..model.attention import attention_weights, causal_mask
from ..model.transformer import TransformerModel


@dataclass
class FieldEval:
    """One evaluation of the field at (x, D, t). Ledger entries are ``None`` when not requested.

    Attributes
    ----------
    velocity : Tensor, shape=[P, n, d]
        v_i (without the direction sign), tangent on the sphere.
    raw_velocity : Tensor or None, shape=[P, n, d]
        (1/H) sum_h W^h_i before the tangent projection (the printed scheme uses it).
    lse : Tensor, shape=[P, H, n]
        Row log-sum-exp of the scores.
    energy, G2, Ghat2 : Tensor, shape=[P], float64
    grad : Tensor, shape=[P, n, d], float64
    second_moment : Tensor, shape=[P, H, d, d], float64
    ito_moment, ito_full, head_mass : Tensor, shape=[P, H], float64
        sum_ij U_ij (|x_i|^2 |x_j|^2 + <x_i,x_j>^2) / (2Hn^2), sum_ij U_ij |x_i|^2 |x_j|^2 / (2Hn^2)
        (twice the Ito variance factors of the symmetric and of the full noise, see
        :mod:`attnflow.dynamics.ledger_terms`) and sum_ij U_ij / (2Hn^2); on the sphere
        ``ito_full == head_mass``.
    """

    velocity: torch.Tensor
    lse: torch.Tensor
    raw_velocity: torch.Tensor | None = None
    energy: torch.Tensor | None = None
    G2: torch.Tensor | None = None
    Ghat2: torch.Tensor | None = None
    grad: torch.Tensor | None = None
    second_moment: torch.Tensor | None = None
    ito_moment: torch.Tensor | None = None
    ito_full: torch.Tensor | None = None
    head_mass: torch.Tensor | None = None


def effective_heads(
    model: TransformerModel, D: torch.Tensor, V: torch.Tensor | None, t: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Score and value matrices actually used at time t (layer scaling of Sec. 5 applied)."""
    c = model.head_scale(t, D.shape[1])
    De = D * c if c != 1.0 else D
    if V is None:
        return De, De
    return De, (V * c if c != 1.0 else V)


def _chunks(P: int, H: int, n: int, elt: int, budget: int, full_rows: bool) -> tuple[int, int]:
    """Head and row chunk sizes keeping the (P, hc, rc, n) temporaries under ``budget`` bytes."""
    row_bytes = 4 * P * n * elt  # scores, weights, and two temporaries per row
    hc = max(1, min(H, budget // max(row_bytes * n, 1)))
    rc = n if (full_rows or hc > 1 or row_bytes * n <= budget) else max(1, budget // row_bytes)
    return hc, rc


def evaluate_torch(
    model: TransformerModel,
    x: torch.Tensor,
    D: torch.Tensor,
    V: torch.Tensor | None,
    t: float,
    *,
    ledger: bool = True,
    raw: bool = False,
    chunk_bytes: int = 2**27,
) -> FieldEval:
    """Evaluate the field with plain PyTorch (reference path), tiling over heads and rows.

    Parameters
    ----------
    model : TransformerModel
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d]
        Score matrices.
    V : Tensor or None, shape=[P, H, d, d]
        Value matrices (None: V = D, the paper's choice).
    t : float
        Time (only used by the layer scaling).
    ledger : bool
        Also compute the energy-ledger quantities.
    raw : bool
        Also return the unprojected mean head output.
    """
    P, n, d = x.shape
    H = D.shape[1]
    De, Ve = effective_heads(model, D, V, t)
    beta = float(model.beta)
    kind = model.attention
    mask = causal_mask(n, x.device) if model.causal else None
    sphere = model.geometry == "sphere"
    hc, rc = _chunks(P, H, n, x.element_size(), chunk_bytes, kind == "sinkhorn")

    raw_sum = torch.zeros(P, n, d, dtype=x.dtype, device=x.device)
    lse = torch.empty(P, H, n, dtype=x.dtype, device=x.device)
    f64 = torch.float64
    if ledger:
        x64 = x.to(f64)
        y = torch.empty(P, H, n, d, dtype=f64, device=x.device)
        z = torch.zeros(P, H, n, d, dtype=f64, device=x.device)
        ito = torch.zeros(P, H, dtype=f64, device=x.device)
        if not sphere:
            sq = x64.square().sum(-1)  # |x_i|^2
            ito_full = torch.zeros(P, H, dtype=f64, device=x.device)

    for h0 in range(0, H, hc):
        hs = slice(h0, min(H, h0 + hc))
        DxT = (beta * De[:, hs]) @ x.transpose(-1, -2).unsqueeze(1)  # (P, hc, d, n): beta D_h x_j
        for r0 in range(0, n, rc):
            rs = slice(r0, min(n, r0 + rc))
            s = x[:, rs].unsqueeze(1) @ DxT  # (P, hc, r, n)
            if mask is not None:
                s = s.masked_fill(~mask[rs], float("-inf"))
            # one exponential pass gives both the row log-sum-exp and the softmax weights
            smax = s.amax(dim=-1, keepdim=True)
            A_soft = torch.exp(s - smax)
            ssum = A_soft.sum(dim=-1, keepdim=True)
            A_soft = A_soft / ssum
            l = (smax + torch.log(ssum)).squeeze(-1)
            lse[:, hs, rs] = l
            A = (
                A_soft
                if kind == "softmax"
                else attention_weights(s, l, kind, sinkhorn_iters=model.sinkhorn_iters)
            )
            Ax = A @ x.unsqueeze(1)  # (P, hc, r, d): sum_j A_ij x_j
            W = torch.einsum("phab,phib->phia", Ve[:, hs], Ax)
            raw_sum[:, rs] += W.sum(1)
            if ledger:
                l64 = l.to(f64)
                Asx = Ax if kind == "softmax" else A_soft @ x.unsqueeze(1)
                y[:, hs, rs] = torch.exp(l64).unsqueeze(-1) * Asx.to(f64)
                # z_j += sum_i exp(lse_i) A_ij x_i, with a per-chunk shift against overflow.
                m = l64.amax(dim=-1, keepdim=True).clamp_min(-1e300)
                w = torch.exp(l64 - m)
                zc = A_soft.transpose(-1, -2).to(f64) @ (w.unsqueeze(-1) * x64[:, rs].unsqueeze(1))
                z[:, hs] += torch.exp(m).unsqueeze(-1) * zc
                A64 = A_soft.to(f64)
                rho2 = (x64[:, rs] @ x64.transpose(-1, -2)).square().unsqueeze(1)  # (P,1,r,n)
                if sphere:
                    ito[:, hs] += (torch.exp(l64) * (A64 * (1 + rho2)).sum(-1)).sum(-1)
                else:
                    # off the sphere Var(x^T xi y) = (|x|^2|y|^2 + <x,y>^2)/2 (symmetric) or |x|^2|y|^2 (full)
                    nn = (sq[:, rs].unsqueeze(-1) * sq.unsqueeze(-2)).unsqueeze(1)  # (P,1,r,n)
                    ito[:, hs] += (torch.exp(l64) * (A64 * (nn + rho2)).sum(-1)).sum(-1)
                    ito_full[:, hs] += (torch.exp(l64) * (A64 * nn).sum(-1)).sum(-1)

    raw_v = raw_sum / H
    v = tangent_projection(x, raw_v) if sphere else raw_v
    out = FieldEval(velocity=v, lse=lse, raw_velocity=raw_v if raw else None)
    if not ledger:
        return out
    De64 = De.to(f64)
    norm = 2.0 * H * n * n
    e64 = torch.exp(lse.to(f64))  # (P, H, n) = n m_h(x_i)
    head_mass = e64.sum(-1) / norm
    out.head_mass = head_mass
    out.energy = head_mass.sum(-1) / beta
    # b = ((1/H) sum_h 1/m_h)^{-1} = exp(-logmeanexp_h(-lse)) / n, never 1/0
    b = torch.exp(-(torch.logsumexp(-lse.to(f64), dim=1) - math.log(H))) / n
    v64 = v.to(f64)
    out.G2 = (b * v64.square().sum(-1)).mean(-1)
    g = (torch.einsum("phab,phib->pia", De64, y) + torch.einsum("phba,phib->pia", De64, z)) / (2.0 * H * n)
    if sphere:
        g = tangent_projection(x64, g)
    out.grad = g
    out.Ghat2 = (v64 * g).sum(-1).mean(-1)
    out.second_moment = torch.einsum("pia,phib->phab", x64, y) / norm
    out.ito_moment = ito / norm
    out.ito_full = head_mass if sphere else ito_full / norm
    return out


def energy_from_lse(lse: torch.Tensor, beta: float) -> torch.Tensor:
    """E = 1/(2 beta H n^2) sum_{h,i} exp(lse^h_i) from row log-sum-exps (eq. (20); float64).

    Parameters
    ----------
    lse : Tensor, shape=[P, H, n]
    beta : float

    Returns
    -------
    Tensor, shape=[P]
    """
    _, H, n = lse.shape
    return torch.exp(lse.to(torch.float64)).sum(dim=(-1, -2)) / (2.0 * beta * H * n * n)


def evaluate(
    model: TransformerModel,
    x: torch.Tensor,
    D: torch.Tensor,
    V: torch.Tensor | None,
    t: float,
    *,
    ledger: bool = True,
    raw: bool = False,
) -> FieldEval:
    """Evaluate the field, dispatching to the fused numba kernel where it applies.

    The numba kernel (:mod:`attnflow.dynamics._numba_kernel`) is used when ``model.backend`` is
    ``"numba"``, or ``"auto"`` with CPU tensors, softmax attention and ``raw=False``; otherwise the
    PyTorch path :func:`evaluate_torch`. Both return the same :class:`FieldEval` (tests check it).
    """
    if _use_numba(model, x, raw, ledger):
        from ._numba_bridge import evaluate_numba

        return evaluate_numba(model, x, D, V, t, ledger=ledger)
    return evaluate_torch(model, x, D, V, t, ledger=ledger, raw=raw)


def _use_numba(model: TransformerModel, x: torch.Tensor, raw: bool, ledger: bool = True) -> bool:
    if model.backend == "torch":
        return False
    # the kernel's Ito factors assume unit tokens: the flat geometry's ledger goes through torch
    eligible = (
        x.device.type == "cpu"
        and model.attention == "softmax"
        and not raw
        and not (ledger and model.geometry == "flat")
    )
    if model.backend == "numba":
        if not eligible:
            raise ValueError(
                "backend='numba' needs CPU tensors, attention='softmax', an integrator that uses the "
                "projected velocity, and the sphere geometry when the ledger is on: got "
                f"device={x.device.type}, attention={model.attention!r}, raw={raw}, "
                f"geometry={model.geometry!r}, ledger={ledger}; use backend='auto' or 'torch'"
            )
        return True
    if not eligible:
        return False
    from . import _numba_bridge

    return _numba_bridge.available()
