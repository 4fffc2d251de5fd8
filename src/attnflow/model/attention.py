"""Attention kinds: how a row of scores s_i. = beta <x_i, D x_.> becomes interaction weights.

* ``softmax`` (SA):  A_ij = exp(s_ij) / sum_k exp(s_ik)           (arXiv 2605.18870, eq. (10))
* ``usa``:           A_ij = exp(s_ij) / n                            (unnormalised, Geshkovski et al.)
* ``relu``:          A_ij = max(s_ij, 0) / n
* ``sigmoid``:       A_ij = sigmoid(s_ij) / n
* ``sinkhorn``:      A = diag(a) exp(s) diag(b) doubly stochastic (rows and columns sum to 1),
                     log-domain Sinkhorn iterations (Sander et al., 2022), stopped when the largest
                     column-sum error is below a tolerance (:data:`SINKHORN_TOL`: 1e-10 in float64)
                     or after a maximum number of sweeps, with a :class:`SinkhornWarning` giving the
                     error reached when the tolerance was missed

With ``causal=True`` token i only sees j <= i; the unnormalised kinds still divide by n so that
the non-causal and causal models share one normalisation (documented choice).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

ATTENTION_KINDS = ("softmax", "usa", "relu", "sigmoid", "sinkhorn")

#: Default tolerance on the largest column-sum error of Sinkhorn attention, per dtype (float32: a few
#: hundred ulps of a sum of n ~ 300 terms).
SINKHORN_TOL = {torch.float64: 1e-10, torch.float32: 1e-4}


class SinkhornWarning(RuntimeWarning):
    """Sinkhorn attention stopped at its maximum sweep count before reaching its column tolerance."""


@dataclass(frozen=True)
class SinkhornResult:
    """Doubly stochastic weights and how well they are: ``weights`` [..., n, n], ``column_error``
    (the largest abs(sum_i A_ij - 1); rows sum to 1 up to round-off), ``sweeps`` done, ``tol``,
    ``converged`` (column_error < tol)."""

    weights: torch.Tensor
    column_error: float
    sweeps: int
    tol: float
    converged: bool


#: The last Sinkhorn normalisation of this process (``None`` before the first): what it reached.
last_sinkhorn: SinkhornResult | None = None
_warned: set[tuple] = set()


def check_attention_kind(kind: str) -> str:
    """Return ``kind`` if known, else raise a ``ValueError`` listing the valid kinds."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"unknown attention kind {kind!r}; valid kinds: {', '.join(ATTENTION_KINDS)}")
    return kind


def causal_mask(n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Boolean ``(n, n)`` mask, True where token i may attend to token j (j <= i)."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def sinkhorn_solve(scores: torch.Tensor, max_sweeps: int, tol: float | None = None) -> SinkhornResult:
    """Doubly stochastic attention by log-domain Sinkhorn, stopped on a column tolerance.

    Each sweep normalises the columns, then the rows (in log space, by log-sum-exp). The column sums
    of the current weights exp(s + a + b) are exp(b - b'), b' the next column potential, so the
    stopping test costs nothing extra.

    Parameters
    ----------
    scores : Tensor, shape=[..., n, n]
        Scores (``-inf`` where masked).
    max_sweeps : int
        The most (column, row) sweeps (>= 1).
    tol : float or None
        Stop once max_j abs(sum_i A_ij - 1) < tol over the whole batch; None: :data:`SINKHORN_TOL`
        of the dtype (1e-10 in float64).

    Returns
    -------
    SinkhornResult
        The weights (rows sum to 1 to round-off, columns within ``column_error``), the error, sweeps.
    """
    if isinstance(max_sweeps, bool) or not isinstance(max_sweeps, int) or max_sweeps < 1:
        raise ValueError(f"max_sweeps must be an integer >= 1: got {max_sweeps!r}; the default is 50")
    tol = SINKHORN_TOL.get(scores.dtype, 1e-10) if tol is None else float(tol)
    if not tol > 0:
        raise ValueError(f"the Sinkhorn tolerance must be > 0: got {tol!r}; the float64 default is 1e-10")
    b = torch.zeros_like(scores[..., :1, :])
    a = -torch.logsumexp(scores + b, dim=-1, keepdim=True)
    sweeps = 0
    while True:
        b_next = -torch.logsumexp(scores + a, dim=-2, keepdim=True)
        err = float((torch.exp(b - b_next) - 1).abs().amax()) if scores.numel() else 0.0
        if err < tol or sweeps == max_sweeps:
            break
        b = b_next
        a = -torch.logsumexp(scores + b, dim=-1, keepdim=True)
        sweeps += 1
    return SinkhornResult(torch.exp(scores + a + b), err, sweeps, tol, err < tol)


def sinkhorn_log(scores: torch.Tensor, iters: int, tol: float | None = None) -> torch.Tensor:
    """Doubly stochastic attention weights (:func:`sinkhorn_solve`); warns when the tolerance is missed.

    Parameters
    ----------
    scores : Tensor, shape=[..., n, n]
        Scores (``-inf`` where masked).
    iters : int
        The maximum number of (column, row) sweeps.
    tol : float or None
        Column tolerance (None: :data:`SINKHORN_TOL` of the dtype).

    Returns
    -------
    Tensor, shape=[..., n, n]
        exp(s_ij + a_i + b_j), rows summing to 1, columns to 1 within the tolerance. The outcome is
        kept in :data:`last_sinkhorn`; a :class:`SinkhornWarning` (once per size, sweep count and
        tolerance) says the error reached when the tolerance was missed.
    """
    global last_sinkhorn
    res = sinkhorn_solve(scores, iters, tol)
    last_sinkhorn = res
    key = (scores.shape[-1], iters, res.tol)
    if not res.converged and key not in _warned:
        _warned.add(key)
        warnings.warn(
            f"Sinkhorn attention stopped at its maximum of {iters} sweeps with a column-sum error of "
            f"{res.column_error:.2g}, above the tolerance {res.tol:.2g} (n = {scores.shape[-1]}); raise "
            "sinkhorn_iters (model.sinkhorn_iters in a config) or lower beta",
            SinkhornWarning,
            stacklevel=2,
        )
    return res.weights


def attention_weights(
    scores: torch.Tensor,
    lse: torch.Tensor,
    kind: str,
    *,
    sinkhorn_iters: int = 50,
    sinkhorn_tol: float | None = None,
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
    sinkhorn_iters, sinkhorn_tol
        The maximum sweeps and the column tolerance of ``sinkhorn`` (:func:`sinkhorn_log`).
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
        return sinkhorn_log(scores, sinkhorn_iters, sinkhorn_tol)
    raise ValueError(f"unknown attention kind {kind!r}; valid kinds: {', '.join(ATTENTION_KINDS)}")
