"""The compiled passes of the fused CPU kernel over token pairs (see :mod:`attnflow.dynamics.numba_kernel`,
whose docstring describes the numerical scheme): the vectorised shifted exponential, the score and sum
tiles, the exact-row-maximum pass, the pass over ordered pairs and the symmetric half pass.
:func:`attnflow.dynamics.numba_kernel.pair_sums_core` chooses among them and calls them.

Bits across processes. A process that compiles these passes and one that loads them from numba's cache do
not always run the same vectorised code: with the Ito loop of the d = 3 half tile adding into the column
buffer and reducing in one loop, their Ito sums differed in the last bits (float32 and float64, rows of 32
pairs and more). That loop is now split (its store, then its sum), which makes the d = 3 sums agree
(``tests/test_perf_determinism.py``) and the pass a little faster. The any-d tiles still show it in their
row sums (d = 5, float32), and splitting the d = 3 exponential loop the same way made its row sums differ
instead: the cause inside numba's compile-versus-cache path is not known (docs/performance.md section 9).
"""

from __future__ import annotations

import math
from types import FunctionType

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic, overload

from .._numba_cache import refresh as _refresh_numba_cache

_refresh_numba_cache()  # drop numba's cached code compiled from since-edited sources (attnflow._numba_cache)

__all__ = [
    "BOUND_RANGE_32",
    "BOUND_RANGE_64",
    "MIN_CHUNK_ROWS",
    "LOOP_FLAGS",
    "exp_shifted",
    "accumulate_pass",
    "accumulate_pass_serial",
    "half_pass",
    "half_pass_serial",
    "item_keys",
    "row_max_pass",
    "row_max_pass_serial",
    "serial_twin",
    "score_tile",
    "tile_generic",
    "tile_max",
    "TILE",
]

LOOP_FLAGS = {"nsz", "arcp", "contract", "afn", "reassoc"}
_EXP_FLAGS = {"nsz", "arcp", "contract", "afn"}
_TILE = 512  # columns per tile: 9 arrays of 512 floats stay in L1/L2
_ROW_BLOCK = 64  # rows accumulated in working precision before promoting column sums
MIN_CHUNK_ROWS = 128  # rows per work item when a head is split across threads

_F32 = np.float32
_L2E_32 = _F32(1.4426950408889634)
_LN2_HI_32 = _F32(0.693145751953125)  # 11 significant bits: k * hi is exact
_LN2_LO_32 = _F32(1.428606765330187e-06)
_HALF_32 = _F32(0.5)
_FLUSH_32 = _F32(-87.0)
BOUND_RANGE_32 = 40.0  # largest score range shifted by a bound: exp(-40) is far from underflow
BOUND_RANGE_64 = 600.0  # 2**k stays a normal number above this
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


def exp_shifted(t):
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


@overload(exp_shifted, jit_options={"fastmath": _EXP_FLAGS})
def _exp_shifted_overload(t):
    if t == types.float32:
        return _exp_shifted_f32
    if t == types.float64:
        return _exp_shifted_f64
    return None


# --------------------------------------------------------------------------- serial twins
# Below PARALLEL_MIN_PAIRS the kernel runs each pass in one thread (attnflow.dynamics.numba_kernel): the
# serial pass is the parallel pass's own Python function compiled a second time without ``parallel`` (there
# ``prange`` is ``range``), so the two loops have one source and no copy to hold equal.


def serial_twin(parallel_pass, name: str):
    """The one-thread twin of a ``njit(parallel=True)`` pass: its function compiled without ``parallel``.

    Parameters
    ----------
    parallel_pass : numba Dispatcher
        A pass compiled with ``parallel=True`` (its ``prange`` loop becomes ``range`` here: the same items
        in the same order, hence the same sums; ``tests/test_numba_serial.py``).
    name : str
        The twin's name in its module (its ``__name__`` and ``__qualname__``).

    Returns
    -------
    numba Dispatcher
        Compiled with the pass's options less ``parallel``, cached on disk.

    Notes
    -----
    numba's on-disk cache names a function's index file after its module, ``__qualname__`` and first line,
    and keys the entries inside on the signature, the machine and the bytecode, not on ``parallel``: two
    dispatchers of one Python function would share one index and each would load the other's machine code
    from a warm cache. The twin is therefore a copy of the function object (the same code object, globals
    and closure) under its own qualified name, which gives it an index file of its own
    (``tests/test_numba_serial.py`` loads both from a warm cache in a fresh process and checks which ran).
    """
    py_func = parallel_pass.py_func
    options = dict(parallel_pass.targetoptions)
    options.pop("nopython", None)  # njit's own (it warns when given)
    if options.pop("parallel", None) is not True:
        raise ValueError(
            f"serial_twin makes the serial twin of a parallel pass: {py_func.__qualname__} is not compiled "
            "with parallel=True; compile the pass with njit(parallel=True)"
        )
    twin = FunctionType(
        py_func.__code__, py_func.__globals__, name, py_func.__defaults__, py_func.__closure__
    )
    twin.__qualname__ = name
    twin.__module__ = py_func.__module__
    twin.__kwdefaults__ = py_func.__kwdefaults__
    twin.__doc__ = f":func:`{py_func.__name__}` in one thread (its serial twin: the same items in order)."
    return njit(cache=True, **options)(twin)


