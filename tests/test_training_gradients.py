"""Differentiable simulation (issue 15): autograd and adjoint gradients against central finite differences
and against each other, the torch-only rule, the mean-field first variation, and the training losses
against independent references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnflow as af
from attnflow.observables.transport import sliced_wasserstein_sphere, wasserstein2
from attnflow.training.adjoint import adjoint_flow, invert_step
from attnflow.training.flow import TrainableFlow
from attnflow.training.losses import measure_loss, mmd2
from attnflow.training.meanfield import risk_first_variation, risk_landscape

torch.set_num_threads(1)


def _flow(param="dv", integrator="euler", direction="ascent", layers=3, heads=3, steps=2, **kw):
    model = af.TransformerModel(direction=direction, beta=1.0, **kw)
    return TrainableFlow(
        model, d=3, layers=layers, heads=heads, t1=1.0, steps_per_layer=steps, param=param,
        integrator=integrator, seed=3, head_dim=2 if param == "qkv" else None,
    )  # fmt: skip


def _risk(P=2, n=5, d=3):
    """A smooth scalar of the final tokens that is not symmetric in anything."""
    w = torch.randn(P, n, d, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    return lambda x: (x * w).sum() + 0.5 * (x[..., 0] * x[..., 2]).square().sum()


def _grads(flow, x0, risk, method, state="recomputed"):
    x = x0.clone().requires_grad_(True)
    out = flow(x) if method == "autograd" else adjoint_flow(flow, x, state=state)
    value = risk(out)
    return value, torch.autograd.grad(value, [x, *flow.parameters()])


def _rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


CASES = [
    ("dv", "euler", "ascent"),
    ("tied", "heun", "descent"),
    ("qkv", "rk4", "ascent"),
    ("dv", "rk4", "descent"),
]


@pytest.mark.parametrize(("param", "integrator", "direction"), CASES)
def test_autograd_and_adjoint_match_central_differences(param, integrator, direction):
    flow = _flow(param, integrator, direction)
    x0 = af.tokens.uniform(2, 5, 3, seed=1)
    risk = _risk()
    _, g_auto = _grads(flow, x0, risk, "autograd")
    _, g_adj = _grads(flow, x0, risk, "adjoint", "recomputed")
    _, g_sto = _grads(flow, x0, risk, "adjoint", "stored")
    # the adjoint is the exact discrete adjoint of the same steps: agreement to round-off, asked 1e-8
    for a, b, c in zip(g_auto, g_adj, g_sto, strict=True):
        assert _rel(b, a) < 1e-8
        assert _rel(c, a) < 1e-8
    # central differences along a random direction of x0 and of every head tensor; with eps = 1e-5 the
    # truncation error is ~eps^2 |f'''| ~ 1e-10 and the round-off ~1e-16 / eps ~ 1e-11, so rel 1e-6 is safe
    gen = torch.Generator().manual_seed(11)
    eps = 1e-5
    tensors = [x0, *flow.parameters()]
    for i, (t, ga, gj) in enumerate(zip(tensors, g_auto, g_adj, strict=True)):
        u = torch.randn(t.shape, generator=gen, dtype=torch.float64)
        with torch.no_grad():
            if i == 0:
                fd = (risk(flow(x0 + eps * u)) - risk(flow(x0 - eps * u))) / (2 * eps)
            else:
                t += eps * u
                up = risk(flow(x0))
                t -= 2 * eps * u
                down = risk(flow(x0))
                t += eps * u
                fd = (up - down) / (2 * eps)
        for g in (ga, gj):
            directional = (g * u).sum()
            assert abs(float(directional - fd)) <= 1e-6 * abs(float(fd)), (i, float(directional), float(fd))


def test_adjoint_with_a_scalar_of_the_whole_trajectory_and_recovered_states():
    flow = _flow("dv", "euler", "ascent", layers=4, steps=3)
    x0 = af.tokens.uniform(2, 5, 3, seed=2)
    w = torch.linspace(0.5, 1.5, 5, dtype=torch.float64)

    def traj_risk(traj):  # a scalar of every layer-boundary state, not just the final one
        return sum((k + 1) * (s[..., 1] * w).sum() for k, s in enumerate(traj))

    x = x0.clone().requires_grad_(True)
    ga = torch.autograd.grad(traj_risk(flow(x, trajectory=True)), [x, *flow.parameters()])
    gb = torch.autograd.grad(traj_risk(adjoint_flow(flow, x, trajectory=True)), [x, *flow.parameters()])
    for a, b in zip(ga, gb, strict=True):
        assert _rel(b, a) < 1e-8
    # the backward reconstruction of the states returns to x0 to round-off
    assert flow.adjoint_info["reconstruction_error"] < 1e-12
    assert flow.adjoint_info["state"] == "recomputed"


def test_inverse_step_undoes_a_step_and_refuses_when_it_cannot():
    flow = _flow("dv", "rk4")
    x = af.tokens.uniform(1, 6, 3, seed=4)
    D, V = flow.layer_heads(1)
    with torch.no_grad():
        y = flow.step(x, D, V, 2)
        back, iterations = invert_step(flow, y, D, V, 2)
    torch.testing.assert_close(back, x, rtol=0, atol=1e-13)
    assert iterations > 1
    big = _flow("dv", "euler", layers=1, steps=1)
    with torch.no_grad():
        big.D.mul_(400.0)
        big.V.mul_(400.0)
        Db, Vb = big.layer_heads(0)
        yb = big.step(x, Db, Vb, 0)
        with pytest.raises(RuntimeError, match="did not converge.*state='stored'"):
            invert_step(big, yb, Db, Vb, 0)
    # where the inversion fails the adjoint recomputes the state forward from x0: still exact
    x0 = af.tokens.uniform(1, 6, 3, seed=4)
    _, g_auto = _grads(big, x0, _risk(1, 6), "autograd")
    _, g_adj = _grads(big, x0, _risk(1, 6), "adjoint")
    assert big.adjoint_info["forward_recomputed_steps"] == 1
    for a, b in zip(g_auto, g_adj, strict=True):
        assert _rel(b, a) < 1e-8


def test_grad_runs_on_torch_and_says_so():
    flow = _flow()
    attrs = flow.attrs()
    assert attrs["grad"] is True and attrs["backend"] == "torch" and attrs["requested_backend"] == "auto"
    assert flow.model.backend == "torch"
    with pytest.raises(ValueError, match="PyTorch backend only.*backend='numba'.*forward-only"):
        _flow(backend="numba")
    with pytest.raises(ValueError, match="PyTorch backend only.*'fastsum'"):
        _flow(backend="fastsum")


def test_bad_flow_inputs_name_the_rule():
    model = af.TransformerModel(direction="ascent")
    with pytest.raises(ValueError, match="layers \\(L\\) must be an integer >= 1: got 0"):
        TrainableFlow(model, d=3, layers=0, heads=1, t1=1.0)
    with pytest.raises(ValueError, match="t1 .* must be a finite number > 0: got -1"):
        TrainableFlow(model, d=3, layers=1, heads=1, t1=-1.0)
    with pytest.raises(ValueError, match="unknown head parameterisation param='qk'; valid: tied, dv, qkv"):
        TrainableFlow(model, d=3, layers=1, heads=1, t1=1.0, param="qk")
    with pytest.raises(ValueError, match="unknown integrator 'rk5'"):
        TrainableFlow(model, d=3, layers=1, heads=1, t1=1.0, integrator="rk5")
    ou = af.TransformerModel(direction="ascent", weights=af.OrnsteinUhlenbeck(sigma2=1.0))
    with pytest.raises(ValueError, match="weight process must be Constant: got OrnsteinUhlenbeck"):
        TrainableFlow(ou, d=3, layers=1, heads=1, t1=1.0)
    flow = TrainableFlow(model, d=3, layers=1, heads=1, t1=1.0)
    with pytest.raises(ValueError, match="x0 must have shape \\(P, n, d\\).*d = 3.*got \\(2, 4, 2\\)"):
        flow(torch.zeros(2, 4, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="dtype torch.float64: got torch.float32"):
        flow(torch.zeros(2, 4, 3))
    with pytest.raises(ValueError, match="x0 must be finite"):
        flow(torch.full((1, 2, 3), float("nan"), dtype=torch.float64))
    with pytest.raises(ValueError, match="unknown adjoint state 'disk'"):
        adjoint_flow(flow, af.tokens.uniform(1, 3, 3, seed=0), state="disk")


def test_same_seed_same_heads_and_bitwise_same_gradients():
    a, b = _flow(), _flow()
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)
    x0 = af.tokens.uniform(2, 5, 3, seed=1)
    _, ga = _grads(a, x0, _risk(), "adjoint")
    _, gb = _grads(b, x0, _risk(), "adjoint")
    assert all(torch.equal(u, v) for u, v in zip(ga, gb, strict=True))


@pytest.mark.parametrize("param", ["dv", "tied", "qkv"])
def test_first_variation_gradient_is_h_times_the_head_gradient(param):
    # mean-field scaling 1/H: H dR/dtheta_h equals grad Psi_l at theta_h (computed by a separate route:
    # single-head fields weighted by the retraction-transported adjoint)
    flow = _flow(param, "euler", "descent", heads=3)
    x0 = af.tokens.uniform(2, 5, 3, seed=5)
    risk = _risk()
    grads = torch.autograd.grad(risk(flow(x0)), list(flow.parameters()))
    for layer in range(flow.layers):
        thetas = {name: getattr(flow, name)[layer].detach() for name in flow.param_names()}
        _, gpsi = risk_first_variation(flow, x0, risk, layer, thetas)
        for name, g in zip(flow.param_names(), grads, strict=True):
            torch.testing.assert_close(flow.heads * g[layer], gpsi[name], rtol=1e-10, atol=1e-14)
    # Psi_l is linear in the head law: R's directional derivative when one head moves is (1/H) dPsi_l
    land = risk_landscape(flow, x0, risk, 1, points=3)
    assert land["psi"].shape == (3, 3) and land["heads"].shape == (3, 2) and land["force"].shape == (3, 2)
    assert float(land["grid"].max()) >= float(land["heads"].abs().max())


def test_first_variation_refuses_schemes_it_does_not_describe():
    x0 = af.tokens.uniform(1, 4, 3, seed=0)
    with pytest.raises(ValueError, match="projected Euler scheme: got integrator='rk4'"):
        risk_first_variation(_flow("dv", "rk4"), x0, lambda x: x.sum(), 0, {})
    with pytest.raises(ValueError, match="layer_scaling=1.0"):
        risk_first_variation(_flow(layer_scaling=1.0), x0, lambda x: x.sum(), 0, {})
    with pytest.raises(ValueError, match="layer must be an integer in \\[0, 2\\]: got 3"):
        risk_first_variation(_flow(), x0, lambda x: x.sum(), 3, {})


def test_mmd_matches_a_numpy_reference_and_vanishes_on_equal_clouds():
    x = af.tokens.uniform(2, 6, 3, seed=0)
    y = af.tokens.uniform(1, 9, 3, seed=1)
    sigma = 0.7

    def ref(a, b):
        k = lambda u, v: np.exp(-((u[:, None] - v[None]) ** 2).sum(-1) / (2 * sigma**2)).mean()  # noqa: E731
        return k(a, a) + k(b, b) - 2 * k(a, b)

    got = mmd2(x, y, sigma=sigma)
    want = [ref(x[p].numpy(), y[0].numpy()) for p in range(2)]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    assert float(mmd2(x, x).abs().max()) < 1e-15
    with pytest.raises(ValueError, match="sigma .* must be a finite number > 0: got 0"):
        mmd2(x, y, sigma=0)
    with pytest.raises(ValueError, match="unknown measure loss 'kl'; valid: ssw, w2, mmd"):
        measure_loss("kl", x, y)


def test_differentiable_sliced_loss_equals_the_detached_one_and_exact_w2_on_the_circle():
    # on S^1 every projection is an isometry: SSW equals the exact geodesic W2 up to POT's 1e-6 search
    ang = torch.linspace(0, 2 * math.pi, 8, dtype=torch.float64)[:-1]
    x = torch.stack([torch.cos(ang), torch.sin(ang)], -1).unsqueeze(0)
    y = torch.stack([torch.cos(0.6 * ang + 0.3), torch.sin(0.6 * ang + 0.3)], -1).unsqueeze(0)
    xg = x.clone().requires_grad_(True)
    with_grad = sliced_wasserstein_sphere(xg, y, n_projections=8, seed=0, grad=True)
    plain = sliced_wasserstein_sphere(x, y, n_projections=8, seed=0)
    torch.testing.assert_close(with_grad.detach(), plain, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(plain, wasserstein2(x, y), rtol=0, atol=2 * math.pi * 2e-6)
    (g,) = torch.autograd.grad(with_grad.sum(), xg)
    assert torch.isfinite(g).all() and float(g.abs().max()) > 0
