r"""Many steps in one compiled call: the multi-step loop of the built-in weight processes (issue 12).

For runs that the fused CPU kernel serves (softmax attention on the sphere, CPU tensors, the numba
backend), with the projected Euler scheme of the authors' code and a built-in weight process
(:class:`~attnflow.model.weights.Constant`, :class:`~attnflow.model.weights.OrnsteinUhlenbeck` with symmetric
or full noise, :class:`~attnflow.model.weights.Oscillating`,
:class:`~attnflow.model.weights.PiecewiseConstant`), :func:`_run` takes K steps inside compiled code: per
step the field with its ledger (:func:`attnflow.dynamics.numba_kernel.pair_sums_core` and
:func:`attnflow.dynamics.numba_assembly.assemble_core`, the very functions behind the numba backend), the
ledger rates, the token update, the weight update, the token noise and the ledger's running sums. Python
runs once per block: it draws the block's weight-noise and token-noise normals from the same per-path
streams, in the same order, as the step-by-step loop would (:class:`attnflow.random.BrownianSource`), and the
oscillating process's forcing F(t + phi_h) from :meth:`~attnflow.model.weights.Oscillating.forcing_at`, and
it applies layer jumps (a block ends at a jump).

Every step runs the same compiled code whatever the block length, so a run gives the same bits with one
step per call and with any split into blocks (``tests/test_fused_loop.py``); a resumed run too. The
step-by-step :meth:`attnflow.simulation.Simulator.step` of such a run goes through the same code with
K = 1. Against the Python loop (PyTorch backend, the reference) the fused loop agrees to round-off:
float64 1e-12, float32 1e-5 after the test's steps.

The formulas of the step are compiled from their one definition in their home (:data:`FORMULAS`: the very
function objects that the Python loop calls, checked by ``tests/test_fused_loop.py``): the layer scaling
c(t), dc/dt (:func:`attnflow.model.transformer.layer_scale`, Sec. 5), the drift lambda (F - D), the noise
shape and g sqrt(dt) (:mod:`attnflow.model.weights`, eq. (10)), the Euler update
(:func:`attnflow.integrators.euler.euler_increment`), the retraction Pi(y) = y/|y|, the tangent projection
and the exp map's great-circle point (:mod:`attnflow.geometry.sphere`), the token noise's scale
sqrt(2 eps dt) (:func:`attnflow.integrators.brownian.brownian_scale`), the ledger rates' factors and terms
(:func:`attnflow.dynamics.assembly.effective_drift`, :func:`~attnflow.dynamics.assembly.ito_coefficient`,
:func:`~attnflow.dynamics.assembly.ito_rate_term`), the martingale increment
(:func:`~attnflow.dynamics.assembly.martingale_term`), the ledger's running sums
(:func:`attnflow.simulation.ledger.riemann_step`; all eq. (147)) and the score bound
(:func:`attnflow.dynamics.numba_kernel.score_bounds`). The velocity and ledger are the kernel's and the
compiled assembly's (:mod:`attnflow.dynamics.numba_assembly`, which compiles the ledger's formulas from
:mod:`attnflow.dynamics.assembly` the same way); what this module adds are the loops over heads, tokens and
entries around those formulas, held to the Python loop by the tests. The state goes back to the simulator
through :meth:`attnflow.simulation.Simulator.take_state`.
A ledger quantity that leaves float64 is reported at the step it happens (:func:`_check_ledger`), as the
Python loop does.

Runs outside this set (other integrators, attention kinds or geometries, custom weight processes, the
PyTorch or fast-summation backends, ``backend="auto"`` with n >= :data:`attnflow.dynamics.fastsum.AUTO_MIN_N`
where the fast summation may take over, CUDA tensors) keep the Python loop; :func:`plan` says why.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from numba import njit

from .._numba_cache import refresh as _refresh_numba_cache
from ..dynamics import numba_backend
from ..dynamics.assembly import (
    FieldEval,
    effective_drift,
    ito_coefficient,
    ito_rate_term,
    martingale_term,
    overflow_message,
    pair_norm,
)
from ..dynamics.fastsum import AUTO_MIN_N
from ..dynamics.numba_assembly import assemble_core
from ..dynamics.numba_kernel import (
    bound_range,
    choose_pass,
    pair_sums_core,
    parallel_passes,
    score_bounds,
    work_items,
)
from ..geometry import Sphere
from ..geometry.sphere import geodesic_point, retraction, tangent_component
from ..integrators.brownian import brownian_scale
from ..integrators.euler import ProjectedEuler, euler_increment
from ..model.transformer import layer_scale
from ..model.weights import (
    Constant,
    OrnsteinUhlenbeck,
    Oscillating,
    PiecewiseConstant,
    noise_scale,
    relaxation_drift,
    symmetric_part,
)
from .ledger import riemann_step

_refresh_numba_cache()  # drop numba's cached code compiled from since-edited sources (attnflow._numba_cache)

__all__ = ["BLOCK_SECONDS", "FORMULAS", "HUGE", "NONFINITE", "OK", "Block", "FusedLoop", "plan"]

#: target wall time of one compiled block (Ctrl-C and progress are seen between blocks)
BLOCK_SECONDS = 0.5

#: the weight processes of the compiled loop: zero drift (constant, piecewise constant), OU, oscillating
PROC_ZERO, PROC_OU, PROC_OSCILLATING = 0, 1, 2
#: status of a compiled block: all steps taken; a step gave a non-finite state; scores left the kernel's
#: range; the step needs the kernel's passes over ordered pairs, which this variant was compiled without
OK, NONFINITE, HUGE, ORDERED = 0, 1, 2, 3
_PROCESSES = (Constant, OrnsteinUhlenbeck, Oscillating, PiecewiseConstant)


def plan(sim) -> str | None:
    """Why the fused loop cannot run ``sim`` (a :class:`~attnflow.simulation.Simulator`, not imported here:
    the simulator imports this module); None if it can."""
    model, w = sim.model, sim.model.weights
    if type(sim.integrator) is not ProjectedEuler:
        return f"integrator {sim.integrator.name!r} (the fused loop runs 'euler', the authors' scheme)"
    if model.attention != "softmax":
        return f"attention {model.attention!r} (the fused loop runs softmax attention)"
    if not isinstance(model.geometry, Sphere):
        return f"geometry {model.geometry.name!r} (the fused loop runs tokens on the sphere)"
    if sim.device.type != "cpu":
        return f"device {sim.device.type!r} (the fused loop is the CPU kernel's)"
    if type(w) not in _PROCESSES:
        return f"weight process {type(w).__name__} (the fused loop runs the built-in processes)"
    if isinstance(w, PiecewiseConstant) and model.token_noise > 0:
        return "piecewise-constant weights with token noise (their energy jumps are taken before the noise)"
    if isinstance(w, Oscillating) and callable(w.forcing):
        return "an oscillating process with a callable forcing (the fused loop runs 's2' and 's1')"
    if model.backend == "auto":
        if sim.n >= AUTO_MIN_N:
            return f"backend 'auto' with n = {sim.n} >= {AUTO_MIN_N} (the fast summation may take over)"
    elif model.backend != "numba":
        return f"backend {model.backend!r} (the fused loop runs the numba kernel: backend 'numba' or 'auto')"
    bound = numba_backend.score_bound(sim.x, sim.D, model.beta, model.head_scale(sim.t, sim.H))
    if bound > numba_backend.SCORE_MAX:
        return (
            f"scores up to beta |D|_F max|x|^2 = {bound:.3g}, beyond the kernel's range "
            f"{numba_backend.SCORE_MAX:g} (lower beta or the heads' scale to run the fused loop)"
        )
    return None


# --------------------------------------------------------------------------- compiled loop

# The formulas of the step are compiled from their one definition in their home (plain arithmetic that runs
# on tensors in the Python loop and on numbers here); ``tests/test_fused_loop.py`` checks that these are the
# very function objects (``.py_func``) of the homes.
# numba's on-disk cache (cache=True) sees only edits to the file of the cached function, not to a home in
# another file: attnflow._numba_cache (called above) drops the cache when any such source changes.
_layer_scale = njit(layer_scale)  # c(t), dc/dt (Sec. 5)
_relaxation_drift = njit(relaxation_drift)  # lambda (F - D) (eq. (10))
_symmetric_part = njit(symmetric_part)  # (Z + Z^T)/2 (Sec. 6)
_noise_scale = njit(noise_scale)  # g sqrt(dt) (eq. (10))
_euler_increment = njit(euler_increment)  # y + dt rate (Sec. 6 scheme)
_effective_drift = njit(effective_drift)  # c f + c' D (eq. (147))
_ito_coefficient = njit(ito_coefficient)  # beta/4 or beta/2 (eq. (147))
_ito_rate_term = njit(ito_rate_term)  # g^2 c^2 (Ito factor) (eq. (147))
_martingale_term = njit(martingale_term)  # c sum_h <dS_h, C_h>_F (eq. (147))
_riemann_step = njit(riemann_step)  # the ledger's running sums after a step (eq. (147))
_retraction = njit(retraction)  # Pi(y) = y/|y| (Sec. 6 scheme)
_tangent_component = njit(tangent_component)  # v - <x, v> x (eq. (10))
_geodesic_point = njit(geodesic_point)  # cos|u| x + sin|u| u/|u| (exp map)
_brownian_scale = njit(brownian_scale)  # sqrt(2 eps dt) (NOTES §10)

#: the shared formulas: name in the compiled loop -> the home function it compiles
FORMULAS = {
    "_layer_scale": layer_scale,
    "_relaxation_drift": relaxation_drift,
    "_symmetric_part": symmetric_part,
    "_noise_scale": noise_scale,
    "_euler_increment": euler_increment,
    "_effective_drift": effective_drift,
    "_ito_coefficient": ito_coefficient,
    "_ito_rate_term": ito_rate_term,
    "_martingale_term": martingale_term,
    "_riemann_step": riemann_step,
    "_retraction": retraction,
    "_tangent_component": tangent_component,
    "_geodesic_point": geodesic_point,
    "_brownian_scale": brownian_scale,
    "score_bounds": score_bounds.py_func,
}


@njit(cache=True)
def _wcast(like, value):
    """``value`` rounded to the dtype of the array ``like``."""
    buf = np.empty(1, dtype=like.dtype)
    buf[0] = value
    return buf[0]


@njit(cache=True, inline="always")  # inlined into _run: each call level compiles its callees again
def _evaluate(
    x, D, V, has_v, c, beta, norm, causal, ledger, ito, brange, ih, ch, nh, io, co, no, ordered, parallel
):  # fmt: skip
    """The field and ledger at (x, D) with head scale ``c`` (:func:`attnflow.dynamics.field.evaluate`);
    ``(False, placeholders)`` when ``ordered`` is None (the kernel compiled with its symmetric half pass
    only) and the half pass does not apply."""
    if c != 1.0:
        De = np.empty_like(D)
        for idx in np.ndindex(D.shape):
            De[idx] = D[idx] * c
        if has_v:
            Ve = np.empty_like(V)
            for idx in np.ndindex(V.shape):
                Ve[idx] = V[idx] * c
        else:
            Ve = De
    else:
        De = D
        Ve = V if has_v else D
    if ordered is None:
        symmetric, exact, _ = choose_pass(x, De, beta, brange, causal, False, False)
        if exact or not symmetric:
            e1, e2, e3 = np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1, 1))
            return False, e3, e3, e1, e1, e1, e2, e2, np.zeros((1, 1, 1, 1)), e3, e3
    _, colsums, row_shift, rsum, ysum, qsum, col_shift, col_x = pair_sums_core(
        x, De, beta, brange, causal, ledger, ito, False, False, False, ih, ch, nh, io, co, no, ordered,
        parallel,
    )  # fmt: skip
    vel, _raw, grad, energy, G2, Ghat2, head_mass, ito_m, C = assemble_core(
        x,
        De,
        Ve,
        row_shift,
        rsum,
        ysum,
        qsum,
        ledger and ito,
        col_shift,
        col_x,
        colsums,
        beta,
        norm,
        True,
        ledger,
        parallel,
    )
    return True, vel, grad, energy, G2, Ghat2, head_mass, ito_m, C, row_shift, rsum


@njit(cache=True)
def _drift(proc, D, rate, target, out):
    """f(D, t) of eq. (10): 0 (constant, piecewise constant) or rate (target - D) (OU, oscillating)."""
    P, H, d, _ = D.shape
    for p in range(P):
        for h in range(H):
            for a in range(d):
                for b in range(d):
                    out[p, h, a, b] = (
                        0.0 if proc == PROC_ZERO else _relaxation_drift(rate, target[h, a, b], D[p, h, a, b])
                    )


@njit(cache=True)
def _rates(D, drift, C, ito_m, head_mass, c, c_rate, g2, stochastic, noise_sym, beta, r0, r1):
    """Drift and Ito rates of E at frozen tokens (:func:`attnflow.dynamics.assembly.ledger_rates`)."""
    P, H, d, _ = D.shape
    for p in range(P):
        s = 0.0
        for h in range(H):
            for a in range(d):
                for b in range(d):
                    f = _effective_drift(c, np.float64(drift[p, h, a, b]), c_rate, np.float64(D[p, h, a, b]))
                    s += f * C[p, h, a, b]
        r0[p] = s
        r1[p] = 0.0
        if stochastic:
            acc = 0.0
            for h in range(H):
                acc += _ito_rate_term(g2, c, ito_m[p, h] if noise_sym else head_mass[p, h])
            r1[p] = _ito_coefficient(beta, noise_sym) * acc


@njit(cache=True)
def _noise(z, gs, noise_sym, out):
    """The weight-noise increment g sqrt(dt) xi, xi = (Z + Z^T)/2 or Z (eq. (10), Sec. 6)."""
    P, H, d, _ = z.shape
    for p in range(P):
        for h in range(H):
            for a in range(d):
                for b in range(d):
                    xi = _symmetric_part(z[p, h, a, b], z[p, h, b, a]) if noise_sym else z[p, h, a, b]
                    out[p, h, a, b] = gs * xi


@njit(cache=True)
def _token_update(x, vel, dtw, signw, noisy, ztok, tok_scale, tiny, zw, x_new):
    """Projected Euler Pi(x + dt s v) (integrators.euler), then with ``noisy`` the geodesic random walk
    exp_x(sqrt(2 eps dt) P(x) z) (integrators.brownian), in the working precision: loops over the formulas
    of the homes (the Euler update, the retraction, the tangent projection, the exp map's great-circle
    point; ``tok_scale`` is sqrt(2 eps dt))."""
    P, n, d = x.shape
    y = np.empty(d, dtype=x.dtype)
    u = np.empty(d, dtype=x.dtype)
    for item in range(P * n):
        p = item // n
        i = item - p * n
        r = zw
        for a in range(d):
            y[a] = _euler_increment(x[p, i, a], dtw, signw * _wcast(x, vel[p, i, a]))
            r += y[a] * y[a]
        r = np.sqrt(r)
        for a in range(d):
            x_new[p, i, a] = _retraction(y[a], r)
        if noisy:
            dot = zw
            for a in range(d):
                dot += x_new[p, i, a] * ztok[p, i, a]
            un = zw
            for a in range(d):
                u[a] = tok_scale * _tangent_component(ztok[p, i, a], dot, x_new[p, i, a])
                un += u[a] * u[a]
            un = np.sqrt(un)
            cn, sn = np.cos(un), np.sin(un)
            den = max(un, tiny)
            m2 = zw
            for a in range(d):
                y[a] = _geodesic_point(x_new[p, i, a], u[a] / den, cn, sn)
                m2 += y[a] * y[a]
            m2 = np.sqrt(m2)
            for a in range(d):
                x_new[p, i, a] = _retraction(y[a], m2)


@njit(cache=True)
def _head_update(D, drift, nz, dtw, D_new):
    """D + dt f(D, t) + g sqrt(dt) xi (Euler-Maruyama, integrators.base)."""
    P, H, d, _ = D.shape
    for p in range(P):
        for h in range(H):
            for a in range(d):
                for b in range(d):
                    D_new[p, h, a, b] = (
                        _euler_increment(D[p, h, a, b], dtw, drift[p, h, a, b]) + nz[p, h, a, b]
                    )


@njit(cache=True)
def _ledger_step(acc, r0, r1, G2, Ghat2, nz, C, c, dt, stochastic):
    """The step's left Riemann terms and martingale increment (simulation.ledger.riemann_step and
    dynamics.assembly.martingale_term, eq. (147))."""
    P, H, d, _ = C.shape
    for p in range(P):
        m = 0.0
        if stochastic:
            for h in range(H):
                for a in range(d):
                    for b in range(d):
                        m += np.float64(nz[p, h, a, b]) * C[p, h, a, b]
        inc = _martingale_term(c, m)
        acc[0, p], acc[1, p], acc[2, p], acc[3, p] = _riemann_step(
            acc[0, p], acc[1, p], acc[2, p], acc[3, p], r0[p], r1[p], G2[p], Ghat2[p], inc, dt
        )


@njit(cache=True)
def _check_ledger(ovf, step, vel, energy, G2, Ghat2, row_shift, rsum):
    """Note in ``ovf`` the first evaluation whose ledger left float64 (issue 29: reported at the step it
    happens): ``ovf = (state index, energy, G2, Ghat2 not finite, largest row log-sum-exp, velocity finite)``,
    the parts of :func:`attnflow.dynamics.assembly.overflow_message`; ``ovf[0] = -1`` until then."""
    if ovf[0] >= 0.0:
        return
    e_bad = not np.isfinite(energy).all()
    g_bad = not np.isfinite(G2).all()
    gh_bad = not np.isfinite(Ghat2).all()
    if not (e_bad or g_bad or gh_bad):
        return
    lse_max = -np.inf
    for idx in np.ndindex(rsum.shape):
        lse_max = max(lse_max, row_shift[idx] + math.log(rsum[idx]))
    ovf[0] = step
    ovf[1], ovf[2], ovf[3] = e_bad, g_bad, gh_bad
    ovf[4] = lse_max
    ovf[5] = np.isfinite(vel).all()


def _compiled_loop(parallel):
    """The compiled loop :func:`_run` with the kernel's serial passes (``parallel`` None) or its parallel ones
    (True; :func:`~attnflow.dynamics.numba_kernel.parallel_passes` chooses by size).

    ``parallel`` is a constant of the closure, not an argument: numba types it as ``none`` or
    ``Literal[bool](True)``, and a callee compiled for either prunes the other variant's branch
    (``pair_sums_core`` and ``assemble_core`` test ``parallel is None``). As an argument of type ``bool`` it
    pruned nothing, and a run with the parallel passes compiled the serial passes too (the main job's first
    run: 92 specialisations, 64.4 s of compile on an idle machine, docs/benchmarks/compile-2026-12-03c.md).
    numba's cache keys a closure on its cell contents, so both variants are cached side by side.
    """

    @njit(cache=True)
    def _run(
        x, D, V, has_v, t0, step0, dt, nsteps, sign, beta, norm, causal, ledger, brange, score_max,
        ih, ch, nh, io, co, no,
        proc, rate, F, Fo, stochastic, ito, g, noise_sym, layer_t0, eps_tok, z, ztok,
        acc, E0, have_E0, fe_in, have_fe, tiny_value, ovf, ordered,
    ):  # fmt: skip
        """``nsteps`` projected Euler steps of the coupled system (see the module docstring).

        Arguments (working dtype W = the dtype of ``x``): ``x`` (P, n, d) and ``D`` (P, H, d, d) the state;
        ``V`` the value matrices (``has_v``, else a placeholder); ``t0``, ``step0``, ``dt``, ``nsteps`` the
        time grid t_k = t0 + (step0 + k) dt; ``sign`` +1 ascent / -1 descent; ``beta``; ``norm`` = 2 H n^2
        (:func:`~attnflow.dynamics.assembly.pair_norm`); ``causal``; ``ledger``; ``brange`` and ``score_max``
        the kernel's bound-shift range and score limit; ``ih, ch, nh`` and ``io, co, no`` the kernel's work
        items of the half pass and of the ordered-pair pass
        (:func:`~attnflow.dynamics.numba_kernel.work_items`); ``proc`` the weight process (:data:`PROC_ZERO`,
        :data:`PROC_OU`, :data:`PROC_OSCILLATING`), ``rate`` its lambda, ``F`` (H, d, d) the OU target, ``Fo``
        (nsteps + 1, H, d, d) the oscillating forcing at each t_k; ``stochastic``, ``ito`` (compute the Ito
        sums), ``g``, ``noise_sym`` ((Z + Z^T)/2 or Z); ``layer_t0`` the layer scaling's t0 (NaN: none);
        ``eps_tok`` the token noise; ``z`` (nsteps, P, H, d, d) and ``ztok`` (nsteps, P, n, d) the block's
        standard normals; ``acc`` (5, P) the ledger's running sums (int_dtE, int_G2, int_Ghat2, martingale,
        jumps), ``E0`` (P) and ``have_E0``; ``fe_in`` and ``have_fe`` the evaluation of the initial state;
        ``tiny_value`` the dtype's smallest normal number; ``ovf`` (6,) the first ledger overflow
        (:func:`_check_ledger`); ``ordered`` None compiles the kernel with its symmetric half pass only
        (status :data:`ORDERED` when a step needs more), True with every pass; the kernel's passes, serial or
        parallel, are those of the variant (:func:`_compiled_loop`).

        ``fe_in`` is the evaluation at the initial state when ``have_fe`` (else recomputed). Returns
        ``(status, steps done, x, D, x_bad, D_bad, evaluation, r0, r1, have_E0, have_evaluation)``: the state
        after the steps done, on ``NONFINITE`` the offending new state (else ``x``, ``D`` again), and the
        evaluation of the final state with its rates (not on ``NONFINITE`` or ``HUGE``). ``acc`` (5, P) and
        ``E0`` (P) are updated in place.
        """
        P, n, d = x.shape
        H = D.shape[1]
        dtw = _wcast(x, dt)
        signw = _wcast(x, sign)
        gs = _wcast(x, _noise_scale(_wcast(x, g), dt))
        tok_scale = _wcast(x, _brownian_scale(eps_tok, dt))
        tiny = _wcast(x, tiny_value)
        zw = _wcast(x, 0.0)
        drift = np.empty_like(D)
        nz = np.zeros_like(D)
        r0 = np.zeros(P)
        r1 = np.zeros(P)
        vel, grad, energy, G2, Ghat2, head_mass, ito_m, C, row_shift, rsum = fe_in
        have = have_fe
        # steps 0..nsteps-1 evaluate, update and step; the last pass (k = nsteps) evaluates the final state
        # and its rates, which serve the record and the next block (one evaluation site: one compiled copy)
        for k in range(nsteps + 1):
            t = t0 + (step0 + k) * dt
            c, c_rate = _layer_scale(t, layer_t0, H)
            if not have:
                if score_bounds(x, D, beta).max() * abs(c) > score_max:
                    return HUGE, k, x, D, x, D, fe_in, r0, r1, have_E0, False
                ok, vel, grad, energy, G2, Ghat2, head_mass, ito_m, C, row_shift, rsum = _evaluate(
                    x, D, V, has_v, c, beta, norm, causal, ledger, ito, brange, ih, ch, nh, io, co, no,
                    ordered, parallel,
                )  # fmt: skip
                if not ok:
                    return ORDERED, k, x, D, x, D, fe_in, r0, r1, have_E0, False
                if ledger:
                    _check_ledger(ovf, step0 + k, vel, energy, G2, Ghat2, row_shift, rsum)
                have = True
            if ledger and not have_E0:
                for p in range(P):
                    E0[p] = energy[p]
                have_E0 = True
            if k < nsteps or ledger:
                _drift(proc, D, rate, Fo[k] if proc == PROC_OSCILLATING else F, drift)
            if ledger:
                _rates(D, drift, C, ito_m, head_mass, c, c_rate, g * g, stochastic, noise_sym, beta, r0, r1)
            if k == nsteps:
                break
            if stochastic:
                _noise(z[k], gs, noise_sym, nz)
            x_new = np.empty_like(x)
            D_new = np.empty_like(D)
            _token_update(
                x,
                vel,
                dtw,
                signw,
                eps_tok > 0.0,
                ztok[k] if eps_tok > 0.0 else ztok[0],
                tok_scale,
                tiny,
                zw,
                x_new,
            )
            _head_update(D, drift, nz, dtw, D_new)
            if not (np.isfinite(x_new).all() and np.isfinite(D_new).all()):
                return NONFINITE, k, x, D, x_new, D_new, fe_in, r0, r1, have_E0, False
            if ledger:
                _ledger_step(acc, r0, r1, G2, Ghat2, nz, C, c, dt, stochastic)
            x = x_new
            D = D_new
            have = False
        fe = (vel, grad, energy, G2, Ghat2, head_mass, ito_m, C, row_shift, rsum)
        return OK, nsteps, x, D, x, D, fe, r0, r1, have_E0, True

    return _run


#: the compiled loop by the kernel's ``parallel`` argument: None (serial passes) or True (parallel)
_RUN = {None: _compiled_loop(None), True: _compiled_loop(True)}


# --------------------------------------------------------------------------- Python side


def _dummy(ndim: int, dtype) -> np.ndarray:
    """A placeholder array of ``ndim`` dimensions for an argument of :func:`_run` that a run does not use."""
    return np.zeros((1,) * ndim, dtype=dtype)


@dataclass
class Block:
    """What one call of :meth:`FusedLoop.run` did: its status (:data:`OK`, :data:`NONFINITE`, :data:`HUGE`),
    the steps taken and, on :data:`NONFINITE`, the offending new state."""

    status: int
    steps: int
    x_bad: torch.Tensor | None = None
    D_bad: torch.Tensor | None = None

    @property
    def nonfinite(self) -> bool:
        """A step gave a non-finite state (the state stays at the last whole step)."""
        return self.status == NONFINITE

    @property
    def huge(self) -> bool:
        """Scores left the kernel's range (``numba_backend.SCORE_MAX``): the Python loop takes over."""
        return self.status == HUGE


