"""Ledger cases beyond the sphere with continuous weights: flat geometry (non-unit tokens) and
layer jumps of piecewise-constant weights."""

import numpy as np
import pytest
import torch
from reference.formulas import energy

import attnflow as af
from attnflow.dynamics.field import evaluate_torch, model_ledger_rates


@pytest.mark.parametrize("noise", ["symmetric", "full"])
@pytest.mark.parametrize("geometry", ["flat", "sphere"])
def test_ito_rate_equals_hessian_contraction(noise, geometry):
    """Ito part = (1/2) g^2 sum Cov(xi_ab, xi_cd) d^2E/dD_ab dD_cd, with the Hessian from autograd."""
    torch.manual_seed(0)
    n, H, d, beta, sigma2 = 7, 2, 3, 1.3, 0.7
    x = torch.randn(n, d, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True) if geometry == "sphere" else 0.8 * x  # |x_i| != 1 when flat
    D = 0.3 * torch.randn(H, d, d, dtype=torch.float64)
    proc = af.OrnsteinUhlenbeck(sigma2=sigma2, noise=noise)
    model = af.TransformerModel(
        direction="ascent", beta=beta, geometry=geometry, weights=proc, backend="torch"
    )
    fe = evaluate_torch(model, x[None], D[None], None, 0.0, ledger=True)
    g = proc.diffusion(D, 0.0)
    got = model_ledger_rates(model, fe, D[None], 0.0, proc.drift(D[None], 0.0), g)[1].item()

    hess = torch.autograd.functional.hessian(lambda DD: energy(x, DD, beta), D)  # (H,d,d,H,d,d)
    eye = torch.eye(d, dtype=torch.float64)
    if noise == "symmetric":  # Cov((Z+Z^T)/2) = (d_ac d_bd + d_ad d_bc)/2
        cov = 0.5 * (torch.einsum("ac,bd->abcd", eye, eye) + torch.einsum("ad,bc->abcd", eye, eye))
    else:
        cov = torch.einsum("ac,bd->abcd", eye, eye)
    want = sum(0.5 * g**2 * torch.einsum("abcd,abcd->", hess[h, :, :, h], cov).item() for h in range(H))
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_piecewise_constant_jumps_close_the_ledger():
    """With layer jumps recorded in `jumps`, the exact residual is a discretisation error: O(dt)."""
    P, H, d, n = 2, 2, 3, 16
    layers = af.heads.symmetric_gaussian(3, H, d, seed=3)  # three layers of H heads
    model = af.TransformerModel(
        direction="ascent", weights=af.PiecewiseConstant(layers=layers, layer_time=0.5), backend="torch"
    )
    x0 = af.tokens.uniform(P, n, d, seed=0)
    res, jumps = [], []
    for dt in (0.01, 0.005, 0.0025):
        ds = af.simulate(model, x0, layers[0], t1=1.5, dt=dt, record_every=10_000)
        res.append(np.abs(ds.residual_exact.values[:, -1]).max())
        jumps.append(ds.jumps.values[:, -1])
    # the two boundaries move E by O(1): the jumps must be recorded and nearly dt-independent
    assert np.all(np.abs(jumps[-1]) > 0.1)
    np.testing.assert_allclose(jumps[0], jumps[-1], rtol=0.02)
    # first order: each halving of dt halves the residual (band 1.7-2.3 around the ratio 2)
    ratios = np.array(res[:-1]) / np.array(res[1:])
    assert np.all((ratios > 1.7) & (ratios < 2.3)), ratios
