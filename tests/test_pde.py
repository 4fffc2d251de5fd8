"""The mean-field PDE solver (attnflow.pde): spectral grids, the density field against scipy quadrature,
closed forms (energies of the uniform state, linear growth rates, stationarity), the energy ledger's order,
mass and positivity, heads' paths shared with the particle simulator, particles against the PDE, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

import attnflow as af
from attnflow.observables.density import smoothed_l2_distance, wasserstein2_to_density
from attnflow.observables.transport import wasserstein2
from attnflow.pde import (
    CircleGrid,
    DensitySolver,
    SphereGrid,
    check_band_limit,
    critical_noise,
    density_field,
    density_from_function,
    density_from_particles,
    make_grid,
    minimum_band_limit,
    mode_growth_rate,
    sample_density,
    solve_density,
    von_mises_fisher_mixture,
)

RNG = np.random.default_rng(0)


def _random_coef(grid):
    a = RNG.standard_normal(grid.degree.size) + 1j * RNG.standard_normal(grid.degree.size)
    a[: (grid.L + 1 if grid.d == 3 else 1)] = a[: (grid.L + 1 if grid.d == 3 else 1)].real
    return a


def _coef(ds, k=-1):
    c = ds.coefficients.values[k]
    return c[:, 0] + 1j * c[:, 1]


def _uniform(grid):
    return density_from_function(grid, lambda x: np.ones(x.shape[0]))


def _s1_mixture(grid):
    ang = np.array([0.0, 2.2, 4.0])
    return von_mises_fisher_mixture(grid, np.stack([np.cos(ang), np.sin(ang)], 1), 6.0, [0.5, 0.3, 0.2])


# -- grids -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("grid", [CircleGrid(7), SphereGrid(7)])
def test_grid_round_trip_laplacian_and_mass(grid):
    a = _random_coef(grid)
    v = grid.synthesis(a)
    np.testing.assert_allclose(grid.analysis(v), a, atol=1e-13)
    # div(grad f) = Laplacian f = -k^2 f or -l(l+1) f (dealiased divergence of an exact gradient)
    np.testing.assert_allclose(grid.divergence(grid.gradient(a)), grid.laplacian * a, atol=1e-11)
    np.testing.assert_allclose(np.einsum("nd,nd->n", grid.gradient(a), grid.points), 0, atol=1e-12)
    np.testing.assert_allclose(grid.mass(a), grid.integrate(v), rtol=1e-13)
    np.testing.assert_allclose(grid.evaluate(a, grid.points), v, atol=1e-11)


def test_sphere_gradient_closed_form():
    # f = z has surface gradient e_z - z x (independent closed form)
    g = SphereGrid(5)
    a = g.analysis(g.points[:, 2])
    want = np.array([0, 0, 1.0])[None] - g.points[:, 2:3] * g.points
    np.testing.assert_allclose(g.gradient(a), want, atol=1e-13)


# -- field -----------------------------------------------------------------------------------------


def test_circle_field_against_scipy_quadrature():
    # a non-symmetric head, softmax: velocity and energy against scipy.integrate.quad (adaptive, 1e-13)
    L = 24
    g = CircleGrid(L)
    u = _s1_mixture(g)
    D = np.array([[1.2, 0.5], [-0.2, 0.7]])
    beta = 1.3
    f = density_field(g.points, g.weights, g.synthesis(u), D[None], beta=beta, attention="softmax", sign=1.0)

    def dens(p):
        return float(g.evaluate(u, np.array([[math.cos(p), math.sin(p)]]))[0])

    for i in (0, 17, 40):
        x = g.points[i]

        def kern(p, comp, x=x):
            y = np.array([math.cos(p), math.sin(p)])
            w = math.exp(beta * x @ D @ y) * dens(p)
            return w if comp < 0 else w * (D @ y)[comp]

        Z = integrate.quad(kern, 0, 2 * math.pi, args=(-1,), epsabs=1e-13, limit=200)[0]
        W = np.array(
            [integrate.quad(kern, 0, 2 * math.pi, args=(c,), epsabs=1e-13, limit=200)[0] for c in (0, 1)]
        )
        W = W / Z
        v = W - (W @ x) * x
        np.testing.assert_allclose(f.velocity[i], v, atol=1e-11)


def test_fft_kernel_equals_quadrature_and_refuses_non_invariant_heads():
    g = CircleGrid(20)
    u = g.synthesis(_s1_mixture(g))
    D = np.array([[[0.9, -0.4], [0.4, 0.9]], [[1.5, 0.0], [0.0, 1.5]]])
    kw = dict(beta=1.7, attention="softmax", sign=-1.0, heads_dot=0.3 * D)
    a = density_field(g.points, g.weights, u, D, kernel="fft", **kw)
    b = density_field(g.points, g.weights, u, D, kernel="quadrature", **kw)
    np.testing.assert_allclose(a.velocity, b.velocity, atol=1e-13)
    np.testing.assert_allclose(
        [a.energy, a.token_rate, a.heads_rate], [b.energy, b.token_rate, b.heads_rate], rtol=1e-12
    )
    with pytest.raises(ValueError, match="kernel='fft' needs S\\^1 heads that commute with rotations"):
        density_field(
            g.points,
            g.weights,
            u,
            np.array([[[1.0, 0.2], [0.2, 0.5]]]),
            kernel="fft",
            **{**kw, "heads_dot": None},
        )


@pytest.mark.parametrize("d", [2, 3])
def test_uniform_energy_closed_form_and_stationarity(d):
    # E = (1/(2 beta)) <exp(beta a <x, y>)> over the uniform law: I_0(beta a) on S^1, sinh(z)/z on S^2
    beta, a = 1.4, 1.1
    g = make_grid(d, 12)
    z = beta * a
    want = (special.iv(0, z) if d == 2 else math.sinh(z) / z) / (2 * beta)
    model = af.TransformerModel(direction="ascent", beta=beta)
    ds = solve_density(DensitySolver(model, _uniform(g), a * np.eye(d), grid=g, dt=0.02), 25, record_every=25)
    np.testing.assert_allclose(ds.energy.values, want, rtol=1e-13)
    np.testing.assert_allclose(ds.density.values[-1], 1 / g.area, atol=1e-14)


@pytest.mark.parametrize("d,L", [(2, 12), (3, 10)])
@pytest.mark.parametrize("attention", ["softmax", "usa"])
@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_linear_growth_rate_closed_form(d, L, attention, eps):
    beta, a, amp = 1.5, 0.8, 1e-7
    g = make_grid(d, L)

    def f(x):
        return 1 + amp * (x[:, 0] if d == 2 else x[:, 2])

    u0 = density_from_function(g, f)
    model = af.TransformerModel(direction="ascent", attention=attention, beta=beta)
    ds = solve_density(DensitySolver(model, u0, a * np.eye(d), grid=g, dt=0.02, eps=eps), 25, record_every=25)
    got = math.log(abs(ds.coefficients.values[-1, 1, 0]) / abs(ds.coefficients.values[0, 1, 0])) / 0.5
    want = mode_growth_rate(1, d=d, beta=beta, a=a, attention=attention, eps=eps)
    # RK4 error (rate dt)^4 / 120 ~ 1e-11 and the quadratic coupling ~ amp: 1e-6 relative is a safe band
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_critical_noise_separates_growth_from_decay():
    ec = critical_noise(d=3, beta=2.0, a=1.0)
    assert (
        mode_growth_rate(1, d=3, beta=2.0, eps=0.99 * ec)
        > 0
        > mode_growth_rate(1, d=3, beta=2.0, eps=1.01 * ec)
    )
    np.testing.assert_allclose(
        ec, special.spherical_in(1, 2.0) / (2.0 * special.spherical_in(0, 2.0)), rtol=1e-13
    )


# -- ledger, mass, positivity ----------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.0, 0.05])
def test_energy_ledger_closes_at_fourth_order(eps):
    g = CircleGrid(40)
    u0 = _s1_mixture(g)
    model = af.TransformerModel(direction="descent", beta=1.0, weights=af.Oscillating(forcing="s1"))
    D = np.array([[[1.5, 0.4], [0.4, 0.6]], [[0.8, -0.5], [0.5, 0.8]]])  # one non-symmetric head
    dts, res = [0.05, 0.025, 0.0125], []
    for dt in dts:
        ds = solve_density(
            DensitySolver(model, u0, D, grid=g, dt=dt, eps=eps), round(0.5 / dt), record_every=1000
        )
        res.append(abs(float(ds.residual.values[-1])))
        np.testing.assert_allclose(ds.mass.values, 1.0, atol=1e-13)  # divergence form: exact
    slope = np.polyfit(np.log(dts), np.log(res), 1)[0]
    assert 3.6 < slope < 4.4, (res, slope)  # RK4 on (u, D, ledger); band +-0.4 for the pre-asymptotic range


def test_positivity_is_monitored():
    g = CircleGrid(12)
    u0 = _s1_mixture(CircleGrid(12))
    model = af.TransformerModel(direction="ascent", beta=1.0)
    ds = solve_density(
        DensitySolver(model, u0, 4.0 * np.eye(2), grid=CircleGrid(30), dt=0.01)
        if False
        else DensitySolver(model, u0, 0.5 * np.eye(2), grid=g, dt=0.01),
        10,
        record_every=5,
    )
    fine = g.fine(_coef(ds), 2)[2]
    np.testing.assert_allclose(ds.min_density.values[-1], fine.min(), rtol=1e-13)
    np.testing.assert_allclose(ds.negative_mass.values[-1], 0.0, atol=0)


# -- heads, determinism, particles ---------------------------------------------------------------


def test_stochastic_heads_follow_the_particle_simulators_path_and_are_deterministic(monkeypatch):
    # issue 30: g sqrt(dt) has one home (model.weights.noise_scale, eq. (10)); the solver calls it once a step
    # with the step's dt (an inline copy of the formula would leave the spy uncalled)
    from attnflow.model import weights
    from attnflow.pde import solver as solver_module

    calls = []

    def spy(g, dt):
        calls.append(dt)
        return weights.noise_scale(g, dt)

    monkeypatch.setattr(solver_module, "noise_scale", spy)
    g = CircleGrid(16)
    u0 = _s1_mixture(g)
    w = af.OrnsteinUhlenbeck(sigma2=0.5)
    model = af.TransformerModel(direction="ascent", beta=1.0, weights=w)
    D0 = np.array([[[1.0, 0.2], [0.2, 0.8]]])
    runs = [
        solve_density(DensitySolver(model, u0, D0, grid=g, dt=0.05, seed=7), 10, record_every=10)
        for _ in range(2)
    ]
    np.testing.assert_array_equal(runs[0].density.values, runs[1].density.values)
    assert calls == [0.05] * 20  # two runs of 10 steps
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="the extra stages buy no accuracy"):
        sim = af.simulate(
            model, x, torch.tensor(D0), t1=0.5, dt=0.05, integrator="rk4", seed=7, record_heads=True
        )
    np.testing.assert_allclose(runs[0].heads.values[-1], sim.heads.values[0, -1], atol=1e-13)
    # the noise moves the energy by jumps, booked in the ledger: the residual stays at the RK4 level
    assert abs(float(runs[0].jumps.values[-1])) > 1e-4
    assert abs(float(runs[0].residual.values[-1])) < 1e-6


def test_particles_approach_the_pde():
    # 4000 particles from u0 against the PDE at t = 0.5 (oscillating heads): the smoothed L2 distance stays
    # at the sampling level c n^-1/2 of t = 0, and the density did move (u_T is far from u_0 at this level)
    g = CircleGrid(48)
    u0 = _s1_mixture(g)
    model = af.TransformerModel(
        direction="ascent", beta=1.0, weights=af.Oscillating(forcing="s1"), backend="torch"
    )
    D = np.array([[[1.5, 0.4], [0.4, 0.6]], [[0.8, -0.5], [0.5, 0.8]]])
    uT = _coef(solve_density(DensitySolver(model, u0, D, grid=g, dt=0.01), 50, record_every=50))
    x0 = sample_density(g, u0, 4000, seed=3)
    xT = af.simulate(
        model,
        torch.from_numpy(x0),
        torch.tensor(D),
        t1=0.5,
        dt=0.025,
        integrator="heun",
        record_every=20,
        ledger=False,
    ).positions.values[0, -1]
    d0, dT = smoothed_l2_distance(x0, g, u0, 20.0), smoothed_l2_distance(xT, g, uT, 20.0)
    wrong = smoothed_l2_distance(xT, g, u0, 20.0)  # against the initial density: must be clearly worse
    assert dT < 2.0 * d0 + 0.005, (d0, dT)
    assert wrong > 3 * dT, (wrong, dT)


# -- initial densities, sampling, distances --------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3])
def test_kernel_smoothing_of_one_particle_is_the_von_mises_density(d):
    kappa = 4.0
    g = make_grid(d, 40)
    mu = np.eye(d)[:1]
    u = density_from_particles(g, mu, kappa)
    x = g.points
    if d == 2:
        want = np.exp(kappa * x[:, 0]) / (2 * math.pi * special.iv(0, kappa))
    else:
        want = kappa / (4 * math.pi * math.sinh(kappa)) * np.exp(kappa * x[:, 0])
    np.testing.assert_allclose(g.synthesis(u), want, atol=1e-12)


def test_samples_follow_the_density():
    g = CircleGrid(24)
    u = _s1_mixture(g)
    th = np.linspace(0, 2 * math.pi, 4001)
    pdf = g.evaluate(u, np.stack([np.cos(th), np.sin(th)], 1))
    cdf = integrate.cumulative_trapezoid(pdf, th, initial=0)
    x = sample_density(g, u, 5000, seed=11)
    ang = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * math.pi)
    res = stats.kstest(ang, lambda t: np.interp(t, th, cdf))
    assert res.pvalue > 0.01  # fixed seed: deterministic
    np.testing.assert_array_equal(x, sample_density(g, u, 5000, seed=11))


def test_w2_to_density_equals_exact_ot():
    g = CircleGrid(6)
    pts, w, v = g.fine(_uniform(g), 2)
    x = sample_density(g, _s1_mixture(g), 60, seed=1)
    # uniform quadrature measure = a uniform cloud of its nodes: compare with the emd of transport.py
    want = wasserstein2(torch.from_numpy(x), torch.from_numpy(pts)).item()
    np.testing.assert_allclose(wasserstein2_to_density(x, pts, w, v), want, rtol=1e-6)
    # S^2: with equal weights the quadrature measure is the uniform cloud of the nodes
    gs = SphereGrid(4)
    pts = gs.points
    xs = sample_density(gs, _uniform(gs), 40, seed=2)
    want = wasserstein2(torch.from_numpy(xs), torch.from_numpy(pts)).item()
    ones = np.ones(pts.shape[0])
    np.testing.assert_allclose(wasserstein2_to_density(xs, pts, ones, ones), want, rtol=1e-10)


# -- errors ----------------------------------------------------------------------------------------


def test_band_limit_refused_with_the_minimum():
    need = minimum_band_limit(1.5 * 2.0, 3)
    assert need == check_band_limit(need, 2.0 * np.eye(3)[None], 1.5, 3)
    with pytest.raises(ValueError, match=f"band limit L = {need - 1} is too small .* needs L >= {need}"):
        check_band_limit(need - 1, 2.0 * np.eye(3)[None], 1.5, 3)
    g = make_grid(2, 4)
    with pytest.raises(ValueError, match="needs L >= "):
        DensitySolver(
            af.TransformerModel(direction="ascent", beta=5.0), _uniform(g), np.eye(2), grid=g, dt=0.01
        )


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"eps": -0.1}, "eps must be a finite number >= 0: got -0.1"),
        ({"dt": 0.0}, "dt must be a finite number > 0"),
        ({"dt": 50.0, "u0": "mixture"}, "beyond the explicit RK4 stability limit"),
        ({"kernel": "direct"}, "unknown kernel method 'direct'"),
        ({"u0": "half"}, "must have mass 1"),
        ({"model": af.TransformerModel(direction="ascent", attention="relu")}, "implements attention in"),
        ({"model": af.TransformerModel(direction="ascent", causal=True)}, "causal=True has no meaning"),
        ({"model": af.TransformerModel(direction="ascent", geometry="flat")}, "lives on the sphere"),
        ({"heads": np.eye(3)}, "heads must have shape"),
    ],
)
def test_solver_refuses_bad_input(kw, match):
    g = make_grid(2, 16)
    args = {
        "model": af.TransformerModel(direction="ascent"),
        "u0": _uniform(g),
        "heads": np.eye(2),
        "dt": 0.01,
    }
    args.update(kw)
    if isinstance(args["u0"], str):
        args["u0"] = 0.5 * _uniform(g) if args["u0"] == "half" else _s1_mixture(g)
    with pytest.raises(ValueError, match=match):
        DensitySolver(args.pop("model"), args.pop("u0"), args.pop("heads"), grid=g, **args)


def test_other_bad_inputs():
    with pytest.raises(ValueError, match="runs on S\\^1 \\(d = 2\\) and S\\^2"):
        make_grid(4, 8)
    with pytest.raises(ValueError, match="band limit L must be an integer >= 1"):
        CircleGrid(0)
    with pytest.raises(ValueError, match="kappa .* must lie in"):
        density_from_particles(make_grid(2, 8), np.eye(2), -1.0)
    with pytest.raises(ValueError, match="particles must lie on S\\^1"):
        density_from_particles(make_grid(2, 8), 2 * np.eye(2), 5.0)
    with pytest.raises(ValueError, match="mass .* <= 0"):
        density_from_function(make_grid(2, 8), lambda x: -np.ones(x.shape[0]))
    with pytest.raises(ValueError, match="degree must be an integer >= 1"):
        mode_growth_rate(0, d=2, beta=1.0)
    with pytest.raises(ValueError, match="band_tol must lie in"):
        minimum_band_limit(1.0, 2, tol=2.0)
