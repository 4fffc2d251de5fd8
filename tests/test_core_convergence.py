"""Convergence order of every integrator against a fine independent reference (STYLE rule 12).

Reference: scipy ``solve_ivp`` (DOP853, rtol = atol = 1e-13) of the full-state ODE written here in
NumPy, independently of attnflow:

* frozen weights, two distinct heads, non-symmetric D, separate V;
* oscillating weights (NOTES §2, per-head phases 2 pi h / H): the coupled ODE on the joint state
  (x, D), D_h' = F(t + phi_h) - D_h.

The error at T = 1 (max over tokens and coordinates, plus heads in the coupled case) is computed
for dt halved three times, and the slope of log(error) against log(dt) is fitted by least squares.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose
from reference.forcing import forcing_s2
from reference.formulas import attention_field
from scipy.integrate import solve_ivp

import attnflow as af
from attnflow.integrators import INTEGRATORS

N, DIM, H, BETA, T = 5, 3, 2, 1.0, 1.0
# dt sequences chosen so that every error lies between ~1e-10 (well above the reference's 1e-13
# and the float64 round-off) and ~1e-2 (asymptotic regime).
DTS = {
    "euler": (0.04, 0.02, 0.01, 0.005),
    "euler_printed": (0.04, 0.02, 0.01, 0.005),
    "heun": (0.1, 0.05, 0.025, 0.0125),
    "rk4": (0.2, 0.1, 0.05, 0.025),
}


def _velocity(X: np.ndarray, D: np.ndarray, V: np.ndarray | None) -> np.ndarray:
    """(1/H) sum_h P_perp(x_i) sum_j softmax_j(beta <x_i, D_h x_j>) V_h x_j, at X normalised."""
    return attention_field(X / np.linalg.norm(X, axis=1, keepdims=True), D, V, BETA)


def _reference(x0, D0, V, sign: float, oscillating: bool):
    n, d = x0.shape
    H = D0.shape[0]

    def rhs(t, y):
        X = y[: n * d].reshape(n, d)
        D = y[n * d :].reshape(H, d, d)
        dx = sign * _velocity(X, D, V)
        if oscillating:
            dD = np.stack([forcing_s2(t + 2 * np.pi * h / H) for h in range(H)]) - D
        else:
            dD = np.zeros_like(D)
        return np.concatenate([dx.ravel(), dD.ravel()])

    y0 = np.concatenate([x0.ravel(), D0.ravel()])
    sol = solve_ivp(rhs, (0.0, T), y0, method="DOP853", rtol=1e-13, atol=1e-13)
    assert sol.success
    y = sol.y[:, -1]
    X = y[: n * d].reshape(n, d)
    return X / np.linalg.norm(X, axis=1, keepdims=True), y[n * d :].reshape(H, d, d)


def _case(oscillating: bool, N: int = N, H: int = H):
    x0 = af.tokens.uniform(1, N, DIM, seed=21)
    if oscillating:
        D0 = af.heads.symmetric_gaussian(1, H, DIM, seed=21) * 0.5
        return x0, D0, None, af.Oscillating(forcing="s2", phases="per_head")
    D0 = af.heads.gaussian(1, H, DIM, seed=22)
    V = af.heads.gaussian(1, H, DIM, seed=23)
    return x0, D0, V, af.Constant()


def _error(
    integrator: str, dt: float, x0, D0, V, weights, direction: str, backend: str, ref
) -> tuple[float, float]:
    model = af.TransformerModel(direction=direction, beta=BETA, weights=weights, backend=backend)
    sim = af.Simulator(model, x0, D0, dt=dt, values=V, integrator=integrator, ledger=False)
    sim.run(int(round(T / dt)))
    assert sim.t == pytest.approx(T, abs=1e-12)
    ex = np.abs(sim.x.numpy()[0] - ref[0]).max()
    eD = np.abs(sim.D.numpy()[0] - ref[1]).max()
    return ex, eD


@pytest.mark.parametrize("integrator", list(DTS))
@pytest.mark.parametrize(
    "oscillating,direction,backend",
    [(False, "ascent", "torch"), (True, "descent", "torch"), (True, "ascent", "auto")],
)
def test_convergence_order(integrator: str, oscillating: bool, direction: str, backend: str) -> None:
    x0, D0, V, weights = _case(oscillating)
    sign = af.TransformerModel(direction=direction).sign
    ref = _reference(x0.numpy()[0], D0.numpy()[0], None if V is None else V.numpy()[0], sign, oscillating)
    dts = np.array(DTS[integrator])
    both = np.array([_error(integrator, dt, x0, D0, V, weights, direction, backend, ref) for dt in dts])
    order = INTEGRATORS[integrator].order
    # Tokens and (when they move) heads separately: the head error of the linear weight ODE must
    # not mask the token error.
    for part, errs in zip(("tokens", "heads"), both.T, strict=True):
        if not oscillating and part == "heads":
            assert_allclose(errs, 0.0, atol=0)  # frozen weights stay exactly frozen
            continue
        slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
        # The band: over these dt the error is C dt^p (1 + O(dt)); the measured slopes lie within
        # 0.05 of p for every integrator and case, and 0.15 still separates p from p +- 1 (a wrong
        # stage weight, a missing retraction or a first-order weight update inside RK4 shows as a
        # slope change of at least 1).
        assert abs(slope - order) < 0.15, (part, slope, errs)
        assert errs[-1] < {1: 1e-2, 2: 1e-4, 4: 1e-7}[order], (part, errs)
        # the local ratios agree with the global slope (no kink hidden by the fit)
        assert_allclose(np.log2(errs[:-1] / errs[1:]), order, atol=0.3, err_msg=part)


@pytest.mark.slow
@pytest.mark.parametrize("integrator", list(DTS))
def test_convergence_order_at_larger_sizes(integrator: str) -> None:
    # The claim of test_convergence_order on the coupled oscillating case with 96 tokens and 12 heads
    # (per-head phases), dt halved four times (2 s each): measured slopes 1.00-1.005, 2.02-2.04 and
    # 4.04-4.05; same band and reasoning as there.
    x0, D0, V, weights = _case(True, N=96, H=12)
    ref = _reference(x0.numpy()[0], D0.numpy()[0], None, -1.0, True)
    dts = np.array([*DTS[integrator], DTS[integrator][-1] / 2])
    both = np.array([_error(integrator, dt, x0, D0, V, weights, "descent", "torch", ref) for dt in dts])
    order = INTEGRATORS[integrator].order
    for part, errs in zip(("tokens", "heads"), both.T, strict=True):
        slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
        assert abs(slope - order) < 0.15, (part, slope, errs)
        assert_allclose(np.log2(errs[:-1] / errs[1:]), order, atol=0.3, err_msg=part)


def test_declared_orders_are_the_measured_orders() -> None:
    # The order each integrator declares is what a measurement gives: the slope of log(error)
    # against log(dt) on the frozen-weights case, three step sizes, rounded to the nearest integer
    # (a slope within 0.5 of the truth is measured 0.05 from it above), and the methods' textbook
    # orders (projected Euler 1, printed Euler 1, Heun 2, RK4 4).
    x0, D0, V, weights = _case(False)
    ref = _reference(x0.numpy()[0], D0.numpy()[0], V.numpy()[0], 1.0, False)
    measured = {}
    for name, dts in DTS.items():
        errs = [_error(name, dt, x0, D0, V, weights, "ascent", "torch", ref)[0] for dt in dts[:3]]
        measured[name] = round(float(np.polyfit(np.log(dts[:3]), np.log(errs), 1)[0]))
    assert measured == {name: INTEGRATORS[name].order for name in DTS}  # Lie/JKO: test_lie_integrators
    assert measured == {"euler": 1, "euler_printed": 1, "heun": 2, "rk4": 4}


def test_projected_and_printed_euler_differ_at_finite_dt_only() -> None:
    # Same ODE (order 1 each) but distinct schemes: one step differs by O(dt^2), not by O(dt).
    x0, D0, _, _ = _case(True)
    model = af.TransformerModel(direction="ascent", backend="torch")
    diffs = []
    for dt in (0.02, 0.01):
        xs = []
        for integ in ("euler", "euler_printed"):
            sim = af.Simulator(model, x0, D0, dt=dt, integrator=integ, ledger=False)
            sim.step()
            xs.append(sim.x.numpy())
        diffs.append(np.abs(xs[0] - xs[1]).max())
    assert diffs[1] > 0
    assert_allclose(math.log2(diffs[0] / diffs[1]), 2.0, atol=0.1)
