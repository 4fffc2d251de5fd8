"""Noisy tokens (issue 16): Brownian motion on the sphere with generator eps Delta, seeds, config, entropy.

References: the heat kernel on S^{d-1} (E P_l(<x_0, x_t>) = exp(-l(l+d-2) eps t) for the Legendre
polynomial of degree l, dimension d), the exact law of one geodesic random-walk step (the tangent step has
length sqrt(2 eps dt) chi_{d-1}, so E[P_l(<x_k, x_{k+1}>)] = E[P_l(cos(a chi_{d-1}))], integrated by scipy),
closed-form entropies (uniform law, von Mises-Fisher on S^2).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from scipy import stats
from scipy.special import eval_legendre

import attnflow as af
from attnflow.experiments import ConfigError, build, load_config
from attnflow.observables import free_energy, kernel_entropy


def _step_factor(l: int, eps: float, dt: float, d: int) -> float:
    """E[P_l(cos(sqrt(2 eps dt) R))], R ~ chi_{d-1}: one step's contraction of the degree-l moment (d = 3)."""
    a = math.sqrt(2 * eps * dt)
    return float(stats.chi(d - 1).expect(lambda r: eval_legendre(l, np.cos(a * r))))


def _free_run(d: int, eps: float, dt: float, steps: int, P: int = 16, n: int = 500, seed: int = 0):
    model = af.TransformerModel(direction="ascent", token_noise=eps, backend="torch")
    x0 = af.tokens.uniform(P, n, d, seed=seed)
    heads = torch.zeros(P, 1, d, d, dtype=torch.float64)  # D = 0: no interaction, pure Brownian tokens
    sim = af.Simulator(model, x0, heads, dt=dt, seed=seed, ledger=False)
    sim.run(steps)
    return (x0 * sim.x).sum(-1).flatten().numpy()  # <x_0, x_t> per token


def test_brownian_tokens_match_the_heat_kernel_on_s2():
    eps, dt, steps = 0.5, 0.05, 20
    c = _free_run(3, eps, dt, steps)
    for l in (1, 2):
        sample = eval_legendre(l, c)
        se = sample.std(ddof=1) / math.sqrt(sample.size)
        discrete = _step_factor(l, eps, dt, 3) ** steps  # exact for the scheme
        heat = math.exp(-l * (l + 1) * eps * dt * steps)  # exact for the diffusion
        # 8000 samples: 4 standard errors; the scheme's weak bias (0.003 at l = 1) is below 1 se
        assert abs(sample.mean() - discrete) < 4 * se, (l, sample.mean(), discrete, se)
        assert abs(sample.mean() - heat) < 4 * se + abs(discrete - heat), (l, sample.mean(), heat)
    assert abs(c.mean() - math.exp(-2 * eps * dt * steps)) < 0.02


def test_geodesic_random_walk_has_weak_order_one_on_s2():
    # the exact moment of the scheme against the heat kernel at t = 1: the gap halves with dt
    eps, t = 0.5, 1.0
    dts = np.array([0.1, 0.05, 0.025, 0.0125])
    gaps = [abs(_step_factor(1, eps, dt, 3) ** round(t / dt) - math.exp(-2 * eps * t)) for dt in dts]
    assert abs(np.polyfit(np.log(dts), np.log(gaps), 1)[0] - 1.0) < 0.05, gaps


def test_brownian_tokens_are_exact_in_law_on_the_circle():
    # on S^1 the walk is the wrapped Brownian motion: E cos(a Z) = exp(-a^2/2) gives exp(-eps t) exactly
    eps, dt, steps = 0.3, 0.1, 10
    c = _free_run(2, eps, dt, steps)
    se = c.std(ddof=1) / math.sqrt(c.size)
    assert abs(c.mean() - math.exp(-eps * dt * steps)) < 4 * se
    c2 = 2 * c**2 - 1  # cos 2 theta: exp(-4 eps t)
    assert abs(c2.mean() - math.exp(-4 * eps * dt * steps)) < 4 * c2.std(ddof=1) / math.sqrt(c2.size)


