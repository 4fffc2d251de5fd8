"""The multi-head objects (observables.multihead, analysis.reduced) against independent references.

* the velocity against the core field (:func:`attnflow.dynamics.field.evaluate_torch`);
* every rate against central finite differences: along the velocity (the O(h^2) retraction error
  cancels in a central difference; h = 1e-5 gives ~1e-10 relative, asserted at 1e-7) and along a
  recorded RK4 trajectory (second-order np.gradient at dt = 2e-3: ~1e-6, asserted at 1e-4);
* the equiangular reduced ODE (scipy solve_ivp, rtol 1e-10) against attnflow RK4 on particles
  (dt = 0.01: measured 1e-10, asserted at 1e-8);
* every refusal with its message.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

import attnflow as af
from attnflow.analysis.reduced import (
    EquiangularModel,
    ReducedModelError,
    critical_beta,
    crossing_time,
    equiangular_particles,
    equiangular_tokens,
)
from attnflow.dynamics.field import evaluate_torch
from attnflow.observables import attention_entropy, head_energies
from attnflow.observables.multihead import (
    HeadEnergyRates,
    attention_entropy_production,
    check_monotonicity,
    head_energy_gradients,
    head_energy_rates,
    head_outputs,
    multihead_velocity,
    radial_shadows,
)

P, N, DIM, H, BETA = 2, 9, 4, 3, 1.3


def _heads(sym: bool, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    z = 0.7 * torch.randn(P, H, DIM, DIM, generator=g, dtype=torch.float64)
    return (z + z.transpose(-1, -2)) / 2 if sym else z


def _orthogonal_heads(seed: int = 0) -> torch.Tensor:
    """M_h = Q_h diag(lam) Q_h^T on disjoint column blocks of one orthogonal Q: M_h M_h' = 0."""
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=torch.float64))
    lam = 1.0 + torch.rand(6, generator=g, dtype=torch.float64)
    return torch.stack(
        [(q[:, 2 * h : 2 * h + 2] * lam[2 * h : 2 * h + 2]) @ q[:, 2 * h : 2 * h + 2].T for h in range(3)]
    )


def _energies(x, D):
    """E_h = sum_ij exp(beta <x_i, D_h x_j>) / (2 beta n^2), written out (any geometry)."""
    s = BETA * torch.einsum("pid,phde,pje->phij", x, D, x)
    return torch.exp(s).sum((-1, -2)) / (2 * BETA * x.shape[1] ** 2)


def _retract(geo):
    return (lambda y: y / y.norm(dim=-1, keepdim=True)) if geo == "sphere" else (lambda y: y)


X = af.tokens.uniform(P, N, DIM, seed=3)
CASES = [(k, g, s) for k in ("usa", "softmax") for g in ("sphere", "flat") for s in (True, False)]


@pytest.mark.parametrize(("kind", "geo", "sym"), CASES)
def test_velocity_is_the_core_field(kind, geo, sym):
    D = _heads(sym)
    model = af.TransformerModel(direction="descent", attention=kind, beta=BETA, geometry=geo, backend="torch")
    core = evaluate_torch(model, X, D, None, 0.0, ledger=False).velocity
    mine = multihead_velocity(X, D, BETA, attention=kind, geometry=geo, direction="descent")
    torch.testing.assert_close(mine, -core, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("kind", "geo", "sym"), CASES)
def test_decomposition_sums_to_the_finite_difference(kind, geo, sym):
    D = _heads(sym)
    V = _heads(True, seed=5)  # values different from the scores: the general case
    r = head_energy_rates(X, D, BETA, attention=kind, geometry=geo, values=V)
    v = multihead_velocity(X, D, BETA, attention=kind, geometry=geo, values=V)
    h, ret = 1e-5, _retract(geo)
    fd = (_energies(ret(X + h * v), D) - _energies(ret(X - h * v), D)) / (2 * h)
    assert_allclose(r.per_head.numpy(), fd.numpy(), rtol=1e-7, atol=1e-9 * float(fd.abs().max()))
    assert_allclose(r.energy.numpy(), head_energies(X, D, BETA).numpy(), rtol=1e-13)  # the core's E_h
    if geo == "flat":
        assert float(r.radial_term.abs().max()) == 0.0


