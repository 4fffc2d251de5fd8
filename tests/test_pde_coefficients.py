"""The kernel sums as matrices on spherical-harmonic coefficients (``attnflow.pde.coefficients``) against
the compiled quadrature and the NumPy reference, the truncation rule, and the solver's choice of method."""

from __future__ import annotations

import numpy as np
import pytest

from attnflow.model.transformer import TransformerModel
from attnflow.model.weights import Constant, Oscillating
from attnflow.pde import kernel_radius, make_grid, minimum_band_limit
from attnflow.pde.coefficients import KernelOperator, coefficient_band, from_real, to_real
from attnflow.pde.field import density_field
from attnflow.pde.initial import von_mises_fisher_mixture
from attnflow.pde.solver import DensitySolver

L = 10
NAMES = ("velocity", "grad_phi", "phi")


def _setup(symmetric: bool, seed: int = 4):
    g = make_grid(3, L)
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, 3))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    u0 = von_mises_fisher_mixture(g, centres, 4.0)
    heads = rng.normal(size=(2, 3, 3))
    if symmetric:
        heads = (heads + np.swapaxes(heads, 1, 2)) / 2
    heads = 1.2 * heads / np.linalg.norm(heads, 2, axis=(1, 2))[:, None, None]  # r = 1.2: L = 10 admits it
    return g, u0, heads


def _rel(a, b) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("attention", ["softmax", "usa"])
def test_field_matches_compiled_and_numpy_quadrature(symmetric, attention):
    g, u0, heads = _setup(symmetric)
    u = g.synthesis(u0)
    op = KernelOperator(g, heads, 1.3)
    assert op.symmetric == symmetric and (op.phi_map is None) == symmetric
    # parity: even degrees map to even, odd to odd; the entries between are round-off of the quadrature
    for blocks in (op.heads_map, op.phi_map or op.heads_map):
        assert blocks.leak <= 1e-13
    b = op.field(u0, u, attention=attention, sign=-1.0)
    kw = dict(beta=1.3, attention=attention, sign=-1.0, kernel="quadrature")
    for q in ("numba", "numpy"):
        a = density_field(g.points, g.weights, u, heads, quadrature=q, **kw)
        # the output band (rule with COEF_TOL = 1e-14) leaves a truncation below round-off; the matrices
        # sum ~500 terms of size up to e^r (r = 1.6) and the gradient multiplies degree l by up to
        # sqrt(l(l+1)) ~ 17: measured ~1e-13 relative, 2e-12 leaves a margin of ~20
        for name in NAMES:
            assert _rel(getattr(b, name), getattr(a, name)) <= 2e-12, (q, name)
        for name in ("energy", "token_rate"):
            assert abs(getattr(b, name) - getattr(a, name)) <= 2e-12 * abs(getattr(a, name)), (q, name)
        assert b.heads_rate == 0.0


def test_truncation_error_within_the_band_rule():
    g, u0, heads = _setup(True)
    u = g.synthesis(u0)
    r = kernel_radius(heads, 1.0)
    a = density_field(g.points, g.weights, u, heads, beta=1.0, attention="softmax", sign=1.0)
    errs = []
    for tol in (1e-2, 1e-4, 1e-6):
        Lp = minimum_band_limit(r, 3, tol)
        b = KernelOperator(g, heads, 1.0, out_band=Lp).field(u0, u, attention="softmax", sign=1.0)
        # phi is a sum of kernel row sums of a positive density: the rule bounds its relative error by tol
        err = float((np.abs(b.phi - a.phi) / np.abs(a.phi)).max())
        assert err <= tol, (tol, Lp, err)
        errs.append(err)
    # the truncation is really there (~3e-7 at L' = 6, far above round-off ~1e-15) and shrinks with L'
    assert errs[0] > 1e-9 and errs[0] > errs[1] > errs[2]
    assert coefficient_band(L, heads, 1.0) >= L


def test_real_coordinates_round_trip():
    rng = np.random.default_rng(0)
    g = make_grid(3, 6)
    coef = g.analysis(rng.normal(size=g.points.shape[0]))  # a real function's coefficients
    v = to_real(coef, 6)
    assert v.shape == (49,)
    np.testing.assert_array_equal(from_real(v, 6), coef)