def test_token_noise_is_seeded_per_path_and_resumes_bit_for_bit():
    model = af.TransformerModel(direction="ascent", beta=1.0, token_noise=0.2, backend="torch")
    x0 = af.tokens.uniform(3, 10, 3, seed=1)
    D0 = af.heads.identity(3, 1, 3)

    def run(seed=0, paths=slice(None), first=0, steps=5):
        sim = af.Simulator(model, x0[paths], D0[paths], dt=0.05, seed=seed, first_path=first, ledger=False)
        sim.run(steps)
        return sim

    a, b = run(), run()
    assert torch.equal(a.x, b.x)
    assert not torch.equal(a.x, run(seed=1).x)
    # path 2 alone (global index 2) follows the same Brownian path as inside the batch
    assert torch.equal(run(paths=slice(2, 3), first=2).x[0], a.x[2])
    # and the tokens' noise differs from a noiseless run
    quiet = af.Simulator(
        af.TransformerModel(direction="ascent", backend="torch"), x0, D0, dt=0.05, ledger=False
    )
    quiet.run(5)
    assert (a.x - quiet.x).abs().max() > 1e-2
    sim = run(steps=2)
    sd = sim.state_dict()
    sim.run(3)
    again = af.Simulator(model, x0, D0, dt=0.05, ledger=False)
    again.load_state_dict(sd)
    again.run(3)
    assert torch.equal(sim.x, again.x)
    assert_allclose(np.linalg.norm(sim.x.numpy(), axis=-1), 1.0, atol=1e-14)


def test_token_noise_runs_from_a_config_and_negative_noise_is_refused():
    from experiments_helpers import tiny_with

    spec = build(tiny_with(weights={"process": "constant"}, model__token_noise=0.1))
    assert spec.model.token_noise == 0.1
    ds = af.simulate(spec.model, spec.x0, spec.heads, t1=spec.t1, dt=spec.dt, ledger=False)
    assert ds.attrs["token_noise"] == 0.1 and ds.attrs["integrator_order"] == 0.5
    with pytest.raises(
        ConfigError, match=r"model.token_noise eps must be >= 0 .* got -0.1; use 0 for noiseless"
    ):
        load_config(tiny_with(model__token_noise=-0.1))
    with pytest.raises(ValueError, match=r"token_noise eps must be a finite number >= 0 .* got -1.0"):
        af.TransformerModel(direction="ascent", token_noise=-1.0)
    with pytest.raises(ValueError, match=r"got inf"):
        af.TransformerModel(direction="ascent", token_noise=float("inf"))


def test_kernel_entropy_against_closed_forms():
    x = af.tokens.uniform(1, 3000, 3, seed=0)
    assert abs(float(kernel_entropy(x)[0]) - math.log(4 * math.pi)) < 0.01  # measured 0.003
    x = af.tokens.uniform(1, 3000, 2, seed=0)
    assert abs(float(kernel_entropy(x)[0]) - math.log(2 * math.pi)) < 0.01
    k0 = 5.0
    exact = math.log(4 * math.pi * math.sinh(k0) / k0) - k0 * (1 / math.tanh(k0) - 1 / k0)  # vMF on S^2
    x = af.tokens.von_mises_fisher(1, 3000, 3, seed=1, clusters=1, kappa=k0)
    # kernel smoothing raises the entropy: measured bias +0.026 at h = 0.15, +0.06 at the default h = 0.26
    assert 0.0 < float(kernel_entropy(x, 0.15)[0]) - exact < 0.04
    with pytest.raises(ValueError, match=r"bandwidth must be a finite angle > 0 in radians: got -0.1"):
        kernel_entropy(x, -0.1)


def test_free_energy_decreases_for_noisy_usa_tokens():
    # USA with symmetric heads is the Wasserstein gradient flow of F = -E - eps S (ascent): from a tight
    # cluster at eps above the critical noise the cloud spreads and F falls
    eps = 1.0
    model = af.TransformerModel(
        direction="ascent", beta=1.0, attention="usa", token_noise=eps, backend="torch"
    )
    x0 = af.tokens.von_mises_fisher(2, 300, 3, seed=2, clusters=1, kappa=20.0)
    D0 = af.heads.identity(2, 1, 3)
    ds = af.simulate(model, x0, D0, t1=2.0, dt=0.02, record_every=25, ledger=False)
    x = torch.as_tensor(ds.positions.values)
    F = np.stack(
        [free_energy(x[:, k], D0, 1.0, eps, "ascent")["free_energy"].numpy() for k in range(x.shape[1])], 1
    )
    # measured drops >= 0.1 between records; the estimator's noise is ~0.01
    assert (np.diff(F, axis=1) < 0).all(), F
    out = free_energy(x[:, 0], D0, 1.0, eps, "descent")
    assert_allclose(out["free_energy"], out["energy"] - eps * out["entropy"])
    with pytest.raises(ValueError, match=r"eps must be a finite number >= 0 .* got -1"):
        free_energy(x[:, 0], D0, 1.0, -1, "ascent")
