"""Fused CPU kernel: the pair sums of softmax attention in one tiled pass, no n x n matrix.

For scores :math:`s^h_{ij} = \\beta \\langle x_i, D_h x_j \\rangle` one pass over token pairs
accumulates, per path p, head h and row i (with a row shift :math:`M_i` and
:math:`e_{ij} = e^{s_{ij} - M_i}`), the record :class:`attnflow.dynamics.pairsums.PairSums`:

* ``row_sum`` :math:`\\ell_i = \\sum_j e_{ij}` (so :math:`\\mathrm{lse}_i = M_i + \\log \\ell_i`);
* ``row_x`` :math:`\\sum_j e_{ij} x_j` (softmax mean and the gradient's :math:`y^h_i`);
* ``row_q`` :math:`\\sum_j e_{ij} \\langle x_i, x_j \\rangle^2` (Ito sum of the symmetric noise);
* ``col_x`` :math:`\\sum_i e^{s_{ij} - c_h} x_i` (the gradient's :math:`z^h_j`), only when
  :math:`U^h` is not symmetric.

Velocity, energy, mobilities, G^2, Ghat^2 and every other ledger quantity are assembled from these
sums, in float64, by :mod:`attnflow.dynamics.assembly` (the one home of those formulas). Memory is
``O(P H n d)`` (plus ``O(n d)`` per parallel work item), so that ``n = 50_000``, ``H = 4``, ``d = 3``
fits easily below 1 GiB.

Numerical scheme
----------------
Symmetric fast path: when every :math:`D_h` equals its transpose exactly and the run is not
causal (the paper's case), :math:`U^h` is symmetric, :math:`z^h_i = y^h_i` and the column
sums are skipped; :math:`\\mathrm{grad}_i = P^\\perp \\frac{1}{Hn} \\sum_h D_h y^h_i`.
A causal mask breaks the symmetry of :math:`U`, so causal runs always take the general path.

Symmetric half pass (issue 12): when, in addition, one shift :math:`c_h` serves every row (the bound
shift below), :math:`e_{ij} = e^{s_{ij} - c_h} = e_{ji}` exactly, so each unordered pair
:math:`j < i` is computed once and added to row i (weights :math:`x_j`) and to row j (weights
:math:`x_i`), the diagonal once: half the exponentials. A work item owns a lower-triangle strip
of rows of one head (equal areas); its row sums go to the outputs, its column contributions to a
buffer of its own, summed afterwards, so no two threads write the same row.

Work skipped when zero: ``ito=False`` (weight noise g = 0) drops the Ito sums ``row_q``; without the
ledger nothing but the row sums and :math:`\\sum_j e_{ij} x_j` is accumulated. The loop that
computes the exponentials is the same code in every case (the optional sums run in loops of their
own over the stored exponentials), so the results that remain are the same, bit for bit, and do not
depend on where the allocator puts the buffers (``tests/test_perf_determinism.py``).

Shift: :math:`|s_{ij}| \\le c_h := \\beta \\|D_h\\|_F \\max_j |x_j|^2`. When
:math:`2 \\max_h c_h \\le 40` (float32) or :math:`600` (float64), always true at moderate
beta, every row is shifted by :math:`M_i = c_h`: all :math:`e^{s_{ij} - c_h}` lie in
:math:`[e^{-2c_h}, 1]`, normal numbers, nothing is flushed and no pass 1 is needed. Otherwise
two passes per head, both tiled over columns so the working set stays in cache:

1. the exact row maximum :math:`M_i = \\max_j s_{ij}` (no exponentials, cheap);
2. :math:`e_{ij} = \\exp(s_{ij} - M_i) \\le 1` and the row sums
   :math:`\\ell_i = \\sum_j e_{ij}`, :math:`\\sum_j e_{ij} x_j`,
   :math:`\\sum_j e_{ij} \\langle x_i, x_j \\rangle^2`, so that
   :math:`\\mathrm{lse}_i = M_i + \\log \\ell_i` is accurate for any beta.
   The column sums ``z`` need one shift shared by all rows of a column; we use the
   per-head global maximum :math:`c_h = \\max_i M_i` and accumulate
   :math:`e_{ij} e^{M_i - c_h} x_i = e^{s_{ij} - c_h} x_i`, which never overflows.
   Terms with :math:`s_{ij} < c_h - 87` (float32) or :math:`c_h - 708` (float64) are
   flushed to zero. In float64 this is below round-off whenever the outputs are
   representable; in float32 it drops the ``z`` of tokens whose every score lies more
   than 87 below the head's largest score (only possible for
   ``beta * score range > 87``). Velocity and ``lse`` are unaffected.

The exponential is a Cody-Waite reduction plus a Taylor polynomial (degree 7 in float32,
13 in float64, error about 1 ulp) whose ``2**k`` factor is built by bit manipulation, so
LLVM vectorises the inner loop (numba ships no SVML here). Row sums inside a tile are
accumulated in the working precision with SIMD partial sums and promoted to float64 once
per tile; column sums are promoted every ``_ROW_BLOCK`` rows (the passes live in
:mod:`attnflow.dynamics.numba_passes`). The assembly (per
token, ``O(P H n d^2)``) runs in float64.

``fastmath``: the loops use ``{"nsz", "arcp", "contract", "afn", "reassoc"}``; ``reassoc``
is what lets LLVM vectorise the reductions. The exponential itself is compiled without
``reassoc`` (with it LLVM folds the two-constant Cody-Waite reduction and the float64
error grows to ~1e-13). ``nnan``/``ninf`` are never used, so NaN inputs propagate.
Against a dense float64 reference the kernel agrees to ~1e-15 relative in float64 and
~1e-7 in float32 (see ``tests/test_numba_kernel.py``).
"""

