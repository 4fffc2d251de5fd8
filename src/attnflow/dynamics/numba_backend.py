"""numba backend of the field: the fused CPU kernel (:mod:`~attnflow.dynamics.numba_kernel`) behind the
:class:`~attnflow.dynamics.pairsums.PairSums` contract (numpy arrays in, torch tensors out, no copy)."""

from __future__ import annotations

import numpy as np
import torch

from ..geometry import Geometry, get_geometry
from .assembly import FieldEval
from .pairsums import PairSums

__all__ = ["SCORE_MAX", "available", "evaluate_numba", "fused_field", "pair_sums_numba", "score_bound"]

#: Largest score bound beta |D_h|_F max |x_j|^2 the kernel takes. Its two passes over the pairs (row maxima,
#: then exponentials) compute each score with fast-math arithmetic whose rounding differs by a few ulp; at
#: |s| ~ 1e16 that difference reaches hundreds and exp(s - max) over- or underflows (measured: heads scaled
#: by 1e20 give lse = -inf and a NaN velocity). Below 1e12 the difference stays under 1e-3.
SCORE_MAX = 1e12

_AVAILABLE: bool | None = None


def available() -> bool:
    """True when the fused kernel module imports (numba installed)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        try:
            from . import numba_kernel  # noqa: F401  (optional dependency: imported on first use)

            _AVAILABLE = True
        except ImportError:
            _AVAILABLE = False
    return _AVAILABLE


def score_bound(x: torch.Tensor, D: torch.Tensor, beta: float, scale: float = 1.0) -> float:
    """beta |c| max_h |D_h|_F max_j |x_j|^2: a bound on every score |s^h_ij| of the heads c D.

    The one definition is the kernel's own shift bound :func:`attnflow.dynamics.numba_kernel.score_bounds`
    (per head, float64); this takes its maximum and the head scale ``scale`` = c(t), as the compiled
    loop does (:mod:`attnflow.simulation.fused`).
    """
    from .numba_kernel import score_bounds  # numba is imported (and compiles) on first use only

    xa = np.ascontiguousarray(x.detach().cpu().numpy())
    Da = np.ascontiguousarray(D.detach().cpu().numpy())
    if Da.dtype != xa.dtype or xa.dtype not in (np.float32, np.float64):  # exact: the bound is float64
        xa, Da = xa.astype(np.float64), Da.astype(np.float64)
    return float(score_bounds(xa, Da, float(beta)).max()) * abs(float(scale))


def _tensor(a: np.ndarray | None) -> torch.Tensor | None:
    return None if a is None else torch.from_numpy(np.asarray(a))


def _kernel_sums(x: torch.Tensor, D: torch.Tensor, beta: float, **kwargs) -> dict:
    """The kernel's output (:func:`numba_kernel.pair_sums`) for CPU tensors (numpy views, no copy)."""
    from .numba_kernel import pair_sums  # numba is imported (and compiles) on first use only

    return pair_sums(
        np.ascontiguousarray(x.detach().numpy()),
        np.ascontiguousarray(D.detach().numpy()),
        float(beta),
        **kwargs,
    )


def pair_sums_numba(
    x: torch.Tensor,
    D: torch.Tensor,
    beta: float,
    *,
    causal: bool = False,
    ledger: bool = True,
    ito: bool = True,
    **private,
) -> PairSums:
    """Pair sums of softmax attention from the fused kernel (CPU tensors; see :func:`numba_kernel.pair_sums`).

    ``ito=False`` skips the Ito sums (``row_q = None``); ``private`` passes the kernel's test switches
    (``_general``, ``_exact_max``, ``_full``).
    """
    out = _kernel_sums(x, D, beta, causal=causal, ledger=ledger, ito=ito, **private)
    return PairSums(
        row_shift=_tensor(out["row_shift"]),
        row_sum=_tensor(out["row_sum"]),
        row_x=_tensor(out["row_x"]),
        row_q=_tensor(out["row_q"]),
        col_shift=_tensor(out["col_shift"]),
        col_x=_tensor(out["col_x"]),
    )


