"""One home per formula (issue 30): the time-step checks one layer below the particle simulation and the
density solver, and the ledger / step formulas that the compiled loops compile from their homes."""

from __future__ import annotations

import math

import numpy as np
import pytest

import attnflow as af
from attnflow.pde import CircleGrid, DensitySolver, density_from_function

# --------------------------------------------------------------------------- dt and t0: one check


def _pde_solver(**kw):
    grid = CircleGrid(8)
    u0 = density_from_function(grid, lambda x: np.ones(x.shape[0]))
    model = af.TransformerModel(beta=1.0, direction="ascent")
    return DensitySolver(model, u0, np.eye(2), grid=grid, **kw)


@pytest.mark.parametrize("dt", [0.0, -0.1, math.inf, math.nan, True, "0.1"])
def test_the_density_solver_checks_dt_with_the_one_rule(dt):
    from attnflow.simulation.spec import check_dt  # the re-export of the particle simulation's entry

    with pytest.raises(ValueError) as rule:
        check_dt(dt)
    with pytest.raises(ValueError, match=r"^dt must be a finite number > 0: got .*; give a time step") as pde:
        _pde_solver(dt=dt)
    assert str(pde.value) == str(rule.value)


@pytest.mark.parametrize("t0", [math.nan, math.inf, None])
def test_the_density_solver_checks_t0_with_the_one_rule(t0):
    with pytest.raises(ValueError, match=r"^t0 must be finite: got .*; e\.g\. t0=0\.0$"):
        _pde_solver(dt=0.01, t0=t0)


def test_the_checks_live_below_simulation_and_pde_and_spec_re_exports_them():
    from attnflow.integrators import base
    from attnflow.pde import solver
    from attnflow.simulation import simulator, spec

    assert spec.check_dt is base.check_dt and spec.check_t0 is base.check_t0
    assert "check_dt" in spec.__all__ and "check_t0" in spec.__all__
    assert solver.check_dt is base.check_dt and simulator.check_dt is base.check_dt
    assert _pde_solver(dt=0.01, t0=2).t0 == 2.0  # a valid t0 is taken as a float


# --------------------------------------------------------------------------- the token noise's one home


def test_geodesic_random_walk_is_the_exp_map_of_the_scaled_tangent_draw():
    import torch

    from attnflow.geometry import Euclidean, Sphere
    from attnflow.integrators.brownian import brownian_scale, geodesic_random_walk

    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 7, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    z = rng.standard_normal((2, 7, 3))
    eps, dt = 0.3, 0.02
    assert brownian_scale(eps, dt) == math.sqrt(2 * eps * dt)
    # independent reference in NumPy: u = s (z - <x, z> x), exp_x(u) = cos|u| x + sin|u| u/|u|
    s = math.sqrt(2 * eps * dt)
    u = s * (z - (x * z).sum(-1, keepdims=True) * x)
    nu = np.linalg.norm(u, axis=-1, keepdims=True)
    ref = np.cos(nu) * x + np.sin(nu) * u / nu
    got = geodesic_random_walk(Sphere(), torch.from_numpy(x), torch.from_numpy(z), eps, dt).numpy()
    # float64 round-off of a few operations on unit vectors (|u| ~ 0.3): 1e-14 leaves a factor ~50
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(got, axis=-1), 1.0, rtol=0, atol=1e-15)
    flat = geodesic_random_walk(Euclidean(), torch.from_numpy(x), torch.from_numpy(z), eps, dt).numpy()
    np.testing.assert_allclose(flat, x + s * z, rtol=0, atol=1e-15)  # flat space: x + sqrt(2 eps dt) z