def test_head_motion_term_is_the_derivative_in_the_heads():
    D, Dd = _heads(False), _heads(False, seed=9)
    r = head_energy_rates(X, D, BETA, head_rate=Dd)
    h = 1e-6
    fd = (head_energies(X, D + h * Dd, BETA) - head_energies(X, D - h * Dd, BETA)) / (2 * h)
    assert_allclose(r.head_motion.numpy(), fd.numpy(), rtol=1e-7)


@pytest.mark.parametrize("kind", ["usa", "softmax"])
def test_decomposition_along_an_rk4_trajectory(kind):
    D = _heads(True)
    dt = 2e-3
    model = af.TransformerModel(direction="ascent", attention=kind, beta=BETA, backend="torch")
    ds = af.simulate(model, X, D, t1=0.1, dt=dt, integrator="rk4", ledger=False)
    xs = torch.as_tensor(ds.positions.values).permute(1, 0, 2, 3)  # [T, P, n, d]
    E = np.stack([head_energies(x, D, BETA).numpy() for x in xs])
    fd = np.gradient(E, ds.time.values, axis=0, edge_order=2)
    rates = np.stack([head_energy_rates(x, D, BETA, attention=kind).per_head.numpy() for x in xs])
    assert_allclose(rates, fd, rtol=1e-4, atol=1e-5 * np.abs(fd).max())


def test_usa_symmetric_multi_energy_identity_and_orthogonal_heads():
    """[derived] USA, symmetric M: dE_multi/dt = sum_i |P sum_h f^h_i|^2 / (H n^3); orthogonal heads:
    cross terms 0 in both geometries, radial shadows the only possible negative part on the sphere."""
    D = _heads(True)
    r = head_energy_rates(X, D, BETA, attention="usa")
    f = N * head_outputs(X, D, BETA, attention="usa")  # f^h_i = sum_j e^{s_ij} M_h x_j
    s = f.sum(1)
    Ps = s - (s * X).sum(-1, keepdim=True) * X
    assert_allclose(r.multi.numpy(), (Ps.square().sum((-1, -2)) / (H * N**3)).numpy(), rtol=1e-12)
    assert_allclose(head_energy_gradients(X, D, BETA).numpy(), (f / N**2).numpy(), rtol=1e-12)
    x6 = af.tokens.uniform(P, N, 6, seed=4)
    Mo = _orthogonal_heads()
    assert float((Mo[0] @ Mo[1]).abs().max()) < 1e-14
    for geo in ("sphere", "flat"):
        ro = head_energy_rates(x6, Mo, BETA, attention="usa", geometry=geo)
        assert float(ro.cross_term.abs().max()) < 1e-13 * float(ro.self_term.abs().max())
        assert float(ro.self_term.min()) >= 0.0
    ro = head_energy_rates(x6, Mo, BETA, attention="usa")
    u = head_outputs(x6, Mo, BETA, attention="usa")
    sh = radial_shadows(x6, u)  # <r^h, r^h'> = <u^h, x><u^h', x> on unit tokens
    inner = torch.einsum("phid,pkid->phki", sh, sh)
    expect = -(inner.sum(2) - torch.diagonal(inner, dim1=1, dim2=2).permute(0, 2, 1)) / (N * H)  # g = u / n
    assert_allclose(ro.radial_term.numpy(), expect.numpy(), rtol=1e-10, atol=1e-15)


