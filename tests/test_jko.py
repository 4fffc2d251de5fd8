"""JKO / minimizing-movement step (issue 16, NOTES.md §10): energy stability, first order, optimality.

References: the energy of ``tests/reference/formulas.py`` (independent NumPy), a fine RK4 trajectory of
the same flow for the order, and the minimality of the returned point checked by perturbing it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from reference.formulas import attention_field, energy

import attnflow as af
from attnflow.experiments import ConfigError, build, load_config
from attnflow.geometry import exp_map, geodesic_distance
from attnflow.integrators import JKO, jko_weights
from attnflow.simulation import simulate_spec

BETA = 2.0


def _model(attention="usa", direction="ascent"):
    return af.TransformerModel(direction=direction, beta=BETA, attention=attention, backend="torch")


def _energies(model, x0, D0, integrator, dt, steps=20):
    ds = af.simulate(model, x0, D0, t1=steps * dt, dt=dt, integrator=integrator)
    x = ds.positions.values
    # the energy from the independent NumPy formula, per path and record
    return np.array(
        [[energy(x[p, k], D0.numpy()[0], BETA) for k in range(x.shape[1])] for p in range(len(x))]
    )


@pytest.fixture(scope="module")
def cloud():
    return af.tokens.uniform(2, 12, 3, seed=3), af.heads.identity(2, 1, 3)


def test_explicit_euler_loses_energy_monotonicity_beyond_its_limit_and_jko_does_not(cloud):
    # USA, beta = 2, ascent: s E must increase along the flow. Explicit (projected) Euler keeps it up to
    # dt ~ 0.1 and breaks it at dt = 0.5 (measured drops of 0.16; 0.76 at dt = 1); JKO keeps it at every
    # step at dt = 0.5 and at dt = 5, 50 times the last monotone Euler step.
    model = _model()
    x0, D0 = cloud
    E_ok = _energies(model, x0, D0, "euler", 0.1)
    assert np.diff(E_ok, axis=1).min() > -1e-12
    E_bad = _energies(model, x0, D0, "euler", 0.5)
    assert np.diff(E_bad, axis=1).min() < -0.1
    for dt in (0.5, 5.0):
        jko = JKO(tol=1e-9)
        E = _energies(model, x0, D0, jko, dt)
        assert np.diff(E, axis=1).min() > -1e-12 * np.abs(E).max(), dt  # monotone to round-off
        st = jko.stats()
        assert st["jko_unconverged"] == 0 and st["jko_max_residual"] <= 1e-9
        assert st["jko_steps"] == 20 and st["jko_iterations"] >= 20


@pytest.mark.parametrize(
    ("attention", "direction"), [("softmax", "ascent"), ("softmax", "descent"), ("usa", "descent")]
)
def test_jko_energy_is_monotone_for_every_kernel_and_direction(cloud, attention, direction):
    model = _model(attention, direction)
    x0, D0 = cloud
    E = _energies(model, x0, D0, JKO(tol=1e-9), 2.0, steps=8)
    s = model.sign
    assert (s * np.diff(E, axis=1)).min() > -1e-12 * np.abs(E).max()


# the USA flow at beta = 2 moves faster (no softmax normalisation): its asymptotic regime starts at
# smaller dt (at 0.1 ... 0.0125 the local slopes are 0.79, 0.88, 0.93)
@pytest.mark.parametrize(
    ("attention", "dts"),
    [("softmax", (0.1, 0.05, 0.025, 0.0125)), ("usa", (0.025, 0.0125, 0.00625, 0.003125))],
)
def test_jko_converges_to_the_flow_at_first_order(attention, dts):
    model = _model(attention)
    x0, D0 = af.tokens.uniform(1, 8, 3, seed=5), af.heads.identity(1, 1, 3)
    ref = af.simulate(model, x0, D0, t1=1.0, dt=1 / 256, integrator="rk4", ledger=False).positions.values[
        0, -1
    ]
    dts = np.array(dts)
    errs = []
    for dt in dts:
        x = af.simulate(model, x0, D0, t1=1.0, dt=dt, integrator=JKO(tol=1e-11), ledger=False).positions
        errs.append(np.abs(x.values[0, -1] - ref).max())
    slope = np.polyfit(np.log(dts), np.log(errs), 1)[0]
    # measured 1.02 (softmax); band 0.1: an inconsistent metric weight (e.g. w = 1 for softmax) converges
    # to another flow and the error stalls (slope ~ 0)
    assert abs(slope - 1.0) < 0.1, (slope, errs)
    assert errs[-1] < 5e-3


def test_first_iterate_is_the_lie_euler_step_of_the_velocity():
    # delta at y = x^k is tau s n P grad E / w = tau s v: with one iteration JKO is the geodesic Euler step,
    # which checks the metric weights w against the independent softmax field
    model = _model("softmax")
    x0, D0 = af.tokens.uniform(1, 8, 3, seed=7), af.heads.identity(1, 1, 3)
    sim = af.Simulator(model, x0, D0, dt=1e-3, integrator=JKO(tol=1e-9, max_iter=1), ledger=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sim.step()
    v = torch.as_tensor(attention_field(x0.numpy()[0], D0.numpy()[0], beta=BETA))
    assert_allclose(sim.x[0].numpy(), exp_map(x0[0], 1e-3 * v).numpy(), atol=1e-15)


def test_the_step_is_a_local_minimiser_of_the_jko_objective():
    model = _model("softmax")
    x0, D0 = af.tokens.uniform(1, 8, 3, seed=8), af.heads.identity(1, 1, 3)
    tau, sim = 1.5, None
    sim = af.Simulator(model, x0, D0, dt=tau, integrator=JKO(tol=1e-10), ledger=False)
    fe = sim.field(sim.x, sim.D, 0.0, ledger=True)
    w = jko_weights(sim.field, fe, sim.D)[0].numpy()
    # mobility m(x_i) = (1/n) sum_j exp(beta <x_i, x_j>) from the plain formula
    X = x0.numpy()[0]
    assert_allclose(w, np.exp(BETA * X @ X.T).mean(1), rtol=1e-13)
    sim.step()
    y = sim.x[0]

    def phi(z):
        d2 = geodesic_distance(z, x0[0]).numpy() ** 2
        return -8 * energy(z.numpy(), D0.numpy()[0], BETA) + (w * d2).sum() / (2 * tau)

    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        u = torch.randn(8, 3, dtype=torch.float64, generator=gen)
        u = u - (u * y).sum(-1, keepdim=True) * y
        u = 1e-4 * u / u.norm()
        # second-order growth 1e-8 * curvature dominates the first-order term left by the residual (< 1e-10)
        assert phi(exp_map(y, u)) > phi(y) - 1e-13 and phi(exp_map(y, -u)) > phi(y) - 1e-13
    assert phi(y) < phi(x0[0])


def test_iteration_cap_is_reported_and_warns(cloud):
    model = _model()
    x0, D0 = cloud
    jko = JKO(tol=1e-12, max_iter=2)
    with pytest.warns(RuntimeWarning, match=r"stopped at max_iter = 2 with residual .* raise max_iter"):
        af.simulate(model, x0, D0, t1=2.0, dt=1.0, integrator=jko, ledger=False)
    st = jko.stats()
    assert st["jko_unconverged"] == 2 and st["jko_max_iterations"] == 2 and st["max_iter"] == 2


@pytest.mark.parametrize(
    ("kwargs", "H", "match"),
    [
        ({"attention": "softmax"}, 2, r"got attention 'softmax' with H = 2 heads; use attention 'usa'"),
        ({"attention": "relu"}, 1, r"got attention 'relu'"),
        ({"attention": "usa", "causal": True}, 1, r"needs V = D and no causal mask: got causal=True"),
    ],
)
def test_jko_refuses_flows_that_are_not_gradient_flows(kwargs, H, match):
    model = af.TransformerModel(direction="ascent", backend="torch", **kwargs)
    sim = af.Simulator(
        model, af.tokens.uniform(1, 6, 3, seed=0), af.heads.identity(1, H, 3), dt=0.1, integrator="jko"
    )
    with pytest.raises(ValueError, match=match):
        sim.step()


def test_jko_refuses_values_and_asymmetric_heads():
    model = _model()
    x0 = af.tokens.uniform(1, 6, 3, seed=0)
    sim = af.Simulator(
        model, x0, af.heads.identity(1, 1, 3), values=af.heads.identity(1, 1, 3), dt=0.1, integrator="jko"
    )
    with pytest.raises(ValueError, match=r"V = D .* V given"):
        sim.step()
    D = af.heads.gaussian(1, 1, 3, seed=1)
    sim = af.Simulator(model, x0, D, dt=0.1, integrator="jko")
    with pytest.raises(ValueError, match=r"needs symmetric heads .* max \|D - D\^T\| = "):
        sim.step()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"tol": 0.0}, r"the JKO tolerance tol must be a finite number > 0: got 0.0; give e.g. tol=1e-9"),
        ({"tol": -1.0}, r"got -1.0"),
        ({"tol": float("nan")}, r"got nan"),
        ({"max_iter": 0}, r"the JKO iteration cap max_iter must be an integer >= 1: got 0"),
    ],
)
def test_bad_jko_options_are_refused(options, match):
    with pytest.raises(ValueError, match=match):
        JKO(**options)


def test_config_runs_jko_and_refuses_a_tolerance_at_or_below_zero_at_load():
    from experiments_helpers import tiny_with

    base = {
        "weights": {"process": "constant"},
        "model": {"direction": "ascent", "attention": "usa", "backend": "torch"},
        "heads": {"init": "identity", "H": 1},
        "integrator__method": "jko",
    }
    spec = build(tiny_with(**base, integrator__tol=1e-8, integrator__max_iter=40))
    assert dict(spec.integrator_options) == {"tol": 1e-8, "max_iter": 40}
    ds = simulate_spec(spec)
    assert ds["integrator_jko_steps"].values[-1] == spec.n_steps
    assert ds["integrator_jko_max_residual"].values[-1] <= 1e-8
    for bad in (0.0, -1e-3):
        with pytest.raises(ConfigError, match=rf"integrator.tol must be > 0 .*got {bad!r}"):
            load_config(tiny_with(**base, integrator__tol=bad))


def test_quick_jko_stability_study(quick_study):
    import json

    from attnflow.studies import StudyConfigError, get_study

    d, _ = quick_study("jko_stability")  # the session's quick run, with figures (tests/conftest.py)
    s = json.loads((d / "summary.json").read_text())
    assert s["jko_monotone_at_every_dt"] is True
    for r in s["results"].values():
        E = np.array(r["energy"])
        if r["method"] == "jko":  # path 0 of the figure is monotone too
            assert np.diff(E).min() >= -1e-12 * np.abs(E).max()
        if r["method"] == "jko":
            assert r["jko"]["jko_unconverged"] == 0 and r["jko"]["jko_max_residual"] <= 1e-9
    assert (d / s["run"]["figures"]["jko_vs_euler"]).is_file()
    # table.md is the one renderer's Markdown of the Table specs kept in tables.json
    from attnflow.studies.render import markdown, table_from_json

    specs = json.loads((d / "tables.json").read_text())["tables"]
    assert [t["id"] for t in specs] == ["runs", "verdicts"]
    assert markdown([table_from_json(t) for t in specs]) == (d / "table.md").read_text()
    for row, r in zip(specs[0]["rows"], s["results"].values(), strict=True):
        assert row["method"] == r["method"] and row["error_at_T"] == r["error_at_T"]
        assert row["jko_iterations"] == (r["jko"]["jko_iterations"] if "jko" in r else None)
    with pytest.raises(StudyConfigError, match=r"tol: must be greater than 0; got 0.0"):
        get_study("jko_stability").config({"tol": 0.0}, quick=True)
    with pytest.raises(StudyConfigError, match=r"whole number of steps"):
        get_study("jko_stability").config({"dts": [0.3, 0.7]}, quick=True)
