"""Ensembles of small clouds in one compiled call (attnflow.simulation.ensemble, issue 27 part 2).

References: :func:`attnflow.simulate` (RK4, PyTorch backend: another implementation of the same field
and step), the same cloud run alone (bit for bit), and the PyTorch observable for the recorded mean
inner product.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnflow as af
from attnflow.analysis.reduced import EquiangularModel, crossing_time, equiangular_particles
from attnflow.observables.clustering import mean_pairwise_inner_product
from attnflow.simulation import simulate
from attnflow.simulation.ensemble import simulate_clouds

B, N, D_ = 3, 7, 3


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x0 = af.tokens.uniform(B, N, D_, seed=seed)
    D = torch.randn(B, 2, D_, D_, generator=g, dtype=torch.float64)
    V = torch.randn(B, 2, D_, D_, generator=g, dtype=torch.float64)
    return x0, D, V


@pytest.mark.parametrize(
    ("attention", "geometry", "direction"),
    [("softmax", "sphere", "ascent"), ("usa", "sphere", "descent"), ("relu", "flat", "ascent")],
)
def test_each_cloud_equals_simulate_rk4_to_round_off(attention, geometry, direction):
    x0, D, V = _inputs()
    betas, dts, steps = [0.7, 1.3, 2.0], [0.05, 0.025, 0.04], [12, 24, 15]
    out = simulate_clouds(
        x0, D, values=V, beta=betas, dt=dts, n_steps=steps, attention=attention, geometry=geometry,
        direction=direction, record_every=3,
    )  # fmt: skip
    for b in range(B):
        m = af.TransformerModel(
            direction=direction, attention=attention, beta=betas[b], geometry=geometry, backend="torch"
        )
        ds = simulate(
            m, x0[b : b + 1], D[b : b + 1], values=V[b : b + 1], t1=dts[b] * steps[b], dt=dts[b],
            integrator="rk4", ledger=False, record_every=3,
        )  # fmt: skip
        ref = ds.positions.values[0]
        k = int(out.records[b])
        assert k == ref.shape[0]
        # float64 both; the two differ only in the order of the sums (d = 3, n = 7 terms): a few ulp per
        # stage, 4 stages x <= 24 steps of a non-expanding flow stay far below 1e-12 (measured 4e-16)
        np.testing.assert_allclose(out.positions[b, :k], ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(out.times(b), ds.time.values, rtol=0, atol=1e-12)
        assert np.isnan(out.positions[b, k:]).all()


def test_a_cloud_is_the_same_bits_alone_and_in_any_batch():
    x0, D, V = _inputs(1)
    kw = dict(beta=[0.5, 1.0, 3.0], dt=0.03, n_steps=[20, 9, 31], record_every=4)
    together = simulate_clouds(x0, D, values=V, **kw)
    for b in range(B):
        alone = simulate_clouds(
            x0[b : b + 1], D[b : b + 1], values=V[b : b + 1], beta=kw["beta"][b], dt=0.03,
            n_steps=kw["n_steps"][b], record_every=4,
        )  # fmt: skip
        k = int(alone.records[0])
        assert np.array_equal(alone.positions[0, :k], together.positions[b, :k])
        s = kw["n_steps"][b] + 1
        assert np.array_equal(alone.rho[0, :s], together.rho[b, :s])
    reversed_ = simulate_clouds(
        x0.flip(0), D.flip(0), values=V.flip(0), beta=kw["beta"][::-1], dt=0.03, n_steps=kw["n_steps"][::-1],
        record_every=4,
    )  # fmt: skip
    assert np.array_equal(
        np.nan_to_num(reversed_.positions[::-1], nan=7.0), np.nan_to_num(together.positions, nan=7.0)
    )


def test_records_steps_and_mean_inner_product():
    x0, D, _ = _inputs(2)
    out = simulate_clouds(x0, D, dt=0.05, n_steps=[10, 7, 1], record_every=[3, 7, 5])
    assert out.record_steps[0, :5].tolist() == [0, 3, 6, 9, 10]
    assert out.record_steps[1].tolist()[:2] == [0, 7] and (out.record_steps[1, 2:] == -1).all()
    assert out.record_steps[2].tolist()[:2] == [0, 1]
    assert out.records.tolist() == [5, 2, 2]
    assert out.steps_done.tolist() == [10, 7, 1]
    # rho after every step against the observable on the recorded positions (same formula, PyTorch sums)
    for b in range(B):
        k = int(out.records[b])
        ref = mean_pairwise_inner_product(torch.from_numpy(out.positions[b, :k])).numpy()
        np.testing.assert_allclose(out.rho[b, out.record_steps[b, :k]], ref, rtol=0, atol=1e-14)
    t, rho = out.rho_series(1)
    assert t.tolist() == pytest.approx([0.05 * k for k in range(8)]) and rho.shape == (8,)
    none = simulate_clouds(x0, D, dt=0.05, n_steps=4)  # record_every=None: first and last only
    assert none.records.tolist() == [2, 2, 2]


def test_a_cloud_that_leaves_the_floats_stops_alone():
    x0, D, _ = _inputs(3)
    D = D.clone()
    D[1] *= 1e3  # unnormalised attention, scores ~ 1e3 on the sphere: exp overflows in the first step
    out = simulate_clouds(x0, D, dt=0.1, n_steps=5, attention="usa", record_every=1)
    assert out.steps_done.tolist() == [5, 0, 5]
    assert out.records.tolist() == [6, 1, 6]
    assert np.isfinite(out.positions[0]).all() and np.isfinite(out.positions[1, 0]).all()


def test_equiangular_particle_times_agree_with_the_python_loop():
    from attnflow.studies.multihead_reduced import _particle_steps, _particle_times

    # short runs (T_eps of 0.16-0.64 at eps = 0.3: 40-75 steps each) keep the Python loop cheap
    cases = [
        (EquiangularModel(n=6, beta=1.0), 0.4, {}),
        (EquiangularModel(n=6, beta=1.0, a=(1.0, 2.0)), 0.4, {}),
        (EquiangularModel(n=6, beta=4.0, attention="relu"), 0.5, {"refine": 2, "perturb": 0.01, "seed": 4}),
    ]
    jobs = [
        {"model": m, "rho0": r0, "eps": 0.3, "T_ref": m.clustering_time_quad(r0, 0.3), **extra}
        for m, r0, extra in cases
    ]
    got = _particle_times(jobs)
    for j, (T, dt, r0) in zip(jobs, got, strict=True):
        dt_ref, k = _particle_steps(j["T_ref"], j.get("refine", 1))
        ref = equiangular_particles(
            j["model"], j["rho0"], k * dt_ref, dt_ref, perturb=j.get("perturb", 0.0), seed=j.get("seed", 0)
        )
        assert dt == dt_ref and math.isfinite(T)
        # same RK4, other summation order: rho agrees to ~1e-15, the interpolated crossing to ~1e-13
        assert T == pytest.approx(crossing_time(ref["time"], ref["rho"], 1 - j["eps"]), rel=1e-11)
        assert r0 == pytest.approx(float(ref["rho"][0]), abs=1e-15)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(attention="sigmoid"), r"unknown attention 'sigmoid' for simulate_clouds; valid: softmax, usa"),
        (dict(geometry="torus"), r"unknown geometry 'torus'; valid: sphere, flat"),
        (dict(direction="up"), r"unknown direction 'up'; valid: ascent, descent"),
        (
            dict(dt=[0.1, 0.1]),
            r"dt must be a number or one value per cloud \(shape \(3,\)\): got shape \(2,\)",
        ),
        (dict(dt=-0.1), r"dt must be finite and > 0 for every cloud: got min"),
        (dict(beta=[1.0, math.nan, 1.0]), r"beta must be finite and > 0 for every cloud"),
        (dict(n_steps=2.5), r"n_steps must be whole numbers: got 2\.5"),
        (dict(n_steps=0), r"n_steps must be >= 1 for every cloud: got min 0"),
        (dict(record_every=0), r"record_every must be >= 1 \(or None\): got min 0"),
        (dict(values=torch.zeros(3, 2, 3, 2)), r"values must have shape \[B, H, d, d\] = \[3, H, 3, 3\]"),
        (dict(values=torch.zeros(3, 1, 3, 3)), r"values must have the heads' shape \(3, 2, 3, 3\)"),
    ],
)
def test_bad_input_is_refused_with_the_rule(kwargs, match):
    x0, D, _ = _inputs()
    kw = dict(dt=0.1, n_steps=2) | kwargs
    with pytest.raises(ValueError, match=match):
        simulate_clouds(x0, D, **kw)


def test_bad_tokens_are_refused_with_the_rule():
    x0, D, _ = _inputs()
    with pytest.raises(ValueError, match=r"x0 must have shape \[B, n, d\] with n >= 2 tokens: got shape"):
        simulate_clouds(x0[0], D, dt=0.1, n_steps=1)
    with pytest.raises(ValueError, match=r"x0 must lie on S\^\(d-1\) for geometry 'sphere': max"):
        simulate_clouds(2 * x0, D, dt=0.1, n_steps=1)
    with pytest.raises(ValueError, match=r"x0 must be finite: got 1 non-finite entries"):
        bad = x0.clone()
        bad[0, 0, 0] = math.nan
        simulate_clouds(bad, D, dt=0.1, n_steps=1)
    with pytest.raises(ValueError, match=r"heads must be a numeric array \[B, H, d, d\]: got dtype"):
        simulate_clouds(x0, np.array([["a"]]), dt=0.1, n_steps=1)
    with pytest.raises(ValueError, match=r"the positions of 3 clouds x 2 records x 7 x 3 need"):
        from attnflow.simulation import ensemble

        old, ensemble.MAX_RECORD_BYTES = ensemble.MAX_RECORD_BYTES, 100
        try:
            simulate_clouds(x0, D, dt=0.1, n_steps=1)
        finally:
            ensemble.MAX_RECORD_BYTES = old


def test_entropy_random_starts_refuse_a_cloud_that_left_the_floats():
    from attnflow.simulation.simulator import NonFiniteStateError
    from attnflow.studies.multihead_entropy import random_start_run

    kw = dict(clouds=2, n=4, beta=1.0, heads="symmetric", spread=0.0, t1=0.1, dt=0.05, record_spacing=0.05)
    with pytest.raises(
        NonFiniteStateError, match=r"cloud 0 left the finite numbers at step [12] of 2 \(beta 1\.0"
    ):
        random_start_run(scale=1e308, seed=0, **kw)  # scores overflow to inf: exp(inf - inf) = nan
    out = random_start_run(scale=2.0, seed=0, **kw)
    assert out["t"].tolist() == [0.0, 0.05, 0.1] and out["mean_S"].shape == (3, 2)


def test_the_compiled_ensemble_calls_the_homes_of_its_formulas():
    # issue 30: the tangent projection and the retraction are compiled from geometry.sphere (one
    # definition); a local copy in numba_ensemble would not be these function objects
    from attnflow.dynamics import numba_ensemble
    from attnflow.geometry import sphere

    assert numba_ensemble.FORMULAS == {
        "_tangent_component": sphere.tangent_component,
        "_retraction": sphere.retraction,
    }
    for name, home in numba_ensemble.FORMULAS.items():
        assert getattr(numba_ensemble, name).py_func is home, name


def test_the_ensembles_softmax_rows_are_the_fused_kernels_rows():
    # issue 30: the attention sums (scores, row maximum, shifted exponentials, sum e and sum e x) come from
    # the one home the fused and Python-loop kernels use (numba_passes): the field calls those very compiled
    # functions, and no second exponential (a softmax loop of its own) is back in the module
    import ast
    import inspect

    from attnflow.dynamics import numba_ensemble, numba_passes

    assert numba_ensemble.KERNEL_ROWS == {
        "score_tile": numba_passes._score_tile,
        "tile_max": numba_passes._tile_max,
        "tile_generic": numba_passes._tile_generic,
    }
    # without fast-math flags: compiled with them, a process that compiled the field and one that loaded it
    # from numba's cache gave different last bits (critical_beta differed between a local run and Dask)
    assert not numba_ensemble._velocity.targetoptions.get("fastmath")
    calls = numba_ensemble._velocity.py_func.__code__.co_names
    for name, home in numba_ensemble.KERNEL_ROWS.items():
        assert getattr(numba_ensemble, name) is home, name
        assert name in calls, f"the ensemble's field does not call the kernel's {name}"
    tree = ast.parse(inspect.getsource(numba_ensemble))
    exps = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "exp"
    ]
    assert len(exps) == 1, f"exponentials at lines {exps}: only the usa weight e^s / n is this module's"
    defs = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert defs == {"_velocity", "_stage", "_mean_inner", "_one_cloud", "rk4_clouds"}, defs