def test_monotonicity_checker_finds_and_explains_the_violation():
    T = 4
    z = torch.zeros(T, 1, 2, 1, dtype=torch.float64)
    self_t = torch.ones(T, 1, 2, 1, dtype=torch.float64)
    radial = z.clone()
    radial[2, 0, 1, 0] = -3.0  # head 1 at time index 2: self 1, radial -3
    rates = HeadEnergyRates(
        torch.zeros(T, 1, 2), self_t, z, radial, torch.zeros(T, 1, 2, dtype=torch.float64)
    )
    rep = check_monotonicity(np.arange(T) * 0.5, rates)
    assert rep.head_monotone.tolist() == [[True, False]]
    assert rep.multi_monotone.tolist() == [False]  # at t = 1.0: head 0 gives 1, head 1 gives 1 - 3
    assert_allclose(rep.multi_worst, [-1.0])
    assert_allclose(rep.multi_worst_relative, [-1.0 / 5.0])
    assert rep.head_worst[0, 1] == -2.0 and rep.head_worst_time[0, 1] == 1.0
    assert rep.head_responsible[0, 1] == "radial_term" and rep.head_responsible[0, 0] == ""
    assert_allclose(rep.head_negative_fraction, [[0.0, 0.25]])
    assert_allclose(rep.head_worst_relative[0, 1], -2.0 / 4.0)
    with pytest.raises(ValueError, match="leading time axis"):
        check_monotonicity(np.arange(T + 1), rates)
    with pytest.raises(ValueError, match="tol must be"):
        check_monotonicity(np.arange(T), rates, tol=-1.0)


@pytest.mark.parametrize("sym", [True, False])
def test_entropy_production_against_finite_differences(sym):
    D = _heads(sym)
    v = multihead_velocity(X, D, BETA)
    Dd = _heads(False, seed=11)
    rate = attention_entropy_production(X, D, v, BETA, head_rate=Dd)
    h, ret = 1e-5, _retract("sphere")
    fd = (
        attention_entropy(ret(X + h * v), D + h * Dd, BETA)
        - attention_entropy(ret(X - h * v), D - h * Dd, BETA)
    ) / (2 * h)
    assert_allclose(rate.numpy(), fd.numpy(), rtol=1e-6, atol=1e-9)


def test_observable_refusals():
    D = _heads(True)
    with pytest.raises(ValueError, match="attention must be one of"):
        head_energy_rates(X, D, BETA, attention="sinkhorn")
    with pytest.raises(ValueError, match="beta must be finite and > 0"):
        head_energy_rates(X, D, 0.0)
    with pytest.raises(ValueError, match="direction must be 'ascent' or 'descent'"):
        head_energy_rates(X, D, BETA, direction="up")
    with pytest.raises(ValueError, match="xdot must be a tensor"):
        attention_entropy_production(X, D, X[:, :2], BETA)
    with pytest.raises(ValueError, match="values have 1 heads"):
        head_energy_rates(X, D, BETA, values=D[:, :1])


# -- the reduced model ------------------------------------------------------------------------------
REDUCED = [
    EquiangularModel(n=8, beta=2.0, a=(1.0, 2.5), w=(0.3, 0.7)),
    EquiangularModel(n=6, beta=1.0, a=(0.8,), attention="usa"),
    EquiangularModel(n=7, beta=1.5, a=(1.0, 2.0), attention="relu"),
]


@pytest.mark.parametrize("model", REDUCED, ids=lambda m: m.attention)
def test_reduced_ode_matches_the_particles(model):
    out = equiangular_particles(model, 0.1, 2.0, 0.01)
    assert out["spread"].max() < 1e-12  # the cloud stays equiangular
    assert_allclose(out["rho"], model.solve(0.1, out["time"]), rtol=0, atol=1e-8)
    if model.attention == "softmax":
        S = model.entropy(out["rho"]).T  # [T, H]
        assert_allclose(out["entropy"], S, atol=1e-10)
        dS = np.gradient(S, out["time"], axis=0, edge_order=2)
        assert_allclose(model.entropy_rate(out["rho"]).T[2:-2], dS[2:-2], rtol=1e-4, atol=1e-7)
        assert (model.entropy_rate(out["rho"]) >= 0).all()


