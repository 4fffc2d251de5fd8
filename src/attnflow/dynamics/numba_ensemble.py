r"""Many small independent clouds stepped together in one compiled call (issue 27 part 2).

A study that runs hundreds of clouds of a few dozen tokens (the equiangular particle checks of
``critical_beta``, ``superadditivity``, ``relu_vs_softmax`` and ``entropy``) spent most of its time in the
Python step loop: at n = 32 one RK4 step of :class:`~attnflow.simulation.Simulator` costs about 2.5 ms
of interpreter and PyTorch dispatch for about 30 microseconds of arithmetic (cProfile in
docs/performance.md section 10.2). :func:`rk4_clouds` runs the whole integration of B clouds inside one
compiled function, ``prange`` over the clouds (both cores busy), each cloud's steps serial.

Per cloud b (shapes: x (n, d), heads D and values V (H, d, d)) the field is the multi-head attention
velocity of :func:`attnflow.dynamics.assembly.assemble` (NOTES.md §1, arXiv 2605.18870 eq. (3)):

.. math::
    v_i = s\,P_{x_i}\Big(\frac1H\sum_h V_h \sum_j A^h_{ij} x_j\Big),\qquad
    A^h_{ij} = \operatorname{softmax}_j(\beta\langle x_i, D_h x_j\rangle)

(``usa``: :math:`e^{s_{ij}}/n`, ``relu``: :math:`\max(s_{ij}, 0)/n`, the kinds of
:func:`attnflow.model.attention.attention_weights`; :math:`P_x` the tangent projection on the sphere, the
identity in flat space; s = +1 ascent, -1 descent), and the step is the classical RK4 of
:class:`attnflow.integrators.RK4` with constant heads and the retraction :math:`y/|y|` after every stage
on the sphere. The tangent projection and the retraction are compiled from their home
(:mod:`attnflow.geometry.sphere`, :data:`FORMULAS`); the softmax rows (scores, exact row maximum, shifted
exponentials, the sums ``sum_j e_ij`` and ``sum_j e_ij x_j``) are the fused kernel's row functions
(:mod:`attnflow.dynamics.numba_passes`, :data:`KERNEL_ROWS`; inlined here without the kernel's fast-math
flags, see below), not a copy: a cloud here agrees with the same cloud run by :func:`attnflow.simulate`
(``integrator="rk4"``, PyTorch backend) to round-off (``tests/test_ensemble.py``), and with itself run alone
or in any batch bit for bit (each cloud's loop is serial and touches only its own arrays). Against this
module's former loops (``math.exp``, the normalised weights summed in order) the softmax positions differ in
the last bits (1e-14 after 200 RK4 steps at n = 32; ``usa`` and ``relu`` are unchanged, bit for bit), at the
same speed (0.97-1.2 times the former's, medians of 5 interleaved). Compiled with the kernel's fast-math flags
the field was twice as fast, but a process that compiled it and one that loaded it from numba's cache gave
different last bits (the compile-versus-cache difference of :mod:`attnflow.dynamics.numba_passes`), so a
study's numbers depended on which process compiled first (the Dask check of ``critical_beta`` failed).

Compiled with ``error_model="numpy"``: a division by zero gives inf or nan as in NumPy (not an exception
raised inside a parallel loop), and the step that produced it is reported as non-finite.

Records: the positions every ``every[b]`` steps (and the last step), and at every step the mean pairwise
inner product :math:`\bar\rho = (|\sum_i x_i|^2 - \sum_i |x_i|^2)/(n(n-1))`, the formula of
:func:`attnflow.observables.clustering.mean_pairwise_inner_product` (O(nd), cheap enough for every step).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .._numba_cache import refresh as _refresh_numba_cache
from ..geometry.sphere import retraction, tangent_component
from .numba_passes import TILE, score_tile, tile_generic, tile_max

_refresh_numba_cache()  # drop numba's cached code compiled from since-edited sources (attnflow._numba_cache)

__all__ = ["FORMULAS", "KERNEL_ROWS", "KINDS", "rk4_clouds"]

# The sphere's formulas are compiled from their one definition (geometry/sphere.py), as in the compiled
# assembly and the compiled loop; error_model="numpy" as the callers (a zero norm gives inf/nan, no raise).
_tangent_component = njit(error_model="numpy")(tangent_component)  # v - <x, v> x (eq. (10))
_retraction = njit(error_model="numpy")(retraction)  # y / |y|

#: the shared formulas: name in this module -> the home function it compiles
FORMULAS = {"_tangent_component": tangent_component, "_retraction": retraction}
#: the fused kernel's row functions the softmax rows call (numba_passes, the one home of the kernels' scores,
#: shifted exponentials and weighted row sums): name in this module -> the compiled function itself
KERNEL_ROWS = {"score_tile": score_tile, "tile_max": tile_max, "tile_generic": tile_generic}

#: attention kinds of the compiled field: code -> name (the names of attnflow.model.attention)
KINDS = {"softmax": 0, "usa": 1, "relu": 2}


@njit(cache=True, error_model="numpy")
def _velocity(x, D, V, beta, kind, sphere, sign, out, kt, xt, s, e, m, xi, yb):
    """The field of one cloud at ``x`` (n, d) into ``out`` (n, d); ``kt`` and ``xt`` (d, n), ``s`` and
    ``e`` (min(n, tile),), ``m``, ``xi`` and ``yb`` (d,) are work arrays.

    Softmax rows are the fused kernel's rows (:mod:`attnflow.dynamics.numba_passes`): the exact row maximum of
    the scores (:func:`score_tile`, :func:`tile_max`, its exact-max pass), then the shifted exponentials
    with their sums ``ell`` and ``sum_j e_ij x_j`` (:func:`tile_generic`), tile by tile as its accumulate
    pass, and the softmax mean ``row_x / row_sum`` as the compiled assembly forms it. ``usa`` and ``relu``
    (not kernel kinds) weight the same score tile (:func:`attnflow.model.attention.attention_weights`: ``e^s /
    n``, ``max(s, 0) / n``)."""
    n, d = x.shape
    H = D.shape[0]
    zero = 0.0
    for i in range(n):
        for a in range(d):
            out[i, a] = 0.0
            xt[a, i] = x[i, a]
    for h in range(H):
        for j in range(n):  # beta D_h x_j, as the PyTorch backend forms (beta D) x^T; columns of kt
            for a in range(d):
                acc = 0.0
                for c in range(d):
                    acc += (beta * D[h, a, c]) * x[j, c]
                kt[a, j] = acc
        for i in range(n):
            for a in range(d):
                xi[a] = xt[a, i]
            if kind == 0:
                mi = -math.inf
                for j0 in range(0, n, TILE):  # the exact row maximum (the kernel's pass 1)
                    j1 = min(j0 + TILE, n)
                    score_tile(xi, kt, j0, j1, s)
                    mi = max(mi, tile_max(s, j1 - j0))
                ell = zero
                for a in range(d):
                    m[a] = zero
                for j0 in range(0, n, TILE):  # exponentials and row sums (the kernel's pass 2)
                    j1 = min(j0 + TILE, n)
                    part, _ = tile_generic(xi, mi, zero, kt, xt, xt, j0, j1, False, False, s, e, yb, zero)
                    ell += part
                    for a in range(d):  # this tile's sum_j e_ij x_j
                        m[a] += yb[a]
                inv = 1.0 / ell
                for a in range(d):
                    m[a] = m[a] * inv
            else:
                for a in range(d):
                    m[a] = zero
                for j0 in range(0, n, TILE):
                    j1 = min(j0 + TILE, n)
                    score_tile(xi, kt, j0, j1, s)
                    for jj in range(j1 - j0):
                        w = math.exp(s[jj]) / n if kind == 1 else max(s[jj], 0.0) / n
                        for a in range(d):
                            m[a] += w * xt[a, j0 + jj]
            for a in range(d):
                acc = 0.0
                for c in range(d):
                    acc += V[h, a, c] * m[c]
                out[i, a] += acc
    for i in range(n):
        for a in range(d):
            out[i, a] /= H
        if sphere:
            p = 0.0
            for a in range(d):
                p += x[i, a] * out[i, a]
            for a in range(d):
                out[i, a] = _tangent_component(out[i, a], p, x[i, a])
        for a in range(d):
            out[i, a] *= sign


@njit(cache=True, error_model="numpy")
def _stage(x, k, h, sphere, y):
    """y = retract(x + h k) (the sphere's y/|y|; flat: x + h k)."""
    n, d = x.shape
    for i in range(n):
        for a in range(d):
            y[i, a] = x[i, a] + h * k[i, a]
        if sphere:
            r = 0.0
            for a in range(d):
                r += y[i, a] * y[i, a]
            r = math.sqrt(r)
            for a in range(d):
                y[i, a] = _retraction(y[i, a], r)


@njit(cache=True, error_model="numpy")
def _mean_inner(x):
    n, d = x.shape
    total = 0.0
    for a in range(d):
        acc = 0.0
        for i in range(n):
            acc += x[i, a]
        total += acc * acc
    diag = 0.0
    for i in range(n):
        for a in range(d):
            diag += x[i, a] * x[i, a]
    return (total - diag) / (n * (n - 1))


@njit(cache=True, error_model="numpy")
def _one_cloud(x0, D, V, beta, dt, nsteps, every, kind, sphere, sign, pos, rho):
    """RK4 of one cloud; returns the steps done (< nsteps when the state left the finite numbers)."""
    n, d = x0.shape
    x = x0.copy()
    k1 = np.empty_like(x)
    k2 = np.empty_like(x)
    k3 = np.empty_like(x)
    k4 = np.empty_like(x)
    y = np.empty_like(x)
    kt = np.empty((d, n))
    xt = np.empty((d, n))
    s = np.empty(min(n, TILE))
    e = np.empty(min(n, TILE))
    m = np.empty(d)
    xi = np.empty(d)
    yb = np.empty(d)
    half = 0.5 * dt
    sixth = dt / 6.0
    pos[0, :, :] = x
    rho[0] = _mean_inner(x)
    r = 1
    for step in range(nsteps):
        _velocity(x, D, V, beta, kind, sphere, sign, k1, kt, xt, s, e, m, xi, yb)
        _stage(x, k1, half, sphere, y)
        _velocity(y, D, V, beta, kind, sphere, sign, k2, kt, xt, s, e, m, xi, yb)
        _stage(x, k2, half, sphere, y)
        _velocity(y, D, V, beta, kind, sphere, sign, k3, kt, xt, s, e, m, xi, yb)
        _stage(x, k3, dt, sphere, y)
        _velocity(y, D, V, beta, kind, sphere, sign, k4, kt, xt, s, e, m, xi, yb)
        for i in range(n):  # the RK4 combination in the order of integrators.rk4
            for a in range(d):
                k1[i, a] = k1[i, a] + 2 * k2[i, a] + 2 * k3[i, a] + k4[i, a]
        _stage(x, k1, sixth, sphere, y)
        if not np.isfinite(y).all():
            return step
        x[:] = y
        rho[step + 1] = _mean_inner(x)
        if (step + 1) % every == 0 or step + 1 == nsteps:
            pos[r, :, :] = x
            r += 1
    return nsteps


@njit(cache=True, parallel=True, error_model="numpy")
def rk4_clouds(x0, D, V, beta, dt, nsteps, every, kind, sphere, sign, pos, rho):
    """RK4 of B independent clouds, ``prange`` over the clouds.

    Parameters
    ----------
    x0 : ndarray, shape=[B, n, d]
        Initial tokens (float64).
    D, V : ndarray, shape=[B, H, d, d]
        Score and value matrices per cloud (constant in time).
    beta, dt : ndarray, shape=[B]
        Inverse temperature and step per cloud.
    nsteps, every : ndarray of int64, shape=[B]
        Steps and record spacing per cloud (positions at steps 0, every, 2 every, ... and the last step).
    kind : int
        Attention kind (:data:`KINDS`).
    sphere : bool
        Tokens on the sphere (tangent projection and retraction) or in flat space.
    sign : float
        +1 ascent, -1 descent.
    pos : ndarray, shape=[B, R, n, d]
        Out: the recorded positions (R at least the most records of a cloud).
    rho : ndarray, shape=[B, S + 1]
        Out: the mean pairwise inner product at every step (S at least the most steps).

    Returns
    -------
    ndarray of int64, shape=[B]
        Steps done per cloud (``nsteps[b]`` unless the state became non-finite at that step).
    """
    B = x0.shape[0]
    done = np.zeros(B, dtype=np.int64)
    for b in prange(B):
        done[b] = _one_cloud(
            x0[b], D[b], V[b], beta[b], dt[b], nsteps[b], every[b], kind, sphere, sign, pos[b], rho[b]
        )
    return done
