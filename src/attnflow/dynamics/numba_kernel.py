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
per tile; column sums are promoted every ``_ROW_BLOCK`` rows. The assembly (per
token, ``O(P H n d^2)``) runs in float64.

``fastmath``: the loops use ``{"nsz", "arcp", "contract", "afn", "reassoc"}``; ``reassoc``
is what lets LLVM vectorise the reductions. The exponential itself is compiled without
``reassoc`` (with it LLVM folds the two-constant Cody-Waite reduction and the float64
error grows to ~1e-13). ``nnan``/``ninf`` are never used, so NaN inputs propagate.
Against a dense float64 reference the kernel agrees to ~1e-15 relative in float64 and
~1e-7 in float32 (see ``tests/test_numba_kernel.py``).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic, overload

__all__ = [
    "PASSES",
    "bound_range",
    "check_inputs",
    "pair_sums",
    "pair_sums_core",
    "score_bounds",
    "work_items",
]

_LOOP_FLAGS = {"nsz", "arcp", "contract", "afn", "reassoc"}
_EXP_FLAGS = {"nsz", "arcp", "contract", "afn"}
_TILE = 512  # columns per tile: 9 arrays of 512 floats stay in L1/L2
_ROW_BLOCK = 64  # rows accumulated in working precision before promoting column sums
_MIN_CHUNK_ROWS = 128  # rows per work item when a head is split across threads

_F32 = np.float32
_L2E_32 = _F32(1.4426950408889634)
_LN2_HI_32 = _F32(0.693145751953125)  # 11 significant bits: k * hi is exact
_LN2_LO_32 = _F32(1.428606765330187e-06)
_HALF_32 = _F32(0.5)
_FLUSH_32 = _F32(-87.0)
_BOUND_RANGE_32 = 40.0  # largest score range shifted by a bound: exp(-40) is far from underflow
_BOUND_RANGE_64 = 600.0  # 2**k stays a normal number above this
_ZERO_32 = _F32(0.0)
_TAYLOR_32 = tuple(_F32(1.0 / math.factorial(k)) for k in range(8))

_L2E_64 = 1.4426950408889634
_LN2_HI_64 = 6.93147180369123816490e-01  # fdlibm split: k * hi is exact
_LN2_LO_64 = 1.90821492927058770002e-10
_FLUSH_64 = -708.0
_TAYLOR_64 = tuple(1.0 / math.factorial(k) for k in range(14))


@intrinsic
def _pow2(typingctx, kf):
    """``2**kf`` for an integer-valued float ``kf`` in the normal exponent range.

    Adding ``2**m + bias`` (``m`` = mantissa bits) writes ``kf + bias`` into the low
    mantissa bits; shifting them into the exponent field gives ``2**kf`` without a
    float-to-int conversion, so the loop vectoriser keeps it in SIMD registers.
    """
    if not isinstance(kf, types.Float):
        return None
    sig = kf(kf)

    def codegen(context, builder, signature, args):
        (k,) = args
        if signature.return_type.bitwidth == 64:
            ity, magic, shift = ir.IntType(64), float(2**52 + 1023), 52
        else:
            ity, magic, shift = ir.IntType(32), float(2**23 + 127), 23
        biased = builder.fadd(k, ir.Constant(k.type, magic))
        bits = builder.shl(builder.bitcast(biased, ity), ir.Constant(ity, shift))
        return builder.bitcast(bits, k.type)

    return sig, codegen


def _exp_shifted(t):
    """``exp(t)`` for shifted scores ``t <= 0``; values below the flush limit give 0."""
    return np.exp(t)


def _exp_shifted_f32(t):
    kf = np.floor(t * _L2E_32 + _HALF_32)
    r = t - kf * _LN2_HI_32
    r = r - kf * _LN2_LO_32
    c = _TAYLOR_32
    p = c[7]
    p = p * r + c[6]
    p = p * r + c[5]
    p = p * r + c[4]
    p = p * r + c[3]
    p = p * r + c[2]
    p = p * r + c[1]
    p = p * r + c[0]
    value = p * _pow2(kf)
    return _ZERO_32 if t < _FLUSH_32 else value


