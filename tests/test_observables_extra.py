"""Tests of the entropy, clustering and transport observables against closed forms and independent
references (exact circle OT by cyclic shifts and by ``scipy.optimize.linear_sum_assignment``, the
equiangular reduced model, an explicit Euler clustering flow written here)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import xarray as xr
from numpy.testing import assert_allclose, assert_array_equal
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import squareform

from attnflow.observables import (
    attention_entropy,
    attention_entropy_rate,
    cluster_count,
    cluster_count_sensitivity,
    distance_to_nearest_dirac,
    distance_to_uniform,
    gram_effective_rank,
    mean_attention_entropy,
    mean_pairwise_inner_product,
    mean_token_norm,
    min_pairwise_inner_product,
    nearest_dirac_location,
    pairwise_geodesic_distance,
    sliced_wasserstein_sphere,
    wasserstein2,
)

F64 = torch.float64


def _normalise(y: torch.Tensor) -> torch.Tensor:
    return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)


def _random_cloud(*shape: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return _normalise(torch.randn(*shape, generator=generator, dtype=F64))


def _circle(angles: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.stack([np.cos(angles), np.sin(angles)], axis=-1), dtype=F64)


def _equiangular(n: int, rho: float) -> torch.Tensor:
    """n unit vectors in R^(n+1) with every pairwise inner product equal to rho (>= 0)."""
    x = torch.zeros(n, n + 1, dtype=F64)
    x[:, 0] = math.sqrt(rho)
    x[:, 1:] = math.sqrt(1.0 - rho) * torch.eye(n, dtype=F64)
    return x


def _clusters(k: int, per: int, d: int, spread: float, paths: int, seed: int) -> torch.Tensor:
    """k tight clusters around orthonormal centres (vMF-like: centre + Gaussian noise, normalised)."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.eye(d, dtype=F64)[:k]
    noise = spread * torch.randn(paths, k, per, d, generator=generator, dtype=F64)
    return _normalise(centres[None, :, None, :] + noise).reshape(paths, k * per, d)


# ----------------------------------------------------------------------------------------- entropy


def test_entropy_is_log_n_for_identical_scores():
    x = _random_cloud(2, 7, 3, seed=1)
    zero_heads = torch.zeros(2, 3, 3, 3, dtype=F64)
    assert_allclose(attention_entropy(x, zero_heads, beta=5.0).numpy(), math.log(7), rtol=1e-14)
    collapsed = _normalise(torch.ones(7, 3, dtype=F64))  # identical tokens: identical scores, any D
    heads = torch.randn(4, 3, 3, dtype=F64, generator=torch.Generator().manual_seed(2))
    assert_allclose(attention_entropy(collapsed, heads, beta=3.0).numpy(), math.log(7), rtol=1e-13)


def test_entropy_vanishes_for_one_hot_rows_without_nan():
    x = torch.eye(4, dtype=F64)  # self score beta, every other score 0
    identity = torch.eye(4, dtype=F64).unsqueeze(0)
    for beta in (1e2, 1e3, 1e6):
        entropy = attention_entropy(x, identity, beta=beta)
        assert torch.isfinite(entropy).all()
        # S = log(1 + 3 e^-beta) + 3 beta e^-beta / (1 + 3 e^-beta) <= 4 beta e^-beta < 1e-39 here
        assert_allclose(entropy.numpy(), 0.0, atol=1e-39)
    assert not torch.signbit(attention_entropy(x, identity, beta=1e6)).any()


def test_entropy_matches_closed_form_for_two_score_levels():
    beta, n = 2.5, 6
    x = torch.eye(n, dtype=F64)
    weights = np.array([math.exp(beta)] + [1.0] * (n - 1))
    p = weights / weights.sum()
    expected = -(p * np.log(p)).sum()
    entropy = attention_entropy(x, torch.eye(n, dtype=F64).unsqueeze(0), beta=beta)
    assert_allclose(entropy.numpy(), expected, rtol=1e-14)
    assert_allclose(
        mean_attention_entropy(x, torch.eye(n, dtype=F64).unsqueeze(0), beta=beta).numpy(),
        [expected],
        rtol=1e-14,
    )


