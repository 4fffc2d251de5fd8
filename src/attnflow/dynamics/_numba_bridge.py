"""Bridge between the fused numba kernel (numpy arrays) and :class:`FieldEval` (torch tensors)."""

from __future__ import annotations

import numpy as np
import torch

from ..model.transformer import TransformerModel
from .field import FieldEval, effective_heads

_AVAILABLE: bool | None = None


def available() -> bool:
    """True when the fused kernel module imports (numba installed)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        try:
            from . import _numba_kernel  # noqa: F401

            _AVAILABLE = True
        except ImportError:
            _AVAILABLE = False
    return _AVAILABLE


def evaluate_numba(
    model: TransformerModel,
    x: torch.Tensor,
    D: torch.Tensor,
    V: torch.Tensor | None,
    t: float,
    *,
    ledger: bool,
) -> FieldEval:
    """Evaluate the field with the fused kernel; same outputs as :func:`evaluate_torch`."""
    from ._numba_kernel import fused_field

    De, Ve = effective_heads(model, D, V, t)
    xn = np.ascontiguousarray(x.detach().numpy())
    Dn = np.ascontiguousarray(De.detach().numpy())
    Vn = None if V is None else np.ascontiguousarray(Ve.detach().numpy())
    out = fused_field(
        xn, Dn, Vn, float(model.beta), geometry=model.geometry, causal=model.causal, ledger=ledger
    )
    fe = FieldEval(velocity=torch.from_numpy(out["velocity"]), lse=torch.from_numpy(out["lse"]))
    if ledger:
        f64 = torch.float64
        fe.energy = torch.from_numpy(np.asarray(out["energy"])).to(f64)
        fe.G2 = torch.from_numpy(np.asarray(out["G2"])).to(f64)
        fe.Ghat2 = torch.from_numpy(np.asarray(out["Ghat2"])).to(f64)
        fe.grad = torch.from_numpy(np.asarray(out["grad"])).to(f64)
        fe.second_moment = torch.from_numpy(np.asarray(out["second_moment"])).to(f64)
        fe.ito_moment = torch.from_numpy(np.asarray(out["ito_moment"])).to(f64)
        H, n = D.shape[1], x.shape[1]
        fe.head_mass = torch.exp(fe.lse.to(f64)).sum(-1) / (2.0 * H * n * n)
        fe.ito_full = fe.head_mass  # unit tokens (the dispatcher sends the flat ledger to torch)
    return fe
