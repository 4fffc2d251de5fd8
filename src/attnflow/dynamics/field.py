"""The field of a model: choose a backend, get its pair sums, assemble (dispatch only, no formulas).

``evaluate(model, x, D, V, t)`` applies the layer scaling of Sec. 5 to the heads, asks a backend
(:mod:`~attnflow.dynamics.torch_backend` or the fused numba kernel,
:mod:`~attnflow.dynamics.numba_backend`) for the :class:`~attnflow.dynamics.pairsums.PairSums` and
assembles them with :func:`attnflow.dynamics.assembly.assemble`, the one home of the formulas.
"""

from __future__ import annotations

import torch

from ..model.transformer import BACKENDS, TransformerModel
from . import fastsum, numba_backend
from .assembly import FieldEval, assemble, ledger_rates
from .fastsum import pair_sums_fastsum
from .pairsums import PairSums
from .threads import torch_threads
from .torch_backend import pair_sums_torch
from .torch_tiled import pair_sums_tiled

__all__ = [
    "FASTSUM_TOL",
    "choose_backend",
    "effective_heads",
    "evaluate",
    "evaluate_torch",
    "model_ledger_rates",
    "pair_sums",
    "use_numba",
]


def effective_heads(
    model: TransformerModel, D: torch.Tensor, V: torch.Tensor | None, t: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Score and value matrices actually used at time t (layer scaling of Sec. 5 applied; V = D if None)."""
    c = model.head_scale(t, D.shape[1])
    De = D * c if c != 1.0 else D
    if V is None:
        return De, De
    return De, (V * c if c != 1.0 else V)


#: the worst-case relative error of every row sum that ``backend="fastsum"`` guarantees, per working dtype
FASTSUM_TOL = {torch.float64: 1e-10, torch.float32: 1e-6}


def choose_backend(
    model: TransformerModel,
    x: torch.Tensor,
    ledger: bool = True,
    backend: str | None = None,
    D: torch.Tensor | None = None,
) -> str:
    """The backend :func:`evaluate` takes for this model and these tokens: ``"torch"``, ``"numba"`` or
    ``"fastsum"``.

    ``backend`` (default: ``model.backend``) ``"numba"`` and ``"fastsum"`` are required when named (and
    raise when they cannot apply). ``"auto"`` takes the fast summation for many tokens on S^1 / S^2 when
    its error bound meets :data:`FASTSUM_TOL` and it is cheaper
    (:func:`attnflow.dynamics.fastsum.auto_worthwhile`: n >= 8 L^2, non-causal softmax on CPU), else the
    numba kernel for softmax attention on CPU tensors (the kernel's Ito sums assume unit tokens, so a
    ledger off the sphere goes through PyTorch), else PyTorch;
    ``"torch"`` is always PyTorch. With the (effective) heads ``D`` given, scores beyond the kernel's
    range (:data:`attnflow.dynamics.numba_backend.SCORE_MAX`) send ``"auto"`` to PyTorch and make ``"numba"``
    raise.
    """
    backend = model.backend if backend is None else backend
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if backend == "torch":
        return "torch"
    if backend == "fastsum":
        d = x.shape[-1]
        if model.attention != "softmax" or model.causal or not model.geometry.unit_norm or d not in (2, 3):
            raise ValueError(
                "backend='fastsum' needs softmax attention, causal=False and tokens on S^1 or S^2 (d = 2 or "
                f"3): got attention={model.attention!r}, causal={model.causal}, "
                f"geometry={model.geometry.name!r}, d={d}; use backend='auto'"
            )
        return "fastsum"
    eligible = (
        x.device.type == "cpu"
        and model.attention == "softmax"
        and not (ledger and not model.geometry.unit_norm)
    )
    huge = (
        D is not None and eligible and numba_backend.score_bound(x, D, model.beta) > numba_backend.SCORE_MAX
    )
    if backend == "numba":
        if huge:
            raise ValueError(
                f"backend='numba' takes scores up to beta |D|_F max|x|^2 = {numba_backend.SCORE_MAX:g}: got "
                f"{numba_backend.score_bound(x, D, model.beta):.3g}; use backend='torch' (or 'auto'), or "
                "lower beta or the head scale"
            )
        if not eligible:
            raise ValueError(
                "backend='numba' needs CPU tensors, attention='softmax', and the sphere geometry when the "
                f"ledger is on: got device={x.device.type}, attention={model.attention!r}, "
                f"geometry={model.geometry.name!r}, ledger={ledger}; use backend='auto' or 'torch'"
            )
        return "numba"
    if (
        D is not None
        and x.device.type == "cpu"
        and model.attention == "softmax"
        and not model.causal
        and model.geometry.unit_norm
        and fastsum.auto_worthwhile(
            x,
            D,
            float(model.beta),
            FASTSUM_TOL.get(x.dtype, 1e-10),
            factor=8.0 if x.dtype == torch.float64 else 16.0,
        )
    ):
        return "fastsum"  # large n on S^1 / S^2: O(n L^2) at a guaranteed relative error (dynamics.fastsum)
    return "numba" if eligible and not huge and numba_backend.available() else "torch"


def use_numba(
    model: TransformerModel, x: torch.Tensor, ledger: bool = True, backend: str | None = None
) -> bool:
    """Whether :func:`evaluate` takes the fused numba kernel (see :func:`choose_backend`)."""
    return choose_backend(model, x, ledger, backend) == "numba"


def pair_sums(
    model: TransformerModel,
    x: torch.Tensor,
    De: torch.Tensor,
    *,
    ledger: bool,
    backend: str | None = None,
    ito: bool = True,
) -> PairSums:
    """Pair sums of the field at (x, De) from the backend :func:`choose_backend` picks (or ``backend``).

    ``ito=False`` lets the numba and PyTorch backends skip the Ito sums (``row_q``, ``row_r2``). Softmax
    attention on CUDA tensors goes through the tiled path
    :func:`attnflow.dynamics.torch_tiled.pair_sums_tiled` (the CPU keeps the PyTorch reference).
    """
    kind = choose_backend(model, x, ledger, backend, De)
    if kind == "numba":
        return numba_backend.pair_sums_numba(
            x, De, float(model.beta), causal=model.causal, ledger=ledger, ito=ito
        )
    if kind == "fastsum":
        tol = FASTSUM_TOL.get(x.dtype, 1e-10)
        return pair_sums_fastsum(x, De, float(model.beta), tol=tol, ledger=ledger, geometry=model.geometry)
    if x.device.type == "cuda" and model.attention == "softmax" and (model.geometry.unit_norm or not ledger):
        # CUDA: the tiled softmax path (no n x n matrix; its Ito sums assume unit tokens)
        return pair_sums_tiled(x, De, float(model.beta), causal=model.causal, ledger=ledger, ito=ito)
    return pair_sums_torch(
        x,
        De,
        float(model.beta),
        attention=model.attention,
        causal=model.causal,
        geometry=model.geometry,
        sinkhorn_iters=model.sinkhorn_iters,
        sinkhorn_tol=model.sinkhorn_tol,
        ledger=ledger,
        ito=ito,
    )


def evaluate(
    model: TransformerModel,
    x: torch.Tensor,
    D: torch.Tensor,
    V: torch.Tensor | None,
    t: float,
    *,
    ledger: bool = True,
    raw: bool = False,
    backend: str | None = None,
    ito: bool = True,
) -> FieldEval:
    """Evaluate the field at (x, D, t).

    Parameters
    ----------
    model : TransformerModel
    x : Tensor, shape=[P, n, d]
    D : Tensor, shape=[P, H, d, d]
        Score matrices.
    V : Tensor or None, shape=[P, H, d, d]
        Value matrices (None: V = D, the paper's choice).
    t : float
        Time (only used by the layer scaling).
    ledger : bool
        Also compute the energy-ledger quantities.
    raw : bool
        Also return the unprojected mean head output (the printed scheme).
    backend : {"auto", "torch", "numba", "fastsum"} or None
        Override ``model.backend`` (None: use it); see :func:`choose_backend`.
    ito : bool
        With the ledger, also the Ito sums and factors (``ito_moment``, ``ito_full``). They are read only
        when the weight noise is not zero; ``ito=False`` skips them on the numba and PyTorch backends
        (the simulator passes ``ito = model.weights.stochastic``).
    """
    De, Ve = effective_heads(model, D, V, t)
    kind = choose_backend(model, x, ledger, backend, De)
    if kind == "numba":
        return numba_backend.evaluate_numba(
            x, De, Ve, float(model.beta), model.geometry, causal=model.causal, ledger=ledger, ito=ito, raw=raw
        )
    sums = pair_sums(model, x, De, ledger=ledger, backend=kind, ito=ito)
    if kind == "fastsum":
        with torch_threads(1):  # O(P H n d) assembly of O(n L^2) sums: small arrays
            return assemble(sums, x, De, Ve, float(model.beta), model.geometry, ledger=ledger, raw=raw)
    return assemble(sums, x, De, Ve, float(model.beta), model.geometry, ledger=ledger, raw=raw)


def evaluate_torch(
    model: TransformerModel,
    x: torch.Tensor,
    D: torch.Tensor,
    V: torch.Tensor | None,
    t: float,
    *,
    ledger: bool = True,
    raw: bool = False,
) -> FieldEval:
    """:func:`evaluate` on the PyTorch backend (the reference path, CPU and CUDA, every attention kind)."""
    return evaluate(model, x, D, V, t, ledger=ledger, raw=raw, backend="torch")


def model_ledger_rates(
    model: TransformerModel, fe: FieldEval, D: torch.Tensor, t: float, drift: torch.Tensor, g
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`attnflow.dynamics.assembly.ledger_rates` with the beta, noise and layer scaling of ``model``."""
    H = D.shape[1]
    return ledger_rates(
        fe,
        D,
        beta=float(model.beta),
        noise_kind=model.weights.noise,
        scale=model.head_scale(t, H),
        scale_rate=model.head_scale_rate(t, H),
        drift=drift,
        g=g,
    )