def _exp_shifted_f64(t):
    kf = np.floor(t * _L2E_64 + 0.5)
    r = t - kf * _LN2_HI_64
    r = r - kf * _LN2_LO_64
    c = _TAYLOR_64
    p = c[13]
    for k in range(12, -1, -1):
        p = p * r + c[k]
    value = p * _pow2(kf)
    return 0.0 if t < _FLUSH_64 else value


@overload(_exp_shifted, jit_options={"fastmath": _EXP_FLAGS})
def _exp_shifted_overload(t):
    if t == types.float32:
        return _exp_shifted_f32
    if t == types.float64:
        return _exp_shifted_f64
    return None


# --------------------------------------------------------------------------- pass 1
# The helpers are inlined at numba-IR level: a call (or an array view) per row would cost
# reference-count updates that are as expensive as the ~300 pairs of one row at paper size.


@njit(fastmath=_LOOP_FLAGS, cache=True, inline="always")
def _score_tile(xi, k, j0, j1, buf):
    """``buf[j - j0] = <xi, k[:, j]>`` for ``j0 <= j < j1`` (any ``d``; loops over 0-based 1-d views, see
    :func:`_half_tile_d3`)."""
    length = j1 - j0
    k0 = k[0, j0:j1]
    for j in range(length):
        buf[j] = xi[0] * k0[j]
    for a in range(1, xi.shape[0]):
        xa = xi[a]
        ka = k[a, j0:j1]
        for j in range(length):
            buf[j] += xa * ka[j]


@njit(fastmath=_LOOP_FLAGS, cache=True, inline="always")
def _score_tile_d3(xi0, xi1, xi2, k, j0, j1, buf):
    """``d = 3`` scores of one row against columns ``j0 <= j < j1`` (0-based 1-d views, see
    :func:`_half_tile_d3`)."""
    k0 = k[0, j0:j1]
    k1 = k[1, j0:j1]
    k2 = k[2, j0:j1]
    for jj in range(j1 - j0):
        buf[jj] = xi0 * k0[jj] + xi1 * k1[jj] + xi2 * k2[jj]


