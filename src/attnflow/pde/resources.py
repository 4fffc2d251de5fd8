"""What a density run costs before it is built: memory and time per step from (d, L, H, kernel).

The density solver (:mod:`attnflow.pde.solver`) keeps a quadrature grid of ``N`` nodes
(:mod:`attnflow.pde.grids`: ``N = 3L + 1`` on S^1, ``nt x 2 nt`` Gauss-Legendre rings with
``nt = ceil((3L + 1) / 2) + 1`` on S^2) and, with the quadrature kernel, builds per head the ``N x N``
score matrix, its shifted exponential and a temporary of the same size (``_kernel_sums`` of
:mod:`attnflow.pde.field`): about ``3 N^2`` float64 at once. Each Lawson RK4 step evaluates the field
4 times, for each head with ``D_h`` and with ``D_h^T`` (the first variation), so ``8 H N^2`` exponentials.
With the FFT kernel (S^1, rotation-invariant heads) these are ``O(N log N)``.

The numbers are estimates (within a factor of ~2 of what the solver allocates), meant to refuse a config
that cannot run on this machine before anything is allocated, not to predict run times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["EXP_PER_S", "PER_HEAD_S", "PdeCost", "pde_cost", "pde_grid_size"]

#: Exponentials per second assumed for the time estimate (numpy's ``exp`` on one core does ~2e8-5e8).
EXP_PER_S = 2e8
#: Fixed cost of one head's kernel sums (small matrix products, einsums; measured 1e-4 s on one core:
#: H = 1000, L = 24 on S^1 took 0.92 s per step, the estimate gives 1.0 s).
PER_HEAD_S = 1e-4


@dataclass(frozen=True)
class PdeCost:
    """Estimated cost of a density run.

    Attributes
    ----------
    nodes : int
        Quadrature nodes N.
    coefficients : int
        Spectral coefficients stored per record.
    memory_bytes : float
        Peak memory of one field evaluation plus the grid and the records kept in memory.
    seconds_per_step : float
        Time of one RK4 step at :data:`EXP_PER_S`.
    """

    nodes: int
    coefficients: int
    memory_bytes: float
    seconds_per_step: float


def pde_grid_size(d: int, L: int) -> tuple[int, int]:
    """(nodes, coefficients) of the grid of band limit ``L`` on S^{d-1} (:func:`attnflow.pde.make_grid`)."""
    if d == 2:
        return 3 * L + 1, L + 1
    nt = math.ceil((3 * L + 1) / 2) + 1
    return nt * 2 * nt, (L + 1) * (L + 2) // 2


def pde_cost(d: int, L: int, H: int, *, fft: bool, n_records: int) -> PdeCost:
    """Memory and time per step of a density run (module docstring).

    Parameters
    ----------
    d : int
        Ambient dimension (2: S^1, 3: S^2).
    L : int
        Band limit.
    H : int
        Number of heads.
    fft : bool
        The FFT kernel applies (S^1 and rotation-invariant heads).
    n_records : int
        Records kept in memory until the run ends.
    """
    N, C = pde_grid_size(d, L)
    per_node = 8 * (d * 6 + 8)  # points, bases, velocity, gradient, density and work vectors
    if fft:
        field = 8 * 12 * N  # kernel row, its transform, products and transforms of d + 1 columns
        exps = 8 * H * N
        flops = 8 * H * (d + 2) * 5 * N * math.log2(max(N, 2))
        seconds = exps / EXP_PER_S + flops / 1e9
    else:
        field = 3 * 8 * N * N
        exps = 8 * H * N * N
        seconds = exps / EXP_PER_S
    records = n_records * (8 * N + 16 * C)
    state = 16 * C * 12 + 8 * H * d * d * 12  # coefficients of the RK4 stages, heads
    seconds += 8 * H * PER_HEAD_S
    return PdeCost(N, C, float(field + per_node * N + records + state), float(seconds))
