"""PyTorch backend of the field: the pair sums of :class:`~attnflow.dynamics.pairsums.PairSums` for every
attention kind, on CPU or CUDA, tiled over heads and rows so that no (P, H, n, n) array is formed at once.

Rows are shifted by their own log-sum-exp (``row_shift = lse``, ``row_sum = 1``), so that ``row_x`` is the
softmax mean and every exponential is of a non-positive number; column sums are accumulated in float64
with a per-chunk shift. Attention weights of the non-softmax kinds come from
:func:`attnflow.model.attention.attention_weights`.
"""

from __future__ import annotations

import torch

from ..geometry import Geometry
from ..model.attention import attention_weights, causal_mask
from .pairsums import PairSums

__all__ = ["pair_sums_torch"]


def _chunks(P: int, H: int, n: int, elt: int, budget: int, full_rows: bool) -> tuple[int, int]:
    """Head and row chunk sizes keeping the (P, hc, rc, n) temporaries under ``budget`` bytes."""
    row_bytes = 4 * P * n * elt  # scores, weights, and two temporaries per row
    hc = max(1, min(H, budget // max(row_bytes * n, 1)))
    rc = n if (full_rows or hc > 1 or row_bytes * n <= budget) else max(1, budget // row_bytes)
    return hc, rc


def pair_sums_torch(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float,
    *,
    attention: str = "softmax",
    causal: bool = False,
    geometry: Geometry,
    sinkhorn_iters: int = 50,
    sinkhorn_tol: float | None = None,
    ledger: bool = True,
    ito: bool = True,
    chunk_bytes: int = 2**27,
) -> PairSums:
    """Pair sums of the field at (x, D) with plain PyTorch.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d]
        Score matrices (layer scaling already applied).
    beta : float
    attention : str
        One of :data:`attnflow.model.attention.ATTENTION_KINDS`.
    causal : bool
    geometry : Geometry
        Off unit-norm geometries the extra Ito sum ``row_r2`` is accumulated.
    sinkhorn_iters : int
        The most Sinkhorn sweeps.
    sinkhorn_tol : float or None
        Sinkhorn's column tolerance (None: the dtype's default).
    ledger : bool
        Also accumulate the float64 ledger sums (``row_x``, ``row_q``, ``row_r2``, ``col_x``).
    ito : bool
        With ``ledger``, also the Ito sums ``row_q`` and ``row_r2`` (else they are ``None``).
    chunk_bytes : int
        Budget of the temporaries of one tile.

    Returns
    -------
    PairSums
        With ``attn_x`` (the velocity's mean head input, working precision) always set.
    """
    P, n, d = x.shape
    H = D.shape[1]
    mask = causal_mask(n, x.device) if causal else None
    hc, rc = _chunks(P, H, n, x.element_size(), chunk_bytes, attention == "sinkhorn")
    f64 = torch.float64
    attn_x = torch.empty(P, H, n, d, dtype=x.dtype, device=x.device)
    lse = torch.empty(P, H, n, dtype=x.dtype, device=x.device)
    if ledger:
        x64 = x.to(f64)
        row_x = torch.empty(P, H, n, d, dtype=f64, device=x.device)
        row_q = torch.empty(P, H, n, dtype=f64, device=x.device) if ito else None
        col_x = torch.zeros(P, H, n, d, dtype=f64, device=x.device)
        row_r2 = None if (geometry.unit_norm or not ito) else torch.empty(P, H, n, dtype=f64, device=x.device)
        sq = None if geometry.unit_norm else x64.square().sum(-1)  # |x_j|^2

    for h0 in range(0, H, hc):
        hs = slice(h0, min(H, h0 + hc))
        DxT = (beta * D[:, hs]) @ x.transpose(-1, -2).unsqueeze(1)  # (P, hc, d, n): beta D_h x_j
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
                if attention == "softmax"
                else attention_weights(
                    s, l, attention, sinkhorn_iters=sinkhorn_iters, sinkhorn_tol=sinkhorn_tol
                )
            )
            Ax = A @ x.unsqueeze(1)  # (P, hc, r, d): sum_j A_ij x_j
            attn_x[:, hs, rs] = Ax
            if ledger:
                l64 = l.to(f64)
                Asx = Ax if attention == "softmax" else A_soft @ x.unsqueeze(1)
                row_x[:, hs, rs] = Asx.to(f64)
                # col_x_j += sum_i exp(lse_i) A_ij x_i, with a per-chunk shift against overflow
                m = l64.amax(dim=-1, keepdim=True).clamp_min(-1e300)
                w = torch.exp(l64 - m)
                zc = A_soft.transpose(-1, -2).to(f64) @ (w.unsqueeze(-1) * x64[:, rs].unsqueeze(1))
                col_x[:, hs] += torch.exp(m).unsqueeze(-1) * zc
                if row_q is None:
                    continue
                A64 = A_soft.to(f64)
                rho2 = (x64[:, rs] @ x64.transpose(-1, -2)).square().unsqueeze(1)  # (P,1,r,n)
                row_q[:, hs, rs] = (A64 * rho2).sum(-1)
                if row_r2 is not None:
                    row_r2[:, hs, rs] = (A64 * sq[:, None, None, :]).sum(-1)

    lse64 = lse.to(f64)
    ones = torch.ones_like(lse64)
    if not ledger:
        return PairSums(row_shift=lse64, row_sum=ones, attn_x=attn_x)
    return PairSums(
        row_shift=lse64,
        row_sum=ones,
        row_x=row_x,
        row_q=row_q,
        row_r2=row_r2,
        col_shift=torch.zeros(P, H, dtype=f64, device=x.device),
        col_x=col_x,
        attn_x=attn_x,
    )
