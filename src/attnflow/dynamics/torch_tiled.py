r"""Tiled PyTorch backend of softmax attention for CUDA (and CPU): the pair sums of
:class:`~attnflow.dynamics.pairsums.PairSums` over (row, column) tiles, never an n x n matrix.

The same scheme as the fused CPU kernel (:mod:`attnflow.dynamics.numba_kernel`), written with tensor
operations so that it runs wherever torch does:

* shift: :math:`|s^h_{ij}| \le c_h = \beta \|D_h\|_F \max_j |x_j|^2`; when :math:`2 \max_h c_h` is at most 40
  (float32) or 600 (float64) every row of head h is shifted by :math:`c_h` and no pass over the pairs is
  needed for it; otherwise a first tiled pass takes the exact row maxima :math:`M_i` (masked when causal);
* pass over (row chunk, column chunk) tiles: :math:`e_{ij} = e^{s_{ij} - M_i}` in the working precision,
  accumulated in float64 into ``row_sum``, ``row_x`` and (ledger) the Ito sums ``row_q`` (with ``ito``)
  and, when :math:`U^h` is not symmetric, the column sums ``col_x`` with the column shift
  :math:`c = \max_i M_i` and weights :math:`e^{M_i - c}`.

Temporaries are ``(P, heads, rows, cols)`` tiles sized by ``chunk_bytes``; the outputs are ``O(P H n d)``.
:func:`attnflow.dynamics.field.pair_sums` takes this path for softmax attention on CUDA tensors; on the
CPU it is tested against the dense PyTorch reference and the numba kernel
(``tests/test_perf_tiled.py``). No GPU was lent while this was written: the CUDA runs are pending.
"""

from __future__ import annotations

import math

import torch

from .pairsums import PairSums

__all__ = ["BOUND_RANGE", "pair_sums_tiled", "tile_sizes"]

#: largest score range 2 c_h shifted by the bound c_h (as in the numba kernel): exp(-range) stays normal
BOUND_RANGE = {torch.float32: 40.0, torch.float64: 600.0}