@njit(fastmath=_LOOP_FLAGS, cache=True, inline="always")
def _tile_max(buf, length):
    """``max(buf[:length])`` with eight independent chains (LLVM does not vectorise a
    float max reduction; one chain is latency-bound at ~3 cycles per element)."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = buf[0]
    l8 = length - length % 8
    for j in range(0, l8, 8):
        m0 = max(m0, buf[j])
        m1 = max(m1, buf[j + 1])
        m2 = max(m2, buf[j + 2])
        m3 = max(m3, buf[j + 3])
        m4 = max(m4, buf[j + 4])
        m5 = max(m5, buf[j + 5])
        m6 = max(m6, buf[j + 6])
        m7 = max(m7, buf[j + 7])
    m = max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
    for j in range(l8, length):
        m = max(m, buf[j])
    return m


@njit(parallel=True, fastmath=_LOOP_FLAGS, cache=True)
def _row_max_pass(xt, kt, items, causal, row_max):
    """Pass 1: ``row_max[p, h, i] = max_j s_ij`` over the (masked) columns."""
    n = xt.shape[2]
    d = xt.shape[1]
    for it in prange(items.shape[0]):
        p, h, r0, r1 = items[it, 0], items[it, 1], items[it, 2], items[it, 3]
        k = kt[p, h]
        x = xt[p]
        buf = np.empty(_TILE, dtype=xt.dtype)
        xi = np.empty(d, dtype=xt.dtype)
        j_stop = r1 if causal else n
        for j0 in range(0, j_stop, _TILE):
            j1 = min(j0 + _TILE, n)
            for i in range(max(r0, j0) if causal else r0, r1):
                jend = min(j1, i + 1) if causal else j1
                if d == 3:
                    _score_tile_d3(x[0, i], x[1, i], x[2, i], k, j0, jend, buf)
                else:
                    for a in range(d):
                        xi[a] = x[a, i]
                    _score_tile(xi, k, j0, jend, buf)
                m = _tile_max(buf, jend - j0)
                if j0 == 0 or m > row_max[p, h, i]:
                    row_max[p, h, i] = m


# --------------------------------------------------------------------------- pass 2


@njit(fastmath=_LOOP_FLAGS, cache=True, inline="always")
def _tile_d3(xi0, xi1, xi2, mi, wi, k, x, zt, ebuf, j0, j1, ito, colsums, zero):
    """Fused ``d = 3`` tile: scores, exponentials and the row sums in one SIMD loop.

    ``colsums`` adds the column sums ``zt`` (general ``D``), ``ito`` the Ito sum ``q`` (returned as 0
    otherwise), each in a loop of its own over the exponentials kept in ``ebuf``: the first loop is the
    same code whatever is asked, so skipping the Ito sums changes no other result, bit for bit. The
    column buffer is never updated in the loop that reduces the row sums: when it was (before issue 12),
    results differed in the last bit with the addresses of the buffers (root cause not established; a
    runtime alias check choosing between vector and scalar code is the likely one). Loops run over
    ``range(length)`` on 1-d views (see :func:`_half_tile_d3`).
    """
    length = j1 - j0
    k0 = k[0, j0:j1]
    k1 = k[1, j0:j1]
    k2 = k[2, j0:j1]
    x0 = x[0, j0:j1]
    x1 = x[1, j0:j1]
    x2 = x[2, j0:j1]
    ell = zero
    y0 = zero
    y1 = zero
    y2 = zero
    for jj in range(length):
        e = _exp_shifted(xi0 * k0[jj] + xi1 * k1[jj] + xi2 * k2[jj] - mi)
        ebuf[jj] = e
        ell += e
        y0 += e * x0[jj]
        y1 += e * x1[jj]
        y2 += e * x2[jj]
    if colsums:
        c0 = wi * xi0
        c1 = wi * xi1
        c2 = wi * xi2
        z0 = zt[0]
        z1 = zt[1]
        z2 = zt[2]
        for jj in range(length):
            e = ebuf[jj]
            z0[jj] += e * c0
            z1[jj] += e * c1
            z2[jj] += e * c2
    q = zero
    if ito:
        for jj in range(length):
            g = xi0 * x0[jj] + xi1 * x1[jj] + xi2 * x2[jj]
            q += ebuf[jj] * g * g
    return ell, y0, y1, y2, q


@njit(fastmath=_LOOP_FLAGS, cache=True, inline="always")
def _tile_generic(xi, mi, wi, k, x, zt, j0, j1, ito, colsums, sbuf, ebuf, ysum, zero):
    """Any-``d`` tile through small buffers; returns ``(ell, q)`` and fills ``ysum``."""
    length = j1 - j0
    _score_tile(xi, k, j0, j1, sbuf)
    ell = zero
    for j in range(length):
        e = _exp_shifted(sbuf[j] - mi)
        ebuf[j] = e
        ell += e
    for a in range(xi.shape[0]):
        acc = zero
        for j in range(length):
            acc += ebuf[j] * x[a, j0 + j]
        ysum[a] = acc
    q = zero
    if ito:
        _score_tile(xi, x, j0, j1, sbuf)
        for j in range(length):
            q += ebuf[j] * sbuf[j] * sbuf[j]
    if colsums:
        for a in range(xi.shape[0]):
            ca = wi * xi[a]
            for j in range(length):
                zt[a, j] += ebuf[j] * ca
    return ell, q


@njit(cache=True, inline="always")
def _aligned_zeros(rows, cols, dtype):
    """A zeroed (rows, cols) C array whose data starts on a 64-byte boundary.

    The vectorised loops' results must not depend on where the allocator puts a buffer (a run repeats
    bit for bit); an aligned start makes the machine code's path the same on every call.
    """
    raw = np.zeros(rows * cols + 16, dtype=dtype)  # 16 elements cover 64 bytes of float32 or more
    off = ((64 - raw.ctypes.data % 64) % 64) // raw.itemsize
    return raw[off : off + rows * cols].reshape((rows, cols))


@njit(parallel=True, fastmath=_LOOP_FLAGS, cache=True)
def _accumulate_pass(
    xt, kt, row_max, col_weight, items, chunk_of, causal, ito, colsums, zero, rsum, ysum, qsum, zsum
):
    """Pass 2: exponentials and all pair sums of one work item (head, row chunk).

    Writes ``rsum[p,h,i] = sum_j e_ij``, ``ysum[p,h,i,:] = sum_j e_ij x_j``,
    ``qsum[p,h,i] = sum_j e_ij <x_i,x_j>^2`` and the shifted column
    sums ``zsum[p,h,chunk,:,j] = sum_i e_ij col_weight_i x_i`` (float64 accumulators); ``qsum`` only
    with ``ito``, ``zsum`` only with ``colsums``.
    """
    n = xt.shape[2]
    d = xt.shape[1]
    for it in prange(items.shape[0]):
        p, h, r0, r1 = items[it, 0], items[it, 1], items[it, 2], items[it, 3]
        c = chunk_of[it]
        k = kt[p, h]
        x = xt[p]
        zsum_item = zsum[p, h, c]
        zt = _aligned_zeros(d, _TILE, xt.dtype)
        work = _aligned_zeros(2, _TILE, xt.dtype)
        sbuf = work[0]
        ebuf = work[1]
        yb = np.empty(d, dtype=xt.dtype)
        xi = np.empty(d, dtype=xt.dtype)
        j_stop = r1 if causal else n
        for j0 in range(0, j_stop, _TILE):
            j1 = min(j0 + _TILE, n)
            pending = 0
            for i in range(max(r0, j0) if causal else r0, r1):
                jend = min(j1, i + 1) if causal else j1
                mi = row_max[p, h, i]
                wi = col_weight[p, h, i]
                if d == 3:
                    ell, y0, y1, y2, q = _tile_d3(
                        x[0, i], x[1, i], x[2, i], mi, wi, k, x, zt, ebuf, j0, jend, ito, colsums, zero
                    )
                    ysum[p, h, i, 0] += y0
                    ysum[p, h, i, 1] += y1
                    ysum[p, h, i, 2] += y2
                else:
                    for a in range(d):
                        xi[a] = x[a, i]
                    ell, q = _tile_generic(xi, mi, wi, k, x, zt, j0, jend, ito, colsums, sbuf, ebuf, yb, zero)
                    for a in range(d):
                        ysum[p, h, i, a] += yb[a]
                rsum[p, h, i] += ell
                qsum[p, h, i] += q
                if colsums:
                    pending += 1
                    if pending == _ROW_BLOCK or i == r1 - 1:
                        for a in range(d):
                            for j in range(j1 - j0):
                                zsum_item[a, j0 + j] += zt[a, j]
                                zt[a, j] = zero
                        pending = 0


# --------------------------------------------------------------------------- symmetric half pass
# U^h symmetric and one shift c_h per head: e_ij = exp(s_ij - c_h) = e_ji. Each unordered pair {i, j},
# j < i, is computed once and added to row i (weights x_j) and to row j (weights x_i); the diagonal once.
# A work item owns the rows [r0, r1) of one head and the pairs j < i of those rows (a lower-triangle strip,
# equal areas); its row sums go straight to the outputs, its column contributions (rows j of other items)
# to its own buffer ``cbuf[p, h, chunk]``, summed afterwards: no two threads write the same row.

_HALF_ROWS = 5  # cbuf rows per column: e, e x_i (3 for d = 3; d in general), e <x_i, x_j>^2


@njit(fastmath=_LOOP_FLAGS, cache=True, inline="always")
def _half_tile_d3(xi0, xi1, xi2, mi, k, x, zt, ebuf, j0, j1, ito, zero):
    """Pairs ``j0 <= j < j1`` (all ``j < i``) of row ``i``: returns the row part and adds the column part
    to ``zt``; the Ito sums in a second loop over ``ebuf`` (as in :func:`_tile_d3`).

    Every loop runs over ``range(length)`` on 1-d views: an index that provably starts at 0 lets LLVM
    drop numba's negative-index wrap-around and vectorise (with ``range(j0, j1)`` the exponential loop
    compiled to scalar code; benchmarks/asm_report.py).
    """
    length = j1 - j0
    k0 = k[0, j0:j1]
    k1 = k[1, j0:j1]
    k2 = k[2, j0:j1]
    x0 = x[0, j0:j1]
    x1 = x[1, j0:j1]
    x2 = x[2, j0:j1]
    ell = zero
    y0 = zero
    y1 = zero
    y2 = zero
    for jj in range(length):
        e = _exp_shifted(xi0 * k0[jj] + xi1 * k1[jj] + xi2 * k2[jj] - mi)
        ebuf[jj] = e
        ell += e
        y0 += e * x0[jj]
        y1 += e * x1[jj]
        y2 += e * x2[jj]
    z0 = zt[0]
    z1 = zt[1]
    z2 = zt[2]
    z3 = zt[3]
    for jj in range(length):
        e = ebuf[jj]
        z0[jj] += e
        z1[jj] += e * xi0
        z2[jj] += e * xi1
        z3[jj] += e * xi2
    q = zero
    if ito:
        z4 = zt[4]
        for jj in range(length):
            g = xi0 * x0[jj] + xi1 * x1[jj] + xi2 * x2[jj]
            eg = ebuf[jj] * g * g
            q += eg
            z4[jj] += eg
    return ell, y0, y1, y2, q


@njit(fastmath=_LOOP_FLAGS, cache=True, inline="always")
def _half_tile_generic(xi, mi, k, x, zt, j0, j1, ito, sbuf, ebuf, ysum, zero):
    """Any-``d`` version of :func:`_half_tile_d3` through small buffers; returns ``(ell, q)``."""
    d = xi.shape[0]
    length = j1 - j0
    _score_tile(xi, k, j0, j1, sbuf)
    ell = zero
    for j in range(length):
        e = _exp_shifted(sbuf[j] - mi)
        ebuf[j] = e
        ell += e
        zt[0, j] += e
    for a in range(d):
        acc = zero
        xa = xi[a]
        for j in range(length):
            acc += ebuf[j] * x[a, j0 + j]
            zt[1 + a, j] += ebuf[j] * xa
        ysum[a] = acc
    q = zero
    if ito:
        _score_tile(xi, x, j0, j1, sbuf)
        for j in range(length):
            eg = ebuf[j] * sbuf[j] * sbuf[j]
            q += eg
            zt[1 + d, j] += eg
    return ell, q


@njit(cache=True)
def _item_keys(bd, x, r1, out):
    """``out[a, j] = sum_b bd[a, b] x[b, j]`` for ``j < r1``: the keys of one head, in the order and the
    plain IEEE arithmetic of :func:`_keys` (compiled apart, without fast-math: the same bits)."""
    d = x.shape[0]
    for a in range(d):
        for j in range(r1):
            out[a, j] = bd[a, 0] * x[0, j]
        for b in range(1, d):
            for j in range(r1):
                out[a, j] += bd[a, b] * x[b, j]


@njit(parallel=True, fastmath=_LOOP_FLAGS, cache=True)
def _half_pass(xt, bd, shift, items, chunk_of, nchunk, ito, zero, rsum, ysum, qsum, cbuf):
    """Symmetric half pass: every unordered pair once (see the comment above).

    ``bd[p, h] = beta D_h`` (the keys ``beta D_h x_j`` of the item's columns are computed by the item),
    ``shift[p, h]`` is the head's common shift. The item's column contributions (rows
    ``sum_i e_ij``, ``sum_i e_ij x_i`` (d rows) and ``sum_i e_ij <x_i, x_j>^2`` over its rows ``i > j``)
    gather in a buffer of its own; with one chunk per head (``nchunk == 1``) the item owns every row of
    its head and adds them to the outputs itself, else it leaves them in ``cbuf[p, h, c]``.
    """
    d = xt.shape[1]
    for it in prange(items.shape[0]):
        p, h, r0, r1 = items[it, 0], items[it, 1], items[it, 2], items[it, 3]
        c = chunk_of[it]
        x = xt[p]
        mi = shift[p, h]
        k = _aligned_zeros(d, r1, xt.dtype)
        _item_keys(bd[p, h], x, r1, k)
        cb = _aligned_zeros(d + 2, r1, np.float64)
        zt = _aligned_zeros(d + 2, _TILE, xt.dtype)
        work = _aligned_zeros(2, _TILE, xt.dtype)
        sbuf = work[0]
        ebuf = work[1]
        yb = np.empty(d, dtype=xt.dtype)
        xi = np.empty(d, dtype=xt.dtype)
        # the diagonal pairs (i, i), once each
        for i in range(r0, r1):
            s = zero
            r2 = zero
            for a in range(d):
                s += x[a, i] * k[a, i]
                r2 += x[a, i] * x[a, i]
            e = _exp_shifted(s - mi)
            rsum[p, h, i] += e
            for a in range(d):
                ysum[p, h, i, a] += e * x[a, i]
            if ito:
                qsum[p, h, i] += e * r2 * r2
        for j0 in range(0, r1, _TILE):
            j1 = min(j0 + _TILE, r1)
            pending = 0
            for i in range(max(r0, j0 + 1), r1):
                jend = min(j1, i)
                if d == 3:
                    ell, y0, y1, y2, q = _half_tile_d3(
                        x[0, i], x[1, i], x[2, i], mi, k, x, zt, ebuf, j0, jend, ito, zero
                    )
                    ysum[p, h, i, 0] += y0
                    ysum[p, h, i, 1] += y1
                    ysum[p, h, i, 2] += y2
                else:
                    for a in range(d):
                        xi[a] = x[a, i]
                    ell, q = _half_tile_generic(xi, mi, k, x, zt, j0, jend, ito, sbuf, ebuf, yb, zero)
                    for a in range(d):
                        ysum[p, h, i, a] += yb[a]
                rsum[p, h, i] += ell
                if ito:
                    qsum[p, h, i] += q
                pending += 1
                if pending == _ROW_BLOCK or i == r1 - 1:
                    for a in range(d + 2):
                        for j in range(j1 - j0):
                            cb[a, j0 + j] += zt[a, j]
                            zt[a, j] = zero
                    pending = 0
        if nchunk == 1:
            for j in range(r1):
                rsum[p, h, j] += cb[0, j]
            for a in range(d):
                for j in range(r1):
                    ysum[p, h, j, a] += cb[1 + a, j]
            if ito:
                for j in range(r1):
                    qsum[p, h, j] += cb[d + 1, j]
        else:
            cbuf[p, h, c, :, :r1] = cb


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
            _item_keys(bd[p, h], xt[p], n, kt[p, h])
    return kt


@njit(parallel=True, cache=True)
def _transpose_tokens(x, xt):
    """``xt[p, a, j] = x[p, j, a]`` (the kernel's structure-of-arrays layout)."""
    P, n, d = x.shape
    for p in prange(P):
        for a in range(d):
            for j in range(n):
                xt[p, a, j] = x[p, j, a]


@njit(parallel=True, cache=True)
def _fill_rows(shift, row_shift):
    """``row_shift[p, h, i] = shift[p, h]`` for every row (float64)."""
    P, H, n = row_shift.shape
    for item in prange(P * H):
        p = item // H
        h = item - p * H
        for i in range(n):
            row_shift[p, h, i] = shift[p, h]


@njit(parallel=True, cache=True)
def score_bounds(x, D, beta):
    """``c_h = beta |D_h|_F max_j |x_j|^2`` per (p, h), in float64 (sums of squares in index order)."""
    P, n, d = x.shape
    H = D.shape[1]
    out = np.empty((P, H))
    for p in prange(P):
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
def pair_sums_core(
    x, D, beta, bound_range, causal, ledger, ito, general, exact_max, full,
    items_half, chunk_half, nchunk_half, items_ord, chunk_ord, nchunk_ord,
):  # fmt: skip
    """The whole kernel for one evaluation: layouts, the choice of pass, the passes, the column sums.

    Returns ``(pass, colsums, row_shift, row_sum, row_x, row_q, col_shift, col_x)`` (float64 sums;
    ``row_q`` is (1, 1, 1) without the Ito sums; without ``colsums`` (``U`` symmetric or no ledger)
    ``col_shift`` and ``col_x`` are placeholders of shapes (1, 1) and (1, 1, 1, 1)). ``pass`` indexes
    :data:`PASSES`. Compiled apart from :func:`pair_sums` so that a compiled
    caller (the multi-step loop of :mod:`attnflow.simulation.fused`) runs exactly the same code.
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
    # U^h symmetric (non-causal, D_h = D_h^T exactly): the column sums are the row sums
    symmetric = not causal and not general
    if symmetric:
        for p in range(P):
            for h in range(H):
                for a in range(d):
                    for b in range(a):
                        if D[p, h, a, b] != D[p, h, b, a]:
                            symmetric = False
    colsums = ledger and not symmetric
    # |s_ij| <= c_h; if every score range 2 c_h is small (always at the paper's beta) c_h shifts every row
    bound = score_bounds(x, D, beta)
    exact = exact_max or 2.0 * bound.max() > bound_range
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
        _half_pass(xt, bd, shift, items_half, chunk_half, nchunk_half, want_q, zero, rsum, ysum, qsum, cbuf)
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
    kt = _keys(xt, bd)
    row_max = np.empty((P, H, n), dtype=x.dtype)
    if exact:
        _row_max_pass(xt, kt, items_ord, causal, row_max)
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
    _accumulate_pass(
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


def work_items(npaths, nheads, n, causal):
    """Split each head into row chunks so that there are >= 4 items per thread.

    Causal chunks have equal triangle areas (boundaries at ``n sqrt(k / m)``).
    """
    jobs = npaths * nheads
    target = 4 * numba.get_num_threads()
    nchunk = max(1, min(-(-target // jobs), n // _MIN_CHUNK_ROWS))
    frac = np.arange(nchunk + 1) / nchunk
    bounds = np.round(n * (np.sqrt(frac) if causal else frac)).astype(np.int64)
    bounds = np.unique(bounds)
    nchunk = bounds.size - 1
    p, h, c = np.meshgrid(np.arange(npaths), np.arange(nheads), np.arange(nchunk), indexing="ij")
    p, h, c = p.ravel(), h.ravel(), c.ravel()
    items = np.stack([p, h, bounds[c], bounds[c + 1]], axis=1).astype(np.int64)
    return np.ascontiguousarray(items), c.astype(np.int64), nchunk


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
    code, colsums, row_shift, rsum, ysum, qsum, col_shift, col_x = pair_sums_core(
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
    return _BOUND_RANGE_32 if np.dtype(dtype) == np.float32 else _BOUND_RANGE_64