def test_causal_entropy_counts_only_visible_columns():
    x = _random_cloud(5, 3, seed=3)
    entropy = attention_entropy(x, torch.zeros(1, 3, 3, dtype=F64), causal=True)
    assert_allclose(entropy[0, 0].numpy(), np.log(np.arange(1, 6)), rtol=1e-14, atol=0)
    heads = torch.randn(2, 3, 3, dtype=F64, generator=torch.Generator().manual_seed(4))
    causal = attention_entropy(x, heads, beta=4.0, causal=True)
    assert torch.isfinite(causal).all()
    assert (causal[0] <= torch.log(torch.arange(1, 6, dtype=F64)) + 1e-14).all()


def _softmax_flow(x0: torch.Tensor, beta: float, dt: float, steps: int) -> torch.Tensor:
    """Explicit projected Euler for the single-head ascent flow with D = V = I (written here on purpose,
    independently of attnflow.dynamics): x_i <- Pi(x_i + dt P_perp(x_i) sum_j A_ij x_j)."""
    states = [x0]
    x = x0
    for _ in range(steps):
        attention = torch.softmax(beta * x @ x.T, dim=-1)
        w = attention @ x
        v = w - (w * x).sum(-1, keepdim=True) * x
        x = _normalise(x + dt * v)
        states.append(x)
    return torch.stack(states)


def test_entropy_rises_along_a_clustering_flow():
    n, beta, dt, steps = 8, 4.0, 0.05, 200
    generator = torch.Generator().manual_seed(5)
    x0 = _normalise(_equiangular(n, 0.05) + 0.02 * torch.randn(n, n + 1, generator=generator, dtype=F64))
    trajectory = _softmax_flow(x0, beta, dt, steps)
    identity = torch.eye(n + 1, dtype=F64).unsqueeze(0)
    entropy = torch.stack([mean_attention_entropy(state, identity, beta)[0] for state in trajectory])
    increments = entropy.diff()
    assert (increments > 0).all(), f"entropy decreased at steps {torch.nonzero(increments <= 0).ravel()}"
    assert entropy[-1] > entropy[0] + 0.5
    assert_allclose(entropy[-1].item(), math.log(n), rtol=1e-2)  # near-collapse: near-uniform rows
    times = dt * torch.arange(steps + 1, dtype=F64)
    rate = attention_entropy_rate(trajectory, identity, times, beta)
    assert rate.shape == (steps + 1, 1)  # a (T, n, d) trajectory is one path
    assert (rate > 0).all()


def _equiangular_entropy(rho: float, n: int, beta: float) -> tuple[float, float]:
    """Row entropy S(rho) of the equiangular configuration (D = I) and dS/drho, in closed form."""
    a, b = beta, beta * rho
    z = math.exp(a) + (n - 1) * math.exp(b)
    numerator = a * math.exp(a) + (n - 1) * b * math.exp(b)
    dz = (n - 1) * beta * math.exp(b)
    dnumerator = (n - 1) * beta * math.exp(b) * (1.0 + b)
    entropy = math.log(z) - numerator / z
    return entropy, dz / z - (dnumerator * z - numerator * dz) / z**2


def test_entropy_rate_is_second_order_on_non_uniform_times():
    n, beta = 5, 3.0
    identity = torch.eye(n + 1, dtype=F64).unsqueeze(0)

    def rho_of(t: float) -> float:
        return 0.1 + 0.7 * math.sin(t)  # equiangular path with rho' = 0.7 cos t

    errors = []
    for steps in (20, 40, 80):
        s = np.linspace(0.0, 1.0, steps + 1)
        times = s + 0.3 * s**2  # non-uniform grid
        trajectory = torch.stack([_equiangular(n, rho_of(t)) for t in times]).unsqueeze(1)
        rate = attention_entropy_rate(trajectory, identity[None], torch.as_tensor(times), beta)[:, 0].numpy()
        exact = np.array([_equiangular_entropy(rho_of(t), n, beta)[1] * 0.7 * math.cos(t) for t in times])
        assert_allclose(
            mean_attention_entropy(trajectory[3], identity, beta).item(),
            _equiangular_entropy(rho_of(times[3]), n, beta)[0],
            rtol=1e-13,
        )
        errors.append(np.abs(rate - exact).max())
    slopes = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    # second-order differences (interior and edge_order=2 ends): each halving divides the error by ~4
    assert np.all((slopes > 1.8) & (slopes < 2.3)), slopes


