"""Energy, dissipation and martingale observables against finite differences, Monte Carlo and the
independent NumPy reference (tests/reference/numpy_paper.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from reference.formulas import energy as ref_energy, head_energies as ref_head_energies
from reference.numpy_paper import evaluate_path, martingale_increment as ref_martingale

import attnflow as af
from attnflow.dynamics.field import evaluate_torch
from attnflow.geometry.sphere import project
from attnflow.observables.dissipation import (
    dissipation_power,
    effective_mobility,
    martingale_increment,
    metric_derivative_sq,
    mobility,
    strong_upper_gradient_sq,
)
from attnflow.observables.energy import energy_time_derivative, head_energies, interaction_energy


def _tokens(P: int, n: int, d: int = 3, seed: int = 0) -> torch.Tensor:
    return af.tokens.uniform(P, n, d, seed=seed)


def _heads(P: int, H: int, d: int = 3, *, symmetric: bool, seed: int = 1, scale: float = 0.7) -> torch.Tensor:
    z = af.heads.gaussian(P, H, d, seed=seed)
    return scale * (z + z.transpose(-1, -2)) / 2 if symmetric else scale * z


def _velocity(x, D, beta, V=None):
    model = af.TransformerModel(direction="descent", beta=beta, backend="torch")
    return evaluate_torch(model, x, D, V, 0.0, ledger=False).velocity


# ------------------------------------------------------------------------------------------------
# energies
# ------------------------------------------------------------------------------------------------
def test_energy_matches_direct_sum_and_per_head_energies_sum() -> None:
    x, D, beta = _tokens(2, 7), _heads(2, 4, symmetric=False), 1.6
    H = 4
    assert_allclose(interaction_energy(x, D, beta).numpy(), ref_energy(x, D, beta).numpy(), rtol=1e-13)
    Eh = head_energies(x, D, beta)
    assert Eh.shape == (2, H)
    # companion paper: E_h = 1/(2 beta n^2) sum_ij U^h_ij, and sum_h E_h = H * E (eq. (20) has 1/H).
    assert_allclose(Eh.numpy(), ref_head_energies(x, D, beta).numpy(), rtol=1e-13)
    assert_allclose(Eh.sum(-1).numpy(), (H * interaction_energy(x, D, beta)).numpy(), rtol=1e-13)
    for h in range(H):  # one head alone: E_h is that head's eq. (20) energy
        assert_allclose(Eh[:, h].numpy(), interaction_energy(x, D[:, h : h + 1], beta).numpy(), rtol=1e-13)


@pytest.mark.parametrize("symmetric", [True, False])
def test_observables_match_numpy_reference(symmetric: bool) -> None:
    P, n, H, beta = 2, 9, 3, 1.3
    x, D = _tokens(P, n), _heads(P, H, symmetric=symmetric)
    ou = af.OrnsteinUhlenbeck(sigma2=0.8)
    drift, ito = energy_time_derivative(x, D, 0.0, ou, beta)
    for p in range(P):
        ref = evaluate_path(
            x[p].numpy(), D[p].numpy(), None, beta=beta, f=ou.drift(D, 0.0)[p].numpy(), g=math.sqrt(1.6)
        )
        # Same float64 sums in a different order: agreement to a few ulps of the largest term.
        assert_allclose(interaction_energy(x, D, beta)[p].item(), ref["E"], rtol=1e-12)
        assert_allclose(strong_upper_gradient_sq(x, D, beta)[p].item(), ref["G2"], rtol=1e-12)
        assert_allclose(dissipation_power(x, D, beta)[p].item(), ref["Ghat2"], rtol=1e-12)
        assert_allclose(mobility(x, D, beta)[p].numpy(), ref["m"], rtol=1e-12)
        assert_allclose(effective_mobility(x, D, beta)[p].numpy(), ref["b"], rtol=1e-12)
        assert_allclose(drift[p].item(), ref["dtE_drift"], rtol=1e-11)
        assert_allclose(ito[p].item(), ref["dtE_ito"], rtol=1e-12)


# ------------------------------------------------------------------------------------------------
# the drift part of d_t E against a difference in D at frozen tokens
# ------------------------------------------------------------------------------------------------
_A = torch.tensor([[0.3, -1.1, 0.4], [0.7, 0.2, -0.5], [-0.2, 0.9, 0.1]], dtype=torch.float64)
PROCESSES = {
    "ou": af.OrnsteinUhlenbeck(sigma2=1.0),
    "oscillating": af.Oscillating(phases="per_head"),
    "custom_nonsym": af.CustomProcess(f=lambda D, t: _A * math.cos(t) - 0.3 * D.transpose(-1, -2)),
}


@pytest.mark.parametrize("name", list(PROCESSES))
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("beta", [1.0, 1.7])
def test_drift_part_matches_central_difference(name: str, symmetric: bool, beta: float) -> None:
    P, n, H, t = 2, 8, 3, 0.7
    x, D = _tokens(P, n, seed=3), _heads(P, H, symmetric=symmetric, seed=4)
    proc = PROCESSES[name]
    drift, _ = energy_time_derivative(x, D, t, proc, beta)
    f = proc.drift(D, t)
    eps = 1e-5
    fd = (interaction_energy(x, D + eps * f, beta) - interaction_energy(x, D - eps * f, beta)) / (2 * eps)
    # Central difference: truncation O(eps^2 |E'''|) ~ 1e-10, roundoff ~ 1e-16 |E| / eps ~ 1e-11.
    assert_allclose(drift.numpy(), fd.numpy(), rtol=1e-7, atol=1e-9)


# ------------------------------------------------------------------------------------------------
# the exact dissipation power against a difference of E along the flow at frozen weights
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("H", [1, 3, 5])
@pytest.mark.parametrize("with_values", [False, True])
def test_dissipation_power_matches_central_difference_along_flow(
    symmetric: bool, H: int, with_values: bool
) -> None:
    P, n, beta = 2, 10, 1.4
    x, D = _tokens(P, n, seed=5), _heads(P, H, symmetric=symmetric, seed=6)
    V = _heads(P, H, symmetric=False, seed=7) if with_values else None
    v = _velocity(x, D, beta, V)
    eps = 1e-5
    # d/de E(Pi(x + e v)) at 0 = sum_i <grad_i E, v_i> = Ghat^2 (Pi' = P_perp, v tangent).
    fd = (
        interaction_energy(project(x + eps * v), D, beta) - interaction_energy(project(x - eps * v), D, beta)
    ) / (2 * eps)
    assert_allclose(dissipation_power(x, D, beta, values=V).numpy(), fd.numpy(), rtol=1e-7, atol=1e-10)


def test_nonsymmetric_gradient_needs_the_transpose_term() -> None:
    # The symmetric-D shortcut Ghat^2 = (1/n) sum <v_i, (1/H) sum_h m_h V^h_i> (NOTES §3) fails for
    # non-symmetric D; the exact power (with D^T z) matches the finite difference above.
    P, n, H, beta = 1, 10, 1, 1.0
    x, D = _tokens(P, n, seed=8), _heads(P, H, symmetric=False, seed=9, scale=1.0)
    v = _velocity(x, D, beta)
    shortcut = (mobility(x, D, beta)[:, 0] * v.square().sum(-1)).mean(-1)
    exact = dissipation_power(x, D, beta)
    assert (exact - shortcut).abs().item() > 1e-2 * exact.abs().item()


# ------------------------------------------------------------------------------------------------
# G^2 versus Ghat^2
# ------------------------------------------------------------------------------------------------
def test_paper_gradient_equals_exact_power_for_one_head_and_identical_heads() -> None:
    P, n, beta = 3, 12, 1.2
    x = _tokens(P, n, seed=10)
    one = _heads(P, 1, symmetric=True, seed=11, scale=1.0)
    assert_allclose(
        strong_upper_gradient_sq(x, one, beta).numpy(), dissipation_power(x, one, beta).numpy(), rtol=1e-12
    )
    same = one.expand(P, 4, 3, 3).contiguous()
    assert_allclose(
        strong_upper_gradient_sq(x, same, beta).numpy(), dissipation_power(x, same, beta).numpy(), rtol=1e-12
    )
    # ... and identical heads leave the observables of one head unchanged.
    assert_allclose(
        dissipation_power(x, same, beta).numpy(), dissipation_power(x, one, beta).numpy(), rtol=1e-12
    )


@pytest.mark.parametrize("H,symmetric", [(4, True), (10, True), (1, False), (3, False)])
def test_paper_gradient_differs_from_exact_power_for_distinct_heads(H: int, symmetric: bool) -> None:
    P, n, beta = 3, 12, 1.0
    x, D = _tokens(P, n, seed=12), _heads(P, H, symmetric=symmetric, seed=13, scale=1.0)
    G2, Gh = strong_upper_gradient_sq(x, D, beta), dissipation_power(x, D, beta)
    # Distinct heads: the harmonic mean of the mobilities is not the head-weighted mean that the
    # chain rule produces; the relative gap here is tens of percent (far above roundoff).
    assert ((G2 - Gh).abs() > 1e-2 * Gh.abs()).all()


def test_metric_derivative_of_the_flow_is_the_paper_gradient() -> None:
    P, n, H, beta = 2, 9, 3, 1.0
    x, D = _tokens(P, n, seed=14), _heads(P, H, symmetric=True, seed=15)
    v = _velocity(x, D, beta)
    # |mu'|^2 with x' = s v is (1/n) sum b |v|^2 = G^2 (Lemma 4.12) whatever the sign s.
    assert_allclose(
        metric_derivative_sq(x, D, -v, beta).numpy(), strong_upper_gradient_sq(x, D, beta).numpy(), rtol=1e-12
    )
    b = effective_mobility(x, D, beta)
    m = mobility(x, D, beta)
    assert (b <= m.mean(1) + 1e-12).all() and (b >= m.amin(1) - 1e-12).all()  # harmonic <= arithmetic mean


# ------------------------------------------------------------------------------------------------
# Ito part against Monte Carlo, and the martingale increment
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("noise", ["symmetric", "full"])
def test_ito_part_matches_monte_carlo(noise: str) -> None:
    n, H, beta, sigma2 = 6, 2, 1.3, 0.5  # g = sqrt(2 sigma^2) = 1
    x, D = _tokens(1, n, seed=16), _heads(1, H, symmetric=True, seed=17)
    proc = af.OrnsteinUhlenbeck(sigma2=sigma2, noise=noise)
    _, ito = energy_time_derivative(x, D, 0.0, proc, beta)
    N, h = 40_000, 1e-4
    gen = torch.Generator().manual_seed(1234)
    z = torch.randn(N, H, 3, 3, generator=gen, dtype=torch.float64)
    xi = 0.5 * (z + z.transpose(-1, -2)) if noise == "symmetric" else z
    dS = math.sqrt(2 * sigma2) * math.sqrt(h) * xi
    xN = x.expand(N, n, 3)
    E0 = interaction_energy(x, D, beta)
    # Antithetic pairs: unbiased for E[E(D + dS)] - E(D) and free of the (mean-zero) linear term.
    Y = (interaction_energy(xN, D + dS, beta) + interaction_energy(xN, D - dS, beta) - 2 * E0) / (2 * h)
    mean, se = Y.mean().item(), Y.std().item() / math.sqrt(N)
    # Bias of the estimator is O(h) relative (fourth-order term) ~ 1e-4, far below the 4 s.e. band.
    assert se < 0.02 * ito.item()
    assert abs(mean - ito.item()) < 4 * se


def test_martingale_increment_matches_reference_and_is_linear() -> None:
    P, n, H, beta = 2, 8, 3, 1.1
    x, D = _tokens(P, n, seed=18), _heads(P, H, symmetric=True, seed=19)
    z = af.heads.gaussian(P, H, 3, seed=20)
    dS = 0.05 * (z + z.transpose(-1, -2)) / 2
    dM = martingale_increment(x, D, dS, beta)
    for p in range(P):
        assert_allclose(
            dM[p].item(), ref_martingale(x[p].numpy(), D[p].numpy(), dS[p].numpy(), beta=beta), rtol=1e-12
        )
    assert_allclose(martingale_increment(x, D, -2 * dS, beta).numpy(), (-2 * dM).numpy(), rtol=1e-13)
    # First-order term of E(D + dS) - E(D).
    dE = interaction_energy(x, D + 1e-4 * dS, beta) - interaction_energy(x, D, beta)
    assert_allclose((dE / 1e-4).numpy(), dM.numpy(), rtol=1e-3)


# ------------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------------
def test_bad_inputs_raise() -> None:
    x, D = _tokens(2, 5), _heads(2, 2, symmetric=True)
    with pytest.raises(ValueError, match=r"must lie on S\^\{d-1\}"):
        interaction_energy(2 * x, D)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        interaction_energy(x.numpy(), D)
    with pytest.raises(ValueError, match=r"x must have shape \(P, n, d\)"):
        interaction_energy(x[0], D)
    with pytest.raises(ValueError, match=r"D must have shape \(P, H, d, d\)"):
        interaction_energy(x, D[:, :, :2, :2])
    with pytest.raises(ValueError, match="D must be finite"):
        interaction_energy(x, D * float("nan"))
    with pytest.raises(ValueError, match="beta must be a finite number > 0"):
        head_energies(x, D, beta=0.0)
    with pytest.raises(TypeError, match="process must be a WeightProcess"):
        energy_time_derivative(x, D, 0.0, "ou")
    with pytest.raises(ValueError, match="t must be a finite number"):
        energy_time_derivative(x, D, float("inf"), af.Constant())
    with pytest.raises(ValueError, match="velocity must be a tensor of the tokens' shape"):
        metric_derivative_sq(x, D, x[:, :3])
    with pytest.raises(ValueError, match="noise must have the heads' shape"):
        martingale_increment(x, D, D[:, :1])
    with pytest.raises(ValueError, match="values have 1 heads but D has 2"):
        dissipation_power(x, D, values=D[:, :1])
    # Unbatched heads (H, d, d) are shared by all paths.
    assert_allclose(
        interaction_energy(x, D[0]).numpy(), interaction_energy(x, D[0].expand(2, 2, 3, 3)).numpy()
    )
    assert np.all(np.isfinite(interaction_energy(x, D).numpy()))
