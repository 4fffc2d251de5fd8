"""Attention kinds: how a row of scores s_i. = beta <x_i, D x_.> becomes interaction weights.

* ``softmax`` (SA):  A_ij = exp(s_ij) / sum_k exp(s_ik)           (arXiv 2605.18870, eq. (10))
* ``usa``:           A_ij = exp(s_ij) / n                            (unnormalised, Geshkovski et al.)
* ``relu``:          A_ij = max(s_ij, 0) / n
* ``sigmoid``:       A_ij = sigmoid(s_ij) / n
* ``sinkhorn``:      A = diag(a) exp(s) diag(b) doubly stochastic (rows and columns sum to 1),
                     log-domain Sinkhorn iterations (Sander et al., 2022)

With ``causal=True`` token i only sees j <= i; the unnormalised kinds still divide by n so that
the non-causal and causal models share one normalisation (documented choice).
"""

from __future__ import annotations

import torch

ATTENTION_KINDS = ("softmax", "usa", "relu", "sigmoid", "sinkhorn")


def check_attention_kind(kind: str) -> str:
    """Return ``kind`` if known, else raise a ``ValueError`` listing the valid kinds."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"unknown attention kind {kind!r}; valid kinds: {', '.join(ATTENTION_KINDS)}")
    return kind


def causal_mask(n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Boolean ``(n, n)`` mask, True where token i may attend to token j (j <= i)."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def sinkhorn_log(scores: torch.Tensor, iters: int) -> torch.Tensor:
    """Doubly stochastic attention by log-domain Sinkhorn.

    Parameters
    ----------
    scores : Tensor, shape=[..., n, n]
        Scores (``-inf`` where masked).
    iters : int
        Number of (row, column) normalisation sweeps.

    Returns
    -------
    Tensor, shape=[..., n, n]
        exp(s_ij + a_i + b_j) with rows summing to 1 exactly (last sweep) and columns to 1 up to the
        iteration error.
    """
    b = torch.zeros_like(scores[..., :1, :])
    a = -torch.logsumexp(scores + b, dim=-1, keepdim=True)
    for _ in range(iters):
        b = -torch.logsumexp(scores + a, dim=-2, keepdim=True)
        a = -torch.logsumexp(scores + b, dim=-1, keepdim=True)
    return torch.exp(scores + a + b)


def attention_weights(
    scores: torch.Tensor, lse: torch.Tensor, kind: str, *, sinkhorn_iters: int = 50
) -> torch.Tensor:
    """Interaction weights A_ij of the given kind from masked scores.

    Parameters
    ----------
    scores : Tensor, shape=[..., n_rows, n]
        beta <x_i, D x_j>, ``-inf`` where masked.
    lse : Tensor, shape=[..., n_rows]
        Row log-sum-exp of ``scores`` (already computed by the caller for the energy).
    kind : str
        One of :data:`ATTENTION_KINDS`.
    """
    n = scores.shape[-1]
    if kind == "softmax":
        return torch.exp(scores - lse.unsqueeze(-1))
    if kind == "usa":
        return torch.exp(scores) / n
    if kind == "relu":
        return torch.relu(torch.nan_to_num(scores, neginf=0.0)) / n
    if kind == "sigmoid":
        return torch.sigmoid(scores) / n
    if kind == "sinkhorn":
        return sinkhorn_log(scores, sinkhorn_iters)
    raise ValueError(f"unknown attention kind {kind!r}; valid kinds: {', '.join(ATTENTION_KINDS)}")