def test_entropy_rate_per_token_and_time_dependent_heads():
    x_traj = _random_cloud(4, 2, 5, 3, seed=6)
    heads = torch.randn(4, 2, 3, 3, 3, dtype=F64, generator=torch.Generator().manual_seed(7))
    times = torch.tensor([0.0, 0.1, 0.3, 0.6], dtype=F64)
    per_token = attention_entropy_rate(x_traj, heads, times, 2.0, per_token=True)
    assert per_token.shape == (4, 2, 3, 5)
    mean_rate = attention_entropy_rate(x_traj, heads, times, 2.0)
    assert_allclose(per_token.mean(dim=(-1, -2)).numpy(), mean_rate.numpy(), rtol=1e-12)
    two = attention_entropy_rate(x_traj[:2], heads[:2], times[:2], 2.0)  # T = 2: difference quotient
    first = mean_attention_entropy(x_traj[0], heads[0], 2.0)
    second = mean_attention_entropy(x_traj[1], heads[1], 2.0)
    assert_allclose(two.numpy(), torch.stack([(second - first) / 0.1] * 2).numpy(), rtol=1e-12)


# -------------------------------------------------------------------------------------- clustering


def test_pairwise_measures_match_brute_force():
    x = _random_cloud(3, 9, 4, seed=8)
    gram = (x @ x.transpose(-1, -2)).numpy()
    off = ~np.eye(9, dtype=bool)
    assert_allclose(mean_pairwise_inner_product(x).numpy(), gram[:, off].mean(axis=1), rtol=1e-12)
    assert_allclose(min_pairwise_inner_product(x).numpy(), gram[:, off].min(axis=1), rtol=1e-14)
    norm = mean_token_norm(x).numpy()
    assert_allclose(norm, np.linalg.norm(x.numpy().mean(axis=1), axis=-1), rtol=1e-14)
    rho = mean_pairwise_inner_product(x).numpy()
    assert_allclose(norm**2, 1 / 9 + (8 / 9) * rho, rtol=1e-12)
    xn = x.numpy()
    minus = np.linalg.norm(xn[:, :, None, :] - xn[:, None, :, :], axis=-1)
    plus = np.linalg.norm(xn[:, :, None, :] + xn[:, None, :, :], axis=-1)
    theta = pairwise_geodesic_distance(x).numpy()
    assert_allclose(theta, 2 * np.arctan2(minus, plus), rtol=0, atol=1e-15)
    # arccos of the clipped Gram matrix agrees up to its own error floor sqrt(2 eps) ~ 1.5e-8 near 0
    assert_allclose(theta, np.arccos(np.clip(gram, -1.0, 1.0)), rtol=0, atol=3e-8)
    assert np.all(np.diagonal(theta, axis1=1, axis2=2) == 0.0)


def test_pairwise_measures_on_extreme_configurations():
    same = _normalise(torch.ones(5, 3, dtype=F64))
    assert_allclose(mean_pairwise_inner_product(same).numpy(), [1.0], rtol=1e-14)
    assert_allclose(mean_token_norm(same).numpy(), [1.0], rtol=1e-14)
    assert_allclose(min_pairwise_inner_product(same).numpy(), [1.0], rtol=1e-14)
    frame = torch.eye(3, dtype=F64)
    assert_allclose(mean_pairwise_inner_product(frame).numpy(), [0.0], atol=1e-15)
    antipodal = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=F64)
    assert_allclose(mean_token_norm(antipodal).numpy(), [0.0], atol=0)
    assert_allclose(min_pairwise_inner_product(antipodal).numpy(), [-1.0], rtol=0)
    assert torch.isfinite(pairwise_geodesic_distance(antipodal)).all()


def test_effective_rank_of_line_and_frame():
    direction = _normalise(torch.tensor([1.0, 2.0, -2.0, 0.5], dtype=F64))
    line = torch.stack([direction, -direction, direction])  # one line through the origin
    assert_allclose(gram_effective_rank(line).numpy(), [1.0], rtol=1e-12)
    rotation, _ = torch.linalg.qr(torch.randn(6, 6, dtype=F64, generator=torch.Generator().manual_seed(9)))
    assert_allclose(gram_effective_rank(rotation).numpy(), [6.0], rtol=1e-12)
    generic = _random_cloud(2, 20, 3, seed=10)
    assert ((gram_effective_rank(generic) > 1.0) & (gram_effective_rank(generic) <= 3.0)).all()


