"""The compiled kernel sums of the density solver (``attnflow.pde.quadsums``) against references."""

from __future__ import annotations

import numpy as np
import pytest

from attnflow.model.transformer import TransformerModel
from attnflow.pde import make_grid
from attnflow.pde.field import density_field
from attnflow.pde.initial import von_mises_fisher_mixture
from attnflow.pde.quadsums import quadrature_sums
from attnflow.pde.solver import DensitySolver


def _dense(x, wu, A, beta):
    """Independent reference: the full score matrix in float64, no shift (scores are small here)."""
    E = np.exp(beta * (x @ A @ x.T))
    return E @ wu, E @ (wu[:, None] * x)


@pytest.mark.parametrize("d", [2, 3])
def test_sums_equal_dense_numpy(d):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(97, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    wu = rng.normal(size=97)  # signed, as a spectrally undershooting density can be
    A = rng.normal(size=(d, d))  # general (non-symmetric) head
    M, Z, Y = quadrature_sums(x, wu, A, 1.3)
    Zr, Yr = _dense(x, wu, A, 1.3)
    # the shift is the Cauchy-Schwarz bound: no score exceeds it
    assert np.all(M >= (1.3 * x @ A @ x.T).max(axis=1) - 1e-12)
    # float64 sums of 97 terms of size <= e^{2 r} (r = beta |A| ~ 3): round-off ~1e-14 relative to the
    # largest term; 1e-12 of the sums' scale leaves a margin of 100
    scale = np.abs(wu).sum() * np.exp(1.3 * np.linalg.norm(A, 2))
    assert np.abs(np.exp(M) * Z - Zr).max() <= 1e-12 * scale
    assert np.abs(np.exp(M)[:, None] * Y - Yr).max() <= 1e-12 * scale


def test_refuses_other_dimensions():
    with pytest.raises(ValueError, match="S\\^1 or S\\^2 .*d = 2 or 3.*shape \\(4, 4\\)"):
        quadrature_sums(np.eye(4), np.ones(4), np.eye(4), 1.0)


@pytest.mark.parametrize("d,L", [(2, 12), (3, 12)])
def test_field_and_steps_match_the_numpy_form(d, L):
    g = make_grid(d, L)
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(2, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    u0 = von_mises_fisher_mixture(g, centres, 4.0)
    heads = 0.5 * rng.normal(size=(2, d, d))  # non-symmetric: both the row and the transposed sums run
    u = g.synthesis(u0)
    kw = dict(beta=1.0, attention="softmax", sign=1.0, heads_dot=0.1 * heads, kernel="quadrature")
    a = density_field(g.points, g.weights, u, heads, quadrature="numba", **kw)
    b = density_field(g.points, g.weights, u, heads, quadrature="numpy", **kw)
    # same sums in another order: float64 round-off (~1e-15) amplified by at most a few hundred terms
    for name in ("velocity", "grad_phi", "phi"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=1e-13)
    for name in ("energy", "token_rate", "heads_rate"):
        assert abs(getattr(a, name) - getattr(b, name)) <= 1e-13 * max(1.0, abs(getattr(b, name)))
    model = TransformerModel(direction="ascent", beta=1.0)
    sym = (heads + np.swapaxes(heads, 1, 2)) / 2
    runs = [DensitySolver(model, u0, sym, grid=g, dt=0.02, quadrature=q) for q in ("numba", "numpy")]
    for s in runs:
        for _ in range(3):
            s.step()
    # three RK4 steps of a smooth flow: round-off differences do not grow beyond ~1e-14
    np.testing.assert_allclose(runs[0].u, runs[1].u, rtol=0, atol=1e-12)
    assert abs(runs[0].ledger_integral - runs[1].ledger_integral) <= 1e-12


def test_unknown_backend_refused():
    g = make_grid(2, 8)
    u = np.full(g.points.shape[0], 1 / (2 * np.pi))
    with pytest.raises(ValueError, match="unknown quadrature backend 'cuda'.*numba, numpy"):
        density_field(g.points, g.weights, u, np.eye(2)[None], beta=1.0, attention="softmax", sign=1.0,
                      quadrature="cuda")  # fmt: skip
    with pytest.raises(ValueError, match="unknown quadrature backend 'fast'.*numba, numpy"):
        model = TransformerModel(direction="ascent", beta=1.0)
        DensitySolver(model, g.analysis(u), np.eye(2), grid=g, dt=0.01, quadrature="fast")
