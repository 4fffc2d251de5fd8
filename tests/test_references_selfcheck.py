"""Self-consistency of the independent references in tests/reference (they never import attnflow).

Before the package is compared with these references, the references are checked against each
other: scalar reduced ODEs vs direct full-state integrations, and the plain-NumPy Sec. 6 scheme
vs its own first-order energy identity.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference.numpy_paper import paper_scheme  # noqa: E402
from reference.reduced import (  # noqa: E402
    attention_velocity,
    equiangular_initial,
    equiangular_rho,
    equiangular_rhs,
    tokens_full,
    two_tokens_angle,
    two_tokens_full,
)


def _geodesic_angle(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # 2 arcsin(|x - y|/2) is accurate at small angles, where arccos(<x, y>) loses half the digits.
    return 2.0 * np.arcsin(np.clip(np.linalg.norm(x - y, axis=-1) / 2.0, 0.0, 1.0))


def _random_tokens(rng: np.random.Generator, P: int, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((P, n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _random_heads(rng: np.random.Generator, P: int, H: int, d: int, scale: float = 1.0) -> np.ndarray:
    Z = rng.standard_normal((P, H, d, d))
    return scale * (Z + np.swapaxes(Z, -1, -2))


# ------------------------------------------------------------------------------------------
# two tokens
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["softmax", "usa"])
@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("a", [1.5, -0.7])
def test_two_tokens_full_state_matches_angle_ode(kind: str, sign: int, a: float) -> None:
    rng = np.random.default_rng(11)
    d, beta, th0 = 4, 2.0, 1.2
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    x0 = np.array([[1.0, 0.0, 0.0, 0.0], [np.cos(th0), np.sin(th0), 0.0, 0.0]]) @ Q.T
    t = np.linspace(0.0, 2.0, 9)
    th = two_tokens_angle(th0, t, beta, a, kind, sign)
    xs = two_tokens_full(x0, a * np.eye(d), t, beta, kind, sign)
    # Both solves run at rtol = atol = 1e-12; 1e-9 leaves room for error growth over t = 2.
    assert_allclose(_geodesic_angle(xs[:, 0], xs[:, 1]), th, atol=1e-9, rtol=0)
    assert_allclose(np.linalg.norm(xs, axis=-1), 1.0, atol=1e-10)
    # The angle moves in the predicted direction: attraction iff sign * a > 0.
    assert (th[-1] < th0) == (sign * a > 0)


# ------------------------------------------------------------------------------------------
# equiangular configurations
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,rho0", [(2, -1.0), (3, -0.5), (4, 0.0), (5, 0.3), (6, 0.95)])
def test_equiangular_initial_has_the_requested_gram(n: int, rho0: float) -> None:
    X = equiangular_initial(n, n + 2, rho0, rng=np.random.default_rng(n))
    G = X @ X.T
    expected = np.full((n, n), rho0)
    np.fill_diagonal(expected, 1.0)
    assert_allclose(G, expected, atol=1e-13)


@pytest.mark.parametrize("kind", ["softmax", "usa"])
@pytest.mark.parametrize("n,beta,rho0", [(3, 0.5, 0.5), (4, 1.0, 0.1), (5, 3.0, -0.2), (8, 4.0, 0.0)])
def test_equiangular_rhs_equals_two_inner_product_of_velocity(
    kind: str, n: int, beta: float, rho0: float
) -> None:
    # Pointwise check of the closed form: rho' = <x_i', x_j> + <x_i, x_j'> for every pair.
    X = equiangular_initial(n, n + 1, rho0, rng=np.random.default_rng(1))
    vel = attention_velocity(X, np.eye(n + 1), beta=beta, kind=kind, V=np.eye(n + 1))
    dG = vel @ X.T + X @ vel.T
    off = dG[~np.eye(n, dtype=bool)]
    assert_allclose(off, equiangular_rhs(rho0, n=n, beta=beta, kind=kind), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["softmax", "usa"])
@pytest.mark.parametrize("n,beta,rho0", [(3, 0.5, 0.5), (4, 1.0, 0.1), (5, 3.0, -0.2)])
def test_equiangular_full_state_matches_scalar_ode(kind: str, n: int, beta: float, rho0: float) -> None:
    d = n + 1
    t = np.linspace(0.0, 3.0, 7)
    X0 = equiangular_initial(n, d, rho0, rng=np.random.default_rng(5))
    xs = tokens_full(X0, np.eye(d), t, beta, kind, 1, V=np.eye(d))
    gram = np.einsum("tia,tja->tij", xs, xs)
    off = gram[:, ~np.eye(n, dtype=bool)]
    rho = equiangular_rho(rho0, n, beta, t, kind)
    assert_allclose(off, np.broadcast_to(rho[:, None], off.shape), atol=1e-10, rtol=0)
    assert np.all(np.diff(rho) > 0)  # ascent with D = I clusters: rho increases towards 1


# ------------------------------------------------------------------------------------------
# the plain-NumPy Sec. 6 scheme
# ------------------------------------------------------------------------------------------
def _scheme(H: int, dt: float, *, T: float = 1.0, seed: int = 1, **kwargs) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    P, n, d = 2, 6, 3
    x0 = _random_tokens(rng, P, n, d)
    D0 = _random_heads(rng, P, H, d)
    return paper_scheme(x0, D0, dt=dt, n_steps=int(round(T / dt)), **kwargs)


def _ou_drift(D: np.ndarray, t: float) -> np.ndarray:
    return np.eye(D.shape[-1]) - D


_FIXED_V = np.linalg.qr(np.random.default_rng(7).standard_normal((3, 3)))[0][None, None] * np.ones(
    (2, 1, 1, 1)
)


@pytest.mark.parametrize(
    "H,kwargs",
    [
        (1, {"sign": 1}),
        (1, {"sign": -1}),
        (1, {"sign": 1, "projected": False}),
        (1, {"sign": -1, "projected": False, "beta": 2.0}),
        (1, {"sign": -1, "V": _FIXED_V}),
        (3, {"sign": 1}),
        (3, {"sign": -1, "drift": _ou_drift}),
    ],
)
def test_exact_residual_is_first_order_in_dt(H: int, kwargs: dict) -> None:
    # Without noise the left-Riemann identity closes at O(dt): R(dt) = C dt + O(dt^2), so halving
    # dt divides |R(T)| by 2 + O(dt); at dt <= 0.02 the band [1.8, 2.2] covers the O(dt) term.
    if "V" in kwargs:
        kwargs = {**kwargs, "V": kwargs["V"][:, :H]}
    R = [np.abs(_scheme(H, dt, **kwargs)["R_exact"][-1]).sum() for dt in (0.02, 0.01, 0.005)]
    ratios = np.array([R[0] / R[1], R[1] / R[2]])
    assert np.all((ratios > 1.8) & (ratios < 2.2)), ratios


def test_paper_residual_does_not_vanish_for_distinct_heads() -> None:
    # NOTES §3: with H > 1 distinct heads the harmonic-mean G^2 is not the dissipation power,
    # so R_paper tends to a nonzero limit while R_exact -> 0.
    out = [_scheme(3, dt, sign=1) for dt in (0.01, 0.005)]
    Rp = [np.abs(o["R_paper"][-1]).sum() for o in out]
    Re = [np.abs(o["R_exact"][-1]).sum() for o in out]
    assert Rp[1] > 0.9 * Rp[0]
    assert Rp[1] > 20 * Re[1]


def test_g2_equals_ghat2_for_one_head_and_identical_heads() -> None:
    rng = np.random.default_rng(2)
    x0 = _random_tokens(rng, 2, 5, 3)
    D1 = _random_heads(rng, 2, 1, 3)
    for D0 in (D1, np.repeat(D1, 4, axis=1)):
        out = paper_scheme(x0, D0, dt=0.01, n_steps=20, sign=-1)
        assert_allclose(out["G2"], out["Ghat2"], rtol=1e-12, atol=1e-14)
    out = paper_scheme(x0, _random_heads(rng, 2, 4, 3), dt=0.01, n_steps=5, sign=-1)
    assert np.max(np.abs(out["G2"] - out["Ghat2"])) > 1e-3


@pytest.mark.parametrize("sign", [1, -1])
def test_energy_monotone_for_frozen_single_head(sign: int) -> None:
    out = _scheme(1, 0.005, sign=sign)
    steps = sign * np.diff(out["E"], axis=0)
    assert np.all(steps >= -1e-14)
    assert np.all(out["Ghat2"] >= 0)


@pytest.mark.parametrize("projected", [True, False])
def test_tokens_stay_on_the_sphere(projected: bool) -> None:
    rng = np.random.default_rng(4)
    P, H, n, d, K = 2, 3, 7, 3, 50
    noise = rng.standard_normal((K, P, H, d, d))
    out = paper_scheme(
        _random_tokens(rng, P, n, d),
        _random_heads(rng, P, H, d),
        dt=0.01,
        n_steps=K,
        sign=-1,
        drift=_ou_drift,
        g=np.sqrt(2.0),
        noise=noise,
        projected=projected,
    )
    assert_allclose(np.linalg.norm(out["x"], axis=-1), 1.0, atol=1e-14)
    assert np.all(np.isfinite(out["R_exact"]))
    # D stays symmetric: symmetric start, symmetric drift, symmetrised noise.
    assert_allclose(out["D"], np.swapaxes(out["D"], -1, -2), atol=1e-12)


def test_ito_term_matches_one_step_mean_energy_change() -> None:
    # One step from a common state over many noise draws: E_1 - E_0 - dM - (drift + Ito + s Ghat2) dt
    # has mean O(dt^2) and standard deviation O(dt) (the centred quadratic noise term), so its
    # sample mean is a small fraction of the Ito term.  beta = 2 also checks the factor beta.
    rng = np.random.default_rng(3)
    P, n, d, H, dt, beta = 2000, 4, 3, 2, 1e-3, 2.0
    x1 = _random_tokens(rng, 1, n, d)[0]
    D1 = _random_heads(rng, 1, H, d, scale=0.5)[0]
    out = paper_scheme(
        np.broadcast_to(x1, (P, n, d)).copy(),
        np.broadcast_to(D1, (P, H, d, d)).copy(),
        dt=dt,
        n_steps=1,
        beta=beta,
        sign=-1,
        drift=_ou_drift,
        g=np.sqrt(2.0),
        noise=rng.standard_normal((1, P, H, d, d)),
    )
    residual = out["R_exact"][-1]
    ito = out["dtE_ito"][0, 0] * dt
    stderr = residual.std() / np.sqrt(P)
    assert stderr < 0.05 * ito  # the test has power to see a missing or mis-scaled Ito term
    assert abs(residual.mean()) < max(4 * stderr, 1e-3 * ito)
    # same Ito factor on every path (identical state), as it must be
    assert_allclose(out["dtE_ito"][0], ito / dt, rtol=1e-13)


def test_reference_input_validation() -> None:
    rng = np.random.default_rng(0)
    x0 = _random_tokens(rng, 1, 3, 3)
    D0 = _random_heads(rng, 1, 1, 3)
    with pytest.raises(ValueError, match="needs a noise array"):
        paper_scheme(x0, D0, dt=0.1, n_steps=2, g=1.0)
    with pytest.raises(ValueError, match="noise must have shape"):
        paper_scheme(x0, D0, dt=0.1, n_steps=2, g=1.0, noise=np.zeros((1, 1, 1, 3, 3)))
    with pytest.raises(ValueError, match="sign must be"):
        paper_scheme(x0, D0, dt=0.1, n_steps=2, sign=0)
    with pytest.raises(ValueError, match="kind must be one of"):
        two_tokens_angle(1.0, np.linspace(0, 1, 3), 1.0, 1.0, kind="relu")
    with pytest.raises(ValueError, match="rho0 must lie"):
        equiangular_initial(3, 3, -0.9)
