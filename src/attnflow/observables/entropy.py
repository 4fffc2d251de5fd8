r"""Shannon entropy of the attention rows and its rate of change along a trajectory.

Row :math:`i` of head :math:`h` is the probability vector
:math:`A^h_{i\cdot} = \operatorname{softmax}_j(s^h_{ij})`, :math:`s^h_{ij} = \beta\langle x_i, D_h x_j\rangle`
(``docs/design.md``). Its entropy is :math:`0` for a one-hot row and :math:`\log n` for a uniform row,
the limit reached when all tokens have collapsed to one cluster. The companion paper
(arXiv 2605.04279, seeds/000, NOTES.md §5) proves an entropy production identity and shows that the
attention entropy increases monotonically toward equilibrium as clustering progresses.

Shapes: tokens ``x`` of shape ``(P, n, d)`` or ``(n, d)`` (treated as ``P = 1``); heads ``D`` of shape
``(P, H, d, d)`` or ``(H, d, d)`` (the same heads for every path).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .inputs import as_batched_tokens, check_positive_scalar

__all__ = [
    "attention_entropy",
    "attention_entropy_rate",
    "mean_attention_entropy",
    "received_attention_entropy",
]


def _as_batched_heads(D: torch.Tensor, paths: int, dim: int) -> torch.Tensor:
    """Validate heads against tokens of shape ``(paths, n, dim)``; return shape ``(paths, H, d, d)``."""
    if not isinstance(D, torch.Tensor):
        raise TypeError(
            f"D must be a torch.Tensor of shape (P, H, d, d) or (H, d, d): got {type(D).__name__}; "
            "convert with torch.as_tensor(D, dtype=torch.float64)"
        )
    if D.ndim not in (3, 4) or D.shape[-1] != dim or D.shape[-2] != dim:
        raise ValueError(
            f"D must have shape (P, H, d, d) or (H, d, d) with d = {dim} (the token dimension): got shape "
            f"{tuple(D.shape)}; pass one d x d score matrix per head"
        )
    Db = D.unsqueeze(0) if D.ndim == 3 else D
    if Db.shape[0] not in (1, paths):
        raise ValueError(
            f"D must have P = {paths} paths (as x) or shape (H, d, d): got {Db.shape[0]} paths in shape "
            f"{tuple(D.shape)}; pass one set of heads per path"
        )
    if Db.shape[1] < 1:
        raise ValueError(f"D must hold at least one head: got shape {tuple(D.shape)}")
    if not torch.isfinite(Db).all():
        raise ValueError(
            f"D must be finite: found {int((~torch.isfinite(Db)).sum())} non-finite entries; "
            "remove nan/inf values"
        )
    return Db.expand(paths, *Db.shape[1:])


def _check_beta(beta: float) -> float:
    return check_positive_scalar(beta, "beta")


def attention_entropy(
    x: torch.Tensor, D: torch.Tensor, beta: float = 1.0, *, causal: bool = False
) -> torch.Tensor:
    r"""Shannon entropy of every softmax attention row, per path, head and token.

    .. math::
        S^h_i = -\sum_j A^h_{ij}\log A^h_{ij},\qquad
        \log A^h_{ij} = s^h_{ij} - \operatorname{logsumexp}_k s^h_{ik},\qquad
        s^h_{ij} = \beta\langle x_i, D_h x_j\rangle .

    :math:`\log A` is taken from ``log_softmax`` so no :math:`\log 0` is ever formed: an entry that
    underflows to :math:`A_{ij} = 0` contributes :math:`0\cdot(\text{finite}) = 0`, and masked entries
    (causal) contribute exactly 0. :math:`0 \le S^h_i \le \log n_i`, with :math:`n_i` the number of
    columns row :math:`i` sees (:math:`n`, or :math:`i + 1` when causal); values are clipped at 0 from
    below to remove round-off of order :math:`10^{-16}` in one-hot rows.

    Parameters
    ----------
    x : Tensor, shape=[P, n, d] or [n, d]
        Tokens on :math:`S^{d-1}`.
    D : Tensor, shape=[P, H, d, d] or [H, d, d]
        Score matrices (:math:`Q_h^\top K_h`), one per head.
    beta : float
        Inverse temperature, > 0.
    causal : bool
        If True, row :math:`i` attends only to :math:`j \le i`.

    Returns
    -------
    Tensor, shape=[P, H, n]
        Entropies in nats.

    References
    ----------
    Companion paper, "Multi-Headed Transformer Architectures as Time-dependent Wasserstein Gradient
    Flows", arXiv 2605.04279 (seeds/000): attention entropy rises monotonically along clustering flows.

    Examples
    --------
    >>> x = torch.eye(3, dtype=torch.float64)
    >>> D = torch.zeros(1, 3, 3, dtype=torch.float64)  # all scores equal: uniform rows
    >>> attention_entropy(x, D)[0, 0]  # log 3
    tensor([1.0986, 1.0986, 1.0986], dtype=torch.float64)
    """
    beta = _check_beta(beta)
    xb = as_batched_tokens(x, "x")
    Db = _as_batched_heads(D, xb.shape[0], xb.shape[-1])
    n = xb.shape[1]
    heads_x = torch.einsum("phde,pje->phjd", Db, xb)  # (D_h x_j), shape (P, H, n, d)
    scores = beta * torch.einsum("pid,phjd->phij", xb, heads_x)
    mask = None
    if causal:
        mask = torch.ones(n, n, dtype=torch.bool, device=xb.device).triu(diagonal=1)
        scores = scores.masked_fill(mask, -math.inf)
    log_weights = torch.log_softmax(scores, dim=-1)
    terms = log_weights.exp() * log_weights
    if mask is not None:
        terms = terms.masked_fill(mask, 0.0)
    # 0.0 - (...) rather than unary minus: a one-hot row then gives +0.0, not -0.0
    return (0.0 - terms.sum(dim=-1)).clamp_min(0.0)


def mean_attention_entropy(
    x: torch.Tensor, D: torch.Tensor, beta: float = 1.0, *, causal: bool = False
) -> torch.Tensor:
    r"""Attention entropy averaged over heads and tokens, :math:`\bar S = \frac{1}{Hn}\sum_{h,i} S^h_i`.

    See :func:`attention_entropy` for the definition and arguments.

    Returns
    -------
    Tensor, shape=[P]
        Mean entropy in nats, in :math:`[0, \log n]`.
    """
    return attention_entropy(x, D, beta, causal=causal).mean(dim=(-1, -2))


def received_attention_entropy(x: torch.Tensor, D: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    r"""Entropy of the attention *received*: of the column marginal
    :math:`a_j = \frac{1}{Hn}\sum_{h,i} A^h_{ij}` (a probability vector over the tokens).

    Another reading of "the attention entropy" than the mean row entropy :func:`mean_attention_entropy`:
    :math:`\log n` when every token receives the same total attention (e.g. one cluster), small when
    a few tokens absorb it (attention sinks).

    Returns
    -------
    Tensor, shape=[P]
        Entropy in nats, in :math:`[0, \log n]`.

    Examples
    --------
    >>> x = torch.eye(3, dtype=torch.float64)
    >>> round(float(received_attention_entropy(x, torch.zeros(1, 3, 3, dtype=torch.float64))), 12)  # log 3
    1.098612288668
    """
    beta = _check_beta(beta)
    xb = as_batched_tokens(x, "x")
    Db = _as_batched_heads(D, xb.shape[0], xb.shape[-1])
    scores = beta * torch.einsum("pid,phde,pje->phij", xb, Db, xb)
    a = torch.softmax(scores, dim=-1).mean(dim=(1, 2))  # [P, n], sums to 1
    loga = torch.log(a.clamp_min(1e-300))
    return (0.0 - (a * loga).sum(-1)).clamp_min(0.0)


def attention_entropy_rate(
    x_traj: torch.Tensor,
    D_traj: torch.Tensor,
    times: torch.Tensor | np.ndarray,
    beta: float = 1.0,
    *,
    causal: bool = False,
    per_token: bool = False,
) -> torch.Tensor:
    r"""Rate of change :math:`\mathrm{d}\bar S/\mathrm{d}t` of the attention entropy along a recorded path.

    The entropy is evaluated at every recorded time and differentiated along the time axis with
    ``torch.gradient`` on the (possibly non-uniform) ``times``: second-order central differences at
    interior points and second-order one-sided differences at both ends (``edge_order=2``), so the
    error is :math:`O(\Delta t^2)` everywhere when :math:`T \ge 3`; with :math:`T = 2` both entries are
    the first-order difference quotient. A positive rate is the monotone entropy rise of seeds/000.

    Parameters
    ----------
    x_traj : Tensor, shape=[T, P, n, d] or [T, n, d]
        Recorded tokens (time first); ``(T, n, d)`` is one path.
    D_traj : Tensor, shape=[T, P, H, d, d] or [P, H, d, d] (or [T, H, d, d] / [H, d, d] for one path)
        Heads at each recorded time, or frozen heads shared by all times.
    times : Tensor or ndarray, shape=[T]
        Strictly increasing, finite recording times, ``T >= 2``.
    beta : float
        Inverse temperature, > 0.
    causal : bool
        Causal mask, as in :func:`attention_entropy`.
    per_token : bool
        If True return the rate of every :math:`S^h_i`; otherwise that of the mean :math:`\bar S`.

    Returns
    -------
    Tensor, shape=[T, P] (or [T, P, H, n] with ``per_token=True``)
        :math:`\mathrm{d}S/\mathrm{d}t` in nats per unit time.
    """
    if not isinstance(x_traj, torch.Tensor) or x_traj.ndim not in (3, 4):
        shape = tuple(x_traj.shape) if isinstance(x_traj, torch.Tensor) else type(x_traj).__name__
        raise ValueError(
            f"x_traj must be a torch.Tensor of shape (T, P, n, d) or (T, n, d): got {shape}; "
            "put the time axis first"
        )
    if not isinstance(D_traj, torch.Tensor) or D_traj.ndim not in (x_traj.ndim, x_traj.ndim + 1):
        shape = tuple(D_traj.shape) if isinstance(D_traj, torch.Tensor) else type(D_traj).__name__
        raise ValueError(
            f"D_traj must have shape (T, P, H, d, d) or frozen (P, H, d, d) for x_traj of shape "
            f"(T, P, n, d) (one axis fewer each for a single path): got {shape} with x_traj of shape "
            f"{tuple(x_traj.shape)}"
        )
    steps = x_traj.shape[0]
    t = torch.as_tensor(times, dtype=x_traj.dtype if x_traj.is_floating_point() else torch.float64)
    if t.ndim != 1 or t.numel() != steps or steps < 2:
        raise ValueError(
            f"times must be 1-D with one entry per recorded state (T = {steps} >= 2): got shape "
            f"{tuple(t.shape)}; pass the recording times of x_traj"
        )
    increments = t.diff()
    if not (torch.isfinite(t).all() and (increments > 0).all()):
        raise ValueError(
            f"times must be finite and strictly increasing: got smallest increment "
            f"{float(increments.min()):.3g}; sort the records by time"
        )
    time_dependent = D_traj.ndim == x_traj.ndim + 1
    if time_dependent and D_traj.shape[0] != steps:
        raise ValueError(
            f"D_traj must have T = {steps} time entries (as x_traj): got shape {tuple(D_traj.shape)}; "
            "pass frozen heads without the time axis instead"
        )
    entropies = []
    for k in range(steps):
        heads = D_traj[k] if time_dependent else D_traj
        entropy = attention_entropy(x_traj[k], heads, beta, causal=causal)
        entropies.append(entropy if per_token else entropy.mean(dim=(-1, -2)))
    stacked = torch.stack(entropies)
    (rate,) = torch.gradient(
        stacked, spacing=(t.to(stacked.device),), dim=0, edge_order=2 if steps >= 3 else 1
    )
    return rate