# --------------------------------------------------------------------------- pass 1
# The helpers are inlined at numba-IR level: a call (or an array view) per row would cost
# reference-count updates that are as expensive as the ~300 pairs of one row at paper size.


@njit(fastmath=LOOP_FLAGS, cache=True, inline="always")
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


@njit(fastmath=LOOP_FLAGS, cache=True, inline="always")
def _score_tile_d3(xi0, xi1, xi2, k, j0, j1, buf):
    """``d = 3`` scores of one row against columns ``j0 <= j < j1`` (0-based 1-d views, see
    :func:`_half_tile_d3`)."""
    k0 = k[0, j0:j1]
    k1 = k[1, j0:j1]
    k2 = k[2, j0:j1]
    for jj in range(j1 - j0):
        buf[jj] = xi0 * k0[jj] + xi1 * k1[jj] + xi2 * k2[jj]


@njit(fastmath=LOOP_FLAGS, cache=True, inline="always")
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


@njit(parallel=True, fastmath=LOOP_FLAGS, cache=True)
def row_max_pass(xt, kt, items, causal, row_max):
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


row_max_pass_serial = serial_twin(row_max_pass, "row_max_pass_serial")

#: the row functions other compiled code calls (the cloud ensemble, ``numba_ensemble.KERNEL_ROWS``): public
#: names of the very dispatchers above and below, one definition each
TILE = _TILE
score_tile = _score_tile
tile_max = _tile_max


# --------------------------------------------------------------------------- pass 2


@njit(fastmath=LOOP_FLAGS, cache=True, inline="always")
def _row_d3(xi0, xi1, xi2, mi, k0, k1, k2, x0, x1, x2, ebuf, length, zero):
    """Row ``i``'s ``length`` pairs in one SIMD loop (``d = 3``, 1-d views of the tile from its first
    column): the shifted exponentials kept in ``ebuf`` and the row sums, returned as ``(ell, y0, y1, y2)``;
    the one row loop of :func:`_tile_d3` and :func:`_half_tile_d3`."""
    ell = zero
    y0 = zero
    y1 = zero
    y2 = zero
    for jj in range(length):
        e = exp_shifted(xi0 * k0[jj] + xi1 * k1[jj] + xi2 * k2[jj] - mi)
        ebuf[jj] = e
        ell += e
        y0 += e * x0[jj]
        y1 += e * x1[jj]
        y2 += e * x2[jj]
    return ell, y0, y1, y2


@njit(fastmath=LOOP_FLAGS, cache=True, inline="always")
def _row_exps(xi, mi, k, j0, j1, sbuf, ebuf, zero):
    """Any ``d``: row ``i``'s scores against columns ``j0:j1`` of ``k`` (in ``sbuf``), their shifted
    exponentials (in ``ebuf``) and the returned sum ``ell``; the row loop of :func:`_tile_generic` and
    :func:`_half_tile_generic`."""
    length = j1 - j0
    _score_tile(xi, k, j0, j1, sbuf)
    ell = zero
    for j in range(length):
        e = exp_shifted(sbuf[j] - mi)
        ebuf[j] = e
        ell += e
    return ell


@njit(fastmath=LOOP_FLAGS, cache=True, inline="always")
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
    ell, y0, y1, y2 = _row_d3(xi0, xi1, xi2, mi, k0, k1, k2, x0, x1, x2, ebuf, length, zero)
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