def tile_sizes(P: int, H: int, n: int, elt: int, budget: int) -> tuple[int, int, int]:
    """Heads, rows and columns per tile so that about four (P, heads, rows, cols) temporaries fit ``budget``
    bytes; rows and columns are at most 1024 (and at most n), so no tile is n x n once n > 1024."""
    side = min(n, 1024)
    per_head = 4 * P * side * side * elt
    hc = max(1, min(H, budget // max(per_head, 1)))
    if hc > 1 or per_head <= budget:
        return hc, side, side
    rows = max(1, min(side, budget // max(4 * P * side * elt, 1)))
    return 1, rows, side


def pair_sums_tiled(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float,
    *,
    causal: bool = False,
    ledger: bool = True,
    ito: bool = True,
    chunk_bytes: int = 2**26,
    tiles: tuple[int, int, int] | None = None,
) -> PairSums:
    """Pair sums of softmax attention over (row, column) tiles, on the device of ``x``.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d]
        Tokens (float32 or float64; CPU or CUDA).
    D : Tensor, shape=[P, H, d, d]
        Score matrices (layer scaling already applied), same dtype and device as ``x``.
    beta : float
        Inverse temperature, > 0.
    causal : bool
        Keep only the pairs j <= i.
    ledger : bool
        Also the ledger sums (``row_q`` with ``ito``; ``col_x`` when U is not symmetric).
    ito : bool
        With ``ledger``, the Ito sums ``row_q`` (else ``None``).
    chunk_bytes : int
        Budget of the temporaries of one tile (:func:`tile_sizes`).
    tiles : (heads, rows, cols) or None
        Explicit tile sizes (tests); None: :func:`tile_sizes`.

    Returns
    -------
    PairSums
        ``row_shift``, ``row_sum``, ``row_x`` (always), ``row_q``, ``col_shift``, ``col_x`` as described in
        the module docstring; ``attn_x`` is None (the mean is ``row_x / row_sum``).
    """
    if x.ndim != 3 or D.ndim != 4 or D.shape[0] != x.shape[0] or D.shape[2:] != (x.shape[2], x.shape[2]):
        raise ValueError(
            f"x must have shape (P, n, d) and D (P, H, d, d) with the same P and d: got {tuple(x.shape)} "
            f"and {tuple(D.shape)}"
        )
    if x.dtype not in BOUND_RANGE or D.dtype != x.dtype or D.device != x.device:
        raise TypeError(
            f"x and D must share one float32 or float64 dtype and one device: got {x.dtype} on {x.device} "
            f"and {D.dtype} on {D.device}; convert both"
        )
    if not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be finite and > 0: got {beta!r}")
    P, n, d = x.shape
    H = D.shape[1]
    f64, dev, dt = torch.float64, x.device, x.dtype
    hc, rc, cc = tiles if tiles is not None else tile_sizes(P, H, n, x.element_size(), chunk_bytes)
    symmetric = not causal and bool(torch.equal(D, D.transpose(-1, -2)))
    colsums = ledger and not symmetric
    want_q = ledger and ito
    K = (beta * D) @ x.transpose(-1, -2).unsqueeze(1)  # (P, H, d, n): beta D_h x_j

    # shifts: the bound c_h when the score range is small, else the exact (masked) row maxima
    bound = beta * torch.linalg.matrix_norm(D.to(f64)) * x.to(f64).square().sum(-1).amax(-1, keepdim=True)
    if 2.0 * float(bound.max()) <= BOUND_RANGE[dt]:
        row_max = bound.to(dt).unsqueeze(-1).expand(P, H, n).contiguous()
    else:
        row_max = torch.full((P, H, n), -torch.inf, dtype=dt, device=dev)
        for h0, r0, _, s in _tiles(x, K, causal, hc, rc, cc):
            hs, rs = slice(h0, h0 + s.shape[1]), slice(r0, r0 + s.shape[2])
            row_max[:, hs, rs] = torch.maximum(row_max[:, hs, rs], s.amax(-1))
    col_shift = row_max.to(f64).amax(-1)  # (P, H)
    col_w = torch.exp(row_max.to(f64) - col_shift.unsqueeze(-1)) if colsums else None

    row_sum = torch.zeros(P, H, n, dtype=f64, device=dev)
    row_x = torch.zeros(P, H, n, d, dtype=f64, device=dev)
    row_q = torch.zeros(P, H, n, dtype=f64, device=dev) if want_q else None
    col_x = torch.zeros(P, H, n, d, dtype=f64, device=dev) if colsums else None
    for h0, r0, c0, s in _tiles(x, K, causal, hc, rc, cc):
        hs, rs = slice(h0, h0 + s.shape[1]), slice(r0, r0 + s.shape[2])
        cs = slice(c0, c0 + s.shape[3])
        e = torch.exp(s - row_max[:, hs, rs].unsqueeze(-1))  # (P, h, r, c); 0 where masked
        xc = x[:, cs].unsqueeze(1)  # (P, 1, c, d)
        row_sum[:, hs, rs] += e.sum(-1, dtype=f64)
        row_x[:, hs, rs] += (e @ xc).to(f64)
        if want_q:
            gram = x[:, rs] @ x[:, cs].transpose(-1, -2)  # (P, r, c)
            row_q[:, hs, rs] += (e * gram.square().unsqueeze(1)).sum(-1, dtype=f64)
        if colsums:
            wx = (col_w[:, hs, rs].unsqueeze(-1) * x[:, rs].to(f64).unsqueeze(1)).to(dt)  # (P, h, r, d)
            col_x[:, hs, cs] += (e.transpose(-1, -2) @ wx).to(f64)
    return PairSums(
        row_shift=row_max.to(f64),
        row_sum=row_sum,
        row_x=row_x,
        row_q=row_q,
        col_shift=col_shift if colsums else None,
        col_x=col_x,
    )


def _tiles(x, K, causal, hc, rc, cc):
    """Scores of every (head chunk, row chunk, column chunk) tile, masked to -inf above the diagonal when
    causal (tiles entirely above it are skipped; the mask is built per tile, never n x n)."""
    P, n, _ = x.shape
    H = K.shape[1]
    for h0 in range(0, H, hc):
        Kh = K[:, h0 : h0 + hc]
        for r0 in range(0, n, rc):
            r1 = min(n, r0 + rc)
            xr = x[:, r0:r1].unsqueeze(1)  # (P, 1, r, d)
            for c0 in range(0, n, cc):
                if causal and c0 >= r1:
                    break
                c1 = min(n, c0 + cc)
                s = xr @ Kh[..., c0:c1]  # (P, h, r, c)
                if causal and c1 > r0 + 1:
                    rows = torch.arange(r0, r1, device=x.device).unsqueeze(-1)
                    cols = torch.arange(c0, c1, device=x.device)
                    s = s.masked_fill(cols > rows, -torch.inf)
                yield h0, r0, c0, s
