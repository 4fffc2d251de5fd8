"""attnflow against the independent plain-NumPy Sec. 6 scheme (tests/reference/numpy_paper.py).

Same initial state, same Gaussian increments: the noise stream of each path is replayed
(``attnflow.random.path_generator(seed, p, "noise")``: at step k path p draws ``torch.randn(H, d, d)``,
see Simulator.step) and handed to ``paper_scheme``. In float64 the two implementations must agree
to round-off on positions, heads, energy, G2, Ghat2, the drift and Ito rates, the martingale and
both residuals of the energy identity (eq. (147)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from reference.forcing import forcing_s2
from reference.numpy_paper import paper_scheme

import attnflow as af
from attnflow.random import path_generator

P, N, DIM, H, K, DT, SEED = 2, 6, 3, 3, 20, 0.01, 17
# Round-off: both sides sum O(n H) terms of size O(e^{|D|}) per step in a different order; after
# K = 20 steps the measured differences are ~1e-14 relative. 1e-11 leaves three orders of margin
# while a wrong sign, factor or time index would show at 1e-3 or more.
TOL = {"rtol": 1e-11, "atol": 1e-12}


def _replayed_noise(seed: int, n_steps: int, paths: int) -> np.ndarray:
    """(n_steps, P, H, d, d) standard normals exactly as the Simulator draws them."""
    out = np.empty((n_steps, paths, H, DIM, DIM))
    for p in range(paths):
        g = path_generator(seed, p, "noise")
        for k in range(n_steps):
            out[k, p] = torch.randn(H, DIM, DIM, generator=g, dtype=torch.float64).numpy()
    return out


def _weights(kind: str):
    """(attnflow process, NumPy drift f(D (H,d,d), t), g)."""
    if kind == "ou":
        sigma2 = 0.8
        return af.OrnsteinUhlenbeck(sigma2=sigma2), (lambda D, t: np.eye(DIM) - D), math.sqrt(2 * sigma2)
    phases = "per_head" if kind == "osc_per_head" else "shared"

    def drift(D, t):
        phi = [2 * np.pi * h / H if phases == "per_head" else 0.0 for h in range(H)]
        return np.stack([forcing_s2(t + ph) for ph in phi]) - D

    return af.Oscillating(forcing="s2", phases=phases), drift, 0.0


def _compare(ds, ref, *, with_heads: bool = True) -> None:
    tr = lambda a: np.moveaxis(a, 0, 1)  # noqa: E731  (time, path, ...) -> (path, time, ...)
    assert_allclose(ds.time.values, ref["t"], rtol=0, atol=1e-14)
    assert_allclose(ds.positions.values, tr(ref["x"]), **TOL, err_msg="positions")
    if with_heads:
        assert_allclose(ds.heads.values, tr(ref["D"]), **TOL, err_msg="heads")
    assert_allclose(ds.energy.values, tr(ref["E"]), **TOL, err_msg="energy")
    # per-step rates at the left points t_0..t_{K-1}
    for ours, theirs in (
        ("G2", "G2"),
        ("Ghat2", "Ghat2"),
        ("dtE_drift", "dtE_drift"),
        ("dtE_ito", "dtE_ito"),
    ):
        assert_allclose(ds[ours].values[:, :-1], tr(ref[theirs]), **TOL, err_msg=ours)
    int_dtE = np.concatenate([np.zeros((1, P)), np.cumsum(ref["dtE_drift"] + ref["dtE_ito"], 0)]) * DT
    assert_allclose(ds.int_dtE.values, tr(int_dtE), **TOL, err_msg="int_dtE")
    assert_allclose(ds.martingale.values, tr(ref["M"]), **TOL, err_msg="martingale")
    assert_allclose(ds.residual_paper.values, tr(ref["R_paper"]), **TOL, err_msg="residual_paper")
    assert_allclose(ds.residual_exact.values, tr(ref["R_exact"]), **TOL, err_msg="residual_exact")


@pytest.mark.parametrize("backend", ["torch", "auto"])
@pytest.mark.parametrize("integrator", ["euler", "euler_printed"])
@pytest.mark.parametrize("direction", ["ascent", "descent"])
@pytest.mark.parametrize("weights", ["ou", "osc_per_head", "osc_shared"])
def test_matches_numpy_paper_scheme(weights: str, direction: str, integrator: str, backend: str) -> None:
    process, drift, g = _weights(weights)
    model = af.TransformerModel(direction=direction, weights=process, backend=backend)
    x0 = af.tokens.octahedral(P, N, DIM, seed=SEED)
    D0 = af.heads.symmetric_gaussian(P, H, DIM, seed=SEED)
    ds = af.simulate(model, x0, D0, t1=K * DT, dt=DT, integrator=integrator, seed=SEED, record_heads=True)
    noise = _replayed_noise(SEED, K, P) if process.stochastic else None
    ref = paper_scheme(
        x0.numpy(),
        D0.numpy(),
        dt=DT,
        n_steps=K,
        sign=int(model.sign),
        drift=drift,
        g=g,
        noise=noise,
        projected=(integrator == "euler"),
    )
    _compare(ds, ref)
    if weights == "ou":
        assert np.abs(ref["M"][-1]).max() > 1e-3  # the noise really entered


@pytest.mark.parametrize("backend", ["torch", "auto"])
def test_matches_numpy_with_beta_and_fixed_values(backend: str) -> None:
    # beta = 2 (placement of beta in the energy, the Ito term and the scores) and fixed V != D.
    process, drift, g = _weights("ou")
    model = af.TransformerModel(direction="descent", beta=2.0, weights=process, backend=backend)
    x0 = af.tokens.uniform(P, N, DIM, seed=3)
    D0 = af.heads.symmetric_gaussian(P, H, DIM, seed=3) * 0.5
    V = af.heads.gaussian(P, H, DIM, seed=4)
    ds = af.simulate(model, x0, D0, values=V, t1=K * DT, dt=DT, seed=SEED, record_heads=True)
    ref = paper_scheme(
        x0.numpy(),
        D0.numpy(),
        dt=DT,
        n_steps=K,
        beta=2.0,
        sign=-1,
        drift=drift,
        g=g,
        noise=_replayed_noise(SEED, K, P),
        V=V.numpy(),
    )
    _compare(ds, ref)


def test_record_every_subsamples_the_same_run() -> None:
    process, drift, g = _weights("ou")
    model = af.TransformerModel(direction="descent", weights=process, backend="torch")
    x0 = af.tokens.octahedral(P, N, DIM, seed=SEED)
    D0 = af.heads.symmetric_gaussian(P, H, DIM, seed=SEED)
    full = af.simulate(model, x0, D0, t1=K * DT, dt=DT, seed=SEED)
    sub = af.simulate(model, x0, D0, t1=K * DT, dt=DT, seed=SEED, record_every=3)
    idx = list(range(0, K + 1, 3)) + ([K] if K % 3 else [])
    assert_allclose(sub.step.values, idx)
    for k in ("positions", "energy", "martingale", "residual_exact", "residual_paper"):
        assert_allclose(sub[k].values, full[k].values[:, idx], rtol=0, atol=0, err_msg=k)