@njit(fastmath=LOOP_FLAGS, cache=True, inline="always")
def _tile_generic(xi, mi, wi, k, x, zt, j0, j1, ito, colsums, sbuf, ebuf, ysum, zero):
    """Any-``d`` tile through small buffers; returns ``(ell, q)`` and fills ``ysum``."""
    length = j1 - j0
    ell = _row_exps(xi, mi, k, j0, j1, sbuf, ebuf, zero)
    for a in range(xi.shape[0]):
        xa = x[a, j0:j1]  # a 1-d view from the tile's first column: the loop vectorises (see _half_tile_d3)
        acc = zero
        for j in range(length):
            acc += ebuf[j] * xa[j]
        ysum[a] = acc
    q = zero
    if ito:
        _score_tile(xi, x, j0, j1, sbuf)
        for j in range(length):
            q += ebuf[j] * sbuf[j] * sbuf[j]
    if colsums:
        for a in range(xi.shape[0]):
            ca = wi * xi[a]
            za = zt[a]
            for j in range(length):
                za[j] += ebuf[j] * ca
    return ell, q


tile_generic = _tile_generic


@njit(cache=True, inline="always")
def _aligned_zeros(rows, cols, dtype):
    """A zeroed (rows, cols) C array whose data starts on a 64-byte boundary.

    The vectorised loops' results must not depend on where the allocator puts a buffer (a run repeats
    bit for bit); an aligned start makes the machine code's path the same on every call.
    """
    raw = np.zeros(rows * cols + 16, dtype=dtype)  # 16 elements cover 64 bytes of float32 or more
    off = ((64 - raw.ctypes.data % 64) % 64) // raw.itemsize
    return raw[off : off + rows * cols].reshape((rows, cols))