from __future__ import annotations

import os

import numba
import numpy as np
from numba import njit

from .._numba_cache import refresh as _refresh_numba_cache
from .numba_passes import (
    BOUND_RANGE_32,
    BOUND_RANGE_64,
    MIN_CHUNK_ROWS,
    accumulate_pass,
    accumulate_pass_serial,
    half_pass,
    half_pass_serial,
    item_keys,
    row_max_pass,
    row_max_pass_serial,
)

_refresh_numba_cache()  # drop numba's cached code compiled from since-edited sources (attnflow._numba_cache)

__all__ = [
    "PARALLEL_MIN_PAIRS",
    "PARALLEL_MIN_PAIRS_ENV",
    "PASSES",
    "bound_range",
    "check_inputs",
    "choose_pass",
    "pair_sums",
    "pair_sums_core",
    "parallel_min_pairs",
    "parallel_passes",
    "score_bounds",
    "work_items",
]

# --------------------------------------------------------------------------- public


def check_inputs(x, dm, vm, beta):
    """Validate the numpy inputs of the kernel (shapes, dtypes, beta)."""
    if not isinstance(x, np.ndarray) or x.ndim != 3:
        raise ValueError(
            f"x must be a numpy array of shape (P, n, d); got {type(x).__name__} with "
            f"shape {getattr(x, 'shape', None)}"
        )
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x must be float32 or float64; got {x.dtype}. Cast it first.")
    npaths, n, d = x.shape
    if n < 1 or d < 1:
        raise ValueError(f"x needs at least one token and one dimension; got shape {x.shape}")
    for name, mat in (("D", dm), ("V", vm)):
        if mat is None:
            continue
        if not isinstance(mat, np.ndarray) or mat.ndim != 4 or mat.shape[0] != npaths:
            raise ValueError(
                f"{name} must have shape (P, H, d, d) = ({npaths}, H, {d}, {d}); "
                f"got {getattr(mat, 'shape', None)}"
            )
        if mat.shape[2:] != (d, d) or (name == "V" and mat.shape != dm.shape):
            raise ValueError(f"{name} must have shape ({npaths}, H, {d}, {d}) matching D; got {mat.shape}")
        if mat.dtype != x.dtype:
            raise TypeError(
                f"{name} must have the dtype of x ({x.dtype}); got {mat.dtype}. Convert both to one dtype."
            )
    if dm.shape[1] < 1:
        raise ValueError(f"D needs at least one head; got shape {dm.shape}")
    if not (np.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be finite and > 0; got {beta!r}")


#: which pass produced the sums (``pair_sums(...)["pass"]``)
PASSES = ("half", "ordered", "exact")


@njit(cache=True)
def _keys(xt, bd):
    """``kt[p, h, a, j] = sum_b bd[p, h, a, b] xt[p, b, j]`` in a fixed order and plain IEEE arithmetic (no
    fast-math): the result does not depend on memory alignment (``einsum`` / BLAS may round differently
    with the addresses of their operands, and a run must repeat bit for bit)."""
    P, d, n = xt.shape
    H = bd.shape[1]
    kt = np.empty((P, H, d, n), dtype=xt.dtype)
    for p in range(P):
        for h in range(H):
            item_keys(bd[p, h], xt[p], n, kt[p, h])
    return kt


@njit(cache=True)
def _transpose_tokens(x, xt):
    """``xt[p, a, j] = x[p, j, a]`` (the kernel's structure-of-arrays layout; serial: a copy, O(P n d), is not
    worth a parallel region's compile time)."""
    P, n, d = x.shape
    for p in range(P):
        for a in range(d):
            for j in range(n):
                xt[p, a, j] = x[p, j, a]


@njit(cache=True)
def _fill_rows(shift, row_shift):
    """``row_shift[p, h, i] = shift[p, h]`` for every row (float64; serial, a copy)."""
    P, H, n = row_shift.shape
    for p in range(P):
        for h in range(H):
            for i in range(n):
                row_shift[p, h, i] = shift[p, h]


@njit(cache=True)
def score_bounds(x, D, beta):
    """``c_h = beta |D_h|_F max_j |x_j|^2`` per (p, h), in float64 (sums of squares in index order): the
    one definition of the score bound (:func:`attnflow.dynamics.numba_backend.score_bound` and the
    compiled loop call it). Serial: O(P (n d + H d^2)) is negligible beside the pair passes."""
    P, n, d = x.shape
    H = D.shape[1]
    out = np.empty((P, H))
    for p in range(P):
        r2 = 0.0
        for i in range(n):
            s = 0.0
            for a in range(d):
                v = np.float64(x[p, i, a])
                s += v * v
            r2 = max(r2, s) if i > 0 else s
        for h in range(H):
            s = 0.0
            for a in range(d):
                for b in range(d):
                    v = np.float64(D[p, h, a, b])
                    s += v * v
            out[p, h] = beta * np.sqrt(s) * r2
    return out


@njit(cache=True)
def choose_pass(x, D, beta, bound_range, causal, general, exact_max):
    """The kernel's choice of pass: ``(symmetric, exact, bound)``.

    ``symmetric``: U^h symmetric (non-causal, every D_h = D_h^T exactly), the column sums are the row sums;
    ``exact``: a score range 2 c_h too wide for the bound shift (or ``exact_max``), the rows are shifted by
    their exact maxima; ``bound`` the per-head bounds c_h of :func:`score_bounds`. The symmetric half pass
    runs when ``symmetric and not exact``.
    """
    P, H, d, _ = D.shape
    symmetric = not causal and not general
    if symmetric:
        for p in range(P):
            for h in range(H):
                for a in range(d):
                    for b in range(a):
                        if D[p, h, a, b] != D[p, h, b, a]:
                            symmetric = False
    # |s_ij| <= c_h; if every score range 2 c_h is small (always at the paper's beta) c_h shifts every row
    bound = score_bounds(x, D, beta)
    exact = exact_max or 2.0 * bound.max() > bound_range
    return symmetric, exact, bound


@njit(cache=True)
def pair_sums_core(
    x, D, beta, bound_range, causal, ledger, ito, general, exact_max, full,
    items_half, chunk_half, nchunk_half, items_ord, chunk_ord, nchunk_ord, ordered=True, parallel=True,
):  # fmt: skip
    """The whole kernel for one evaluation: layouts, the choice of pass, the passes, the column sums.

    Returns ``(pass, colsums, row_shift, row_sum, row_x, row_q, col_shift, col_x)`` (float64 sums;
    ``row_q`` is (1, 1, 1) without the Ito sums; without ``colsums`` (``U`` symmetric or no ledger)
    ``col_shift`` and ``col_x`` are placeholders of shapes (1, 1) and (1, 1, 1, 1)). ``pass`` indexes
    :data:`PASSES`. Compiled apart from :func:`pair_sums` so that a compiled
    caller (the multi-step loop of :mod:`attnflow.simulation.fused`) runs exactly the same code.

    ``ordered=None`` compiles the kernel without its passes over ordered pairs (numba prunes the branch on
    a None argument): only the symmetric half pass, for a caller that has checked :func:`choose_pass`
    first (the compiled loop's first variant: half the compile time of the kernel); such a kernel returns
    pass -1 and no sums if the half pass does not apply.

    ``parallel=None`` compiles the serial passes instead of the parallel ones (pruned the same way; the
    same work items in order, so the same sums, bit for bit): :func:`parallel_passes` chooses by size.

    Not inlined into its compiled caller: numba prunes a branch on ``x is None`` when ``x`` is an argument of
    the function compiled; inlined, only a None value was pruned and the caller compiled the parallel and the
    serial passes both.
    """
    P, n, d = x.shape
    H = D.shape[1]
    want_q = ledger and ito
    one = np.empty(1, dtype=x.dtype)
    one[0] = 0.0
    zero = one[0]
    # structure-of-arrays layouts: xt[p, a, j]; bd = beta D in the working precision
    xt = np.empty((P, d, n), dtype=x.dtype)
    _transpose_tokens(x, xt)
    bd = np.empty_like(D)
    one[0] = beta
    beta_w = one[0]
    for p in range(P):
        for h in range(H):
            for a in range(d):
                for b in range(d):
                    bd[p, h, a, b] = beta_w * D[p, h, a, b]
    symmetric, exact, bound = choose_pass(x, D, beta, bound_range, causal, general, exact_max)
    colsums = ledger and not symmetric
    rsum = np.zeros((P, H, n))
    ysum = np.zeros((P, H, n, d))
    qsum = np.zeros((P, H, n) if want_q else (1, 1, 1))
    row_shift = np.empty((P, H, n))
    if symmetric and not exact and not full:
        # one shift per head and U^h symmetric: each unordered pair once (the symmetric half pass)
        shift = np.empty((P, H), dtype=x.dtype)
        for p in range(P):
            for h in range(H):
                shift[p, h] = bound[p, h]
        cbuf = np.zeros((P, H, nchunk_half, d + 2, n) if nchunk_half > 1 else (1, 1, 1, 1, 1))
        if parallel is None:
            half_pass_serial(
                xt, bd, shift, items_half, chunk_half, nchunk_half, want_q, zero, rsum, ysum, qsum, cbuf
            )  # fmt: skip
        else:
            half_pass(
                xt, bd, shift, items_half, chunk_half, nchunk_half, want_q, zero, rsum, ysum, qsum, cbuf
            )
        for p in range(P):
            for h in range(H):
                if nchunk_half > 1:  # a head split across items: their column parts are summed here
                    for c in range(nchunk_half):
                        for j in range(n):
                            rsum[p, h, j] += cbuf[p, h, c, 0, j]
                        for a in range(d):
                            for j in range(n):
                                ysum[p, h, j, a] += cbuf[p, h, c, 1 + a, j]
                        if want_q:
                            for j in range(n):
                                qsum[p, h, j] += cbuf[p, h, c, d + 1, j]
        _fill_rows(shift, row_shift)
        return 0, False, row_shift, rsum, ysum, qsum, np.zeros((1, 1)), np.zeros((1, 1, 1, 1))
    if ordered is None:  # compiled without the ordered-pair passes (pruned): the caller checks choose_pass
        return -1, False, row_shift, rsum, ysum, qsum, np.zeros((1, 1)), np.zeros((1, 1, 1, 1))
    kt = _keys(xt, bd)
    row_max = np.empty((P, H, n), dtype=x.dtype)
    if exact:
        if parallel is None:
            row_max_pass_serial(xt, kt, items_ord, causal, row_max)
        else:
            row_max_pass(xt, kt, items_ord, causal, row_max)
    else:
        for p in range(P):
            for h in range(H):
                for i in range(n):
                    row_max[p, h, i] = bound[p, h]
    col_shift = np.empty((P, H))  # c_h = max_i M_i, the column-sum shift
    col_weight = np.empty((P, H, n), dtype=x.dtype)
    for p in range(P):
        for h in range(H):
            m = np.float64(row_max[p, h, 0])
            for i in range(n):
                m = max(m, np.float64(row_max[p, h, i]))
                row_shift[p, h, i] = row_max[p, h, i]
            col_shift[p, h] = m
            one[0] = m
            for i in range(n):
                col_weight[p, h, i] = np.exp(row_max[p, h, i] - one[0]) if colsums else row_max[p, h, i]
    zsum = np.zeros((P, H, nchunk_ord, d, n) if colsums else (P, H, 1, d, 1))
    if parallel is None:
        accumulate_pass_serial(
            xt, kt, row_max, col_weight, items_ord, chunk_ord, causal, want_q, colsums, zero,
            rsum, ysum, qsum, zsum,
        )  # fmt: skip
    else:
        accumulate_pass(
            xt, kt, row_max, col_weight, items_ord, chunk_ord, causal, want_q, colsums, zero,
            rsum, ysum, qsum, zsum,
        )  # fmt: skip
    code = 2 if exact else 1
    if not colsums:
        return code, False, row_shift, rsum, ysum, qsum, np.zeros((1, 1)), np.zeros((1, 1, 1, 1))
    col_x = np.zeros((P, H, n, d))
    for p in range(P):
        for h in range(H):
            for c in range(nchunk_ord):
                for a in range(d):
                    for j in range(n):
                        col_x[p, h, j, a] += zsum[p, h, c, a, j]
    return code, True, row_shift, rsum, ysum, qsum, col_shift, col_x


#: pair interactions per evaluation (``P H n^2``) from which the kernel (and the compiled assembly) run their
#: parallel passes; below, the serial ones (same work items: the same bits). A parallel region is a separate
#: and much longer compile (numba's parfor gufunc; docs/performance.md section 10.5) that gains at most the
#: thread count on work of ~1 ms a step below this size (the half pass at ~3e9 pairs/s); a run with one
#: numba thread is serial at any size.
PARALLEL_MIN_PAIRS = 4_000_000
#: environment variable that replaces :data:`PARALLEL_MIN_PAIRS` (an integer >= 0; 0: always the parallel
#: passes). A job that runs small and large problems in one process compiles both variants; setting it to 0
#: there keeps one (scripts/run.sh does for the main job, whose first run is small and the others large).
PARALLEL_MIN_PAIRS_ENV = "ATTNFLOW_PARALLEL_MIN_PAIRS"


def parallel_min_pairs() -> int:
    """:data:`PARALLEL_MIN_PAIRS`, or the value of the environment variable :data:`PARALLEL_MIN_PAIRS_ENV`."""
    raw = os.environ.get(PARALLEL_MIN_PAIRS_ENV)
    if raw is None or raw.strip() == "":
        return PARALLEL_MIN_PAIRS
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(
            f"{PARALLEL_MIN_PAIRS_ENV} must be an integer >= 0 (pair interactions P H n^2 per evaluation "
            f"from which the kernel runs its parallel passes; 0: always); got {raw!r}. Fix or unset it."
        )
    return value


def parallel_passes(npaths, nheads, n):
    """The kernel's ``parallel`` argument for ``P H n^2`` pair interactions per evaluation: True (the
    parallel passes) from :func:`parallel_min_pairs` on with more than one numba thread, else None (the
    serial passes: a fraction of the compile time; the same results, bit for bit)."""
    if numba.get_num_threads() > 1 and npaths * nheads * n * n >= parallel_min_pairs():
        return True
    return None


#: work items per evaluation the split aims at (4 per thread on 2 cores), whatever the thread count: the
#: column parts of a head split into row chunks are summed in chunk order, so the chunk count reaches the
#: sums' last bits, and a split by the thread count made a task's numbers depend on where it ran (a study
#: task on 1 numba thread in a Dask worker, on 2 in-process; issue 30)
SPLIT_ITEMS = 8


def work_items(npaths, nheads, n, causal):
    """Split each head into row chunks so that there are about :data:`SPLIT_ITEMS` items in all.

    The split does not depend on the thread count (the same items, the same sums, on any executor).
    Causal chunks have equal triangle areas (boundaries at ``n sqrt(k / m)``).
    """
    jobs = npaths * nheads
    target = SPLIT_ITEMS
    nchunk = max(1, min(-(-target // jobs), n // MIN_CHUNK_ROWS))
    frac = np.arange(nchunk + 1) / nchunk
    bounds = np.round(n * (np.sqrt(frac) if causal else frac)).astype(np.int64)
    bounds = np.unique(bounds)
    nchunk = bounds.size - 1
    p, h, c = np.meshgrid(np.arange(npaths), np.arange(nheads), np.arange(nchunk), indexing="ij")
    p, h, c = p.ravel(), h.ravel(), c.ravel()
    items = np.stack([p, h, bounds[c], bounds[c + 1]], axis=1).astype(np.int64)
    return np.ascontiguousarray(items), c.astype(np.int64), nchunk


def _core_variant(parallel):
    """:func:`pair_sums_core` with its passes fixed: ``parallel`` (None: serial, True: parallel) is a constant
    of the closure, which numba types as ``none`` / ``Literal[bool](True)`` and prunes the other variant on;
    passed from Python as a plain ``bool`` it pruned nothing and a parallel call compiled the serial passes
    too (as the compiled loop did, :func:`attnflow.simulation.fused._compiled_loop`). numba's cache keys a
    closure on its cell contents, so both variants are cached side by side."""

    @njit(cache=True)
    def core(x, D, beta, brange, causal, ledger, ito, general, exact_max, full, ih, ch, nh, io, co, no):
        return pair_sums_core(
            x, D, beta, brange, causal, ledger, ito, general, exact_max, full, ih, ch, nh, io, co, no, True,
            parallel,
        )  # fmt: skip

    return core


#: :func:`pair_sums_core` per value of :func:`parallel_passes` (None: serial passes, True: parallel ones)
_CORE = {None: _core_variant(None), True: _core_variant(True)}


def pair_sums(
    x: np.ndarray,
    D: np.ndarray,
    beta: float,
    *,
    causal: bool = False,
    ledger: bool = True,
    ito: bool = True,
    _general: bool = False,
    _exact_max: bool = False,
    _full: bool = False,
    parallel: bool | None = None,
) -> dict[str, np.ndarray]:
    """Pair sums of softmax attention in one tiled pass over pairs (the kernel's whole output).

    Parameters
    ----------
    x : ndarray, shape (P, n, d), float32 or float64
        Tokens.
    D : ndarray, shape (P, H, d, d), same dtype as ``x``
        Score matrices (layer scaling already applied).
    beta : float
        Inverse temperature, ``> 0``.
    causal : bool
        Keep only pairs ``j <= i``; every sum, including the column sums, runs over exactly these pairs.
    ledger : bool
        Also accumulate the ledger sums: the column sums (non-symmetric ``U``) needed by the gradient and,
        with ``ito``, the Ito sums ``row_q``.
    ito : bool
        Accumulate the Ito sums ``row_q`` (only read by the ledger when the weight noise is not zero); with
        ``ito=False`` or ``ledger=False`` the kernel skips them and returns ``row_q = None``.
    _general : bool
        Private, for tests and benchmarks: never take a symmetric fast path.
    _exact_max : bool
        Private, for tests and benchmarks: always shift by the exact row maxima.
    _full : bool
        Private, for tests and benchmarks: symmetric heads take the full pass over ordered pairs (the
        path before the symmetric half pass).
    parallel : bool or None
        True: the parallel passes; False: the serial ones (the same work items in one thread, the same
        arithmetic); None (default): chosen by size and numba's thread count (:func:`parallel_passes`).

    Returns
    -------
    dict of ndarray (float64) or None
        ``row_shift`` (P, H, n), ``row_sum`` (P, H, n), ``row_x`` (P, H, n, d), ``row_q`` (P, H, n) or
        ``None``, and ``col_shift`` (P, H), ``col_x`` (P, H, n, d) when the column sums were needed
        (``ledger`` and ``U`` not symmetric), else ``None``: the fields of
        :class:`attnflow.dynamics.pairsums.PairSums`; and ``pass``, the pass that ran (``"half"``,
        ``"ordered"`` or ``"exact"``: ordered pairs after a first pass of exact row maxima).

    Notes
    -----
    When every ``D_h`` is exactly symmetric and ``causal`` is False (the paper's case),
    :math:`U^h` is symmetric and the column sums equal the row sums (not accumulated). If, moreover,
    the bound shift applies (one shift per head, ``2 beta |D_h|_F max|x|^2`` at most 40 in float32,
    600 in float64), :math:`e_{ij} = e_{ji}` exactly and each unordered pair is computed once and
    added to both rows (the symmetric half pass): half the exponentials. General ``D`` (and causal
    runs) keep the full pass over ordered pairs.
    The stability of the shifted exponentials and the one float32 limitation of the column sums are
    described in the module docstring. The work (layouts, the choice of pass, the passes, the sums of
    the column parts) runs in one compiled function, :func:`pair_sums_core`, which the multi-step loop of
    :mod:`attnflow.simulation.fused` calls too. Compiled lazily on first call and cached on disk.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(1, 8, 3)); x /= np.linalg.norm(x, axis=-1, keepdims=True)
    >>> out = pair_sums(x, rng.normal(size=(1, 2, 3, 3)), 1.0)
    >>> out["row_x"].shape, out["row_sum"].shape
    ((1, 2, 8, 3), (1, 2, 8))
    """
    check_inputs(x, D, None, beta)
    npaths, n, d = x.shape
    nheads = D.shape[1]
    want_q = bool(ledger and ito)
    items_half, chunk_half, nchunk_half = work_items(npaths, nheads, n, True)  # lower-triangle strips
    items_ord, chunk_ord, nchunk_ord = work_items(npaths, nheads, n, causal)
    parallel = parallel_passes(npaths, nheads, n) if parallel is None else (True if parallel else None)
    code, colsums, row_shift, rsum, ysum, qsum, col_shift, col_x = _CORE[parallel](
        np.ascontiguousarray(x), np.ascontiguousarray(D), float(beta), bound_range(x.dtype), bool(causal),
        bool(ledger), bool(ito), bool(_general), bool(_exact_max), bool(_full),
        items_half, chunk_half, nchunk_half, items_ord, chunk_ord, nchunk_ord,
    )  # fmt: skip
    return {
        "row_shift": row_shift,
        "row_sum": rsum,
        "row_x": ysum,
        "row_q": qsum if want_q else None,
        "col_shift": col_shift if colsums else None,
        "col_x": col_x if colsums else None,
        "pass": PASSES[code],
    }


def bound_range(dtype) -> float:
    """Largest score range 2 max c_h that the bound shift takes in this dtype (40 float32, 600 float64)."""
    return BOUND_RANGE_32 if np.dtype(dtype) == np.float32 else BOUND_RANGE_64
