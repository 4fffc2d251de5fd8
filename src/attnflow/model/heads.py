"""Initial heads D_h(0), shape (P, H, d, d), and conversions.

In the paper's experiments each head is one d x d matrix D_h used both as score matrix
(D = Q^T K) and as value matrix (V = D) (arXiv 2605.18870, Sec. 6; NOTES.md §1).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..random import path_generators, randn_per_path

_DEFAULT_DTYPE = torch.float64

#: The largest head scale: products of two head entries (|D|^2 in the ledger, D D^T) must stay finite
#: in float64 (sqrt(1.8e308) = 1.3e154, less a margin for Gaussian entries of a few units).
SCALE_MAX = 1e150


def _check_scale(scale: float) -> None:
    if (
        isinstance(scale, bool)
        or not isinstance(scale, (int, float))
        or not (math.isfinite(scale) and 0 < scale <= SCALE_MAX)
    ):
        raise ValueError(
            f"scale must be a number in (0, {SCALE_MAX:g}] (so that products of head entries stay finite "
            f"in float64): got {scale!r}; the default is 1"
        )


def _check(paths: int, heads: int, d: int) -> None:
    for name, val, low in (("paths", paths, 1), ("heads", heads, 1), ("d", d, 2)):
        if isinstance(val, bool) or not isinstance(val, int) or val < low:
            raise ValueError(f"{name} must be an integer >= {low}: got {val!r}")


def symmetric_gaussian(
    paths: int, heads: int, d: int, *, seed: int, dtype: torch.dtype = _DEFAULT_DTYPE, device="cpu"
) -> torch.Tensor:
    """The authors' initial heads D = Z + Z^T, Z with i.i.d. N(0, 1) entries (NOTES.md §2).

    Returns
    -------
    Tensor, shape=[paths, heads, d, d]
        Symmetric matrices (diagonal variance 4, off-diagonal variance 2).
    """
    _check(paths, heads, d)
    z = randn_per_path(path_generators(seed, paths, "heads"), (heads, d, d), dtype, "cpu")
    return (z + z.transpose(-1, -2)).to(device)


def gaussian(
    paths: int,
    heads: int,
    d: int,
    *,
    seed: int,
    scale: float = 1.0,
    dtype: torch.dtype = _DEFAULT_DTYPE,
    device="cpu",
) -> torch.Tensor:
    """Non-symmetric heads with i.i.d. N(0, scale^2) entries.

    Returns
    -------
    Tensor, shape=[paths, heads, d, d]
    """
    _check(paths, heads, d)
    _check_scale(scale)
    z = randn_per_path(path_generators(seed, paths, "heads"), (heads, d, d), dtype, "cpu")
    return (scale * z).to(device)


def identity(paths: int, heads: int, d: int, *, scale: float = 1.0, dtype=_DEFAULT_DTYPE, device="cpu"):
    """``scale * I`` for every head and path (the clustering model of Geshkovski et al.).

    Returns
    -------
    Tensor, shape=[paths, heads, d, d]
    """
    _check(paths, heads, d)
    _check_scale(scale)
    eye = torch.eye(d, dtype=dtype, device=device) * scale
    return eye.expand(paths, heads, d, d).clone()


def from_qk(Q, K) -> torch.Tensor:
    """Score matrices D_h = Q_h^T K_h from query and key matrices (NOTES.md §1).

    Parameters
    ----------
    Q, K : Tensor, shape=[..., k, d]
        Query and key matrices (k = head dimension).

    Returns
    -------
    Tensor, shape=[..., d, d]
    """
    Q = torch.as_tensor(Q)
    K = torch.as_tensor(K)
    if Q.shape != K.shape or Q.ndim < 2:
        raise ValueError(
            f"Q and K must have the same shape (..., k, d): got {tuple(Q.shape)} and {tuple(K.shape)}"
        )
    return Q.transpose(-1, -2) @ K


def from_array(
    D, *, paths: int, d: int, dtype=_DEFAULT_DTYPE, device="cpu", name: str = "heads"
) -> torch.Tensor:
    """Validate user head matrices and return shape (P, H, d, d).

    Parameters
    ----------
    D : array-like, shape=[d, d], [H, d, d] or [P, H, d, d]
        Lower-rank inputs are repeated over heads (1) and paths.
    """
    if torch.is_tensor(D) and D.is_complex() or not torch.is_tensor(D) and np.iscomplexobj(D):
        raise ValueError(
            f"{name} must be real-valued: got a complex array; pass its real part (D.real) if the "
            "imaginary part is meant to be zero"
        )
    t = torch.as_tensor(D, dtype=dtype, device=device)
    shape_in = tuple(t.shape)
    if t.ndim == 2:
        t = t.unsqueeze(0)
    if t.ndim == 3:
        t = t.unsqueeze(0).expand(paths, -1, -1, -1).clone()
    if t.ndim != 4 or t.shape[-1] != d or t.shape[-2] != d:
        raise ValueError(
            f"{name} must have shape (d, d), (H, d, d) or (P, H, d, d) with d={d}: got {shape_in}"
        )
    if t.shape[0] != paths:
        raise ValueError(
            f"{name} have {t.shape[0]} paths but the tokens have {paths}; give (H, d, d) to share "
            "the heads across paths"
        )
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite: found {int((~torch.isfinite(t)).sum())} non-finite entries")
    return t