@njit(parallel=True, fastmath=LOOP_FLAGS, cache=True)
def accumulate_pass(
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
        width = min(_TILE, n)  # a tile never spans more columns than there are
        zt = _aligned_zeros(d, width, xt.dtype)
        work = _aligned_zeros(2, width, xt.dtype)
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


accumulate_pass_serial = serial_twin(accumulate_pass, "accumulate_pass_serial")


# --------------------------------------------------------------------------- symmetric half pass
# U^h symmetric and one shift c_h per head: e_ij = exp(s_ij - c_h) = e_ji. Each unordered pair {i, j},
# j < i, is computed once and added to row i (weights x_j) and to row j (weights x_i); the diagonal once.
# A work item owns the rows [r0, r1) of one head and the pairs j < i of those rows (a lower-triangle strip,
# equal areas); its row sums go straight to the outputs, its column contributions (rows j of other items)
# to its own buffer ``cbuf[p, h, chunk]``, summed afterwards: no two threads write the same row.

_HALF_ROWS = 5  # cbuf rows per column: e, e x_i (3 for d = 3; d in general), e <x_i, x_j>^2


@njit(fastmath=LOOP_FLAGS, cache=True, inline="always")
def _half_tile_d3(xi0, xi1, xi2, mi, k0, k1, k2, x0, x1, x2, z0, z1, z2, z3, z4, ebuf, length, ito, zero):
    """Pairs ``j0 <= j < j0 + length`` (all ``j < i``) of row ``i``: returns the row part and adds the
    column part to the tile's column rows ``z0..z4``; the Ito sums in a second loop over ``ebuf`` (as in
    :func:`_tile_d3`).

    ``k0..k2``, ``x0..x2`` and ``z0..z4`` are 1-d views of the tile starting at its first column, made once
    per tile by the caller (views made per row cost as much as the pairs of a short row), and every loop
    runs over ``range(length)``: an index that provably starts at 0 lets LLVM drop numba's negative-index
    wrap-around and vectorise (with ``range(j0, j1)`` the exponential loop compiled to scalar code;
    benchmarks/asm_report.py).
    """
    ell, y0, y1, y2 = _row_d3(xi0, xi1, xi2, mi, k0, k1, k2, x0, x1, x2, ebuf, length, zero)
    for jj in range(length):
        e = ebuf[jj]
        z0[jj] += e
        z1[jj] += e * xi0
        z2[jj] += e * xi1
        z3[jj] += e * xi2
    q = zero
    if ito:
        # the Ito terms stored, then summed in a loop of its own: a loop that both adds into z4 and reduces
        # gave, in a process that compiled the kernel, other bits than the code loaded from numba's cache
        # (the vectoriser's runtime overlap checks take the scalar loop for some heap layouts)
        for jj in range(length):
            g = xi0 * x0[jj] + xi1 * x1[jj] + xi2 * x2[jj]
            eg = ebuf[jj] * g * g
            ebuf[jj] = eg
            z4[jj] += eg
        for jj in range(length):
            q += ebuf[jj]
    return ell, y0, y1, y2, q


@njit(fastmath=LOOP_FLAGS, cache=True, inline="always")
def _half_tile_generic(xi, mi, k, x, zt, j0, j1, ito, sbuf, ebuf, ysum, zero):
    """Any-``d`` version of :func:`_half_tile_d3` through small buffers; returns ``(ell, q)``."""
    d = xi.shape[0]
    length = j1 - j0
    ell = _row_exps(xi, mi, k, j0, j1, sbuf, ebuf, zero)
    z0 = zt[0]
    for j in range(length):
        z0[j] += ebuf[j]
    for a in range(d):
        acc = zero
        xia = xi[a]
        xa = x[a, j0:j1]  # 1-d views from the tile's first column: the loops vectorise (see _half_tile_d3)
        za = zt[1 + a]
        for j in range(length):
            acc += ebuf[j] * xa[j]
        for j in range(length):
            za[j] += ebuf[j] * xia
        ysum[a] = acc
    q = zero
    if ito:
        _score_tile(xi, x, j0, j1, sbuf)
        zq = zt[1 + d]
        for j in range(length):
            eg = ebuf[j] * sbuf[j] * sbuf[j]
            sbuf[j] = eg
            zq[j] += eg
        for j in range(length):
            q += sbuf[j]
    return ell, q


@njit(cache=True)
def item_keys(bd, x, r1, out):
    """``out[a, j] = sum_b bd[a, b] x[b, j]`` for ``j < r1``: the keys of one head, in the order and the
    plain IEEE arithmetic of :func:`_keys` (compiled apart, without fast-math: the same bits)."""
    d = x.shape[0]
    for a in range(d):
        for j in range(r1):
            out[a, j] = bd[a, 0] * x[0, j]
        for b in range(1, d):
            for j in range(r1):
                out[a, j] += bd[a, b] * x[b, j]


@njit(parallel=True, fastmath=LOOP_FLAGS, cache=True)
def half_pass(xt, bd, shift, items, chunk_of, nchunk, ito, zero, rsum, ysum, qsum, cbuf):
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
        item_keys(bd[p, h], x, r1, k)
        cb = _aligned_zeros(d + 2, r1, np.float64)
        width = min(_TILE, r1)  # the item's columns j < r1: a tile never spans more
        zt = _aligned_zeros(d + 2, width, xt.dtype)
        work = _aligned_zeros(2, width, xt.dtype)
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
            e = exp_shifted(s - mi)
            rsum[p, h, i] += e
            for a in range(d):
                ysum[p, h, i, a] += e * x[a, i]
            if ito:
                qsum[p, h, i] += e * r2 * r2
        for j0 in range(0, r1, _TILE):
            j1 = min(j0 + _TILE, r1)
            pending = 0
            # the tile's 1-d views, once per tile (d = 3)
            k0, k1, k2 = k[0, j0:j1], k[min(1, d - 1), j0:j1], k[min(2, d - 1), j0:j1]
            x0, x1, x2 = x[0, j0:j1], x[min(1, d - 1), j0:j1], x[min(2, d - 1), j0:j1]
            z0, z1, z2, z3, z4 = zt[0], zt[1], zt[2], zt[min(3, d + 1)], zt[min(4, d + 1)]
            for i in range(max(r0, j0 + 1), r1):
                jend = min(j1, i)
                if d == 3:
                    ell, y0, y1, y2, q = _half_tile_d3(
                        x[0, i], x[1, i], x[2, i], mi, k0, k1, k2, x0, x1, x2, z0, z1, z2, z3, z4, ebuf,
                        jend - j0, ito, zero,
                    )  # fmt: skip
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
            # element by element: a slice assignment compiles numba's shape-mismatch message (string
            # formatting, ~8 % of the serial twin's compile)
            for a in range(d + 2):
                for j in range(r1):
                    cbuf[p, h, c, a, j] = cb[a, j]


half_pass_serial = serial_twin(half_pass, "half_pass_serial")
