"""Validation shared by the observables: token clouds, heads, scalars, and the one field evaluation.

Every observable validates its inputs here once (rule, value received, fix) and computes through
:func:`attnflow.dynamics.field.evaluate_torch`, so that observables agree with what the simulation records.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..dynamics.assembly import FieldEval
from ..dynamics.field import evaluate_torch
from ..geometry import Sphere, get_geometry
from ..model.transformer import TransformerModel
from ..model.weights import WeightProcess

__all__ = [
    "as_batched_tokens",
    "check_heads",
    "check_positive_scalar",
    "check_tokens",
    "field_eval",
]


def as_batched_tokens(x: torch.Tensor, name: str = "x", *, min_tokens: int = 1) -> torch.Tensor:
    """Validate a token cloud once and return it with a leading path axis, shape ``(P, n, d)``.

    Rules: a floating torch tensor of shape ``(P, n, d)`` or ``(n, d)``, ``d >= 2``,
    ``n >= min_tokens``, finite, rows on the unit sphere within the tolerance of
    :meth:`attnflow.geometry.Sphere.check` (1e-6; 1e-5 for float32).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape (P, n, d) or (n, d): got {type(x).__name__}; "
            f"convert with torch.as_tensor({name}, dtype=torch.float64)"
        )
    if x.ndim not in (2, 3):
        raise ValueError(
            f"{name} must have shape (P, n, d) or (n, d): got shape {tuple(x.shape)}; "
            "stack paths along the first axis"
        )
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must have a floating dtype: got {x.dtype}; convert with {name}.to(torch.float64)"
        )
    xb = x.unsqueeze(0) if x.ndim == 2 else x
    n, d = xb.shape[-2], xb.shape[-1]
    if d < 2:
        raise ValueError(
            f"{name} must have dimension d >= 2 (tokens on S^(d-1)): got d = {d}; "
            "the last axis holds the coordinates"
        )
    if n < min_tokens or xb.shape[0] < 1:
        raise ValueError(
            f"{name} must hold at least {min_tokens} token(s) per path and at least one path: got shape "
            f"{tuple(x.shape)}; this measure compares tokens with each other"
        )
    Sphere().check(xb, name)
    return xb


def check_positive_scalar(value: float, name: str) -> float:
    """Return ``value`` as a float, raising unless it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number > 0: got {value!r} ({type(value).__name__})")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0: got {value!r}; pass a positive value")
    return value


def check_tokens(x: torch.Tensor, geometry: str = "sphere", name: str = "x") -> torch.Tensor:
    """Validate tokens of shape (P, n, d), float32 or float64, finite, points of ``geometry`` within its
    default tolerance (:meth:`attnflow.geometry.Geometry.tolerance`); return them unchanged."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape (P, n, d): got {type(x).__name__}; "
            "convert with torch.as_tensor(x, dtype=torch.float64)"
        )
    if x.ndim != 3 or x.shape[1] < 1 or x.shape[2] < 2:
        raise ValueError(
            f"{name} must have shape (P, n, d) with n >= 1 and d >= 2: got {tuple(x.shape)}; "
            "add a leading path axis with x.unsqueeze(0)"
        )
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"{name} must be float32 or float64: got {x.dtype}; use x.double()")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} must be finite: found {int((~torch.isfinite(x)).sum())} non-finite entries")
    get_geometry(geometry).check(x, name)
    return x


def check_heads(D: torch.Tensor, x: torch.Tensor, name: str = "D") -> torch.Tensor:
    """Validate heads of shape (P, H, d, d) (or (H, d, d), shared by the paths) against tokens x (P, n, d);
    return them as (P, H, d, d) in the tokens' dtype."""
    P, _, d = x.shape
    if not isinstance(D, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape (P, H, d, d) or (H, d, d): got {type(D).__name__}"
        )
    if D.ndim == 3:
        D = D.unsqueeze(0).expand(P, *D.shape)
    if D.ndim != 4 or D.shape[0] != P or D.shape[1] < 1 or D.shape[-2:] != (d, d):
        raise ValueError(
            f"{name} must have shape (P, H, d, d) = ({P}, H, {d}, {d}) or (H, {d}, {d}) to match x of shape "
            f"{tuple(x.shape)}: got {tuple(D.shape)}"
        )
    if not torch.isfinite(D).all():
        raise ValueError(f"{name} must be finite: found {int((~torch.isfinite(D)).sum())} non-finite entries")
    return D.to(x.dtype)


def _model(
    beta: float,
    *,
    attention: str = "softmax",
    geometry: str = "sphere",
    causal: bool = False,
    weights: WeightProcess | None = None,
) -> TransformerModel:
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a finite number > 0: got {beta!r}")
    kw = {} if weights is None else {"weights": weights}
    # The direction only signs the token velocity; observables here are unsigned.
    return TransformerModel(
        direction="descent",
        attention=attention,
        beta=float(beta),
        geometry=geometry,
        causal=causal,
        backend="torch",
        **kw,
    )


def field_eval(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float = 1.0,
    *,
    values: torch.Tensor | None = None,
    attention: str = "softmax",
    geometry: str = "sphere",
    causal: bool = False,
    weights: WeightProcess | None = None,
    t: float = 0.0,
    ledger: bool = True,
) -> tuple[TransformerModel, torch.Tensor, FieldEval]:
    """Validate inputs and run the shared field evaluation (internal helper of the observables).

    Returns the model used, the validated heads (P, H, d, d) and the :class:`FieldEval`.
    """
    model = _model(beta, attention=attention, geometry=geometry, causal=causal, weights=weights)
    x = check_tokens(x, geometry)
    D = check_heads(D, x)
    V = None if values is None else check_heads(values, x, "values")
    if V is not None and V.shape[1] != D.shape[1]:
        raise ValueError(
            f"values have {V.shape[1]} heads but D has {D.shape[1]}; pass one value matrix per head"
        )
    return model, D, evaluate_torch(model, x, D, V, t, ledger=ledger)