def test_cluster_count_on_separated_clusters_over_a_wide_threshold_range():
    k = 4
    x = _clusters(k, per=15, d=5, spread=0.02, paths=3, seed=11)
    # intra-cluster links are ~0.03 rad, centres pi/2 apart: any cut in [0.15, 1.2] must give k
    wide = np.linspace(0.15, 1.2, 30)
    counts = cluster_count_sensitivity(x, wide)
    assert isinstance(counts, xr.DataArray)
    assert counts.dims == ("path", "threshold")
    assert counts.shape == (3, 30)
    assert_allclose(counts["threshold"].values, wide, rtol=0)
    assert (counts.values == k).all()
    assert_array_equal(cluster_count(x, 0.5).numpy(), [k] * 3)
    assert cluster_count(x, 0.5).dtype == torch.int64
    # the extremes: every token alone, and everything in one cluster
    assert_array_equal(cluster_count(x, 1e-6).numpy(), [60] * 3)
    assert_array_equal(cluster_count(x, math.pi).numpy(), [1] * 3)
    # the count can only fall as the threshold grows
    sweep = cluster_count_sensitivity(x, np.geomspace(1e-4, math.pi, 40)).values
    assert (np.diff(sweep, axis=1) <= 0).all()


def test_cluster_count_matches_connected_components_reference():
    x = _random_cloud(2, 25, 3, seed=12)
    threshold = 0.6
    for path in range(2):
        distance = np.arccos(np.clip((x[path] @ x[path].T).numpy(), -1, 1))
        adjacency = distance <= threshold
        label = -np.ones(25, dtype=int)  # plain breadth-first search, independent of scipy
        current = 0
        for start in range(25):
            if label[start] >= 0:
                continue
            frontier = [start]
            label[start] = current
            while frontier:
                i = frontier.pop()
                for j in np.nonzero(adjacency[i] & (label < 0))[0]:
                    label[j] = current
                    frontier.append(j)
            current += 1
        assert cluster_count(x, threshold)[path].item() == current
    # and what scipy's own cut of the single-linkage tree gives, for many thresholds
    grid = np.linspace(0.05, 2.0, 25)
    sweep = cluster_count_sensitivity(x, grid).values
    for path in range(2):
        distance = np.arccos(np.clip((x[path] @ x[path].T).numpy(), -1, 1))
        tree = linkage(squareform(distance, checks=False), method="single")
        expected = [fcluster(tree, t, criterion="distance").max() for t in grid]
        assert_array_equal(sweep[path], expected)
    single = torch.tensor([[0.0, 1.0]], dtype=F64)
    assert_array_equal(cluster_count(single, 0.1).numpy(), [1])
    assert_array_equal(cluster_count_sensitivity(single, [0.1, 1.0]).values, [[1, 1]])


# ---------------------------------------------------------------------------------------- transport


def test_wasserstein2_zero_symmetric_and_unequal_sizes():
    x = _random_cloud(2, 12, 3, seed=13)
    y = _random_cloud(2, 7, 3, seed=14)
    for cost in ("geodesic", "chordal"):
        assert_allclose(wasserstein2(x, x, cost=cost).numpy(), 0.0, atol=1e-15)
        assert_allclose(
            wasserstein2(x, y, cost=cost).numpy(), wasserstein2(y, x, cost=cost).numpy(), rtol=1e-12
        )
    # a single target point: the only coupling sends everything there
    z = _random_cloud(1, 3, seed=15)
    expected = np.sqrt((np.arccos(np.clip((x @ z.T).numpy()[..., 0], -1, 1)) ** 2).mean(axis=1))
    assert_allclose(wasserstein2(x, z).numpy(), expected, rtol=1e-12)
    # a single cloud broadcasts against every path
    assert wasserstein2(x, z.expand(5, 3)).shape == (2,)


def test_wasserstein2_resolves_small_perturbations():
    x = _random_cloud(30, 3, seed=16)
    eta = 1e-9
    shifted = _normalise(x + eta * _random_cloud(30, 3, seed=17))
    per_token = torch.linalg.vector_norm(shifted - x, dim=-1)
    # for eta this small the identity coupling is optimal, so W2 is the rms displacement
    assert_allclose(
        wasserstein2(x, shifted, cost="chordal").item(), per_token.pow(2).mean().sqrt().item(), rtol=1e-6
    )
    assert_allclose(wasserstein2(x, shifted).item(), per_token.pow(2).mean().sqrt().item(), rtol=1e-6)


