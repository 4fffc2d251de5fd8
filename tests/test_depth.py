"""Residual attention network and its depth limit (attnflow.training.residual, .depth) against independent
NumPy references, scipy solve_ivp, attnflow.simulate, finite differences and an explicit per-head AdamW."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from scipy.integrate import solve_ivp

import attnflow
from attnflow.analysis.fits import fit_depth_width
from attnflow.analysis.verdicts import read_records
from attnflow.studies import get_study
from attnflow.studies.render import markdown, table_from_json
from attnflow.training.depth import contraction_task, mean_field_gradients, sphere_clouds, train_adamw
from attnflow.training.residual import (
    ResidualAttention,
    adjoint_variables,
    attention_velocity,
    head_counts,
    limit_flow,
    token_loss,
    xavier_atoms,
)


def np_gamma(x, Q, K, V, w):
    """Separately written field: sum_m w_m V_m sum_j softmax_j(<Q_m x_i, K_m x_j>) x_j, x shape [n, d]."""
    out = np.zeros_like(x)
    for m in range(len(w)):
        if w[m] == 0:
            continue
        s = (x @ Q[m].T) @ (x @ K[m].T).T
        s = s - s.max(axis=1, keepdims=True)
        A = np.exp(s)
        A /= A.sum(axis=1, keepdims=True)
        out += w[m] * (A @ x) @ V[m].T
    return out


@pytest.fixture(scope="module")
def atoms():
    return xavier_atoms(3, 3, seed=4, gain=1.5)


def test_attention_velocity_against_numpy(atoms):
    Q, K, V = atoms
    x = sphere_clouds(2, 5, 3, seed=1)
    w = torch.tensor([0.5, 0.0, 0.5], dtype=torch.float64)
    got = attention_velocity(x, Q, K, V, w)
    for b in range(2):
        assert_allclose(
            got[b].numpy(),
            np_gamma(x[b].numpy(), Q.numpy(), K.numpy(), V.numpy(), w.numpy()),
            rtol=1e-13,
            atol=1e-15,
        )


def test_network_equals_explicit_head_sum(atoms):
    # H heads per layer drawn iid from the atoms with the seed; the network sums them one by one
    L, H, seed = 3, 5, 7
    net = ResidualAttention(atoms, L, H, seed=seed)
    idx = torch.randint(3, (L, H), generator=torch.Generator().manual_seed(seed)).numpy()
    Q, K, V = (a.numpy() for a in atoms)
    x = sphere_clouds(1, 6, 3, seed=2)
    ref = x[0].numpy().copy()
    for l in range(L):
        step = sum(np_gamma(ref, Q[[h]], K[[h]], V[[h]], np.ones(1)) for h in idx[l]) / H
        ref = ref + step / L
    with torch.no_grad():
        assert_allclose(net(x)[0].numpy(), ref, rtol=1e-13, atol=1e-14)
    assert torch.equal(head_counts(L, H, 3, seed=seed).sum(1), torch.full((L,), H))


def test_limit_flow_against_solve_ivp_and_simulate(atoms):
    Q, K, V = atoms
    x = sphere_clouds(1, 4, 3, seed=3)
    w = np.full(3, 1 / 3)
    Qn, Kn, Vn = Q.numpy(), K.numpy(), V.numpy()
    sol = solve_ivp(
        lambda t, z: np_gamma(z.reshape(4, 3), Qn, Kn, Vn, w).ravel(),
        (0, 1),
        x[0].numpy().ravel(),
        method="DOP853",
        rtol=1e-13,
        atol=1e-13,
    )
    got = limit_flow(x, atoms, steps=128)
    assert_allclose(got[0].numpy().ravel(), sol.y[:, -1], atol=1e-11)
    # the same ODE through the core: frozen heads D = Q^T K, values V, flat geometry, ascent, RK4
    model = attnflow.TransformerModel(direction="ascent", geometry="flat", backend="torch")
    ds = attnflow.simulate(
        model, x[0], (Q.transpose(-1, -2) @ K), values=V, t1=1.0, dt=1 / 128, integrator="rk4", ledger=False
    )
    assert_allclose(ds["positions"].isel(time=-1).values.reshape(-1), got[0].numpy().ravel(), atol=1e-13)


def test_mean_field_network_converges_at_order_one(atoms):
    # H = infinity: the network is explicit Euler for the limit ODE, error ~ C / L
    x = sphere_clouds(2, 5, 3, seed=5)
    ref = limit_flow(x, atoms, steps=128)
    Ls = [8, 16, 32, 64]
    with torch.no_grad():
        errs = [float((ResidualAttention(atoms, L, None)(x) - ref).norm(dim=-1).max()) for L in Ls]
    slope = np.polyfit(np.log(Ls), np.log(errs), 1)[0]
    assert -1.05 < slope < -0.95, errs  # Euler: order 1 exactly up to O(1/L^2) corrections (~1% here)


def test_adjoint_variables_against_central_differences(atoms):
    x = sphere_clouds(2, 3, 3, seed=6)
    y = contraction_task(x)
    net = ResidualAttention(atoms, 3, 2, seed=1)
    _, p = adjoint_variables(net, x, y)
    B, n = 2, 3
    h = 1e-6
    for b, i, a in [(0, 0, 0), (1, 2, 1), (0, 1, 2)]:
        e = torch.zeros_like(x)
        e[b, i, a] = h
        with torch.no_grad():
            fd = (token_loss(net(x + e), y) - token_loss(net(x - e), y)) / (2 * h)
        assert_allclose(float(p[b, i, a]), float(fd) * B * n, rtol=1e-7, atol=1e-9)


class _PerHead(torch.nn.Module):
    """Independent reference: every head of every layer its own parameter, plain torch softmax attention."""

    def __init__(self, atoms, idx):
        super().__init__()
        Q, K, V = atoms
        self.L, self.H = idx.shape
        self.Q = torch.nn.Parameter(Q[idx].clone())
        self.K = torch.nn.Parameter(K[idx].clone())
        self.V = torch.nn.Parameter(V[idx].clone())

    def forward(self, x):
        for l in range(self.L):
            q = torch.einsum("hab,knb->khna", self.Q[l], x)
            k = torch.einsum("hab,knb->khna", self.K[l], x)
            A = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
            out = torch.einsum("hab,khnb->kna", self.V[l], A @ x.unsqueeze(1)) / self.H
            x = x + out / self.L
        return x


def test_collapsed_adamw_equals_per_head_adamw(atoms):
    L, H, seed = 2, 4, 3
    x = sphere_clouds(2, 4, 3, seed=8)
    y = contraction_task(x)
    net = ResidualAttention(atoms, L, H, seed=seed)
    idx = torch.randint(3, (L, H), generator=torch.Generator().manual_seed(seed))
    ref = _PerHead(atoms, idx)
    opt = torch.optim.AdamW([ref.Q, ref.K, ref.V], lr=0.05, weight_decay=0.1, foreach=False)
    ref_losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = token_loss(ref(x), y)
        ref_losses.append(float(loss.detach()))
        loss.backward()
        for p in (ref.Q, ref.K, ref.V):
            p.grad.mul_(L * H)  # mean-field scaling: one head's share of the output is 1/(L H)
        opt.step()
    losses = train_adamw(net, x, y, steps=4, lr=0.05, weight_decay=0.1)
    assert_allclose(losses[:4], ref_losses, rtol=1e-12)
    for l in range(L):
        for h in range(H):
            m = int(idx[l, h])
            for mine, theirs in ((net.Q, ref.Q), (net.K, ref.K), (net.V, ref.V)):
                assert_allclose(
                    mine[l, m].detach().numpy(), theirs[l, h].detach().numpy(), rtol=1e-10, atol=1e-12
                )
    assert losses[-1] < losses[0]


def test_mean_field_gradients_zero_for_absent_atoms(atoms):
    net = ResidualAttention(atoms, 2, 1, seed=0)
    token_loss(net(sphere_clouds(1, 3, 3, seed=0)), torch.zeros(1, 3, 3)).backward()
    mean_field_gradients(net)
    absent = net.weights == 0
    assert absent.any() and float(net.Q.grad[absent].abs().max()) == 0.0


def test_training_is_seeded_and_reproducible(atoms):
    x = sphere_clouds(2, 4, 3, seed=9)
    y = contraction_task(x)
    runs = []
    for _ in range(2):
        net = ResidualAttention(atoms, 4, 2, seed=5)
        runs.append((train_adamw(net, x, y, steps=3), net.Q.detach().clone()))
    assert runs[0][0] == runs[1][0] and torch.equal(runs[0][1], runs[1][1])


def test_fit_depth_width_recovers_parameters():
    L = np.repeat([2, 4, 8, 16, 32, 64], 4).astype(float)
    H = np.tile([1.0, 16.0, 256.0, math.inf], 6)
    y = 0.3 * L**-1.0 + 0.8 * L ** (-1 / 3) * np.where(np.isfinite(H), H**-0.5, 0.0)
    f = fit_depth_width(L, H, y)
    assert_allclose([f["a"], f["alpha"], f["b"], f["gamma"]], [0.3, 1.0, 0.8, 1 / 3], rtol=1e-6)
    noisy = y * np.exp(0.05 * np.random.default_rng(0).standard_normal(y.size))
    g = fit_depth_width(L, H, noisy)
    assert g["alpha_ci"][0] < 1.0 < g["alpha_ci"][1] and g["gamma_ci"][0] < 1 / 3 < g["gamma_ci"][1]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda a: xavier_atoms(0, 3, seed=0), "M .* must be an integer >= 1"),
        (lambda a: xavier_atoms(2, 3, seed=0, gain=-1.0), "gain must be"),
        (lambda a: head_counts(2, 0, 3, seed=0), "H must be an integer >= 1"),
        (lambda a: ResidualAttention((a[0], a[1][:2], a[2]), 2, 1), "one shape"),
        (lambda a: ResidualAttention(a, 0, 1), "L must be an integer >= 1"),
        (lambda a: ResidualAttention(a, 2, 1)(torch.zeros(3, 3)), r"x must have shape \[B, n, d\]"),
        (lambda a: limit_flow(torch.zeros(1, 2, 3), a, steps=0), "steps must be an integer >= 1"),
        (lambda a: limit_flow(torch.zeros(2, 3), a), r"x0 must have shape \[B, n, d\] with d = 3"),
        (lambda a: contraction_task(torch.zeros(1, 2, 3), 2.0), "kappa must lie in"),
        (
            lambda a: train_adamw(
                ResidualAttention(a, 2, 1), torch.zeros(1, 2, 3), torch.zeros(1, 2, 3), steps=1, lr=0.0
            ),
            "lr must be a finite number > 0",
        ),
        (
            lambda a: train_adamw(
                ResidualAttention(a, 2, 1), torch.zeros(1, 2, 3), torch.zeros(1, 2, 3), steps=-1
            ),
            "steps must be an integer >= 0",
        ),
        (
            lambda a: train_adamw(
                ResidualAttention(a, 2, 1), torch.zeros(1, 2, 3), torch.full((1, 2, 3), math.nan), steps=2
            ),
            "non-finite at step 0 \\(last finite loss: None\\)",
        ),
        (lambda a: fit_depth_width([1, 2, 3], [1, 1, 1], [1, 1, 1]), "at least 5 points"),
        (
            lambda a: fit_depth_width([1, 2, 3, 4, 5], [math.inf] * 5, [1, 1, 1, 1, 1]),
            "at least one finite H",
        ),
    ],
)
def test_bad_inputs(atoms, call, match):
    with pytest.raises(ValueError, match=match):
        call(atoms)


def test_quick_study(quick_study):
    d, s = quick_study("depth_limit")  # the session's quick run, with figures (tests/conftest.py)
    assert s["status"] == "done"
    inf = sorted((r["L"], r["err_x"]) for r in s["init_rows"] if r["H"] == "inf")
    assert all(
        e1 > e2 for (_, e1), (_, e2) in zip(inf, inf[1:], strict=False)
    )  # mean-field network: error falls with L
    assert s["rk4_half_step_difference"] < 1e-4
    # the reference's error estimate is honest at init: the extrapolation error is below the spread
    assert s["richardson_error_at_init"] < s["richardson_spread_at_init"][0]
    for key in ("init_x", "init_p", "trained_x", "trained_p"):
        assert set(s["fits"][key]) >= {"alpha", "alpha_ci", "gamma", "gamma_ci"}
    assert all(r["loss_final"] < r["loss_initial"] for r in s["train_rows"])
    ids = {r.id for r in read_records(s)}  # verdict records (attnflow.analysis.verdicts)
    assert "depth-limit-reference-accuracy" in ids and "depth-limit-n-independent" in ids
    for f in s["figures"].values():
        assert (d / f).read_bytes()[:4] == b"\x89PNG"
    # the work is two computation tasks on the run store (issue 30), read back by the analysis
    plan = get_study("depth_limit").plan(get_study("depth_limit").config(quick=True))
    # table.md is the one renderer's Markdown of the Table specs kept in tables.json
    specs = json.loads((d / "tables.json").read_text())["tables"]
    assert markdown([table_from_json(t) for t in specs]) == (d / "table.md").read_text()
    fits = next(t for t in specs if t["id"] == "fits")
    assert [r["alpha"] for r in fits["rows"]] == [s["fits"][k]["alpha"] for k in s["fits"]]
    assert set(plan) == {"init", "train"} and {t.kind for t in plan.values()} == {"compute"}