def evaluate_numba(
    x: torch.Tensor,
    D: torch.Tensor,
    V: torch.Tensor,
    beta: float,
    geometry: Geometry,
    *,
    causal: bool = False,
    ledger: bool = True,
    ito: bool = True,
    raw: bool = False,
    **private,
) -> FieldEval:
    """The field from the fused kernel's pair sums and the compiled assembly.

    ``D`` and ``V`` are the effective score and value matrices (layer scaling applied). The assembly is
    the compiled one of :mod:`attnflow.dynamics.numba_assembly` (the formulas of
    :func:`attnflow.dynamics.assembly.assemble`, checked against it in the tests; at the paper's size it
    takes a quarter of the PyTorch assembly's time). ``ito=False``: no Ito sums and no Ito factors
    (``ito_moment = None``).
    """
    from .numba_assembly import assemble_numba  # compiled on first use, like the kernel

    sums = _kernel_sums(x, D, beta, causal=causal, ledger=ledger, ito=ito, **private)
    return assemble_numba(sums, x, D, V, float(beta), geometry, ledger=ledger, raw=raw)


def fused_field(
    x: np.ndarray,
    D: np.ndarray,
    V: np.ndarray | None,
    beta: float,
    *,
    geometry: str = "sphere",
    causal: bool = False,
    ledger: bool = True,
    ito: bool = True,
    _general: bool = False,
    _exact_max: bool = False,
    _full: bool = False,
) -> dict[str, np.ndarray]:
    """Softmax attention velocity and energy ledger from numpy arrays: the kernel plus the assembly.

    Parameters
    ----------
    x : ndarray, shape (P, n, d), float32 or float64
    D : ndarray, shape (P, H, d, d), same dtype as ``x``
    V : ndarray, shape (P, H, d, d), or None
        Value matrices; ``None`` means ``V = D`` (the paper's choice).
    beta : float
    geometry : {"sphere", "flat"}
        Tangent projection of velocity and gradient (sphere) or none (flat). The kernel has no
        sums of |x_j|^2, so off the sphere ``ito_moment`` is not returned (the PyTorch path has it).
    causal, ledger, ito, _general, _exact_max, _full
        As in :func:`attnflow.dynamics.numba_kernel.pair_sums` (``ito=False``: no ``ito_moment``).

    Returns
    -------
    dict of ndarray
        ``velocity`` and ``lse`` in the dtype of ``x``; with ``ledger`` also ``grad``, ``energy``,
        ``G2``, ``Ghat2``, ``second_moment`` and (sphere) ``ito_moment`` in float64 (see
        :class:`attnflow.dynamics.assembly.FieldEval`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(1, 8, 3)); x /= np.linalg.norm(x, axis=-1, keepdims=True)
    >>> out = fused_field(x, rng.normal(size=(1, 2, 3, 3)), None, 1.0)
    >>> out["velocity"].shape, out["lse"].shape
    ((1, 8, 3), (1, 2, 8))
    """
    from .numba_kernel import check_inputs

    check_inputs(x, D, V, beta)
    geo = get_geometry(geometry)
    xt, Dt = torch.from_numpy(x), torch.from_numpy(D)
    Vt = Dt if V is None else torch.from_numpy(V)
    fe = evaluate_numba(
        xt, Dt, Vt, float(beta), geo, causal=causal, ledger=ledger, ito=ito,
        _general=_general, _exact_max=_exact_max, _full=_full,
    )  # fmt: skip
    out = {"velocity": fe.velocity.numpy(), "lse": fe.lse.numpy()}
    if ledger:
        out.update(
            grad=fe.grad.numpy(),
            energy=fe.energy.numpy(),
            G2=fe.G2.numpy(),
            Ghat2=fe.Ghat2.numpy(),
            second_moment=fe.second_moment.numpy(),
        )
        if fe.ito_moment is not None:
            out["ito_moment"] = fe.ito_moment.numpy()
    return out