def test_solver_auto_uses_coefficients_for_constant_heads_and_matches_the_compiled_run():
    g, u0, heads = _setup(True)
    model = TransformerModel(direction="ascent", beta=1.0, weights=Constant())
    auto = DensitySolver(model, u0, heads, grid=g, dt=0.02)
    numba = DensitySolver(model, u0, heads, grid=g, dt=0.02, quadrature="numba")
    assert auto.quadrature == "coefficients" and numba.quadrature == "numba"
    assert auto.attrs()["coefficient_band"] >= L and numba.attrs()["coefficient_band"] == -1
    for s in (auto, numba):
        for _ in range(5):
            s.step()
    # five RK4 steps of a smooth flow from fields equal to ~1e-13: the coefficients stay within ~1e-14
    np.testing.assert_allclose(auto.u, numba.u, rtol=0, atol=1e-12)
    assert abs(auto.ledger_integral - numba.ledger_integral) <= 1e-12
    ma, mn = auto.monitors(), numba.monitors()
    for key in ("energy", "residual", "dissipation", "cfl"):
        assert abs(ma[key] - mn[key]) <= 1e-11 * max(1.0, abs(mn[key])), key


def test_solver_auto_falls_back_where_heads_move_or_on_the_circle(monkeypatch):
    g, u0, heads = _setup(True)
    model = TransformerModel(direction="ascent", beta=1.0)
    monkeypatch.setattr("attnflow.pde.solver.COEF_MAX_BYTES", 1000)  # matrices too large for auto
    assert DensitySolver(model, u0, heads, grid=g, dt=0.01).quadrature == "numba"
    assert DensitySolver(model, u0, heads, grid=g, dt=0.01, quadrature="coefficients").quadrature == (
        "coefficients"
    )
    monkeypatch.undo()
    osc = TransformerModel(direction="ascent", beta=1.0, weights=Oscillating(forcing="s2"))
    assert DensitySolver(osc, u0, heads, grid=g, dt=0.01).quadrature == "numba"
    scaled = TransformerModel(direction="ascent", beta=1.0, layer_scaling=1.0)
    assert DensitySolver(scaled, u0, heads, grid=g, dt=0.01).quadrature == "numba"
    g1 = make_grid(2, 12)
    u1 = g1.analysis(np.full(g1.points.shape[0], 1 / (2 * np.pi)))
    model = TransformerModel(direction="ascent", beta=1.0)
    assert DensitySolver(model, u1, np.eye(2), grid=g1, dt=0.01).quadrature == "numba"


def test_coefficients_refused_where_they_do_not_apply():
    g, u0, heads = _setup(True)
    osc = TransformerModel(direction="ascent", beta=1.0, weights=Oscillating(forcing="s2"))
    with pytest.raises(ValueError, match="'coefficients' does not apply: .*constant in time.*Oscillating"):
        DensitySolver(osc, u0, heads, grid=g, dt=0.01, quadrature="coefficients")
    model = TransformerModel(direction="ascent", beta=1.0)
    g1 = make_grid(2, 12)
    u1 = g1.analysis(np.full(g1.points.shape[0], 1 / (2 * np.pi)))
    with pytest.raises(ValueError, match="'coefficients' does not apply: it runs on S\\^2 only"):
        DensitySolver(model, u1, np.eye(2), grid=g1, dt=0.01, quadrature="coefficients")
    with pytest.raises(ValueError, match="coef_tol must lie in \\(0, 1\\): got 0"):
        DensitySolver(model, u0, heads, grid=g, dt=0.01, coef_tol=0)
    with pytest.raises(ValueError, match="unknown quadrature backend 'fast'.*auto, coefficients, numba"):
        DensitySolver(model, u0, heads, grid=g, dt=0.01, quadrature="fast")


def test_operator_refuses_bad_inputs():
    g, _, heads = _setup(True)
    with pytest.raises(ValueError, match="runs on S\\^2 \\(SphereGrid\\): got CircleGrid"):
        KernelOperator(make_grid(2, 8), np.eye(2)[None], 1.0)
    with pytest.raises(ValueError, match="heads must have shape \\(H, 3, 3\\): got \\(3, 3\\)"):
        KernelOperator(g, np.eye(3), 1.0)
    with pytest.raises(ValueError, match="out_band must be an integer >= 1: got 0"):
        KernelOperator(g, heads, 1.0, out_band=0)


def test_other_heads_than_the_matrices_fall_back_to_the_compiled_quadrature():
    g, u0, heads = _setup(True)
    model = TransformerModel(direction="ascent", beta=1.0)
    s = DensitySolver(model, u0, heads, grid=g, dt=0.02)
    ref = DensitySolver(model, u0, 0.5 * heads, grid=g, dt=0.02, quadrature="numba")
    sd = s.state_dict()
    sd["D"] = ref.D.clone()  # a checkpoint with other heads: the matrices no longer describe them
    s.load_state_dict(sd)
    s.step()
    ref.step()
    # the same compiled sums on the same state: equal to round-off
    np.testing.assert_allclose(s.u, ref.u, rtol=0, atol=1e-14)
    assert s._current().tangent is None  # the field came from the quadrature, not the matrices