def test_chordal_never_exceeds_geodesic():
    x = _random_cloud(4, 10, 3, seed=18)
    y = _random_cloud(4, 13, 3, seed=19)
    chordal = wasserstein2(x, y, cost="chordal")
    geodesic = wasserstein2(x, y, cost="geodesic")
    assert (chordal <= geodesic).all()
    assert (chordal > 0.5 * geodesic).all()  # 2 sin(t/2) >= (2/pi) t on [0, pi]


def _circle_w2_by_shifts(alpha: np.ndarray, gamma: np.ndarray) -> float:
    """Exact W2 on S^1 between two uniform n-point measures: an optimal matching of the sorted angles
    is a cyclic shift (monotone rearrangement on the circle), so minimise over the n shifts."""
    a, g = np.sort(alpha % (2 * np.pi)), np.sort(gamma % (2 * np.pi))
    best = math.inf
    for shift in range(len(a)):
        gap = np.abs(a - np.roll(g, shift))
        arc = np.minimum(gap, 2 * np.pi - gap)
        best = min(best, float((arc**2).mean()))
    return math.sqrt(best)


def _circle_w2_by_assignment(alpha: np.ndarray, gamma: np.ndarray) -> float:
    gap = np.abs(alpha[:, None] - gamma[None, :]) % (2 * np.pi)
    cost = np.minimum(gap, 2 * np.pi - gap) ** 2
    rows, cols = linear_sum_assignment(cost)
    return math.sqrt(cost[rows, cols].mean())


