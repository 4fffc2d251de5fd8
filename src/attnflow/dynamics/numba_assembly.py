r"""Compiled assembly of the numba backend: the formulas of :mod:`attnflow.dynamics.assembly`, in numba.

The profiler showed the PyTorch assembly of the fused kernel's sums taking as long as the kernel itself at
the paper's size (n = 300, H = 100, 20 paths, float32: 63 ms against 74 ms per evaluation on an idle core
pair; its einsums over (P, H, n, d) run as badly shaped batched products). This module computes the same
:class:`~attnflow.dynamics.assembly.FieldEval` from the same
:class:`~attnflow.dynamics.pairsums.PairSums` arrays in two compiled passes. The formulas are those of
:func:`attnflow.dynamics.assembly.assemble` (their one home, with the equation numbers of
arXiv 2605.18870 and NOTES.md §1, §3): the passes below compile the home's formula functions (the row mass,
the Ito row factor, the path sums of E, G^2 and Ghat^2, and the sphere's tangent projection; :data:`FORMULAS`)
and loop over them; ``tests/test_numba_assembly.py`` checks every output against ``assemble``
(float64: 1e-13 relative).

* per token (p, i), in parallel: the softmax means ``row_x / row_sum``, the velocity
  :math:`v_i = P(x_i)\frac1H\sum_h V_h\,\mathrm{mean}^h_i`, the row log-sum-exps, the harmonic-mean mobility
  :math:`b(x_i)` (eq. (36), in log space), :math:`b|v_i|^2`, the gradient
  :math:`nP\nabla_{x_i}\mathcal E` and :math:`\langle v_i, nP\nabla_{x_i}\mathcal E\rangle`;
* per head (p, h), in parallel: the head mass :math:`\sum_{ij}U_{ij}/(2Hn^2)`, the drift moment
  :math:`C_h` and the Ito factor of the symmetric noise;
* per path, sequentially: E, G^2 and Ghat^2 (sums over heads and tokens in index order).

Every sum runs in a fixed order whatever the thread count, without fast-math, in float64: two runs give
the same bits (the multi-step loop of :mod:`attnflow.simulation.fused` relies on it).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit, prange

from .._numba_cache import refresh as _refresh_numba_cache
from ..geometry import Euclidean, Geometry, Sphere
from ..geometry.sphere import tangent_component
from .assembly import FieldEval, harmonic_mobility, ito_row, pair_norm, path_sums, row_mass, row_moment
from .numba_kernel import parallel_passes
from .numba_passes import serial_twin

_refresh_numba_cache()  # drop numba's cached code compiled from since-edited sources (attnflow._numba_cache)

__all__ = ["FORMULAS", "assemble_arrays", "assemble_core", "assemble_numba"]

# The ledger's formulas are compiled from their one definition in their home (plain arithmetic that runs on
# tensors in attnflow.dynamics.assembly.assemble and on numbers here); the passes below only loop over them.
# ``tests/test_fused_loop.py`` checks that these are the very function objects (``.py_func``) of the homes.
# numba's on-disk cache (cache=True) sees only edits to the file of the cached function, not to a home in
# another file: attnflow._numba_cache (called above) drops the cache when any such source changes.
_row_mass = njit(row_mass)  # exp(lse) = e^M row_sum (Cor. 4.8, eq. (20))
_ito_row = njit(ito_row)  # e^M (row_sum + row_q) (eq. (147))
_path_sums = njit(path_sums)  # E, G^2, Ghat^2 from their sums (eq. (20), Lemma 4.12)
_row_moment = njit(row_moment)  # y^h_i = e^M row_x: the rows of C_h and of the gradient (eq. (147), (20))
_harmonic_mobility = njit(harmonic_mobility)  # b(x_i) = H / (n sum_h 1/exp(lse_h)) (eq. (36))
_tangent_component = njit(tangent_component)  # v - <x, v> x (eq. (10))

#: the shared formulas: name in this module -> the home function it compiles
FORMULAS = {
    "_row_mass": row_mass,
    "_ito_row": ito_row,
    "_path_sums": path_sums,
    "_row_moment": row_moment,
    "_harmonic_mobility": harmonic_mobility,
    "_tangent_component": tangent_component,
}

_BLOCK = 64  # tokens per parallel work item


@njit(parallel=True, cache=True)
def _token_pass(
    x, D, V, row_shift, e_shift, row_sum, row_x, col_shift, col_x, has_col, sphere, ledger, norm,
    vel, raw, grad, g2_tok, gh2_tok,
):  # fmt: skip
    """Velocity and the per-token ledger terms of every (p, i) (see the module docstring).

    ``e_shift = exp(row_shift)`` comes from :func:`_shift_pass` (one libm call per (p, h, i) here cost more
    than all the rest of the assembly). ``x``, ``D``, ``V`` may be float32: every product promotes them to
    float64 exactly.
    """
    P, n, d = x.shape
    H = D.shape[1]
    log_h = math.log(H)
    scale = norm / n
    nblk = (n + _BLOCK - 1) // _BLOCK
    for item in prange(P * nblk):
        p = item // nblk
        i0 = (item - p * nblk) * _BLOCK
        L = min(_BLOCK, n - i0)
        # heads outside, tokens inside: each head's sums of the block are read as one contiguous run
        rv = np.zeros((d, _BLOCK))
        g = np.zeros((d, _BLOCK))
        inv_sum = np.zeros(_BLOCK)
        bad = np.zeros(_BLOCK, dtype=np.bool_)
        buf = np.empty((6, d))
        xi, mean, v, y, z, w = buf[0], buf[1], buf[2], buf[3], buf[4], buf[5]
        for h in range(H):
            if d == 3:
                _heads_d3(p, h, i0, L, D, V, e_shift, row_sum, row_x, col_shift, col_x, has_col, ledger,
                          rv, g, inv_sum, bad)  # fmt: skip
                continue
            for ii in range(L):
                i = i0 + ii
                rs = row_sum[p, h, i]
                inv = 1.0 / rs
                for b in range(d):
                    mean[b] = row_x[p, h, i, b] * inv
                for a in range(d):
                    acc = 0.0
                    for b in range(d):
                        acc += V[p, h, a, b] * mean[b]
                    rv[a, ii] += acc
                if not ledger:
                    continue
                es = e_shift[p, h, i]
                mass = _row_mass(es, rs)  # exp(lse_h) = n m_h(x_i)
                if 1e-290 < mass < 1e290:
                    inv_sum[ii] += 1.0 / mass
                else:
                    bad[ii] = True
                for b in range(d):
                    y[b] = _row_moment(es, row_x[p, h, i, b])
                if has_col:
                    ec = math.exp(col_shift[p, h])
                    for b in range(d):
                        z[b] = ec * col_x[p, h, i, b]
                else:
                    for b in range(d):
                        z[b] = y[b]
                for a in range(d):
                    acc = 0.0
                    for b in range(d):
                        acc += D[p, h, a, b] * y[b] + D[p, h, b, a] * z[b]
                    g[a, ii] += acc
        for ii in range(L):
            i = i0 + ii
            for a in range(d):
                xi[a] = x[p, i, a]
                mean[a] = rv[a, ii] / H
                raw[p, i, a] = mean[a]
            _tangent(sphere, xi, mean, v)
            vv = 0.0
            for a in range(d):
                vel[p, i, a] = v[a]
                vv += v[a] * v[a]
            if not ledger:
                continue
            # b(x_i) = ((1/H) sum_h 1/m_h)^{-1}, m_h = exp(lse_h)/n (eq. (36)): directly while every row mass
            # exp(lse_h) lies well inside float64, else in log space, exp(-(logsumexp_h(-lse) - log H))/n
            if not bad[ii]:
                b_i = _harmonic_mobility(inv_sum[ii], H, n)
            else:  # the same formula in log space: a row mass outside float64's range
                m = -(row_shift[p, 0, i] + math.log(row_sum[p, 0, i]))
                for h in range(1, H):
                    m = max(m, -(row_shift[p, h, i] + math.log(row_sum[p, h, i])))
                acc = 0.0
                for h in range(H):
                    acc += math.exp(-(row_shift[p, h, i] + math.log(row_sum[p, h, i])) - m)
                b_i = math.exp(-(m + math.log(acc) - log_h)) / n
            g2_tok[p, i] = b_i * vv
            for a in range(d):
                y[a] = g[a, ii] / scale
            _tangent(sphere, xi, y, w)
            vg = 0.0
            for a in range(d):
                grad[p, i, a] = w[a]
                vg += v[a] * w[a]
            gh2_tok[p, i] = vg


_token_pass_serial = serial_twin(_token_pass, "_token_pass_serial")  # one source, one thread


@njit(cache=True, inline="always")
def _heads_d3(
    p, h, i0, L, D, V, e_shift, row_sum, row_x, col_shift, col_x, has_col, ledger, rv, g, inv_sum, bad
):
    """Head h's terms of the tokens i0..i0+L-1 of :func:`_token_pass` for d = 3, in scalars (the same
    operations in the same order as the any-d loop)."""
    v00, v01, v02 = V[p, h, 0, 0], V[p, h, 0, 1], V[p, h, 0, 2]
    v10, v11, v12 = V[p, h, 1, 0], V[p, h, 1, 1], V[p, h, 1, 2]
    v20, v21, v22 = V[p, h, 2, 0], V[p, h, 2, 1], V[p, h, 2, 2]
    d00, d01, d02 = D[p, h, 0, 0], D[p, h, 0, 1], D[p, h, 0, 2]
    d10, d11, d12 = D[p, h, 1, 0], D[p, h, 1, 1], D[p, h, 1, 2]
    d20, d21, d22 = D[p, h, 2, 0], D[p, h, 2, 1], D[p, h, 2, 2]
    ec = math.exp(col_shift[p, h]) if has_col else 1.0
    for ii in range(L):
        i = i0 + ii
        rs = row_sum[p, h, i]
        inv = 1.0 / rs
        m0 = row_x[p, h, i, 0] * inv
        m1 = row_x[p, h, i, 1] * inv
        m2 = row_x[p, h, i, 2] * inv
        rv[0, ii] += v00 * m0 + v01 * m1 + v02 * m2
        rv[1, ii] += v10 * m0 + v11 * m1 + v12 * m2
        rv[2, ii] += v20 * m0 + v21 * m1 + v22 * m2
        if ledger:
            es = e_shift[p, h, i]
            mass = _row_mass(es, rs)
            if 1e-290 < mass < 1e290:
                inv_sum[ii] += 1.0 / mass
            else:
                bad[ii] = True
            y0 = _row_moment(es, row_x[p, h, i, 0])
            y1 = _row_moment(es, row_x[p, h, i, 1])
            y2 = _row_moment(es, row_x[p, h, i, 2])
            if has_col:
                z0 = ec * col_x[p, h, i, 0]
                z1 = ec * col_x[p, h, i, 1]
                z2 = ec * col_x[p, h, i, 2]
            else:
                z0, z1, z2 = y0, y1, y2
            g[0, ii] += (d00 * y0 + d00 * z0) + (d01 * y1 + d10 * z1) + (d02 * y2 + d20 * z2)
            g[1, ii] += (d10 * y0 + d01 * z0) + (d11 * y1 + d11 * z1) + (d12 * y2 + d21 * z2)
            g[2, ii] += (d20 * y0 + d02 * z0) + (d21 * y1 + d12 * z1) + (d22 * y2 + d22 * z2)


@njit(cache=True, inline="always")
def _tangent(sphere, xi, w, out):
    """``out = w - <xi, w> xi`` on the sphere (P^perp, eq. (10)), ``out = w`` in flat space."""
    d = xi.shape[0]
    if sphere:
        dot = 0.0
        for a in range(d):
            dot += xi[a] * w[a]
        for a in range(d):
            out[a] = _tangent_component(w[a], dot, xi[a])
    else:
        for a in range(d):
            out[a] = w[a]


@njit(parallel=True, cache=True)
def _head_pass(x, e_shift, row_sum, row_x, row_q, has_q, norm, head_mass, ito, C):
    """Head mass, Ito factor and drift moment C_h of every (p, h)."""
    P, n, d = x.shape
    H = row_sum.shape[1]
    for item in prange(P * H):
        p = item // H
        h = item - p * H
        mass = 0.0
        q = 0.0
        c = np.zeros((d, d))
        for i in range(n):
            es = e_shift[p, h, i]
            mass += _row_mass(es, row_sum[p, h, i])
            if has_q:
                q += _ito_row(es, row_sum[p, h, i], row_q[p, h, i])
            for a in range(d):
                xa = x[p, i, a]
                for b in range(d):
                    c[a, b] += xa * _row_moment(es, row_x[p, h, i, b])  # C_h (eq. (147))
        head_mass[p, h] = mass / norm
        ito[p, h] = q / norm
        for a in range(d):
            for b in range(d):
                C[p, h, a, b] = c[a, b] / norm


_head_pass_serial = serial_twin(_head_pass, "_head_pass_serial")  # one source, one thread


@njit(cache=True)
def _shift_pass(row_shift, e_shift):
    """``e_shift = exp(row_shift)``, one exponential per run of equal shifts along a row of heads (the
    bound shift is the same for every row of a head; serial: one exponential per head and a copy)."""
    P, H, n = row_shift.shape
    for item in range(P * H):
        p = item // H
        h = item - p * H
        prev = row_shift[p, h, 0]
        e = math.exp(prev)
        for i in range(n):
            r = row_shift[p, h, i]
            if r != prev:
                e = math.exp(r)
                prev = r
            e_shift[p, h, i] = e


@njit(cache=True)
def assemble_core(
    x, D, V, row_shift, row_sum, row_x, row_q, has_q, col_shift, col_x, has_col, beta, norm, sphere, ledger,
    parallel=True,
):  # fmt: skip
    """The whole compiled assembly (see :func:`assemble_arrays`; ``norm`` is
    :func:`~attnflow.dynamics.assembly.pair_norm`); float64 outputs
    ``(velocity, raw_velocity, grad, energy, G2, Ghat2, head_mass, ito, C)`` (placeholders without the
    ledger). ``parallel=None`` compiles the serial token and head passes (pruned on the None argument, as
    :func:`attnflow.dynamics.numba_kernel.pair_sums_core`; the same bits)."""
    P, n, d = x.shape
    H = D.shape[1]
    e_shift = np.empty_like(row_shift)
    if ledger:
        _shift_pass(row_shift, e_shift)
    vel = np.empty((P, n, d))
    raw_v = np.empty((P, n, d))
    tok = (P, n) if ledger else (1, 1)
    grad = np.empty((P, n, d) if ledger else (1, 1, 1))
    g2_tok = np.empty(tok)
    gh2_tok = np.empty(tok)
    if parallel is None:
        _token_pass_serial(
            x, D, V, row_shift, e_shift, row_sum, row_x, col_shift, col_x, has_col, sphere, ledger, norm,
            vel, raw_v, grad, g2_tok, gh2_tok,
        )  # fmt: skip
    else:
        _token_pass(
            x, D, V, row_shift, e_shift, row_sum, row_x, col_shift, col_x, has_col, sphere, ledger, norm,
            vel, raw_v, grad, g2_tok, gh2_tok,
        )  # fmt: skip
    energy, G2, Ghat2 = np.empty(P), np.empty(P), np.empty(P)
    head_mass, ito, C = np.empty((P, H)), np.empty((P, H)), np.empty((P, H, d, d))
    if ledger:
        if parallel is None:
            _head_pass_serial(x, e_shift, row_sum, row_x, row_q, has_q, norm, head_mass, ito, C)
        else:
            _head_pass(x, e_shift, row_sum, row_x, row_q, has_q, norm, head_mass, ito, C)
        _path_pass(head_mass, g2_tok, gh2_tok, beta, energy, G2, Ghat2)
    return vel, raw_v, grad, energy, G2, Ghat2, head_mass, ito, C


@njit(cache=True)
def _path_pass(head_mass, g2_tok, gh2_tok, beta, energy, G2, Ghat2):
    """E = sum_h head_mass / beta, G^2 and Ghat^2 = means over tokens: the home's path sums
    (:func:`~attnflow.dynamics.assembly.path_sums`) of the sums taken in index order."""
    P, H = head_mass.shape
    n = g2_tok.shape[1]
    for p in range(P):
        e = 0.0
        for h in range(H):
            e += head_mass[p, h]
        a = 0.0
        b = 0.0
        for i in range(n):
            a += g2_tok[p, i]
            b += gh2_tok[p, i]
        energy[p], G2[p], Ghat2[p] = _path_sums(e, a, b, beta, n)


def _f64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


def _core_variant(parallel):
    """:func:`assemble_core` with its passes fixed (``parallel`` None: serial, True: parallel), a constant of
    the closure so that numba prunes the other variant (as
    :func:`attnflow.dynamics.numba_kernel._core_variant`; a plain ``bool`` argument compiled both)."""

    @njit(cache=True)
    def core(x, D, V, row_shift, row_sum, row_x, row_q, has_q, col_shift, col_x, has_col, beta, norm, sphere,
             ledger):  # fmt: skip
        return assemble_core(
            x, D, V, row_shift, row_sum, row_x, row_q, has_q, col_shift, col_x, has_col, beta, norm, sphere,
            ledger, parallel,
        )  # fmt: skip

    return core


#: :func:`assemble_core` per value of :func:`~attnflow.dynamics.numba_kernel.parallel_passes`
_CORE = {None: _core_variant(None), True: _core_variant(True)}


def assemble_arrays(
    sums: dict[str, np.ndarray | None],
    x: np.ndarray,
    D: np.ndarray,
    V: np.ndarray,
    beta: float,
    *,
    sphere: bool,
    ledger: bool = True,
    raw: bool = False,
) -> dict[str, np.ndarray | None]:
    """The assembly of :func:`attnflow.dynamics.assembly.assemble` on numpy arrays, compiled.

    Parameters
    ----------
    sums : dict
        The kernel's output (:func:`attnflow.dynamics.numba_kernel.pair_sums`): ``row_shift``, ``row_sum``,
        ``row_x``, ``row_q`` (or None), ``col_shift`` and ``col_x`` (or None: U symmetric).
    x : ndarray, shape=[P, n, d]
        Tokens in the working precision.
    D, V : ndarray, shape=[P, H, d, d]
        Score and value matrices as used in the sums.
    beta : float
    sphere : bool
        Tangent projection P(x) v = v - <x, v> x (unit-norm geometry) or none (flat).
    ledger, raw : bool
        As in :func:`~attnflow.dynamics.assembly.assemble`.

    Returns
    -------
    dict
        ``velocity`` (working dtype), ``lse`` (working dtype), ``raw_velocity`` (or None) and, with the
        ledger, ``energy``, ``G2``, ``Ghat2``, ``grad``, ``second_moment``, ``head_mass``, ``ito_moment``
        and ``ito_full`` (float64; the Ito factors are None without ``row_q`` or off the sphere).
    """
    dtype = x.dtype
    row_shift, row_sum, row_x = _f64(sums["row_shift"]), _f64(sums["row_sum"]), _f64(sums["row_x"])
    has_col = sums.get("col_x") is not None
    col_shift = _f64(sums["col_shift"]) if has_col else np.zeros((1, 1))
    col_x = _f64(sums["col_x"]) if has_col else np.zeros((1, 1, 1, 1))
    has_q = ledger and sums.get("row_q") is not None
    row_q = _f64(sums["row_q"]) if has_q else np.zeros((1, 1, 1))
    core = _CORE[parallel_passes(x.shape[0], D.shape[1], x.shape[1])]
    vel, raw_v, grad, energy, G2, Ghat2, head_mass, ito, C = core(
        np.ascontiguousarray(x), np.ascontiguousarray(D), np.ascontiguousarray(V), row_shift, row_sum,
        row_x, row_q, has_q, col_shift, col_x, has_col, float(beta), pair_norm(D.shape[1], x.shape[1]),
        bool(sphere), bool(ledger),
    )  # fmt: skip
    out: dict[str, np.ndarray | None] = {
        "velocity": vel.astype(dtype, copy=False),
        "lse": (row_shift + np.log(row_sum)).astype(dtype, copy=False),
        "raw_velocity": raw_v.astype(dtype, copy=False) if raw else None,
    }
    if not ledger:
        return out
    ito_ok = has_q and sphere
    out.update(
        energy=energy,
        G2=G2,
        Ghat2=Ghat2,
        grad=grad,
        second_moment=C,
        head_mass=head_mass,
        ito_moment=ito if ito_ok else None,
        ito_full=head_mass if ito_ok else None,
    )
    return out


def assemble_numba(
    sums: dict[str, np.ndarray | None],
    x: torch.Tensor,
    D: torch.Tensor,
    V: torch.Tensor,
    beta: float,
    geometry: Geometry,
    *,
    ledger: bool = True,
    raw: bool = False,
) -> FieldEval:
    """:func:`assemble_arrays` on CPU tensors, returned as a :class:`FieldEval` (tensors share the arrays).

    ``geometry`` must be the sphere (``unit_norm``) or flat space (no tangent projection).
    """
    if not isinstance(geometry, (Sphere, Euclidean)):
        raise ValueError(
            f"the compiled assembly knows the sphere and flat space: got geometry {geometry.name!r}; "
            "use attnflow.dynamics.assembly.assemble"
        )
    out = assemble_arrays(
        sums,
        x.detach().numpy(),
        D.detach().numpy(),
        V.detach().numpy(),
        beta,
        sphere=isinstance(geometry, Sphere),
        ledger=ledger,
        raw=raw,
    )
    t = {k: None if v is None else torch.from_numpy(v) for k, v in out.items()}
    return FieldEval(**t)
