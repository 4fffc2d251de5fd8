"""Invariants of the simulated dynamics along whole trajectories (STYLE rule 14).

* unit norm of every token at every recorded time, for every integrator;
* rotation equivariance (x -> R x, D -> R D R^T, V -> R V R^T) and permutation equivariance of
  tokens and of heads, for every attention kind;
* H identical heads equal one head; USA ascent with symmetric frozen D increases E monotonically;
* large beta stays finite; flat geometry; causal mask; Sinkhorn weights; layer scaling;
* the non-softmax kinds against a plain NumPy evaluation of their documented weights.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from reference.formulas import attention_field
from scipy.integrate import solve_ivp
from scipy.special import expit, logsumexp

import attnflow as af
from attnflow.dynamics import evaluate
from attnflow.model.attention import attention_weights, sinkhorn_log
from attnflow.simulation import SCALARS

KINDS = ("softmax", "usa", "relu", "sigmoid", "sinkhorn")
INTEGRATORS = ("euler", "euler_printed", "heun", "rk4")
BACKENDS = ("torch", "auto")
F64 = torch.float64


def _orthogonal(d: int, seed: int) -> torch.Tensor:
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return torch.from_numpy(q * np.sign(np.diag(r)))


def _run(model, x0, D0, *, n_steps=10, dt=0.02, integrator="rk4", values=None, seed=0, dtype="float64"):
    return af.simulate(
        model, x0, D0, t1=n_steps * dt, dt=dt, integrator=integrator, values=values, seed=seed, dtype=dtype
    )


# ------------------------------------------------------------------------------------------
# unit norm
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("direction", ["ascent", "descent"])
def test_tokens_stay_on_the_sphere(integrator: str, direction: str, backend: str) -> None:
    # OU heads (noisy, symmetric) and beta = 2: a stiff-ish, moving field; every recorded state is
    # the retraction of something, so |x_i| = 1 to round-off (a few ulp).
    model = af.TransformerModel(
        direction=direction, beta=2.0, weights=af.OrnsteinUhlenbeck(), backend=backend
    )
    x0 = af.tokens.octahedral(2, 12, 3, seed=1)
    D0 = af.heads.symmetric_gaussian(2, 3, 3, seed=1)
    ds = _run(model, x0, D0, n_steps=40, dt=0.02, integrator=integrator, seed=3)
    norms = np.linalg.norm(ds.positions.values, axis=-1)
    assert_allclose(norms, 1.0, rtol=0, atol=4e-15)
    assert np.abs(ds.positions.values[:, -1] - ds.positions.values[:, 0]).max() > 1e-2  # it moved


# ------------------------------------------------------------------------------------------
# equivariance
# ------------------------------------------------------------------------------------------
def _equivariance_setup(kind: str, causal: bool = False):
    P, n, d, H = 2, 7, 3, 3
    x0 = af.tokens.uniform(P, n, d, seed=5)
    D0 = af.heads.gaussian(P, H, d, seed=5)  # non-symmetric: exercises the D^T term of the gradient
    V = af.heads.gaussian(P, H, d, seed=6)
    F = af.heads.gaussian(1, H, d, seed=7)[0]
    # OU with sigma2 = 0: a deterministic drift F - D that moves the heads and transforms covariantly.
    return x0, D0, V, F


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("use_values", [False, True])
def test_rotation_equivariance(kind: str, use_values: bool) -> None:
    x0, D0, V, F = _equivariance_setup(kind)
    R = _orthogonal(3, 11)
    rot = lambda M: R @ M @ R.T  # noqa: E731
    kw = {"direction": "ascent", "attention": kind, "beta": 1.5, "backend": "torch"}
    m = af.TransformerModel(**kw, weights=af.OrnsteinUhlenbeck(F=F, sigma2=0.0))
    m_rot = af.TransformerModel(**kw, weights=af.OrnsteinUhlenbeck(F=rot(F), sigma2=0.0))
    ds = _run(m, x0, D0, values=V if use_values else None)
    ds_rot = _run(m_rot, x0 @ R.T, rot(D0), values=rot(V) if use_values else None)
    assert_allclose(ds_rot.positions.values, ds.positions.values @ R.numpy().T, rtol=0, atol=1e-12)
    for k in ("energy", "G2", "Ghat2", "dtE_drift", "residual_exact"):
        assert_allclose(ds_rot[k].values, ds[k].values, rtol=1e-11, atol=1e-13, err_msg=k)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rotation_equivariance_softmax_oscillating_causal(backend: str) -> None:
    # The oscillating forcing is a fixed matrix: equivariance holds with the forcing rotated too.
    x0, D0, _, _ = _equivariance_setup("softmax")
    R = _orthogonal(3, 12)
    Rn = R.numpy()
    osc = af.Oscillating(forcing="s2")
    osc_rot = af.Oscillating(forcing=lambda tau: R @ af.model.weights.forcing_s2(tau) @ R.T)
    kw = {"direction": "descent", "causal": True, "backend": backend}
    ds = _run(af.TransformerModel(**kw, weights=osc), x0, D0)
    ds_rot = _run(af.TransformerModel(**kw, weights=osc_rot), x0 @ R.T, R @ D0 @ R.T)
    assert_allclose(ds_rot.positions.values, ds.positions.values @ Rn.T, rtol=0, atol=1e-12)
    assert_allclose(ds_rot.energy.values, ds.energy.values, rtol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_token_permutation_equivariance(kind: str) -> None:
    x0, D0, V, F = _equivariance_setup(kind)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    m = af.TransformerModel(
        direction="descent",
        attention=kind,
        beta=1.5,
        backend="torch",
        weights=af.OrnsteinUhlenbeck(F=F, sigma2=0.0),
    )
    ds = _run(m, x0, D0, values=V)
    ds_p = _run(m, x0[:, perm], D0, values=V)
    assert_allclose(ds_p.positions.values, ds.positions.values[:, :, perm.numpy()], rtol=0, atol=1e-12)
    for k in ("energy", "G2", "Ghat2", "dtE_drift"):
        assert_allclose(ds_p[k].values, ds[k].values, rtol=1e-11, atol=1e-13, err_msg=k)


@pytest.mark.parametrize("kind", KINDS)
def test_head_permutation_invariance(kind: str) -> None:
    x0, D0, V, F = _equivariance_setup(kind)
    perm = torch.tensor([2, 0, 1])
    kw = {"direction": "ascent", "attention": kind, "beta": 1.5, "backend": "torch"}
    ds = _run(af.TransformerModel(**kw, weights=af.OrnsteinUhlenbeck(F=F, sigma2=0.0)), x0, D0, values=V)
    ds_p = _run(
        af.TransformerModel(**kw, weights=af.OrnsteinUhlenbeck(F=F[perm], sigma2=0.0)),
        x0,
        D0[:, perm],
        values=V[:, perm],
    )
    assert_allclose(ds_p.positions.values, ds.positions.values, rtol=0, atol=1e-12)
    for k in SCALARS:
        assert_allclose(ds_p[k].values, ds[k].values, rtol=1e-11, atol=1e-13, err_msg=k)


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_equivariances_with_default_backend(backend: str) -> None:
    # The same three symmetries through the dispatching evaluate() (numba kernel under "auto").
    x0, D0, V, _ = _equivariance_setup("softmax")
    R = _orthogonal(3, 13)
    m = af.TransformerModel(direction="ascent", beta=2.0, backend=backend)
    fe = evaluate(m, x0, D0, V, 0.0)
    fe_r = evaluate(m, x0 @ R.T, R @ D0 @ R.T, R @ V @ R.T, 0.0)
    tp, hp = torch.tensor([4, 2, 0, 1, 3, 6, 5]), torch.tensor([1, 2, 0])
    fe_t = evaluate(m, x0[:, tp], D0, V, 0.0)
    fe_h = evaluate(m, x0, D0[:, hp], V[:, hp], 0.0)
    tol = {"rtol": 1e-12, "atol": 1e-13}
    torch.testing.assert_close(fe_r.velocity, fe.velocity @ R.T, **tol)
    torch.testing.assert_close(fe_t.velocity, fe.velocity[:, tp], **tol)
    torch.testing.assert_close(fe_h.velocity, fe.velocity, **tol)
    torch.testing.assert_close(fe_r.grad, fe.grad @ R.T, **tol)
    for other in (fe_r, fe_t, fe_h):
        for k in ("energy", "G2", "Ghat2"):
            torch.testing.assert_close(getattr(other, k), getattr(fe, k), **tol)


# ------------------------------------------------------------------------------------------
# identical heads, monotone energy
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["softmax", "usa"])
def test_identical_heads_equal_one_head(kind: str, backend: str) -> None:
    x0 = af.tokens.uniform(2, 8, 3, seed=2)
    D1 = af.heads.symmetric_gaussian(2, 1, 3, seed=2) * 0.5
    # shared phases: every head gets the same forcing, so identical heads stay identical
    m = af.TransformerModel(
        direction="descent", attention=kind, weights=af.Oscillating(phases="shared"), backend=backend
    )
    ds1 = _run(m, x0, D1)
    ds4 = _run(m, x0, D1.repeat(1, 4, 1, 1))
    assert_allclose(ds4.positions.values, ds1.positions.values, rtol=0, atol=1e-13)
    for k in SCALARS:
        assert_allclose(ds4[k].values, ds1[k].values, rtol=1e-12, atol=1e-14, err_msg=k)
    # with one head (or identical heads) the paper's G^2 is the exact dissipation power (softmax:
    # v = grad E / m, so <v, n grad E> = m |v|^2 = b |v|^2; not for USA, where v = n grad E)
    if kind == "softmax":
        assert_allclose(ds4.G2.values, ds4.Ghat2.values, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("beta", [0.5, 1.0])
def test_usa_ascent_energy_increases_monotonically(beta: float) -> None:
    # USA with symmetric frozen D: v_i = n P_perp grad_i E, so dE/dt = n sum_i |P_perp grad_i E|^2 >= 0.
    # RK4 at dt = 0.01 keeps every discrete increment positive; E' = Ghat^2 checks the rate itself.
    x0 = af.tokens.uniform(2, 10, 3, seed=8)
    D0 = af.heads.symmetric_gaussian(2, 2, 3, seed=8) * 0.5
    m = af.TransformerModel(direction="ascent", attention="usa", beta=beta, backend="torch")
    dt = 0.01
    ds = _run(m, x0, D0, n_steps=100, dt=dt)
    E = ds.energy.values
    # Once the tokens have clustered E is flat to round-off: allow 8 ulp of E per step.
    assert (np.diff(E, axis=1) > -8 * np.finfo(float).eps * E[:, 1:]).all()
    assert (E[:, -1] - E[:, 0] > 0.01 * E[:, 0]).all()
    G = ds.Ghat2.values
    assert (G >= 0).all()
    # E' = s Ghat^2: each increment equals the trapezoid rule of Ghat^2 up to a relative O(dt^2)
    # (measured 4e-3 at beta = 1, dt = 0.01, and 4x less at dt/2); 2e-2 leaves 5x margin.
    assert_allclose(np.diff(E, axis=1), dt * (G[:, 1:] + G[:, :-1]) / 2, rtol=2e-2, atol=1e-14)


# ------------------------------------------------------------------------------------------
# large beta
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_large_beta_stays_finite(dtype: str, backend: str) -> None:
    # beta = 100 with heads of norm ~4: scores up to ~400, exp overflows float32 (and nearly float64)
    # unless every exponential is shifted.  Softmax weights are convex, so |v| <= max |V|.
    torch_dtype = getattr(torch, dtype)
    x0 = af.tokens.octahedral(2, 16, 3, seed=4, dtype=torch_dtype)
    D0 = af.heads.symmetric_gaussian(2, 2, 3, seed=4, dtype=torch_dtype)
    m = af.TransformerModel(direction="descent", beta=100.0, weights=af.OrnsteinUhlenbeck(), backend=backend)
    ds = _run(m, x0, D0, n_steps=20, dt=0.01, integrator="euler", dtype=dtype)
    assert np.isfinite(ds.positions.values).all()
    assert_allclose(
        np.linalg.norm(ds.positions.values, axis=-1), 1.0, atol=1e-5 if dtype == "float32" else 1e-14
    )
    fe = evaluate(m, x0, D0, None, 0.0)
    assert torch.isfinite(fe.velocity).all() and torch.isfinite(fe.lse).all()
    bound = torch.linalg.matrix_norm(D0, ord=2).max()
    assert float(fe.velocity.norm(dim=-1).max()) <= float(bound) * (1 + 1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_large_beta_ledger_is_finite_float64(dtype: str, backend: str, request) -> None:
    # The design keeps ledger quantities in float64 whatever the working precision: E ~ e^{400}
    # at beta = 100 is representable in float64 even when the tokens are float32.
    m = af.TransformerModel(direction="descent", beta=100.0, backend=backend)
    torch_dtype = getattr(torch, dtype)
    x0 = af.tokens.octahedral(2, 16, 3, seed=4, dtype=torch_dtype)
    D0 = af.heads.symmetric_gaussian(2, 2, 3, seed=4, dtype=torch_dtype)
    fe = evaluate(m, x0, D0, None, 0.0)
    for k in ("energy", "G2", "Ghat2", "grad", "second_moment", "ito_moment"):
        val = getattr(fe, k)
        assert val.dtype == F64, k
        assert torch.isfinite(val).all(), k
    assert float(fe.energy.max()) > 1e100  # really beyond float32


# ------------------------------------------------------------------------------------------
# other attention kinds against their documented weights (plain NumPy)
# ------------------------------------------------------------------------------------------
def _numpy_velocity(
    x: np.ndarray, D: np.ndarray, V: np.ndarray, beta: float, kind: str, causal: bool
) -> np.ndarray:
    P, n, d = x.shape
    H = D.shape[1]
    out = np.zeros_like(x)
    for p in range(P):
        for h in range(H):
            S = beta * x[p] @ D[p, h] @ x[p].T
            mask = np.tril(np.ones((n, n), bool)) if causal else np.ones((n, n), bool)
            Sm = np.where(mask, S, -np.inf)
            if kind == "softmax":
                A = np.exp(Sm - logsumexp(Sm, axis=1, keepdims=True))
            elif kind == "usa":
                A = np.exp(Sm) / n
            elif kind == "relu":
                A = np.where(mask, np.maximum(S, 0.0), 0.0) / n
            else:  # sigmoid
                A = np.where(mask, expit(S), 0.0) / n
            W = A @ x[p] @ V[p, h].T
            out[p] += (W - (W * x[p]).sum(-1, keepdims=True) * x[p]) / H
    return out


@pytest.mark.parametrize("kind", ["softmax", "usa", "relu", "sigmoid"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_kinds_match_numpy(kind: str, causal: bool) -> None:
    x = af.tokens.uniform(2, 6, 4, seed=9)
    D = af.heads.gaussian(2, 3, 4, seed=9)
    V = af.heads.gaussian(2, 3, 4, seed=10)
    m = af.TransformerModel(direction="ascent", attention=kind, beta=1.3, causal=causal, backend="torch")
    fe = evaluate(m, x, D, V, 0.0)
    ref = _numpy_velocity(x.numpy(), D.numpy(), V.numpy(), 1.3, kind, causal)
    assert_allclose(fe.velocity.numpy(), ref, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------
# flat geometry
# ------------------------------------------------------------------------------------------
def test_flat_euler_step_is_unprojected() -> None:
    x = af.tokens.uniform(1, 5, 3, seed=3) * 1.5  # off the sphere: allowed in R^d
    D = af.heads.gaussian(1, 2, 3, seed=3)
    m = af.TransformerModel(direction="descent", geometry="flat", backend="torch")
    sim = af.Simulator(m, x, D, dt=0.05)
    sim.step()
    xn, Dn = x.numpy(), D.numpy()
    W = attention_field(xn, Dn, tangent=False)
    assert_allclose(sim.x.numpy(), xn - 0.05 * W, rtol=1e-13, atol=1e-15)


def test_flat_rk4_matches_solve_ivp() -> None:
    # x_i' = s (1/H) sum_h sum_j A^h_ij D_h x_j in R^d (no projection), frozen heads.
    x0 = af.tokens.uniform(1, 4, 3, seed=6)
    D = af.heads.symmetric_gaussian(1, 2, 3, seed=6) * 0.3
    m = af.TransformerModel(direction="ascent", geometry="flat", backend="torch")
    ds = _run(m, x0, D, n_steps=50, dt=0.02)
    Dn = D.numpy()[0]

    def rhs(_t, y):
        return attention_field(y.reshape(4, 3), Dn, tangent=False).ravel()

    t = ds.time.values
    sol = solve_ivp(rhs, (0, t[-1]), x0.numpy().ravel(), method="DOP853", t_eval=t, rtol=1e-13, atol=1e-13)
    ref = sol.y.T.reshape(len(t), 4, 3)
    # RK4 error at dt = 0.02 over t = 1: C dt^4 ~ 1e-8 for this O(1) field; round-off far below.
    assert_allclose(ds.positions.values[0], ref, rtol=0, atol=1e-8)
    assert np.abs(np.linalg.norm(ref[-1], axis=-1) - 1).max() > 1e-3  # really left the sphere


# ------------------------------------------------------------------------------------------
# causal mask
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_causal_first_token_is_fixed(integrator: str, backend: str) -> None:
    # With D = V = I token 0 attends only to itself: W_0 = x_0, P_perp(x_0) x_0 = 0, so x_0 stays put.
    x0 = af.tokens.uniform(2, 6, 3, seed=12)
    m = af.TransformerModel(direction="ascent", causal=True, backend=backend)
    ds = _run(m, x0, af.heads.identity(2, 1, 3), n_steps=25, dt=0.04, integrator=integrator)
    pos = ds.positions.values
    assert_allclose(pos[:, :, 0], np.broadcast_to(pos[:, :1, 0], pos[:, :, 0].shape), rtol=0, atol=1e-15)
    assert np.abs(pos[:, -1, 1:] - pos[:, 0, 1:]).min() > 1e-3  # the others move


# Not Sinkhorn: its column normalisation couples every row to every column, mask or not.
@pytest.mark.parametrize("kind", ["softmax", "usa", "relu", "sigmoid"])
def test_causal_tokens_ignore_later_tokens(kind: str) -> None:
    # Changing the last token leaves the trajectories of all earlier tokens unchanged.
    x0 = af.tokens.uniform(1, 6, 3, seed=13)
    x1 = x0.clone()
    x1[0, -1] = af.tokens.uniform(1, 1, 3, seed=99)[0, 0]
    D0 = af.heads.gaussian(1, 2, 3, seed=13)
    m = af.TransformerModel(direction="descent", attention=kind, causal=True, backend="torch")
    a, b = _run(m, x0, D0).positions.values, _run(m, x1, D0).positions.values
    assert_allclose(b[:, :, :-1], a[:, :, :-1], rtol=0, atol=1e-15)
    assert np.abs(b[:, -1, -1] - a[:, -1, -1]).max() > 1e-2


# ------------------------------------------------------------------------------------------
# Sinkhorn
# ------------------------------------------------------------------------------------------
# Non-causal only: the one doubly stochastic lower-triangular matrix is the identity, which
# Sinkhorn approaches only slowly under a causal mask.
@pytest.mark.parametrize("causal", [False])
def test_sinkhorn_weights_are_doubly_stochastic(causal: bool) -> None:
    x = af.tokens.uniform(2, 9, 3, seed=14)
    D = af.heads.symmetric_gaussian(2, 2, 3, seed=14)
    s = 1.0 * torch.einsum("pia,phab,pjb->phij", x, D, x)
    if causal:
        s = s.masked_fill(~torch.ones(9, 9, dtype=torch.bool).tril(), float("-inf"))
    A = attention_weights(s, torch.logsumexp(s, -1), "sinkhorn", sinkhorn_iters=200)
    assert (A >= 0).all()
    ones = torch.ones(2, 2, 9, dtype=F64)
    torch.testing.assert_close(A.sum(-1), ones, rtol=0, atol=1e-14)  # rows: exact after the last sweep
    torch.testing.assert_close(A.sum(-2), ones, rtol=0, atol=1e-9)  # columns: to the iteration error
    # it is a diagonal scaling of exp(s): log A - s = a_i + b_j has zero mixed second differences
    if not causal:
        L = torch.log(A) - s
        mixed = L[..., 1:, 1:] - L[..., 1:, :1] - L[..., :1, 1:] + L[..., :1, :1]
        torch.testing.assert_close(mixed, torch.zeros_like(mixed), rtol=0, atol=1e-10)
    torch.testing.assert_close(sinkhorn_log(s, 200), A, rtol=0, atol=0)


def test_sinkhorn_velocity_uses_doubly_stochastic_weights() -> None:
    x = af.tokens.uniform(1, 7, 3, seed=15)
    D = af.heads.symmetric_gaussian(1, 1, 3, seed=15)
    m = af.TransformerModel(direction="ascent", attention="sinkhorn", sinkhorn_iters=300, backend="torch")
    fe = evaluate(m, x, D, None, 0.0)
    X, Dn = x.numpy()[0], D.numpy()[0, 0]
    K = np.exp(X @ Dn @ X.T)
    a, b = np.ones(7), np.ones(7)
    for _ in range(2000):  # plain (non-log) Sinkhorn to convergence
        a = 1 / (K @ b)
        b = 1 / (K.T @ a)
    a = 1 / (K @ b)
    A = a[:, None] * K * b[None, :]
    W = A @ X @ Dn.T
    ref = W - (W * X).sum(-1, keepdims=True) * X
    assert_allclose(fe.velocity.numpy()[0], ref, rtol=0, atol=1e-9)


# ------------------------------------------------------------------------------------------
# layer scaling
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("H", [1, 4])
@pytest.mark.parametrize("t", [0.0, 1.7])
def test_layer_scaling_acts_as_scaled_heads(H: int, t: float) -> None:
    # Documented: every head acts as D / ((t0 + t) sqrt(H)), and V likewise.
    t0 = 0.5
    x = af.tokens.uniform(2, 6, 3, seed=16)
    D = af.heads.gaussian(2, H, 3, seed=16) * 3
    V = af.heads.gaussian(2, H, 3, seed=17) * 3
    c = 1.0 / ((t0 + t) * np.sqrt(H))
    scaled = af.TransformerModel(direction="descent", layer_scaling=t0, backend="torch")
    plain = af.TransformerModel(direction="descent", backend="torch")
    for values in (None, V):
        fe_s = evaluate(scaled, x, D, values, t)
        fe_p = evaluate(plain, x, c * D, None if values is None else c * values, t)
        for k in ("velocity", "lse", "energy", "G2", "Ghat2", "grad", "second_moment", "ito_moment"):
            torch.testing.assert_close(getattr(fe_s, k), getattr(fe_p, k), rtol=1e-13, atol=1e-15, msg=k)
    assert scaled.head_scale(t, H) == pytest.approx(c, rel=1e-15)
    assert scaled.head_scale_rate(t, H) == pytest.approx(-c / (t0 + t), rel=1e-15)
    assert plain.head_scale(t, H) == 1.0 and plain.head_scale_rate(t, H) == 0.0


def test_layer_scaling_ledger_closes() -> None:
    # With scaled heads c(t) D the weight part of dE/dt contains c' D: the exact residual must
    # still vanish at O(dt) (halving dt halves it).
    x0 = af.tokens.uniform(1, 6, 3, seed=18)
    D0 = af.heads.symmetric_gaussian(1, 2, 3, seed=18)
    m = af.TransformerModel(direction="descent", layer_scaling=0.5, weights=af.Oscillating(), backend="torch")
    R = [
        abs(
            float(
                _run(m, x0, D0, n_steps=int(round(1 / dt)), dt=dt, integrator="euler").residual_exact[0, -1]
            )
        )
        for dt in (0.02, 0.01)
    ]
    assert 1.7 < R[0] / R[1] < 2.3, R