def test_spherical_sliced_wasserstein_equals_exact_circle_w2_for_d2():
    rng = np.random.default_rng(20)
    for n in (5, 16, 40):
        alpha = rng.uniform(0, 2 * np.pi, n)
        gamma = np.concatenate([rng.vonmises(1.0, 2.0, n // 2), rng.uniform(0, 2 * np.pi, n - n // 2)])
        exact = _circle_w2_by_shifts(alpha, gamma)
        assert_allclose(exact, _circle_w2_by_assignment(alpha, gamma), rtol=1e-12)
        x, y = _circle(alpha), _circle(gamma)
        assert_allclose(wasserstein2(x, y).item(), exact, rtol=1e-10)
        # POT's value is a distance (not squared) on circles of circumference 1; ours is 2 pi times it.
        # Every projection is a circle isometry for d = 2; the binary search stops at eps = 1e-6.
        assert_allclose(sliced_wasserstein_sphere(x, y, n_projections=7, seed=3).item(), exact, rtol=2e-5)


def test_sliced_wasserstein_is_seeded_and_vanishes_on_identical_clouds():
    x = _random_cloud(2, 20, 4, seed=21)
    y = _random_cloud(2, 15, 4, seed=22)
    first = sliced_wasserstein_sphere(x, y, n_projections=30, seed=4)
    assert_array_equal(first.numpy(), sliced_wasserstein_sphere(x, y, n_projections=30, seed=4).numpy())
    assert not torch.equal(first, sliced_wasserstein_sphere(x, y, n_projections=30, seed=5))
    assert_allclose(sliced_wasserstein_sphere(x, x, seed=1).numpy(), 0.0, atol=1e-6)
    state = torch.get_rng_state()
    sliced_wasserstein_sphere(x, y, seed=6)
    assert torch.equal(state, torch.get_rng_state())  # the global torch generator is left alone


def test_distance_to_uniform_closed_form_on_circle():
    for n in (4, 10, 50):
        equally_spaced = _circle(2 * np.pi * np.arange(n) / n + 0.3)
        # each point carries the arc of length 2 pi / n around it: W2^2 = (pi / n)^2 / 3
        expected = math.pi / (n * math.sqrt(3))
        # POT's closed form subtracts O(1) terms to leave O(1/n^2): relative round-off ~ 1e-16 n^2
        assert_allclose(distance_to_uniform(equally_spaced, 5, 0).item(), expected, rtol=1e-10)
    spread = _random_cloud(300, 3, seed=23)
    clustered = _clusters(1, per=300, d=3, spread=0.05, paths=1, seed=24)
    assert distance_to_uniform(spread).item() < 0.2 * distance_to_uniform(clustered).item()


def test_nearest_dirac_chordal_closed_form_and_emd():
    x = _random_cloud(3, 11, 3, seed=25)
    mean_norm = mean_token_norm(x)
    assert_allclose(
        distance_to_nearest_dirac(x, cost="chordal").numpy(),
        torch.sqrt(2 - 2 * mean_norm).numpy(),
        rtol=1e-12,
    )
    z = nearest_dirac_location(x, cost="chordal")
    for path in range(3):
        assert_allclose(
            wasserstein2(x[path], z[path : path + 1], cost="chordal").item(),
            distance_to_nearest_dirac(x[path], cost="chordal").item(),
            rtol=1e-12,
        )


def test_nearest_dirac_geodesic_on_an_arc_is_the_angle_standard_deviation():
    rng = np.random.default_rng(26)
    angles = 1.0 + rng.uniform(-0.8, 0.8, 25)  # inside an arc shorter than pi: Karcher mean = mean angle
    x = _circle(angles)
    assert_allclose(distance_to_nearest_dirac(x).item(), angles.std(), rtol=1e-10)
    z = nearest_dirac_location(x)[0].numpy()
    assert_allclose(math.atan2(z[1], z[0]), angles.mean(), rtol=1e-10)


def test_nearest_dirac_geodesic_is_a_minimum_and_improves_on_the_mean():
    x = _clusters(2, per=10, d=3, spread=0.3, paths=2, seed=27)
    distance = distance_to_nearest_dirac(x)
    z = nearest_dirac_location(x)
    assert_allclose(torch.linalg.vector_norm(z, dim=-1).numpy(), 1.0, rtol=1e-14)
    start = _normalise(x.mean(dim=1))
    at_mean = torch.stack([wasserstein2(x[p], start[p : p + 1])[0] for p in range(2)])
    assert (distance <= at_mean).all()
    generator = torch.Generator().manual_seed(28)
    for _ in range(20):  # no nearby point does better
        nearby = _normalise(z + 1e-3 * torch.randn(z.shape, generator=generator, dtype=F64))
        probe = torch.stack([wasserstein2(x[p], nearby[p : p + 1])[0] for p in range(2)])
        assert (distance <= probe + 1e-12).all()
    assert_allclose(distance_to_nearest_dirac(_normalise(torch.ones(6, 3, dtype=F64))).numpy(), 0.0, atol=0)


# --------------------------------------------------------------------------------------- validation


def test_shape_validation():
    flat = torch.ones(4, dtype=F64)
    with pytest.raises(ValueError, match=r"x must have shape \(P, n, d\) or \(n, d\): got shape \(4,\)"):
        mean_token_norm(flat)
    with pytest.raises(ValueError, match=r"must have shape \(P, n, d\) or \(n, d\)"):
        wasserstein2(torch.ones(1, 1, 1, 2, dtype=F64), torch.ones(1, 2, dtype=F64))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        gram_effective_rank(np.eye(3).tolist())  # a list; NumPy arrays and xarray runs are taken (issue 31)
    assert gram_effective_rank(np.eye(3)).shape == (1,)
    with pytest.raises(TypeError, match="x must have a floating dtype"):
        gram_effective_rank(torch.eye(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="dimension d >= 2"):
        mean_token_norm(torch.ones(3, 1, dtype=F64))
    with pytest.raises(ValueError, match="at least 2 token"):
        mean_pairwise_inner_product(torch.eye(3, dtype=F64)[:1])
    x = torch.eye(3, dtype=F64)
    with pytest.raises(ValueError, match=r"x and y must live on the same sphere"):
        wasserstein2(x, torch.eye(2, dtype=F64))
    with pytest.raises(ValueError, match="same number of paths P, or one of them"):
        sliced_wasserstein_sphere(_random_cloud(2, 4, 3, seed=0), _random_cloud(3, 4, 3, seed=1))
    with pytest.raises(ValueError, match="same number of paths P and dimension d"):
        pairwise_geodesic_distance(x, torch.eye(2, dtype=F64))


def test_head_and_beta_validation():
    x = torch.eye(3, dtype=F64)
    with pytest.raises(ValueError, match=r"D must have shape \(P, H, d, d\) or \(H, d, d\) with d = 3"):
        attention_entropy(x, torch.zeros(1, 2, 2, dtype=F64))
    with pytest.raises(ValueError, match="D must have P = 1 paths"):
        attention_entropy(x, torch.zeros(2, 1, 3, 3, dtype=F64))
    with pytest.raises(TypeError, match="D must be a torch.Tensor"):
        attention_entropy(x, np.zeros((1, 3, 3)))
    with pytest.raises(ValueError, match="D must hold at least one head"):
        attention_entropy(x, torch.zeros(0, 3, 3, dtype=F64))
    with pytest.raises(ValueError, match="D must be finite: found 1 non-finite"):
        attention_entropy(x, torch.tensor([[[math.nan, 0, 0], [0, 0, 0], [0, 0, 0]]], dtype=F64))
    with pytest.raises(ValueError, match="beta must be finite and > 0: got 0.0"):
        attention_entropy(x, torch.zeros(1, 3, 3, dtype=F64), beta=0.0)
    with pytest.raises(TypeError, match="beta must be a real number > 0"):
        attention_entropy(x, torch.zeros(1, 3, 3, dtype=F64), beta="1")


def test_trajectory_validation():
    x_traj = _random_cloud(3, 1, 4, 3, seed=0)
    heads = torch.zeros(1, 1, 3, 3, dtype=F64)
    times = torch.tensor([0.0, 1.0, 2.0], dtype=F64)
    with pytest.raises(ValueError, match=r"x_traj must be a torch.Tensor of shape \(T, P, n, d\)"):
        attention_entropy_rate(x_traj[0, 0], heads, times)
    with pytest.raises(ValueError, match=r"D_traj must have shape \(T, P, H, d, d\) or frozen"):
        attention_entropy_rate(x_traj, torch.zeros(3, 3, dtype=F64), times)
    with pytest.raises(ValueError, match=r"times must be 1-D with one entry per recorded state \(T = 3"):
        attention_entropy_rate(x_traj, heads, times[:2])
    with pytest.raises(ValueError, match="times must be finite and strictly increasing"):
        attention_entropy_rate(x_traj, heads, torch.tensor([0.0, 1.0, 1.0], dtype=F64))
    with pytest.raises(ValueError, match="D_traj must have T = 3 time entries"):
        attention_entropy_rate(x_traj, torch.zeros(2, 1, 1, 3, 3, dtype=F64), times)


def test_off_sphere_and_non_finite_tokens_are_rejected():
    off = 1.01 * torch.eye(3, dtype=F64)
    with pytest.raises(ValueError, match=r"x must lie on S\^\{d-1\}: max \| \|x_i\| - 1 \| = 0.01"):
        mean_token_norm(off)
    with pytest.raises(ValueError, match=r"y must lie on S\^\{d-1\}"):
        wasserstein2(torch.eye(3, dtype=F64), off)
    with pytest.raises(ValueError, match=r"x must lie on S\^\{d-1\}"):
        attention_entropy(off, torch.zeros(1, 3, 3, dtype=F64))
    with pytest.raises(ValueError, match=r"x must lie on S\^\{d-1\}"):
        distance_to_uniform(off)
    with pytest.raises(ValueError, match="x must be finite: found 1 non-finite"):
        cluster_count(torch.tensor([[math.nan, 0.0], [1.0, 0.0]], dtype=F64), 0.1)


def test_option_validation():
    x = torch.eye(3, dtype=F64)
    with pytest.raises(ValueError, match=r"cost must be one of \('geodesic', 'chordal'\): got 'euclidean'"):
        wasserstein2(x, x, cost="euclidean")
    with pytest.raises(ValueError, match=r"cost must be one of"):
        distance_to_nearest_dirac(x, cost="l2")
    with pytest.raises(ValueError, match="threshold must be finite and > 0: got 0.0"):
        cluster_count(x, 0.0)
    with pytest.raises(ValueError, match="threshold must be finite and > 0: got -1.0"):
        cluster_count(x, -1.0)
    with pytest.raises(TypeError, match="threshold must be a real number > 0"):
        cluster_count(x, None)
    with pytest.raises(ValueError, match=r"thresholds must be finite and > 0 \(radians\)"):
        cluster_count_sensitivity(x, [0.1, 0.0])
    with pytest.raises(ValueError, match="thresholds must be a non-empty 1-D sequence"):
        cluster_count_sensitivity(x, [])
    with pytest.raises(ValueError, match="n_projections must be an integer >= 1: got 0"):
        sliced_wasserstein_sphere(x, x, n_projections=0)
    with pytest.raises(ValueError, match="seed must be an integer >= 0: got -1"):
        distance_to_uniform(x, seed=-1)
    with pytest.raises(ValueError, match="max_iter must be an integer >= 0: got 1.5"):
        nearest_dirac_location(x, max_iter=1.5)
    with pytest.raises(ValueError, match="tol must be finite and > 0"):
        distance_to_nearest_dirac(x, tol=0.0)