class FusedLoop:
    """The compiled multi-step loop bound to one :class:`~attnflow.simulation.Simulator` (see the module
    docstring); built by the simulator when :func:`plan` accepts the run.

    Parameters
    ----------
    sim : Simulator
    """

    def __init__(self, sim):
        model, w = sim.model, sim.model.weights
        self.sim = sim
        self.np_dtype = np.float32 if sim.dtype == torch.float32 else np.float64
        H, d = sim.H, sim.d
        self.proc = (
            PROC_OU
            if isinstance(w, OrnsteinUhlenbeck)
            else PROC_OSCILLATING
            if isinstance(w, Oscillating)
            else PROC_ZERO
        )
        self.rate = float(getattr(w, "rate", 1.0))
        if isinstance(w, OrnsteinUhlenbeck):
            F = w.target(sim.D).expand(H, d, d).numpy()
        else:
            F = np.zeros((H, d, d))
        self.F = np.ascontiguousarray(F, dtype=self.np_dtype)
        self.stochastic = bool(w.stochastic)
        #: the kernel's Ito sums, read only when the weight noise is not zero (skipped otherwise, as in the
        #: Python loop; the results that remain are the same bits)
        self.ito = self.stochastic
        self.g = float(w.diffusion(sim.D, sim.t)) if self.stochastic else 0.0
        self.noise_sym = w.noise == "symmetric"
        self.layer_t0 = math.nan if model.layer_scaling is None else float(model.layer_scaling)
        self.eps = float(model.token_noise)
        V = sim.field.V
        self.has_v = V is not None
        self.V = np.ascontiguousarray(V.numpy()) if V is not None else _dummy(4, self.np_dtype)
        self.jumps = isinstance(w, PiecewiseConstant)
        self.seconds_per_step: float | None = None
        self._fe_arrays: tuple | None = None  # the compiled evaluation behind sim.evaluation
        #: None: the kernel variant with the symmetric half pass only (half the kernel's compile time), while
        #: the heads stay exactly symmetric and the scores within the bound shift's range; True: every pass.
        #: A run that needs more switches for good (status ORDERED; the steps taken are the same bits).
        self.ordered: bool | None = None if self._stays_symmetric() else True
        #: the kernel's parallel passes (True) or serial ones (None), chosen by size: the same bits
        self.parallel: bool | None = parallel_passes(sim.P, sim.H, sim.n)

    def _stays_symmetric(self) -> bool:
        """Whether the run starts with symmetric heads and keeps them symmetric (non-causal attention,
        symmetric noise or none, a symmetric target or forcing): the half pass then serves every step whose
        scores fit the bound shift."""
        sim, w = self.sim, self.sim.model.weights

        def sym(a) -> bool:
            a = torch.as_tensor(a)
            return bool(torch.equal(a, a.transpose(-1, -2)))

        if sim.model.causal or not sym(sim.D) or (self.stochastic and not self.noise_sym):
            return False
        if self.proc == PROC_OU:
            return sym(self.F)
        if self.proc == PROC_OSCILLATING:
            return sym(w.forcing_at(sim.t, sim.H, sim.dtype))
        if self.jumps:
            return sym(w.layers)
        return True

    # -- block length ----------------------------------------------------------------------------
    def block_steps(self) -> int:
        """Steps that take about :data:`BLOCK_SECONDS` (1 until a block was timed)."""
        if not self.seconds_per_step:
            return 1
        return max(1, int(BLOCK_SECONDS / self.seconds_per_step))

    def steps_to_jump(self, limit: int) -> int:
        """Steps until (and including) the next step after which a piecewise-constant process jumps."""
        if not self.jumps:
            return limit
        sim, w = self.sim, self.sim.model.weights
        layer = None
        for j in range(1, limit + 1):
            t_new = sim.t0 + (sim.step_index + j) * sim.dt
            k = w.layer_index(t_new)
            if k != layer:
                if not torch.equal(w.value_at(t_new, sim.dtype).expand_as(sim.D), sim.D):
                    return j
                layer = k
        return limit

    # -- the call --------------------------------------------------------------------------------
    def _draws(self, source, k: int, z: torch.Tensor | None, ndim: int) -> tuple[np.ndarray, object]:
        """The block's standard normals from ``source`` (k calls of ``next()``, as the Python loop makes them)
        and the stream's state before them; a placeholder without a source."""
        if source is None or k == 0:
            return _dummy(ndim, self.np_dtype), None
        if z is not None:  # one step's draws, shape checked by Simulator.advance
            return np.ascontiguousarray(z.detach().to(self.sim.dtype).numpy()[None]), None
        state = source.state_dict()
        return np.ascontiguousarray(np.stack([source.next().numpy() for _ in range(k)])), state

    @staticmethod
    def _rewind(source, state, steps: int) -> None:
        """Put a stream back to where ``steps`` draws from ``state`` leave it."""
        source.load_state_dict(state)
        for _ in range(steps):
            source.next()

    def run(self, k: int, z: torch.Tensor | None = None) -> Block:
        """Take ``k`` steps (0: only evaluate the current state) and update the simulator.

        ``z`` replaces the weight noise's draws of a single step (``k = 1``), as in
        :meth:`Simulator.step`.
        """
        block = self._run_block(k, z)
        if block.status != ORDERED:
            return block
        self.ordered = True  # a step needs the ordered-pair passes: the full kernel from here on
        rest = self._run_block(k - block.steps, z if block.steps == 0 else None)
        return Block(rest.status, block.steps + rest.steps, rest.x_bad, rest.D_bad)

    def _run_block(self, k: int, z: torch.Tensor | None) -> Block:
        """One call of the compiled loop with the kernel variant :attr:`ordered` (see :meth:`run`)."""
        sim = self.sim
        model, w = sim.model, sim.model.weights
        P, n, H = sim.P, sim.n, sim.H
        t0 = time.perf_counter()
        zs, zstate = self._draws(sim.noise if self.stochastic else None, k, z, 5)
        ztok, tstate = self._draws(sim.token_noise, k, None, 4)
        if self.proc == PROC_OSCILLATING:
            Fo = np.stack(
                [
                    w.forcing_at(sim.t0 + (sim.step_index + j) * sim.dt, H, sim.dtype).numpy()
                    for j in range(k + 1)
                ]
            )
        else:
            Fo = _dummy(4, self.np_dtype)
        led = sim.ledger
        acc = np.stack(
            [led.acc[name].numpy() for name in ("int_dtE", "int_G2", "int_Ghat2", "martingale", "jumps")]
        )
        have_E0 = led.E0 is not None
        E0 = led.E0.numpy().copy() if have_E0 else np.zeros(P)
        have_fe = sim.evaluation is not None and self._fe_arrays is not None
        fe_in = self._fe_arrays if have_fe else (
            _dummy(3, np.float64), _dummy(3, np.float64), _dummy(1, np.float64), _dummy(1, np.float64),
            _dummy(1, np.float64), _dummy(2, np.float64), _dummy(2, np.float64), _dummy(4, np.float64),
            _dummy(3, np.float64), _dummy(3, np.float64),
        )  # fmt: skip
        ovf = np.array([-1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
        ih, ch, nh = work_items(P, H, n, True)
        io, co, no = work_items(P, H, n, bool(model.causal))
        status, done, x, D, x_bad, D_bad, fe, r0, r1, have_E0, have_final = _RUN[self.parallel](
            np.ascontiguousarray(sim.x.numpy()), np.ascontiguousarray(sim.D.numpy()), self.V, self.has_v,
            sim.t0, sim.step_index, sim.dt, k, float(model.sign), float(model.beta), pair_norm(H, n),
            bool(model.causal), sim.ledger_on, bound_range(self.np_dtype), numba_backend.SCORE_MAX,
            ih, ch, nh, io, co, no,
            self.proc, self.rate, self.F, Fo, self.stochastic, self.ito, self.g, self.noise_sym,
            self.layer_t0, self.eps, zs, ztok, acc, E0, have_E0, fe_in, have_fe,
            float(np.finfo(self.np_dtype).tiny), ovf, self.ordered,
        )  # fmt: skip
        if done < k:
            # the streams give back the draws of the steps not taken; a step that became non-finite took its
            # draws, as in the Python loop (which draws before it checks)
            used = done + 1 if status == NONFINITE else done
            if zstate is not None:
                self._rewind(sim.noise, zstate, used)
            if tstate is not None:
                self._rewind(sim.token_noise, tstate, used)
        if sim.ledger_on:
            names = ("int_dtE", "int_G2", "int_Ghat2", "martingale", "jumps")
            led.load_state_dict(
                {
                    "acc": {name: torch.from_numpy(acc[i].copy()) for i, name in enumerate(names)},
                    "E0": led.E0 if led.E0 is not None else torch.from_numpy(E0.copy()) if have_E0 else None,
                },
                sim.device,
            )
            if ovf[0] >= 0:
                bad = [name for name, flag in zip(("energy", "G2", "Ghat2"), ovf[1:4], strict=True) if flag]
                step = int(ovf[0])
                why = overflow_message(bad, float(ovf[4]), bool(ovf[5]))
                led.warn_overflow(why, sim.t0 + step * sim.dt, step)
        if have_final:
            self._fe_arrays = fe
            evaluation = self._field_eval(fe)
            rates = (torch.from_numpy(r0.copy()), torch.from_numpy(r1.copy())) if sim.ledger_on else None
        else:
            self._fe_arrays = evaluation = rates = None
        sim.take_state(
            torch.from_numpy(x) if done > 0 else None,
            torch.from_numpy(D) if done > 0 else None,
            done,
            evaluation,
            rates,
        )
        if done > 0 and status == OK:
            self.seconds_per_step = (time.perf_counter() - t0) / done
        if status == NONFINITE:
            return Block(status, done, torch.from_numpy(x_bad), torch.from_numpy(D_bad))
        return Block(status, done)

    def _field_eval(self, fe: tuple) -> FieldEval:
        vel, grad, energy, G2, Ghat2, head_mass, ito_m, C, row_shift, rsum = fe
        out = FieldEval(
            velocity=torch.from_numpy(vel.astype(self.np_dtype)),
            lse=torch.from_numpy((row_shift + np.log(rsum)).astype(self.np_dtype)),
        )
        if self.sim.ledger_on:
            t = torch.from_numpy
            out.energy, out.G2, out.Ghat2, out.grad = t(energy), t(G2), t(Ghat2), t(grad)
            out.second_moment, out.head_mass = t(C), t(head_mass)
            if self.stochastic:
                out.ito_moment, out.ito_full = t(ito_m), t(head_mass)
        return out