def test_clustering_time_particles_vs_reduced():
    model = EquiangularModel(n=8, beta=2.0, a=(1.0, 2.5), w=(0.3, 0.7))
    T = model.clustering_time(0.1, 0.05)
    out = equiangular_particles(model, 0.1, math.ceil(T) + 0.5, 0.01)
    assert_allclose(crossing_time(out["time"], out["rho"], 0.95), T, rtol=1e-6)
    # the quadrature T = int drho / rho' is an independent reference for the event
    from scipy.integrate import quad

    assert_allclose(quad(lambda r: 1 / model.rate(r), 0.1, 0.95, epsabs=0, epsrel=1e-12)[0], T, rtol=1e-8)
    relu = EquiangularModel(n=8, beta=1.0, attention="relu")
    assert relu.clustering_time(0.0, 0.05, t_max=100.0) == math.inf  # rho = 0 is stationary for ReLU


@pytest.mark.parametrize("model", REDUCED, ids=lambda m: m.attention)
def test_rate_slope_against_finite_differences(model):
    rho, h = np.array([0.1, 0.4, 0.8]), 1e-5
    fd = (model.rate(rho + h) - model.rate(rho - h)) / (2 * h)
    assert_allclose(model.rate_slope(rho), fd, rtol=1e-8)
    assert_allclose(
        model.linear_rate(0.3, rho_lin=0.1), model.rate(0.1) + 0.2 * model.rate_slope(0.1), rtol=1e-14
    )


def test_critical_beta_is_the_inflection_and_the_balance():
    n, rho, beta = 32, 0.2, 1.7
    a_c = math.log(n - 1) / (beta * (1 - rho))
    assert_allclose(critical_beta(n, a_c, rho), beta, rtol=1e-14)
    m = EquiangularModel(n=n, beta=beta, a=(a_c,))
    assert_allclose(m.self_weight(rho), (n - 1) * m.off_weight(rho), rtol=1e-12)  # self = off-diagonal total

    def g(a):
        return 1.0 / (np.exp(beta * a * (1 - rho)) + n - 1)

    h = 1e-3
    curv = [g(a + h) - 2 * g(a) + g(a - h) for a in (0.9 * a_c, 1.1 * a_c)]
    assert curv[0] < 0 < curv[1]


def test_equiangular_tokens():
    x = equiangular_tokens(5, -0.2)
    G = x @ x.T
    assert_allclose(G.numpy(), (1.2 * np.eye(5) - 0.2).tolist(), atol=1e-14)


def test_reduced_refusals():
    with pytest.raises(ReducedModelError, match=r"beta must be > 0.*got beta=0.*e\.g\. beta=1\.0"):
        EquiangularModel(n=8, beta=0.0)
    with pytest.raises(ReducedModelError, match=r"beta must be > 0.*got beta=-1"):
        EquiangularModel(n=8, beta=-1)
    with pytest.raises(ReducedModelError, match=r"n must be an integer >= 2.*got n=1.*e\.g\. n=32"):
        EquiangularModel(n=1, beta=1.0)
    with pytest.raises(ReducedModelError, match=r"one weight per head: got len\(w\)=3 for len\(a\)=2"):
        EquiangularModel(n=8, beta=1.0, a=(1.0, 2.0), w=(0.2, 0.3, 0.5))
    with pytest.raises(ReducedModelError, match=r"sum to 1: got w=\(0\.5, 0\.6\).*normalise them"):
        EquiangularModel(n=8, beta=1.0, a=(1.0, 2.0), w=(0.5, 0.6))
    with pytest.raises(ReducedModelError, match=r"a_h must be > 0"):
        EquiangularModel(n=8, beta=1.0, a=(1.0, -2.0))
    with pytest.raises(ReducedModelError, match=r"rho0 must lie in \(-1/\(n-1\), 1\)"):
        EquiangularModel(n=8, beta=1.0).clustering_time(-0.5)
    with pytest.raises(ReducedModelError, match="attention must be one of"):
        EquiangularModel(n=8, beta=1.0, attention="sigmoid")
