"""Formulas that several tests compare attnflow with, each written once, independently of attnflow.

Every function takes NumPy arrays or PyTorch tensors (float64) and returns the same kind, so a test
can also differentiate a formula with torch.autograd. Shapes carry optional leading batch axes
(``...``): tokens ``x`` (..., n, d), heads ``D`` (..., H, d, d).

* energy, eq. (20) of arXiv 2605.18870 (beta = 1 there) and the companion paper's per-head energies
  (NOTES.md §3, §5): E = 1/(2 beta H n^2) sum_{h,i,j} exp(beta <x_i, D_h x_j>), E_h = H * (head h's E);
* the effective mobility's harmonic mean over heads, eq. (36): b = ((1/H) sum_h 1/m_h)^{-1};
* the multi-head softmax field (NOTES.md §1): W_i = (1/H) sum_h sum_j softmax_j(beta <x_i, D_h x_j>) V_h x_j,
  and its tangent part P_perp(x_i) W_i.
"""

from __future__ import annotations

import numpy as np


def _exp(a):
    return a.exp() if hasattr(a, "exp") else np.exp(a)  # torch.Tensor.exp keeps the autograd graph


def _scores(x, D, beta: float):
    """beta <x_i, D_h x_j>, shape (..., H, n, n)."""
    xt = x.swapaxes(-1, -2)[..., None, :, :]  # (..., 1, d, n)
    return beta * (x[..., None, :, :] @ D @ xt)


def head_energies(x, D, beta: float = 1.0):
    """E_h = 1/(2 beta n^2) sum_{i,j} exp(beta <x_i, D_h x_j>), shape (..., H)."""
    n = x.shape[-2]
    return _exp(_scores(x, D, beta)).sum(-1).sum(-1) / (2.0 * beta * n * n)


def energy(x, D, beta: float = 1.0):
    """E = 1/(2 beta H n^2) sum_{h,i,j} exp(beta <x_i, D_h x_j>) (eq. (20)), shape (...)."""
    return head_energies(x, D, beta).sum(-1) / D.shape[-3]


def harmonic_mean(m, axis: int):
    """((1/H) sum_h 1/m_h)^{-1} along ``axis`` (the effective mobility of eq. (36) when m are mobilities)."""
    return 1.0 / (1.0 / m).mean(axis)


def attention_field(x, D, V=None, beta: float = 1.0, *, tangent: bool = True):
    """(1/H) sum_h sum_j softmax_j(beta <x_i, D_h x_j>) V_h x_j, made tangent at x_i when ``tangent``.

    x (..., n, d), D and V (..., H, d, d) (V = None: V = D). Returns (..., n, d).
    """
    S = _scores(x, D, beta)
    S = S - S.max(-1, keepdims=True) if isinstance(S, np.ndarray) else S - S.amax(-1, keepdim=True)
    A = _exp(S)
    A = A / A.sum(-1)[..., None]
    Vm = D if V is None else V
    W = (A @ x[..., None, :, :] @ Vm.swapaxes(-1, -2)).mean(-3)  # (..., n, d)
    if not tangent:
        return W
    return W - (W * x).sum(-1)[..., None] * x
